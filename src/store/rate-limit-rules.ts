// Firewall rate-limit rules, their ordered conditions and the per-day hit buckets, as the control API reads and
// writes them. Every write recomputes the endpoint's shadowed rules and touches the endpoint (docs/feed.md).
import type { Queryable } from './db.ts';
import { touch } from './feed-changes.ts';
import { escapeLike } from './endpoints.ts';
import { computeShadows, type ShadowRule } from '../shared/rate-limit/shadow.ts';
import type { RateLimitConditionType } from '../shared/snapshot.ts';

/** Bounds the API enforces (400 beyond them). */
export const MAX_RULES_PER_ENDPOINT = 100;
export const MAX_CONDITIONS_PER_RULE = 20;
/** Days in `hits_daily`, today included (docs/api.md: hit stats cover 7 days). */
export const HIT_DAYS = 7;

export const RULE_STATUSES = ['active', 'inactive', 'disabled'] as const;
export type RuleStatus = (typeof RULE_STATUSES)[number];

export interface RateLimitConditionRow {
  id: number;
  uuid: string;
  rule_id: number;
  rule_uuid: string;
  position: number;
  condition_type: RateLimitConditionType;
  operator: string;
  condition_value: string;
  logical_operator: 'AND' | 'OR';
  created_at: string;
}

/** A rule's own settings: what a write sets and a read answers. */
export interface RuleSettings {
  name: string;
  description: string;
  requests_per_window: number;
  window_size_seconds: number;
  action: 'block' | 'throttle';
  status: RuleStatus;
  priority: number;
  scope: 'edge' | 'cluster';
  fail_mode: 'open' | 'closed';
  /** Labels (docs/api.md "Tags"); not in the feed. */
  tags: string[];
}

export interface RateLimitRuleRow extends RuleSettings {
  id: number;
  uuid: string;
  endpoint_id: number;
  endpoint_uuid: string;
  account_id: number;
  user_id: number;
  hit_count: number;
  last_matched: Date | null;
  /** HIT_DAYS numbers, oldest first, today (UTC) last. */
  hits_daily: number[];
  shadowed: boolean;
  shadow_reason: string | null;
  created_at: Date;
  updated_at: Date;
  /** In position order. */
  conditions: RateLimitConditionRow[];
}

/** A condition as the API hands it over: validated and canonical. */
export interface ConditionInput {
  type: RateLimitConditionType;
  operator: string;
  value: string;
  logical_operator: 'AND' | 'OR';
}

export interface RuleInput extends RuleSettings {
  conditions: ConditionInput[];
}

const UTC_TODAY = `(now() AT TIME ZONE 'UTC')::date`;

const CONDITIONS_JSON = `COALESCE((
    SELECT json_agg(json_build_object('id', c.id, 'uuid', c.uuid::text, 'rule_id', c.rule_id, 'rule_uuid', r.uuid::text, 'position', c.position,
                                      'condition_type', c.condition_type, 'operator', c.operator, 'condition_value', c.condition_value,
                                      'logical_operator', c.logical_operator,
                                      'created_at', to_char(c.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) ORDER BY c.position)
    FROM rate_limit_conditions c WHERE c.rule_id = r.id), '[]'::json)`;

/** Oldest day first; a day without a row is 0. */
const HITS_DAILY = `ARRAY(SELECT COALESCE((SELECT h.hits FROM rate_limit_hits_daily h WHERE h.rule_id = r.id AND h.day = d.day), 0)::float8
    FROM (SELECT (${UTC_TODAY} - g)::date AS day FROM generate_series(${HIT_DAYS - 1}, 0, -1) AS g) d ORDER BY d.day)`;

const RULE_COLUMNS = `r.id, r.uuid::text AS uuid, r.endpoint_id, e.uuid::text AS endpoint_uuid, e.account_id, r.user_id, r.name, r.description,
  r.requests_per_window, r.window_size_seconds, r.action, r.status, r.priority, r.scope, r.fail_mode, r.tags, r.hit_count::float8 AS hit_count,
  r.last_matched, ${HITS_DAILY} AS hits_daily, r.shadowed, r.shadow_reason, r.created_at, r.updated_at, ${CONDITIONS_JSON} AS conditions`;

