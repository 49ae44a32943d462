// The feed end to end across processes: commits in this process, the publisher here, a private redis-server,
// and a subscriber in a child process (as an edge node). Restarts of either side must converge on the database.
import { after, before, describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { FeedPublisher } from '../../../src/control/feed-publisher.ts';
import { RedisFeed } from '../../../src/shared/feed/redis.ts';
import { createLogger } from '../../../src/shared/log.ts';
import { currentVersion, readSnapshot, recordChange } from '../../../src/store/feed.ts';
import { openTestDatabase, type TestDatabase } from '../../helpers/db.ts';
import { ChildSubscriber, entriesDigest } from '../../helpers/feed.ts';
import { startRedisServer, type RedisServer } from '../../helpers/redis-server.ts';

const logger = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');

describe('a subscriber in another process', () => {
  let server: RedisServer;
  let testDb: TestDatabase;
  let sink: RedisFeed;
  let publisher: FeedPublisher;
  const prefix = `test:${randomUUID()}:`;

  before(async () => {
    [server, testDb] = await Promise.all([startRedisServer(), openTestDatabase()]);
    // Short timeouts so that while Redis is down the publisher fails fast and retries soon after it is back.
    sink = new RedisFeed({ url: server.url, prefix, logger, commandTimeoutMs: 1_000, reconnectMaxDelayMs: 200 });
    publisher = new FeedPublisher({ db: testDb.db, sink, logger, pollMs: 100, retain: 1000 });
    await publisher.start();
    await publisher.kick();
  });

  after(async () => {
    await publisher?.stop();
    await sink?.close();
    await Promise.all([testDb?.close(), server?.stop()]);
  });

  function commit(key: string, data: unknown): Promise<number> {
    return testDb.db.transaction((tx) => recordChange(tx, 'routes', key, data));
  }

  async function databaseDigest(): Promise<string> {
    return entriesDigest((await readSnapshot(testDb.db)).entries);
  }

  /** A child subscriber, killed when the test ends; resolves once it has taken its starting state. */
  async function startChild(t: TestContext): Promise<ChildSubscriber> {
    const child = new ChildSubscriber({ REDIS_URL: server.url, FEED_PREFIX: prefix, FEED_CHECK_INTERVAL_MS: '1000' });
    t.after(() => child.kill());
    await child.waitUntil((c) => c.events.some((e) => e.event === 'started'), 'start');
    return child;
  }

  it('receives the changes committed here, one by one and in order', async (t) => {
    const child = await startChild(t);
    const base = child.version;
    assert.equal(base, await currentVersion(testDb.db), 'it starts from the current state');
    for (let i = 0; i < 20; i++) await commit(`k${i % 6}`, i % 5 === 4 ? null : { n: i });
    await child.waitForVersion(base + 20);
    assert.deepEqual(
      child.appliedVersions,
      Array.from({ length: 21 }, (_, i) => base + i),
    );
    assert.equal(child.digest, await databaseDigest());
  });

  it('converges after the redis-server restarts empty, with changes made while it was down', async (t) => {
    const child = await startChild(t);
    const base = child.version;
    for (let i = 0; i < 3; i++) await commit(`r${i}`, { before: i });
    await child.waitForVersion(base + 3);

    await server.stop();
    for (let i = 0; i < 3; i++) await commit(`r${i}`, { during: i });
    await commit('r0', null);
    await server.restart();

    // The publisher re-seeds the empty server from the database; the child resyncs from that snapshot.
    await child.waitForVersion(base + 7);
    assert.equal(child.digest, await databaseDigest());
    assert.ok(
      child.events.some((e) => e.event === 'resync' && e.mode === 'snapshot' && e.to === base + 7),
      'the missed changes came from a snapshot: the restarted server has no log of them',
    );
    // And the feed flows change by change again.
    await commit('r1', { after: true });
    await child.waitForVersion(base + 8);
    assert.deepEqual(child.appliedVersions.slice(-2), [base + 7, base + 8]);
    assert.equal(child.digest, await databaseDigest());
  });

  it('catches up after being down while changes were made', async (t) => {
    const first = await startChild(t);
    const base = first.version;
    await commit('d0', 'one');
    await first.waitForVersion(base + 1);
    await first.kill();

    for (let i = 1; i <= 4; i++) await commit(`d${i % 2}`, `v${i}`);
    await publisher.waitFor(base + 5);

    const again = await startChild(t);
    assert.equal(again.version, base + 5);
    assert.equal(again.digest, await databaseDigest());
  });
});
