// The store across a thread boundary: SQL sent over a MessagePort runs on the serving end's database and answers
// exactly as the database would (rows, counts, driver error fields), transactions commit, roll back and run their
// before-COMMIT tasks on the caller's side, notifications arrive, and a gone server fails callers instead of hanging.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { MessageChannel } from 'node:worker_threads';
import { isUniqueViolation } from '../../src/store/db.ts';
import { RemoteDatabase, serveDatabase } from '../../src/store/remote.ts';
import { openTestDatabase, type TestDatabase } from '../helpers/db.ts';

describe('a database served over a MessagePort', () => {
  let store: TestDatabase;
  let channel: MessageChannel;
  let remote: RemoteDatabase;

  before(async () => {
    store = await openTestDatabase();
    channel = new MessageChannel();
    serveDatabase(store.db, channel.port2);
    remote = new RemoteDatabase(channel.port1, store.db.engine, store.db.schema, async () => {});
    await store.db.query('CREATE TABLE remote_t (id int PRIMARY KEY, note text, at timestamptz, raw bytea)');
  });
  after(async () => {
    channel.port1.close();
    channel.port2.close();
    await store.close();
  });

  it('answers statements with rows and counts as the database does, dates and bytes intact', async () => {
    const at = new Date('2026-11-28T10:00:00.000Z');
    const inserted = await remote.query('INSERT INTO remote_t (id, note, at, raw) VALUES ($1, $2, $3, $4), ($5, $6, $3, $4)', [1, 'one', at, new Uint8Array([1, 2, 3]), 2, 'two']);
    assert.equal(inserted.rowCount, 2);
    const read = await remote.query<{ id: number; note: string; at: Date; raw: Uint8Array }>('SELECT id, note, at, raw FROM remote_t ORDER BY id');
    assert.equal(read.rowCount, 2);
    assert.deepEqual(read.rows.map((r) => r.note), ['one', 'two']);
    assert.ok(read.rows[0].at instanceof Date && read.rows[0].at.getTime() === at.getTime());
    assert.deepEqual([...read.rows[0].raw], [1, 2, 3]);
  });

  it('keeps the driver error fields callers branch on (SQLSTATE, constraint)', async () => {
    await assert.rejects(remote.query('INSERT INTO remote_t (id, note) VALUES (1, $1)', ['again']), (err: Error) => {
      assert.ok(isUniqueViolation(err, 'remote_t_pkey'), `a unique violation naming the key, got ${JSON.stringify(err)}`);
      assert.match(err.message, /duplicate key/);
      return true;
    });
    await assert.rejects(remote.query('SELECT * FROM no_such_table'), (err: Error & { code?: string }) => err.code === '42P01');
  });

  it('commits a transaction and its before-COMMIT tasks, which run on the caller side inside it', async () => {
    const seen: string[] = [];
    const out = await remote.transaction(async (tx) => {
      await tx.query('INSERT INTO remote_t (id, note) VALUES (10, $1)', ['in tx']);
      tx.beforeCommit(async () => {
        const inside = await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM remote_t WHERE id = 10');
        seen.push(`task saw ${inside.rows[0].n}`);
      });
      return 'result';
    });
    assert.equal(out, 'result');
    assert.deepEqual(seen, ['task saw 1']);
    assert.equal((await remote.query('SELECT 1 FROM remote_t WHERE id = 10')).rowCount, 1);
  });

  it('rolls back when the function or a before-COMMIT task throws, and hands back that error', async () => {
    await assert.rejects(
      remote.transaction(async (tx) => {
        await tx.query('INSERT INTO remote_t (id, note) VALUES (20, $1)', ['gone']);
        throw new Error('caller refused');
      }),
      /caller refused/,
    );
    await assert.rejects(
      remote.transaction(async (tx) => {
        await tx.query('INSERT INTO remote_t (id, note) VALUES (21, $1)', ['gone too']);
        tx.beforeCommit(async () => {
          throw new Error('publish failed');
        });
      }),
      /publish failed/,
    );
    assert.equal((await remote.query('SELECT 1 FROM remote_t WHERE id IN (20, 21)')).rowCount, 0);
  });

  it('runs concurrent transactions one after the other, as the engine queues them', async () => {
    await remote.query('INSERT INTO remote_t (id, note) VALUES (30, $1)', ['0']);
    const bump = () =>
      remote.transaction(async (tx) => {
        const { rows } = await tx.query<{ note: string }>('SELECT note FROM remote_t WHERE id = 30 FOR UPDATE');
        await tx.query('UPDATE remote_t SET note = $1 WHERE id = 30', [String(Number(rows[0].note) + 1)]);
      });
    await Promise.all([bump(), bump(), bump(), bump()]);
    assert.equal((await remote.query<{ note: string }>('SELECT note FROM remote_t WHERE id = 30')).rows[0].note, '4');
  });

  it('delivers NOTIFY payloads to listeners after the notifying transaction commits', async () => {
    const got: string[] = [];
    let arrived!: () => void;
    const arrival = new Promise<void>((resolve) => (arrived = resolve));
    await remote.listen('remote_test_channel', (payload) => {
      got.push(payload);
      arrived();
    });
    await remote.transaction(async (tx) => {
      await tx.query(`SELECT pg_notify('remote_test_channel', 'hello')`);
    });
    await arrival;
    assert.deepEqual(got, ['hello']);
  });

  it('refuses a statement for a transaction that is not open', async () => {
    await assert.rejects(remote.query('SELECT 1', [], 999), /transaction 999 is not open/);
  });
});

describe('a remote database whose server is gone', () => {
  it('fails the requests in flight and every later one with the reason', async () => {
    const channel = new MessageChannel();
    // Nobody serves port2: the request waits until the owner abandons the database.
    const remote = new RemoteDatabase(channel.port1, 'pglite', 'public', async () => {});
    const pending = remote.query('SELECT 1');
    remote.abandon(new Error('the store thread exited'));
    await assert.rejects(pending, /store thread exited/);
    await assert.rejects(remote.query('SELECT 1'), /store thread exited/);
    await assert.rejects(remote.transaction(async () => {}), /store thread exited/);
    channel.port1.close();
  });
});
