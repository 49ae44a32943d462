// The store behaves the same on both engines: migrations apply once, transactions roll back whole,
// and constraints — not JavaScript checks — refuse duplicates.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { isStoreUnavailable, isUniqueViolation, openDatabase } from '../../src/store/db.ts';
import { migrate, listMigrations } from '../../src/store/migrate.ts';
import { createUser, addMember, createOrganization } from '../../src/store/accounts.ts';
import { currentVersion } from '../../src/store/feed.ts';
import { openTestDatabase, type TestDatabase } from '../helpers/db.ts';

describe(`store (${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite'})`, () => {
  let t: TestDatabase;
  before(async () => {
    t = await openTestDatabase();
  });
  after(() => t.close());

  it('has applied every migration, and applying again changes nothing', async () => {
    const { rows } = await t.db.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
    assert.deepEqual(rows.map((r) => r.version), listMigrations().map((m) => m.version));
    assert.deepEqual(await migrate(t.db), []);
  });

  it('rolls a failed transaction back whole, feed version included', async () => {
    const before = await currentVersion(t.db);
    await assert.rejects(
      t.db.transaction(async (tx) => {
        await createUser(tx, { email: 'rollback@example.test', plan: 'free' });
        throw new Error('boom');
      }),
      /boom/,
    );
    const { rows } = await t.db.query("SELECT 1 FROM users WHERE email = 'rollback@example.test'");
    assert.equal(rows.length, 0);
    assert.equal(await currentVersion(t.db), before);
  });

  it('refuses a second user with the same e-mail in another case, by constraint', async () => {
    await t.db.transaction((tx) => createUser(tx, { email: 'Dup@example.test', plan: 'free' }));
    const err = await t.db.transaction((tx) => createUser(tx, { email: 'dup@EXAMPLE.test', plan: 'free' })).catch((e) => e);
    assert.ok(isUniqueViolation(err, 'users_email_key'), String(err));
  });

  it('refuses a duplicate membership pair, by constraint', async () => {
    const { user: owner } = await t.db.transaction((tx) => createUser(tx, { email: 'owner@example.test', plan: 'pro' }));
    const { user: member } = await t.db.transaction((tx) => createUser(tx, { email: 'member@example.test', plan: 'free' }));
    const org = await t.db.transaction((tx) => createOrganization(tx, { name: 'Org', plan: 'pro', ownerId: owner.id }));
    await t.db.transaction((tx) => addMember(tx, org.id, member.id, ['endpoints:read']));
    const err = await t.db.transaction((tx) => addMember(tx, org.id, member.id, [])).catch((e) => e);
    assert.ok(isUniqueViolation(err), String(err));
  });

  /** Listens on `channel`; `notified(payload)` resolves once that payload has arrived. */
  async function listener(channel: string): Promise<(payload: string) => Promise<void>> {
    const received: string[] = [];
    let wake: () => void = () => {};
    await t.db.listen(channel, (payload) => {
      received.push(payload);
      wake();
    });
    return (payload) =>
      new Promise<void>((resolve) => {
        const check = () => received.includes(payload) && resolve();
        wake = check;
        check();
      });
  }

  it('delivers NOTIFY after commit', async () => {
    const notified = await listener('edge_test_channel');
    await t.db.transaction((tx) => tx.query("SELECT pg_notify('edge_test_channel', 'one')"));
    await notified('one');
  });

  // Reported as skipped on PGlite, not as a pass: it has no server backend to terminate, so nothing here would run.
  const pglite = process.env.DATABASE_URL ? false : 'PGlite runs in this process: there is no listening connection to cut';
  it('re-listens when the listening connection is cut', { skip: pglite }, async () => {
    const notified = await listener('edge_relisten_channel');
    await t.db.transaction((tx) => tx.query("SELECT pg_notify('edge_relisten_channel', 'one')"));
    await notified('one');
    await t.db.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'edge-listen-' || current_schema()");
    // Notify until the re-established listener hears one: messages sent while it was down are lost by design.
    let delivered = false;
    const done = notified('two').then(() => (delivered = true));
    for (let i = 0; i < 400 && !delivered; i++) {
      await t.db.query("SELECT pg_notify('edge_relisten_channel', 'two')");
      await Promise.race([done, new Promise((r) => setTimeout(r, 50))]);
    }
    assert.ok(delivered, 'the listener came back');
  });

  it('cancels a statement past EDGE_DATABASE_STATEMENT_TIMEOUT_MS, and calls that the store being unavailable', { skip: pglite && 'PGlite has no statement timeout' }, async () => {
    const short = await openDatabase({ url: process.env.DATABASE_URL!, dataDir: '', schema: 'public', statementTimeoutMs: 100 });
    try {
      const err = await short.query('SELECT pg_sleep(5)').then(
        () => null,
        (e: unknown) => e,
      );
      assert.ok(err, 'the statement was cancelled');
      assert.equal((err as { code?: string }).code, '57014', 'query_canceled');
      assert.equal(isStoreUnavailable(err), true);
      // The pool is still usable afterwards.
      assert.equal((await short.query<{ one: number }>('SELECT 1 AS one')).rows[0].one, 1);
    } finally {
      await short.close();
    }
  });

  it('reads int8 columns as numbers on both engines', async () => {
    const { rows } = await t.db.query<{ id: number }>('SELECT id FROM users LIMIT 1');
    assert.equal(typeof rows[0].id, 'number');
  });
});
