// Redis as a distributed service (src/shared/redis-connect.ts): the URL forms and settings that name a Sentinel or a
// Cluster, refused when malformed, and the feed, presence, traffic records and the rate-limit script working against
// a real three-primary Redis Cluster and a real Sentinel deployment.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ClusterStore } from '../../src/edge/rate-limit/cluster.ts';
import { ConfigError, loadConfig } from '../../src/shared/config.ts';
import { RedisFeed } from '../../src/shared/feed/redis.ts';
import { RedisPresence } from '../../src/shared/presence.ts';
import { RedisRecords } from '../../src/shared/records/redis.ts';
import { parseRedisNodes, parseRedisTarget } from '../../src/shared/redis-connect.ts';
import { eventually } from '../helpers/eventually.ts';
import { startRedisCluster, startRedisSentinel, type RedisDeployment } from '../helpers/redis-cluster.ts';
import { skipSlowSuite } from '../helpers/slow-suites.ts';

describe('Redis URL forms and settings', () => {
  it('reads a single server, a Sentinel primary and a Cluster from REDIS_URL', () => {
    assert.deepEqual(parseRedisTarget('redis://127.0.0.1:6379'), { kind: 'single', url: 'redis://127.0.0.1:6379' });
    assert.deepEqual(parseRedisTarget('redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/main'), {
      kind: 'sentinel',
      sentinels: [{ host: '10.0.0.1', port: 26379 }, { host: '10.0.0.2', port: 26379 }],
      name: 'main',
      password: undefined,
      db: undefined,
    });
    assert.deepEqual(parseRedisTarget('redis+cluster://:s%40cret@a.example:7000,[::1]:7001'), {
      kind: 'cluster',
      nodes: [{ host: 'a.example', port: 7000 }, { host: '::1', port: 7001 }],
      password: 's@cret',
    });
  });

  it('refuses what names no Redis, without echoing a password', () => {
    assert.throws(() => parseRedisTarget('http://127.0.0.1:6379'), /is not a redis/);
    assert.throws(() => parseRedisTarget('redis+cluster://a:1,b'), /"b" is not host:port/);
    assert.throws(() => parseRedisNodes('a:0', 'REDIS_CLUSTER_NODES'), /"a:0" is not host:port/);
    assert.throws(() => parseRedisTarget('ftp://u:hunter2@h'), (err: Error) => !err.message.includes('hunter2'));
  });

  it('takes REDIS_SENTINELS (+ REDIS_SENTINEL_MASTER) or REDIS_CLUSTER_NODES, one of them, and checks them at start', () => {
    assert.equal(loadConfig({ REDIS_SENTINELS: '127.0.0.1:26379', REDIS_SENTINEL_MASTER: 'main' }).redisUrl, 'redis+sentinel://127.0.0.1:26379/main');
    assert.equal(loadConfig({ REDIS_CLUSTER_NODES: '127.0.0.1:7000,127.0.0.1:7001' }).redisUrl, 'redis+cluster://127.0.0.1:7000,127.0.0.1:7001');
    const bad: Array<[Record<string, string>, RegExp]> = [
      [{ REDIS_SENTINELS: 'a:1', REDIS_CLUSTER_NODES: 'b:2' }, /set one/],
      [{ REDIS_URL: 'redis://x:1', REDIS_CLUSTER_NODES: 'b:2' }, /set one/],
      [{ REDIS_CLUSTER_NODES: 'b' }, /REDIS_CLUSTER_NODES: "b" is not host:port/],
      [{ REDIS_SENTINELS: 'a:1', REDIS_SENTINEL_MASTER: 'two words' }, /REDIS_SENTINEL_MASTER/],
      [{ REDIS_URL: 'memcached://x' }, /is not a redis/],
    ];
    for (const [env, message] of bad) assert.throws(() => loadConfig(env), (err: Error) => err instanceof ConfigError && message.test(err.message), JSON.stringify(env));
  });
});

