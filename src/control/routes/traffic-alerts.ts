// Traffic alert rules API (docs/api.md "Traffic alerts", docs/traffic.md "Alerts"): rules of the active
// account on its endpoints' traffic or health, their channels (secrets sealed), a test notification, and the events.
import { Type } from '@sinclair/typebox';
import { ALERT_EVENTS_CAP, MAX_ALERT_CHANNELS, MAX_ALERT_RULES_PER_ACCOUNT } from '../../store/alerts.ts';
import type { ControlApp, ControlDeps } from '../http.ts';
import { EventView, eventView, RuleBody, RuleParams, RuleView, ruleView } from '../schemas/traffic-alerts.ts';
import { ALERT_TEST_COOLDOWN_MS, trafficAlertService, type RuleBody as RuleBodyT } from '../services/traffic-alerts.ts';
import { ErrorResponses } from '../views.ts';

export function trafficAlertRoutes(app: ControlApp, deps: ControlDeps): void {
  const alerts = trafficAlertService(deps);
  const TAGS = ['traffic-alerts'];
  const BASE = '/v1/traffic/alerts';
  const READ_NOTE = 'Needs traffic:read in the active account; another account’s rule is 404.';
  const WRITE_NOTE = 'Needs endpoints:write in the active account; a suspended account is 403 account_suspended.';

  app.post(
    BASE,
    {
      config: { permission: 'endpoints:write' },
      schema: {
        operationId: 'createTrafficAlert',
        summary: 'Create an alert rule',
        description:
          'A rule on one endpoint of the active account (endpoint_id: uuid or numeric id) or, without one, on all of them. ' +
          'The evaluator judges it every EDGE_ALERT_EVALUATION_INTERVAL_MS over the last window_seconds; status is unknown until ' +
          'the first evaluation with data, then ok or firing; a change records an event and notifies every channel (docs/traffic.md ' +
          `"Alerts"). Webhook URLs must have public addresses (unless EDGE_ORIGIN_ALLOW_PRIVATE). 1-${MAX_ALERT_CHANNELS} channels, ` +
          `at most ${MAX_ALERT_RULES_PER_ACCOUNT} rules per account. ${WRITE_NOTE}`,
        tags: TAGS,
        body: RuleBody,
        response: { 201: RuleView, ...ErrorResponses },
      },
    },
    async (req, reply) => {
      const rule = await alerts.create(req.caller, req.body as RuleBodyT);
      return reply.status(201).header('location', `${BASE}/${rule.uuid}`).send(ruleView(rule));
    },
  );

  app.get(
    BASE,
    {
      config: { permission: 'traffic:read' },
      schema: {
        operationId: 'listTrafficAlerts',
        summary: 'List alert rules',
        description: `The active account’s rules, oldest first. ${READ_NOTE}`,
        tags: TAGS,
        response: { 200: Type.Object({ items: Type.Array(RuleView) }), ...ErrorResponses },
      },
    },
    async (req) => ({ items: (await alerts.list(req.caller)).map(ruleView) }),
  );

  app.get(
    `${BASE}/:uuid`,
    {
      config: { permission: 'traffic:read' },
      schema: { operationId: 'getTrafficAlert', summary: 'Get an alert rule', description: READ_NOTE, tags: TAGS, params: RuleParams, response: { 200: RuleView, ...ErrorResponses } },
    },
    async (req) => ruleView(await alerts.get(req.caller, req.params.uuid)),
  );

  app.put(
    `${BASE}/:uuid`,
    {
      config: { permission: 'endpoints:write' },
      schema: {
        operationId: 'replaceTrafficAlert',
        summary: 'Replace an alert rule',
        description:
          'Full write with the fields of create (window_seconds defaults again when omitted; channels replaced, except that a webhook ' +
          'channel sent without secret keeps the secret of the current channel with the same URL). The status and events stay: the ' +
          `next evaluation judges the new settings, so a firing rule that no longer crosses resolves with an ok event. ${WRITE_NOTE}`,
        tags: TAGS,
        params: RuleParams,
        body: RuleBody,
        response: { 200: RuleView, ...ErrorResponses },
      },
    },
    async (req) => ruleView(await alerts.replace(req.caller, req.params.uuid, req.body as RuleBodyT)),
  );

  app.delete(
    `${BASE}/:uuid`,
    {
      config: { permission: 'endpoints:write' },
      schema: {
        operationId: 'deleteTrafficAlert',
        summary: 'Delete an alert rule',
        description: `Its events go with it. ${WRITE_NOTE}`,
        tags: TAGS,
        params: RuleParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...ErrorResponses },
      },
    },
    async (req, reply) => {
      await alerts.remove(req.caller, req.params.uuid);
      return reply.status(204).send(null);
    },
  );

  app.post(
    `${BASE}/:uuid/test`,
    {
      config: { permission: 'endpoints:write' },
      schema: {
        operationId: 'testTrafficAlert',
        summary: 'Send a test notification',
        description:
          'Records a test event (value: the rule’s last value, 0 before any) and sends it once to every channel, now; the rule’s ' +
          `status is unchanged. 200 with the event: notified, or notification_err naming the channels that failed. One test per rule ` +
          `every ${ALERT_TEST_COOLDOWN_MS / 1000} s: sooner is 429 alert_test_too_soon with Retry-After, nothing recorded or sent. ${WRITE_NOTE}`,
        tags: TAGS,
        params: RuleParams,
        response: { 200: EventView, ...ErrorResponses },
      },
    },
    async (req, reply) => eventView(await alerts.test(req.caller, req.params.uuid, (seconds) => void reply.header('retry-after', String(seconds)))),
  );

  app.get(
    `${BASE}/:uuid/events`,
    {
      config: { permission: 'traffic:read' },
      schema: {
        operationId: 'listTrafficAlertEvents',
        summary: 'List an alert rule’s events',
        description:
          `Most recent first. limit: 0 or omitted means the server's cap (${ALERT_EVENTS_CAP}); larger values are capped; anything ` +
          `but a non-negative integer is 400. ${READ_NOTE}`,
        tags: TAGS,
        params: RuleParams,
        querystring: Type.Object({ limit: Type.Optional(Type.String({ description: `0-${ALERT_EVENTS_CAP}; 0 or omitted = ${ALERT_EVENTS_CAP}` })) }),
        response: { 200: Type.Object({ items: Type.Array(EventView) }), ...ErrorResponses },
      },
    },
    async (req) => ({ items: (await alerts.events(req.caller, req.params.uuid, req.query.limit)).map(eventView) }),
  );
}
