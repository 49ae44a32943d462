// Firewall rate-limit rules API (docs/api.md "Firewall rate limits", docs/rate-limits.md): the account-wide list, rules
// and their conditions by uuid (legacy integer ids until the sunset). Conditions are validated with the edge's compiler.
import { Type, type TLiteral, type TUnion } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';
import { fail } from '../../shared/errors.ts';
import type { Entitlement, Plan } from '../../shared/plans.ts';
import { CONTROL_CHARS } from '../../shared/match/condition.ts';
import {
  canonicalRateLimitCondition,
  conditionGroups,
  OPERATORS_BY_TYPE,
  RateLimitConditionError,
} from '../../shared/rate-limit/conditions.ts';
import { Nullable, parseInt64, isUuid, Strict, Timestamp, Uuid } from '../../shared/schema.ts';
import { RATE_LIMIT_CONDITION_TYPES, type RateLimitConditionType } from '../../shared/snapshot.ts';
import type { Queryable } from '../../store/db.ts';
import { ENDPOINT_COLUMNS, type EndpointRow } from '../../store/endpoints.ts';
import * as store from '../../store/rate-limit-rules.ts';
import {
  MAX_CONDITIONS_PER_RULE,
  MAX_RULES_PER_ENDPOINT,
  RULE_STATUSES,
  type ConditionInput,
  type RateLimitConditionRow,
  type RateLimitRuleRow,
  type RuleInput,
} from '../../store/rate-limit-rules.ts';
import type { Caller } from '../caller.ts';
import { canSee, requireEndpointEntitlement } from '../endpoint-access.ts';
import { requireJsonContentType, type ControlApp, type ControlDeps } from '../http.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';

const literals = <T extends readonly string[]>(values: T) => Type.Union(values.map((v) => Type.Literal(v))) as unknown as TUnion<TLiteral<T[number]>[]>;

const FEATURE: Entitlement = 'custom_rate_limits';
const PAGE_SIZE_DEFAULT = 20;
const PAGE_SIZE_MAX = 100;
const MAX_NAME_LENGTH = 100;
const MAX_DESCRIPTION_LENGTH = 1000;
const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;
/** Largest window: the schema's CHECK holds it too (longer windows would keep day-long state per visitor on every edge). */
const MAX_WINDOW_SECONDS = 86400;
const MAX_REQUESTS_PER_WINDOW = 1_000_000_000;
/**
 * RFC 9745's Deprecation date of the legacy integer ids: already deprecated (docs/api.md "Versioning and deprecations" 2) when the uuid
 * paths came; sent as `@<unix seconds>`. The Sunset instant is configuration (EDGE_RATE_LIMIT_ID_SUNSET).
 */
const LEGACY_IDS_DEPRECATED_AT = Date.parse('2026-01-01T00:00:00Z');

// ---------------------------------------------------------------------------------------------------------------
// Legacy integer ids
// ---------------------------------------------------------------------------------------------------------------

type Ref = { uuid: string } | { id: number };

interface LegacyIds {
  sunset: number;
  /** Responses still carry the legacy `id` / `rule_id` of conditions. */
  live: boolean;
}

function legacyIds(sunsetSetting: string): LegacyIds {
  const sunset = Date.parse(sunsetSetting);
  return { sunset, live: Date.now() < sunset };
}

/**
 * A rule or condition id of the path: a uuid, or (until the sunset) a legacy integer id, which earns the response
 * `Deprecation` (RFC 9745) and `Sunset` (RFC 8594) headers; after the sunset an integer is 400 integer_id_unsupported.
 */
function pathRef(value: string, what: 'rule' | 'condition', reply: FastifyReply, legacy: LegacyIds): Ref {
  if (isUuid(value)) return { uuid: value.toLowerCase() };
  if (/^[0-9]{1,19}$/.test(value)) {
    const sunsetAt = new Date(legacy.sunset);
    if (Date.now() >= legacy.sunset) {
      throw fail.integer_id_unsupported(`Integer ${what} ids were retired on ${sunsetAt.toISOString()}; use the ${what} uuid`, {
        [`${what}_id`]: value,
        sunset: sunsetAt.toISOString(),
      });
    }
    const id = parseInt64(value);
    if (id === null) throw fail.invalid_id(`Invalid ${what} id`, `the ${what} id must be a UUID (or, until the sunset, a positive integer)`);
    reply.header('deprecation', `@${Math.floor(LEGACY_IDS_DEPRECATED_AT / 1000)}`);
    reply.header('sunset', sunsetAt.toUTCString());
    return { id };
  }
  throw fail.invalid_id(`Invalid ${what} id`, `the ${what} id must be a UUID`);
}

