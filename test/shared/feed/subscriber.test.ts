// FeedSubscriber over both transports: the same specification runs against MemoryFeed and against RedisFeed
// on a private redis-server. Losses are real pub/sub deliveries dropped, not a mocked source.
import { after, before, describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { MemoryFeed } from '../../../src/shared/feed/memory.ts';
import { RedisFeed } from '../../../src/shared/feed/redis.ts';
import { FeedMirror, FeedSubscriber, type ResyncDetail, type ResyncReason } from '../../../src/shared/feed/subscriber.ts';
import type { FeedSink, FeedSource } from '../../../src/shared/feed/transport.ts';
import type { FeedChange, FeedEntry } from '../../../src/shared/feed/types.ts';
import { RecordingConsumer, losingDeliveries, nextEvent, waitForVersion } from '../../helpers/feed.ts';
import { startRedisServer, type RedisServer } from '../../helpers/redis-server.ts';

/** Long enough that no periodic check interferes with a test about hints, unless the test asks for checks. */
const NO_CHECK_MS = 600_000;
const FAST_CHECK_MS = 50;
/** The resync every started subscriber reports: the empty source's snapshot at version 0. */
const STARTED: [ResyncReason, ResyncDetail] = ['start', { mode: 'snapshot', from: 0, to: 0 }];

interface Transport {
  sink: FeedSink;
  source: FeedSource;
  close(): Promise<void>;
}

type OpenTransport = (options: { maxLen: number }) => Transport;

interface Setup {
  sink: FeedSink;
  source: FeedSource;
  consumer: RecordingConsumer;
  subscriber: FeedSubscriber;
  /** Versions whose pub/sub delivery to the subscriber is lost. */
  dropped: Set<number>;
  resyncs: Array<[ResyncReason, ResyncDetail]>;
  publish(version: number, key: string, data: unknown): Promise<void>;
}

function value(topic: string, key: string, version: number, data: unknown): FeedEntry {
  return { topic, key, version, data };
}

/** The sink seeded empty at version 0 (as a publisher does first), a subscriber started on it. */
async function setup(
  t: TestContext,
  open: OpenTransport,
  options: { maxLen?: number; checkIntervalMs?: number; seed?: boolean; version?: number } = {},
): Promise<Setup> {
  const transport = open({ maxLen: options.maxLen ?? 1000 });
  t.after(() => transport.close());
  if (options.seed ?? true) await transport.sink.reset({ version: 0, entries: [] });
  const dropped = new Set<number>();
  const consumer = new RecordingConsumer();
  const subscriber = new FeedSubscriber(losingDeliveries(transport.source, dropped), consumer, {
    checkIntervalMs: options.checkIntervalMs ?? NO_CHECK_MS,
    version: options.version,
  });
  const resyncs: Array<[ResyncReason, ResyncDetail]> = [];
  subscriber.on('resync', (reason, detail) => resyncs.push([reason, detail]));
  subscriber.on('error', () => {}); // asserted where expected; logged regardless
  t.after(() => subscriber.stop());
  return {
    sink: transport.sink,
    source: transport.source,
    consumer,
    subscriber,
    dropped,
    resyncs,
    async publish(version, key, data) {
      assert.equal(await transport.sink.publish({ version, topic: 'routes', key, data }), true, `publish ${version}`);
    },
  };
}

function behavesAsAFeed(open: () => OpenTransport): void {
  it('applies published changes one by one, in version order', async (t) => {
    const { subscriber, consumer, publish } = await setup(t, open());
    await subscriber.start();
    assert.deepEqual(consumer.resets, [0], 'starts from the source snapshot');
    await publish(1, 'a', { port: 1 });
    await publish(2, 'b', { port: 2 });
    await publish(3, 'a', { port: 3 });
    await publish(4, 'b', null);
    await waitForVersion(subscriber, 4);
    assert.deepEqual(consumer.applies, [1, 2, 3, 4]);
    assert.deepEqual(consumer.entries(), [value('routes', 'a', 3, { port: 3 })]);
  });

  it('starts from the current snapshot when changes were published before it started', async (t) => {
    const { subscriber, consumer, publish } = await setup(t, open());
    await publish(1, 'a', 1);
    await publish(2, 'b', 2);
    await subscriber.start();
    assert.equal(subscriber.version, 2);
    assert.deepEqual(consumer.calls, [{ kind: 'reset', version: 2 }]);
    assert.equal(consumer.get('routes', 'b')?.data, 2);
  });

  it('waits for a source with no state, then takes its first snapshot', async (t) => {
    const { sink, subscriber, consumer } = await setup(t, open(), { seed: false });
    await subscriber.start();
    assert.equal(subscriber.version, 0);
    assert.deepEqual(consumer.calls, []);
    await sink.reset({ version: 7, entries: [value('routes', 'a', 7, 'x')] });
    await waitForVersion(subscriber, 7);
    assert.deepEqual(consumer.resets, [7]);
    assert.equal(consumer.get('routes', 'a')?.data, 'x');
  });

  it('ignores versions it already holds when a re-seeded source repeats them', async (t) => {
    const { sink, subscriber, consumer, publish } = await setup(t, open());
    await subscriber.start();
    await publish(1, 'a', 'one');
    await publish(2, 'a', 'two');
    await waitForVersion(subscriber, 2);
    // A source re-seeded from version 1 publishes 2 again (here with other data), then continues.
    await sink.reset({ version: 1, entries: [value('routes', 'a', 1, 'one')] });
    await publish(2, 'a', 'two again');
    await publish(3, 'b', 'three');
    await waitForVersion(subscriber, 3);
    assert.deepEqual(consumer.applies, [1, 2, 3]);
    assert.deepEqual(consumer.resets, [0], 'an older snapshot is never installed');
    assert.equal(consumer.get('routes', 'a')?.data, 'two');
  });

  it('fills a gap from the change log when a delivery is lost', async (t) => {
    const { subscriber, consumer, dropped, resyncs, publish } = await setup(t, open());
    await subscriber.start();
    dropped.add(2).add(3);
    const resynced = nextEvent(subscriber, 'resync');
    for (let v = 1; v <= 4; v++) await publish(v, `k${v}`, v);
    await resynced;
    assert.deepEqual(consumer.applies, [1, 2, 3, 4]);
    assert.deepEqual(consumer.resets, [0]);
    assert.deepEqual(resyncs, [STARTED, ['gap', { mode: 'replay', from: 1, to: 4 }]]);
  });

  it('resets from a snapshot when the log was trimmed past the gap', async (t) => {
    const { source, subscriber, consumer, dropped, resyncs, publish } = await setup(t, open(), { maxLen: 3 });
    await subscriber.start();
    for (let v = 2; v <= 9; v++) dropped.add(v);
    for (let v = 1; v <= 10; v++) await publish(v, `k${v % 4}`, v);
    await waitForVersion(subscriber, 10);
    assert.deepEqual(consumer.applies, [1]);
    assert.deepEqual(consumer.resets, [0, 10]);
    assert.deepEqual(resyncs, [STARTED, ['gap', { mode: 'snapshot', from: 1, to: 10 }]]);
    assert.deepEqual(sortEntries(consumer.entries()), sortEntries((await source.readSnapshot())!.entries));
  });

  it('catches up at the periodic check when every hint was lost', async (t) => {
    const { subscriber, consumer, dropped, resyncs, publish } = await setup(t, open(), { checkIntervalMs: FAST_CHECK_MS });
    await subscriber.start();
    dropped.add(1).add(2);
    const caughtUp = nextEvent<[ResyncReason, ResyncDetail]>(subscriber, 'resync', (_, detail) => detail.to === 2);
    await publish(1, 'a', 1);
    await publish(2, 'a', 2);
    await caughtUp;
    assert.deepEqual(consumer.applies, [1, 2]);
    // One check or two, depending on when they fell between the publishes; every one replayed the log.
    assert.ok(resyncs.length > 1);
    for (const [reason, detail] of resyncs.slice(1)) assert.deepEqual([reason, detail.mode], ['check', 'replay']);
  });

  it('replays only what it missed when restarted with the version it kept', async (t) => {
    const { subscriber, consumer, publish } = await setup(t, open(), { version: 2 });
    for (let v = 1; v <= 4; v++) await publish(v, 'a', v);
    await subscriber.start();
    assert.equal(subscriber.version, 4);
    assert.deepEqual(consumer.calls, [
      { kind: 'apply', version: 3 },
      { kind: 'apply', version: 4 },
    ]);
  });

  it('keeps its version and retries with a full resync at the next check when the consumer fails', async (t) => {
    const { subscriber, consumer, publish } = await setup(t, open(), { checkIntervalMs: FAST_CHECK_MS });
    await subscriber.start();
    await publish(1, 'a', 1);
    await waitForVersion(subscriber, 1);
    consumer.failOnce(2);
    const failed = nextEvent<[Error]>(subscriber, 'error');
    await publish(2, 'a', 2);
    const [err] = await failed;
    assert.match(err.message, /refuses version 2/);
    assert.equal(subscriber.version, 1, 'the failed version is not counted as applied');
    await waitForVersion(subscriber, 2);
    assert.deepEqual(consumer.resets, [0, 2], 'repaired by a full resync, not by replaying the change again');
    assert.deepEqual(consumer.entries(), [value('routes', 'a', 2, 2)]);
    await publish(3, 'b', 3);
    await waitForVersion(subscriber, 3);
    assert.deepEqual(consumer.applies.at(-1), 3, 'and applies changes one by one again');
  });

  it('never resets to a snapshot older than the version it holds', async (t) => {
    const { sink, subscriber, consumer, publish } = await setup(t, open(), { checkIntervalMs: FAST_CHECK_MS });
    await subscriber.start();
    for (let v = 1; v <= 3; v++) await publish(v, 'a', v);
    await waitForVersion(subscriber, 3);
    // The consumer fails, so only a full resync can repair it; but the source now holds an older state.
    // Sent from the error listener, so the source is older before any periodic check can read it.
    consumer.failOnce(4);
    subscriber.once('error', () => void sink.reset({ version: 2, entries: [value('routes', 'a', 2, 2)] }));
    const stale = nextEvent<[number, number]>(subscriber, 'stale');
    await publish(4, 'a', 4);
    const [sourceVersion, applied] = await stale;
    assert.deepEqual([sourceVersion, applied], [2, 3]);
    assert.equal(subscriber.version, 3);
    assert.equal(consumer.get('routes', 'a')?.data, 3, 'the state it served is kept');
    // Once the source holds newer state again, the resync goes through.
    await sink.reset({ version: 5, entries: [value('routes', 'a', 5, 5)] });
    await waitForVersion(subscriber, 5);
    assert.deepEqual(consumer.resets, [0, 5]);
  });
}

function sortEntries(entries: FeedEntry[]): FeedEntry[] {
  return [...entries].sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
}

describe('FeedMirror', () => {
  it('holds the map, by topic and key', () => {
    const mirror = new FeedMirror();
    mirror.apply({ version: 1, topic: 'routes', key: 'a', data: { port: 1 } });
    mirror.apply({ version: 2, topic: 'keys', key: 'a', data: 'secret' });
    mirror.apply({ version: 3, topic: 'routes', key: 'b', data: { port: 2 } });
    mirror.apply({ version: 4, topic: 'routes', key: 'b', data: null });
    assert.equal(mirror.version, 4);
    assert.deepEqual(mirror.get('routes', 'a'), value('routes', 'a', 1, { port: 1 }));
    assert.equal(mirror.get('routes', 'b'), undefined);
    assert.deepEqual(mirror.entries('keys'), [value('keys', 'a', 2, 'secret')]);
    assert.equal(mirror.size, 2);
  });

  it('reports, on a reset, only the keys whose version changed, and removed keys as deletions', async () => {
    const told: FeedChange[] = [];
    const mirror = new FeedMirror({ onChange: (c) => told.push(c) });
    await mirror.reset({ version: 3, entries: [value('routes', 'same', 1, 's'), value('routes', 'edited', 2, 'old'), value('routes', 'gone', 3, 'g')] });
    told.length = 0;
    await mirror.reset({ version: 9, entries: [value('routes', 'same', 1, 's'), value('routes', 'edited', 8, 'new'), value('routes', 'added', 9, 'a')] });
    assert.deepEqual(told, [
      { version: 8, topic: 'routes', key: 'edited', data: 'new' },
      { version: 9, topic: 'routes', key: 'added', data: 'a' },
      { version: 9, topic: 'routes', key: 'gone', data: null },
    ]);
    assert.equal(mirror.version, 9);
  });

  it('keeps its previous state when a reset is refused while being prepared, and takes the next one', async () => {
    let refuse = true;
    const mirror = new FeedMirror({
      prepareReset: async () => {
        if (refuse) throw new Error('cannot build that state');
        return () => {};
      },
    });
    mirror.apply({ version: 1, topic: 'routes', key: 'a', data: 1 });
    await assert.rejects(mirror.reset({ version: 5, entries: [value('routes', 'b', 5, 2)] }), /cannot build that state/);
    assert.equal(mirror.version, 1);
    assert.deepEqual(mirror.entries(), [value('routes', 'a', 1, 1)]);
    refuse = false;
    await mirror.reset({ version: 5, entries: [value('routes', 'b', 5, 2)] });
    assert.deepEqual(mirror.entries(), [value('routes', 'b', 5, 2)]);
  });

  it('abandons a reset in slices when its subscriber stops, leaving the previous state in force', async (t) => {
    const feed = new MemoryFeed();
    t.after(() => feed.close());
    const entries = Array.from({ length: 50_000 }, (_, i) => value('routes', `k${i}`, i + 1, i));
    await feed.reset({ version: entries.length, entries });
    const mirror = new FeedMirror();
    const subscriber = new FeedSubscriber(feed, mirror, { checkIntervalMs: NO_CHECK_MS });
    const errors: unknown[] = [];
    subscriber.on('error', (err) => errors.push(err));
    const started = subscriber.start();
    // Stopped on the next turn of the event loop, while the snapshot is still being read or applied in slices.
    await new Promise((r) => setImmediate(r));
    await subscriber.stop();
    await started;
    assert.equal(subscriber.version, 0);
    assert.equal(mirror.version, 0);
    assert.equal(mirror.size, 0);
    assert.deepEqual(errors, [], 'stopping is not a consumer failure');
  });

  it('abandons a reset already under way at its next slice when its subscriber stops', async (t) => {
    const feed = new MemoryFeed();
    t.after(() => feed.close());
    await feed.reset({ version: 3, entries: [value('routes', 'a', 3, 1)] });
    let stopped: Promise<void> | undefined;
    const mirror = new FeedMirror({
      prepareReset: async (_differences, slicer) => {
        stopped = subscriber.stop();
        await slicer.yield(); // throws: the subscriber's signal is aborted
        return () => {};
      },
    });
    const subscriber = new FeedSubscriber(feed, mirror, { checkIntervalMs: NO_CHECK_MS });
    const errors: unknown[] = [];
    subscriber.on('error', (err) => errors.push(err));
    await subscriber.start();
    await stopped;
    assert.equal(mirror.version, 0);
    assert.equal(mirror.size, 0);
    assert.deepEqual(errors, []);
  });
});

describe('FeedSubscriber over MemoryFeed', () => {
  behavesAsAFeed(() => ({ maxLen }) => {
    const feed = new MemoryFeed({ maxLen });
    return { sink: feed, source: feed, close: () => feed.close() };
  });
});

describe('FeedSubscriber over RedisFeed', () => {
  let server: RedisServer;
  // One entry per stream node makes MAXLEN ~ trim exactly, so a tiny log is really trimmed.
  before(async () => {
    server = await startRedisServer(['--stream-node-max-entries', '1']);
  });
  after(() => server?.stop());

  behavesAsAFeed(() => ({ maxLen }) => {
    // Sink and source are separate clients, as the publisher and an edge are separate nodes.
    const prefix = `test:${randomUUID()}:`;
    const sink = new RedisFeed({ url: server.url, prefix, maxLen });
    const source = new RedisFeed({ url: server.url, prefix, maxLen });
    return {
      sink,
      source,
      close: async () => {
        await Promise.all([sink.close(), source.close()]);
      },
    };
  });
});

describe('RedisFeed while Redis is down', () => {
  let server: RedisServer;
  before(async () => {
    server = await startRedisServer();
  });
  after(() => server?.stop());

  it('fails calls within the command timeout instead of hanging, and works again once Redis is back', async (t) => {
    const feed = new RedisFeed({ url: server.url, prefix: `test:${randomUUID()}:`, commandTimeoutMs: 500, reconnectMaxDelayMs: 100 });
    t.after(() => feed.close());
    assert.equal(await feed.reset({ version: 3, entries: [] }), true);
    assert.equal(await feed.head(), 3);
    await server.stop();
    const started = Date.now();
    await assert.rejects(feed.head());
    await assert.rejects(feed.publish({ version: 4, topic: 'routes', key: 'a', data: 1 }));
    assert.ok(Date.now() - started < 3_000, 'each call gave up within its timeout');
    await server.restart();
    // The restarted server is empty: the sink says it has no state, so a publisher knows to re-seed it.
    await waitFor(async () => (await feed.head().catch(() => 'down')) === null);
    assert.equal(await feed.publish({ version: 4, topic: 'routes', key: 'a', data: 1 }), false);
  });

  it('tells a subscription that reconnected to catch up', async (t) => {
    const prefix = `test:${randomUUID()}:`;
    const pub = new RedisFeed({ url: server.url, prefix, reconnectMaxDelayMs: 100 });
    const source = new RedisFeed({ url: server.url, prefix, reconnectMaxDelayMs: 100 });
    t.after(() => Promise.all([pub.close(), source.close()]));
    let reconnects = 0;
    let woke!: () => void;
    const reconnected = new Promise<void>((resolve) => (woke = resolve));
    await source.subscribe({
      onChange: () => {},
      onReset: () => {},
      onReconnect: () => {
        reconnects++;
        woke();
      },
    });
    assert.equal(reconnects, 0, 'the first subscription is not a reconnect');
    await server.restart();
    await reconnected;
    // The subscription really is back: a reset published now reaches it.
    const reset = new Promise<number>((resolve) => void source.subscribe({ onChange: () => {}, onReset: resolve, onReconnect: () => {} }));
    await pub.reset({ version: 9, entries: [] });
    assert.equal(await reset, 9);
  });
});

/** Polls an async condition that has no event to wait on (a server coming back); fails after WAIT_MS. */
async function waitFor(condition: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
