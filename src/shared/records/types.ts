// Traffic records: what edges observe about requests (rate-limit hits, captured exchanges, usage) and ship to the
// worker, which writes them to the store. Typed by `kind`; the transport (redis.ts, memory.ts) carries any kind.

/** Per-rule match counts an edge gathered over one flush interval (src/edge/rate-limit/hits.ts). */
export interface RateLimitHitsRecord {
  kind: 'rate_limit_hits';
  /** The edge's node id. */
  edge: string;
  /** When the edge flushed the interval (ISO 8601); the UTC day the hits are counted in. */
  at: string;
  /** rule uuid → requests that matched it in the interval. */
  counts: Record<string, number>;
  /** rule uuid → when it last matched (ISO 8601). */
  last: Record<string, string>;
}

/** The facts of one finished exchange, as the edge's capture hook (src/edge/capture.ts) and a stored record share them. */
export interface ExchangeFacts {
  /** When the request reached the edge (ISO 8601). */
  at: string;
  /** The endpoint's account id and uuid, and its hostname (the subdomain label is kept if the endpoint goes). */
  account: number;
  endpoint: string;
  hostname: string;
  method: string;
  host: string;
  /** The normalised path that was judged and forwarded, and the raw query. */
  path: string;
  query: string;
  /** 0 when no response head was sent (visitor gone, connection cut). */
  status: number;
  duration_ms: number;
  /** Request body bytes received; bytes written to the visitor's connection for the response (head and body). */
  bytes_in: number;
  bytes_out: number;
  client_ip: string;
  /** The visitor's country, when the rate-limit stage looked it up for a rule; else null. */
  country: string | null;
  user_agent: string;
  secure: boolean;
  /** The routing rule that chose the agents, if one did. */
  rule: string | null;
  /** The edge's own error code when the edge answered (X-Edge-Error), else null. */
  edge_error: string | null;
  /** What visitor authentication decided, or null where it did not run. */
  auth_outcome: string | null;
  /** The RBAC client the visitor was, when known. */
  client_id: string | null;
  /** False when the response did not finish (the visitor left or the upstream cut it mid-body). */
  completed: boolean;
}

/**
 * One captured exchange of an endpoint with capture on (src/edge/traffic-shipper.ts), written as one traffic_logs row.
 * `level` full adds headers (secrets redacted at the edge) and the first TRAFFIC_BODY_LIMIT bytes of each body.
 */
export interface TrafficExchangeRecord extends ExchangeFacts {
  kind: 'traffic_exchange';
  edge: string;
  region: string;
  level: 'metadata' | 'full';
  request_headers?: Record<string, string>;
  response_headers?: Record<string, string>;
  /** Base64 of at most TRAFFIC_BODY_LIMIT bytes. */
  request_body?: string;
  response_body?: string;
  request_body_truncated?: boolean;
  response_body_truncated?: boolean;
}

/** One endpoint's exchanges in one UTC minute, as one edge counted them over a flush interval. */
export interface TrafficUsageEntry {
  endpoint: string;
  account: number;
  /** The minute's start (ISO 8601); the UTC day of the daily counters is this minute's. */
  minute: string;
  requests: number;
  errors_4xx: number;
  errors_5xx: number;
  edge_errors: number;
  aborted: number;
  bytes_in: number;
  bytes_out: number;
  duration_sum_ms: number;
  duration_max_ms: number;
  /** Counts per TRAFFIC_LATENCY_BOUNDS_MS bucket, plus one last for slower exchanges (length bounds + 1). */
  latency: number[];
}

/** Usage counted for every exchange, capture on or off: per endpoint and minute, flushed every couple of seconds. */
export interface TrafficUsageRecord {
  kind: 'traffic_usage';
  edge: string;
  /** When the edge flushed the interval (ISO 8601). */
  at: string;
  usage: TrafficUsageEntry[];
}

/** Every record kind. A new kind joins this union and `parseRecord`. */
export type TrafficRecord = RateLimitHitsRecord | TrafficExchangeRecord | TrafficUsageRecord;
export type TrafficRecordKind = TrafficRecord['kind'];

/** One appended batch as the worker receives it: `id` is the transport's (a Redis stream entry id). */
export interface RecordBatch {
  id: string;
  /** The batch's records that parsed; malformed ones are left out (and counted in `skipped`). */
  records: TrafficRecord[];
  skipped: number;
}

