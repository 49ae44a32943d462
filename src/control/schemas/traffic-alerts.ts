// Request and response shapes of the traffic alerts API (routes/traffic-alerts.ts), and the row → JSON views
// behind them. Channel secrets are write-only: a view says whether a webhook has one, never what it is.
import { Type } from '@sinclair/typebox';
import { ALERT_COMPARISONS, ALERT_EVENT_STATUSES, ALERT_METRICS, ALERT_RULE_STATUSES, MAX_WEBHOOK_URL_LENGTH } from '../../shared/alerts.ts';
import { Nullable, Strict, Timestamp, Uuid } from '../../shared/schema.ts';
import { MAX_ALERT_CHANNELS, type AlertEventRow, type AlertRuleRow, type StoredChannel } from '../../store/alerts.ts';
import { ALERT_LIMITS } from '../services/traffic-alerts.ts';
import { iso } from '../views.ts';
import { tagsBody, TagsView } from './tags.ts';

const literals = <T extends readonly string[]>(values: T, options: object = {}) => Type.Union(values.map((v) => Type.Literal(v)), options);

/**
 * One channel of a body. A single object with the fields of both kinds, checked per kind by the service, so a bad
 * e-mail channel is reported as such rather than as "not a webhook" (what a union's first branch would say).
 */
const ChannelBody = Strict(
  {
    type: literals(['webhook', 'email'] as const),
    url: Type.Optional(Type.String({ maxLength: MAX_WEBHOOK_URL_LENGTH, description: 'webhook: http or https URL with a public address' })),
    secret: Type.Optional(
      Nullable(
        Type.String({
          maxLength: ALERT_LIMITS.maxSecretLength,
          description:
            `webhook: ${ALERT_LIMITS.minSecretLength}-${ALERT_LIMITS.maxSecretLength} characters; deliveries then carry X-Edge-Signature. Never returned. On PUT, ` +
            'omitted keeps the secret of the current webhook channel with the same URL; null or "" removes it',
        }),
      ),
    ),
    to: Type.Optional(Type.String({ maxLength: 254, description: 'email: the recipient address' })),
  },
  { description: 'A notification channel: {type: "webhook", url, secret?} or {type: "email", to}' },
);

export const RuleBody = Strict({
  name: Type.String({ minLength: 1, maxLength: ALERT_LIMITS.maxNameLength }),
  endpoint_id: Type.Optional(
    Nullable(Type.Union([Type.String({ maxLength: 64 }), Type.Integer({ minimum: 1 })], { description: 'Endpoint uuid or numeric id; null or omitted for all endpoints' })),
  ),
  metric: literals(ALERT_METRICS, {
    description:
      'error_rate: share of 5xx answers among requests (0-1); errors_5xx, requests: counts over the window; latency_p95_ms: 95th ' +
      'percentile duration; endpoint_down: endpoints whose last health verdict is unhealthy, error or timeout',
  }),
  comparison: literals(ALERT_COMPARISONS, { description: 'gt: fires above the threshold; lt: fires below it' }),
  threshold: Type.Number({ minimum: 0, maximum: ALERT_LIMITS.maxThreshold, description: 'error_rate: a fraction 0-1' }),
  window_seconds: Type.Optional(
    Type.Integer({
      minimum: ALERT_LIMITS.minWindowSeconds,
      maximum: ALERT_LIMITS.maxWindowSeconds,
      description: `Default ${ALERT_LIMITS.defaultWindowSeconds}; rounded out to whole minutes`,
    }),
  ),
  channels: Type.Array(ChannelBody, { minItems: 1, maxItems: MAX_ALERT_CHANNELS }),
  tags: Type.Optional(tagsBody('. A full write: omitted on PUT means none')),
});

const ChannelView = Type.Object(
  {
    type: literals(['webhook', 'email'] as const),
    url: Type.Optional(Type.String()),
    has_secret: Type.Optional(Type.Boolean({ description: 'webhook: whether deliveries are signed' })),
    secret_fingerprint: Type.Optional(
      Nullable(
        Type.String({
          description:
            'webhook: bcrypt (cost 10) of the lower-case hex SHA-256 of the signing secret, made when it was written (docs/api.md ' +
            '"Secret fingerprints"); null without a secret, or for one stored before fingerprints existed',
        }),
      ),
    ),
    to: Type.Optional(Type.String()),
  },
  { description: 'webhook: url, has_secret and secret_fingerprint; email: to' },
);

export const RuleView = Type.Object(
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
    tags: TagsView,
    user_id: Type.Integer({ description: 'Who created the rule' }),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { description: 'Alert rule' },
);

export const EventView = Type.Object(
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

export const RuleParams = Type.Object({ uuid: Type.String({ description: 'Alert rule uuid' }) });

function channelView(c: StoredChannel) {
  return c.type === 'webhook'
    ? { type: c.type, url: c.url, has_secret: c.secret_sealed !== null, secret_fingerprint: c.secret_sealed === null ? null : (c.secret_fingerprint ?? null) }
    : { type: c.type, to: c.to };
}

export function ruleView(r: AlertRuleRow) {
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
    tags: r.tags,
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
