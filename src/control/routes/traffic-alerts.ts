// Traffic alert rules API (SPEC.md "Alert rule and alert event", docs/traffic.md "Alerts"): rules of the active
// account on its endpoints' traffic or health, their channels (secrets sealed), a test notification, and the events.
import { Type } from '@sinclair/typebox';
import {
  ALERT_COMPARISONS,
  ALERT_EVENT_STATUSES,
  ALERT_METRICS,
  ALERT_RULE_STATUSES,
  canonicalWebhookUrl,
  MAX_WEBHOOK_URL_LENGTH,
  WebhookUrlError,
  type AlertComparison,
  type AlertMetric,
} from '../../shared/alerts.ts';
import { fail } from '../../shared/errors.ts';
import { CONTROL_CHARS } from '../../shared/match/condition.ts';
import { isUuid, Nullable, parseInt64, Strict, Timestamp, Uuid } from '../../shared/schema.ts';
import type { SecretBox } from '../../shared/secrets.ts';
import * as store from '../../store/alerts.ts';
import {
  ALERT_EVENTS_CAP,
  MAX_ALERT_CHANNELS,
  MAX_ALERT_RULES_PER_ACCOUNT,
  type AlertEventRow,
  type AlertRuleInput,
  type AlertRuleRow,
  type StoredChannel,
} from '../../store/alerts.ts';
import type { Queryable } from '../../store/db.ts';
import { ENDPOINT_COLUMNS, type EndpointRow } from '../../store/endpoints.ts';
import type { Caller } from '../caller.ts';
import { canSee } from '../endpoint-access.ts';
import type { ControlApp, ControlDeps } from '../http.ts';
import { ErrorResponses, iso } from '../views.ts';

// ---------------------------------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------------------------------

const MAX_NAME_LENGTH = 100;
const MIN_WINDOW_SECONDS = 60;
const MAX_WINDOW_SECONDS = 86400;
const DEFAULT_WINDOW_SECONDS = 300;
const MAX_THRESHOLD = 1e12;
/** A webhook secret short enough to guess would sign nothing; long enough for any generated key. */
const MIN_SECRET_LENGTH = 16;
const MAX_SECRET_LENGTH = 256;

// ---------------------------------------------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------------------------------------------

const literals = <T extends readonly string[]>(values: T, options: object = {}) => Type.Union(values.map((v) => Type.Literal(v)), options);

/**
 * One channel of a body. A single object with the fields of both kinds, checked per kind in channelInput, so a bad
 * e-mail channel is reported as such rather than as "not a webhook" (what a union's first branch would say).
 */
const ChannelBody = Strict(
  {
    type: literals(['webhook', 'email'] as const),
    url: Type.Optional(Type.String({ maxLength: MAX_WEBHOOK_URL_LENGTH, description: 'webhook: http or https URL with a public address' })),
    secret: Type.Optional(
      Nullable(
        Type.String({
          maxLength: MAX_SECRET_LENGTH,
          description:
            `webhook: ${MIN_SECRET_LENGTH}-${MAX_SECRET_LENGTH} characters; deliveries then carry X-Edge-Signature. Never returned. On PUT, ` +
            'omitted keeps the secret of the current webhook channel with the same URL; null or "" removes it',
        }),
      ),
    ),
    to: Type.Optional(Type.String({ maxLength: 254, description: 'email: the recipient address' })),
  },
  { description: 'A notification channel: {type: "webhook", url, secret?} or {type: "email", to}' },
);