/** What an edge's sink has done since it started: for metrics (src/edge/metrics.ts). */
export interface RecordSinkStats {
  /** Records waiting to be sent (the bounded buffer, while the transport is unreachable or busy). */
  buffered: number;
  /** Records dropped because the buffer was full (oldest first), or trimmed by the stream cap before delivery. */
  dropped: number;
  /** Records handed to the transport. */
  sent: number;
}

/** The edge's end. Appending never blocks and never throws: a request must not wait on statistics. */
export interface RecordSink {
  /** Queues `records` to be sent as one batch (batches appended in the same tick may travel together). */
  append(records: readonly TrafficRecord[]): void;
  /** Sends what is buffered now; resolves when the buffer is empty or `timeoutMs` has passed (shutdown). */
  flush(timeoutMs?: number): Promise<void>;
  stats(): RecordSinkStats;
  close(): Promise<void>;
}

export interface ReadOptions {
  /** At most this many batches. */
  count: number;
  /** Wait up to this long for a batch when none is ready; 0 returns at once. */
  blockMs: number;
  /** Aborting ends a waiting read early with what it has (nothing); used to stop the worker without delay. */
  signal?: AbortSignal;
}

/**
 * The worker's end: a consumer group. A batch read stays pending until acknowledged; this consumer's next read
 * delivers its own unacknowledged batches again first, and batches pending on any consumer longer than the reclaim
 * timeout (a crashed worker's) are claimed by the next reader, so delivery is at least once.
 */
export interface RecordSource {
  read(options: ReadOptions): Promise<RecordBatch[]>;
  /** Acknowledges (and forgets) batches once what they carry is written. */
  ack(ids: readonly string[]): Promise<void>;
  /** What is still to write, for the worker's lag gauge (src/worker/metrics.ts); absent where it cannot be told. */
  backlog?(): Promise<RecordBacklog>;
  close(): Promise<void>;
}

/** Batches not yet acknowledged: `queued` not yet delivered to any worker, `pending` delivered and not acknowledged. */
export interface RecordBacklog {
  queued: number;
  pending: number;
}

/** Bounds a record must respect to be accepted, so one bad edge cannot make a batch unbounded or unwritable. */
export const RECORD_LIMITS = {
  /** Distinct rules in one rate_limit_hits record. */
  rulesPerRecord: 5_000,
  /** Records in one appended batch; a larger append is split. */
  recordsPerBatch: 500,
  /** Endpoint-minutes in one traffic_usage record. */
  usagePerRecord: 5_000,
  /** Headers kept per side of a full capture, and the length of a name and of a value. */
  headersPerSide: 200,
  headerNameLength: 256,
  headerValueLength: 8_192,
  /** Lengths of a captured exchange's strings (the edge cuts longer ones to these). */
  path: 8_192,
  query: 8_192,
  host: 255,
  userAgent: 1_024,
  shortText: 128,
} as const;

/** Bytes of each body a full capture keeps. */
export const TRAFFIC_BODY_LIMIT = 10_240;

/**
 * Upper bounds (ms, inclusive) of the latency histogram buckets in traffic_usage records and
 * endpoint_traffic_minutely.latency_buckets; one more bucket counts anything slower. Percentiles read from it are
 * the bucket's upper bound: coarse, but they add up across edges, minutes and endpoints.
 */
export const TRAFFIC_LATENCY_BOUNDS_MS: readonly number[] = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000];

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Far beyond any interval's real count, well inside bigint and a double's exact range. */
const MAX_COUNT = 1e12;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Times the store can hold as written (timestamptz refuses year 0, negative and six-digit years): 1970 to 9999. */
const LATEST_TIME = Date.UTC(9999, 11, 31);

function isTime(value: unknown): value is string {
  if (typeof value !== 'string' || value.length > 40) return false;
  const ms = Date.parse(value);
  return ms >= 0 && ms <= LATEST_TIME;
}

/**
 * What PostgreSQL refuses inside a string: NUL (text and jsonb) and UTF-16 halves without their pair (jsonb). A
 * record with either would fail its whole write, again at every redelivery; such characters become U+FFFD instead.
 */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const UNSTORABLE_ALL = new RegExp(UNSTORABLE.source, 'g');
