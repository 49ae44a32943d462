// The store thread of `edge serve`: it opens the database, serves the main thread's SQL when it owns embedded PGlite,
// writes the records the edge posts, writes what was posted before a stop, and refuses to start on a store it cannot open.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '../../src/shared/log.ts';
import type { TrafficExchangeRecord } from '../../src/shared/records/types.ts';
import { openDatabase } from '../../src/store/db.ts';
import { startStoreThread, type StoreThread } from '../../src/worker/store-thread/host.ts';
import { eventually } from '../helpers/eventually.ts';
import { copyPgliteTemplate } from '../helpers/pglite-template.ts';

const logger = createLogger(process.env.EDGE_TEST_LOG_LEVEL ?? 'silent');

function exchange(account: number, endpoint: string, path: string): TrafficExchangeRecord {
  return {
    kind: 'traffic_exchange', edge: 'edge-a', at: new Date().toISOString(), region: 'eu', account, endpoint,
    hostname: 'shop.edge.localhost', method: 'GET', host: 'shop.edge.localhost', path, query: '', status: 200,
    duration_ms: 1.5, bytes_in: 0, bytes_out: 100, client_ip: '192.0.2.7', country: null, user_agent: 'bench', secure: false,
    rule: null, edge_error: null, auth_outcome: null, client_id: null, completed: true, level: 'metadata',
  };
}

describe('the store thread with embedded PGlite', () => {
  let dataDir: string;
  let thread: StoreThread;
  let account: number;
  let endpoint: string;

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'edge-store-thread-'));
    await copyPgliteTemplate(join(dataDir, 'pglite'));
    thread = await startStoreThread({
      database: { url: '', dataDir: join(dataDir, 'pglite'), schema: 'public' },
      ownsDatabase: true,
      records: { kind: 'port' },
      nice: 19,
      logger,
      logLevel: 'silent',
      logBindings: {},
    });
    const db = thread.db!;
    const a = await db.query<{ id: number }>("INSERT INTO accounts (kind, name, plan) VALUES ('personal', 'shop', 'free') RETURNING id");
    account = a.rows[0].id;
    const u = await db.query<{ id: number }>('INSERT INTO users (email, personal_account_id) VALUES ($1, $2) RETURNING id', ['shop@example.test', account]);
    const e = await db.query<{ uuid: string }>(
      "INSERT INTO endpoints (user_id, account_id, subdomain, hostname) VALUES ($1, $2, 'shop', 'shop.edge.localhost') RETURNING uuid::text AS uuid",
      [u.rows[0].id, account],
    );
    endpoint = e.rows[0].uuid;
  });
  after(async () => {
    await thread?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('serves the main thread SQL on the migrated store it owns', async () => {
    assert.equal(thread.db!.engine, 'pglite');
    const { rows } = await thread.db!.query<{ n: number }>('SELECT count(*)::int AS n FROM endpoints WHERE uuid = $1', [endpoint]);
    assert.equal(rows[0].n, 1);
  });

  it('runs at the configured nice value, the rest of the process at its own (Linux: nice is per thread)', { skip: process.platform !== 'linux' }, () => {
    const niceOf = (task: string) => {
      const stat = readFileSync(`/proc/self/task/${task}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
    };
    const nices = readdirSync('/proc/self/task').map(niceOf);
    assert.equal(nices.filter((n) => n === 19).length, 1, 'one thread, the store thread, at 19');
    assert.equal(niceOf(String(process.pid)), 0, 'the main thread keeps its priority');
  });

  it('writes the exchanges the edge posts, and the sender sees them stored', async () => {
    thread.records!.append([exchange(account, endpoint, '/one'), exchange(account, endpoint, '/two')]);
    const paths = await eventually(async () => {
      const { rows } = await thread.db!.query<{ path: string }>('SELECT path FROM traffic_logs WHERE endpoint_uuid = $1 ORDER BY path', [endpoint]);
      return rows.length === 2 ? rows.map((r) => r.path) : undefined;
    });
    assert.deepEqual(paths, ['/one', '/two']);
    await eventually(async () => (thread.records!.stats().buffered === 0 ? true : undefined));
  });

  it("answers a stats request with its record worker's counts and the queue's backlog (the worker's metrics)", async () => {
    // The batch above was written and acknowledged: the worker counts it once the sender has seen it stored.
    const reading = await thread.stats();
    assert.equal(reading.stats.batches, 1);
    assert.deepEqual({ ...reading.stats, batches: 0 }, { batches: 0, deadLetteredBatches: 0, deadLetteredRecords: 0, skipped: 0 });
    assert.deepEqual(reading.backlog, { queued: 0, pending: 0 });
  });

  it('writes what was posted just before it stops, then closes the store for good', async () => {
    thread.records!.append([exchange(account, endpoint, '/last')]);
    await thread.records!.close();
    await thread.close();
    await assert.rejects(thread.db!.query('SELECT 1'), /closed/);
    await assert.rejects(thread.stats(), /stopping/);
    const reopened = await openDatabase({ url: '', dataDir: join(dataDir, 'pglite'), schema: 'public' });
    try {
      const { rows } = await reopened.query('SELECT 1 FROM traffic_logs WHERE path = $1', ['/last']);
      assert.equal(rows.length, 1, 'the last exchange was written before the store closed');
    } finally {
      await reopened.close();
    }
  });
});

describe('a store thread that cannot open its store', () => {
  it('refuses to start, naming the cause', async () => {
    await assert.rejects(
      startStoreThread({
        database: { url: 'postgres://127.0.0.1:1/none', dataDir: '', schema: 'public' },
        ownsDatabase: false,
        records: { kind: 'port' },
        nice: 0,
        logger,
        logLevel: 'silent',
        logBindings: {},
      }),
      /store thread could not open the database: .*ECONNREFUSED/,
    );
  });
});