const RuleBody = Strict({
  name: Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH }),
  endpoint_id: Type.Optional(
    Nullable(Type.Union([Type.String({ maxLength: 64 }), Type.Integer({ minimum: 1 })], { description: 'Endpoint uuid or numeric id; null or omitted for all endpoints' })),
  ),
  metric: literals(ALERT_METRICS, {
    description:
      'error_rate: share of 5xx answers among requests (0-1); errors_5xx, requests: counts over the window; latency_p95_ms: 95th ' +
      'percentile duration; endpoint_down: endpoints whose last health verdict is unhealthy, error or timeout',
  }),
  comparison: literals(ALERT_COMPARISONS, { description: 'gt: fires above the threshold; lt: fires below it' }),
  threshold: Type.Number({ minimum: 0, maximum: MAX_THRESHOLD, description: 'error_rate: a fraction 0-1' }),
  window_seconds: Type.Optional(
    Type.Integer({ minimum: MIN_WINDOW_SECONDS, maximum: MAX_WINDOW_SECONDS, description: `Default ${DEFAULT_WINDOW_SECONDS}; rounded out to whole minutes` }),
  ),
  channels: Type.Array(ChannelBody, { minItems: 1, maxItems: MAX_ALERT_CHANNELS }),
});
type RuleBodyT = {
  name: string;
  endpoint_id?: string | number | null;
  metric: AlertMetric;
  comparison: AlertComparison;
  threshold: number;
  window_seconds?: number;
  channels: ChannelBodyT[];
};
type ChannelBodyT = { type: 'webhook' | 'email'; url?: string; secret?: string | null; to?: string };

const ChannelView = Type.Object(
  {
    type: literals(['webhook', 'email'] as const),
    url: Type.Optional(Type.String()),
    has_secret: Type.Optional(Type.Boolean({ description: 'webhook: whether deliveries are signed' })),
    to: Type.Optional(Type.String()),
  },
  { description: 'webhook: url and has_secret; email: to' },
);

