// The traffic inspector API: recent errors (docs/api.md), captured exchanges page by page and one by one, their replay
// through an edge as a visitor's request, and per-endpoint metrics from the minute rollup. Reads only, account-scoped.
import http from 'node:http';
import https from 'node:https';
import { Type, type Static } from '@sinclair/typebox';
import { EdgeError, fail } from '../../shared/errors.ts';
import { isUuid, Nullable, parseInt64, Timestamp } from '../../shared/schema.ts';
import * as store from '../../store/traffic-queries.ts';
import type { MetricsBucket, TrafficLogDetail, TrafficLogSummary } from '../../store/traffic-queries.ts';
import type { Caller } from '../caller.ts';
import { int64Param, type ControlApp, type ControlDeps } from '../http.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';

// ---------------------------------------------------------------------------------------------------------------
// Recent errors (docs/api.md "Recent errors"): forgiving parameters, each falling back to its default
// ---------------------------------------------------------------------------------------------------------------

const RECENT = { limit: { min: 1, max: 100, fallback: 20 }, hours: { min: 1, max: 720, fallback: 24 } } as const;

/**
 * A recent-errors parameter as the query string gave it: a string, or several when repeated (`?limit=1&limit=2`).
 * The schema admits both so that a repeated parameter falls back like any other value that is not one number
 * (docs/api.md: these parameters never fail), instead of the 400 a string-only schema answers.
 */
const LenientParam = (description: string) => Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())], { description }));

/** A decimal integer inside [min, max], else the fallback: docs/api.md's "out-of-range or non-numeric falls back". */
function lenientInt(value: string | string[] | undefined, bounds: { min: number; max: number; fallback: number }): number {
  if (typeof value !== 'string' || !/^[0-9]{1,9}$/.test(value)) return bounds.fallback;
  const n = Number(value);
  return n >= bounds.min && n <= bounds.max ? n : bounds.fallback;
}

function tierOf(value: string | string[] | undefined): '4xx' | '5xx' | null {
  const v = typeof value === 'string' ? value.toLowerCase() : undefined;
  return v === '4xx' || v === '5xx' ? v : null;
}

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

// ---------------------------------------------------------------------------------------------------------------
// Logs: strict filters, an opaque cursor
// ---------------------------------------------------------------------------------------------------------------

const LOGS_LIMIT_DEFAULT = 50;
const LOGS_LIMIT_MAX = 100;
const CURSOR_AT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/** The position after a row in newest-first order: its exact time and id, base64url JSON so clients treat it as opaque. */
function encodeCursor(row: Pick<TrafficLogSummary, 'at_text' | 'id'>): string {
  return Buffer.from(JSON.stringify([row.at_text, row.id])).toString('base64url');
}

/** `YYYY-MM-DDTHH:MM:SS.ffffffZ` naming a real instant from 1970 on: it reads back unchanged to the millisecond. */
function exactTime(at: string): boolean {
  const ms = Date.parse(at);
  return !Number.isNaN(ms) && ms >= 0 && new Date(ms).toISOString() === `${at.slice(0, 23)}Z`;
}

function decodeCursor(value: string): { at: string; id: number } {
  const bad = () => fail.invalid_query('Invalid query parameter cursor', 'cursor must be a next_cursor from an earlier page');
  let parsed: unknown;
  try {
    if (!/^[A-Za-z0-9_-]{1,200}$/.test(value)) throw bad();
    parsed = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
  } catch {
    throw bad();
  }
  if (!Array.isArray(parsed) || parsed.length !== 2) throw bad();
  const [at, id] = parsed;
  // The regex admits what no row has (February 31, hour 25, year 0): JavaScript rolls some over, the database refuses
  // them. A time is taken only when it reads back the same, from 1970 on.
  if (typeof at !== 'string' || !CURSOR_AT.test(at) || !exactTime(at)) throw bad();
  if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 1) throw bad();
  return { at, id };
}

