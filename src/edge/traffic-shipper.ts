// The edge's end of traffic storage: counts every finished exchange into per-endpoint, per-minute usage (sent every
// couple of seconds as one traffic_usage record) and queues the exchanges of endpoints with capture on, sent in
// batches as traffic_exchange records on the record stream (docs/traffic.md "Storage"). Nothing here waits.
import type { IncomingHttpHeaders } from 'node:http';
import {
  RECORD_LIMITS,
  TRAFFIC_LATENCY_BOUNDS_MS,
  type RecordSink,
  type TrafficExchangeRecord,
  type TrafficUsageEntry,
  type TrafficUsageRecord,
} from '../shared/records/types.ts';
import type { CaptureSink, CapturedBody, CapturedExchange } from './capture.ts';

/**
 * Header values never stored, whatever the configuration adds (lower-case): credentials by standard or by wide use.
 * The endpoint's own token header is added per exchange (CapturedDetail.redact).
 */
export const ALWAYS_REDACTED = ['authorization', 'proxy-authorization', 'cookie', 'set-cookie', 'x-api-key', 'x-auth-token', 'x-access-token'] as const;

/**
 * Query parameters whose values are never stored (lower-case names), at either level: OAuth codes and tokens in
 * redirects (the edge's own login callback among them), API keys and passwords some clients put in URLs.
 */
export const REDACTED_QUERY_PARAMS: ReadonlySet<string> = new Set([
  'access_token',
  'id_token',
  'refresh_token',
  'code',
  'token',
  'api_key',
  'apikey',
  'password',
  'client_secret',
]);
export const REDACTED = '[redacted]';
const SHORTEST_REDACTED_PARAM = Math.min(...[...REDACTED_QUERY_PARAMS].map((p) => p.length));
const LONGEST_REDACTED_PARAM = Math.max(...[...REDACTED_QUERY_PARAMS].map((p) => p.length));

export interface TrafficShipperOptions {
  sink: RecordSink;
  /** This edge's node id and region, written into each record. */
  edge: string;
  region: string;
  /** More header names to redact (EDGE_CAPTURE_REDACT_HEADERS), any case. */
  redactHeaders?: readonly string[];
  /** How often usage is sent (ms); 0 or less: only on flush(). */
  usageIntervalMs?: number;
  /** How often queued exchanges are sent when fewer than a batch are waiting (ms); 0 or less: only on flush(). */
  exchangeIntervalMs?: number;
  /** Exchanges sent together once this many are queued. */
  batchSize?: number;
  /** Exchanges queued at most; beyond it new ones are dropped and counted (a stalled sender must not grow memory). */
  maxQueued?: number;
  /** Endpoint-minutes counted per interval at most before usage is sent early. */
  maxUsageEntries?: number;
}

/** One endpoint's exchanges in one minute, mutated in place (a request allocates nothing after its minute's first). */
interface MinuteTally {
  endpoint: string;
  account: number;
  minute: number;
  requests: number;
  errors4xx: number;
  errors5xx: number;
  edgeErrors: number;
  aborted: number;
  bytesIn: number;
  bytesOut: number;
  durationSum: number;
  durationMax: number;
  latency: number[];
}

/** What the shipper has done since the edge started: for metrics (src/edge/metrics.ts). */
export interface TrafficShipperStats {
  /** Captured exchanges handed to the record stream. */
  shipped: number;
  /** Captured exchanges dropped because the queue was full. */
  dropped: number;
  /** Captured exchanges waiting to be sent. */
  queued: number;
}

const BUCKETS = TRAFFIC_LATENCY_BOUNDS_MS.length;

/** The latency bucket of `ms`: the first bound it does not exceed, or the last (slower than every bound). */
export function latencyBucket(ms: number): number {
  for (let i = 0; i < BUCKETS; i++) if (ms <= TRAFFIC_LATENCY_BOUNDS_MS[i]) return i;
  return BUCKETS;
}

