// Read side of traffic storage for the control API: recent errors, the traffic inspector's log pages and single
// exchanges, and metrics from the per-minute rollup. Every query is scoped to one account; the worker writes.
import type { Queryable } from './db.ts';

/**
 * Upper bounds (ms) of the rollup's latency histogram; the array has one more slot for longer exchanges
 * (migration 011, endpoint_traffic_minutely.latency_buckets).
 */
export const LATENCY_BOUNDS_MS = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000] as const;

/** The time of a row as text with microseconds, in UTC: exact enough to resume a page after it (the cursor). */
const AT_TEXT = `to_char(t.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** docs/api.md "Recent errors": names and uuids come from the live endpoint, falling back to what the row kept. */
export interface RecentErrorRow {
  id: number;
  status_code: number;
  method: string;
  path: string;
  host: string;
  source_ip: string;
  created_at: Date;
  endpoint_name: string;
  endpoint_uuid: string;
}

export async function recentErrors(
  db: Queryable,
  q: { accountId: number; limit: number; hours: number; tier: '4xx' | '5xx' | null },
): Promise<RecentErrorRow[]> {
  const range = q.tier === '4xx' ? 't.status_code BETWEEN 400 AND 499' : q.tier === '5xx' ? 't.status_code >= 500' : 't.status_code >= 400';
  const { rows } = await db.query<RecentErrorRow>(
    `SELECT t.id, t.status_code, t.method, t.path, t.host, t.source_ip, t.created_at,
            COALESCE(e.subdomain, t.endpoint_name, '') AS endpoint_name,
            COALESCE(e.uuid::text, '') AS endpoint_uuid
       FROM traffic_logs t LEFT JOIN endpoints e ON e.id = t.endpoint_id
      WHERE t.account_id = $1 AND ${range} AND t.created_at > now() - make_interval(hours => $2::int)
      ORDER BY t.created_at DESC, t.id DESC
      LIMIT $3`,
    [q.accountId, q.hours, q.limit],
  );
  return rows;
}

/** A log row without headers or bodies: what the inspector's list shows. */
export interface TrafficLogSummary {
  id: number;
  created_at: Date;
  /** The row's time as exact UTC text, for the next page's cursor. */
  at_text: string;
  endpoint_uuid: string;
  /** The endpoint's current subdomain label, or the one kept when it was deleted. */
  endpoint_name: string;
  /** False once the endpoint was deleted. */
  endpoint_exists: boolean;
  method: string;
  host: string;
  path: string;
  query: string;
  status_code: number;
  duration_ms: number;
  bytes_in: number;
  bytes_out: number;
  source_ip: string;
  country: string | null;
  user_agent: string;
  tls: boolean;
  routing_rule: string | null;
  edge_node: string;
  region: string;
  edge_error: string | null;
  auth_outcome: string | null;
  rbac_client_id: string | null;
  completed: boolean;
  capture_level: 'metadata' | 'full';
}

export interface TrafficLogDetail extends TrafficLogSummary {
  endpoint_id: number | null;
  /** The live endpoint's hostname (null once deleted): where a replay goes. */
  endpoint_hostname: string | null;
  request_headers: Record<string, string | string[]> | null;
  response_headers: Record<string, string | string[]> | null;
  request_body: Uint8Array | null;
  response_body: Uint8Array | null;
  request_body_truncated: boolean;
  response_body_truncated: boolean;
}

const SUMMARY_COLUMNS = `t.id, t.created_at, ${AT_TEXT} AS at_text, t.endpoint_uuid::text AS endpoint_uuid,
  COALESCE(e.subdomain, t.endpoint_name, '') AS endpoint_name, (e.id IS NOT NULL) AS endpoint_exists,
  t.method, t.host, t.path, t.query, t.status_code, t.duration_ms, t.bytes_in, t.bytes_out, t.source_ip, t.country,
  t.user_agent, t.tls, t.routing_rule, t.edge_node, t.region, t.edge_error, t.auth_outcome, t.rbac_client_id,
  t.completed, t.capture_level`;

export interface LogFilter {
  accountId: number;
  endpointUuid?: string;
  /** Inclusive status range: a class (500-599) or one exact code. */
  status?: { min: number; max: number };
  /** Upper-case method. */
  method?: string;
  pathPrefix?: string;
  /** Inclusive from, exclusive to. */
  from?: Date;
  to?: Date;
  /** Resume strictly after this row of the previous page (newest-first order). */
  after?: { at: string; id: number };
  limit: number;
}

/** LIKE pattern matching `prefix` literally at the start. */
function likePrefix(prefix: string): string {
  return prefix.replace(/[\\%_]/g, (c) => '\\' + c) + '%';
}

/**
 * One page of an account's logs, newest first, by (created_at, id) so that a page resumes exactly after the last
 * row shown whatever is inserted meanwhile. Returns up to limit + 1 rows: the extra one says there is a next page.
 */
export async function listTrafficLogs(db: Queryable, f: LogFilter): Promise<TrafficLogSummary[]> {
  const where = ['t.account_id = $1'];
  const params: unknown[] = [f.accountId];
  const add = (sql: (n: string) => string, value: unknown) => {
    params.push(value);
    where.push(sql(`$${params.length}`));
  };
  if (f.endpointUuid !== undefined) add((n) => `t.endpoint_uuid = ${n}::uuid`, f.endpointUuid);
  if (f.status) {
    add((n) => `t.status_code >= ${n}`, f.status.min);
    add((n) => `t.status_code <= ${n}`, f.status.max);
  }
  if (f.method !== undefined) add((n) => `t.method = ${n}`, f.method);
  if (f.pathPrefix !== undefined) add((n) => `t.path LIKE ${n}`, likePrefix(f.pathPrefix));
  if (f.from) add((n) => `t.created_at >= ${n}`, f.from);
  if (f.to) add((n) => `t.created_at < ${n}`, f.to);
  if (f.after) {
    params.push(f.after.at, f.after.id);
    where.push(`(t.created_at, t.id) < ($${params.length - 1}::timestamptz, $${params.length})`);
  }
  params.push(f.limit + 1);
  const { rows } = await db.query<TrafficLogSummary>(
    `SELECT ${SUMMARY_COLUMNS}
       FROM traffic_logs t LEFT JOIN endpoints e ON e.id = t.endpoint_id
      WHERE ${where.join(' AND ')}
      ORDER BY t.created_at DESC, t.id DESC
      LIMIT $${params.length}`,
    params,
  );
  return rows;
}

/** One exchange of the account, with headers and bodies when it was captured in full; null when not the account's. */
export async function findTrafficLog(db: Queryable, accountId: number, id: number): Promise<TrafficLogDetail | null> {
  const { rows } = await db.query<TrafficLogDetail>(
    `SELECT ${SUMMARY_COLUMNS}, t.endpoint_id, e.hostname AS endpoint_hostname, t.request_headers, t.response_headers,
            t.request_body, t.response_body, t.request_body_truncated, t.response_body_truncated
       FROM traffic_logs t LEFT JOIN endpoints e ON e.id = t.endpoint_id
      WHERE t.id = $1 AND t.account_id = $2`,
    [id, accountId],
  );
  return rows[0] ?? null;
}

/** An endpoint of the account by numeric id (a logs or metrics filter); null when missing or another account's. */
export async function findAccountEndpointUuid(db: Queryable, accountId: number, id: number): Promise<string | null> {
  const { rows } = await db.query<{ uuid: string }>('SELECT uuid::text AS uuid FROM endpoints WHERE id = $1 AND account_id = $2', [id, accountId]);
  return rows[0]?.uuid ?? null;
}

export type MetricsBucket = 'minute' | 'hour' | 'day';

/** One endpoint's traffic in one bucket, summed from the minute rollup. */
export interface MetricsRow {
  endpoint_uuid: string;
  endpoint_name: string;
  at: Date;
  requests: number;
  errors_4xx: number;
  errors_5xx: number;
  bytes_in: number;
  bytes_out: number;
  duration_max_ms: number;
  /** The histogram summed over the bucket's minutes, one count per LATENCY_BOUNDS_MS slot plus the overflow. */
  latency_buckets: number[];
}

/**
 * Buckets with traffic (empty ones are absent) of the account's endpoints, or of one, in [from, to). The
 * histogram is summed slot by slot in SQL so that a day bucket costs one row per endpoint, not 1440.
 */
export async function trafficMetrics(
  db: Queryable,
  q: { accountId: number; endpointUuid?: string; bucket: MetricsBucket; from: Date; to: Date },
): Promise<MetricsRow[]> {
  const slots = LATENCY_BOUNDS_MS.length + 1;
  const sums = Array.from({ length: slots }, (_, i) => `COALESCE(sum(m.latency_buckets[${i + 1}]), 0)::float8`).join(', ');
  const params: unknown[] = [q.accountId, q.bucket, q.from, q.to];
  let endpointFilter = '';
  if (q.endpointUuid !== undefined) {
    params.push(q.endpointUuid);
    endpointFilter = ` AND m.endpoint_uuid = $${params.length}::uuid`;
  }
  const { rows } = await db.query<Omit<MetricsRow, 'latency_buckets'> & { latency_buckets: (number | string)[] }>(
    `SELECT s.*, COALESCE(e.subdomain, (SELECT l.endpoint_name FROM traffic_logs l WHERE l.endpoint_uuid = s.endpoint_uuid::uuid
                                        ORDER BY l.created_at DESC LIMIT 1), '') AS endpoint_name
       FROM (SELECT m.endpoint_uuid::text AS endpoint_uuid, date_trunc($2, m.minute, 'UTC') AS at,
                    sum(m.requests)::float8 AS requests, sum(m.errors_4xx)::float8 AS errors_4xx, sum(m.errors_5xx)::float8 AS errors_5xx,
                    sum(m.bytes_in)::float8 AS bytes_in, sum(m.bytes_out)::float8 AS bytes_out, max(m.duration_max_ms) AS duration_max_ms,
                    ARRAY[${sums}] AS latency_buckets
               FROM endpoint_traffic_minutely m
              WHERE m.account_id = $1 AND m.minute >= $3 AND m.minute < $4${endpointFilter}
              GROUP BY 1, 2) s
       LEFT JOIN endpoints e ON e.uuid = s.endpoint_uuid::uuid
      ORDER BY s.endpoint_uuid, s.at`,
    params,
  );
  return rows.map((r) => ({ ...r, latency_buckets: r.latency_buckets.map(Number) }));
}

/**
 * The q-quantile (0..1) of a latency histogram, interpolated linearly inside the bucket it falls in (as
 * Prometheus' histogram_quantile does); the overflow slot ends at the largest duration seen. Null without data.
 */
export function latencyQuantile(buckets: readonly number[], q: number, maxMs: number): number | null {
  const total = buckets.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = q * total;
  let seen = 0;
  for (let i = 0; i < buckets.length; i++) {
    const count = buckets[i];
    if (count > 0 && seen + count >= rank) {
      const lower = i === 0 ? 0 : LATENCY_BOUNDS_MS[i - 1];
      const upper = i < LATENCY_BOUNDS_MS.length ? LATENCY_BOUNDS_MS[i] : Math.max(maxMs, lower);
      const value = lower + (upper - lower) * ((rank - seen) / count);
      const clamped = maxMs > 0 ? Math.min(value, maxMs) : value;
      return Math.round(clamped * 1000) / 1000;
    }
    seen += count;
  }
  return Math.round(maxMs * 1000) / 1000;
}