/** `5xx` (any case) is the class 500-599; a three-digit code is itself. */
function statusRange(value: string): { min: number; max: number } {
  if (/^[1-5]xx$/i.test(value)) {
    const c = Number(value[0]) * 100;
    return { min: c, max: c + 99 };
  }
  const n = Number(value);
  return { min: n, max: n };
}

/**
 * An endpoint named by a filter: a uuid is taken as is (logs of a deleted endpoint keep its uuid, and the account
 * scope already hides other accounts' rows); a numeric id must be a live endpoint of the account (404 otherwise).
 */
async function endpointFilter(db: ControlDeps['db'], caller: Caller, value: string | undefined): Promise<string | undefined> {
  if (value === undefined || value === '') return undefined;
  if (isUuid(value)) return value.toLowerCase();
  const id = parseInt64(value);
  if (id === null) throw fail.invalid_query('Invalid query parameter endpoint', 'endpoint is an endpoint uuid or a positive integer id');
  const uuid = await store.findAccountEndpointUuid(db, caller.account.id, id);
  if (uuid === null) throw fail.not_found('Endpoint not found');
  return uuid;
}

/**
 * An RFC 3339 time whose calendar fields are real (the schema's date-time check lets February 31 through, and
 * JavaScript reads it as March 3), from 1970 on; else a 400 naming the parameter.
 */
function realTime(name: 'from' | 'to', value: string): Date {
  const m = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})/.exec(value);
  const date = new Date(value);
  const [y, mo, d, h, mi, sec] = m ? m.slice(1).map(Number) : [];
  const real =
    m !== null && !Number.isNaN(date.getTime()) && y >= 1970 && mo >= 1 && mo <= 12 && d >= 1 && d <= new Date(Date.UTC(y, mo, 0)).getUTCDate() && h <= 23 && mi <= 59 && sec <= 60;
  if (!real) throw fail.invalid_query(`Invalid query parameter ${name}`, `${name} must be an RFC 3339 time from 1970 on, with a real date`);
  return date;
}

function timeRange(from: string | undefined, to: string | undefined): { from?: Date; to?: Date } {
  const range = { from: from === undefined ? undefined : realTime('from', from), to: to === undefined ? undefined : realTime('to', to) };
  if (range.from && range.to && range.from >= range.to) throw fail.invalid_query('Invalid time range', 'from must be before to');
  return range;
}

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
const LogDetail = Type.Object(
  {
    ...LogSummary.properties,
    request: Nullable(ExchangeSide),
    response: Nullable(ExchangeSide),
  },
  { description: 'One captured exchange; request and response are null unless it was captured in full' },
);

function summaryView(r: TrafficLogSummary) {
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

function detailView(r: TrafficLogDetail) {
  const full = r.capture_level === 'full';
  return {
    ...summaryView(r),
    request: full ? { headers: r.request_headers ?? {}, body: bodyView(r.request_body, r.request_body_truncated) } : null,
    response: full ? { headers: r.response_headers ?? {}, body: bodyView(r.response_body, r.response_body_truncated) } : null,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Replay: an HTTP client request to an edge's public listener, as a visitor's
// ---------------------------------------------------------------------------------------------------------------

const REPLAY_RESPONSE_LIMIT = 1024 * 1024;
const REPLAY_TIMEOUT_MS = 30_000;
const SAFE_METHODS = new Set(['GET', 'HEAD']);
/**
 * Never re-sent: hop-by-hop headers (RFC 9110 7.6.1), what the new connection frames itself (Host, Content-Length),
 * an Expect that would wait for a 100 that nobody reads, and credentials, which capture redacts anyway.
 */
const NOT_RESENT = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'host',
  'content-length',
  'expect',
  'authorization',
  'proxy-authorization',
  'cookie',
]);
/** What capture writes in place of a secret header's value. */
const REDACTED = /^\[?redacted\]?$/i;

function replayHeaders(captured: Record<string, unknown> | null, hostname: string, logId: number, bodyLength: number): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(captured ?? {})) {
    const key = name.toLowerCase();
    if (NOT_RESENT.has(key) || key.startsWith(':')) continue;
    const values = (Array.isArray(value) ? value : [value]).filter((v): v is string => typeof v === 'string' && !REDACTED.test(v));
    if (values.length === 0) continue;
    out[key] = values.length === 1 ? values[0] : values;
  }
  out.host = hostname;
  out['x-replay-of'] = String(logId);
  if (bodyLength > 0) out['content-length'] = String(bodyLength);
  return out;
}

