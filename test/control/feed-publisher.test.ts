// FeedPublisher from a real database (PGlite, or PostgreSQL when DATABASE_URL is set) to RedisFeed on a
// private redis-server: what commits reaches subscribers exactly once, in commit order; nothing else does.
import { after, before, describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { FeedPublisher } from '../../src/control/feed-publisher.ts';
import { RedisFeed } from '../../src/shared/feed/redis.ts';
import { FeedMirror, FeedSubscriber } from '../../src/shared/feed/subscriber.ts';
import type { FeedChange } from '../../src/shared/feed/types.ts';
import { createLogger } from '../../src/shared/log.ts';
import type { Database } from '../../src/store/db.ts';
import { currentVersion, readSnapshot, recordChange } from '../../src/store/feed.ts';
import { openTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { entriesDigest, waitForVersion } from '../helpers/feed.ts';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.ts';

const logger = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');

// One database and one server for the file (a PGlite start costs seconds): each test takes a fresh Redis
// prefix and its own topic, and counts versions from where the database stood when it began.
let server: RedisServer;
let testDb: TestDatabase;
before(async () => {
  [server, testDb] = await Promise.all([startRedisServer(), openTestDatabase()]);
});
after(async () => {
  await Promise.all([server?.stop(), testDb?.close()]);
});

interface World {
  db: Database;
  topic: string;
  /** The database's feed version when the test began. */
  base: number;
  commit(key: string, data: unknown): Promise<number>;
  feed(): RedisFeed;
  publisher(options?: { retain?: number }): Promise<FeedPublisher>;
  subscriber(): Promise<{ subscriber: FeedSubscriber; mirror: FeedMirror }>;
}

let worlds = 0;

/** A fresh Redis prefix and topic; everything opened through it is closed after the test. */
async function world(t: TestContext): Promise<World> {
  const { db } = testDb;
  const prefix = `test:${randomUUID()}:`;
  const topic = `routes${++worlds}`;
  const closers: Array<() => Promise<unknown>> = [];
  t.after(async () => {
    for (const close of closers.reverse()) await close();
  });
  const feed = () => {
    const f = new RedisFeed({ url: server.url, prefix, logger });
    closers.push(() => f.close());
    return f;
  };
  return {
    db,
    topic,
    base: await currentVersion(db),
    commit: (key, data) => db.transaction((tx) => recordChange(tx, topic, key, data)),
    feed,
    async publisher(options = {}) {
      const publisher = new FeedPublisher({ db, sink: feed(), logger, pollMs: 50, retain: options.retain ?? 1000 });
      await publisher.start();
      closers.push(() => publisher.stop());
      // Seeded before the test commits anything, so the sink's log starts at the test's base version.
      await publisher.kick();
      return publisher;
    },
    async subscriber() {
      const mirror = new FeedMirror();
      const subscriber = new FeedSubscriber(feed(), mirror, { checkIntervalMs: 60_000, logger });
      await subscriber.start();
      closers.push(() => subscriber.stop());
      return { subscriber, mirror };
    },
  };
}

function range(from: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => from + i);
}

describe('FeedPublisher', () => {
  it('delivers committed changes to a subscriber, in order', async (t) => {
    const w = await world(t);
    const publisher = await w.publisher();
    await publisher.kick();
    const { subscriber, mirror } = await w.subscriber();
    const applied: number[] = [];
    subscriber.on('applied', (v) => applied.push(v));
    await w.commit('a', { upstream: 'http://a' });
    await w.commit('b', { upstream: 'http://b' });
    await w.commit('a', null);
    await waitForVersion(subscriber, w.base + 3);
    assert.deepEqual(applied, range(w.base + 1, 3));
    assert.deepEqual(mirror.entries(w.topic), [{ topic: w.topic, key: 'b', version: w.base + 2, data: { upstream: 'http://b' } }]);
  });

  it('seeds an empty sink with the database state before publishing', async (t) => {
    const w = await world(t);
    await w.commit('a', 1);
    await w.commit('b', 2);
    const publisher = await w.publisher();
    await publisher.kick();
    assert.equal(publisher.publishedVersion, w.base + 2);
    const snapshot = await w.feed().readSnapshot();
    assert.equal(snapshot?.version, w.base + 2);
    assert.equal(entriesDigest(snapshot!.entries), entriesDigest((await readSnapshot(w.db)).entries));
  });

  it('publishes nothing for a rolled-back transaction', async (t) => {
    const w = await world(t);
    const publisher = await w.publisher();
    const { subscriber, mirror } = await w.subscriber();
    await w.commit('kept', 1);
    await assert.rejects(
      w.db.transaction(async (tx) => {
        await recordChange(tx, w.topic, 'rolled-back', 2);
        throw new Error('abort');
      }),
      /abort/,
    );
    await w.commit('also-kept', 3);
    await publisher.waitFor(w.base + 2);
    await waitForVersion(subscriber, w.base + 2);
    const log = await w.feed().readSince(w.base);
    assert.deepEqual(
      log?.map((c) => [c.version, c.key]),
      [
        [w.base + 1, 'kept'],
        [w.base + 2, 'also-kept'],
      ],
    );
    assert.equal(mirror.get(w.topic, 'rolled-back'), undefined);
  });

  it('publishes concurrent transactions without gaps, in commit order', async (t) => {
    const w = await world(t);
    const publisher = await w.publisher();
    const { subscriber, mirror } = await w.subscriber();
    const count = 40;
    const versions = await Promise.all(range(0, count).map((i) => w.commit(`k${i}`, i)));
    await publisher.waitFor(w.base + count);
    const log = (await w.feed().readSince(w.base)) as FeedChange[];
    assert.deepEqual(
      log.map((c) => c.version),
      range(w.base + 1, count),
    );
    // Each change sits at the version its own transaction was given.
    for (const change of log) assert.equal(versions[change.data as number], change.version);
    await waitForVersion(subscriber, w.base + count);
    assert.equal(entriesDigest(mirror.entries()), entriesDigest((await readSnapshot(w.db)).entries));
  });

  it('never duplicates or skips a version when two publishers share one sink', async (t) => {
    const w = await world(t);
    const count = 60;
    const last = w.base + count;
    const seen: number[] = [];
    const resets: number[] = [];
    let sawLast!: () => void;
    const lastSeen = new Promise<void>((resolve) => (sawLast = resolve));
    await w.feed().subscribe({
      onChange: (c) => {
        seen.push(c.version);
        if (c.version === last) sawLast();
      },
      onReset: (v) => resets.push(v),
      onReconnect: () => {},
    });
    const [one, two] = [await w.publisher(), await w.publisher()];
    await Promise.all([one.kick(), two.kick()]);
    // Bursts of concurrent commits; each NOTIFY wakes both publishers, which race for every version.
    for (let burst = 0; burst < count / 10; burst++) {
      await Promise.all(range(burst * 10, 10).map((i) => w.commit(`k${i % 7}`, i)));
    }
    await Promise.all([one.waitFor(last), two.waitFor(last)]);
    // Pub/sub keeps order on a connection, so once the last version is in, every earlier delivery is too.
    await lastSeen;
    assert.deepEqual(seen, range(w.base + 1, count));
    assert.deepEqual(resets, [w.base], 'the empty sink is seeded once');
  });

  it('replaces a sink that holds another database’s state', async (t) => {
    const w = await world(t);
    await w.commit('ours', true);
    await w.feed().reset({ version: w.base + 1000, entries: [{ topic: w.topic, key: 'theirs', version: w.base + 1000, data: true }] });
    const publisher = await w.publisher();
    await publisher.kick();
    const [sink, truth] = [(await w.feed().readSnapshot())!, await readSnapshot(w.db)];
    assert.equal(sink.version, truth.version);
    assert.equal(entriesDigest(sink.entries), entriesDigest(truth.entries));
    assert.equal(sink.entries.find((e) => e.key === 'theirs'), undefined);
  });

  it('prunes the outbox down to the retained versions behind what it published', async (t) => {
    const w = await world(t);
    const publisher = await w.publisher({ retain: 5 });
    for (let i = 1; i <= 20; i++) await w.commit('a', i);
    await publisher.waitFor(w.base + 20);
    await publisher.kick();
    const { rows } = await w.db.query<{ min: number; max: number }>('SELECT min(version) AS min, max(version) AS max FROM feed_outbox');
    assert.deepEqual(rows[0], { min: w.base + 16, max: w.base + 20 });
  });
});
