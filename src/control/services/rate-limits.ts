// Firewall rate-limit rules as domain operations (docs/rate-limits.md): validation into the canonical form the edge
// compiles, access (endpoint visibility, plan entitlement, paused endpoints) and the store writes, which publish themselves.
import type { Config } from '../../shared/config.ts';
import { fail, invalid } from '../../shared/errors.ts';
import type { Entitlement, Plan } from '../../shared/plans.ts';
import { CONTROL_CHARS } from '../../shared/match/condition.ts';
import { canonicalRateLimitCondition, conditionGroups, OPERATORS_BY_TYPE, RateLimitConditionError } from '../../shared/rate-limit/conditions.ts';
import { isUuid, parseInt64 } from '../../shared/schema.ts';
import { RATE_LIMIT_CONDITION_TYPES, type RateLimitConditionType } from '../../shared/snapshot.ts';
import type { Database, Queryable } from '../../store/db.ts';
import { ENDPOINT_COLUMNS, type EndpointRow } from '../../store/endpoints.ts';
import * as store from '../../store/rate-limit-rules.ts';
import {
  MAX_CONDITIONS_PER_RULE,
  MAX_RULES_PER_ENDPOINT,
  RULE_STATUSES,
  type ConditionInput,
  type RateLimitConditionRow,
  type RateLimitRuleRow,
  type RuleEndpointRow,
  type RuleInput,
} from '../../store/rate-limit-rules.ts';
import type { Caller } from '../caller.ts';
import { canSee, requireEndpointEntitlement } from '../endpoint-access.ts';
import { uuidOrId, type UuidOrId } from '../validation.ts';

export const RATE_LIMIT_FEATURE: Entitlement = 'custom_rate_limits';
export const PAGE_SIZE_DEFAULT = 20;
export const PAGE_SIZE_MAX = 100;
/**
 * RFC 9745's Deprecation date of the legacy integer ids: already deprecated (docs/api.md "Versioning and deprecations" 2) when the uuid
 * paths came; sent as `@<unix seconds>`. The Sunset instant is configuration (EDGE_RATE_LIMIT_ID_SUNSET).
 */
const LEGACY_IDS_DEPRECATED_AT = Date.parse('2026-01-01T00:00:00Z');

// ---------------------------------------------------------------------------------------------------------------
// Legacy integer ids
// ---------------------------------------------------------------------------------------------------------------

type Ref = UuidOrId;

export interface LegacyIds {
  sunset: number;
  /** Responses still carry the legacy `id` / `rule_id` of conditions. */
  live: boolean;
}

/** Where a legacy id's response headers go (the route's reply), set as soon as the id is read, errors included. */
export type DeprecationNotice = (headers: Record<string, string>) => void;

function legacyIds(sunsetSetting: string): LegacyIds {
  const sunset = Date.parse(sunsetSetting);
  return { sunset, live: Date.now() < sunset };
}

/**
 * A rule or condition id of the path: a uuid, or (until the sunset) a legacy integer id, which earns the response
 * `Deprecation` (RFC 9745) and `Sunset` (RFC 8594) headers; after the sunset an integer is 400 integer_id_unsupported.
 */
function pathRef(value: string, what: 'rule' | 'condition', legacy: LegacyIds, notice: DeprecationNotice): Ref {
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
    if (id === null) throw fail.invalid_id(`Invalid ${what} id`, { field: 'id', reason: `the ${what} id must be a UUID (or, until the sunset, a positive integer)` });
    notice({ deprecation: `@${Math.floor(LEGACY_IDS_DEPRECATED_AT / 1000)}`, sunset: sunsetAt.toUTCString() });
    return { id };
  }
  throw fail.invalid_id(`Invalid ${what} id`, { field: 'id', reason: `the ${what} id must be a UUID` });
}

// ---------------------------------------------------------------------------------------------------------------
// Validation and canonical form
// ---------------------------------------------------------------------------------------------------------------

/** The API contract fixes the body of a condition refusal (docs/api.md): 400 `Bad request`, the reason as a string in `detail`. */
const badCondition = (detail: string) => fail.bad_request('Bad request', detail);

