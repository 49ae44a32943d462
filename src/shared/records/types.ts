// Traffic records: what edges observe about requests (rate-limit hits now, captured requests later) and ship to the
// worker, which rolls them into the store. Typed by `kind`; the transport (redis.ts, memory.ts) carries any kind.

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

/** Every record kind. A new kind (issue #13's captured requests) joins this union and `parseRecord`. */
export type TrafficRecord = RateLimitHitsRecord;
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
  close(): Promise<void>;
}

/** Bounds a record must respect to be accepted, so one bad edge cannot make a batch unbounded or unwritable. */
export const RECORD_LIMITS = {
  /** Distinct rules in one rate_limit_hits record. */
  rulesPerRecord: 5_000,
  /** Records in one appended batch; a larger append is split. */
  recordsPerBatch: 500,
} as const;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Far beyond any interval's real count, well inside bigint and a double's exact range. */
const MAX_COUNT = 1e12;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isTime(value: unknown): value is string {
  return typeof value === 'string' && value.length <= 40 && !Number.isNaN(Date.parse(value));
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
