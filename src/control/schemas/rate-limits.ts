// Request and response shapes of the firewall rate-limits API (routes/rate-limits.ts), and the row → JSON views
// behind them. Condition fields are typed loosely on purpose: services/rate-limits.ts gives each problem its SPEC body.
import { Type, type TLiteral, type TUnion } from '@sinclair/typebox';
import { Nullable, Strict, Timestamp, Uuid } from '../../shared/schema.ts';
import { RATE_LIMIT_CONDITION_TYPES } from '../../shared/snapshot.ts';
import { MAX_CONDITIONS_PER_RULE, RULE_STATUSES, type RateLimitConditionRow, type RateLimitRuleRow, type RuleEndpointRow } from '../../store/rate-limit-rules.ts';
import type { LegacyIds, RuleList } from '../services/rate-limits.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';
import { tagsBody, TagsView } from './tags.ts';

const literals = <T extends readonly string[]>(values: T) => Type.Union(values.map((v) => Type.Literal(v))) as unknown as TUnion<TLiteral<T[number]>[]>;

const MAX_NAME_LENGTH = 100;
const MAX_DESCRIPTION_LENGTH = 1000;
const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;
/** Largest window: the schema's CHECK holds it too (longer windows would keep day-long state per visitor on every edge). */
const MAX_WINDOW_SECONDS = 86400;
const MAX_REQUESTS_PER_WINDOW = 1_000_000_000;

export const ConditionView = Type.Object(
  {
    uuid: Uuid(),
    rule_uuid: Uuid(),
    id: Type.Optional(Type.Integer({ deprecated: true, description: 'Legacy integer id; present until the sunset' })),
    rule_id: Type.Optional(Type.Integer({ deprecated: true, description: 'Legacy integer id of the rule; present until the sunset' })),
    condition_type: literals(RATE_LIMIT_CONDITION_TYPES),
    operator: Type.String(),
    condition_value: Type.String({ description: 'Canonical form; for header/cookie `name=value`, or `name` (empty: any) with exists/not_exists' }),
    logical_operator: literals(['AND', 'OR'] as const),
    created_at: Timestamp(),
  },
  { description: 'Rate-limit condition (as stored)' },
);

export const RuleView = Type.Object(
  {
    uuid: Uuid(),
    id: Type.Integer({ deprecated: true, description: 'Legacy integer id' }),
    endpoint_id: Type.Integer(),
    endpoint_uuid: Uuid(),
    user_id: Type.Integer({ description: 'Who created the rule' }),
    name: Type.String(),
    description: Type.String(),
    conditions: Type.Array(ConditionView, { description: 'In evaluation order; logical_operator joins each to the next, AND before OR' }),
    source_ip: Type.Null({ deprecated: true, description: 'Always null: a legacy source_ip is stored as a source_ip condition' }),
    requests_per_window: Type.Integer(),
    window_size_seconds: Type.Integer(),
    action: literals(['block', 'throttle'] as const),
    status: literals(RULE_STATUSES),
    priority: Type.Integer({ description: 'Lower numbers evaluated first; ties by id' }),
    scope: literals(['edge', 'cluster'] as const),
    fail_mode: literals(['open', 'closed'] as const),
    tags: TagsView,
    hit_count: Type.Integer({ description: 'Matches over the last 7 days, best effort' }),
    last_matched: Nullable(Timestamp()),
    hits_daily: Type.Array(Type.Integer(), { description: '7 daily match counts (UTC days), oldest first, today last' }),
    shadowed: Type.Boolean(),
    shadow_reason: Nullable(Type.String()),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { description: 'Rate-limit rule' },
);

export const ConditionBody = Strict(
  {
    type: Type.Optional(Type.Unknown({ description: `Required: ${RATE_LIMIT_CONDITION_TYPES.join(', ')}` })),
    operator: Type.Optional(
      Type.Unknown({
        description:
          'Required: one the type allows (docs/rate-limits.md "Rules and conditions"). `path` matches canonical readings ' +
          '(case-folded, no final /, ; parameters stripped, %2F as /); its exact_equals, exact_in, exact_not_in, exact_contains, ' +
          'exact_prefix and exact_matches test the normalised path as it is',
      }),
    ),
    value: Type.Optional(Type.Unknown({ description: 'String; required except for exists / not_exists, which take the header or cookie name (none: any header, any cookie)' })),
    logical_operator: Type.Optional(Type.Unknown({ description: '`AND` (default) or `OR`: joins this condition to the next; AND binds tighter' })),
  },
  { description: 'A rate-limit condition' },
);

const RuleFields = {
  name: Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH }),
  description: Type.Optional(Type.String({ maxLength: MAX_DESCRIPTION_LENGTH })),
  requests_per_window: Type.Integer({ minimum: 1, maximum: MAX_REQUESTS_PER_WINDOW, description: 'Requests allowed per window and visitor' }),
  window_size_seconds: Type.Integer({ minimum: 1, maximum: MAX_WINDOW_SECONDS, description: 'Sliding window length' }),
  action: literals(['block', 'throttle'] as const),
  status: Type.Optional(literals(RULE_STATUSES)),
  priority: Type.Optional(Type.Integer({ minimum: INT32_MIN, maximum: INT32_MAX, description: 'Lower first; default 0' })),
  conditions: Type.Optional(Type.Array(ConditionBody, { maxItems: MAX_CONDITIONS_PER_RULE })),
  scope: Type.Optional(literals(['edge', 'cluster'] as const)),
  fail_mode: Type.Optional(literals(['open', 'closed'] as const)),
  tags: Type.Optional(tagsBody('. A full write: omitted on PUT means none')),
  source_ip: Type.Optional(
    Nullable(Type.String({ maxLength: 4096, deprecated: true, description: 'Deprecated: stored as a source_ip `in` condition; null, "" or `*` = all' })),
  ),
};
const EndpointRef = Type.Union([Type.String({ maxLength: 64 }), Type.Integer({ minimum: 1 })], { description: 'Endpoint uuid, or its numeric id' });
export const CreateBody = Strict({ endpoint_id: EndpointRef, ...RuleFields });
export const ReplaceBody = Strict({ endpoint_id: Type.Optional(EndpointRef), ...RuleFields });

