// Alert rules and events (migration 012): the API's reads and writes, the evaluator's lease and compare-and-set
// transitions, and the traffic figures it judges rules by, read from the per-minute rollup of migration 011.
import type { AlertChannel, AlertComparison, AlertEventStatus, AlertMetric, AlertRuleStatus } from '../shared/alerts.ts';
import type { SecretBox } from '../shared/secrets.ts';
import type { Queryable } from './db.ts';

/** Bounds the API enforces (400 beyond them). */
export const MAX_ALERT_RULES_PER_ACCOUNT = 100;
export const MAX_ALERT_CHANNELS = 10;
/** The events list's cap: `limit` 0 or omitted means this many (docs/api.md "Limits", Alert events). */
export const ALERT_EVENTS_CAP = 100;
/** What a new event carries until its sender reports. */
export const NOTIFICATION_PENDING = 'notification pending';

/**
 * A channel as stored: a webhook's secret sealed (src/shared/secrets.ts), never in clear, with its fingerprint (docs/api.md
 * "Secret fingerprints"; absent or null without a secret, and for secrets stored before fingerprints existed).
 */
export type StoredChannel = { type: 'webhook'; url: string; secret_sealed: string | null; secret_fingerprint?: string | null } | { type: 'email'; to: string };

export interface AlertRuleRow {
  id: number;
  uuid: string;
  account_id: number;
  user_id: number;
  name: string;
  endpoint_id: number | null;
  endpoint_uuid: string | null;
  /** The endpoint's subdomain label, for notifications. */
  endpoint_name: string | null;
  metric: AlertMetric;
  comparison: AlertComparison;
  threshold: number;
  window_seconds: number;
  channels: StoredChannel[];
  status: AlertRuleStatus;
  last_value: number | null;
  last_evaluated_at: Date | null;
  /** Labels (docs/api.md "Tags"). */
  tags: string[];
  created_at: Date;
  updated_at: Date;
}

export interface AlertRuleInput {
  name: string;
  endpointId: number | null;
  metric: AlertMetric;
  comparison: AlertComparison;
  threshold: number;
  windowSeconds: number;
  channels: StoredChannel[];
  /** None when omitted. */
  tags?: readonly string[];
}

export interface AlertEventRow {
  id: number;
  rule_id: number;
  status: AlertEventStatus;
  value: number;
  triggered_at: Date;
  notified: boolean;
  notification_err: string | null;
}

const RULE_COLUMNS = `r.id, r.uuid::text AS uuid, r.account_id, r.user_id, r.name, r.endpoint_id, e.uuid::text AS endpoint_uuid,
  e.subdomain AS endpoint_name, r.metric, r.comparison, r.threshold, r.window_seconds, r.channels, r.status, r.last_value,
  r.last_evaluated_at, r.tags, r.created_at, r.updated_at`;
const RULE_FROM = 'alert_rules r LEFT JOIN endpoints e ON e.id = r.endpoint_id';
const EVENT_COLUMNS = 'id, rule_id, status, value, triggered_at, notified, notification_err';

/** Both drivers parse jsonb, but a driver configured otherwise would hand back text; accept either. */
function normalizeRule(row: AlertRuleRow): AlertRuleRow {
  if (typeof row.channels === 'string') row.channels = JSON.parse(row.channels) as StoredChannel[];
  return row;
}

/**
 * The channels as the notifier takes them, webhook secrets opened; or why they cannot be (a secret sealed under
 * another EDGE_SECRET_KEY), which the event then records instead of failing the evaluation or the request.
 */
