// Request and response shapes of the traffic inspector API (routes/traffic.ts), and the row → JSON views behind
// them: exchanges with their bodies as text or base64, replay answers, metrics series.
import { Type, type Static } from '@sinclair/typebox';
import { Nullable, Timestamp } from '../../shared/schema.ts';
import * as store from '../../store/traffic-queries.ts';
import type { TrafficLogDetail, TrafficLogSummary } from '../../store/traffic-queries.ts';
import { LOGS_LIMIT_DEFAULT, LOGS_LIMIT_MAX, type MetricsWindow, type Replayed } from '../services/traffic.ts';
import { iso } from '../views.ts';

/**
 * A recent-errors parameter as the query string gave it: a string, or several when repeated (`?limit=1&limit=2`).
 * The schema admits both so that a repeated parameter falls back like any other value that is not one number
 * (docs/api.md: these parameters never fail), instead of the 400 a string-only schema answers.
 */
const LenientParam = (description: string) => Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())], { description }));

export const RecentQuery = Type.Object({
  limit: LenientParam('Integer 1-100, default 20'),
  hours: LenientParam('Integer 1-720, default 24'),
  tier: LenientParam('`4xx` (400-499) or `5xx` (500 and above), case-insensitive'),
});

const RecentErrorRow = Type.Object(
  {
    id: Type.Integer({ description: 'Traffic-log row id (GET /v1/traffic/logs/{id})' }),
    status_code: Type.Integer(),
    method: Type.String(),
    path: Type.String(),
    host: Type.String(),
    source_ip: Type.String({ description: 'Empty when not recorded' }),
    created_at: Timestamp(),
    endpoint_name: Type.String({ description: 'Subdomain label; the label kept at capture when the endpoint was deleted; else empty' }),
    endpoint_uuid: Type.String({ description: 'Empty when the endpoint no longer exists' }),
  },
  { description: 'Recent error row' },
);
export const RecentView = Type.Object({ errors: Type.Array(RecentErrorRow), hours: Type.Integer() });

export const LogsQuery = Type.Object({
  endpoint: Type.Optional(Type.String({ maxLength: 64, description: 'Endpoint uuid (also of a deleted endpoint) or numeric id' })),
  status: Type.Optional(Type.String({ pattern: '^([1-5][xX][xX]|[1-5][0-9][0-9])$', description: 'A class (`2xx`..`5xx`) or an exact code' })),
  method: Type.Optional(Type.String({ pattern: '^[A-Za-z]{1,20}$', description: 'Any case' })),
  path_prefix: Type.Optional(Type.String({ pattern: '^/', maxLength: 2048, description: 'Matched literally at the start of the path' })),
  from: Type.Optional(Timestamp({ description: 'RFC 3339, inclusive' })),
  to: Type.Optional(Timestamp({ description: 'RFC 3339, exclusive' })),
  cursor: Type.Optional(Type.String({ maxLength: 200, description: 'next_cursor of the previous page' })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: LOGS_LIMIT_MAX, description: `Default ${LOGS_LIMIT_DEFAULT}` })),
});

const Headers = Type.Record(Type.String(), Type.Unknown(), {
  description: 'Header name → value, or values when repeated; Authorization, Cookie, Set-Cookie and configured secret headers redacted',
});
const CapturedBody = Type.Object(
  {
    encoding: Type.Union([Type.Literal('utf8'), Type.Literal('base64')], { description: '`utf8` when the bytes are valid UTF-8, else `base64`' }),
    data: Type.String(),
    size: Type.Integer({ description: 'Bytes held (at most the capture limit)' }),
    truncated: Type.Boolean({ description: 'The body was longer than what is held' }),
  },
  { description: 'A body, as captured or as received' },
);
const ExchangeSide = Type.Object({ headers: Headers, body: CapturedBody });

const LogSummary = Type.Object(
  {
    id: Type.Integer(),
    created_at: Timestamp({ description: 'When the request reached the edge' }),
    endpoint_uuid: Type.String(),
    endpoint_name: Type.String({ description: 'Subdomain label (kept after the endpoint is deleted)' }),
    endpoint_exists: Type.Boolean(),
    method: Type.String(),
    host: Type.String(),
    path: Type.String(),
    query: Type.String({ description: 'Raw query string without "?"' }),
    status_code: Type.Integer({ description: '0 when the exchange ended before a response head' }),
    duration_ms: Type.Number(),
    bytes_in: Type.Integer(),
    bytes_out: Type.Integer(),
    source_ip: Type.String(),
    country: Nullable(Type.String()),
    user_agent: Type.String(),
    tls: Type.Boolean(),
    routing_rule: Nullable(Type.String()),
    edge_node: Type.String(),
    region: Type.String(),
    edge_error: Nullable(Type.String({ description: 'The edge’s own error code when the edge answered' })),
    auth_outcome: Nullable(Type.String()),
    rbac_client_id: Nullable(Type.String()),
    completed: Type.Boolean(),
    capture_level: Type.Union([Type.Literal('metadata'), Type.Literal('full')]),
  },
  { description: 'A captured exchange without headers or bodies' },
);
export const LogsView = Type.Object({ items: Type.Array(LogSummary), next_cursor: Nullable(Type.String()) });
export const LogDetail = Type.Object(
  {
    ...LogSummary.properties,
    request: Nullable(ExchangeSide),
    response: Nullable(ExchangeSide),
  },
  { description: 'One captured exchange; request and response are null unless it was captured in full' },
);