export class TrafficShipper implements CaptureSink {
  private readonly sink: RecordSink;
  private readonly edge: string;
  private readonly region: string;
  private readonly redact: ReadonlySet<string>;
  private readonly batchSize: number;
  private readonly maxQueued: number;
  private readonly maxUsageEntries: number;
  private readonly timers: NodeJS.Timeout[] = [];
  /** Each endpoint's current minute; a minute left behind (the clock moved on) waits in `closed` until the flush. */
  private tallies = new Map<string, MinuteTally>();
  private closed: MinuteTally[] = [];
  private queue: CapturedExchange[] = [];
  private sendQueued = false;
  private shipped = 0;
  private dropped = 0;

  constructor(options: TrafficShipperOptions) {
    const usageIntervalMs = options.usageIntervalMs ?? 2_000;
    const exchangeIntervalMs = options.exchangeIntervalMs ?? 1_000;
    this.batchSize = options.batchSize ?? 100;
    this.maxQueued = options.maxQueued ?? 10_000;
    this.maxUsageEntries = options.maxUsageEntries ?? RECORD_LIMITS.usagePerRecord;
    for (const [name, value, min] of [
      ['usageIntervalMs', usageIntervalMs, -Infinity],
      ['exchangeIntervalMs', exchangeIntervalMs, -Infinity],
      ['batchSize', this.batchSize, 1],
      ['maxQueued', this.maxQueued, 1],
      ['maxUsageEntries', this.maxUsageEntries, 1],
    ] as const) {
      if (!Number.isInteger(value) || value < min) throw new RangeError(`TrafficShipper ${name} must be an integer of at least ${min}, got ${value}`);
    }
    if (this.batchSize > RECORD_LIMITS.recordsPerBatch || this.maxUsageEntries > RECORD_LIMITS.usagePerRecord) {
      throw new RangeError('TrafficShipper batchSize and maxUsageEntries must stay within RECORD_LIMITS');
    }
    this.sink = options.sink;
    this.edge = options.edge;
    this.region = options.region;
    this.redact = new Set([...ALWAYS_REDACTED, ...(options.redactHeaders ?? []).map((h) => h.trim().toLowerCase()).filter((h) => h !== '')]);
    // Statistics never keep a process alive; close() sends what is left.
    if (usageIntervalMs > 0) this.timers.push(setInterval(() => this.flushUsage(), usageIntervalMs));
    if (exchangeIntervalMs > 0) this.timers.push(setInterval(() => this.sendExchanges(), exchangeIntervalMs));
    for (const t of this.timers) t.unref();
  }

  record(exchange: CapturedExchange, detailed: boolean): void {
    this.count(exchange);
    if (!detailed || exchange.level === 'off') return;
    if (this.queue.length >= this.maxQueued) {
      this.dropped++;
      return;
    }
    this.queue.push(exchange);
    // A full batch goes at the next turn of the event loop, not inside this request's close handler.
    if (this.queue.length >= this.batchSize && !this.sendQueued) {
      this.sendQueued = true;
      setImmediate(() => {
        this.sendQueued = false;
        this.sendExchanges();
      });
    }
  }

  stats(): TrafficShipperStats {
    return { shipped: this.shipped, dropped: this.dropped, queued: this.queue.length };
  }

  /** Sends everything counted and queued now (tests, shutdown). */
  flush(): void {
    this.sendExchanges();
    this.flushUsage();
  }

  /** Stops the timers and sends what is left (shutdown; the caller flushes the sink after). */
  close(): void {
    for (const t of this.timers) clearInterval(t);
    this.flush();
  }

  private count(x: CapturedExchange): void {
    const minute = x.time - (x.time % 60_000);
    let t = this.tallies.get(x.endpoint);
    if (t === undefined || t.minute !== minute) {
      if (t !== undefined) this.closed.push(t);
      else if (this.tallies.size >= this.maxUsageEntries) this.flushUsage();
      if (this.closed.length >= this.maxUsageEntries) this.flushUsage();
      t = {
        endpoint: x.endpoint, account: x.account, minute, requests: 0, errors4xx: 0, errors5xx: 0, edgeErrors: 0, aborted: 0,
        bytesIn: 0, bytesOut: 0, durationSum: 0, durationMax: 0, latency: new Array<number>(BUCKETS + 1).fill(0),
      };
      this.tallies.set(x.endpoint, t);
    }
    t.requests++;
    if (x.status >= 500) t.errors5xx++;
    else if (x.status >= 400) t.errors4xx++;
    if (x.edge_error !== null) t.edgeErrors++;
    if (!x.completed || x.status === 0) t.aborted++;
    t.bytesIn += x.bytes_in;
    t.bytesOut += x.bytes_out;
    t.durationSum += x.duration_ms;
    if (x.duration_ms > t.durationMax) t.durationMax = x.duration_ms;
    t.latency[latencyBucket(x.duration_ms)]++;
  }

