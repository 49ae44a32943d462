// Callers and permissions: admin-created users, API keys, organizations, memberships, active accounts,
// plan changes and suspension — all through the real HTTP API.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestNode, type TestNode } from '../helpers/node.ts';

describe('accounts and API keys', () => {
  let t: TestNode;
  before(async () => {
    t = await startTestNode();
  });
  after(() => t.close());

  describe('POST /v1/admin/users', () => {
    it('creates a user whose key works at once', async () => {
      const res = await t.api('POST', '/v1/admin/users', { body: { email: 'Alice@Example.test', plan: 'pro' } });
      assert.equal(res.status, 201);
      assert.equal(res.body.email, 'Alice@Example.test');
      assert.equal(res.body.plan, 'pro');
      assert.ok(Number.isInteger(res.body.id) && Number.isInteger(res.body.account_id));
      assert.match(res.body.api_key, /^edge_[0-9a-f]{16}_/);
      const me = await t.api('GET', '/v1/me', { key: res.body.api_key });
      assert.equal(me.status, 200);
      assert.equal(me.body.user.id, res.body.id);
      assert.equal(me.body.active_account.id, res.body.account_id);
      assert.equal(me.body.active_account.plan, 'pro');
      assert.equal(me.body.user.is_admin, false);
      // The plan as the node applies it, so a client can say what is included before an operation is refused.
      assert.equal(me.body.plan.name, 'pro');
      assert.equal(typeof me.body.plan.entitlements.rbac, 'boolean');
      assert.ok(Number.isInteger(me.body.plan.quotas.permanent_endpoints));
      assert.ok(me.body.plan.protocols.includes('http'));
    });

    it('answers 409 for an e-mail that exists in any letter case', async () => {
      const res = await t.api('POST', '/v1/admin/users', { body: { email: 'alice@example.TEST', plan: 'free' } });
      assert.equal(res.status, 409);
      assert.equal(res.body.code, 'already_exists');
    });

    it('rejects an unknown plan and a malformed e-mail', async () => {
      assert.equal((await t.api('POST', '/v1/admin/users', { body: { email: 'b@example.test', plan: 'platinum' } })).status, 400);
      assert.equal((await t.api('POST', '/v1/admin/users', { body: { email: 'not-an-email', plan: 'free' } })).status, 400);
    });

    it('is refused to a caller who is not an admin', async () => {
      const user = await t.createUser();
      const res = await t.api('POST', '/v1/admin/users', { key: user.api_key, body: { email: 'x@example.test', plan: 'free' } });
      assert.equal(res.status, 403);
      assert.equal(res.body.code, 'admin_required');
    });
  });

  describe('API keys', () => {
    it('creates, lists and revokes keys; a revoked key gets 401 at once', async () => {
      const user = await t.createUser();
      const created = await t.api('POST', '/v1/api-keys', { key: user.api_key, body: { name: 'ci' } });
      assert.equal(created.status, 201);
      const second = created.body.api_key;
      assert.equal((await t.api('GET', '/v1/me', { key: second })).status, 200);

      const list = await t.api('GET', '/v1/api-keys', { key: second });
      assert.equal(list.status, 200);
      assert.deepEqual(list.body.items.map((k: { name: string }) => k.name), ['initial', 'ci']);
      assert.ok(list.body.items.every((k: Record<string, unknown>) => !('api_key' in k) && !('secret_hash' in k)));

      const revoke = await t.api('DELETE', `/v1/api-keys/${created.body.id}`, { key: user.api_key });
      assert.equal(revoke.status, 204);
      assert.equal((await t.api('GET', '/v1/me', { key: second })).status, 401);
      assert.equal((await t.api('GET', '/v1/me', { key: user.api_key })).status, 200);
    });

    it("answers 404 when revoking another user's key, and leaves it working", async () => {
      const a = await t.createUser();
      const b = await t.createUser();
      const bKeys = await t.api('GET', '/v1/api-keys', { key: b.api_key });
      const res = await t.api('DELETE', `/v1/api-keys/${bKeys.body.items[0].id}`, { key: a.api_key });
      assert.equal(res.status, 404);
      assert.equal((await t.api('GET', '/v1/me', { key: b.api_key })).status, 200);
    });

    it('refuses to bind a key to an account the user does not belong to', async () => {
      const a = await t.createUser();
      const b = await t.createUser();
      const res = await t.api('POST', '/v1/api-keys', { key: a.api_key, body: { account_id: b.account_id } });
      assert.equal(res.status, 403);
      assert.equal(res.body.code, 'not_a_member');
    });
  });

  describe('organizations and the active account', () => {
    it('lets an owner add a member with permissions, and the member act in that account', async () => {
      const owner = await t.createUser('pro');
      const member = await t.createUser();
      const org = await t.api('POST', '/v1/organizations', { key: owner.api_key, body: { name: 'Acme' } });
      assert.equal(org.status, 201);
      assert.equal(org.body.kind, 'organization');
      assert.equal(org.body.plan, 'pro');

      const add = await t.api('POST', `/v1/organizations/${org.body.id}/members`, {
        key: owner.api_key,
        body: { email: member.email, permissions: ['endpoints:read'] },
      });
      assert.equal(add.status, 201);
      assert.deepEqual(add.body.permissions, ['endpoints:read']);

      // X-Account-Id selects the organization as the active account for one call.
      const me = await t.api('GET', '/v1/me', { key: member.api_key, headers: { 'x-account-id': String(org.body.id) } });
      assert.equal(me.status, 200);
      assert.equal(me.body.active_account.id, org.body.id);
      assert.deepEqual(me.body.active_account.permissions, ['endpoints:read']);

      // A key bound to the organization makes it the active account of every call.
      const bound = await t.api('POST', '/v1/api-keys', { key: member.api_key, body: { account_id: org.body.id } });
      const viaBound = await t.api('GET', '/v1/me', { key: bound.body.api_key });
      assert.equal(viaBound.body.active_account.id, org.body.id);

      // Members without members:manage cannot manage members.
      const denied = await t.api('GET', `/v1/organizations/${org.body.id}/members`, { key: member.api_key });
      assert.equal(denied.status, 403);
      assert.equal(denied.body.code, 'permission_denied');

      const dup = await t.api('POST', `/v1/organizations/${org.body.id}/members`, { key: owner.api_key, body: { email: member.email, permissions: [] } });
      assert.equal(dup.status, 409);

      const update = await t.api('PUT', `/v1/organizations/${org.body.id}/members/${member.id}`, { key: owner.api_key, body: { permissions: ['endpoints:read', 'members:manage'] } });
      assert.equal(update.status, 200);
      assert.equal((await t.api('GET', `/v1/organizations/${org.body.id}/members`, { key: member.api_key })).status, 200);

      // Removing the member revokes the key bound to the organization and ends access to it.
      assert.equal((await t.api('DELETE', `/v1/organizations/${org.body.id}/members/${member.id}`, { key: owner.api_key })).status, 204);
      assert.equal((await t.api('GET', '/v1/me', { key: bound.body.api_key })).status, 401);
      const after = await t.api('GET', '/v1/me', { key: member.api_key, headers: { 'x-account-id': String(org.body.id) } });
      assert.equal(after.status, 403);
      assert.equal(after.body.code, 'not_a_member');
    });

    it('refuses an active account the caller is not a member of, and a malformed account id', async () => {
      const a = await t.createUser();
      const b = await t.createUser();
      const res = await t.api('GET', '/v1/me', { key: a.api_key, headers: { 'x-account-id': String(b.account_id) } });
      assert.equal(res.status, 403);
      assert.equal(res.body.code, 'not_a_member');
      const bad = await t.api('GET', '/v1/me', { key: a.api_key, headers: { 'x-account-id': 'drop table' } });
      assert.equal(bad.status, 400);
    });

    it('rejects unknown permissions and members that do not exist', async () => {
      const owner = await t.createUser();
      const org = await t.api('POST', '/v1/organizations', { key: owner.api_key, body: { name: 'Beta' } });
      const badPerm = await t.api('POST', `/v1/organizations/${org.body.id}/members`, { key: owner.api_key, body: { email: 'x@example.test', permissions: ['root'] } });
      assert.equal(badPerm.status, 400);
      const noUser = await t.api('POST', `/v1/organizations/${org.body.id}/members`, { key: owner.api_key, body: { email: 'nobody@example.test', permissions: [] } });
      assert.equal(noUser.status, 404);
      const other = await t.createUser();
      const foreign = await t.api('GET', `/v1/organizations/${org.body.id}/members`, { key: other.api_key });
      assert.equal(foreign.status, 404);
    });
  });

  describe('admin operations on users and accounts', () => {
    it('changes a plan, sets verification flags, suspends and reinstates', async () => {
      const user = await t.createUser('free');
      const plan = await t.api('PUT', `/v1/admin/users/${user.id}/plan`, { body: { plan: 'business' } });
      assert.equal(plan.status, 200);
      assert.equal(plan.body.plan, 'business');
      assert.equal((await t.api('GET', '/v1/me', { key: user.api_key })).body.active_account.plan, 'business');

      const verify = await t.api('PUT', `/v1/admin/users/${user.id}/verification`, { body: { email_verified: true, payment_method: true } });
      assert.equal(verify.status, 200);
      assert.deepEqual([verify.body.email_verified, verify.body.payment_method, verify.body.identity_verified], [true, true, false]);
      assert.equal((await t.api('PUT', `/v1/admin/users/${user.id}/verification`, { body: {} })).status, 400);

      const suspend = await t.api('POST', `/v1/admin/accounts/${user.account_id}/suspend`);
      assert.equal(suspend.status, 200);
      assert.equal(suspend.body.suspended, true);
      const refused = await t.api('POST', '/v1/organizations', { key: user.api_key, body: { name: 'while suspended' } });
      assert.equal(refused.status, 403);
      assert.equal(refused.body.code, 'account_suspended');
      // Reading who you are still works, so a suspended user can see why.
      assert.equal((await t.api('GET', '/v1/me', { key: user.api_key })).body.active_account.suspended, true);

      assert.equal((await t.api('POST', `/v1/admin/accounts/${user.account_id}/unsuspend`)).status, 200);
      assert.equal((await t.api('POST', '/v1/organizations', { key: user.api_key, body: { name: 'after' } })).status, 201);
    });

    it('caps the admin users list at EDGE_LIST_MAX_OFFSET like every listing (it read any page before)', async () => {
      assert.equal((await t.api('GET', '/v1/admin/users?page=100&page_size=100')).status, 200); // exactly 10000
      for (const q of ['?page=101&page_size=100', '?page=10000&page_size=100', '?page=501']) {
        const res = await t.api('GET', `/v1/admin/users${q}`);
        assert.equal(res.status, 400, q);
        assert.equal(res.body.code, 'pagination_too_deep', q);
        assert.equal(res.body.detail.max, 10000, q);
      }
    });

    it('answers 404 for accounts and users that do not exist', async () => {
      assert.equal((await t.api('POST', '/v1/admin/accounts/999999/suspend')).status, 404);
      assert.equal((await t.api('PUT', '/v1/admin/users/999999/plan', { body: { plan: 'pro' } })).status, 404);
    });
  });
});
