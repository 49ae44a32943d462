// Routing rules of an endpoint and their ordered conditions (a child table). Every write touches the endpoint
// (docs/feed.md), so edges get the new rules with the endpoint record at the caller's commit.
import type { Queryable } from './db.ts';
import { touch } from './feed-changes.ts';
import type { RoutingConditionConfig } from '../shared/snapshot.ts';

/** Bounds the API enforces (400 beyond them); the schema's CHECKs hold the per-rule ones too. */
export const MAX_RULES_PER_ENDPOINT = 100;
export const MAX_CONDITIONS_PER_RULE = 20;

export interface RoutingRuleRow {
  id: number;
  endpoint_id: number;
  name: string;
  priority: number;
  enabled: boolean;
  target_agent_id: string | null;
  target_agent_tags: string[];
  target_origin_url: string | null;
  /** Labels (docs/api.md "Tags"); not in the feed. */
  tags: string[];
  /** In position order. */
  conditions: RoutingConditionConfig[];
  created_at: Date;
  updated_at: Date;
}

/** A rule as the API hands it over: already validated and in canonical form. */
export interface RoutingRuleInput {
  name: string;
  priority: number;
  enabled: boolean;
  targetAgentId: string | null;
  targetAgentTags: string[];
  /** Set instead of an agent id and tags (the table's routing_rules_target_check holds it too). */
  targetOriginUrl: string | null;
  tags: string[];
  conditions: RoutingConditionConfig[];
}

/** The conditions of each rule as one JSON array in position order: one round trip for a rule list. */
const CONDITIONS_JSON = `COALESCE((
    SELECT json_agg(json_build_object('condition_type', c.condition_type, 'condition_key', c.condition_key, 'pattern', c.pattern) ORDER BY c.position)
    FROM routing_rule_conditions c WHERE c.rule_id = r.id), '[]'::json)`;

const RULE_COLUMNS = `r.id, r.endpoint_id, r.name, r.priority, r.enabled, r.target_agent_id, r.target_agent_tags, r.target_origin_url, r.tags, r.created_at, r.updated_at,
  ${CONDITIONS_JSON} AS conditions`;

/** Both drivers parse json, but a driver configured otherwise would hand back text; accept either. */
function normalizeRow(row: RoutingRuleRow): RoutingRuleRow {
  if (typeof row.conditions === 'string') row.conditions = JSON.parse(row.conditions) as RoutingConditionConfig[];
  return row;
}

/** The endpoint's rules in evaluation order: ascending priority, then ascending id. */
export async function listRoutingRules(db: Queryable, endpointId: number): Promise<RoutingRuleRow[]> {
  const { rows } = await db.query<RoutingRuleRow>(`SELECT ${RULE_COLUMNS} FROM routing_rules r WHERE r.endpoint_id = $1 ORDER BY r.priority, r.id`, [endpointId]);
  return rows.map(normalizeRow);
}

/** One rule of the endpoint; null when missing or on another endpoint. */
export async function findRoutingRule(db: Queryable, endpointId: number, ruleId: number): Promise<RoutingRuleRow | null> {
  const { rows } = await db.query<RoutingRuleRow>(`SELECT ${RULE_COLUMNS} FROM routing_rules r WHERE r.endpoint_id = $1 AND r.id = $2`, [endpointId, ruleId]);
  return rows[0] ? normalizeRow(rows[0]) : null;
}

/** Call with the endpoint row locked, so count-then-insert cannot overrun the bound under concurrency. */
export async function countRoutingRules(tx: Queryable, endpointId: number): Promise<number> {
  const { rows } = await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM routing_rules WHERE endpoint_id = $1', [endpointId]);
  return rows[0].n;
}

async function insertConditions(tx: Queryable, ruleId: number, conditions: readonly RoutingConditionConfig[]): Promise<void> {
  // One statement for all conditions; WITH ORDINALITY numbers them in array order.
  await tx.query(
    `INSERT INTO routing_rule_conditions (rule_id, position, condition_type, condition_key, pattern)
     SELECT $1, u.ord - 1, u.t, u.k, u.p FROM unnest($2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS u(t, k, p, ord)`,
    [ruleId, conditions.map((c) => c.condition_type), conditions.map((c) => c.condition_key), conditions.map((c) => c.pattern)],
  );
}

/**
 * Inserts a rule with its conditions and touches the endpoint. Call inside the transaction that holds the
 * endpoint's row lock: concurrent rule writes then commit one after the other, each seeing the other's rules.
 */
export async function insertRoutingRule(tx: Queryable, endpointId: number, rule: RoutingRuleInput): Promise<RoutingRuleRow> {
  const { rows } = await tx.query<{ id: number }>(
    `INSERT INTO routing_rules (endpoint_id, name, priority, enabled, target_agent_id, target_agent_tags, target_origin_url, tags)
     VALUES ($1, $2, $3, $4, $5, $6::text[], $7, $8::text[]) RETURNING id`,
    [endpointId, rule.name, rule.priority, rule.enabled, rule.targetAgentId, rule.targetAgentTags, rule.targetOriginUrl, rule.tags],
  );
  const id = rows[0].id;
  await insertConditions(tx, id, rule.conditions);
  touch(tx, { endpoint: endpointId });
  return (await findRoutingRule(tx, endpointId, id))!;
}

/** Replaces every field and condition of a rule (PUT semantics); null when the rule is not on this endpoint. */
export async function replaceRoutingRule(tx: Queryable, endpointId: number, ruleId: number, rule: RoutingRuleInput): Promise<RoutingRuleRow | null> {
  const { rowCount } = await tx.query(
    `UPDATE routing_rules SET name = $3, priority = $4, enabled = $5, target_agent_id = $6, target_agent_tags = $7::text[],
       target_origin_url = $8, tags = $9::text[], updated_at = now()
     WHERE endpoint_id = $1 AND id = $2`,
    [endpointId, ruleId, rule.name, rule.priority, rule.enabled, rule.targetAgentId, rule.targetAgentTags, rule.targetOriginUrl, rule.tags],
  );
  if (rowCount === 0) return null;
  await tx.query('DELETE FROM routing_rule_conditions WHERE rule_id = $1', [ruleId]);
  await insertConditions(tx, ruleId, rule.conditions);
  touch(tx, { endpoint: endpointId });
  return findRoutingRule(tx, endpointId, ruleId);
}

/** Deletes a rule (its conditions cascade) and touches the endpoint; false when it is not on this endpoint. */
export async function deleteRoutingRule(tx: Queryable, endpointId: number, ruleId: number): Promise<boolean> {
  const { rowCount } = await tx.query('DELETE FROM routing_rules WHERE endpoint_id = $1 AND id = $2', [endpointId, ruleId]);
  if (rowCount === 0) return false;
  touch(tx, { endpoint: endpointId });
  return true;
}
