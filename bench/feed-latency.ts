// Config propagation latency: from a committing transaction to the change applied by a subscriber in another
// process, through the real publisher and Redis. Run standalone with `tsx bench/feed-latency.ts`.
import { randomBytes, randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { FeedPublisher } from '../src/control/feed-publisher.ts';
import { RedisFeed } from '../src/shared/feed/redis.ts';
import { createLogger } from '../src/shared/log.ts';
import { openDatabase, type Database } from '../src/store/db.ts';
import { recordChange } from '../src/store/feed.ts';
import { ChildSubscriber } from '../test/helpers/feed.ts';
import { startRedisServer, type RedisServer } from '../test/helpers/redis-server.ts';

export interface FeedLatencyOptions {
  /** Changes committed, one at a time, each waited for before the next. */
  changes?: number;
  /** PostgreSQL URL; empty or absent: in-memory PGlite. */
  databaseUrl?: string;
  /** An existing Redis (a random key prefix keeps the run apart); absent: a private redis-server. */
  redisUrl?: string;
  /** Measuring stops after this long whatever it has gathered (setup, a few seconds, comes on top). */
  timeLimitMs?: number;
}

export interface FeedLatencyResult {
  p50Ms: number;
  p99Ms: number;
  samples: number;
}

/** Nearest-rank percentile of sorted values. */
function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

function now(): number {
  // Wall-clock milliseconds with sub-millisecond resolution, comparable across processes on one machine.
  return performance.timeOrigin + performance.now();
}

/** A shared Redis is left as found: everything under the run's own prefix goes. */
async function deleteKeys(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    for await (const keys of redis.scanStream({ match: `${prefix}*`, count: 100 }) as AsyncIterable<string[]>) {
      if (keys.length > 0) await redis.del(...keys);
    }
  } finally {
    redis.disconnect();
  }
}

export async function benchFeedLatency(options: FeedLatencyOptions = {}): Promise<FeedLatencyResult> {
  const changes = options.changes ?? 300;
  const timeLimitMs = options.timeLimitMs ?? 30_000;
  const databaseUrl = options.databaseUrl ?? '';
  const logger = createLogger(process.env.BENCH_LOG_LEVEL ?? 'silent');
  const cleanup: Array<() => Promise<unknown>> = [];
  try {
    const schema = databaseUrl ? `bench_${randomBytes(6).toString('hex')}` : 'public';
    const db: Database = await openDatabase({ url: databaseUrl, dataDir: 'memory://', schema });
    cleanup.push(async () => {
      if (databaseUrl) await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await db.close();
    });

    const prefix = `bench:${randomUUID()}:`;
    let redisUrl = options.redisUrl;
    if (redisUrl) {
      const url = redisUrl;
      cleanup.push(() => deleteKeys(url, prefix));
    } else {
      const server: RedisServer = await startRedisServer();
      cleanup.push(() => server.stop());
      redisUrl = server.url;
    }

    const sink = new RedisFeed({ url: redisUrl, prefix, logger });
    cleanup.push(() => sink.close());
    // The default poll period: NOTIFY, not polling, is what should carry each change.
    const publisher = new FeedPublisher({ db, sink, logger, pollMs: 1000, retain: 10_000 });
    await publisher.start();
    cleanup.push(() => publisher.stop());
    await publisher.kick();

    const child = new ChildSubscriber({ REDIS_URL: redisUrl, FEED_PREFIX: prefix, FEED_CHECK_INTERVAL_MS: '30000' });
    cleanup.push(() => child.kill());
    await child.waitUntil((c) => c.events.some((e) => e.event === 'started'), 'start', 30_000);

    const deadline = Date.now() + timeLimitMs;
    const latencies: number[] = [];
    for (let i = 0; i < changes && Date.now() < deadline; i++) {
      // Stamped as the transaction starts, so the figure includes the commit itself.
      const version = await db.transaction((tx) => recordChange(tx, 'bench', `k${i % 16}`, { sentAt: now(), i }));
      try {
        await child.waitForVersion(version, Math.max(1, deadline - Date.now()));
      } catch {
        break; // out of time
      }
      const applied = child.events.find((e) => e.event === 'applied' && e.version === version);
      if (applied?.event === 'applied' && applied.sentAt !== undefined) latencies.push(applied.at - applied.sentAt);
    }
    latencies.sort((a, b) => a - b);
    return { p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99), samples: latencies.length };
  } finally {
    for (const step of cleanup.reverse()) await step().catch(() => {});
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const databaseUrl = process.env.DATABASE_URL ?? '';
  const redisUrl = process.env.REDIS_URL || undefined;
  const result = await benchFeedLatency({ databaseUrl, redisUrl });
  const where = `${databaseUrl ? 'postgres' : 'pglite'}, ${redisUrl ? 'REDIS_URL' : 'private redis-server'}`;
  console.log(
    `feed latency, commit -> applied in another process (${where}): ` +
      `p50 ${result.p50Ms.toFixed(2)} ms, p99 ${result.p99Ms.toFixed(2)} ms over ${result.samples} changes`,
  );
}
