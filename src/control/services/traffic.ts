// The traffic inspector's operations (docs/traffic.md "API"): recent errors, captured exchanges page by page and one
// by one, their replay through an edge (services/traffic-replay.ts), and metrics windows over the minute rollup.
import type { Logger } from '../../shared/log.ts';
import { fail } from '../../shared/errors.ts';
import type { Database } from '../../store/db.ts';
import * as store from '../../store/traffic-queries.ts';
import type { MetricsBucket, MetricsRow, RecentErrorRow, TrafficLogDetail, TrafficLogSummary } from '../../store/traffic-queries.ts';
import type { Caller } from '../caller.ts';
import { int64Param, type ControlDeps } from '../http.ts';
import { REPLAY_LIMITS, REPLAY_TIMEOUT_MS, replayHeaders, ReplaySlots, sendReplay, type ReplayAnswer } from './traffic-replay.ts';
import { uuidOrId } from '../validation.ts';

// ---------------------------------------------------------------------------------------------------------------
// Recent errors (docs/api.md "Recent errors"): forgiving parameters, each falling back to its default
// ---------------------------------------------------------------------------------------------------------------

const RECENT = { limit: { min: 1, max: 100, fallback: 20 }, hours: { min: 1, max: 720, fallback: 24 } } as const;

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

type Lenient = string | string[] | undefined;

// ---------------------------------------------------------------------------------------------------------------
// Logs: strict filters, an opaque cursor
// ---------------------------------------------------------------------------------------------------------------

export const LOGS_LIMIT_DEFAULT = 50;
export const LOGS_LIMIT_MAX = 100;
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
  const bad = () => fail.invalid_query('Invalid query parameter cursor', { field: 'cursor', reason: 'must be a next_cursor from an earlier page' });
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
async function endpointFilter(db: Database, caller: Caller, value: string | undefined): Promise<string | undefined> {
  if (value === undefined || value === '') return undefined;
  const named = uuidOrId(value);
  if (named === null) throw fail.invalid_query('Invalid query parameter endpoint', { field: 'endpoint', reason: 'an endpoint uuid or a positive integer id' });
  if ('uuid' in named) return named.uuid;
  const uuid = await store.findAccountEndpointUuid(db, caller.account.id, named.id);
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
  if (!real) throw fail.invalid_query(`Invalid query parameter ${name}`, { field: name, reason: 'must be an RFC 3339 time from 1970 on, with a real date' });
  return date;
}

function timeRange(from: string | undefined, to: string | undefined): { from?: Date; to?: Date } {
  const range = { from: from === undefined ? undefined : realTime('from', from), to: to === undefined ? undefined : realTime('to', to) };
  if (range.from && range.to && range.from >= range.to) throw fail.invalid_query('Invalid time range', { field: 'from', reason: 'must be before to' });
  return range;
}

export interface LogsQuery {
  endpoint?: string;
  status?: string;
  method?: string;
  path_prefix?: string;
  from?: string;
  to?: string;
  cursor?: string;
  limit?: number;
}

// ---------------------------------------------------------------------------------------------------------------
// Replay and metrics
// ---------------------------------------------------------------------------------------------------------------

const SAFE_METHODS = new Set(['GET', 'HEAD']);

export interface Replayed {
  logId: number;
  method: string;
  /** The URL as the visitor would have used it. */
  url: string;
  answer: ReplayAnswer;
}

const BUCKET_MS: Record<MetricsBucket, number> = { minute: 60_000, hour: 3_600_000, day: 86_400_000 };
/** With no `from`, the window looks back this many buckets from `to`. */
export const DEFAULT_BUCKETS: Record<MetricsBucket, number> = { minute: 60, hour: 24, day: 30 };
export const MAX_METRICS_BUCKETS = 1440;

export interface MetricsWindow {
  bucket: MetricsBucket;
  from: Date;
  to: Date;
  rows: MetricsRow[];
}

const notFound = () => fail.not_found('Traffic log not found');