export const LogParams = Type.Object({ id: Type.String({ description: 'Traffic-log row id' }) });
export const ReplayQuery = Type.Object({
  force: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')], { description: 'Allow a method other than GET/HEAD' })),
});

export const ReplayView = Type.Object({
  replayed_from: Type.Integer({ description: 'The log id that was replayed' }),
  request: Type.Object({ method: Type.String(), url: Type.String({ description: 'The URL as the visitor would have used it' }) }),
  status: Type.Integer(),
  headers: Headers,
  body: CapturedBody,
  duration_ms: Type.Number(),
});

export const MetricsQuery = Type.Object({
  endpoint: Type.Optional(Type.String({ maxLength: 64, description: 'Endpoint uuid or numeric id; omitted = every endpoint of the account' })),
  bucket: Type.Optional(Type.Union([Type.Literal('minute'), Type.Literal('hour'), Type.Literal('day')])),
  from: Type.Optional(Timestamp({ description: 'RFC 3339, inclusive (rounded down to its bucket)' })),
  to: Type.Optional(Timestamp({ description: 'RFC 3339, exclusive (rounded up to its bucket)' })),
});

const MetricsPoint = Type.Object({
  at: Timestamp({ description: 'Start of the bucket (UTC)' }),
  requests: Type.Integer(),
  errors_4xx: Type.Integer(),
  errors_5xx: Type.Integer(),
  latency_ms: Type.Object(
    { p50: Nullable(Type.Number()), p95: Nullable(Type.Number()), p99: Nullable(Type.Number()), max: Type.Number() },
    { description: 'From the rollup’s latency histogram, interpolated inside a bucket' },
  ),
  bytes_in: Type.Integer(),
  bytes_out: Type.Integer(),
});

export const MetricsView = Type.Object({
  bucket: Type.String(),
  from: Timestamp(),
  to: Timestamp(),
  series: Type.Array(Type.Object({ endpoint_uuid: Type.String(), endpoint_name: Type.String(), points: Type.Array(MetricsPoint) }, { description: 'One endpoint' })),
});

export function summaryView(r: TrafficLogSummary) {
  return {
    id: r.id,
    created_at: iso(r.created_at),
    endpoint_uuid: r.endpoint_uuid,
    endpoint_name: r.endpoint_name,
    endpoint_exists: r.endpoint_exists,
    method: r.method,
    host: r.host,
    path: r.path,
    query: r.query,
    status_code: r.status_code,
    duration_ms: r.duration_ms,
    bytes_in: r.bytes_in,
    bytes_out: r.bytes_out,
    source_ip: r.source_ip,
    country: r.country,
    user_agent: r.user_agent,
    tls: r.tls,
    routing_rule: r.routing_rule,
    edge_node: r.edge_node,
    region: r.region,
    edge_error: r.edge_error,
    auth_outcome: r.auth_outcome,
    rbac_client_id: r.rbac_client_id,
    completed: r.completed,
    capture_level: r.capture_level,
  };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Bytes as JSON: text when they are UTF-8 (the common case, readable in a terminal), base64 otherwise. */
function bodyView(bytes: Uint8Array | Buffer | null, truncated: boolean) {
  const buf = bytes ? Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) : Buffer.alloc(0);
  try {
    return { encoding: 'utf8' as const, data: utf8.decode(buf), size: buf.length, truncated };
  } catch {
    return { encoding: 'base64' as const, data: buf.toString('base64'), size: buf.length, truncated };
  }
}

export function detailView(r: TrafficLogDetail) {
  const full = r.capture_level === 'full';
  return {
    ...summaryView(r),
    request: full ? { headers: r.request_headers ?? {}, body: bodyView(r.request_body, r.request_body_truncated) } : null,
    response: full ? { headers: r.response_headers ?? {}, body: bodyView(r.response_body, r.response_body_truncated) } : null,
  };
}

export function replayView({ logId, method, url, answer }: Replayed) {
  return {
    replayed_from: logId,
    request: { method, url },
    status: answer.status,
    headers: answer.headers,
    body: bodyView(answer.body, answer.truncated),
    duration_ms: Math.round(answer.durationMs * 1000) / 1000,
  };
}

/** The rollup rows as one series per endpoint, points in the store's order, latency quantiles from each histogram. */
export function metricsView({ bucket, from, to, rows }: MetricsWindow) {
  const series = new Map<string, { endpoint_uuid: string; endpoint_name: string; points: Static<typeof MetricsPoint>[] }>();
  for (const r of rows) {
    let s = series.get(r.endpoint_uuid);
    if (!s) series.set(r.endpoint_uuid, (s = { endpoint_uuid: r.endpoint_uuid, endpoint_name: r.endpoint_name, points: [] }));
    s.points.push({
      at: iso(r.at),
      requests: r.requests,
      errors_4xx: r.errors_4xx,
      errors_5xx: r.errors_5xx,
      latency_ms: {
        p50: store.latencyQuantile(r.latency_buckets, 0.5, r.duration_max_ms),
        p95: store.latencyQuantile(r.latency_buckets, 0.95, r.duration_max_ms),
        p99: store.latencyQuantile(r.latency_buckets, 0.99, r.duration_max_ms),
        max: r.duration_max_ms,
      },
      bytes_in: r.bytes_in,
      bytes_out: r.bytes_out,
    });
  }
  return { bucket, from: from.toISOString(), to: to.toISOString(), series: [...series.values()] };
}