// ---------------------------------------------------------------------------------------------------------------
// Validation and canonical form
// ---------------------------------------------------------------------------------------------------------------

const badCondition = (detail: string) => fail.bad_request('Bad request', detail);

interface ConditionBodyT {
  type?: unknown;
  operator?: unknown;
  value?: unknown;
  logical_operator?: unknown;
}

/**
 * One condition of a body → canonical form, or 400 `Bad request` with the reason in `detail` (docs/api.md). Types are
 * checked here rather than by the schema, so every condition problem has that one shape. `where` prefixes the detail
 * inside a rule body ("conditions[2]: …").
 */
export function conditionInput(raw: ConditionBodyT, where = ''): ConditionInput {
  const text = (field: keyof ConditionBodyT): string | undefined => {
    const v = raw[field];
    if (v === undefined || v === null) return undefined;
    if (typeof v === 'string') return v;
    if (field === 'value' && typeof v === 'number' && Number.isFinite(v)) return String(v);
    throw badCondition(`${where}${field} must be a string`);
  };
  const type = text('type');
  if (type === undefined || type === '') throw badCondition(`${where}type is required; one of ${RATE_LIMIT_CONDITION_TYPES.join(', ')}`);
  const operator = text('operator');
  if (operator === undefined || operator === '') {
    const known = (RATE_LIMIT_CONDITION_TYPES as readonly string[]).includes(type);
    const allowed = known ? `; ${type} allows ${OPERATORS_BY_TYPE[type as RateLimitConditionType].join(', ')}` : '';
    throw badCondition(`${where}operator is required${allowed}`);
  }
  const joiner = (text('logical_operator') ?? 'AND').toUpperCase();
  if (joiner !== 'AND' && joiner !== 'OR') throw badCondition(`${where}logical_operator must be AND or OR`);
  const value = text('value');
  const op = operator.toLowerCase();
  if (value === undefined && op !== 'exists' && op !== 'not_exists') throw badCondition(`${where}value is required for operator ${operator}`);
  try {
    const c = canonicalRateLimitCondition(type, operator, value);
    return { type: c.type, operator: c.operator, value: c.value, logical_operator: joiner };
  } catch (err) {
    if (err instanceof RateLimitConditionError) throw badCondition(`${where}${err.detail}`);
    throw err;
  }
}

interface RuleBodyT {
  endpoint_id?: string | number;
  name: string;
  description?: string;
  requests_per_window: number;
  window_size_seconds: number;
  action: 'block' | 'throttle';
  status?: (typeof RULE_STATUSES)[number];
  priority?: number;
  conditions?: ConditionBodyT[];
  scope?: 'edge' | 'cluster';
  fail_mode?: 'open' | 'closed';
  source_ip?: string | null;
}

/**
 * The deprecated rule-level `source_ip` (docs/api.md "Versioning and deprecations" 4) as a `source_ip in` condition. It restricted the
 * whole rule, so it joins every OR group: s ∧ (g1 ∨ g2) = (s ∧ g1) ∨ (s ∧ g2). Null, "" and "*" meant all addresses.
 */
function withLegacySourceIp(conditions: ConditionInput[], sourceIp: string | null | undefined): ConditionInput[] {
  const raw = (sourceIp ?? '').trim();
  if (raw === '' || raw === '*') return conditions;
  const source = conditionInput({ type: 'source_ip', operator: 'in', value: raw }, 'source_ip: ');
  if (conditions.length === 0) return [source];
  return conditionGroups(conditions).flatMap((group) => [source, ...group]);
}