const FROM = 'FROM rate_limit_rules r JOIN endpoints e ON e.id = r.endpoint_id';

function normalizeRow(row: RateLimitRuleRow): RateLimitRuleRow {
  if (typeof row.conditions === 'string') row.conditions = JSON.parse(row.conditions) as RateLimitConditionRow[];
  row.hits_daily = row.hits_daily.map(Number);
  return row;
}

/** A rule by uuid or legacy id; null when missing. Access (the account) is the caller's check. */
export async function findRateLimitRule(db: Queryable, ref: { uuid: string } | { id: number }): Promise<RateLimitRuleRow | null> {
  const [where, value] = 'uuid' in ref ? ['r.uuid = $1', ref.uuid] : ['r.id = $1', ref.id];
  const { rows } = await db.query<RateLimitRuleRow>(`SELECT ${RULE_COLUMNS} ${FROM} WHERE ${where}`, [value]);
  return rows[0] ? normalizeRow(rows[0]) : null;
}

export interface RuleFilter {
  /** Undefined: every account (admins naming an endpoint of another account). */
  accountId?: number;
  endpointId?: number;
  status?: RuleStatus;
  /** Substring of the name, case-insensitive, matched literally. */
  search?: string;
}

/** One page in evaluation order per endpoint (endpoint, priority, id), and the total over all pages. */
export async function listRateLimitRules(db: Queryable, filter: RuleFilter, limit: number, offset: number): Promise<{ rows: RateLimitRuleRow[]; total: number }> {
  const where: string[] = [];
  const params: unknown[] = [];
  const add = (sql: (p: string) => string, value: unknown) => {
    params.push(value);
    where.push(sql(`$${params.length}`));
  };
  if (filter.accountId !== undefined) add((p) => `e.account_id = ${p}`, filter.accountId);
  if (filter.endpointId !== undefined) add((p) => `r.endpoint_id = ${p}`, filter.endpointId);
  if (filter.status !== undefined) add((p) => `r.status = ${p}`, filter.status);
  if (filter.search) add((p) => `lower(r.name) LIKE ${p} ESCAPE '\\'`, `%${escapeLike(filter.search.toLowerCase())}%`);
  const clause = where.length ? `WHERE ${where.join(' AND ')}` : '';
  const total = await db.query<{ n: number }>(`SELECT count(*)::int AS n ${FROM} ${clause}`, params);
  const page = await db.query<RateLimitRuleRow>(
    `SELECT ${RULE_COLUMNS} ${FROM} ${clause} ORDER BY r.endpoint_id, r.priority, r.id LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
    [...params, limit, offset],
  );
  return { rows: page.rows.map(normalizeRow), total: total.rows[0].n };
}

export interface RuleEndpointRow {
  id: number;
  uuid: string;
  hostname: string;
  subdomain: string;
  domain_id: number | null;
  domain_name: string | null;
  active_rules: number;
  rules: number;
}

/** The account's endpoints (or the given ones) with their rule counts, for the list's endpoint maps and posture. */
export async function listRuleEndpoints(db: Queryable, filter: { accountId?: number; ids?: number[] }): Promise<RuleEndpointRow[]> {
  const where: string[] = [];
  const params: unknown[] = [];
  if (filter.accountId !== undefined) {
    params.push(filter.accountId);
    where.push(`e.account_id = $${params.length}`);
  }
  if (filter.ids !== undefined) {
    params.push(filter.ids);
    where.push(`e.id = ANY($${params.length}::bigint[])`);
  }
  const { rows } = await db.query<RuleEndpointRow>(
    `SELECT e.id, e.uuid::text AS uuid, e.hostname, e.subdomain, e.domain_id, d.name AS domain_name,
            (SELECT count(*)::int FROM rate_limit_rules r WHERE r.endpoint_id = e.id AND r.status = 'active') AS active_rules,
            (SELECT count(*)::int FROM rate_limit_rules r WHERE r.endpoint_id = e.id) AS rules
     FROM endpoints e LEFT JOIN domains d ON d.id = e.domain_id
     ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY e.hostname, e.id`,
    params,
  );
  return rows;
}

/** Shadowed rules of an account (every endpoint of it). */
export async function countShadowedRules(db: Queryable, accountId: number): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM rate_limit_rules r JOIN endpoints e ON e.id = r.endpoint_id WHERE e.account_id = $1 AND r.shadowed',
    [accountId],
  );
  return rows[0].n;
}

/** Call with the endpoint row locked, so count-then-insert cannot overrun the bound. */
export async function countRules(tx: Queryable, endpointId: number): Promise<number> {
  const { rows } = await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM rate_limit_rules WHERE endpoint_id = $1', [endpointId]);
  return rows[0].n;
}

async function insertConditions(tx: Queryable, ruleId: number, conditions: readonly ConditionInput[], firstPosition = 0): Promise<void> {
  if (conditions.length === 0) return;
  await tx.query(
    `INSERT INTO rate_limit_conditions (rule_id, position, condition_type, operator, condition_value, logical_operator)
     SELECT $1, $2 + u.ord - 1, u.t, u.o, u.v, u.l FROM unnest($3::text[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS u(t, o, v, l, ord)`,
    [
      ruleId,
      firstPosition,
      conditions.map((c) => c.type),
      conditions.map((c) => c.operator),
      conditions.map((c) => c.value),
      conditions.map((c) => c.logical_operator),
    ],
  );
}

/**
 * After any rule write: recompute `shadowed` / `shadow_reason` for every rule of the endpoint (a write to one rule can
 * shadow or free the others), then touch the endpoint. Call inside the transaction holding the endpoint's row lock.
 */
export async function ruleSetChanged(tx: Queryable, endpointId: number): Promise<void> {
  const { rows } = await tx.query<Omit<ShadowRule, 'conditions'> & { shadowed: boolean; shadow_reason: string | null; conditions: ConditionInput[] | string }>(
    `SELECT r.id, r.uuid::text AS uuid, r.name, r.status, r.priority, r.requests_per_window, r.window_size_seconds, r.scope, r.shadowed, r.shadow_reason,
            COALESCE((SELECT json_agg(json_build_object('type', c.condition_type, 'operator', c.operator, 'value', c.condition_value,
                                                        'logical_operator', c.logical_operator) ORDER BY c.position)
                      FROM rate_limit_conditions c WHERE c.rule_id = r.id), '[]'::json) AS conditions
     FROM rate_limit_rules r WHERE r.endpoint_id = $1`,
    [endpointId],
  );
  const rules = rows.map((r) => ({ ...r, conditions: typeof r.conditions === 'string' ? (JSON.parse(r.conditions) as ConditionInput[]) : r.conditions }));
  const verdicts = computeShadows(rules);
  for (const rule of rules) {
    const v = verdicts.get(rule.id)!;
    if (v.shadowed !== rule.shadowed || v.reason !== rule.shadow_reason) {
      await tx.query('UPDATE rate_limit_rules SET shadowed = $2, shadow_reason = $3 WHERE id = $1', [rule.id, v.shadowed, v.reason]);
    }
  }
  touch(tx, { endpoint: endpointId });
}

export async function insertRule(tx: Queryable, endpointId: number, userId: number, rule: RuleInput): Promise<RateLimitRuleRow> {
  const { rows } = await tx.query<{ id: number }>(
    `INSERT INTO rate_limit_rules (endpoint_id, user_id, name, description, requests_per_window, window_size_seconds, action, status, priority, scope, fail_mode, tags)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::text[]) RETURNING id`,
    [endpointId, userId, rule.name, rule.description, rule.requests_per_window, rule.window_size_seconds, rule.action, rule.status, rule.priority, rule.scope, rule.fail_mode, rule.tags],
  );
  const id = rows[0].id;
  await insertConditions(tx, id, rule.conditions);
  await ruleSetChanged(tx, endpointId);
  return (await findRateLimitRule(tx, { id }))!;
}

/** Full update: every field and the whole condition list (new condition uuids). */
export async function replaceRule(tx: Queryable, rule: Pick<RateLimitRuleRow, 'id' | 'endpoint_id'>, input: RuleInput): Promise<RateLimitRuleRow> {
  await tx.query(
    `UPDATE rate_limit_rules SET name = $2, description = $3, requests_per_window = $4, window_size_seconds = $5, action = $6, status = $7,
       priority = $8, scope = $9, fail_mode = $10, tags = $11::text[], updated_at = now()
     WHERE id = $1`,
    [rule.id, input.name, input.description, input.requests_per_window, input.window_size_seconds, input.action, input.status, input.priority, input.scope, input.fail_mode, input.tags],
  );
  await tx.query('DELETE FROM rate_limit_conditions WHERE rule_id = $1', [rule.id]);
  await insertConditions(tx, rule.id, input.conditions);
  await ruleSetChanged(tx, rule.endpoint_id);
  return (await findRateLimitRule(tx, { id: rule.id }))!;
}

export async function deleteRule(tx: Queryable, rule: Pick<RateLimitRuleRow, 'id' | 'endpoint_id'>): Promise<void> {
  await tx.query('DELETE FROM rate_limit_rules WHERE id = $1', [rule.id]);
  await ruleSetChanged(tx, rule.endpoint_id);
}

const touchRule = (tx: Queryable, ruleId: number) => tx.query('UPDATE rate_limit_rules SET updated_at = now() WHERE id = $1', [ruleId]);

/** Appends a condition last; returns the stored row. */
export async function appendCondition(tx: Queryable, rule: Pick<RateLimitRuleRow, 'id' | 'endpoint_id'>, condition: ConditionInput): Promise<RateLimitConditionRow> {
  const { rows } = await tx.query<{ next: number }>('SELECT COALESCE(max(position) + 1, 0)::int AS next FROM rate_limit_conditions WHERE rule_id = $1', [rule.id]);
  await insertConditions(tx, rule.id, [condition], rows[0].next);
  await touchRule(tx, rule.id);
  await ruleSetChanged(tx, rule.endpoint_id);
  const found = await findCondition(tx, rule.id, { position: rows[0].next });
  return found!;
}

/** A condition of this rule by uuid, legacy id or position; null when missing or another rule's. */
export async function findCondition(db: Queryable, ruleId: number, ref: { uuid: string } | { id: number } | { position: number }): Promise<RateLimitConditionRow | null> {
  const [column, value] = 'uuid' in ref ? ['c.uuid', ref.uuid] : 'id' in ref ? ['c.id', ref.id] : ['c.position', ref.position];
  const { rows } = await db.query<RateLimitConditionRow>(
    `SELECT c.id, c.uuid::text AS uuid, c.rule_id, r.uuid::text AS rule_uuid, c.position, c.condition_type, c.operator, c.condition_value, c.logical_operator,
            to_char(c.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created_at
     FROM rate_limit_conditions c JOIN rate_limit_rules r ON r.id = c.rule_id WHERE c.rule_id = $1 AND ${column} = $2`,
    [ruleId, value],
  );
  return rows[0] ?? null;
}

/** Full write of one condition: uuid, id and position stay. */
export async function replaceCondition(
  tx: Queryable,
  rule: Pick<RateLimitRuleRow, 'id' | 'endpoint_id'>,
  conditionId: number,
  condition: ConditionInput,
): Promise<RateLimitConditionRow> {
  await tx.query('UPDATE rate_limit_conditions SET condition_type = $2, operator = $3, condition_value = $4, logical_operator = $5 WHERE id = $1', [
    conditionId,
    condition.type,
    condition.operator,
    condition.value,
    condition.logical_operator,
  ]);
  await touchRule(tx, rule.id);
  await ruleSetChanged(tx, rule.endpoint_id);
  return (await findCondition(tx, rule.id, { id: conditionId }))!;
}

export async function deleteCondition(tx: Queryable, rule: Pick<RateLimitRuleRow, 'id' | 'endpoint_id'>, conditionId: number): Promise<void> {
  await tx.query('DELETE FROM rate_limit_conditions WHERE id = $1', [conditionId]);
  await touchRule(tx, rule.id);
  await ruleSetChanged(tx, rule.endpoint_id);
}
