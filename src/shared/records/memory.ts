// The traffic-record stream inside one process (all roles, no REDIS_URL): the same contract as RedisRecords, so the
// worker's loop and its tests do not care which one they read. Batches are kept as JSON, as Redis would hold them.
import { randomBytes } from 'node:crypto';
import { RECORD_LIMITS, parseBatch, type ReadOptions, type RecordBacklog, type RecordBatch, type RecordSink, type RecordSinkStats, type RecordSource, type TrafficRecord } from './types.ts';

export interface MemoryRecordsOptions {
  /** Batches held before the worker reads them; beyond it the oldest are dropped (and counted). */
  maxLen?: number;
  now?: () => number;
}

interface Stored {
  id: string;
  json: string;
  /** Records in the batch, for the dropped count. */
  size: number;
}

export class MemoryRecords implements RecordSink, RecordSource {
  private readonly maxLen: number;
  private readonly now: () => number;
  private queue: Stored[] = [];
  /**
   * Delivered, not yet acknowledged, oldest first. A process has one reader (its worker), so these are its own: its
   * next read gets them again first, as Redis's consumer reads its own pending entries. No reclaim timeout is needed.
   */
  private readonly pending = new Map<string, Stored>();
  private seq = 0;
  private readonly tag = randomBytes(4).toString('hex');
  private lastMs = 0;
  private queuedRecords = 0;
  private dropped = 0;
  private sent = 0;
  private wake: (() => void) | null = null;
  private closed = false;

  constructor(options: MemoryRecordsOptions = {}) {
    const maxLen = options.maxLen ?? 100_000;
    if (!Number.isInteger(maxLen) || maxLen < 1) throw new RangeError(`MemoryRecords maxLen must be a positive integer, got ${maxLen}`);
    this.maxLen = maxLen;
    this.now = options.now ?? Date.now;
  }

  // ---- RecordSink ----

  append(records: readonly TrafficRecord[]): void {
    if (this.closed || records.length === 0) return;
    for (let i = 0; i < records.length; i += RECORD_LIMITS.recordsPerBatch) {
      const part = records.slice(i, i + RECORD_LIMITS.recordsPerBatch);
      this.push(JSON.stringify(part), part.length);
    }
    this.trim();
    this.wake?.();
  }

  /**
   * Queues one batch already serialised by the sender (src/shared/records/port.ts: an edge in another thread), as
   * Redis would receive it. `size` is only for the counts: the worker parses and bounds what the JSON holds.
   */
  appendSerialized(json: string, size: number): void {
    if (this.closed) return;
    this.push(json, size);
    this.trim();
    this.wake?.();
  }

  private push(json: string, size: number): void {
    this.queue.push({ id: this.nextId(), json, size });
    this.queuedRecords += size;
    this.sent += size;
  }

  private trim(): void {
    // Trimmed in steps, like Redis's approximate MAXLEN, rather than one shift per append.
    if (this.queue.length > this.maxLen + Math.ceil(this.maxLen / 10)) {
      const cut = this.queue.length - this.maxLen;
      for (const gone of this.queue.slice(0, cut)) {
        this.dropped += gone.size;
        this.queuedRecords -= gone.size;
      }
      this.queue = this.queue.slice(cut);
    }
  }

  async flush(): Promise<void> {}

  stats(): RecordSinkStats {
    return { buffered: this.queuedRecords, dropped: this.dropped, sent: this.sent };
  }

  // ---- RecordSource ----

  async read(options: ReadOptions): Promise<RecordBatch[]> {
    const out = this.take(options.count);
    if (out.length > 0 || options.blockMs <= 0 || this.closed || options.signal?.aborted) return out;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        options.signal?.removeEventListener('abort', done);
        if (this.wake === done) this.wake = null;
        resolve();
      };
      const timer = setTimeout(done, options.blockMs);
      options.signal?.addEventListener('abort', done);
      this.wake = done;
    });
    return this.take(options.count);
  }

  async ack(ids: readonly string[]): Promise<void> {
    for (const id of ids) this.pending.delete(id);
  }

  async backlog(): Promise<RecordBacklog> {
    return { queued: this.queue.length, pending: this.pending.size };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.wake?.();
  }

  private take(count: number): RecordBatch[] {
    const out: RecordBatch[] = [];
    // Unacknowledged batches alone first: the reader failed to write them (or never said it had).
    for (const p of this.pending.values()) {
      if (out.length >= count) break;
      out.push(parseBatch(p.id, p.json));
    }
    if (out.length > 0) return out;
    while (out.length < count && this.queue.length > 0) {
      const next = this.queue.shift()!;
      this.queuedRecords -= next.size;
      this.pending.set(next.id, next);
      out.push(parseBatch(next.id, next.json));
    }
    return out;
  }

  /** Stream-like ids (`ms-seq`), increasing. */
  private nextId(): string {
    const ms = this.now();
    if (ms > this.lastMs) {
      this.lastMs = ms;
      this.seq = 0;
    } else this.seq++;
    // Time-based like Redis's, plus this stream's own tag: the worker keys idempotent writes on batch ids, and two
    // processes with in-process streams may write to one database.
    return `${this.lastMs}-${this.seq}-${this.tag}`;
  }
}
