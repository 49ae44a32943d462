// Traffic storage (docs/traffic.md "Storage"): the worker writes captured exchanges (traffic_logs) and adds usage
// (endpoint_usage_daily, endpoint_traffic_minutely) from edge records, idempotently, and prunes by plan retention.
import type { TrafficUsageEntry } from '../shared/records/types.ts';
import { TRAFFIC_LATENCY_BOUNDS_MS } from '../shared/records/types.ts';
import type { Queryable } from './db.ts';

/** One traffic_logs row to write, as the worker builds it from a traffic_exchange record. */
export interface TrafficLogInsert {
  /** Unique per captured exchange and stable across redelivery ("<batch id>:<index>"). */
  recordKey: string;
  createdAt: string;
  accountId: number;
  endpointUuid: string;
  /** The subdomain label to keep if the endpoint is already gone; the endpoint's own subdomain wins while it exists. */
  endpointNameFallback: string;
  method: string;
  host: string;
  path: string;
  query: string;
  statusCode: number;
  durationMs: number;
  bytesIn: number;
  bytesOut: number;
  sourceIp: string;
  country: string | null;
  userAgent: string;
  tls: boolean;
  routingRule: string | null;
  edgeNode: string;
  region: string;
  edgeError: string | null;
  authOutcome: string | null;
  rbacClientId: string | null;
  completed: boolean;
  captureLevel: 'metadata' | 'full';
  requestHeaders: Record<string, string> | null;
  responseHeaders: Record<string, string> | null;
  /** Base64, at most 10 KiB decoded. */
  requestBody: string | null;
  responseBody: string | null;
  requestBodyTruncated: boolean;
  responseBodyTruncated: boolean;
}

/** Rows per INSERT statement: bounds one statement's parameters and the work a single failure repeats. */
const INSERT_CHUNK = 1_000;
/** Daily usage kept this long (days), whatever the plan: it is small (a row per endpoint and day). */
export const USAGE_DAYS = 400;
/** Applied batch keys are kept this long (ms): a batch is redelivered within minutes of its first delivery, if ever. */
export const APPLIED_BATCH_TTL_MS = 86_400_000;

/**
 * Records `keys` (e.g. "traffic_usage:<batch id>") as applied, in the caller's transaction, and returns those that
 * were not already: the caller adds only what they carry. A concurrent transaction claiming the same key waits on
 * the primary key until the first commits, then gets nothing, so two workers never both add a batch.
 */
export async function claimRecordBatches(q: Queryable, keys: readonly string[]): Promise<Set<string>> {
  if (keys.length === 0) return new Set();
  const unique = [...new Set(keys)].sort();
  const res = await q.query<{ record_key: string }>(
    'INSERT INTO applied_record_batches (record_key) SELECT unnest($1::text[]) ON CONFLICT (record_key) DO NOTHING RETURNING record_key',
    [unique],
  );
  return new Set(res.rows.map((r) => r.record_key));
}

/**
 * Writes captured exchanges, in multi-row INSERTs; a row whose record_key is already stored (a redelivered batch) is
 * skipped, and so is one whose account no longer exists. endpoint_id and endpoint_name come from the endpoint while
 * it exists (in the record's account); returns the rows written.
 */