const storable = (s: string): string => (UNSTORABLE.test(s) ? s.replace(UNSTORABLE_ALL, '\ufffd') : s);
const storableOrNull = (s: string | null): string | null => (s === null ? null : storable(s));

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
/** Base64 length of TRAFFIC_BODY_LIMIT bytes. */
const MAX_BODY_BASE64 = Math.ceil(TRAFFIC_BODY_LIMIT / 3) * 4;
const MAX_DURATION_MS = 7 * 86_400_000;

const isText = (value: unknown, max: number): value is string => typeof value === 'string' && value.length <= max;
const isTextOrNull = (value: unknown, max: number): value is string | null => value === null || isText(value, max);
const isCount = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0 && (value as number) <= MAX_COUNT;
const isMs = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= MAX_DURATION_MS;

function parseHeaders(value: unknown): Record<string, string> | null | undefined {
  if (value === undefined) return undefined;
  if (!isObject(value)) return null;
  const entries = Object.entries(value);
  if (entries.length > RECORD_LIMITS.headersPerSide) return null;
  const out: Record<string, string> = {};
  for (const [name, v] of entries) {
    if (name.length === 0 || name.length > RECORD_LIMITS.headerNameLength || !isText(v, RECORD_LIMITS.headerValueLength)) return null;
    out[storable(name)] = storable(v);
  }
  return out;
}

function parseBody(value: unknown): string | null | undefined {
  if (value === undefined) return undefined;
  return isText(value, MAX_BODY_BASE64) && BASE64.test(value) ? value : null;
}

function parseExchange(v: Record<string, unknown>, edge: string, at: string): TrafficExchangeRecord | null {
  const L = RECORD_LIMITS;
  if (
    !isText(v.region, L.shortText) || !Number.isSafeInteger(v.account) || (v.account as number) < 1 ||
    !isText(v.endpoint, 36) || !UUID.test(v.endpoint) || !isText(v.hostname, L.host) ||
    !isText(v.method, 32) || v.method === '' || !isText(v.host, L.host) || !isText(v.path, L.path) || !isText(v.query, L.query) ||
    !Number.isInteger(v.status) || (v.status as number) < 0 || (v.status as number) > 999 || !isMs(v.duration_ms) ||
    !isCount(v.bytes_in) || !isCount(v.bytes_out) || !isText(v.client_ip, 64) || !isTextOrNull(v.country, 8) ||
    !isText(v.user_agent, L.userAgent) || typeof v.secure !== 'boolean' || !isTextOrNull(v.rule, L.shortText * 2) ||
    !isTextOrNull(v.edge_error, L.shortText) || !isTextOrNull(v.auth_outcome, L.shortText) || !isTextOrNull(v.client_id, L.shortText) ||
    typeof v.completed !== 'boolean' || (v.level !== 'metadata' && v.level !== 'full')
  ) {
    return null;
  }
  const record: TrafficExchangeRecord = {
    kind: 'traffic_exchange', edge: storable(edge), at, region: storable(v.region), account: v.account as number, endpoint: v.endpoint,
    hostname: storable(v.hostname), method: storable(v.method), host: storable(v.host), path: storable(v.path), query: storable(v.query),
    status: v.status as number, duration_ms: v.duration_ms, bytes_in: v.bytes_in, bytes_out: v.bytes_out, client_ip: storable(v.client_ip),
    country: storableOrNull(v.country), user_agent: storable(v.user_agent), secure: v.secure, rule: storableOrNull(v.rule),
    edge_error: storableOrNull(v.edge_error), auth_outcome: storableOrNull(v.auth_outcome), client_id: storableOrNull(v.client_id),
    completed: v.completed, level: v.level,
  };
  if (v.level === 'full') {
    const requestHeaders = parseHeaders(v.request_headers);
    const responseHeaders = parseHeaders(v.response_headers);
    const requestBody = parseBody(v.request_body);
    const responseBody = parseBody(v.response_body);
    if (requestHeaders === null || responseHeaders === null || requestBody === null || responseBody === null) return null;
    record.request_headers = requestHeaders ?? {};
    record.response_headers = responseHeaders ?? {};
    if (requestBody !== undefined) record.request_body = requestBody;
    if (responseBody !== undefined) record.response_body = responseBody;
    record.request_body_truncated = v.request_body_truncated === true;
    record.response_body_truncated = v.response_body_truncated === true;
  }
  return record;
}

