// The traffic-record stream over both transports: the same contract runs against MemoryRecords and RedisRecords on a
// private redis-server (append, read, acknowledge, redelivery, caps, waking and stopping a waiting read); then what
// only Redis does: a dead worker's batches claimed by another, a sink riding out a Redis outage with a bounded buffer.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { MemoryRecords } from '../../../src/shared/records/memory.ts';
import { RedisRecords } from '../../../src/shared/records/redis.ts';
import { RECORD_LIMITS, parseBatch, parseRecord, type RecordBatch, type RecordSink, type RecordSource, type TrafficRecord, type RateLimitHitsRecord } from '../../../src/shared/records/types.ts';
import { eventually } from '../../helpers/eventually.ts';
import { startRedisServer, type RedisServer } from '../../helpers/redis-server.ts';

const RULE = '0b4f6a52-3c1d-4e8a-9f00-2b7c5d6e7f80';

function hits(n: number, edge = 'edge-a'): TrafficRecord {
  return { kind: 'rate_limit_hits', edge, at: new Date().toISOString(), counts: { [RULE]: n }, last: { [RULE]: new Date().toISOString() } };
}

function countsOf(batches: RecordBatch[]): number[] {
  return batches.flatMap((b) => b.records.map((r) => (r as RateLimitHitsRecord).counts[RULE]));
}

/**
 * Reads until `n` records arrived (each read acknowledged), or fails after the helper's deadline. A read that fails
 * (Redis still reconnecting after an outage) is tried again, as the worker's loop would.
 */
async function readRecords(source: RecordSource, n: number): Promise<number[]> {
  const seen: number[] = [];
  await eventually(async () => {
    try {
      const batches = await source.read({ count: 50, blockMs: 50 });
      seen.push(...countsOf(batches));
      await source.ack(batches.map((b) => b.id));
    } catch {
      return undefined;
    }
    return seen.length >= n ? true : undefined;
  });
  return seen;
}

interface Transport {
  sink: RecordSink;
  source: RecordSource;
  /** Batches the transport holds (stream length), for the cap test. */
  held(): Promise<number>;
  close(): Promise<void>;
}

type Open = (options: { maxLen?: number }) => Transport;

function contract(name: string, open: () => Open): void {
  describe(`record stream contract: ${name}`, () => {
    it('delivers appended records in order, once acknowledged they are gone', async () => {
      const t = open()({});
      try {
        t.sink.append([hits(1)]);
        t.sink.append([hits(2), hits(3)]);
        await t.sink.flush();
        const batches = await t.source.read({ count: 10, blockMs: 1000 });
        assert.deepEqual(countsOf(batches), [1, 2, 3]);
        assert.equal(batches[0].records[0].kind, 'rate_limit_hits');
        await t.source.ack(batches.map((b) => b.id));
        assert.deepEqual(await t.source.read({ count: 10, blockMs: 0 }), []);
        assert.equal(await t.held(), 0, 'acknowledged batches leave the stream');
        assert.equal(t.sink.stats().sent, 3);
      } finally {
        await t.close();
      }
    });

    it('delivers an unacknowledged batch again at the next read, and newer ones after it', async () => {
      const t = open()({});
      try {
        t.sink.append([hits(1)]);
        await t.sink.flush();
        const first = await t.source.read({ count: 10, blockMs: 1000 });
        assert.deepEqual(countsOf(first), [1]);
        t.sink.append([hits(2)]);
        await t.sink.flush();
        // The writer failed (no ack): the same batch comes back, under the same id.
        const again = await t.source.read({ count: 10, blockMs: 1000 });
        assert.deepEqual(countsOf(again), [1]);
        assert.equal(again[0].id, first[0].id);
        await t.source.ack([first[0].id]);
        assert.deepEqual(await readRecords(t.source, 1), [2]);
      } finally {
        await t.close();
      }
    });

    it('splits an append larger than a batch, and reads at most `count` batches', async () => {
      const t = open()({});
      try {
        const n = RECORD_LIMITS.recordsPerBatch * 2 + 1;
        t.sink.append(Array.from({ length: n }, (_, i) => hits(i + 1)));
        await t.sink.flush();
        const one = await t.source.read({ count: 1, blockMs: 1000 });
        assert.equal(one.length, 1);
        assert.equal(one[0].records.length, RECORD_LIMITS.recordsPerBatch);
        await t.source.ack(one.map((b) => b.id));
        const rest = await readRecords(t.source, n - RECORD_LIMITS.recordsPerBatch);
        assert.deepEqual([...countsOf(one), ...rest], Array.from({ length: n }, (_, i) => i + 1));
      } finally {
        await t.close();
      }
    });

    it('keeps at most about maxLen batches while nobody reads: the oldest go', async () => {
      const t = open()({ maxLen: 100 });
      try {
        for (let i = 1; i <= 400; i++) {
          t.sink.append([hits(i)]);
          await t.sink.flush(); // one batch each: appends made together would share one
        }
        const held = await t.held();
        assert.ok(held >= 100 && held <= 120, `held ${held} batches`);
        const seen = await readRecords(t.source, held);
        assert.equal(seen[seen.length - 1], 400, 'the newest survive');
        assert.ok(seen[0] > 400 - 120, `the oldest went (first left: ${seen[0]})`);
      } finally {
        await t.close();
      }
    });

    it('wakes a waiting read when a batch arrives, and an aborted read returns at once', async () => {
      const t = open()({});
      try {
        const waiting = t.source.read({ count: 10, blockMs: 10_000 });
        setImmediate(() => t.sink.append([hits(7)]));
        assert.deepEqual(countsOf(await waiting), [7]);
        await t.source.ack((await t.source.read({ count: 10, blockMs: 0 })).map((b) => b.id));
        const stop = new AbortController();
        const started = Date.now();
        const cut = t.source.read({ count: 10, blockMs: 30_000, signal: stop.signal });
        setImmediate(() => stop.abort());
        assert.deepEqual(await cut, []);
        assert.ok(Date.now() - started < 10_000, 'the read did not wait out its block time');
        // The source still works after an aborted read.
        t.sink.append([hits(8)]);
        assert.deepEqual(await readRecords(t.source, 1), [8]);
      } finally {
        await t.close();
      }
    });
  });
}