export async function insertTrafficLogs(q: Queryable, rows: readonly TrafficLogInsert[]): Promise<number> {
  let written = 0;
  for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
    const part = rows.slice(i, i + INSERT_CHUNK);
    const col = <T>(f: (r: TrafficLogInsert) => T) => part.map(f);
    const res = await q.query(
      `INSERT INTO traffic_logs (
         record_key, created_at, account_id, endpoint_id, endpoint_uuid, endpoint_name, method, host, path, query,
         status_code, duration_ms, bytes_in, bytes_out, source_ip, country, user_agent, tls, routing_rule, edge_node,
         region, edge_error, auth_outcome, rbac_client_id, completed, capture_level, request_headers, response_headers,
         request_body, response_body, request_body_truncated, response_body_truncated)
       SELECT r.record_key, r.created_at, r.account_id, e.id, r.endpoint_uuid, coalesce(e.subdomain, r.name_fallback),
              r.method, r.host, r.path, r.query, r.status_code, r.duration_ms, r.bytes_in, r.bytes_out, r.source_ip,
              r.country, r.user_agent, r.tls, r.routing_rule, r.edge_node, r.region, r.edge_error, r.auth_outcome,
              r.rbac_client_id, r.completed, r.capture_level, r.request_headers::jsonb, r.response_headers::jsonb,
              decode(r.request_body, 'base64'), decode(r.response_body, 'base64'), r.request_body_truncated,
              r.response_body_truncated
         FROM unnest($1::text[], $2::timestamptz[], $3::bigint[], $4::uuid[], $5::text[], $6::text[], $7::text[],
                     $8::text[], $9::text[], $10::int[], $11::float8[], $12::bigint[], $13::bigint[], $14::text[],
                     $15::text[], $16::text[], $17::bool[], $18::text[], $19::text[], $20::text[], $21::text[],
                     $22::text[], $23::text[], $24::bool[], $25::text[], $26::text[], $27::text[], $28::text[],
                     $29::text[], $30::bool[], $31::bool[]) WITH ORDINALITY
           AS r(record_key, created_at, account_id, endpoint_uuid, name_fallback, method, host, path, query, status_code,
                duration_ms, bytes_in, bytes_out, source_ip, country, user_agent, tls, routing_rule, edge_node, region,
                edge_error, auth_outcome, rbac_client_id, completed, capture_level, request_headers, response_headers,
                request_body, response_body, request_body_truncated, response_body_truncated, n)
         JOIN accounts a ON a.id = r.account_id
         LEFT JOIN endpoints e ON e.uuid = r.endpoint_uuid AND e.account_id = r.account_id
        -- Ids follow the records' order, so "newest first" by id agrees with the edge's order within a batch.
        ORDER BY r.n
       ON CONFLICT (record_key) DO NOTHING`,
      [
        col((r) => r.recordKey), col((r) => r.createdAt), col((r) => r.accountId), col((r) => r.endpointUuid),
        col((r) => r.endpointNameFallback), col((r) => r.method), col((r) => r.host), col((r) => r.path), col((r) => r.query),
        col((r) => r.statusCode), col((r) => r.durationMs), col((r) => r.bytesIn), col((r) => r.bytesOut), col((r) => r.sourceIp),
        col((r) => r.country), col((r) => r.userAgent), col((r) => r.tls), col((r) => r.routingRule), col((r) => r.edgeNode),
        col((r) => r.region), col((r) => r.edgeError), col((r) => r.authOutcome), col((r) => r.rbacClientId), col((r) => r.completed),
        col((r) => r.captureLevel), col((r) => (r.requestHeaders === null ? null : JSON.stringify(r.requestHeaders))),
        col((r) => (r.responseHeaders === null ? null : JSON.stringify(r.responseHeaders))), col((r) => r.requestBody),
        col((r) => r.responseBody), col((r) => r.requestBodyTruncated), col((r) => r.responseBodyTruncated),
      ],
    );
    written += res.rowCount;
  }
  return written;
}

/** `entries` summed per (endpoint, minute), in key order so concurrent writers lock rows in the same order. */
export function sumUsage(entries: readonly TrafficUsageEntry[]): TrafficUsageEntry[] {
  const byKey = new Map<string, TrafficUsageEntry>();
  for (const e of entries) {
    const key = `${e.endpoint} ${e.minute}`;
    const sum = byKey.get(key);
    if (sum === undefined) {
      byKey.set(key, { ...e, latency: e.latency.slice() });
      continue;
    }
    sum.requests += e.requests;
    sum.errors_4xx += e.errors_4xx;
    sum.errors_5xx += e.errors_5xx;
    sum.edge_errors += e.edge_errors;
    sum.aborted += e.aborted;
    sum.bytes_in += e.bytes_in;
    sum.bytes_out += e.bytes_out;
    sum.duration_sum_ms += e.duration_sum_ms;
    sum.duration_max_ms = Math.max(sum.duration_max_ms, e.duration_max_ms);
    for (let i = 0; i < sum.latency.length; i++) sum.latency[i] += e.latency[i] ?? 0;
  }
  return [...byKey].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, e]) => e);
}

/**
 * Adds usage to the per-minute rollup and the daily counters, in the caller's transaction (the caller has claimed
 * the batches it comes from). Entries of accounts that no longer exist are left out.
 */
