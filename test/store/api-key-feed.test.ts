// API key entries in the change feed carry the key holder's effective permissions: republished when a member's
// permissions or admin flag change, and reconciled at start for entries an older release wrote without them.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { generateApiKey } from '../../src/shared/api-keys.ts';
import { PERMISSIONS } from '../../src/shared/permissions.ts';
import { TOPICS, type ApiKeyConfig } from '../../src/shared/snapshot.ts';
import * as accounts from '../../src/store/accounts.ts';
import { recordChange } from '../../src/store/feed.ts';
import { openTestDatabase, type TestDatabase } from '../helpers/db.ts';

describe(`API key feed entries (${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite'})`, () => {
  let t: TestDatabase;
  before(async () => {
    t = await openTestDatabase();
  });
  after(() => t.close());

  async function entry(keyId: string): Promise<ApiKeyConfig | null> {
    const { rows } = await t.db.query<{ data: ApiKeyConfig }>('SELECT data FROM feed_entries WHERE topic = $1 AND key = $2', [TOPICS.apiKey, keyId]);
    return rows[0]?.data ?? null;
  }

  /** An owner, an organization they own, a member of it and a key of the member bound to it. */
  async function organizationMember(name: string, permissions: string[]) {
    return t.db.transaction(async (tx) => {
      const { user: owner } = await accounts.createUser(tx, { email: `${name}-owner@example.test`, plan: 'pro' });
      const { user: member } = await accounts.createUser(tx, { email: `${name}-member@example.test`, plan: 'pro' });
      const org = await accounts.createOrganization(tx, { name, plan: 'pro', ownerId: owner.id });
      await accounts.addMember(tx, org.id, member.id, permissions);
      const key = generateApiKey();
      const row = await accounts.insertApiKey(tx, { userId: member.id, accountId: org.id, name: '', key });
      const ownerKey = generateApiKey();
      await accounts.insertApiKey(tx, { userId: owner.id, accountId: org.id, name: '', key: ownerKey });
      return { owner, member, org, key: row, ownerKeyId: ownerKey.keyId };
    });
  }

  it("publishes a member's own permissions and an owner's all of them", async () => {
    const { key, ownerKeyId } = await organizationMember('publish', ['traffic:read']);
    assert.deepEqual((await entry(key.key_id))?.permissions, ['traffic:read']);
    assert.deepEqual((await entry(ownerKeyId))?.permissions, [...PERMISSIONS]);
  });

  it("republishes a member's keys bound to the organization when their permissions change, and removes them with the member", async () => {
    const { member, org, key } = await organizationMember('change', ['traffic:read']);
    await t.db.transaction((tx) => accounts.setMemberPermissions(tx, org.id, member.id, ['traffic:read', 'tunnels:connect']));
    assert.deepEqual((await entry(key.key_id))?.permissions, ['traffic:read', 'tunnels:connect']);
    // A key of the member bound to their personal account is not the organization's business.
    const personal = generateApiKey();
    await t.db.transaction((tx) => accounts.insertApiKey(tx, { userId: member.id, accountId: member.personal_account_id, name: '', key: personal }));
    await t.db.transaction((tx) => accounts.setMemberPermissions(tx, org.id, member.id, []));
    assert.deepEqual((await entry(key.key_id))?.permissions, []);
    assert.deepEqual((await entry(personal.keyId))?.permissions, [...PERMISSIONS]);
    await t.db.transaction((tx) => accounts.removeMember(tx, org.id, member.id));
    assert.equal(await entry(key.key_id), null);
  });

  it("republishes a user's keys when they become an admin, and again when they stop", async () => {
    const { member, key } = await organizationMember('admin', ['traffic:read']);
    await t.db.transaction((tx) => accounts.setAdmin(tx, member.id, true));
    assert.deepEqual((await entry(key.key_id))?.permissions, [...PERMISSIONS]);
    await t.db.transaction((tx) => accounts.setAdmin(tx, member.id, false));
    assert.deepEqual((await entry(key.key_id))?.permissions, ['traffic:read']);
  });

  it('reconciles at start: entries without permissions are republished, entries of revoked keys removed, then nothing to do', async () => {
    const { key } = await organizationMember('reconcile', ['tunnels:connect']);
    const current = (await entry(key.key_id))!;
    // An entry as the release before edges checked permissions wrote it.
    const { permissions: _dropped, ...legacy } = current;
    await t.db.transaction((tx) => recordChange(tx, TOPICS.apiKey, key.key_id, legacy));
    assert.equal((await entry(key.key_id))?.permissions, undefined);
    // A key revoked without its entry being removed (drift of any kind).
    const other = generateApiKey();
    const row = await t.db.transaction((tx) => accounts.insertApiKey(tx, { userId: key.user_id, accountId: key.account_id, name: '', key: other }));
    await t.db.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [row.id]);

    assert.equal(await accounts.reconcileApiKeyFeed(t.db, 2), 2);
    assert.deepEqual(await entry(key.key_id), current);
    assert.equal(await entry(other.keyId), null);
    assert.equal(await accounts.reconcileApiKeyFeed(t.db, 2), 0);
  });
});