describe('record parsing', () => {
  it('keeps valid hits, drops entries that are not uuid → positive integer, refuses unknown kinds and bad shapes', () => {
    const at = '2030-01-01T00:00:00.000Z';
    const parsed = parseRecord({
      kind: 'rate_limit_hits', edge: 'e', at,
      counts: { [RULE]: 3, 'not-a-uuid': 1, '1b4f6a52-3c1d-4e8a-9f00-2b7c5d6e7f80': -1, '2b4f6a52-3c1d-4e8a-9f00-2b7c5d6e7f80': 1.5, '3b4f6a52-3c1d-4e8a-9f00-2b7c5d6e7f80': '4' },
      last: { [RULE]: 'never' },
    });
    assert.deepEqual(parsed, { kind: 'rate_limit_hits', edge: 'e', at, counts: { [RULE]: 3 }, last: { [RULE]: at } });
    for (const bad of [null, 'x', [], { kind: 'captured_request', edge: 'e', at }, { kind: 'rate_limit_hits', edge: 'e', at: 'soon', counts: {}, last: {} },
      { kind: 'rate_limit_hits', edge: 'e', at, counts: [], last: {} }, { kind: 'rate_limit_hits', edge: 7, at, counts: {}, last: {} }]) {
      assert.equal(parseRecord(bad), null, JSON.stringify(bad));
    }
    const many = Object.fromEntries(Array.from({ length: RECORD_LIMITS.rulesPerRecord + 1 }, (_, i) => [`${String(i).padStart(8, '0')}-3c1d-4e8a-9f00-2b7c5d6e7f80`, 1]));
    assert.equal(parseRecord({ kind: 'rate_limit_hits', edge: 'e', at, counts: many, last: {} }), null);
  });

  it('counts what a batch could not parse instead of failing it', () => {
    assert.deepEqual(parseBatch('1-0', 'not json'), { id: '1-0', records: [], skipped: 1 });
    assert.deepEqual(parseBatch('1-0', null), { id: '1-0', records: [], skipped: 1 });
    const batch = parseBatch('1-0', JSON.stringify([hits(1), { kind: 'nope' }]));
    assert.equal(batch.records.length, 1);
    assert.equal(batch.skipped, 1);
  });
});

contract('memory', () => (options) => {
  const records = new MemoryRecords(options);
  return { sink: records, source: records, held: async () => records.stats().buffered, close: () => records.close() };
});