/** What every distributed form must carry: the feed, presence, the record stream and the rate-limit script. */
function behavesAsThePlatformsRedis(name: string, start: () => Promise<RedisDeployment>): void {
  describe(`the platform on ${name}`, { skip: skipSlowSuite() }, () => {
    let redis: RedisDeployment;
    const closers: Array<() => Promise<unknown> | void> = [];
    before(async () => {
      redis = await start();
    });
    after(async () => {
      for (const close of closers) await close();
      await redis?.stop();
    });

    it('carries the config feed: a reset, ordered changes, a subscriber told of each, reads since a version', async () => {
      const prefix = `test:${randomUUID()}:`;
      const sink = new RedisFeed({ url: redis.url, prefix });
      const source = new RedisFeed({ url: redis.url, prefix });
      closers.push(() => sink.close(), () => source.close());
      const seen: number[] = [];
      await source.subscribe({ onChange: (change) => seen.push(change.version), onReset: () => {}, onReconnect: () => {} });
      assert.equal(await sink.reset({ version: 1, entries: [{ topic: 'routes', key: 'a', version: 1, data: { n: 1 } }] }), true);
      assert.equal(await sink.publish({ version: 2, topic: 'routes', key: 'b', data: { n: 2 } }), true);
      // Out of order is refused, as on a single server.
      assert.equal(await sink.publish({ version: 4, topic: 'routes', key: 'c', data: { n: 4 } }), false);
      assert.equal(await source.head(), 2);
      assert.deepEqual((await source.readSince(1))?.map((c) => c.version), [2]);
      assert.deepEqual((await source.readSnapshot())?.entries.map((e) => e.key).sort(), ['a', 'b']);
      await eventually(async () => (seen.includes(2) ? true : undefined));
    });

    it('carries presence', async () => {
      const presence = new RedisPresence(redis.url, `test:${randomUUID()}:`, 10_000);
      closers.push(() => presence.close());
      // A beat before the connection is up fails (no offline queue); an edge simply beats again, as this does.
      await eventually(() => presence.report({ node: 'edge-a', region: 'eu', version: 3, heartbeat_at: new Date().toISOString(), agents: [] }).then(() => true, () => undefined));
      assert.deepEqual((await presence.edges()).map((e) => e.node), ['edge-a']);
    });

    it('carries traffic records from an edge to the worker’s consumer group', async () => {
      const prefix = `test:${randomUUID()}:`;
      const edge = new RedisRecords({ url: redis.url, prefix, consumer: 'edge' });
      const worker = new RedisRecords({ url: redis.url, prefix, consumer: 'worker' });
      closers.push(() => edge.close(), () => worker.close());
      const at = new Date().toISOString();
      edge.append([{ kind: 'rate_limit_hits', edge: 'edge-a', at, counts: { r: 3 }, last: { r: at } }]);
      await edge.flush(5_000);
      const batches = await eventually(async () => {
        const read = await worker.read({ count: 10, blockMs: 500 });
        return read.length > 0 ? read : undefined;
      });
      assert.equal(batches[0].records[0].kind, 'rate_limit_hits');
      await worker.ack(batches.map((b) => b.id));
    });

    it('runs the sliding-window rate-limit script, one count across two edges', async () => {
      const prefix = `test:${randomUUID()}:`;
      const a = new ClusterStore({ url: redis.url, prefix, timeoutMs: 2_000 });
      const b = new ClusterStore({ url: redis.url, prefix, timeoutMs: 2_000 });
      closers.push(() => a.close(), () => b.close());
      let allowed = 0;
      for (let i = 0; i < 10; i++) {
        const decision = await eventually(async () => (i % 2 ? a : b).take('rule-1', 'visitor', 5, 60_000, 1_000 + i).catch(() => undefined));
        if (decision.allowed) allowed++;
      }
      assert.equal(allowed, 5);
    });
  });
}

behavesAsThePlatformsRedis('a Redis Cluster (three primaries)', startRedisCluster);
behavesAsThePlatformsRedis('Redis Sentinel', startRedisSentinel);
