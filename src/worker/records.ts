// The worker's end of the traffic-record stream: reads batches through the consumer group, hands each kind's records
// to its handler inside one transaction per read, and acknowledges only after that transaction committed.
import type { Logger } from '../shared/log.ts';
import type { RecordBatch, RecordSource, TrafficRecord, TrafficRecordKind } from '../shared/records/types.ts';
import type { Database, Queryable } from '../store/db.ts';

/**
 * Where a record came from: its batch (the transport's entry id) and its place among the batch's parsed records.
 * Parsing is deterministic, so a redelivered batch gives every record the same origin again: handlers key their
 * writes on it to stay idempotent (docs/traffic-records.md "Delivery").
 */
export interface RecordOrigin {
  batch: string;
  index: number;
}

/** Writes one read's records of one kind, in the read's transaction; `origins[i]` is where `records[i]` came from. */
export type RecordHandler<K extends TrafficRecordKind> = (
  tx: Queryable,
  records: Extract<TrafficRecord, { kind: K }>[],
  origins: RecordOrigin[],
) => Promise<void>;
export type RecordHandlers = { [K in TrafficRecordKind]?: RecordHandler<K> };

export interface RecordWorkerOptions {
  logger: Logger;
  /** Batches per read (and so per transaction). */
  count?: number;
  /** How long a read waits for a batch before the loop goes round again. */
  blockMs?: number;
  /**
   * Failed writes of one batch alone, with the database answering, before the batch is given up (acknowledged
   * unwritten, counted and logged): a batch the store always refuses must not hold up every batch behind it.
   */
  maxAttempts?: number;
}

/** What the worker has done since it started (tests, logs). */
export interface RecordWorkerStats {
  /** Batches written and acknowledged. */
  batches: number;
  /** Batches given up after maxAttempts failed writes, and the records they carried. */
  deadLetteredBatches: number;
  deadLetteredRecords: number;
  /** Records that did not parse (malformed, out of bounds, unknown kind), acknowledged unwritten. */
  skipped: number;
}

/** Failure counts kept for at most this many batches (a bound on memory should ids never be acknowledged). */
const MAX_TRACKED_FAILURES = 10_000;

/**
 * At least once: a crash between the commit and the acknowledgement delivers the read again (to this node's next
 * run, or to another worker after the transport's reclaim timeout). Handlers make that harmless with the origins
 * they are given: unique row keys, or the batch ids they applied recorded in the same transaction.
 */
