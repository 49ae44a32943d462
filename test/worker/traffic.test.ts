// Traffic storage in the worker: captured exchanges become traffic_logs rows and usage becomes daily and per-minute
// counters, read from the record stream (Redis when REDIS_URL is set, in-process otherwise); a batch delivered twice
// (written, then not acknowledged) is stored once, rate-limit hits included; retention deletes by plan.
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createLogger } from '../../src/shared/log.ts';
import {
  TRAFFIC_LATENCY_BOUNDS_MS,
  parseRecord,
  type RateLimitHitsRecord,
  type RecordSink,
  type RecordSource,
  type TrafficExchangeRecord,
  type TrafficUsageEntry,
  type TrafficUsageRecord,
} from '../../src/shared/records/types.ts';
import { endpointUsage, pruneTraffic } from '../../src/store/traffic.ts';
import { writeRuleHits } from '../../src/worker/rate-limit-hits.ts';
import { RecordWorker, type RecordHandlers } from '../../src/worker/records.ts';
import { retentionByPlan, writeTrafficExchanges, writeTrafficUsage } from '../../src/worker/traffic.ts';
import { loadConfig } from '../../src/shared/config.ts';
import { openTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { TestRecords, type Records } from '../helpers/records.ts';

const logger = createLogger(process.env.EDGE_TEST_LOG_LEVEL ?? 'silent');
const DAY = 86_400_000;
const HANDLERS: RecordHandlers = { traffic_exchange: writeTrafficExchanges, traffic_usage: writeTrafficUsage, rate_limit_hits: writeRuleHits };

interface Fixture {
  account: number;
  endpoint: { id: number; uuid: string };
}

function exchange(f: Fixture, over: Partial<TrafficExchangeRecord> = {}): TrafficExchangeRecord {
  return {
    kind: 'traffic_exchange', edge: 'edge-a', at: new Date().toISOString(), region: 'eu', account: f.account, endpoint: f.endpoint.uuid,
    hostname: 'shop.edge.localhost', method: 'GET', host: 'shop.edge.localhost', path: '/a', query: 'x=1', status: 200,
    duration_ms: 12.5, bytes_in: 0, bytes_out: 321, client_ip: '192.0.2.7', country: 'DE', user_agent: 'curl/8', secure: true,
    rule: null, edge_error: null, auth_outcome: null, client_id: null, completed: true, level: 'metadata', ...over,
  };
}

function usage(f: Fixture, minute: Date, over: Partial<TrafficUsageEntry> = {}): TrafficUsageRecord {
  const latency = new Array<number>(TRAFFIC_LATENCY_BOUNDS_MS.length + 1).fill(0);
  latency[3] = 2;
  latency[TRAFFIC_LATENCY_BOUNDS_MS.length] = 1;
  return {
    kind: 'traffic_usage', edge: 'edge-a', at: new Date().toISOString(),
    usage: [{
      endpoint: f.endpoint.uuid, account: f.account, minute: minute.toISOString(), requests: 3, errors_4xx: 1, errors_5xx: 1, edge_errors: 1,
      aborted: 0, bytes_in: 10, bytes_out: 100, duration_sum_ms: 40_020, duration_max_ms: 40_000, latency, ...over,
    }],
  };
}

/** A source whose first `n` acknowledgements fail: what a worker dying between its commit and its ack looks like. */
function failingAcks(source: RecordSink & RecordSource, n: number): RecordSource {
  let left = n;
  return {
    read: (o) => source.read(o),
    ack: async (ids) => {
      if (left-- > 0) throw new Error('worker died before acknowledging');
      await source.ack(ids);
    },
    close: () => source.close(),
  };
}

describe('traffic storage in the worker', () => {
  let testDb: TestDatabase;
  const transport = new TestRecords(logger);
  let records: Records;
  let free: Fixture;
  let business: Fixture;

  before(async () => {
    testDb = await openTestDatabase();
    const make = async (plan: string, name: string): Promise<Fixture> => {
      const { db } = testDb;
      const account = await db.query<{ id: number }>("INSERT INTO accounts (kind, name, plan) VALUES ('personal', $1, $2) RETURNING id", [name, plan]);
      const user = await db.query<{ id: number }>('INSERT INTO users (email, personal_account_id) VALUES ($1, $2) RETURNING id', [`${name}@example.test`, account.rows[0].id]);
      const endpoint = await db.query<{ id: number; uuid: string }>(
        'INSERT INTO endpoints (user_id, account_id, subdomain, hostname) VALUES ($1, $2, $3, $4) RETURNING id, uuid::text AS uuid',
        [user.rows[0].id, account.rows[0].id, name, `${name}.edge.localhost`],
      );
      return { account: Number(account.rows[0].id), endpoint: { id: Number(endpoint.rows[0].id), uuid: endpoint.rows[0].uuid } };
    };
    free = await make('free', 'shop');
    business = await make('business', 'bigco');
  });
  after(async () => {
    await transport.close();
    await testDb?.close();
  });

  beforeEach(async () => {
    records = await transport.fresh();
    for (const table of ['traffic_logs', 'endpoint_usage_daily', 'endpoint_traffic_minutely', 'applied_record_batches']) await testDb.db.query(`DELETE FROM ${table}`);
  });

  const count = async (sql: string, params: unknown[] = []) => Number((await testDb.db.query<{ n: string }>(sql, params)).rows[0].n);

  it('writes captured exchanges as rows, metadata without headers or bodies, full with them', async () => {
    const body = Buffer.from('{"hello":"world"}');
    records.append([
      exchange(free, { status: 502, edge_error: 'no_agent', path: '/gone' }),
      exchange(free, {
        level: 'full', method: 'POST', request_headers: { 'content-type': 'application/json', authorization: '[redacted]' },
        response_headers: { 'content-type': 'text/plain' }, request_body: body.toString('base64'), response_body: Buffer.from('ok').toString('base64'),
        request_body_truncated: false, response_body_truncated: true, auth_outcome: 'authenticated', client_id: '42',
      }),
    ]);
    await records.flush();
    const worker = new RecordWorker(testDb.db, records, HANDLERS, { logger });
    assert.ok((await worker.drain()) >= 1);
    const { rows } = await testDb.db.query<Record<string, unknown>>(
      'SELECT * FROM traffic_logs WHERE account_id = $1 ORDER BY id', [free.account],
    );
    assert.equal(rows.length, 2);
    const [meta, full] = rows;
    assert.equal(meta.status_code, 502);
    assert.equal(meta.edge_error, 'no_agent');
    assert.equal(meta.capture_level, 'metadata');
    assert.equal(meta.request_headers, null);
    assert.equal(meta.request_body, null);
    assert.equal(Number(meta.endpoint_id), free.endpoint.id);
    assert.equal(meta.endpoint_uuid, free.endpoint.uuid);
    assert.equal(meta.endpoint_name, 'shop');
    assert.equal(meta.source_ip, '192.0.2.7');
    assert.equal(meta.country, 'DE');
    assert.equal(meta.tls, true);
    assert.equal(meta.edge_node, 'edge-a');
    assert.equal(meta.region, 'eu');
    assert.equal(Number(meta.bytes_out), 321);
    assert.equal(full.capture_level, 'full');
    assert.deepEqual(full.request_headers, { 'content-type': 'application/json', authorization: '[redacted]' });
    assert.deepEqual(Buffer.from(full.request_body as Uint8Array), body);
    assert.deepEqual(Buffer.from(full.response_body as Uint8Array).toString(), 'ok');
    assert.equal(full.response_body_truncated, true);
    assert.equal(full.auth_outcome, 'authenticated');
    assert.equal(full.rbac_client_id, '42');
  });

  it('a batch delivered twice (written, not acknowledged) is written once: rows, usage and rate-limit hits', async () => {
    const rule = (
      await testDb.db.query<{ id: number; uuid: string }>(
        "INSERT INTO rate_limit_rules (endpoint_id, user_id, name, requests_per_window, window_size_seconds, action) SELECT $1, user_id, 'r', 10, 60, 'block' FROM endpoints WHERE id = $1 RETURNING id, uuid::text AS uuid",
        [business.endpoint.id],
      )
    ).rows[0];
    const hits: RateLimitHitsRecord = { kind: 'rate_limit_hits', edge: 'edge-a', at: new Date().toISOString(), counts: { [rule.uuid]: 4 }, last: { [rule.uuid]: new Date().toISOString() } };
    const minute = new Date(Math.floor(Date.now() / 60_000) * 60_000);
    records.append([exchange(business), exchange(business, { path: '/b' }), usage(business, minute), hits]);
    await records.flush();
    const worker = new RecordWorker(testDb.db, failingAcks(records, 1), HANDLERS, { logger });
    await assert.rejects(worker.drain(), /before acknowledging/);
    assert.equal(await count('SELECT count(*) AS n FROM traffic_logs WHERE account_id = $1', [business.account]), 2, 'written, then not acknowledged');
    assert.ok((await worker.drain()) >= 1, 'the unacknowledged batch is delivered again');
    assert.equal(await worker.drain(), 0);
    assert.equal(await count('SELECT count(*) AS n FROM traffic_logs WHERE account_id = $1', [business.account]), 2, 'no row written twice');
    const [day] = await endpointUsage(testDb.db, business.endpoint.uuid);
    assert.equal(day.requests, 3, 'usage added once');
    assert.equal(await count('SELECT hit_count AS n FROM rate_limit_rules WHERE id = $1', [rule.id]), 4, 'hits added once');
    await testDb.db.query('DELETE FROM rate_limit_rules WHERE id = $1', [rule.id]);
  });

  it('adds usage across records and edges into the day and the minute, histogram bucket by bucket', async () => {
    const minute = new Date(Math.floor(Date.now() / 60_000) * 60_000 - 120_000);
    const other = new Date(minute.getTime() + 60_000);
    records.append([usage(free, minute), { ...usage(free, minute), edge: 'edge-b' }]);
    records.append([usage(free, other, { requests: 5, errors_4xx: 0, errors_5xx: 0, bytes_out: 1 })]);
    await records.flush();
    const worker = new RecordWorker(testDb.db, records, HANDLERS, { logger });
    await worker.drain();
    const { rows } = await testDb.db.query<{ minute: Date; requests: string; errors_4xx: string; errors_5xx: string; edge_errors: string; latency_buckets: (string | number)[]; duration_max_ms: number; duration_sum_ms: number }>(
      'SELECT * FROM endpoint_traffic_minutely WHERE endpoint_uuid = $1 ORDER BY minute', [free.endpoint.uuid],
    );
    assert.deepEqual(rows.map((r) => [r.minute.getTime(), Number(r.requests)]), [[minute.getTime(), 6], [other.getTime(), 5]]);
    assert.equal(Number(rows[0].errors_5xx), 2);
    assert.equal(Number(rows[0].edge_errors), 2);
    assert.equal(rows[0].duration_max_ms, 40_000);
    assert.equal(rows[0].duration_sum_ms, 80_040);
    const buckets = rows[0].latency_buckets.map(Number);
    assert.equal(buckets.length, TRAFFIC_LATENCY_BOUNDS_MS.length + 1);
    assert.equal(buckets[3], 4);
    assert.equal(buckets[TRAFFIC_LATENCY_BOUNDS_MS.length], 2);
    const days = await endpointUsage(testDb.db, free.endpoint.uuid);
    const expected = [...new Set([minute, other].map((m) => m.toISOString().slice(0, 10)))];
    assert.deepEqual(days.map((d) => d.day), expected);
    assert.equal(days.reduce((n, d) => n + d.requests, 0), 11);
    assert.equal(days.reduce((n, d) => n + d.bytes_out, 0), 201);
    assert.equal(days.reduce((n, d) => n + d.errors_4xx, 0), 2);
  });

  it('keeps rows of a deleted endpoint (uuid and name), and skips records of an account that no longer exists', async () => {
    const { db } = testDb;
    const account = (await db.query<{ id: number }>("INSERT INTO accounts (kind, name, plan) VALUES ('personal', 'temp', 'pro') RETURNING id")).rows[0].id;
    const user = (await db.query<{ id: number }>('INSERT INTO users (email, personal_account_id) VALUES ($1, $2) RETURNING id', ['temp@example.test', account])).rows[0].id;
    const ep = (await db.query<{ id: number; uuid: string }>("INSERT INTO endpoints (user_id, account_id, subdomain, hostname) VALUES ($1, $2, 'temp', 'temp.edge.localhost') RETURNING id, uuid::text AS uuid", [user, account])).rows[0];
    const f: Fixture = { account: Number(account), endpoint: { id: Number(ep.id), uuid: ep.uuid } };
    const worker = new RecordWorker(db, records, HANDLERS, { logger });
    records.append([exchange(f, { hostname: 'temp.edge.localhost' })]);
    await records.flush();
    await worker.drain();
    await db.query('DELETE FROM endpoints WHERE id = $1', [ep.id]);
    records.append([exchange(f, { hostname: 'temp.edge.localhost', path: '/after' })]);
    await records.flush();
    await worker.drain();
    const { rows } = await db.query<{ endpoint_id: number | null; endpoint_uuid: string; endpoint_name: string }>('SELECT endpoint_id, endpoint_uuid, endpoint_name FROM traffic_logs WHERE account_id = $1 ORDER BY id', [account]);
    assert.deepEqual(rows.map((r) => [r.endpoint_id, r.endpoint_uuid, r.endpoint_name]), [[null, ep.uuid, 'temp'], [null, ep.uuid, 'temp']]);

    await db.query('DELETE FROM traffic_logs WHERE account_id = $1', [account]);
    await db.query('DELETE FROM users WHERE id = $1', [user]);
    await db.query('DELETE FROM accounts WHERE id = $1', [account]);
    records.append([exchange(f), usage(f, new Date())]);
    await records.flush();
    assert.ok((await worker.drain()) >= 1, 'read and acknowledged, not retried forever');
    assert.equal(await count('SELECT count(*) AS n FROM traffic_logs WHERE account_id = $1', [account]), 0);
    assert.equal(await worker.drain(), 0);
  });

  it('refuses malformed records before they reach SQL', () => {
    const ok = exchange(free);
    assert.ok(parseRecord(JSON.parse(JSON.stringify(ok))));
    for (const bad of [
      { ...ok, endpoint: 'not-a-uuid' }, { ...ok, account: 0 }, { ...ok, status: 1000 }, { ...ok, duration_ms: -1 }, { ...ok, bytes_in: 1.5 },
      { ...ok, level: 'everything' }, { ...ok, path: 'x'.repeat(9000) }, { ...ok, method: '' },
      { ...ok, level: 'full', request_body: 'not base64!' }, { ...ok, level: 'full', request_body: 'A'.repeat(20_000) },
      { ...ok, level: 'full', request_headers: { a: 1 } }, { ...ok, country: 42 },
    ]) {
      assert.equal(parseRecord(bad), null, JSON.stringify(bad).slice(0, 120));
    }
    const u = usage(free, new Date());
    assert.equal((parseRecord({ ...u, usage: [{ ...u.usage[0], latency: [1] }, u.usage[0]] }) as TrafficUsageRecord).usage.length, 1, 'a bad entry is dropped alone');
    assert.equal(parseRecord({ ...u, usage: 'x' }), null);
  });

  it('deletes traffic past each plan\'s retention, in batches; daily usage stays longer', async () => {
    const { db } = testDb;
    const now = new Date();
    const plans = retentionByPlan(loadConfig({}).plans);
    assert.deepEqual(plans, { free: 1, pro: 7, business: 30 });
    const insert = async (f: Fixture, ageDays: number, n: number) => {
      for (let i = 0; i < n; i++) {
        await db.query(
          `INSERT INTO traffic_logs (record_key, created_at, account_id, endpoint_uuid, method, host, path, status_code, duration_ms, capture_level)
           VALUES ($1, $2, $3, $4, 'GET', 'h', '/', 200, 1, 'metadata')`,
          [randomUUID(), new Date(now.getTime() - ageDays * DAY - 60_000).toISOString(), f.account, f.endpoint.uuid],
        );
      }
    };
    await insert(free, 0, 2);
    await insert(free, 2, 5);
    await insert(business, 2, 3);
    await insert(business, 31, 4);
    await db.query(
      `INSERT INTO endpoint_traffic_minutely (endpoint_uuid, minute, account_id, latency_buckets) VALUES ($1, $2, $3, '{}'), ($1, $4, $3, '{}')`,
      [free.endpoint.uuid, new Date(now.getTime() - 2 * DAY).toISOString(), free.account, new Date(now.getTime() - 60_000).toISOString()],
    );
    await db.query(
      `INSERT INTO endpoint_usage_daily (endpoint_uuid, day, account_id, requests) VALUES ($1, $2::date, $3, 1), ($1, $4::date, $3, 1)`,
      [free.endpoint.uuid, new Date(now.getTime() - 30 * DAY).toISOString().slice(0, 10), free.account, new Date(now.getTime() - 500 * DAY).toISOString().slice(0, 10)],
    );
    await db.query("INSERT INTO applied_record_batches (record_key, applied_at) VALUES ('old', $1), ('new', now())", [new Date(now.getTime() - 2 * DAY).toISOString()]);

    const removed = await pruneTraffic(db, plans, { now, batch: 2 });
    assert.deepEqual(removed, { logs: 9, minutes: 1, days: 1, batches: 1 });
    assert.equal(await count('SELECT count(*) AS n FROM traffic_logs WHERE account_id = $1', [free.account]), 2);
    assert.equal(await count('SELECT count(*) AS n FROM traffic_logs WHERE account_id = $1', [business.account]), 3);
    assert.equal(await count('SELECT count(*) AS n FROM endpoint_usage_daily'), 1);
    assert.equal(await count("SELECT count(*) AS n FROM applied_record_batches WHERE record_key = 'new'"), 1);
    assert.deepEqual(await pruneTraffic(db, plans, { now }), { logs: 0, minutes: 0, days: 0, batches: 0 });
  });

  it('records the store would refuse (NUL, lone surrogates, times out of its range) are cleaned or skipped, never block the stream', async () => {
    const minute = new Date(Math.floor(Date.now() / 60_000) * 60_000);
    // Sent as raw JSON, as anything with access to Redis could: the edge itself never builds these.
    records.append([
      exchange(free, { path: '/nul\u0000here', user_agent: 'ua\u0000' }),
      exchange(free, { path: '/headers', level: 'full', request_headers: { 'x-odd\u0000': 'v\ud800', 'x-ok': 'fine' }, response_headers: { 'x-low': '\udc00' } }),
      exchange(free, { path: '/year-zero', at: '0000-01-01T00:00:00Z' }),
      exchange(free, { path: '/negative-year', at: '-001000-01-01T00:00:00Z' }),
      usage(free, new Date(Date.UTC(10_000, 0, 1))),
      usage(free, minute, { duration_sum_ms: 1e308 }),
      exchange(free, { path: '/after' }),
    ]);
    await records.flush();
    const worker = new RecordWorker(testDb.db, records, HANDLERS, { logger });
    assert.ok((await worker.drain()) >= 1);
    assert.equal(await worker.drain(), 0, 'nothing left pending');
    const { rows } = await testDb.db.query<{ path: string; user_agent: string; request_headers: Record<string, string> | null; response_headers: Record<string, string> | null }>(
      'SELECT path, user_agent, request_headers, response_headers FROM traffic_logs WHERE account_id = $1 ORDER BY id', [free.account],
    );
    assert.deepEqual(rows.map((r) => r.path), ['/nul\ufffdhere', '/headers', '/after']);
    assert.equal(rows[0].user_agent, 'ua\ufffd');
    assert.deepEqual(rows[1].request_headers, { 'x-odd\ufffd': 'v\ufffd', 'x-ok': 'fine' });
    assert.deepEqual(rows[1].response_headers, { 'x-low': '\ufffd' });
    assert.equal(await count('SELECT count(*) AS n FROM endpoint_traffic_minutely WHERE endpoint_uuid = $1', [free.endpoint.uuid]), 0, 'the year 10000 and the unbounded sum were skipped');
  });

  it('a batch the store keeps refusing is dead-lettered after a few attempts (counted, logged); the batches around it are written', async () => {
    const { db } = testDb;
    // A real refusal by the store, as a constraint a record breaks would give.
    await db.query("ALTER TABLE traffic_logs ADD CONSTRAINT test_poison CHECK (path <> '/poison')");
    try {
      for (const path of ['/before', '/poison', '/after']) {
        records.append([exchange(business, { path })]);
        await records.flush();
      }
      const worker = new RecordWorker(db, records, HANDLERS, { logger, maxAttempts: 3 });
      let failures = 0;
      for (let i = 0; i < 10; i++) {
        try {
          if ((await worker.drain()) === 0) break;
        } catch {
          failures++;
        }
      }
      assert.equal(failures, 2, 'two failed attempts, the third dead-letters');
      const { rows } = await db.query<{ path: string }>('SELECT path FROM traffic_logs WHERE account_id = $1 ORDER BY id', [business.account]);
      assert.deepEqual(rows.map((r) => r.path), ['/before', '/after']);
      assert.deepEqual(worker.stats(), { batches: 2, deadLetteredBatches: 1, deadLetteredRecords: 1, skipped: 0 });
      assert.equal(await worker.drain(), 0, 'nothing pending any more');
    } finally {
      await db.query('ALTER TABLE traffic_logs DROP CONSTRAINT test_poison');
    }
  });
});