interface ReplayAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  truncated: boolean;
  durationMs: number;
}

/** Sends one request to `origin` with Host (and SNI) naming the endpoint; reads at most the response limit. */
function sendReplay(
  target: { origin: string; verifyTls: boolean },
  request: { method: string; path: string; hostname: string; headers: http.OutgoingHttpHeaders; body: Buffer },
): Promise<ReplayAnswer> {
  const url = new URL(target.origin);
  const secure = url.protocol === 'https:';
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const options: https.RequestOptions = {
      host: url.hostname.replace(/^\[|\]$/g, ''),
      port: url.port || (secure ? 443 : 80),
      method: request.method,
      path: request.path,
      headers: request.headers,
      agent: false,
      signal: AbortSignal.timeout(REPLAY_TIMEOUT_MS),
    };
    if (secure) Object.assign(options, { servername: request.hostname, rejectUnauthorized: target.verifyTls });
    const req = (secure ? https : http).request(options, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let truncated = false;
      const done = () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks, size), truncated, durationMs: performance.now() - started });
      res.on('data', (chunk: Buffer) => {
        if (truncated) return;
        const room = REPLAY_RESPONSE_LIMIT - size;
        if (chunk.length > room) {
          chunks.push(chunk.subarray(0, room));
          size += room;
          truncated = true;
          res.destroy();
          return done();
        }
        chunks.push(chunk);
        size += chunk.length;
      });
      res.on('end', done);
      // Cut mid-body after the head: what arrived is the answer, marked incomplete.
      res.on('error', () => {
        truncated = true;
        done();
      });
    });
    req.on('error', reject);
    req.end(request.body.length > 0 ? request.body : undefined);
  });
}

/**
 * Replays in flight, per account and in this control process. Each holds a socket for up to 30 s and buffers up to
 * 1 MiB of answer, so unbounded they would let one account pile up memory and sockets against its own slow endpoint.
 */
export const REPLAY_LIMITS = { perAccount: 4, perProcess: 64 } as const;

class ReplaySlots {
  private readonly byAccount = new Map<number, number>();
  private total = 0;

  /** A release function, or null when the account or the process is at its limit. */
  take(accountId: number): (() => void) | null {
    const held = this.byAccount.get(accountId) ?? 0;
    if (held >= REPLAY_LIMITS.perAccount || this.total >= REPLAY_LIMITS.perProcess) return null;
    this.byAccount.set(accountId, held + 1);
    this.total++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      const left = (this.byAccount.get(accountId) ?? 1) - 1;
      if (left === 0) this.byAccount.delete(accountId);
      else this.byAccount.set(accountId, left);
    };
  }
}

const ReplayView = Type.Object({
  replayed_from: Type.Integer({ description: 'The log id that was replayed' }),
  request: Type.Object({ method: Type.String(), url: Type.String({ description: 'The URL as the visitor would have used it' }) }),
  status: Type.Integer(),
  headers: Headers,
  body: CapturedBody,
  duration_ms: Type.Number(),
});

// ---------------------------------------------------------------------------------------------------------------
// Metrics
// ---------------------------------------------------------------------------------------------------------------

const BUCKET_MS: Record<MetricsBucket, number> = { minute: 60_000, hour: 3_600_000, day: 86_400_000 };
/** With no `from`, the window looks back this many buckets from `to`. */
const DEFAULT_BUCKETS: Record<MetricsBucket, number> = { minute: 60, hour: 24, day: 30 };
export const MAX_METRICS_BUCKETS = 1440;

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