export class RecordWorker {
  private readonly count: number;
  private readonly blockMs: number;
  private readonly maxAttempts: number;
  /** Batch id → failed writes of that batch alone; forgotten once it is acknowledged. */
  private readonly failures = new Map<string, number>();
  private readonly counts: RecordWorkerStats = { batches: 0, deadLetteredBatches: 0, deadLetteredRecords: 0, skipped: 0 };
  private readonly logger: Logger;
  private readonly abort = new AbortController();
  private loop: Promise<void> | null = null;
  /** Serialises the loop's passes with drain()'s, so a read is never written twice by this process at once. */
  private running: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly db: Database,
    private readonly source: RecordSource,
    private readonly handlers: RecordHandlers,
    options: RecordWorkerOptions,
  ) {
    this.count = options.count ?? 100;
    this.blockMs = options.blockMs ?? 2_000;
    this.maxAttempts = options.maxAttempts ?? 5;
    for (const [name, value] of Object.entries({ count: this.count, blockMs: this.blockMs, maxAttempts: this.maxAttempts })) {
      if (!Number.isInteger(value) || value < 1) throw new RangeError(`RecordWorker ${name} must be a positive integer, got ${value}`);
    }
    this.logger = options.logger;
  }

  stats(): RecordWorkerStats {
    return { ...this.counts };
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Writes what is ready now (no waiting), a bounded number of reads; resolves with the batches written. */
  async drain(maxReads = 50): Promise<number> {
    let total = 0;
    for (let i = 0; i < maxReads; i++) {
      const n = await this.pass(0);
      total += n;
      if (n === 0) break;
    }
    return total;
  }

  /** Stops the loop at once (a waiting read is cut short), then writes what is already there (shutdown). */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
    await this.drain().catch((err) => this.logger.warn({ err }, 'traffic records not written at shutdown; another worker will claim them'));
  }

  private async run(): Promise<void> {
    let failing = false;
    let delayMs = 0;
    while (!this.abort.signal.aborted) {
      try {
        await this.pass(this.blockMs);
        if (failing) this.logger.info('traffic records are written again');
        failing = false;
        delayMs = 0;
      } catch (err) {
        // Logged once per outage (Redis or the database down); unacknowledged batches come back at the next read.
        if (!failing) this.logger.warn({ err }, 'traffic records could not be read or written; retrying');
        failing = true;
        delayMs = Math.min(5_000, Math.max(100, delayMs * 2));
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, delayMs);
          this.abort.signal.addEventListener('abort', () => {
            clearTimeout(timer);
            resolve();
          }, { once: true });
        });
      }
    }
  }

  private pass(blockMs: number): Promise<number> {
    const next = this.running.then(() => this.readAndWrite(blockMs));
    this.running = next.catch(() => {});
    return next;
  }

  private async readAndWrite(blockMs: number): Promise<number> {
    const signal = blockMs > 0 ? this.abort.signal : undefined;
    if (signal?.aborted) return 0;
    const batches = await this.source.read({ count: this.count, blockMs, signal });
    if (batches.length === 0) return 0;
    try {
      await this.write(batches);
    } catch (err) {
      return this.writeOneByOne(batches, err);
    }
    await this.acknowledge(batches, []);
    return batches.length;
  }

  /**
   * A read's transaction failed: each batch is written alone, so one bad batch cannot hold the others back. A batch
   * that fails alone while the database answers counts a failure; at maxAttempts it is dead-lettered (acknowledged
   * unwritten, logged with what it held). With the database unreachable nothing is counted: an outage loses nothing.
   * Throws when a batch is left for the next read (the loop backs off).
   */
  private async writeOneByOne(batches: RecordBatch[], first: unknown): Promise<number> {
    const done: RecordBatch[] = [];
    const dead: RecordBatch[] = [];
    let left: unknown = null;
    for (const batch of batches) {
      try {
        await this.write([batch]);
        done.push(batch);
        continue;
      } catch (err) {
        if (!(await this.storeAnswers())) {
          await this.acknowledge(done, dead);
          throw err;
        }
        const failures = (this.failures.get(batch.id) ?? 0) + 1;
        if (failures < this.maxAttempts) {
          if (this.failures.size >= MAX_TRACKED_FAILURES) this.failures.delete(this.failures.keys().next().value!);
          this.failures.set(batch.id, failures);
          left ??= err;
          continue;
        }
        const kinds: Record<string, number> = {};
        for (const r of batch.records) kinds[r.kind] = (kinds[r.kind] ?? 0) + 1;
        this.logger.error({ err, batch: batch.id, kinds, attempts: failures }, 'traffic-record batch dead-lettered: the store refused it every time; its records are lost');
        dead.push(batch);
      }
    }
    await this.acknowledge(done, dead);
    if (left !== null) throw left;
    // Everything went through alone: the read's failure was passing (a deadlock, a serialisation conflict).
    this.logger.debug({ err: first }, 'traffic records written batch by batch after the read failed as a whole');
    return batches.length;
  }

  private async storeAnswers(): Promise<boolean> {
    try {
      await this.db.query('SELECT 1');
      return true;
    } catch {
      return false;
    }
  }

  /** Acknowledges batches written and batches given up; counted here, once, however often they were tried. */
  private async acknowledge(written: RecordBatch[], dead: RecordBatch[]): Promise<void> {
    const all = [...written, ...dead];
    if (all.length === 0) return;
    await this.source.ack(all.map((b) => b.id));
    const skipped = all.reduce((n, b) => n + b.skipped, 0);
    // Malformed records, or kinds a newer edge sends that this worker does not know: acknowledged, not retried.
    if (skipped > 0) this.logger.warn({ skipped }, 'skipped traffic records that did not parse');
    for (const b of all) this.failures.delete(b.id);
    this.counts.batches += written.length;
    this.counts.deadLetteredBatches += dead.length;
    this.counts.deadLetteredRecords += dead.reduce((n, b) => n + b.records.length, 0);
    this.counts.skipped += skipped;
  }

  private async write(batches: RecordBatch[]): Promise<void> {
    const byKind = new Map<TrafficRecordKind, { records: TrafficRecord[]; origins: RecordOrigin[] }>();
    for (const batch of batches) {
      batch.records.forEach((record, index) => {
        let list = byKind.get(record.kind);
        if (!list) byKind.set(record.kind, (list = { records: [], origins: [] }));
        list.records.push(record);
        list.origins.push({ batch: batch.id, index });
      });
    }
    const handled = [...byKind].filter(([kind]) => this.handlers[kind] !== undefined);
    if (handled.length === 0) return;
    await this.db.transaction(async (tx) => {
      for (const [kind, { records, origins }] of handled) await (this.handlers[kind] as RecordHandler<typeof kind>)(tx, records as never, origins);
    });
  }
}
