// The traffic-record stream between two threads of one process (`edge serve`): the edge's end posts each batch,
// serialised once, to the store thread, whose end queues it for the record worker and reports what was stored.
import type { MessagePort } from 'node:worker_threads';
import type { MemoryRecords } from './memory.ts';
import { RECORD_LIMITS, type ReadOptions, type RecordBatch, type RecordSink, type RecordSinkStats, type RecordSource, type TrafficRecord } from './types.ts';

/** A batch on its way: the JSON the worker parses (as Redis would hold it) and its record count. */
interface PostedBatch {
  json: string;
  size: number;
}

/** The sender's last message: nothing follows it, so the receiver's worker may write what it holds and stop. */
interface EndOfRecords {
  end: true;
}

/** The store thread's answer: records of acknowledged batches (written, or given up), no longer in flight. */
interface StoredReport {
  stored: number;
}

export interface PortRecordSinkOptions {
  /**
   * Captured exchanges posted and not yet stored at most; beyond it new batches of them are dropped and counted. A
   * store that falls behind (a saturated core, a slow disk, a long retention pass) must not grow the edge's memory or
   * the port's queue without bound. Usage and rate-limit hit records always go: they are one per interval, and the
   * counts they carry (billing, alerts, rule statistics) must not be lost to a burst of captured traffic.
   */
  maxInFlight?: number;
}

/** The edge's end. Appending costs one JSON.stringify and one postMessage per batch; nothing waits. */
export class PortRecordSink implements RecordSink {
  private readonly maxInFlight: number;
  private inFlight = 0;
  private sent = 0;
  private dropped = 0;
  private closed = false;

  constructor(
    private readonly port: MessagePort,
    options: PortRecordSinkOptions = {},
  ) {
    this.maxInFlight = options.maxInFlight ?? 20_000;
    if (!Number.isInteger(this.maxInFlight) || this.maxInFlight < 1) throw new RangeError(`PortRecordSink maxInFlight must be a positive integer, got ${this.maxInFlight}`);
    port.on('message', (report: StoredReport) => {
      this.inFlight = Math.max(0, this.inFlight - report.stored);
    });
    // The reports must not keep the process alive on their own.
    port.unref();
  }

  append(records: readonly TrafficRecord[]): void {
    if (this.closed || records.length === 0) return;
    for (let i = 0; i < records.length; i += RECORD_LIMITS.recordsPerBatch) {
      const part = i === 0 && records.length <= RECORD_LIMITS.recordsPerBatch ? records : records.slice(i, i + RECORD_LIMITS.recordsPerBatch);
      if (part[0].kind === 'traffic_exchange' && this.inFlight + part.length > this.maxInFlight) {
        this.dropped += part.length;
        continue;
      }
      const batch: PostedBatch = { json: JSON.stringify(part), size: part.length };
      this.port.postMessage(batch);
      this.inFlight += part.length;
      this.sent += part.length;
    }
  }

  /** Every batch is posted as it is appended; the store thread writes what it holds before it stops. */
  async flush(): Promise<void> {}

  stats(): RecordSinkStats {
    return { buffered: this.inFlight, dropped: this.dropped, sent: this.sent };
  }

  /** Posts the end mark after the last batch (closed after the edge, so after its shutdown flush). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.port.postMessage({ end: true } satisfies EndOfRecords);
  }
}

/**
 * The store thread's end: batches arriving on `port` are queued in `queue` (an in-process stream with its consumer
 * semantics), and each acknowledgement is reported back so the sender's in-flight bound follows what was stored.
 */
export function receiveRecords(port: MessagePort, queue: MemoryRecords): RecordSource & { ended: Promise<void> } {
  /** Records per batch read and not yet acknowledged, for the report. */
  const sizes = new Map<string, number>();
  let end!: () => void;
  const ended = new Promise<void>((resolve) => (end = resolve));
  port.on('message', (message: PostedBatch | EndOfRecords) => {
    if ('end' in message) end();
    else queue.appendSerialized(message.json, message.size);
  });
  return {
    ended,
    async read(options: ReadOptions): Promise<RecordBatch[]> {
      const batches = await queue.read(options);
      for (const b of batches) sizes.set(b.id, b.records.length + b.skipped);
      return batches;
    },
    async ack(ids: readonly string[]): Promise<void> {
      await queue.ack(ids);
      let stored = 0;
      for (const id of ids) {
        stored += sizes.get(id) ?? 0;
        sizes.delete(id);
      }
      if (stored > 0) port.postMessage({ stored } satisfies StoredReport);
    },
    async close(): Promise<void> {
      port.close();
      await queue.close();
    },
  };
}