// ---------------------------------------------------------------------------------------------------------------
// Routes
// ---------------------------------------------------------------------------------------------------------------

const LogParams = Type.Object({ id: Type.String({ description: 'Traffic-log row id' }) });

export function trafficRoutes(app: ControlApp, { db, replayEdge }: ControlDeps): void {
  const replaySlots = new ReplaySlots();

  app.get(
    '/v1/traffic/errors/recent',
    {
      schema: {
        summary: 'Recent error responses of the active account, newest first',
        description:
          'Responses with status >= 400 within the last `hours`. Every parameter falls back to its default when out of range ' +
          'or not a number (docs/api.md): limit 1-100 (default 20), hours 1-720 (default 24); tier `4xx` or `5xx` (any case), ' +
          'anything else all errors. Needs traffic:read in the active account.',
        tags: ['traffic'],
        querystring: Type.Object({
          limit: LenientParam('Integer 1-100, default 20'),
          hours: LenientParam('Integer 1-720, default 24'),
          tier: LenientParam('`4xx` (400-499) or `5xx` (500 and above), case-insensitive'),
        }),
        response: { 200: Type.Object({ errors: Type.Array(RecentErrorRow), hours: Type.Integer() }), ...ErrorResponses },
      },
    },
    async (req) => {
      req.caller.requirePermission('traffic:read');
      const limit = lenientInt(req.query.limit, RECENT.limit);
      const hours = lenientInt(req.query.hours, RECENT.hours);
      const rows = await store.recentErrors(db, { accountId: req.caller.account.id, limit, hours, tier: tierOf(req.query.tier) });
      return { errors: rows.map((r) => ({ ...r, created_at: iso(r.created_at) })), hours };
    },
  );

  app.get(
    '/v1/traffic/logs',
    {
      schema: {
        summary: 'Captured exchanges of the active account, newest first',
        description:
          'Rows without headers or bodies. Filters combine with AND. Cursor pagination: pass `next_cursor` as `cursor` for ' +
          'the next page; a page resumes right after the last row shown, so rows captured meanwhile never shift or repeat ' +
          'it. `next_cursor` is null on the last page. Needs traffic:read.',
        tags: ['traffic'],
        querystring: Type.Object({
          endpoint: Type.Optional(Type.String({ maxLength: 64, description: 'Endpoint uuid (also of a deleted endpoint) or numeric id' })),
          status: Type.Optional(Type.String({ pattern: '^([1-5][xX][xX]|[1-5][0-9][0-9])$', description: 'A class (`2xx`..`5xx`) or an exact code' })),
          method: Type.Optional(Type.String({ pattern: '^[A-Za-z]{1,20}$', description: 'Any case' })),
          path_prefix: Type.Optional(Type.String({ pattern: '^/', maxLength: 2048, description: 'Matched literally at the start of the path' })),
          from: Type.Optional(Timestamp({ description: 'RFC 3339, inclusive' })),
          to: Type.Optional(Timestamp({ description: 'RFC 3339, exclusive' })),
          cursor: Type.Optional(Type.String({ maxLength: 200, description: 'next_cursor of the previous page' })),
          limit: Type.Optional(Type.Integer({ minimum: 1, maximum: LOGS_LIMIT_MAX, description: `Default ${LOGS_LIMIT_DEFAULT}` })),
        }),
        response: { 200: Type.Object({ items: Type.Array(LogSummary), next_cursor: Nullable(Type.String()) }), ...ErrorResponses },
      },
    },
    async (req) => {
      const { caller } = req;
      caller.requirePermission('traffic:read');
      const q = req.query;
      const limit = q.limit ?? LOGS_LIMIT_DEFAULT;
      const after = q.cursor === undefined || q.cursor === '' ? undefined : decodeCursor(q.cursor);
      const range = timeRange(q.from, q.to);
      const rows = await store.listTrafficLogs(db, {
        accountId: caller.account.id,
        endpointUuid: await endpointFilter(db, caller, q.endpoint),
        status: q.status === undefined ? undefined : statusRange(q.status),
        method: q.method?.toUpperCase(),
        pathPrefix: q.path_prefix,
        ...range,
        after,
        limit,
      });
      const page = rows.slice(0, limit);
      return { items: page.map(summaryView), next_cursor: rows.length > limit ? encodeCursor(page[page.length - 1]) : null };
    },
  );

  app.get(
    '/v1/traffic/logs/:id',
    {
      schema: {
        summary: 'One captured exchange',
        description:
          'With request and response headers and bodies when the endpoint captured at level `full` (bodies up to the capture ' +
          'limit, `truncated` when longer). Another account’s row is 404. Needs traffic:read.',
        tags: ['traffic'],
        params: LogParams,
        response: { 200: LogDetail, ...ErrorResponses },
      },
    },
    async (req) => {
      req.caller.requirePermission('traffic:read');
      const row = await store.findTrafficLog(db, req.caller.account.id, int64Param(req.params.id));
      if (!row) throw fail.not_found('Traffic log not found');
      return detailView(row);
    },
  );

  app.post(
    '/v1/traffic/logs/:id/replay',
    {
      schema: {
        summary: 'Replay a captured request through the edge',
        description:
          'Sends the captured request again to an edge’s public listener with the endpoint’s hostname, as a visitor would, so ' +
          'it meets the endpoint as it is now (auth, RBAC, rate limits, routing, the current agent or origin). Only exchanges ' +
          'captured in full with their whole request body (409 replay_not_captured otherwise); methods other than GET and HEAD ' +
          'need `?force=true` (400 otherwise). Redacted headers are not re-sent. Answers the new status, headers and body ' +
          '(at most 1 MiB, `truncated` beyond). Needs traffic:read and endpoints:write. No body.',
        tags: ['traffic'],
        params: LogParams,
        querystring: Type.Object({ force: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')], { description: 'Allow a method other than GET/HEAD' })) }),
        response: { 200: ReplayView, ...ErrorResponses, 409: ErrorBody, 429: ErrorBody, 502: ErrorBody, 503: ErrorBody },
      },
    },
    async (req) => {
      const { caller } = req;
      caller.requirePermission('traffic:read');
      caller.requirePermission('endpoints:write');
      const id = int64Param(req.params.id);
      const row = await store.findTrafficLog(db, caller.account.id, id);
      if (!row) throw fail.not_found('Traffic log not found');
      const notCaptured = (message: string, reason: string) => new EdgeError(409, 'replay_not_captured', message, { reason });
      if (row.capture_level !== 'full') throw notCaptured('Only exchanges captured at level full can be replayed', 'capture_level');
      if (row.request_body_truncated) throw notCaptured('The request body was longer than the capture limit', 'request_body_truncated');
      if (row.endpoint_hostname === null) throw notCaptured('The endpoint has been deleted', 'endpoint_deleted');
      if (!SAFE_METHODS.has(row.method) && req.query.force !== 'true') {
        throw fail.invalid_query(`Replaying a ${row.method} request may change data; pass force=true to send it anyway`, { method: row.method });
      }
      const target = replayEdge?.(row.tls) ?? null;
      if (!target) throw fail.unavailable('No edge is configured for replays on this node (EDGE_REPLAY_EDGE_URL)');

      const body = row.request_body ? Buffer.from(row.request_body.buffer, row.request_body.byteOffset, row.request_body.byteLength) : Buffer.alloc(0);
      const path = row.query === '' ? row.path : `${row.path}?${row.query}`;
      const hostname = row.endpoint_hostname;
      const release = replaySlots.take(caller.account.id);
      if (release === null) throw new EdgeError(429, 'replay_busy', 'Too many replays of this account are in progress; retry when one has finished', { limit: REPLAY_LIMITS.perAccount });
      let answer: ReplayAnswer;
      try {
        answer = await sendReplay(target, { method: row.method, path, hostname, headers: replayHeaders(row.request_headers, hostname, id, body.length), body });
      } catch (err) {
        const e = err as NodeJS.ErrnoException;
        const reason = e.name === 'TimeoutError' || e.name === 'AbortError' ? `no answer within ${REPLAY_TIMEOUT_MS / 1000} s` : (e.code ?? e.message);
        req.log.warn({ err, log_id: id, edge: target.origin }, 'traffic replay failed');
        throw new EdgeError(502, 'replay_failed', 'The replay could not be completed through the edge', { reason });
      } finally {
        release();
      }
      return {
        replayed_from: id,
        request: { method: row.method, url: `${row.tls ? 'https' : 'http'}://${hostname}${path}` },
        status: answer.status,
        headers: answer.headers,
        body: bodyView(answer.body, answer.truncated),
        duration_ms: Math.round(answer.durationMs * 1000) / 1000,
      };
    },
  );

  app.get(
    '/v1/traffic/metrics',
    {
      schema: {
        summary: 'Traffic per endpoint and time bucket',
        description:
          'From the per-minute rollup, which counts every exchange whether capture is on or off. Buckets are UTC-aligned and ' +
          `only those with traffic are listed. Defaults: bucket hour, to now, from ${DEFAULT_BUCKETS.minute} minutes / ` +
          `${DEFAULT_BUCKETS.hour} hours / ${DEFAULT_BUCKETS.day} days before to; at most ${MAX_METRICS_BUCKETS} buckets ` +
          'in the window (400 otherwise). Needs traffic:read.',
        tags: ['traffic'],
        querystring: Type.Object({
          endpoint: Type.Optional(Type.String({ maxLength: 64, description: 'Endpoint uuid or numeric id; omitted = every endpoint of the account' })),
          bucket: Type.Optional(Type.Union([Type.Literal('minute'), Type.Literal('hour'), Type.Literal('day')])),
          from: Type.Optional(Timestamp({ description: 'RFC 3339, inclusive (rounded down to its bucket)' })),
          to: Type.Optional(Timestamp({ description: 'RFC 3339, exclusive (rounded up to its bucket)' })),
        }),
        response: {
          200: Type.Object({
            bucket: Type.String(),
            from: Timestamp(),
            to: Timestamp(),
            series: Type.Array(
              Type.Object({ endpoint_uuid: Type.String(), endpoint_name: Type.String(), points: Type.Array(MetricsPoint) }, { description: 'One endpoint' }),
            ),
          }),
          ...ErrorResponses,
        },
      },
    },
    async (req) => {
      const { caller } = req;
      caller.requirePermission('traffic:read');
      const q = req.query;
      const bucket: MetricsBucket = q.bucket ?? 'hour';
      const step = BUCKET_MS[bucket];
      const range = timeRange(q.from, q.to);
      const to = Math.ceil((range.to ?? new Date()).getTime() / step) * step;
      const from = range.from ? Math.floor(range.from.getTime() / step) * step : to - DEFAULT_BUCKETS[bucket] * step;
      const buckets = (to - from) / step;
      if (buckets <= 0) throw fail.invalid_query('Invalid time range', 'from must be before to (to defaults to now)');
      if (buckets > MAX_METRICS_BUCKETS) {
        throw fail.invalid_query(`The window spans ${buckets} ${bucket} buckets; at most ${MAX_METRICS_BUCKETS}`, { buckets, max: MAX_METRICS_BUCKETS });
      }
      const rows = await store.trafficMetrics(db, {
        accountId: caller.account.id,
        endpointUuid: await endpointFilter(db, caller, q.endpoint),
        bucket,
        from: new Date(from),
        to: new Date(to),
      });
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
      return { bucket, from: new Date(from).toISOString(), to: new Date(to).toISOString(), series: [...series.values()] };
    },
  );
}