describe('redis', () => {
  let server: RedisServer;
  let admin: Redis;
  before(async () => {
    // One entry per stream node, so the approximate MAXLEN trims close to the cap.
    server = await startRedisServer(['--stream-node-max-entries', '1']);
    admin = new Redis(server.url);
  });
  after(async () => {
    admin?.disconnect();
    await server?.stop();
  });

  const openRedis = (options: { prefix: string; consumer?: string; maxLen?: number; maxBuffered?: number; reclaimAfterMs?: number; commandTimeoutMs?: number }) =>
    new RedisRecords({ url: server.url, consumer: 'node-1', commandTimeoutMs: 2_000, ...options });

  contract('redis', () => (options) => {
    const prefix = `test:${randomUUID()}:`;
    const records = openRedis({ prefix, ...options });
    return {
      sink: records,
      source: records,
      held: () => admin.xlen(records.key),
      close: () => records.close(),
    };
  });

  it('hands a dead worker\'s unacknowledged batches to another worker after the reclaim timeout', async () => {
    const prefix = `test:${randomUUID()}:`;
    const edge = openRedis({ prefix, consumer: 'edge' });
    const dead = openRedis({ prefix, consumer: 'worker-dead' });
    const alive = openRedis({ prefix, consumer: 'worker-alive', reclaimAfterMs: 200 });
    try {
      edge.append([hits(1)]);
      await edge.flush();
      assert.deepEqual(countsOf(await dead.read({ count: 10, blockMs: 1000 })), [1]);
      await dead.close(); // crashed before writing: nothing acknowledged
      edge.append([hits(2)]);
      await edge.flush();
      const seen = await readRecords(alive, 2);
      assert.deepEqual(seen.sort(), [1, 2]);
      assert.equal(await admin.xlen(edge.key), 0);
    } finally {
      await Promise.all([edge.close(), alive.close()]);
    }
  });

  it('a worker restarted under the same node id takes up its own pending batches at once', async () => {
    const prefix = `test:${randomUUID()}:`;
    const edge = openRedis({ prefix, consumer: 'edge' });
    const first = openRedis({ prefix, consumer: 'worker-1', reclaimAfterMs: 600_000 });
    edge.append([hits(5)]);
    await edge.flush();
    assert.deepEqual(countsOf(await first.read({ count: 10, blockMs: 1000 })), [5]);
    await first.close();
    const second = openRedis({ prefix, consumer: 'worker-1', reclaimAfterMs: 600_000 });
    try {
      assert.deepEqual(countsOf(await second.read({ count: 10, blockMs: 0 })), [5]);
    } finally {
      await Promise.all([edge.close(), second.close()]);
    }
  });

  it('skips an entry that is not a batch of records instead of stalling on it', async () => {
    const prefix = `test:${randomUUID()}:`;
    const records = openRedis({ prefix });
    try {
      await admin.xadd(records.key, '*', 'records', '{broken');
      records.append([hits(9)]);
      await records.flush();
      const batches = await records.read({ count: 10, blockMs: 1000 });
      assert.deepEqual(batches.map((b) => [b.records.length, b.skipped]), [[0, 1], [1, 0]]);
    } finally {
      await records.close();
    }
  });

  describe('an outage', () => {
    let down: RedisServer;
    before(async () => {
      down = await startRedisServer();
    });
    after(async () => {
      await down?.stop();
    });

    it('buffers on the edge without blocking, drops the oldest past the bound, and sends the rest once Redis is back', async () => {
      const prefix = `test:${randomUUID()}:`;
      const sink = new RedisRecords({ url: down.url, prefix, consumer: 'edge', maxBuffered: 50, commandTimeoutMs: 300 });
      const worker = new RedisRecords({ url: down.url, prefix, consumer: 'worker', commandTimeoutMs: 1_000 });
      try {
        sink.append([hits(1)]);
        await sink.flush();
        assert.deepEqual(await readRecords(worker, 1), [1]);
        await down.stop();
        const started = Date.now();
        for (let i = 2; i <= 101; i++) sink.append([hits(i)]);
        assert.ok(Date.now() - started < 200, 'appending never waits on Redis');
        await sink.flush(500);
        assert.deepEqual(sink.stats(), { buffered: 50, dropped: 50, sent: 1 });
        await down.restart(); // empty: the stream and its group are gone too
        const seen = await readRecords(worker, 50);
        assert.deepEqual(seen, Array.from({ length: 50 }, (_, i) => 52 + i), 'the newest 50, in order');
        assert.equal(sink.stats().buffered, 0);
      } finally {
        await Promise.all([sink.close(), worker.close()]);
      }
    });
  });
});
