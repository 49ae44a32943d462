// The store thread's body: opens the database, serves the main thread's SQL when it owns an embedded one, and runs
// the record worker, so storing traffic never takes the edge's event loop (docs/architecture.md "What runs where").
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { createLogger } from '../../shared/log.ts';
import { MemoryRecords } from '../../shared/records/memory.ts';
import { receiveRecords } from '../../shared/records/port.ts';
import { RedisRecords } from '../../shared/records/redis.ts';
import type { RecordSource } from '../../shared/records/types.ts';
import { openDatabase, type Database } from '../../store/db.ts';
import { serveDatabase } from '../../store/remote.ts';
import { writeRuleHits } from '../rate-limit-hits.ts';
import { readRecords } from '../metrics.ts';
import { RecordWorker } from '../records.ts';
import { writeTrafficExchanges, writeTrafficUsage } from '../traffic.ts';
import type { HostMessage, StoreThreadData, ThreadMessage } from './protocol.ts';

const data = workerData as StoreThreadData;
const host = parentPort!;
const say = (message: ThreadMessage) => host.postMessage(message);
const logger = createLogger(data.logLevel, { ...data.logBindings, component: 'store-thread' });
// The thread's nice value (Linux: a per-thread attribute), 19 unless configured. Where the edge and this thread share
// a saturated core the edge keeps it and storage falls behind, so the edge drops and counts captured exchanges
// instead of serving fewer requests; with a core to spare, or short of saturation, nothing changes.
try {
  if (data.nice !== 0) setPriority(data.nice);
} catch (err) {
  // Not permitted (some containers) or not supported: the thread runs at the process's priority.
  logger.debug({ err }, 'store thread priority left unchanged');
}

const db: Database = await openDatabase(data.database).catch(async (err: unknown) => {
  // The host ends the thread when it reads this; nothing after this line may start.
  say({ op: 'failed', message: err instanceof Error ? err.message : String(err) });
  return new Promise<never>(() => {});
});
if (data.sqlPort) serveDatabase(db, data.sqlPort);

/** How long a stop waits for the edge's end mark: an edge that never closed its sink must not hold shutdown. */
const END_MARK_WAIT_MS = 5_000;

const wanted = data.records;
const queue = new MemoryRecords();
const fromEdge = wanted.kind === 'port' ? receiveRecords(wanted.port, queue) : null;
const source: RecordSource =
  wanted.kind === 'port' ? fromEdge! : new RedisRecords({ url: wanted.url, prefix: wanted.prefix, consumer: wanted.consumer, logger });
/** Where the backlog is told: the queue the edge's batches wait in, or the cluster's stream. */
const backlogSource: RecordSource = wanted.kind === 'port' ? queue : source;
/**
 * Batches per read, so per transaction: an edge's batch holds up to 100 exchanges, so a transaction writes at most
 * ~1,000 rows (tens of ms of PGlite), and the main thread's SQL, queued behind it on PGlite's one connection, waits
 * no longer than that even while the worker catches up on a backlog.
 */
const BATCHES_PER_TRANSACTION = 10;

const recordWorker = new RecordWorker(db, source, { rate_limit_hits: writeRuleHits, traffic_exchange: writeTrafficExchanges, traffic_usage: writeTrafficUsage }, {
  logger: logger.child({ component: 'traffic-records' }),
  count: BATCHES_PER_TRANSACTION,
});
recordWorker.start();

host.on('message', (message: HostMessage) => {
  if (message.op === 'stats') {
    const { id } = message;
    void readRecords(recordWorker.stats(), backlogSource).then((reading) => say({ op: 'stats', id, reading }));
    return;
  }
  if (message.op !== 'stop') return;
  // The edge's last batches travel on their own port, so the end mark behind them says they have all arrived; the
  // worker's last drain writes them; then the database closes, the main thread's last queries having been answered.
  void (async () => {
    if (fromEdge) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), END_MARK_WAIT_MS)));
      if (await Promise.race([fromEdge.ended.then(() => false), late])) logger.warn('the edge sent no end of records; stopping with what arrived');
      clearTimeout(timer);
    }
    await recordWorker.stop();
    await source.close().catch(() => {});
    await db.close().catch((err) => logger.error({ err }, 'store did not close cleanly'));
    say({ op: 'stopped' });
  })();
});
say({ op: 'ready', engine: db.engine, schema: db.schema });