const RuleView = Type.Object(
  {
    uuid: Uuid(),
    id: Type.Integer({ description: 'The rule_id of its events' }),
    name: Type.String(),
    endpoint_id: Nullable(Type.Integer({ description: 'null: all endpoints of the account' })),
    endpoint_uuid: Nullable(Uuid()),
    metric: literals(ALERT_METRICS),
    comparison: literals(ALERT_COMPARISONS),
    threshold: Type.Number(),
    window_seconds: Type.Integer(),
    channels: Type.Array(ChannelView),
    status: literals(ALERT_RULE_STATUSES, { description: 'unknown until the first evaluation with data' }),
    last_value: Nullable(Type.Number()),
    last_evaluated_at: Nullable(Timestamp()),
    user_id: Type.Integer({ description: 'Who created the rule' }),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { description: 'Alert rule' },
);

const EventView = Type.Object(
  {
    id: Type.Integer(),
    rule_id: Type.Integer(),
    status: literals(ALERT_EVENT_STATUSES),
    value: Type.Number({ description: 'The observed metric; for a test, the last value (0 before any)' }),
    triggered_at: Timestamp(),
    notified: Type.Boolean({ description: 'Every channel took the notification' }),
    notification_err: Nullable(Type.String({ description: 'Set when notified is false: the channels that failed and why' })),
  },
  { description: 'Alert event' },
);

const RuleParams = Type.Object({ uuid: Type.String({ description: 'Alert rule uuid' }) });

function channelView(c: StoredChannel) {
  return c.type === 'webhook' ? { type: c.type, url: c.url, has_secret: c.secret_sealed !== null } : { type: c.type, to: c.to };
}

function ruleView(r: AlertRuleRow) {
  return {
    uuid: r.uuid,
    id: r.id,
    name: r.name,
    endpoint_id: r.endpoint_id,
    endpoint_uuid: r.endpoint_uuid,
    metric: r.metric,
    comparison: r.comparison,
    threshold: r.threshold,
    window_seconds: r.window_seconds,
    channels: r.channels.map(channelView),
    status: r.status,
    last_value: r.last_value,
    last_evaluated_at: iso(r.last_evaluated_at),
    user_id: r.user_id,
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
  };
}

export function eventView(e: AlertEventRow) {
  return {
    id: e.id,
    rule_id: e.rule_id,
    status: e.status,
    value: e.value,
    triggered_at: iso(e.triggered_at),
    notified: e.notified,
    notification_err: e.notified ? null : e.notification_err,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Validation and canonical form
// ---------------------------------------------------------------------------------------------------------------

const bad = (detail: string, field: string) => fail.invalid_request('Invalid request body', { field, reason: detail });

function channelInput(c: ChannelBodyT, i: number, opts: { allowPrivate: boolean; secrets: SecretBox; current: readonly StoredChannel[] }): StoredChannel {
  const field = `channels.${i}`;
  if (c.type === 'email') {
    if (c.url !== undefined || c.secret !== undefined) throw bad('an email channel takes only "to"', field);
    if (c.to === undefined) throw bad('an email channel needs "to"', `${field}.to`);
    const to = c.to.trim();
    // The schema's e-mail check is loose on purpose; a header-breaking or list-valued recipient is refused outright.
    if (!/^[^\s@,;<>"()]{1,64}@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$/.test(to) || to.length > 254) throw bad(`"${to}" is not an e-mail address`, `${field}.to`);
    return { type: 'email', to };
  }
  if (c.to !== undefined) throw bad('a webhook channel takes "url" and "secret", not "to"', field);
  if (c.url === undefined) throw bad('a webhook channel needs "url"', `${field}.url`);
  let url: string;
  try {
    url = canonicalWebhookUrl(c.url, opts.allowPrivate);
  } catch (err) {
    if (err instanceof WebhookUrlError) throw bad(`url: ${err.message}`, `${field}.url`);
    throw err;
  }
  let secretSealed: string | null;
  if (c.secret === undefined) {
    // PUT: the secret of the current webhook channel to the same URL stays (it is never shown, so it cannot be resent).
    const same = opts.current.find((s): s is Extract<StoredChannel, { type: 'webhook' }> => s.type === 'webhook' && s.url === url);
    secretSealed = same?.secret_sealed ?? null;
  } else if (c.secret === null || c.secret === '') secretSealed = null;
  else {
    if (c.secret.length < MIN_SECRET_LENGTH) throw bad(`secret: at least ${MIN_SECRET_LENGTH} characters`, `${field}.secret`);
    if (CONTROL_CHARS.test(c.secret)) throw bad('secret: control characters are not allowed', `${field}.secret`);
    secretSealed = opts.secrets.seal(c.secret);
  }
  return { type: 'webhook', url, secret_sealed: secretSealed };
}

function ruleInput(body: RuleBodyT, endpointId: number | null, opts: { allowPrivate: boolean; secrets: SecretBox; current?: readonly StoredChannel[] }): AlertRuleInput {
  const name = body.name.trim();
  if (name === '') throw bad('name must not be empty', 'name');
  if (CONTROL_CHARS.test(name) || name.includes('\t')) throw bad('control characters are not allowed', 'name');
  if (body.metric === 'error_rate' && body.threshold > 1) throw bad('error_rate is a fraction: the threshold is between 0 and 1 (0.05 = 5 %)', 'threshold');
  const channels = body.channels.map((c, i) => channelInput(c, i, { ...opts, current: opts.current ?? [] }));
  const keys = channels.map((c) => (c.type === 'webhook' ? `w ${c.url}` : `e ${c.to.toLowerCase()}`));
  const dup = keys.findIndex((k, i) => keys.indexOf(k) !== i);
  if (dup !== -1) throw bad('the same destination is listed twice', `channels.${dup}`);
  return {
    name,
    endpointId,
    metric: body.metric,
    comparison: body.comparison,
    threshold: body.threshold,
    windowSeconds: body.window_seconds ?? DEFAULT_WINDOW_SECONDS,
    channels,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Access
// ---------------------------------------------------------------------------------------------------------------

const ruleNotFound = () => fail.not_found('Alert rule not found');

/** A rule the caller may see; another account's reads as missing (SPEC.md: same status on purpose). */
async function visibleRule(q: Queryable, caller: Caller, uuid: string): Promise<AlertRuleRow> {
  if (!isUuid(uuid)) throw fail.invalid_id('Invalid alert rule id', 'the alert rule id must be a UUID');
  const rule = await store.findAlertRule(q, uuid.toLowerCase());
  if (!rule || !canSee(caller, rule)) throw ruleNotFound();
  return rule;
}

/**
 * The endpoint a rule watches: a uuid or numeric id of an endpoint in the rule's account (404 otherwise, as for any
 * endpoint that is not the caller's); null for all endpoints.
 */
async function ruleEndpoint(q: Queryable, accountId: number, ref: string | number | null | undefined): Promise<EndpointRow | null> {
  if (ref === undefined || ref === null || ref === '') return null;
  let where: string;
  let value: string | number;
  if (typeof ref === 'number') [where, value] = ['id = $1', ref];
  else if (isUuid(ref)) [where, value] = ['uuid = $1', ref.toLowerCase()];
  else {
    const id = parseInt64(ref);
    if (id === null) throw bad('endpoint_id is an endpoint uuid or a positive integer id', 'endpoint_id');
    [where, value] = ['id = $1', id];
  }
  if (typeof value === 'number' && !Number.isSafeInteger(value)) throw fail.not_found('Endpoint not found');
  const { rows } = await q.query<EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM endpoints WHERE ${where}`, [value]);
  const endpoint = rows[0];
  if (!endpoint || endpoint.account_id !== accountId) throw fail.not_found('Endpoint not found');
  return endpoint;
}

/**
 * The events list's `limit`: 0 or omitted is the cap, above the cap is the cap (SPEC.md); anything that is not a
 * non-negative integer is a 400, since silently reading it as another number would hide the caller's mistake.
 */
export function eventsLimit(raw: string | undefined): number {
  if (raw === undefined || raw === '') return ALERT_EVENTS_CAP;
  if (!/^[0-9]{1,20}$/.test(raw)) throw fail.invalid_query('Invalid query parameter limit', 'limit is a non-negative integer (0 = the default cap)');
  const n = Number(raw);
  return n === 0 ? ALERT_EVENTS_CAP : Math.min(n, ALERT_EVENTS_CAP);
}

// ---------------------------------------------------------------------------------------------------------------
// Routes
// ---------------------------------------------------------------------------------------------------------------

/**
 * One test notification per rule in this long, per control process: a test sends to every channel (up to 10 addresses
 * the user chose) at once, so unthrottled it would let anyone with a rule make the platform flood a third party.
 */
export const ALERT_TEST_COOLDOWN_MS = 30_000;

/** When each rule was last tested on this control process (bounded: entries past the cooldown are pruned). */
class TestCooldown {
  private readonly last = new Map<string, number>();
  constructor(private readonly now: () => number = Date.now) {}

  /** Seconds until `rule` may be tested again, or 0 (and the test is counted now). */
  take(rule: string): number {
    const t = this.now();
    const at = this.last.get(rule);
    if (at !== undefined && t - at < ALERT_TEST_COOLDOWN_MS) return Math.ceil((ALERT_TEST_COOLDOWN_MS - (t - at)) / 1000);
    if (this.last.size >= 10_000) for (const [k, v] of this.last) if (t - v >= ALERT_TEST_COOLDOWN_MS) this.last.delete(k);
    this.last.set(rule, t);
    return 0;
  }
}

export function trafficAlertRoutes(app: ControlApp, { db, config, secrets, alertNotifier }: ControlDeps): void {
  const cooldown = new TestCooldown();
  const TAGS = ['traffic-alerts'];
  const BASE = '/v1/traffic/alerts';
  const allowPrivate = config.originAllowPrivate;
  const READ_NOTE = 'Needs traffic:read in the active account; another account’s rule is 404.';
  const WRITE_NOTE = 'Needs endpoints:write in the active account; a suspended account is 403 account_suspended.';

  app.post(
    BASE,
    {
      schema: {
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
      const { caller } = req;
      caller.requirePermission('endpoints:write');
      const body = req.body as RuleBodyT;
      const rule = await db.transaction(async (tx) => {
        const endpoint = await ruleEndpoint(tx, caller.account.id, body.endpoint_id);
        const input = ruleInput(body, endpoint?.id ?? null, { allowPrivate, secrets });
        const count = await store.countAlertRulesLocked(tx, caller.account.id);
        if (count >= MAX_ALERT_RULES_PER_ACCOUNT) {
          throw fail.invalid_request(`An account has at most ${MAX_ALERT_RULES_PER_ACCOUNT} alert rules`, { limit: MAX_ALERT_RULES_PER_ACCOUNT, count });
        }
        return store.insertAlertRule(tx, caller.account.id, caller.user.id, input);
      });
      return reply.status(201).header('location', `${BASE}/${rule.uuid}`).send(ruleView(rule));
    },
  );

  app.get(
    BASE,
    {
      schema: {
        summary: 'List alert rules',
        description: `The active account’s rules, oldest first. ${READ_NOTE}`,
        tags: TAGS,
        response: { 200: Type.Object({ items: Type.Array(RuleView) }), ...ErrorResponses },
      },
    },
    async (req) => {
      req.caller.requirePermission('traffic:read');
      return { items: (await store.listAlertRules(db, req.caller.account.id)).map(ruleView) };
    },
  );

  app.get(
    `${BASE}/:uuid`,
    {
      schema: { summary: 'Get an alert rule', description: READ_NOTE, tags: TAGS, params: RuleParams, response: { 200: RuleView, ...ErrorResponses } },
    },
    async (req) => {
      req.caller.requirePermission('traffic:read');
      return ruleView(await visibleRule(db, req.caller, req.params.uuid));
    },
  );

  app.put(
    `${BASE}/:uuid`,
    {
      schema: {
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
    async (req) => {
      const { caller } = req;
      caller.requirePermission('endpoints:write');
      const body = req.body as RuleBodyT;
      const updated = await db.transaction(async (tx) => {
        const rule = await visibleRule(tx, caller, req.params.uuid);
        const endpoint = await ruleEndpoint(tx, rule.account_id, body.endpoint_id);
        const input = ruleInput(body, endpoint?.id ?? null, { allowPrivate, secrets, current: rule.channels });
        return store.replaceAlertRule(tx, rule.id, input);
      });
      if (!updated) throw ruleNotFound();
      return ruleView(updated);
    },
  );

  app.delete(
    `${BASE}/:uuid`,
    {
      schema: {
        summary: 'Delete an alert rule',
        description: `Its events go with it. ${WRITE_NOTE}`,
        tags: TAGS,
        params: RuleParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...ErrorResponses },
      },
    },
    async (req, reply) => {
      req.caller.requirePermission('endpoints:write');
      const rule = await visibleRule(db, req.caller, req.params.uuid);
      if (!(await store.deleteAlertRule(db, rule.id))) throw ruleNotFound();
      return reply.status(204).send(null);
    },
  );

  app.post(
    `${BASE}/:uuid/test`,
    {
      schema: {
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
    async (req, reply) => {
      req.caller.requirePermission('endpoints:write');
      const rule = await visibleRule(db, req.caller, req.params.uuid);
      const wait = cooldown.take(rule.uuid);
      if (wait > 0) {
        reply.header('retry-after', String(wait));
        throw fail.alert_test_too_soon(undefined, { retry_after_seconds: wait });
      }
      const event = await store.insertAlertEvent(db, rule.id, 'test', rule.last_value ?? 0);
      const channels = store.openAlertChannels(rule.channels, secrets);
      const outcome = !alertNotifier
        ? { notified: false, error: 'notifications are not configured on this node' }
        : typeof channels === 'string'
          ? { notified: false, error: channels }
          : await alertNotifier(channels, {
              rule: { uuid: rule.uuid, name: rule.name, metric: rule.metric, comparison: rule.comparison, threshold: rule.threshold },
              status: 'test',
              value: event.value,
              triggered_at: iso(event.triggered_at),
              ...(rule.endpoint_uuid ? { endpoint: { uuid: rule.endpoint_uuid, name: rule.endpoint_name ?? '' } } : {}),
              event_id: event.id,
            });
      const recorded = await store.recordNotification(db, event.id, outcome.notified, outcome.error);
      // The rule may have been deleted meanwhile (its events with it): the event is still what happened.
      return eventView(recorded ?? { ...event, notified: outcome.notified, notification_err: outcome.error });
    },
  );

  app.get(
    `${BASE}/:uuid/events`,
    {
      schema: {
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
    async (req) => {
      req.caller.requirePermission('traffic:read');
      const limit = eventsLimit(req.query.limit);
      const rule = await visibleRule(db, req.caller, req.params.uuid);
      return { items: (await store.listAlertEvents(db, rule.id, limit)).map(eventView) };
    },
  );
}