export function trafficService({ db, replayEdge }: Pick<ControlDeps, 'db' | 'replayEdge'>) {
  const replaySlots = new ReplaySlots();

  return {
    /** Error responses of the active account within the last `hours`, newest first; parameters never fail. */
    async recentErrors(caller: Caller, q: { limit?: Lenient; hours?: Lenient; tier?: Lenient }): Promise<{ rows: RecentErrorRow[]; hours: number }> {
      const limit = lenientInt(q.limit, RECENT.limit);
      const hours = lenientInt(q.hours, RECENT.hours);
      const rows = await store.recentErrors(db, { accountId: caller.account.id, limit, hours, tier: tierOf(q.tier) });
      return { rows, hours };
    },

    /** One page of captured exchanges, newest first, and the cursor of the next page (null on the last). */
    async logs(caller: Caller, q: LogsQuery): Promise<{ page: TrafficLogSummary[]; nextCursor: string | null }> {
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
      return { page, nextCursor: rows.length > limit ? encodeCursor(page[page.length - 1]) : null };
    },

    async log(caller: Caller, id: number): Promise<TrafficLogDetail> {
      const row = await store.findTrafficLog(db, caller.account.id, id);
      if (!row) throw notFound();
      return row;
    },

    /**
     * Sends a captured request again through an edge, as a visitor's. Only whole captures replay; a method other than
     * GET or HEAD needs `force`. The route declares both permissions it needs (traffic:read, endpoints:write).
     */
    async replay(caller: Caller, logId: string, force: boolean, log: Logger): Promise<Replayed> {
      const id = int64Param(logId);
      const row = await store.findTrafficLog(db, caller.account.id, id);
      if (!row) throw notFound();
      const notCaptured = (message: string, reason: string) => fail.replay_not_captured(message, { reason });
      if (row.capture_level !== 'full') throw notCaptured('Only exchanges captured at level full can be replayed', 'capture_level');
      if (row.request_body_truncated) throw notCaptured('The request body was longer than the capture limit', 'request_body_truncated');
      if (row.endpoint_hostname === null) throw notCaptured('The endpoint has been deleted', 'endpoint_deleted');
      if (!SAFE_METHODS.has(row.method) && !force) {
        throw fail.invalid_query(`Replaying a ${row.method} request may change data; pass force=true to send it anyway`, {
          field: 'force',
          reason: `true is needed to replay ${row.method}`,
          method: row.method,
        });
      }
      const target = replayEdge?.(row.tls) ?? null;
      if (!target) throw fail.unavailable('No edge is configured for replays on this node (EDGE_REPLAY_EDGE_URL)');

      const body = row.request_body ? Buffer.from(row.request_body.buffer, row.request_body.byteOffset, row.request_body.byteLength) : Buffer.alloc(0);
      const path = row.query === '' ? row.path : `${row.path}?${row.query}`;
      const hostname = row.endpoint_hostname;
      const release = replaySlots.take(caller.account.id);
      if (release === null) throw fail.replay_busy(undefined, { limit: REPLAY_LIMITS.perAccount });
      let answer: ReplayAnswer;
      try {
        answer = await sendReplay(target, { method: row.method, path, hostname, headers: replayHeaders(row.request_headers, hostname, id, body.length), body });
      } catch (err) {
        const e = err as NodeJS.ErrnoException;
        const reason = e.name === 'TimeoutError' || e.name === 'AbortError' ? `no answer within ${REPLAY_TIMEOUT_MS / 1000} s` : (e.code ?? e.message);
        log.warn({ err, log_id: id, edge: target.origin }, 'traffic replay failed');
        throw fail.replay_failed(undefined, { reason });
      } finally {
        release();
      }
      return { logId: id, method: row.method, url: `${row.tls ? 'https' : 'http'}://${hostname}${path}`, answer };
    },

    /** The rollup rows of a window aligned to its buckets: `to` rounded up (default now), `from` down (default a span back). */
    async metrics(caller: Caller, q: { endpoint?: string; bucket?: MetricsBucket; from?: string; to?: string }): Promise<MetricsWindow> {
      const bucket: MetricsBucket = q.bucket ?? 'hour';
      const step = BUCKET_MS[bucket];
      const range = timeRange(q.from, q.to);
      const to = Math.ceil((range.to ?? new Date()).getTime() / step) * step;
      const from = range.from ? Math.floor(range.from.getTime() / step) * step : to - DEFAULT_BUCKETS[bucket] * step;
      const buckets = (to - from) / step;
      if (buckets <= 0) throw fail.invalid_query('Invalid time range', { field: 'from', reason: 'must be before to (to defaults to now)' });
      if (buckets > MAX_METRICS_BUCKETS) {
        throw fail.invalid_query(`The window spans ${buckets} ${bucket} buckets; at most ${MAX_METRICS_BUCKETS}`, {
          field: 'from',
          reason: `at most ${MAX_METRICS_BUCKETS} ${bucket} buckets before to`,
          buckets,
          max: MAX_METRICS_BUCKETS,
        });
      }
      const window = { bucket, from: new Date(from), to: new Date(to) };
      const rows = await store.trafficMetrics(db, { accountId: caller.account.id, endpointUuid: await endpointFilter(db, caller, q.endpoint), ...window });
      return { ...window, rows };
    },
  };
}
