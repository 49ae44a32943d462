// Starts the store thread of `edge serve` and hands the main thread its ends: the database the thread serves (when
// it owns embedded PGlite) and the record sink the edge writes to. Storing traffic then costs the edge one post.
import { MessageChannel, Worker } from 'node:worker_threads';
import type { Logger } from '../../shared/log.ts';
import { PortRecordSink } from '../../shared/records/port.ts';
import type { RecordSink } from '../../shared/records/types.ts';
import type { Database, DatabaseOptions } from '../../store/db.ts';
import { RemoteDatabase } from '../../store/remote.ts';
import type { RecordReading } from '../metrics.ts';
import type { HostMessage, StoreThreadData, ThreadMessage } from './protocol.ts';

export interface StoreThreadOptions {
  database: DatabaseOptions;
  /** The thread owns the database and serves this thread's SQL (embedded PGlite, which one process opens once). */
  ownsDatabase: boolean;
  /** Where the thread's record worker reads: this process's edge (`port`) or the cluster's Redis stream. */
  records: { kind: 'port' } | { kind: 'redis'; url: string; prefix: string; consumer: string };
  /** The thread's nice value, 0–19 (EDGE_STORE_THREAD_NICE; 19 by default, the lowest priority). */
  nice: number;
  logger: Logger;
  logLevel: string;
  logBindings: Record<string, unknown>;
}

export interface StoreThread {
  /** The database the thread serves, when it owns it; closing it stops the thread. */
  db?: Database;
  /** The edge's record sink, when records travel by port. */
  records?: RecordSink;
  /**
   * What the thread's record worker has done and the backlog it reads from (the worker's metrics); rejects when the
   * thread does not answer within `timeoutMs` (busy in a long statement, or gone).
   */
  stats(timeoutMs?: number): Promise<RecordReading>;
  /** Writes what the record worker holds, closes the database, ends the thread. */
  close(): Promise<void>;
}

/** The entry runs TypeScript: the thread registers tsx itself, whatever loader flags (or none) the process had. */
function bootstrap(entry: URL): string {
  const tsx = import.meta.resolve('tsx/esm/api');
  return `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(entry.href)}); })`;
}

export async function startStoreThread(options: StoreThreadOptions): Promise<StoreThread> {
  const sql = options.ownsDatabase ? new MessageChannel() : null;
  const records = options.records.kind === 'port' ? new MessageChannel() : null;
  const data: StoreThreadData = {
    database: options.database,
    sqlPort: sql?.port2,
    records: records ? { kind: 'port', port: records.port2 } : (options.records as Extract<StoreThreadData['records'], { kind: 'redis' }>),
    nice: options.nice,
    logLevel: options.logLevel,
    logBindings: options.logBindings,
  };
  const transfer = [sql?.port2, records?.port2].filter((p) => p !== undefined);
  // No inherited execArgv: the process's own flags (--test, --cpu-prof, --inspect) are not the thread's business.
  const worker = new Worker(bootstrap(new URL('./entry.ts', import.meta.url)), { eval: true, workerData: data, transferList: transfer, execArgv: [] });

  let remote: RemoteDatabase | undefined;
  let stopping = false;
  /** Stats requests waiting for the thread's answer, by id. */
  const asked = new Map<number, (reading: RecordReading) => void>();
  let nextAsk = 0;
  let stopped!: () => void;
  const whenStopped = new Promise<void>((resolve) => (stopped = resolve));
  const ready = new Promise<Extract<ThreadMessage, { op: 'ready' }>>((resolve, reject) => {
    worker.on('message', (message: ThreadMessage) => {
      if (message.op === 'ready') resolve(message);
      else if (message.op === 'failed') reject(new Error(`store thread could not open the database: ${message.message}`));
      else if (message.op === 'stopped') stopped();
      else if (message.op === 'stats') asked.get(message.id)?.(message.reading);
    });
    worker.on('error', (err) => {
      reject(err);
      options.logger.error({ err }, 'store thread failed');
    });
    worker.on('exit', (code) => {
      reject(new Error(`store thread exited with code ${code} before it was ready`));
      stopped();
      if (!stopping) {
        // Nothing can serve SQL or write records any more: every caller gets the error rather than a hang.
        options.logger.error({ code }, 'store thread exited; the store is unavailable until the node restarts');
        remote?.abandon(new Error('the store thread exited'));
      }
    });
  });

  let closing: Promise<void> | null = null;
  const close = () =>
    (closing ??= (async () => {
      stopping = true;
      worker.postMessage({ op: 'stop' } satisfies HostMessage);
      await whenStopped;
      remote?.abandon(new Error('the store is closed'));
      sql?.port1.close();
      records?.port1.close();
      await worker.terminate();
    })());

  try {
    const started = await ready;
    if (sql) remote = new RemoteDatabase(sql.port1, started.engine, started.schema, close);
  } catch (err) {
    stopping = true;
    await worker.terminate();
    throw err;
  }
  // Longer than the thread gives Redis for the backlog (2 s), so a slow Redis still gets its counts across.
  const stats = (timeoutMs = 3_000) =>
    new Promise<RecordReading>((resolve, reject) => {
      if (stopping) return reject(new Error('the store thread is stopping'));
      const id = ++nextAsk;
      const timer = setTimeout(() => {
        asked.delete(id);
        reject(new Error(`the store thread did not answer within ${timeoutMs} ms`));
      }, timeoutMs);
      asked.set(id, (reading) => {
        clearTimeout(timer);
        asked.delete(id);
        resolve(reading);
      });
      worker.postMessage({ op: 'stats', id } satisfies HostMessage);
    });
  return { db: remote, records: records ? new PortRecordSink(records.port1) : undefined, stats, close };
}