function parseUsageEntry(v: unknown): TrafficUsageEntry | null {
  if (!isObject(v)) return null;
  const { latency } = v;
  if (
    !isText(v.endpoint, 36) || !UUID.test(v.endpoint) || !Number.isSafeInteger(v.account) || (v.account as number) < 1 || !isTime(v.minute) ||
    !isCount(v.requests) || !isCount(v.errors_4xx) || !isCount(v.errors_5xx) || !isCount(v.edge_errors) || !isCount(v.aborted) ||
    !isCount(v.bytes_in) || !isCount(v.bytes_out) || typeof v.duration_sum_ms !== 'number' || !Number.isFinite(v.duration_sum_ms) ||
    v.duration_sum_ms < 0 || v.duration_sum_ms > MAX_COUNT * MAX_DURATION_MS || !isMs(v.duration_max_ms) || !Array.isArray(latency) ||
    latency.length !== TRAFFIC_LATENCY_BOUNDS_MS.length + 1 || !latency.every(isCount)
  ) {
    return null;
  }
  const minute = new Date(Math.floor(Date.parse(v.minute) / 60_000) * 60_000).toISOString();
  return {
    endpoint: v.endpoint, account: v.account as number, minute, requests: v.requests, errors_4xx: v.errors_4xx, errors_5xx: v.errors_5xx,
    edge_errors: v.edge_errors, aborted: v.aborted, bytes_in: v.bytes_in, bytes_out: v.bytes_out,
    duration_sum_ms: v.duration_sum_ms, duration_max_ms: v.duration_max_ms, latency: latency as number[],
  };
}

/**
 * A record as it came off the wire, checked: null when it is not a record of a kind this node knows or breaks a
 * bound. Entries of a hits record that are not (uuid → positive integer) are dropped rather than the whole record.
 */
export function parseRecord(value: unknown): TrafficRecord | null {
  if (!isObject(value) || typeof value.edge !== 'string' || value.edge.length > 128 || !isTime(value.at)) return null;
  switch (value.kind) {
    case 'rate_limit_hits': {
      const { counts, last } = value;
      if (!isObject(counts) || !isObject(last)) return null;
      const entries = Object.entries(counts);
      if (entries.length > RECORD_LIMITS.rulesPerRecord) return null;
      const out: RateLimitHitsRecord = { kind: 'rate_limit_hits', edge: value.edge, at: value.at, counts: {}, last: {} };
      for (const [uuid, n] of entries) {
        if (!UUID.test(uuid) || !Number.isSafeInteger(n) || (n as number) < 1 || (n as number) > MAX_COUNT) continue;
        out.counts[uuid] = n as number;
        const seen = last[uuid];
        out.last[uuid] = isTime(seen) ? seen : value.at;
      }
      return out;
    }
    case 'traffic_exchange':
      return parseExchange(value, value.edge, value.at);
    case 'traffic_usage': {
      const { usage } = value;
      if (!Array.isArray(usage) || usage.length > RECORD_LIMITS.usagePerRecord) return null;
      const out: TrafficUsageRecord = { kind: 'traffic_usage', edge: value.edge, at: value.at, usage: [] };
      // An entry out of bounds is dropped alone, as hits entries are.
      for (const item of usage) {
        const entry = parseUsageEntry(item);
        if (entry) out.usage.push(entry);
      }
      return out;
    }
    default:
      return null;
  }
}

/** A stored batch (a JSON array of records) parsed into what the worker receives. */
export function parseBatch(id: string, json: string | null | undefined): RecordBatch {
  let raw: unknown;
  try {
    raw = json ? JSON.parse(json) : null;
  } catch {
    raw = null;
  }
  if (!Array.isArray(raw)) return { id, records: [], skipped: 1 };
  const records: TrafficRecord[] = [];
  let skipped = 0;
  for (const item of raw.slice(0, RECORD_LIMITS.recordsPerBatch)) {
    const record = parseRecord(item);
    if (record) records.push(record);
    else skipped++;
  }
  return { id, records, skipped: skipped + Math.max(0, raw.length - RECORD_LIMITS.recordsPerBatch) };
}