export async function addTrafficUsage(q: Queryable, entries: readonly TrafficUsageEntry[]): Promise<void> {
  const minutes = sumUsage(entries);
  if (minutes.length === 0) return;
  const width = TRAFFIC_LATENCY_BOUNDS_MS.length + 1;
  const col = <T>(rows: readonly TrafficUsageEntry[], f: (e: TrafficUsageEntry) => T) => rows.map(f);
  // The histogram travels flattened (one bigint[] of width × rows) and is cut back per row by its ordinality.
  await q.query(
    `INSERT INTO endpoint_traffic_minutely (endpoint_uuid, minute, account_id, endpoint_id, requests, errors_4xx, errors_5xx,
       edge_errors, aborted, bytes_in, bytes_out, duration_sum_ms, duration_max_ms, latency_buckets)
     SELECT u.endpoint_uuid, u.minute, u.account_id, e.id, u.requests, u.errors_4xx, u.errors_5xx, u.edge_errors, u.aborted,
            u.bytes_in, u.bytes_out, u.duration_sum_ms, u.duration_max_ms, ($12::bigint[])[(u.n - 1) * $13 + 1 : u.n * $13]
       FROM unnest($1::uuid[], $2::timestamptz[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[],
                   $8::bigint[], $9::bigint[], $10::bigint[], $11::float8[], $14::float8[]) WITH ORDINALITY
         AS u(endpoint_uuid, minute, account_id, requests, errors_4xx, errors_5xx, edge_errors, aborted, bytes_in, bytes_out,
              duration_sum_ms, duration_max_ms, n)
       JOIN accounts a ON a.id = u.account_id
       LEFT JOIN endpoints e ON e.uuid = u.endpoint_uuid AND e.account_id = u.account_id
      ORDER BY u.n
     ON CONFLICT (endpoint_uuid, minute) DO UPDATE SET
       requests = endpoint_traffic_minutely.requests + EXCLUDED.requests,
       errors_4xx = endpoint_traffic_minutely.errors_4xx + EXCLUDED.errors_4xx,
       errors_5xx = endpoint_traffic_minutely.errors_5xx + EXCLUDED.errors_5xx,
       edge_errors = endpoint_traffic_minutely.edge_errors + EXCLUDED.edge_errors,
       aborted = endpoint_traffic_minutely.aborted + EXCLUDED.aborted,
       bytes_in = endpoint_traffic_minutely.bytes_in + EXCLUDED.bytes_in,
       bytes_out = endpoint_traffic_minutely.bytes_out + EXCLUDED.bytes_out,
       duration_sum_ms = endpoint_traffic_minutely.duration_sum_ms + EXCLUDED.duration_sum_ms,
       duration_max_ms = GREATEST(endpoint_traffic_minutely.duration_max_ms, EXCLUDED.duration_max_ms),
       latency_buckets = ARRAY(
         SELECT o + n FROM unnest(endpoint_traffic_minutely.latency_buckets, EXCLUDED.latency_buckets) WITH ORDINALITY AS l(o, n, i)
          ORDER BY i)`,
    [
      col(minutes, (e) => e.endpoint), col(minutes, (e) => e.minute), col(minutes, (e) => e.account), col(minutes, (e) => e.requests),
      col(minutes, (e) => e.errors_4xx), col(minutes, (e) => e.errors_5xx), col(minutes, (e) => e.edge_errors), col(minutes, (e) => e.aborted),
      col(minutes, (e) => e.bytes_in), col(minutes, (e) => e.bytes_out), col(minutes, (e) => e.duration_sum_ms),
      minutes.flatMap((e) => Array.from({ length: width }, (_, i) => e.latency[i] ?? 0)), width, col(minutes, (e) => e.duration_max_ms),
    ],
  );

  const days = new Map<string, { endpoint: string; day: string; account: number; requests: number; bytesIn: number; bytesOut: number; e4: number; e5: number }>();
  for (const e of minutes) {
    const day = e.minute.slice(0, 10);
    const key = `${e.endpoint} ${day}`;
    const d = days.get(key);
    if (d === undefined) {
      days.set(key, { endpoint: e.endpoint, day, account: e.account, requests: e.requests, bytesIn: e.bytes_in, bytesOut: e.bytes_out, e4: e.errors_4xx, e5: e.errors_5xx });
      continue;
    }
    d.requests += e.requests;
    d.bytesIn += e.bytes_in;
    d.bytesOut += e.bytes_out;
    d.e4 += e.errors_4xx;
    d.e5 += e.errors_5xx;
  }
  const daily = [...days.values()];
  await q.query(
    `INSERT INTO endpoint_usage_daily (endpoint_uuid, day, account_id, endpoint_id, requests, bytes_in, bytes_out, errors_4xx, errors_5xx)
     SELECT u.endpoint_uuid, u.day, u.account_id, e.id, u.requests, u.bytes_in, u.bytes_out, u.errors_4xx, u.errors_5xx
       FROM unnest($1::uuid[], $2::date[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[]) WITH ORDINALITY
         AS u(endpoint_uuid, day, account_id, requests, bytes_in, bytes_out, errors_4xx, errors_5xx, n)
       JOIN accounts a ON a.id = u.account_id
       LEFT JOIN endpoints e ON e.uuid = u.endpoint_uuid AND e.account_id = u.account_id
      ORDER BY u.n
     ON CONFLICT (endpoint_uuid, day) DO UPDATE SET
       requests = endpoint_usage_daily.requests + EXCLUDED.requests,
       bytes_in = endpoint_usage_daily.bytes_in + EXCLUDED.bytes_in,
       bytes_out = endpoint_usage_daily.bytes_out + EXCLUDED.bytes_out,
       errors_4xx = endpoint_usage_daily.errors_4xx + EXCLUDED.errors_4xx,
       errors_5xx = endpoint_usage_daily.errors_5xx + EXCLUDED.errors_5xx`,
    [
      daily.map((d) => d.endpoint), daily.map((d) => d.day), daily.map((d) => d.account), daily.map((d) => d.requests),
      daily.map((d) => d.bytesIn), daily.map((d) => d.bytesOut), daily.map((d) => d.e4), daily.map((d) => d.e5),
    ],
  );
}

