// Who publishes feed changes (docs/feed.md): store writes touch what they changed and the transaction publishes each
// touched item once, just before COMMIT, in the order edges need; a rolled-back transaction publishes nothing.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TOPICS } from '../../src/shared/snapshot.ts';
import * as accounts from '../../src/store/accounts.ts';
import { insertCertificate, setEndpointCertificate } from '../../src/store/certificates.ts';
import { deleteEndpoint, insertEndpoint, setCapture, setOrigin } from '../../src/store/endpoints.ts';
import { touch, transactionWithFeedVersion } from '../../src/store/feed-changes.ts';
import { currentVersion } from '../../src/store/feed.ts';
import { openTestDatabase, type TestDatabase } from '../helpers/db.ts';

describe(`feed changes: one publish per touched item, before commit (${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite'})`, () => {
  let t: TestDatabase;
  let user: { id: number; account: number };
  before(async () => {
    t = await openTestDatabase();
    const created = await t.db.transaction((tx) => accounts.createUser(tx, { email: 'feed-changes@example.test', plan: 'pro' }));
    user = { id: created.user.id, account: created.account.id };
  });
  after(() => t.close());

  /** The outbox after `version`, oldest first. */
  async function changesAfter(version: number): Promise<Array<{ topic: string; key: string; data: Record<string, unknown> | null }>> {
    const { rows } = await t.db.query<{ topic: string; key: string; data: Record<string, unknown> | string | null }>(
      'SELECT topic, key, data FROM feed_outbox WHERE version > $1 ORDER BY version',
      [version],
    );
    return rows.map((r) => ({ ...r, data: typeof r.data === 'string' ? JSON.parse(r.data) : r.data }));
  }

  async function newEndpoint(): Promise<{ id: number; uuid: string }> {
    const sub = `fc-${randomBytes(4).toString('hex')}`;
    const row = await t.db.transaction((tx) =>
      insertEndpoint(tx, { userId: user.id, accountId: user.account, domainId: null, subdomain: sub, hostname: `${sub}.example.test`, isCustom: false }),
    );
    assert.ok(row);
    return { id: row.id, uuid: row.uuid };
  }

  async function newCertificate(): Promise<number> {
    const row = await t.db.transaction((tx) =>
      insertCertificate(tx, {
        accountId: user.account,
        userId: user.id,
        name: 'c',
        certificatePem: 'PEM',
        privateKeySealed: 'sealed',
        subject: 'CN=x',
        issuer: 'CN=x',
        sans: ['x.example.test'],
        fingerprintSha256: randomBytes(32).toString('hex'),
        notBefore: new Date(Date.now() - 3_600_000),
        notAfter: new Date(Date.now() + 3_600_000),
      }),
    );
    return row.id;
  }

  it('publishes an endpoint touched by two writes in one transaction once, with both writes in it', async () => {
    const ep = await newEndpoint();
    const before = await currentVersion(t.db);
    await t.db.transaction(async (tx) => {
      await setCapture(tx, ep.id, { enabled: true, level: 'metadata' });
      await setOrigin(tx, ep.id, 'https://origin.example.test');
    });
    const changes = await changesAfter(before);
    assert.deepEqual(
      changes.map((c) => [c.topic, c.key]),
      [[TOPICS.endpoint, ep.uuid]],
    );
    assert.equal(changes[0].data!.capture_enabled, true);
    assert.equal(changes[0].data!.origin_url, 'https://origin.example.test');
    assert.equal(await currentVersion(t.db), before + 1);
  });

  it('publishes nothing for a rolled-back transaction', async () => {
    const ep = await newEndpoint();
    const before = await currentVersion(t.db);
    await assert.rejects(
      t.db.transaction(async (tx) => {
        await setOrigin(tx, ep.id, 'https://rolled-back.example.test');
        throw new Error('changed my mind');
      }),
      /changed my mind/,
    );
    assert.equal(await currentVersion(t.db), before);
    assert.deepEqual(await changesAfter(before), []);
  });

  it('publishes only the deletion of an endpoint written and deleted in one transaction', async () => {
    const ep = await newEndpoint();
    const before = await currentVersion(t.db);
    await t.db.transaction(async (tx) => {
      await setOrigin(tx, ep.id, 'https://gone.example.test');
      await deleteEndpoint(tx, ep);
    });
    assert.deepEqual(await changesAfter(before), [{ topic: TOPICS.endpoint, key: ep.uuid, data: null }]);
  });

  it('publishes a served certificate before the endpoint naming it, and withdraws the released one after it', async () => {
    const ep = await newEndpoint();
    const [first, second] = [await newCertificate(), await newCertificate()];
    let before = await currentVersion(t.db);
    await t.db.transaction((tx) => setEndpointCertificate(tx, ep.id, first));
    assert.deepEqual(
      (await changesAfter(before)).map((c) => [c.topic, c.key, c.data === null]),
      [
        [TOPICS.certificate, String(first), false],
        [TOPICS.endpoint, ep.uuid, false],
      ],
    );
    before = await currentVersion(t.db);
    await t.db.transaction((tx) => setEndpointCertificate(tx, ep.id, second));
    assert.deepEqual(
      (await changesAfter(before)).map((c) => [c.topic, c.key, c.data === null]),
      [
        [TOPICS.certificate, String(second), false],
        [TOPICS.endpoint, ep.uuid, false],
        [TOPICS.certificate, String(first), true],
      ],
    );
  });

  it('answers the feed version that carries the changes (transactionWithFeedVersion), the current one when nothing changed', async () => {
    const ep = await newEndpoint();
    const { value, feedVersion } = await transactionWithFeedVersion(t.db, async (tx) => {
      await setOrigin(tx, ep.id, 'https://versioned.example.test');
      return 'done';
    });
    assert.equal(value, 'done');
    assert.equal(feedVersion, await currentVersion(t.db));
    const { rows } = await t.db.query<{ version: number }>('SELECT version FROM feed_entries WHERE topic = $1 AND key = $2', [TOPICS.endpoint, ep.uuid]);
    assert.equal(rows[0].version, feedVersion);
    const idle = await transactionWithFeedVersion(t.db, async () => null);
    assert.equal(idle.feedVersion, feedVersion);
  });

  it('refuses a touch outside a transaction, where the change could not commit with its feed entry', async () => {
    const ep = await newEndpoint();
    assert.throws(() => touch(t.db, { endpoint: ep.id }), /inside db\.transaction/);
  });
});

describe('who publishes feed changes', () => {
  const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');
  const files = (dir: string): string[] =>
    readdirSync(dir).flatMap((name) => {
      const path = join(dir, name);
      return statSync(path).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : [];
    });
  /** The feed's own modules, and the start-up repair of API-key entries (docs/feed.md "What stays outside the rule"). */
  const RECORDERS = ['store/feed.ts', 'store/feed-changes.ts', 'store/accounts.ts'];

  it('leaves recording to the store: only the feed modules call recordChange, only store writes touch', () => {
    for (const file of files(SRC)) {
      const name = relative(SRC, file);
      const text = readFileSync(file, 'utf8');
      if (!RECORDERS.includes(name)) assert.doesNotMatch(text, /\brecordChange\(/, `${name} records a feed change itself`);
      if (!name.startsWith('store/')) assert.doesNotMatch(text, /import\s*\{[^}]*\btouch\b[^}]*\}\s*from\s*'[^']*feed-changes\.ts'/, `${name} touches feed items outside the store`);
    }
  });
});
