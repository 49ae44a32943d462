// Rate-limit hit statistics in the worker: edges' rate_limit_hits records, read from the record stream (Redis when
// REDIS_URL is set, in-process otherwise), become hit_count, last_matched and UTC-day buckets in the store; unknown
// rules are ignored, buckets past the 7-day window are pruned, and a failed write is retried without loss.
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createLogger } from '../../src/shared/log.ts';
import type { RateLimitHitsRecord, RecordSink } from '../../src/shared/records/types.ts';
import { pruneRuleHitDays, utcDay } from '../../src/store/rate-limit-hits.ts';
import { HIT_DAYS, findRateLimitRule } from '../../src/store/rate-limit-rules.ts';
import { sumRuleHits, writeRuleHits } from '../../src/worker/rate-limit-hits.ts';
import { RecordWorker } from '../../src/worker/records.ts';
import { openTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { eventually } from '../helpers/eventually.ts';
import { TestRecords, type Records } from '../helpers/records.ts';

const logger = createLogger(process.env.EDGE_TEST_LOG_LEVEL ?? 'silent');
const DAY = 86_400_000;

function record(counts: Record<string, number>, at: Date, last: Record<string, Date> = {}, edge = 'edge-a'): RateLimitHitsRecord {
  return {
    kind: 'rate_limit_hits',
    edge,
    at: at.toISOString(),
    counts,
    last: Object.fromEntries(Object.keys(counts).map((uuid) => [uuid, (last[uuid] ?? at).toISOString()])),
  };
}

describe('sumRuleHits', () => {
  const a = '0b4f6a52-3c1d-4e8a-9f00-2b7c5d6e7f80';
  const b = '1b4f6a52-3c1d-4e8a-9f00-2b7c5d6e7f80';
  const now = new Date('2030-06-10T12:00:00Z');

  it('adds counts across records and edges, keeps the latest match, buckets by the UTC day of the flush', () => {
    const { totals, days } = sumRuleHits(
      [
        record({ [a]: 2, [b]: 1 }, new Date('2030-06-10T00:00:01Z'), { [a]: new Date('2030-06-10T00:00:00.500Z') }),
        record({ [a]: 3 }, new Date('2030-06-09T23:59:59Z'), {}, 'edge-b'),
        record({ [a]: 1 }, new Date('2030-06-10T11:00:00Z'), { [a]: new Date('2030-06-10T10:59:59Z') }),
      ],
      now,
    );
    assert.deepEqual(totals, [
      { uuid: a, hits: 6, last: new Date('2030-06-10T10:59:59Z') },
      { uuid: b, hits: 1, last: new Date('2030-06-10T00:00:01Z') },
    ]);
    assert.deepEqual(days, [
      { uuid: a, day: '2030-06-10', hits: 3 },
      { uuid: b, day: '2030-06-10', hits: 1 },
      { uuid: a, day: '2030-06-09', hits: 3 },
    ]);
  });

  it('counts a flush ahead of the clock today, and one older than the window only in the total', () => {
    const { totals, days } = sumRuleHits([record({ [a]: 4 }, new Date(now.getTime() + 3 * DAY)), record({ [b]: 5 }, new Date(now.getTime() - HIT_DAYS * DAY))], now);
    assert.deepEqual(days, [{ uuid: a, day: '2030-06-10', hits: 4 }]);
    assert.deepEqual(totals.map((t) => [t.uuid, t.hits]), [[a, 4], [b, 5]]);
  });
});

describe('the rate-limit hit rollup', () => {
  let testDb: TestDatabase;
  const transport = new TestRecords(logger);
  let records: Records;
  let rule1: { id: number; uuid: string };
  let rule2: { id: number; uuid: string };

  before(async () => {
    testDb = await openTestDatabase();
    const { db } = testDb;
    const account = await db.query<{ id: number }>("INSERT INTO accounts (kind, name, plan) VALUES ('personal', 'hits', 'business') RETURNING id");
    const user = await db.query<{ id: number }>('INSERT INTO users (email, personal_account_id) VALUES ($1, $2) RETURNING id', ['hits@example.test', account.rows[0].id]);
    const endpoint = await db.query<{ id: number }>(
      "INSERT INTO endpoints (user_id, account_id, subdomain, hostname) VALUES ($1, $2, 'hits', 'hits.edge.localhost') RETURNING id",
      [user.rows[0].id, account.rows[0].id],
    );
    const rule = async (name: string) =>
      (
        await db.query<{ id: number; uuid: string }>(
          "INSERT INTO rate_limit_rules (endpoint_id, user_id, name, requests_per_window, window_size_seconds, action) VALUES ($1, $2, $3, 10, 60, 'block') RETURNING id, uuid::text AS uuid",
          [endpoint.rows[0].id, user.rows[0].id, name],
        )
      ).rows[0];
    rule1 = await rule('one');
    rule2 = await rule('two');
  });
  after(async () => {
    await testDb?.close();
  });

  beforeEach(async () => {
    records = await transport.fresh();
    await testDb.db.query('UPDATE rate_limit_rules SET hit_count = 0, last_matched = NULL');
    await testDb.db.query('DELETE FROM rate_limit_hits_daily');
  });
  after(() => transport.close());

  async function stats(rule: { id: number }) {
    const { rows } = await testDb.db.query<{ hit_count: number; last_matched: Date | null; updated_at: Date }>(
      'SELECT hit_count, last_matched, updated_at FROM rate_limit_rules WHERE id = $1',
      [rule.id],
    );
    return rows[0];
  }

  /** The rule's hits_daily as the API reads it (the database's UTC today). */
  async function hitsDaily(rule: { uuid: string }): Promise<number[]> {
    return (await findRateLimitRule(testDb.db, { uuid: rule.uuid }))!.hits_daily;
  }

  async function flushed(sink: RecordSink): Promise<void> {
    await sink.flush();
  }

  it('writes hit_count, last_matched and today\'s and yesterday\'s buckets; an unknown rule is ignored', async () => {
    const now = new Date();
    const unknown = randomUUID();
    const before = await stats(rule1);
    records.append([record({ [rule1.uuid]: 3, [unknown]: 7 }, now, { [rule1.uuid]: new Date(now.getTime() - 1000) })]);
    records.append([record({ [rule1.uuid]: 2, [rule2.uuid]: 1 }, new Date(now.getTime() - DAY), {}, 'edge-b')]);
    await flushed(records);
    const worker = new RecordWorker(testDb.db, records, { rate_limit_hits: writeRuleHits }, { logger });
    // Two batches in memory; Redis's sink sends appends made in the same tick as one.
    assert.ok((await worker.drain()) >= 1);
    const one = await stats(rule1);
    assert.equal(Number(one.hit_count), 5);
    assert.equal(one.last_matched!.getTime(), now.getTime() - 1000);
    assert.equal(one.updated_at.getTime(), before.updated_at.getTime(), 'statistics are not a config change');
    assert.equal(Number((await stats(rule2)).hit_count), 1);
    assert.deepEqual(await hitsDaily(rule1), [0, 0, 0, 0, 0, 2, 3]);
    assert.deepEqual(await hitsDaily(rule2), [0, 0, 0, 0, 0, 1, 0]);
    assert.equal(await worker.drain(), 0, 'acknowledged: nothing comes back');
    const { rows } = await testDb.db.query('SELECT 1 FROM rate_limit_rules WHERE uuid = $1', [unknown]);
    assert.equal(rows.length, 0);
  });

  it('adds to what is there: last_matched never moves back, a day\'s bucket grows', async () => {
    const now = new Date();
    const worker = new RecordWorker(testDb.db, records, { rate_limit_hits: writeRuleHits }, { logger });
    records.append([record({ [rule1.uuid]: 4 }, now)]);
    await flushed(records);
    await worker.drain();
    records.append([record({ [rule1.uuid]: 1 }, now, { [rule1.uuid]: new Date(now.getTime() - 60_000) })]);
    await flushed(records);
    await worker.drain();
    const one = await stats(rule1);
    assert.equal(Number(one.hit_count), 5);
    assert.equal(one.last_matched!.getTime(), now.getTime());
    assert.deepEqual(await hitsDaily(rule1), [0, 0, 0, 0, 0, 0, 5]);
  });

  it('keeps 7 days of buckets: older ones are pruned, and never shown', async () => {
    const now = new Date();
    for (const ago of [0, 6, 7, 30]) {
      await testDb.db.query('INSERT INTO rate_limit_hits_daily (rule_id, day, hits) VALUES ($1, $2::date, $3)', [rule1.id, utcDay(now, ago), 100 + ago]);
    }
    assert.deepEqual(await hitsDaily(rule1), [106, 0, 0, 0, 0, 0, 100], 'what the API shows: 7 days, oldest first');
    assert.equal(await pruneRuleHitDays(testDb.db, now), 2);
    const { rows } = await testDb.db.query<{ day: string }>("SELECT to_char(day, 'YYYY-MM-DD') AS day FROM rate_limit_hits_daily ORDER BY day");
    assert.deepEqual(rows.map((r) => r.day), [utcDay(now, 6), utcDay(now, 0)]);
    assert.deepEqual(await hitsDaily(rule2), [0, 0, 0, 0, 0, 0, 0], 'a rule without buckets');
  });

  it('a failed write is neither lost nor acknowledged: the running worker writes it once the store answers', async () => {
    let failures = 1;
    const worker = new RecordWorker(
      testDb.db,
      records,
      {
        rate_limit_hits: async (tx, list) => {
          await writeRuleHits(tx, list);
          // Written inside the transaction, then a failure: the transaction rolls back and nothing is acknowledged.
          if (failures-- > 0) throw new Error('store went away');
        },
      },
      { logger, blockMs: 100 },
    );
    worker.start();
    try {
      records.append([record({ [rule2.uuid]: 9 }, new Date())]);
      await flushed(records);
      await eventually(async () => (Number((await stats(rule2)).hit_count) > 0 ? true : undefined));
      assert.equal(failures, -1, 'the first attempt failed');
      assert.equal(Number((await stats(rule2)).hit_count), 9, 'written once');
    } finally {
      await worker.stop();
    }
    assert.equal(await worker.drain(), 0);
  });

  it('stopping writes what is already in the stream', async () => {
    const worker = new RecordWorker(testDb.db, records, { rate_limit_hits: writeRuleHits }, { logger, blockMs: 5_000 });
    worker.start();
    records.append([record({ [rule1.uuid]: 2 }, new Date())]);
    await flushed(records);
    await worker.stop();
    assert.equal(Number((await stats(rule1)).hit_count), 2);
  });
});