export function openAlertChannels(channels: readonly StoredChannel[], secrets: SecretBox): AlertChannel[] | string {
  try {
    return channels.map((c) => (c.type === 'webhook' ? { type: 'webhook', url: c.url, secret: c.secret_sealed === null ? null : secrets.open(c.secret_sealed) } : c));
  } catch {
    return 'a webhook secret cannot be opened with this node’s EDGE_SECRET_KEY';
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Rules
// ---------------------------------------------------------------------------------------------------------------

export async function findAlertRule(q: Queryable, uuid: string): Promise<AlertRuleRow | null> {
  const { rows } = await q.query<AlertRuleRow>(`SELECT ${RULE_COLUMNS} FROM ${RULE_FROM} WHERE r.uuid = $1`, [uuid]);
  return rows[0] ? normalizeRule(rows[0]) : null;
}

/** The account's rules, oldest first. */
export async function listAlertRules(q: Queryable, accountId: number): Promise<AlertRuleRow[]> {
  const { rows } = await q.query<AlertRuleRow>(`SELECT ${RULE_COLUMNS} FROM ${RULE_FROM} WHERE r.account_id = $1 ORDER BY r.id`, [accountId]);
  return rows.map(normalizeRule);
}

/** Locks the account row first (NO KEY UPDATE: see the quota locks in endpoints.ts), so concurrent creates cannot both pass the bound. */
export async function countAlertRulesLocked(tx: Queryable, accountId: number): Promise<number> {
  await tx.query('SELECT id FROM accounts WHERE id = $1 FOR NO KEY UPDATE', [accountId]);
  const { rows } = await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM alert_rules WHERE account_id = $1', [accountId]);
  return rows[0].n;
}

export async function insertAlertRule(tx: Queryable, accountId: number, userId: number, rule: AlertRuleInput): Promise<AlertRuleRow> {
  const { rows } = await tx.query<{ uuid: string }>(
    `INSERT INTO alert_rules (account_id, user_id, name, endpoint_id, metric, comparison, threshold, window_seconds, channels, tags)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10::text[]) RETURNING uuid::text AS uuid`,
    [accountId, userId, rule.name, rule.endpointId, rule.metric, rule.comparison, rule.threshold, rule.windowSeconds, JSON.stringify(rule.channels), rule.tags ?? []],
  );
  return (await findAlertRule(tx, rows[0].uuid))!;
}

/**
 * Replaces the rule's settings (PUT). Its status, last value and events stay: the next evaluation judges the new
 * settings against the old status, so a firing rule whose threshold is raised past the value resolves as usual.
 */
export async function replaceAlertRule(tx: Queryable, id: number, rule: AlertRuleInput): Promise<AlertRuleRow | null> {
  const { rows } = await tx.query<{ uuid: string }>(
    `UPDATE alert_rules SET name = $2, endpoint_id = $3, metric = $4, comparison = $5, threshold = $6, window_seconds = $7,
       channels = $8::jsonb, tags = $9::text[], updated_at = now()
     WHERE id = $1 RETURNING uuid::text AS uuid`,
    [id, rule.name, rule.endpointId, rule.metric, rule.comparison, rule.threshold, rule.windowSeconds, JSON.stringify(rule.channels), rule.tags ?? []],
  );
  return rows[0] ? findAlertRule(tx, rows[0].uuid) : null;
}

/** Deletes a rule and (by cascade) its events; false when it was already gone. */
export async function deleteAlertRule(q: Queryable, id: number): Promise<boolean> {
  const { rowCount } = await q.query('DELETE FROM alert_rules WHERE id = $1', [id]);
  return rowCount > 0;
}

// ---------------------------------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------------------------------

/** Records an event whose notification is still to be sent (notified false, notification_err pending). */
export async function insertAlertEvent(q: Queryable, ruleId: number, status: AlertEventStatus, value: number): Promise<AlertEventRow> {
  const { rows } = await q.query<AlertEventRow>(
    `INSERT INTO alert_events (rule_id, status, value, notified, notification_err) VALUES ($1, $2, $3, false, $4) RETURNING ${EVENT_COLUMNS}`,
    [ruleId, status, value, NOTIFICATION_PENDING],
  );
  return rows[0];
}

/** What the sender reported: notified, or why not. */
export async function recordNotification(q: Queryable, eventId: number, notified: boolean, error: string | null): Promise<AlertEventRow | null> {
  const { rows } = await q.query<AlertEventRow>(
    `UPDATE alert_events SET notified = $2, notification_err = $3 WHERE id = $1 RETURNING ${EVENT_COLUMNS}`,
    [eventId, notified, notified ? null : (error ?? 'not notified')],
  );
  return rows[0] ?? null;
}

/** The rule's events, newest first, at most `limit`. */
export async function listAlertEvents(q: Queryable, ruleId: number, limit: number): Promise<AlertEventRow[]> {
  const { rows } = await q.query<AlertEventRow>(
    `SELECT ${EVENT_COLUMNS} FROM alert_events WHERE rule_id = $1 ORDER BY triggered_at DESC, id DESC LIMIT $2`,
    [ruleId, limit],
  );
  return rows;
}

// ---------------------------------------------------------------------------------------------------------------
// The evaluator's lease and transitions
// ---------------------------------------------------------------------------------------------------------------

/**
 * Takes up to `batch` rules whose lease has lapsed for `owner`, for `leaseMs`, in id order after `afterId` (a pass
 * walks the rules once: a released rule is due again at once, and the position, unlike a list of the ids judged so
 * far, costs the same at the last batch as at the first). Under PostgreSQL a competing evaluator skips rows another
 * is leasing (SKIP LOCKED) and re-checks lease_until on rows it waited for, so a rule is never held by two; PGlite
 * has one backend and runs the statements one after the other.
 */
export async function leaseDueAlertRules(q: Queryable, owner: string, leaseMs: number, batch: number, afterId = 0): Promise<AlertRuleRow[]> {
  const { rows } = await q.query<{ uuid: string }>(
    `UPDATE alert_rules SET lease_owner = $1, lease_until = now() + make_interval(secs => $2::double precision / 1000)
     WHERE id IN (SELECT id FROM alert_rules WHERE lease_until < now() AND id > $4
                  ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED)
       AND lease_until < now()
     RETURNING uuid::text AS uuid`,
    [owner, leaseMs, batch, afterId],
  );
  if (rows.length === 0) return [];
  const { rows: rules } = await q.query<AlertRuleRow>(`SELECT ${RULE_COLUMNS} FROM ${RULE_FROM} WHERE r.uuid = ANY($1::uuid[]) ORDER BY r.id`, [
    rows.map((r) => r.uuid),
  ]);
  return rules.map(normalizeRule);
}

/**
 * Moves a rule from `from` to `to` and records the event, only while `owner` still holds its lease and the status is
 * still `from` (compare-and-set): the one evaluator that changes the status is the one that notifies. Null when the
 * rule changed hands or state meanwhile.
 */
export async function transitionAlertRule(
  tx: Queryable,
  ruleId: number,
  owner: string,
  from: AlertRuleStatus,
  to: AlertRuleStatus,
  value: number,
  event: 'firing' | 'ok' | null,
): Promise<{ event: AlertEventRow | null } | null> {
  const { rowCount } = await tx.query(
    `UPDATE alert_rules SET status = $4, last_value = $5, last_evaluated_at = now()
     WHERE id = $1 AND lease_owner = $2 AND lease_until > now() AND status = $3`,
    [ruleId, owner, from, to, value],
  );
  if (rowCount === 0) return null;
  return { event: event === null ? null : await insertAlertEvent(tx, ruleId, event, value) };
}

/** A steady evaluation: the value (null without data) and the time, status unchanged. */
export async function recordEvaluation(q: Queryable, ruleId: number, owner: string, value: number | null): Promise<void> {
  await q.query(
    `UPDATE alert_rules SET last_value = COALESCE($3, last_value), last_evaluated_at = now() WHERE id = $1 AND lease_owner = $2`,
    [ruleId, owner, value],
  );
}

/** Gives the rule back, so the next pass of any evaluator may take it. */
export async function releaseAlertLease(q: Queryable, ruleId: number, owner: string): Promise<void> {
  await q.query(`UPDATE alert_rules SET lease_owner = NULL, lease_until = '-infinity' WHERE id = $1 AND lease_owner = $2`, [ruleId, owner]);
}

// ---------------------------------------------------------------------------------------------------------------
// What rules are judged by: the per-minute rollup (endpoint_traffic_minutely, migration 011)
// ---------------------------------------------------------------------------------------------------------------

/**
 * The rollup rows a rule covers: its account, its endpoint when it has one, and the minutes from the one holding
 * `now - window` to the current one. A window is thus rounded out to whole minutes: it reaches back at most one
 * minute further than asked, never shorter.
 */
const WINDOW_WHERE = `m.account_id = $1 AND ($2::bigint IS NULL OR m.endpoint_id = $2)
  AND m.minute >= date_trunc('minute', now() - make_interval(secs => $3::double precision))`;

export interface TrafficTotals {
  requests: number;
  errors_4xx: number;
  errors_5xx: number;
}

export async function trafficTotals(q: Queryable, accountId: number, endpointId: number | null, windowSeconds: number): Promise<TrafficTotals> {
  const { rows } = await q.query<TrafficTotals>(
    `SELECT COALESCE(sum(m.requests), 0)::float8 AS requests, COALESCE(sum(m.errors_4xx), 0)::float8 AS errors_4xx,
       COALESCE(sum(m.errors_5xx), 0)::float8 AS errors_5xx
     FROM endpoint_traffic_minutely m WHERE ${WINDOW_WHERE}`,
    [accountId, endpointId, windowSeconds],
  );
  return rows[0];
}

/** The latency histogram over the window: counts per bucket (not cumulative) and the longest duration seen. */
export async function latencyHistogram(
  q: Queryable,
  accountId: number,
  endpointId: number | null,
  windowSeconds: number,
): Promise<{ counts: number[]; maxMs: number }> {
  const { rows } = await q.query<{ i: number; n: number }>(
    `SELECT u.i::int AS i, sum(u.n)::float8 AS n
     FROM endpoint_traffic_minutely m, unnest(m.latency_buckets) WITH ORDINALITY AS u(n, i)
     WHERE ${WINDOW_WHERE} GROUP BY u.i ORDER BY u.i`,
    [accountId, endpointId, windowSeconds],
  );
  const { rows: max } = await q.query<{ max: number | null }>(
    `SELECT max(m.duration_max_ms)::float8 AS max FROM endpoint_traffic_minutely m WHERE ${WINDOW_WHERE}`,
    [accountId, endpointId, windowSeconds],
  );
  const counts: number[] = [];
  for (const r of rows) counts[r.i - 1] = r.n;
  for (let i = 0; i < counts.length; i++) counts[i] ??= 0;
  return { counts, maxMs: max[0]?.max ?? 0 };
}

/** The ids of the account's endpoints (endpoint_down over all of them). */
export async function accountEndpointIds(q: Queryable, accountId: number): Promise<number[]> {
  const { rows } = await q.query<{ id: number }>('SELECT id FROM endpoints WHERE account_id = $1', [accountId]);
  return rows.map((r) => r.id);
}
