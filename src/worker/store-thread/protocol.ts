// What the composition root and the store thread say to each other: the thread's start data and its lifecycle
// messages (the SQL and the records travel on their own ports: src/store/remote.ts, src/shared/records/port.ts).
import type { MessagePort } from 'node:worker_threads';
import type { DatabaseOptions } from '../../store/db.ts';

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

/** From the main thread. */
export type HostMessage = { op: 'stop' };

/** From the thread: started (with the engine it opened), could not start, or stopped with everything written. */
export type ThreadMessage =
  | { op: 'ready'; engine: 'postgres' | 'pglite'; schema: string }
  | { op: 'failed'; message: string }
  | { op: 'stopped' };
