// What the composition root and the store thread say to each other: the thread's start data and its lifecycle
// messages (the SQL and the records travel on their own ports: src/store/remote.ts, src/shared/records/port.ts).
import type { MessagePort } from 'node:worker_threads';
import type { DatabaseOptions } from '../../store/db.ts';
import type { RecordReading } from '../metrics.ts';

export interface StoreThreadData {
  database: DatabaseOptions;
  /** Set when the thread owns the database (embedded PGlite) and answers the main thread's SQL on this port. */
  sqlPort?: MessagePort;
  /** Where the record worker reads: batches posted by this process's edge, or the cluster's Redis stream. */
  records: { kind: 'port'; port: MessagePort } | { kind: 'redis'; url: string; prefix: string; consumer: string };
  /** The thread's nice value (0–19): EDGE_STORE_THREAD_NICE. */
  nice: number;
  logLevel: string;
  logBindings: Record<string, unknown>;
}

/** From the main thread: stop, or say what the record worker has done (for the worker's metrics; `id` pairs the answer). */
export type HostMessage = { op: 'stop' } | { op: 'stats'; id: number };

/**
 * From the thread: started (with the engine it opened), could not start, stopped with everything written, or the
 * answer to a stats request.
 */
export type ThreadMessage =
  | { op: 'ready'; engine: 'postgres' | 'pglite'; schema: string }
  | { op: 'failed'; message: string }
  | { op: 'stopped' }
  | { op: 'stats'; id: number; reading: RecordReading };