  private flushUsage(): void {
    if (this.tallies.size === 0 && this.closed.length === 0) return;
    const tallies = [...this.closed, ...this.tallies.values()];
    this.tallies = new Map();
    this.closed = [];
    const at = new Date().toISOString();
    const records: TrafficUsageRecord[] = [];
    for (let i = 0; i < tallies.length; i += RECORD_LIMITS.usagePerRecord) {
      records.push({ kind: 'traffic_usage', edge: this.edge, at, usage: tallies.slice(i, i + RECORD_LIMITS.usagePerRecord).map(usageEntry) });
    }
    this.sink.append(records);
  }

  private sendExchanges(): void {
    while (this.queue.length > 0) {
      const batch = this.queue.length <= this.batchSize ? this.queue : this.queue.slice(0, this.batchSize);
      this.queue = batch === this.queue ? [] : this.queue.slice(this.batchSize);
      this.sink.append(batch.map((x) => exchangeRecord(x, this.edge, this.region, this.redact)));
      this.shipped += batch.length;
    }
  }
}

function usageEntry(t: MinuteTally): TrafficUsageEntry {
  return {
    endpoint: t.endpoint, account: t.account, minute: new Date(t.minute).toISOString(), requests: t.requests,
    errors_4xx: t.errors4xx, errors_5xx: t.errors5xx, edge_errors: t.edgeErrors, aborted: t.aborted,
    bytes_in: t.bytesIn, bytes_out: t.bytesOut, duration_sum_ms: Math.round(t.durationSum * 1000) / 1000,
    duration_max_ms: t.durationMax, latency: t.latency,
  };
}

const cut = (s: string, max: number) => (s.length > max ? s.slice(0, max) : s);

/**
 * Stored request headers: as Node parsed them (names lower-case and unique, repeated fields already joined except
 * set-cookie), secrets replaced (the shipper's list, and `also`: the exchange's own, CapturedDetail.redact), bounded
 * as records must be. Plain loops: this runs for every full capture.
 */
function requestHeaders(headers: IncomingHttpHeaders, redact: ReadonlySet<string>, also: readonly string[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  let n = 0;
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || name === '__proto__' || name.length > RECORD_LIMITS.headerNameLength) continue;
    if (n++ >= RECORD_LIMITS.headersPerSide) break;
    out[name] = redact.has(name) || (also !== undefined && also.includes(name)) ? REDACTED : cut(typeof value === 'string' ? value : value.join(', '), RECORD_LIMITS.headerValueLength);
  }
  return out;
}

/** Response field names as written, each to its trimmed lower-case form: a few dozen distinct names in practice. */
const FIELD_NAMES = new Map<string, string>();
const FIELD_NAMES_MAX = 1_000;

/**
 * A field name as stored (trimmed, lower-case). Remembered, so that the next response gets the same string object:
 * one Map lookup instead of two new strings, and the object's property stores and the redaction check then find
 * that string already internalised instead of hashing a new one each time (~0.2 µs of ~0.6 per 4-field head).
 * Bounded: names beyond the first FIELD_NAMES_MAX short ones are worked out each time.
 */
function fieldName(raw: string): string {
  let name = FIELD_NAMES.get(raw);
  if (name === undefined) {
    name = raw.trim().toLowerCase();
    if (FIELD_NAMES.size < FIELD_NAMES_MAX && raw.length <= 64) FIELD_NAMES.set(raw, name);
  }
  return name;
}

/**
 * Stored response headers, from the head as written ("HTTP/1.1 200 OK\r\nName: value\r\n...\r\n\r\n"): names
 * lower-cased, repeated fields joined with ", ", secrets replaced, bounded.
 */