export interface RetentionResult {
  logs: number;
  minutes: number;
  days: number;
  batches: number;
}

/**
 * Deletes what is past retention: traffic_logs and per-minute rows older than the account's plan allows
 * (`retentionDays`: plan name → days; an account on a plan not listed keeps the longest), daily usage past
 * USAGE_DAYS, applied batch keys past a day. At most `batch` rows per statement and `maxBatches` statements per
 * table, so one pass never holds long locks; what is left goes at the next pass.
 */
export async function pruneTraffic(
  q: Queryable,
  retentionDays: Readonly<Record<string, number>>,
  options: { now?: Date; batch?: number; maxBatches?: number } = {},
): Promise<RetentionResult> {
  const now = (options.now ?? new Date()).getTime();
  const batch = options.batch ?? 5_000;
  const maxBatches = options.maxBatches ?? 20;
  const plans = Object.entries(retentionDays);
  const longest = Math.max(1, ...plans.map(([, d]) => d));
  const cutoff = (days: number) => new Date(now - days * 86_400_000).toISOString();
  const result: RetentionResult = { logs: 0, minutes: 0, days: 0, batches: 0 };

  const repeat = async (sql: string, params: unknown[]): Promise<number> => {
    let total = 0;
    for (let i = 0; i < maxBatches; i++) {
      const res = await q.query(sql, [...params, batch]);
      total += res.rowCount;
      if (res.rowCount < batch) break;
    }
    return total;
  };
  const knownPlans = plans.map(([p]) => p);
  const groups: [condition: string, param: unknown, days: number][] = [
    ...plans.map(([plan, days]) => ['a.plan = $1', plan, days] as [string, unknown, number]),
    ['a.plan <> ALL($1::text[])', knownPlans, longest],
  ];
  for (const [condition, param, days] of groups) {
    // Account by account (LATERAL), so each lookup is a range of the (account_id, time) index rather than a scan
    // of the whole table for old rows.
    result.logs += await repeat(
      `DELETE FROM traffic_logs WHERE id IN (
         SELECT t.id FROM accounts a CROSS JOIN LATERAL (
           SELECT id FROM traffic_logs WHERE account_id = a.id AND created_at < $2 LIMIT $3) t
          WHERE ${condition} LIMIT $3)`,
      [param, cutoff(days)],
    );
    result.minutes += await repeat(
      `DELETE FROM endpoint_traffic_minutely WHERE (endpoint_uuid, minute) IN (
         SELECT m.endpoint_uuid, m.minute FROM accounts a CROSS JOIN LATERAL (
           SELECT endpoint_uuid, minute FROM endpoint_traffic_minutely WHERE account_id = a.id AND minute < $2 LIMIT $3) m
          WHERE ${condition} LIMIT $3)`,
      [param, cutoff(days)],
    );
  }
  result.days = await repeat(
    `DELETE FROM endpoint_usage_daily WHERE (endpoint_uuid, day) IN (
       SELECT endpoint_uuid, day FROM endpoint_usage_daily WHERE day < $1::date LIMIT $2)`,
    [cutoff(USAGE_DAYS).slice(0, 10)],
  );
  result.batches = await repeat(
    `DELETE FROM applied_record_batches WHERE record_key IN (
       SELECT record_key FROM applied_record_batches WHERE applied_at < $1 LIMIT $2)`,
    [new Date(now - APPLIED_BATCH_TTL_MS).toISOString()],
  );
  return result;
}

/** Daily usage of one endpoint (oldest first), for tests and the API: what capture on or off still counts. */
export async function endpointUsage(q: Queryable, endpointUuid: string): Promise<{ day: string; requests: number; bytes_in: number; bytes_out: number; errors_4xx: number; errors_5xx: number }[]> {
  const res = await q.query<{ day: string; requests: string; bytes_in: string; bytes_out: string; errors_4xx: string; errors_5xx: string }>(
    `SELECT to_char(day, 'YYYY-MM-DD') AS day, requests, bytes_in, bytes_out, errors_4xx, errors_5xx
       FROM endpoint_usage_daily WHERE endpoint_uuid = $1 ORDER BY day`,
    [endpointUuid],
  );
  return res.rows.map((r) => ({
    day: r.day, requests: Number(r.requests), bytes_in: Number(r.bytes_in), bytes_out: Number(r.bytes_out),
    errors_4xx: Number(r.errors_4xx), errors_5xx: Number(r.errors_5xx),
  }));
}