export const RuleParams = Type.Object({ uuid: Type.String({ description: 'Rule uuid (legacy integer id until the sunset)' }) });
export const ConditionParams = Type.Object({
  uuid: Type.String({ description: 'Rule uuid (legacy integer id until the sunset)' }),
  condition_uuid: Type.String({ description: 'Condition uuid (legacy integer id until the sunset)' }),
});
export const Errors409 = { ...ErrorResponses, 409: ErrorBody, 415: ErrorBody };

export const ListQuery = Type.Object({
  endpoint_id: Type.Optional(Type.String({ maxLength: 64, description: 'Endpoint uuid (preferred) or numeric id' })),
  status: Type.Optional(Type.String({ description: 'active, inactive or disabled' })),
  page: Type.Optional(Type.String()),
  limit: Type.Optional(Type.String()),
  page_size: Type.Optional(Type.String({ description: 'Alias of limit' })),
  search: Type.Optional(Type.String({ maxLength: 200, description: 'Substring of the rule name, case-insensitive' })),
  q: Type.Optional(Type.String({ maxLength: 200, description: 'Alias of search' })),
});

const EndpointSummary = Type.Object({
  id: Type.Integer(),
  uuid: Uuid(),
  hostname: Type.String(),
  subdomain: Type.String(),
  domain_id: Nullable(Type.Integer()),
  rules: Type.Integer(),
  active_rules: Type.Integer(),
});

export const ListView = Type.Object({
  rules: Type.Array(RuleView),
  pagination: Type.Object({ page: Type.Integer(), limit: Type.Integer(), total: Type.Integer(), totalPages: Type.Integer() }),
  endpoints: Type.Array(EndpointSummary, { description: 'The active account’s endpoints, by hostname' }),
  endpointByID: Type.Record(Type.String(), EndpointSummary, { description: 'Endpoint id → endpoint, for every endpoint listed or named by a rule' }),
  domainByID: Type.Record(Type.String(), Type.String(), { description: 'Domain id → domain name, for those endpoints' }),
  defaultDomain: Type.String({ description: 'The platform domain (endpoints with domain_id null)' }),
  posture: Type.Object(
    {
      endpoints_with_active_rules: Type.Integer(),
      endpoints_without_active_rules: Type.Integer(),
      shadowed_rules: Type.Integer({ description: 'Rules that can never act: an earlier active rule covers them (docs/rate-limits.md)' }),
    },
    { description: 'Over the whole active account, whatever the filters' },
  ),
});

export function conditionView(c: RateLimitConditionRow, legacy: LegacyIds) {
  return {
    uuid: c.uuid,
    rule_uuid: c.rule_uuid,
    ...(legacy.live ? { id: c.id, rule_id: c.rule_id } : {}),
    condition_type: c.condition_type,
    operator: c.operator,
    condition_value: c.condition_value,
    logical_operator: c.logical_operator,
    created_at: iso(c.created_at),
  };
}

export function ruleView(r: RateLimitRuleRow, legacy: LegacyIds) {
  return {
    uuid: r.uuid,
    id: r.id,
    endpoint_id: r.endpoint_id,
    endpoint_uuid: r.endpoint_uuid,
    user_id: r.user_id,
    name: r.name,
    description: r.description,
    conditions: r.conditions.map((c) => conditionView(c, legacy)),
    source_ip: null,
    requests_per_window: r.requests_per_window,
    window_size_seconds: r.window_size_seconds,
    action: r.action,
    status: r.status,
    priority: r.priority,
    scope: r.scope,
    fail_mode: r.fail_mode,
    tags: r.tags,
    hit_count: r.hit_count,
    last_matched: iso(r.last_matched),
    hits_daily: r.hits_daily,
    shadowed: r.shadowed,
    shadow_reason: r.shadow_reason,
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
  };
}

const endpointSummary = (e: RuleEndpointRow) => ({
  id: e.id,
  uuid: e.uuid,
  hostname: e.hostname,
  subdomain: e.subdomain,
  domain_id: e.domain_id,
  rules: e.rules,
  active_rules: e.active_rules,
});

/** A page of rules with the account's endpoints (and those other accounts' rules name, for admins) and its posture. */
export function listView(list: RuleList, defaultDomain: string) {
  const endpointByID: Record<string, ReturnType<typeof endpointSummary>> = {};
  const domainByID: Record<string, string> = {};
  for (const e of [...list.endpoints, ...list.named]) {
    endpointByID[String(e.id)] = endpointSummary(e);
    if (e.domain_id !== null && e.domain_name !== null) domainByID[String(e.domain_id)] = e.domain_name;
  }
  const withActive = list.endpoints.filter((e) => e.active_rules > 0).length;
  return {
    rules: list.rows.map((r) => ruleView(r, list.legacy)),
    pagination: { page: list.page, limit: list.limit, total: list.total, totalPages: Math.ceil(list.total / list.limit) },
    endpoints: list.endpoints.map(endpointSummary),
    endpointByID,
    domainByID,
    defaultDomain,
    posture: {
      endpoints_with_active_rules: withActive,
      endpoints_without_active_rules: list.endpoints.length - withActive,
      shadowed_rules: list.shadowed,
    },
  };
}
