// Routing rules API: create, list (in evaluation order), get, replace and delete the rules that choose what serves
// a request (which agents, or an origin URL). The operations live in services/routing-rules.ts.
import { Type } from '@sinclair/typebox';
import { MAX_CONDITIONS_PER_RULE, MAX_RULES_PER_ENDPOINT } from '../../store/routing-rules.ts';
import type { ControlApp, ControlDeps } from '../http.ts';
import { EndpointParams, Errors409, RuleBodySchema, RuleParams, RuleView, ruleView } from '../schemas/routing-rules.ts';
import { routingRuleService } from '../services/routing-rules.ts';
import { ErrorResponses } from '../views.ts';

export function routingRuleRoutes(app: ControlApp, deps: ControlDeps): void {
  const rules = routingRuleService(deps);
  const TAGS = ['routing-rules'];
  const ENTITLEMENT_NOTE = 'Needs the endpoint_routing_rules plan entitlement (403 entitlement_required).';

  app.post(
    '/v1/endpoints/:id/routing-rules',
    {
      config: { permission: 'endpoints:update' },
      schema: {
        operationId: 'createRoutingRule',
        summary: 'Create a routing rule',
        description:
          'Rules choose what serves a request: the first enabled rule (ascending priority, then id) whose conditions all match ' +
          'sends the request to target_agent_id and/or agents carrying every target tag, or to target_origin_url (exactly one of ' +
          'agents or an origin; the origin is checked as for PUT /v1/endpoints/{id}/origin). enabled defaults ' +
          `to true; other omitted fields are zeroed. At most ${MAX_RULES_PER_ENDPOINT} rules per endpoint and ${MAX_CONDITIONS_PER_RULE} ` +
          `conditions per rule. Effective from the next request. Needs endpoints:update. ${ENTITLEMENT_NOTE}`,
        tags: TAGS,
        params: EndpointParams,
        body: RuleBodySchema,
        response: { 201: RuleView, ...Errors409 },
      },
    },
    async (req, reply) => {
      const { endpoint, rule } = await rules.create(req.caller, req.params.id, req.body);
      return reply.status(201).header('location', `/v1/endpoints/${endpoint.uuid}/routing-rules/${rule.id}`).send(ruleView(rule));
    },
  );

  app.get(
    '/v1/endpoints/:id/routing-rules',
    {
      config: { permission: 'endpoints:read' },
      schema: {
        operationId: 'listRoutingRules',
        summary: 'List routing rules in evaluation order',
        description: `Ascending priority, ties by ascending id; disabled rules included. Needs endpoints:read. ${ENTITLEMENT_NOTE}`,
        tags: TAGS,
        params: EndpointParams,
        response: { 200: Type.Object({ items: Type.Array(RuleView) }), ...ErrorResponses },
      },
    },
    async (req) => ({ items: (await rules.list(req.caller, req.params.id)).map(ruleView) }),
  );

  app.get(
    '/v1/endpoints/:id/routing-rules/:rule_id',
    {
      config: { permission: 'endpoints:read' },
      schema: {
        operationId: 'getRoutingRule',
        summary: 'Get a routing rule',
        description: `404 when the endpoint or the rule is missing, not the caller’s, or the rule belongs to another endpoint. Needs endpoints:read. ${ENTITLEMENT_NOTE}`,
        tags: TAGS,
        params: RuleParams,
        response: { 200: RuleView, ...ErrorResponses },
      },
    },
    async (req) => ruleView(await rules.get(req.caller, { endpoint: req.params.id, rule: req.params.rule_id })),
  );

  app.put(
    '/v1/endpoints/:id/routing-rules/:rule_id',
    {
      config: { permission: 'endpoints:update' },
      schema: {
        operationId: 'replaceRoutingRule',
        summary: 'Replace a routing rule',
        description:
          'Full replacement with the fields of create: omitted fields are zeroed (name "", priority 0, enabled false, no target ' +
          'agent id, no tags, no origin); conditions must be non-empty, and the rule must still target agents (an id or a tag) or ' +
          'an origin, not both. Effective from ' +
          `the next request. Needs endpoints:update. ${ENTITLEMENT_NOTE}`,
        tags: TAGS,
        params: RuleParams,
        body: RuleBodySchema,
        response: { 200: RuleView, ...Errors409 },
      },
    },
    async (req) => ruleView(await rules.replace(req.caller, { endpoint: req.params.id, rule: req.params.rule_id }, req.body)),
  );

  app.delete(
    '/v1/endpoints/:id/routing-rules/:rule_id',
    {
      config: { permission: 'endpoints:update' },
      schema: {
        operationId: 'deleteRoutingRule',
        summary: 'Delete a routing rule',
        description: `Effective from the next request. Needs endpoints:update. ${ENTITLEMENT_NOTE}`,
        tags: TAGS,
        params: RuleParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...Errors409 },
      },
    },
    async (req, reply) => {
      await rules.remove(req.caller, { endpoint: req.params.id, rule: req.params.rule_id });
      return reply.status(204).send(null);
    },
  );
}