function responseHeaders(head: string | null, redact: ReadonlySet<string>): Record<string, string> {
  const out: Record<string, string> = {};
  if (head === null) return out;
  let n = 0;
  let pos = head.indexOf('\r\n') + 2;
  while (pos > 1 && pos < head.length) {
    const eol = head.indexOf('\r\n', pos);
    if (eol <= pos) break;
    const colon = head.indexOf(':', pos);
    if (colon > pos && colon < eol) {
      const name = fieldName(head.slice(pos, colon));
      // "__proto__" cannot be a plain property; own properties only, so "constructor" is a header like any other.
      if (name !== '' && name !== '__proto__' && name.length <= RECORD_LIMITS.headerNameLength) {
        const value = redact.has(name) ? REDACTED : head.slice(colon + 1, eol).trim();
        const seen = Object.hasOwn(out, name) ? out[name] : undefined;
        if (seen !== undefined) {
          if (seen !== REDACTED) out[name] = cut(`${seen}, ${value}`, RECORD_LIMITS.headerValueLength);
        } else if (n++ < RECORD_LIMITS.headersPerSide) {
          out[name] = cut(value, RECORD_LIMITS.headerValueLength);
        }
      }
    }
    pos = eol + 2;
  }
  return out;
}

/** The raw query with the values of REDACTED_QUERY_PARAMS replaced; the same string when none is present. */
export function redactQuery(query: string): string {
  if (query === '') return query;
  let changed = false;
  const parts = query.split('&');
  for (let i = 0; i < parts.length; i++) {
    const eq = parts[i].indexOf('=');
    if (eq <= 0) continue;
    let name = parts[i].slice(0, eq);
    if (name.includes('%') || name.includes('+')) {
      try {
        name = decodeURIComponent(name.replace(/\+/g, ' '));
      } catch {
        continue;
      }
    } else if (name.length < SHORTEST_REDACTED_PARAM || name.length > LONGEST_REDACTED_PARAM) {
      // Not encoded, so decoding would not change its length: no redacted name is this long (most names are not).
      continue;
    }
    if (REDACTED_QUERY_PARAMS.has(name.toLowerCase())) {
      parts[i] = `${parts[i].slice(0, eq)}=${REDACTED}`;
      changed = true;
    }
  }
  return changed ? parts.join('&') : query;
}

function bodyOf(body: CapturedBody): string {
  return (body.chunks.length === 1 ? body.chunks[0] : Buffer.concat(body.chunks, body.size)).toString('base64');
}

/** The record of one captured exchange, with its strings cut to what records allow. */
export function exchangeRecord(x: CapturedExchange, edge: string, region: string, redact: ReadonlySet<string>): TrafficExchangeRecord {
  const L = RECORD_LIMITS;
  const record: TrafficExchangeRecord = {
    kind: 'traffic_exchange',
    edge,
    at: x.at,
    region: cut(region, L.shortText),
    account: x.account,
    endpoint: x.endpoint,
    hostname: cut(x.hostname, L.host),
    method: cut(x.method, 32),
    host: cut(x.host, L.host),
    path: cut(x.path, L.path),
    query: cut(redactQuery(x.query), L.query),
    status: x.status,
    duration_ms: x.duration_ms,
    bytes_in: x.bytes_in,
    bytes_out: x.bytes_out,
    client_ip: cut(x.client_ip, 64),
    country: x.country === null ? null : cut(x.country, 8),
    user_agent: cut(x.user_agent, L.userAgent),
    secure: x.secure,
    rule: x.rule === null ? null : cut(x.rule, L.shortText * 2),
    edge_error: x.edge_error === null ? null : cut(x.edge_error, L.shortText),
    auth_outcome: x.auth_outcome,
    client_id: x.client_id === null ? null : cut(x.client_id, L.shortText),
    completed: x.completed,
    level: x.level === 'full' && x.detail !== undefined ? 'full' : 'metadata',
  };
  const d = x.detail;
  if (record.level === 'full' && d !== undefined) {
    // The exchange's own fields (a handful at most) are looked up in their list: a union Set per record cost more.
    record.request_headers = requestHeaders(d.request_headers, redact, d.redact);
    record.response_headers = responseHeaders(d.response_head, redact);
    if (d.request_body.size > 0) record.request_body = bodyOf(d.request_body);
    if (d.response_body.size > 0) record.response_body = bodyOf(d.response_body);
    record.request_body_truncated = d.request_body.truncated;
    record.response_body_truncated = d.response_body.truncated;
  }
  return record;
}