export interface ConditionBody {
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
export function conditionInput(raw: ConditionBody, where = ''): ConditionInput {
  const text = (field: keyof ConditionBody): string | undefined => {
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

export interface RuleBody {
  endpoint_id?: string | number;
  name: string;
  description?: string;
  requests_per_window: number;
  window_size_seconds: number;
  action: 'block' | 'throttle';
  status?: (typeof RULE_STATUSES)[number];
  priority?: number;
  conditions?: ConditionBody[];
  scope?: 'edge' | 'cluster';
  fail_mode?: 'open' | 'closed';
  tags?: string[];
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
function ruleInput(body: RuleBody): RuleInput {
  const name = body.name.trim();
  if (name === '') throw invalid('name', 'must not be empty');
  if (CONTROL_CHARS.test(name) || name.includes('\t')) throw invalid('name', 'control characters are not allowed');
  const description = body.description ?? '';
  if (CONTROL_CHARS.test(description.replace(/\n/g, ''))) throw invalid('description', 'control characters are not allowed');
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
    tags: body.tags ?? [],
    conditions,
  };
}

/** page and limit are forgiving, as in the endpoint list: not a positive integer → the default; limit clamped. */
function lenientPositiveInt(value: string | undefined, fallback: number): number {
  if (value === undefined || !/^[0-9]{1,20}$/.test(value)) return fallback;
  const n = Number(value);
  return n >= 1 ? n : fallback;
}

/** An endpoint_id of a body or query: a uuid or a positive integer; null when it is neither. */
const endpointRef = uuidOrId;

// ---------------------------------------------------------------------------------------------------------------
// Access
// ---------------------------------------------------------------------------------------------------------------

/**
 * Writes need the custom_rate_limits entitlement. The route's declared permission (rate_limits:update, which also
 * refuses a suspended account) has been checked; admins may act on endpoints of other accounts, whose plan decides
 * once the endpoint is known.
 */
function precheckWrite(caller: Caller): void {
  if (!caller.isAdmin) caller.requireEntitlement(RATE_LIMIT_FEATURE);
}

const ruleNotFound = () => fail.not_found('Rate-limit rule not found');

/** A rule the caller may see; another account's reads as missing (docs/api.md: same status on purpose). */
async function visibleRule(q: Queryable, caller: Caller, ref: Ref): Promise<RateLimitRuleRow> {
  const rule = await store.findRateLimitRule(q, ref);
  if (!rule || !canSee(caller, rule)) throw ruleNotFound();
  return rule;
}

/** An endpoint by uuid or numeric id, optionally row-locked; null when missing. */
async function findEndpoint(q: Queryable, ref: Ref, forUpdate: boolean): Promise<EndpointRow | null> {
  const [where, value] = 'uuid' in ref ? ['uuid = $1', ref.uuid] : ['id = $1', ref.id];
  const { rows } = await q.query<EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM endpoints WHERE ${where}${forUpdate ? ' FOR UPDATE' : ''}`, [value]);
  return rows[0] ?? null;
}

/**
 * The endpoint a rule write lands on, locked (concurrent writes to one endpoint's rules publish one after the other,
 * each seeing the other's rules), once its plan includes custom rate limits and it is not paused.
 */
async function writableEndpoint(tx: Queryable, caller: Caller, plans: Record<string, Plan>, ref: Ref): Promise<EndpointRow> {
  const endpoint = await findEndpoint(tx, ref, true);
  if (!endpoint || !canSee(caller, endpoint)) throw fail.not_found('Endpoint not found');
  await requireEndpointEntitlement(tx, caller, plans, endpoint, RATE_LIMIT_FEATURE);
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

// ---------------------------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------------------------

export interface ListQuery {
  endpoint_id?: string;
  status?: string;
  page?: string;
  limit?: string;
  page_size?: string;
  search?: string;
  q?: string;
}

export interface RuleList {
  rows: RateLimitRuleRow[];
  total: number;
  page: number;
  limit: number;
  /** The active account's endpoints. */
  endpoints: RuleEndpointRow[];
  /** Endpoints of other accounts that listed rules belong to (admins). */
  named: RuleEndpointRow[];
  shadowed: number;
  legacy: LegacyIds;
}

/** Path ids of a rule operation, as sent; `notice` receives a legacy id's Deprecation and Sunset headers. */
export interface RulePath {
  rule: string;
  notice: DeprecationNotice;
}

export function rateLimitService({ db, config }: { db: Database; config: Config }) {
  const plans = config.plans;
  const legacy = () => legacyIds(config.rateLimitIdSunset);

  return {
    /** The active account's rules, by endpoint then evaluation order; forgiving page and limit, strict status. */
    async list(caller: Caller, q: ListQuery): Promise<RuleList> {
      const page = lenientPositiveInt(q.page, 1);
      const limit = Math.min(lenientPositiveInt(q.limit ?? q.page_size, PAGE_SIZE_DEFAULT), PAGE_SIZE_MAX);
      if (page * limit > config.listMaxOffset) {
        throw fail.pagination_too_deep(`page × limit may not exceed ${config.listMaxOffset}`, { page, limit, max: config.listMaxOffset });
      }
      if (q.status !== undefined && q.status !== '' && !(RULE_STATUSES as readonly string[]).includes(q.status)) {
        throw fail.invalid_query('Invalid query parameter status', { field: 'status', reason: `one of ${RULE_STATUSES.join(', ')}` });
      }
      const status = q.status ? (q.status as store.RuleStatus) : undefined;
      const search = q.search ?? q.q;

      const filter: store.RuleFilter = { accountId: caller.account.id, status, search: search || undefined };
      let empty = false;
      if (q.endpoint_id !== undefined && q.endpoint_id !== '') {
        const ref = endpointRef(q.endpoint_id);
        if (!ref) throw fail.invalid_query('Invalid query parameter endpoint_id', { field: 'endpoint_id', reason: 'an endpoint uuid or a positive integer id' });
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
      const shadowed = await store.countShadowedRules(db, caller.account.id);
      return { rows, total, page, limit, endpoints, named, shadowed, legacy: legacy() };
    },

    async get(caller: Caller, path: RulePath): Promise<{ rule: RateLimitRuleRow; legacy: LegacyIds }> {
      const ids = legacy();
      const rule = await visibleRule(db, caller, pathRef(path.rule, 'rule', ids, path.notice));
      return { rule, legacy: ids };
    },

    /** A rule for one endpoint, at most MAX_RULES_PER_ENDPOINT per endpoint. */
    async create(caller: Caller, body: RuleBody & { endpoint_id: string | number }): Promise<{ rule: RateLimitRuleRow; legacy: LegacyIds }> {
      precheckWrite(caller);
      const input = ruleInput(body);
      const ref = endpointRef(body.endpoint_id);
      if (!ref) throw invalid('endpoint_id', 'an endpoint uuid or a positive integer id');
      const rule = await db.transaction(async (tx) => {
        const endpoint = await writableEndpoint(tx, caller, plans, ref);
        const count = await store.countRules(tx, endpoint.id);
        if (count >= MAX_RULES_PER_ENDPOINT) {
          throw fail.invalid_request(`An endpoint has at most ${MAX_RULES_PER_ENDPOINT} rate-limit rules`, { field: 'endpoint_id', reason: `at most ${MAX_RULES_PER_ENDPOINT} rules per endpoint`, limit: MAX_RULES_PER_ENDPOINT, count });
        }
        return store.insertRule(tx, endpoint.id, caller.user.id, input);
      });
      return { rule, legacy: legacy() };
    },

    /** A full write with the fields of create; the rule stays on its endpoint. */
    async replace(caller: Caller, path: RulePath, body: RuleBody): Promise<{ rule: RateLimitRuleRow; legacy: LegacyIds }> {
      precheckWrite(caller);
      const ids = legacy();
      const ref = pathRef(path.rule, 'rule', ids, path.notice);
      const input = ruleInput(body);
      const updated = await db.transaction(async (tx) => {
        const rule = await writableRule(tx, caller, plans, ref);
        if (body.endpoint_id !== undefined) {
          const to = endpointRef(body.endpoint_id);
          const same = to !== null && ('uuid' in to ? to.uuid === rule.endpoint_uuid : to.id === rule.endpoint_id);
          if (!same) throw invalid('endpoint_id', 'a rule cannot move to another endpoint; create a new rule there');
        }
        return store.replaceRule(tx, rule, input);
      });
      return { rule: updated, legacy: ids };
    },

    async remove(caller: Caller, path: RulePath): Promise<void> {
      precheckWrite(caller);
      const ref = pathRef(path.rule, 'rule', legacy(), path.notice);
      await db.transaction(async (tx) => {
        const rule = await writableRule(tx, caller, plans, ref);
        await store.deleteRule(tx, rule);
      });
    },

    /** A condition appended last in the evaluation order. */
    async addCondition(caller: Caller, path: RulePath, body: ConditionBody): Promise<{ condition: RateLimitConditionRow; legacy: LegacyIds }> {
      precheckWrite(caller);
      const ids = legacy();
      const ref = pathRef(path.rule, 'rule', ids, path.notice);
      const input = conditionInput(body);
      const condition = await db.transaction(async (tx) => {
        const rule = await writableRule(tx, caller, plans, ref);
        if (rule.conditions.length >= MAX_CONDITIONS_PER_RULE) throw badCondition(`a rule has at most ${MAX_CONDITIONS_PER_RULE} conditions`);
        return store.appendCondition(tx, rule, input);
      });
      return { condition, legacy: ids };
    },

    /** A full write of one condition, which keeps its uuid and position. */
    async replaceCondition(
      caller: Caller,
      path: RulePath & { condition: string },
      body: ConditionBody,
    ): Promise<{ condition: RateLimitConditionRow; legacy: LegacyIds }> {
      precheckWrite(caller);
      const ids = legacy();
      const ruleRef = pathRef(path.rule, 'rule', ids, path.notice);
      const conditionRef = pathRef(path.condition, 'condition', ids, path.notice);
      const input = conditionInput(body);
      const condition = await db.transaction(async (tx) => {
        const rule = await writableRule(tx, caller, plans, ruleRef);
        const existing = await ruleCondition(tx, rule, conditionRef);
        return store.replaceCondition(tx, rule, existing.id, input);
      });
      return { condition, legacy: ids };
    },

    async removeCondition(caller: Caller, path: RulePath & { condition: string }): Promise<void> {
      precheckWrite(caller);
      const ids = legacy();
      const ruleRef = pathRef(path.rule, 'rule', ids, path.notice);
      const conditionRef = pathRef(path.condition, 'condition', ids, path.notice);
      await db.transaction(async (tx) => {
        const rule = await writableRule(tx, caller, plans, ruleRef);
        const existing = await ruleCondition(tx, rule, conditionRef);
        await store.deleteCondition(tx, rule, existing.id);
      });
    },
  };
}