/** A rule body → the stored form; omitted optional fields take their defaults (a full write, also for PUT). */
function ruleInput(body: RuleBodyT): RuleInput {
  const name = body.name.trim();
  if (name === '') throw fail.invalid_request('Invalid request body', 'name must not be empty');
  if (CONTROL_CHARS.test(name) || name.includes('\t')) throw fail.invalid_request('Invalid request body', 'name: control characters are not allowed');
  const description = body.description ?? '';
  if (CONTROL_CHARS.test(description.replace(/\n/g, ''))) throw fail.invalid_request('Invalid request body', 'description: control characters are not allowed');
  const conditions = withLegacySourceIp(
    (body.conditions ?? []).map((c, i) => conditionInput(c, `conditions[${i}]: `)),
    body.source_ip,
  );
  if (conditions.length > MAX_CONDITIONS_PER_RULE) throw badCondition(`a rule has at most ${MAX_CONDITIONS_PER_RULE} conditions`);
  return {
    name,
    description,
    requests_per_window: body.requests_per_window,
    window_size_seconds: body.window_size_seconds,
    action: body.action,
    status: body.status ?? 'active',
    priority: body.priority ?? 0,
    scope: body.scope ?? 'edge',
    fail_mode: body.fail_mode ?? 'open',
    conditions,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------------------------------------------

const ConditionView = Type.Object(
  {
    uuid: Uuid(),
    rule_uuid: Uuid(),
    id: Type.Optional(Type.Integer({ deprecated: true, description: 'Legacy integer id; present until the sunset' })),
    rule_id: Type.Optional(Type.Integer({ deprecated: true, description: 'Legacy integer id of the rule; present until the sunset' })),
    condition_type: literals(RATE_LIMIT_CONDITION_TYPES),
    operator: Type.String(),
    condition_value: Type.String({ description: 'Canonical form; for header/cookie `name=value`, or `name` with exists/not_exists' }),
    logical_operator: literals(['AND', 'OR'] as const),
    created_at: Timestamp(),
  },
  { description: 'Rate-limit condition (as stored)' },
);

const RuleView = Type.Object(
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

const ConditionBody = Strict(
  {
    type: Type.Optional(Type.Unknown({ description: `Required: ${RATE_LIMIT_CONDITION_TYPES.join(', ')}` })),
    operator: Type.Optional(Type.Unknown({ description: 'Required: one the type allows (docs/rate-limits.md "Rules and conditions")' })),
    value: Type.Optional(Type.Unknown({ description: 'String; required except for exists / not_exists, which take the header or cookie name' })),
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
  source_ip: Type.Optional(
    Nullable(Type.String({ maxLength: 4096, deprecated: true, description: 'Deprecated: stored as a source_ip `in` condition; null, "" or `*` = all' })),
  ),
};
const EndpointRef = Type.Union([Type.String({ maxLength: 64 }), Type.Integer({ minimum: 1 })], { description: 'Endpoint uuid, or its numeric id' });
const CreateBody = Strict({ endpoint_id: EndpointRef, ...RuleFields });
const ReplaceBody = Strict({ endpoint_id: Type.Optional(EndpointRef), ...RuleFields });

const RuleParams = Type.Object({ uuid: Type.String({ description: 'Rule uuid (legacy integer id until the sunset)' }) });
const ConditionParams = Type.Object({
  uuid: Type.String({ description: 'Rule uuid (legacy integer id until the sunset)' }),
  condition_uuid: Type.String({ description: 'Condition uuid (legacy integer id until the sunset)' }),
});
const Errors409 = { ...ErrorResponses, 409: ErrorBody, 415: ErrorBody };

const EndpointSummary = Type.Object({
  id: Type.Integer(),
  uuid: Uuid(),
  hostname: Type.String(),
  subdomain: Type.String(),
  domain_id: Nullable(Type.Integer()),
  rules: Type.Integer(),
  active_rules: Type.Integer(),
});

const ListView = Type.Object({
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

function conditionView(c: RateLimitConditionRow, legacy: LegacyIds) {
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

function ruleView(r: RateLimitRuleRow, legacy: LegacyIds) {
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
    hit_count: r.hit_count,
    last_matched: iso(r.last_matched),
    hits_daily: r.hits_daily,
    shadowed: r.shadowed,
    shadow_reason: r.shadow_reason,
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
  };
}

const endpointSummary = (e: store.RuleEndpointRow) => ({
  id: e.id,
  uuid: e.uuid,
  hostname: e.hostname,
  subdomain: e.subdomain,
  domain_id: e.domain_id,
  rules: e.rules,
  active_rules: e.active_rules,
});

// ---------------------------------------------------------------------------------------------------------------
// Access
// ---------------------------------------------------------------------------------------------------------------

/** Writes: suspended account, then the permission, then (for the caller's own account) the plan. */
function precheckWrite(caller: Caller): void {
  caller.requirePermission('rate_limits:update');
  // Admins may act on endpoints of other accounts, whose plan decides (checked once the endpoint is known).
  if (!caller.isAdmin) caller.requireEntitlement(FEATURE);
}

const ruleNotFound = () => fail.not_found('Rate-limit rule not found');

/** A rule the caller may see; another account's reads as missing (docs/api.md: same status on purpose). */
async function visibleRule(q: Queryable, caller: Caller, ref: Ref): Promise<RateLimitRuleRow> {
  const rule = await store.findRateLimitRule(q, ref);
  if (!rule || !canSee(caller, rule)) throw ruleNotFound();
  return rule;
}

/** An endpoint by uuid or numeric id, optionally row-locked; null when missing. */
async function findEndpoint(q: Queryable, ref: { uuid: string } | { id: number }, forUpdate: boolean): Promise<EndpointRow | null> {
  const [where, value] = 'uuid' in ref ? ['uuid = $1', ref.uuid] : ['id = $1', ref.id];
  const { rows } = await q.query<EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM endpoints WHERE ${where}${forUpdate ? ' FOR UPDATE' : ''}`, [value]);
  return rows[0] ?? null;
}

/** An endpoint_id of a body or query: a uuid or a positive integer; null when it is neither. */
function endpointRef(value: string | number): { uuid: string } | { id: number } | null {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value > 0 ? { id: value } : null;
  if (isUuid(value)) return { uuid: value.toLowerCase() };
  const id = parseInt64(value);
  return id === null ? null : { id };
}

/**
 * The endpoint a rule write lands on, locked (concurrent writes to one endpoint's rules publish one after the other,
 * each seeing the other's rules), once its plan includes custom rate limits and it is not paused.
 */
async function writableEndpoint(tx: Queryable, caller: Caller, plans: Record<string, Plan>, ref: { uuid: string } | { id: number }): Promise<EndpointRow> {
  const endpoint = await findEndpoint(tx, ref, true);
  if (!endpoint || !canSee(caller, endpoint)) throw fail.not_found('Endpoint not found');
  await requireEndpointEntitlement(tx, caller, plans, endpoint, FEATURE);
  if (endpoint.paused_at) throw fail.quota_paused();
  return endpoint;
}

/** The rule of a write, re-read under its endpoint's lock (it may have been deleted meanwhile). */
async function writableRule(tx: Queryable, caller: Caller, plans: Record<string, Plan>, ref: Ref): Promise<RateLimitRuleRow> {
  const found = await visibleRule(tx, caller, ref);
  await writableEndpoint(tx, caller, plans, { id: found.endpoint_id });
  const rule = await store.findRateLimitRule(tx, { id: found.id });
  if (!rule) throw ruleNotFound();
  return rule;
}

async function ruleCondition(tx: Queryable, rule: RateLimitRuleRow, ref: Ref): Promise<RateLimitConditionRow> {
  const condition = await store.findCondition(tx, rule.id, ref);
  if (!condition) throw fail.not_found('Rate-limit condition not found', 'no such condition on this rule');
  return condition;
}

/** page and limit are forgiving, as in the endpoint list: not a positive integer → the default; limit clamped. */
function lenientPositiveInt(value: string | undefined, fallback: number): number {
  if (value === undefined || !/^[0-9]{1,20}$/.test(value)) return fallback;
  const n = Number(value);
  return n >= 1 ? n : fallback;
}

// ---------------------------------------------------------------------------------------------------------------
// Routes
// ---------------------------------------------------------------------------------------------------------------

export function rateLimitRoutes(app: ControlApp, { db, config }: ControlDeps): void {
  const plans = config.plans;
  const TAGS = ['rate-limits'];
  const legacy = () => legacyIds(config.rateLimitIdSunset);
  const WRITE_NOTE =
    'Needs rate_limits:update in the active account and the custom_rate_limits plan entitlement (403 with code entitlement_required); ' +
    'a suspended account is 403 account_suspended; a paused endpoint is 409 quota_paused. Edges in every region get the change ' +
    'when it is saved; the endpoint’s shadowed rules are recomputed.';
  const LEGACY_NOTE =
    'Legacy integer ids are accepted in the path until EDGE_RATE_LIMIT_ID_SUNSET, answered with Deprecation and Sunset headers; after it, ' +
    '400 integer_id_unsupported.';

  app.get(
    '/v1/firewall/rate-limits',
    {
      schema: {
        summary: 'List rate-limit rules',
        description:
          'The active account’s rules, by endpoint then evaluation order (priority, id). page and limit (alias page_size) that are ' +
          `not positive integers fall back to 1 and ${PAGE_SIZE_DEFAULT}; limit above ${PAGE_SIZE_MAX} is clamped. An endpoint_id that ` +
          'names no endpoint of the caller gives an empty page. Needs endpoints:read.',
        tags: TAGS,
        querystring: Type.Object({
          endpoint_id: Type.Optional(Type.String({ maxLength: 64, description: 'Endpoint uuid (preferred) or numeric id' })),
          status: Type.Optional(Type.String({ description: 'active, inactive or disabled' })),
          page: Type.Optional(Type.String()),
          limit: Type.Optional(Type.String()),
          page_size: Type.Optional(Type.String({ description: 'Alias of limit' })),
          search: Type.Optional(Type.String({ maxLength: 200, description: 'Substring of the rule name, case-insensitive' })),
          q: Type.Optional(Type.String({ maxLength: 200, description: 'Alias of search' })),
        }),
        response: { 200: ListView, ...ErrorResponses },
      },
    },
    async (req) => {
      const { caller } = req;
      caller.requirePermission('endpoints:read');
      const q = req.query;
      const page = lenientPositiveInt(q.page, 1);
      const limit = Math.min(lenientPositiveInt(q.limit ?? q.page_size, PAGE_SIZE_DEFAULT), PAGE_SIZE_MAX);
      if (page * limit > config.listMaxOffset) {
        throw fail.pagination_too_deep(`page × limit may not exceed ${config.listMaxOffset}`, { page, limit, max: config.listMaxOffset });
      }
      if (q.status !== undefined && q.status !== '' && !(RULE_STATUSES as readonly string[]).includes(q.status)) {
        throw fail.invalid_query('Invalid query parameter status', `status is one of ${RULE_STATUSES.join(', ')}`);
      }
      const status = q.status ? (q.status as store.RuleStatus) : undefined;
      const search = q.search ?? q.q;

      const filter: store.RuleFilter = { accountId: caller.account.id, status, search: search || undefined };
      let empty = false;
      if (q.endpoint_id !== undefined && q.endpoint_id !== '') {
        const ref = endpointRef(q.endpoint_id);
        if (!ref) throw fail.invalid_query('Invalid query parameter endpoint_id', 'endpoint_id is an endpoint uuid or a positive integer id');
        const endpoint = await findEndpoint(db, ref, false);
        if (!endpoint || !canSee(caller, endpoint)) empty = true;
        else {
          filter.endpointId = endpoint.id;
          // Admins may list another account's endpoint.
          if (endpoint.account_id !== caller.account.id) filter.accountId = undefined;
        }
      }
      const { rows, total } = empty ? { rows: [], total: 0 } : await store.listRateLimitRules(db, filter, limit, (page - 1) * limit);
      const endpoints = await store.listRuleEndpoints(db, { accountId: caller.account.id });
      const known = new Set(endpoints.map((e) => e.id));
      const others = [...new Set(rows.map((r) => r.endpoint_id).filter((id) => !known.has(id)))];
      const named = others.length > 0 ? await store.listRuleEndpoints(db, { ids: others }) : [];
      const endpointByID: Record<string, ReturnType<typeof endpointSummary>> = {};
      const domainByID: Record<string, string> = {};
      for (const e of [...endpoints, ...named]) {
        endpointByID[String(e.id)] = endpointSummary(e);
        if (e.domain_id !== null && e.domain_name !== null) domainByID[String(e.domain_id)] = e.domain_name;
      }
      const withActive = endpoints.filter((e) => e.active_rules > 0).length;
      const ids = legacy();
      return {
        rules: rows.map((r) => ruleView(r, ids)),
        pagination: { page, limit, total, totalPages: Math.ceil(total / limit) },
        endpoints: endpoints.map(endpointSummary),
        endpointByID,
        domainByID,
        defaultDomain: config.baseDomain,
        posture: {
          endpoints_with_active_rules: withActive,
          endpoints_without_active_rules: endpoints.length - withActive,
          shadowed_rules: await store.countShadowedRules(db, caller.account.id),
        },
      };
    },
  );

  app.post(
    '/v1/firewall/rate-limits',
    {
      preValidation: requireJsonContentType,
      schema: {
        summary: 'Create a rate-limit rule',
        description:
          'A rule for one endpoint (endpoint_id: uuid or numeric id). Defaults: status active, priority 0, scope edge, fail_mode ' +
          'open (meaningful for scope cluster only: what an edge does while Redis is unreachable), no conditions (every request). ' +
          'A condition failing validation is 400 with error "Bad request" and the reason in detail. The deprecated source_ip ' +
          `becomes a source_ip condition. At most ${MAX_RULES_PER_ENDPOINT} rules per endpoint, ${MAX_CONDITIONS_PER_RULE} conditions per rule. ` +
          WRITE_NOTE,
        tags: TAGS,
        body: CreateBody,
        response: { 201: RuleView, ...Errors409 },
      },
    },
    async (req, reply) => {
      precheckWrite(req.caller);
      const input = ruleInput(req.body as RuleBodyT);
      const ref = endpointRef(req.body.endpoint_id);
      if (!ref) throw fail.invalid_request('Invalid request body', 'endpoint_id is an endpoint uuid or a positive integer id');
      const rule = await db.transaction(async (tx) => {
        const endpoint = await writableEndpoint(tx, req.caller, plans, ref);
        const count = await store.countRules(tx, endpoint.id);
        if (count >= MAX_RULES_PER_ENDPOINT) {
          throw fail.invalid_request(`An endpoint has at most ${MAX_RULES_PER_ENDPOINT} rate-limit rules`, { limit: MAX_RULES_PER_ENDPOINT, count });
        }
        return store.insertRule(tx, endpoint.id, req.caller.user.id, input);
      });
      return reply.status(201).header('location', `/v1/firewall/rate-limits/${rule.uuid}`).send(ruleView(rule, legacy()));
    },
  );

  app.get(
    '/v1/firewall/rate-limits/:uuid',
    {
      schema: {
        summary: 'Get a rate-limit rule',
        description: `404 when missing or in another account. Needs endpoints:read. ${LEGACY_NOTE}`,
        tags: TAGS,
        params: RuleParams,
        response: { 200: RuleView, ...ErrorResponses },
      },
    },
    async (req, reply) => {
      req.caller.requirePermission('endpoints:read');
      const ids = legacy();
      const rule = await visibleRule(db, req.caller, pathRef(req.params.uuid, 'rule', reply, ids));
      return ruleView(rule, ids);
    },
  );

  app.put(
    '/v1/firewall/rate-limits/:uuid',
    {
      preValidation: requireJsonContentType,
      schema: {
        summary: 'Replace a rate-limit rule',
        description:
          'Full update with the fields of create: omitted optional fields take their defaults, and the conditions are replaced ' +
          '(new condition uuids). endpoint_id may be omitted; a rule cannot move to another endpoint (400). ' +
          `${WRITE_NOTE} ${LEGACY_NOTE}`,
        tags: TAGS,
        params: RuleParams,
        body: ReplaceBody,
        response: { 200: RuleView, ...Errors409 },
      },
    },
    async (req, reply) => {
      precheckWrite(req.caller);
      const ids = legacy();
      const ref = pathRef(req.params.uuid, 'rule', reply, ids);
      const input = ruleInput(req.body as RuleBodyT);
      const updated = await db.transaction(async (tx) => {
        const rule = await writableRule(tx, req.caller, plans, ref);
        if (req.body.endpoint_id !== undefined) {
          const to = endpointRef(req.body.endpoint_id);
          const same = to !== null && ('uuid' in to ? to.uuid === rule.endpoint_uuid : to.id === rule.endpoint_id);
          if (!same) throw fail.invalid_request('Invalid request body', 'endpoint_id: a rule cannot move to another endpoint; create a new rule there');
        }
        return store.replaceRule(tx, rule, input);
      });
      return ruleView(updated, ids);
    },
  );

  app.delete(
    '/v1/firewall/rate-limits/:uuid',
    {
      schema: {
        summary: 'Delete a rate-limit rule',
        description: `${WRITE_NOTE} ${LEGACY_NOTE}`,
        tags: TAGS,
        params: RuleParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...Errors409 },
      },
    },
    async (req, reply) => {
      precheckWrite(req.caller);
      const ref = pathRef(req.params.uuid, 'rule', reply, legacy());
      await db.transaction(async (tx) => {
        const rule = await writableRule(tx, req.caller, plans, ref);
        await store.deleteRule(tx, rule);
      });
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/v1/firewall/rate-limits/:uuid/conditions',
    {
      preValidation: requireJsonContentType,
      schema: {
        summary: 'Add a condition to a rate-limit rule',
        description:
          'Appended last in the evaluation order. Body as for the condition PUT; validation failures are 400 with error "Bad request" ' +
          `and the reason in detail. ${WRITE_NOTE} ${LEGACY_NOTE}`,
        tags: TAGS,
        params: RuleParams,
        body: ConditionBody,
        response: { 201: ConditionView, ...Errors409 },
      },
    },
    async (req, reply) => {
      precheckWrite(req.caller);
      const ids = legacy();
      const ref = pathRef(req.params.uuid, 'rule', reply, ids);
      const input = conditionInput(req.body);
      const condition = await db.transaction(async (tx) => {
        const rule = await writableRule(tx, req.caller, plans, ref);
        if (rule.conditions.length >= MAX_CONDITIONS_PER_RULE) throw badCondition(`a rule has at most ${MAX_CONDITIONS_PER_RULE} conditions`);
        return store.appendCondition(tx, rule, input);
      });
      return reply
        .status(201)
        .header('location', `/v1/firewall/rate-limits/${condition.rule_uuid}/conditions/${condition.uuid}`)
        .send(conditionView(condition, ids));
    },
  );

  app.put(
    '/v1/firewall/rate-limits/:uuid/conditions/:condition_uuid',
    {
      preValidation: requireJsonContentType,
      schema: {
        summary: 'Replace a rate-limit condition',
        description:
          'Full write of one condition: type and operator required, value required except for exists / not_exists (which take the ' +
          'header or cookie name), logical_operator AND (default) or OR. The condition keeps its uuid and position. A condition ' +
          'failing validation is 400 with error "Bad request" and the reason in detail; 404 when the condition is missing or ' +
          `belongs to another rule; 415 without Content-Type application/json. ${WRITE_NOTE} ${LEGACY_NOTE}`,
        tags: TAGS,
        params: ConditionParams,
        body: ConditionBody,
        response: { 200: ConditionView, ...Errors409 },
      },
    },
    async (req, reply) => {
      precheckWrite(req.caller);
      const ids = legacy();
      const ruleRef = pathRef(req.params.uuid, 'rule', reply, ids);
      const conditionRef = pathRef(req.params.condition_uuid, 'condition', reply, ids);
      const input = conditionInput(req.body);
      const condition = await db.transaction(async (tx) => {
        const rule = await writableRule(tx, req.caller, plans, ruleRef);
        const existing = await ruleCondition(tx, rule, conditionRef);
        return store.replaceCondition(tx, rule, existing.id, input);
      });
      return conditionView(condition, ids);
    },
  );

  app.delete(
    '/v1/firewall/rate-limits/:uuid/conditions/:condition_uuid',
    {
      schema: {
        summary: 'Delete a rate-limit condition',
        description: `The others keep their order. 404 when the condition is missing or belongs to another rule. ${WRITE_NOTE} ${LEGACY_NOTE}`,
        tags: TAGS,
        params: ConditionParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...Errors409 },
      },
    },
    async (req, reply) => {
      precheckWrite(req.caller);
      const ids = legacy();
      const ruleRef = pathRef(req.params.uuid, 'rule', reply, ids);
      const conditionRef = pathRef(req.params.condition_uuid, 'condition', reply, ids);
      await db.transaction(async (tx) => {
        const rule = await writableRule(tx, req.caller, plans, ruleRef);
        const existing = await ruleCondition(tx, rule, conditionRef);
        await store.deleteCondition(tx, rule, existing.id);
      });
      return reply.status(204).send(null);
    },
  );
}
