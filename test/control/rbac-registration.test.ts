// The public registration route (POST /v1/rbac/registrations, docs/rbac.md "Invites and self-registration"): invite
// redemption with username + password or a login's identity, self-registration by identity, each refusal's answer, and
// that a refused attempt changes nothing; the edge's identity assertion is signed here as an edge signs it.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import bcrypt from 'bcrypt';
import type { TestNode } from '../helpers/node.ts';
import { createEndpoint, edgeEndpoint, expectBody, feedVersion, nodeWithOwner, storeRows, type User } from '../helpers/endpoint-api.ts';
import { SecretBox } from '../../src/shared/secrets.ts';
import { REGISTRATION_PATH, signVisitorIdentity } from '../../src/shared/registration.ts';

const SECRET_KEY = `rbac-registration-test-${randomBytes(16).toString('hex')}`;
const box = new SecretBox(SECRET_KEY);

describe('RBAC registration', () => {
  let t: TestNode;
  let owner: User;
  before(async () => ({ t, owner } = await nodeWithOwner({ EDGE_SECRET_KEY: SECRET_KEY })));
  after(() => t.close());

  const sql = storeRows(() => t);
  const register = (body: unknown) => t.api('POST', REGISTRATION_PATH, { key: null, body });
  const endpointId = async (uuid: string) => (await sql<{ id: number }>('SELECT id FROM endpoints WHERE uuid = $1', [uuid]))[0].id;
  const client = (uuid: string, id: number) => expectBody(200, t.api('GET', `/v1/endpoints/${uuid}/rbac/clients/${id}`, { key: owner.api_key }));
  const invite = (uuid: string, body: unknown = {}, user: User = owner) => expectBody(200, t.api('POST', `/v1/endpoints/${uuid}/rbac/clients/invites`, { key: user.api_key, body }));
  /** The edge's assertion of a login at `provider` as `subject`; valid for a minute unless told otherwise. */
  const identity = (uuid: string, provider: number | string, subject: string, email: string | null = null, exp = Math.floor(Date.now() / 1000) + 60, signer = box) =>
    signVisitorIdentity(signer, { endpoint: uuid, provider: String(provider), subject, email, exp });
  /** What a refused attempt must not have changed: the endpoint's client, identity and invite rows and the feed version. */
  const state = async (uuid: string) => ({
    clients: await sql('SELECT c.* FROM rbac_clients c JOIN endpoints e ON e.id = c.endpoint_id WHERE e.uuid = $1 ORDER BY c.id', [uuid]),
    identities: await sql('SELECT i.* FROM rbac_client_identities i JOIN endpoints e ON e.id = i.endpoint_id WHERE e.uuid = $1 ORDER BY i.client_id, i.subject', [uuid]),
    invites: await sql('SELECT i.* FROM rbac_invites i JOIN endpoints e ON e.id = i.endpoint_id WHERE e.uuid = $1 ORDER BY i.id', [uuid]),
    feed: await feedVersion(t),
  });
  async function refused(uuid: string, body: unknown, status: number, code: string, what: string): Promise<void> {
    const before = await state(uuid);
    const res = await register(body);
    assert.equal(res.status, status, `${what}: ${res.text}`);
    assert.equal(res.body.code, code, what);
    assert.deepEqual(await state(uuid), before, `${what}: nothing changed`);
  }

  async function endpointIn(mode: 'basic' | 'oidc', user: User = owner): Promise<{ uuid: string; provider: number }> {
    const { uuid } = await createEndpoint(t, user);
    let provider = 0;
    if (mode === 'basic') {
      await expectBody(200, t.api('PUT', `/v1/endpoints/${uuid}/settings`, { key: user.api_key, body: { mode, basic_users: [{ username: 'settings-user', password: 'pw' }] } }));
    } else {
      provider = (
        await expectBody(
          201,
          t.api('POST', `/v1/endpoints/${uuid}/oauth/providers`, {
            key: user.api_key,
            body: { kind: 'oidc', name: 'SSO', issuer: 'https://idp.example.com', client_id: 'c', client_secret: 'client-secret-0123456789' },
          }),
        )
      ).id;
      await expectBody(200, t.api('PUT', `/v1/endpoints/${uuid}/settings`, { key: user.api_key, body: { mode } }));
    }
    return { uuid, provider };
  }

  describe('invite with username and password (mode basic)', () => {
    it('sets them, makes the client active (registration_source invite) and redeems the invite once', async () => {
      const { uuid } = await endpointIn('basic');
      const role = (await sql<{ id: number }>("INSERT INTO rbac_roles (endpoint_id, name, is_default) VALUES ($1, 'reader', true) RETURNING id", [await endpointId(uuid)]))[0].id;
      const inv = await invite(uuid, { email: 'new@example.com' });
      const before = await feedVersion(t);
      const result = await expectBody(200, register({ endpoint_id: uuid, invite_token: inv.invite_token, username: 'newcomer', password: 'long enough' }));
      assert.deepEqual({ ...result, feed_version: 0 }, { client_id: inv.id, identifier: 'new@example.com', status: 'active', registration_source: 'invite', feed_version: 0 });
      assert.ok(result.feed_version > before && result.feed_version <= (await feedVersion(t)), 'the version that carries the change');
      const c = await client(uuid, inv.id);
      assert.equal(c.status, 'active');
      assert.equal(c.registration_source, 'invite');
      assert.equal(c.username, 'newcomer');
      assert.equal(c.has_password, true);
      const [row] = await sql('SELECT password_hash FROM rbac_clients WHERE id = $1', [inv.id]);
      assert.ok(await bcrypt.compare('long enough', row.password_hash));
      assert.deepEqual((await sql('SELECT role_id FROM rbac_memberships WHERE client_id = $1', [inv.id])).map((r) => r.role_id), [role], 'default roles from the invite');
      assert.ok((await sql('SELECT redeemed_at FROM rbac_invites WHERE client_id = $1', [inv.id]))[0].redeemed_at);
      // What edges get: the active client, its password among the basic users, the invite no longer pending.
      const edge = await edgeEndpoint(t, uuid);
      assert.equal(edge.rbac?.clients.find((x) => x.id === inv.id)?.status, 'active');
      assert.ok(edge.auth?.basic_users.some((u) => u.id === `rbac-client:${inv.id}` && u.username === 'newcomer'));
      assert.deepEqual(edge.rbac?.invites, []);

      await refused(uuid, { endpoint_id: uuid, invite_token: inv.invite_token, username: 'again', password: 'long enough' }, 404, 'invite_not_found', 'used twice');
    });

    it('redeems an invite once when several attempts race: one 200, the others 404 invite_not_found', async () => {
      const { uuid } = await endpointIn('basic');
      const inv = await invite(uuid, { email: 'racer@example.com' });
      const answers = await Promise.all(
        [0, 1, 2, 3, 4].map((i) => register({ endpoint_id: uuid, invite_token: inv.invite_token, username: `racer-${i}`, password: 'long enough' })),
      );
      const won = answers.filter((r) => r.status === 200);
      assert.equal(won.length, 1, answers.map((r) => `${r.status} ${r.text}`).join('\n'));
      for (const r of answers.filter((a) => a.status !== 200)) {
        assert.equal(r.status, 404, r.text);
        assert.equal(r.body.code, 'invite_not_found');
      }
      const rows = await sql<{ username: string; status: string }>('SELECT username, status FROM rbac_clients WHERE id = $1', [inv.id]);
      assert.equal(rows[0].status, 'active');
      assert.equal(rows[0].username, `racer-${answers.indexOf(won[0])}`, 'the winner’s username, no other');
    });

    it('answers 404 for an unknown or another endpoint’s token, 410 for an expired one, 409 for a taken username; nothing changes', async () => {
      const { uuid } = await endpointIn('basic');
      const inv = await invite(uuid);
      const other = await endpointIn('basic', await t.createUser('business'));
      const body = (over: Record<string, unknown> = {}) => ({ endpoint_id: uuid, invite_token: inv.invite_token, username: 'someone', password: 'long enough', ...over });
      await refused(uuid, body({ invite_token: 'evi_' + randomBytes(32).toString('base64url') }), 404, 'invite_not_found', 'unknown token');
      await refused(other.uuid, body({ endpoint_id: other.uuid }), 404, 'invite_not_found', 'another endpoint’s token');
      await refused(uuid, body({ endpoint_id: '6f1c2a7e-1b0f-4a57-9c1d-2f3e4a5b6c7d' }), 404, 'invite_not_found', 'no such endpoint');

      await expectBody(200, t.api('POST', `/v1/endpoints/${uuid}/rbac/clients`, { key: owner.api_key, body: { identifier: 'holder', username: 'taken', password: 'pw' } }));
      await refused(uuid, body({ username: 'taken' }), 409, 'already_exists', 'another client’s username');
      await refused(uuid, body({ username: 'settings-user' }), 409, 'already_exists', 'a settings basic user');

      for (const [what, over] of [
        ['short password', { password: 'short' }],
        ['password over 72 bytes', { password: 'é'.repeat(37) }],
        ['username with a colon', { username: 'a:b' }],
        ['username without password', { password: undefined }],
        ['password without username', { username: undefined }],
        ['an identity as well', { identity: identity(uuid, 1, 'x') }],
        ['no credential at all', { username: undefined, password: undefined }],
        ['unknown field', { role: 'admin' }],
        ['endpoint not a uuid', { endpoint_id: '12' }],
      ] as const) {
        await refused(uuid, body(over), 400, what === 'unknown field' ? 'unknown_field' : 'invalid_request', what);
      }
      await refused(uuid, { endpoint_id: uuid, username: 'u', password: 'long enough' }, 400, 'invalid_request', 'password without an invite');

      await sql("UPDATE rbac_invites SET expires_at = now() - interval '1 second' WHERE client_id = $1", [inv.id]);
      await refused(uuid, body(), 410, 'invite_expired', 'expired');
    });

    it('refuses an invite whose client is no longer invited (activated or deleted by an admin)', async () => {
      const { uuid } = await endpointIn('basic');
      const activated = await invite(uuid);
      await expectBody(200, t.api('PUT', `/v1/endpoints/${uuid}/rbac/clients/${activated.id}`, { key: owner.api_key, body: { status: 'active' } }));
      await refused(uuid, { endpoint_id: uuid, invite_token: activated.invite_token, username: 'x', password: 'long enough' }, 404, 'invite_not_found', 'activated');
      const deleted = await invite(uuid);
      assert.equal((await t.api('DELETE', `/v1/endpoints/${uuid}/rbac/clients/${deleted.id}`, { key: owner.api_key })).status, 204);
      await refused(uuid, { endpoint_id: uuid, invite_token: deleted.invite_token, username: 'x', password: 'long enough' }, 404, 'invite_not_found', 'deleted');
    });
  });

  describe('invite with an identity (mode oauth/oidc)', () => {
    it('links the identity and the verified e-mail when the client has none; the method must be the endpoint’s', async () => {
      const { uuid, provider } = await endpointIn('oidc');
      const inv = await invite(uuid);
      // Username and password are not this endpoint's method.
      await refused(uuid, { endpoint_id: uuid, invite_token: inv.invite_token, username: 'x', password: 'long enough' }, 400, 'invalid_request', 'password in mode oidc');
      const result = await expectBody(200, register({ endpoint_id: uuid, invite_token: inv.invite_token, identity: identity(uuid, provider, 'sub-1', 'Ann@Example.com') }));
      assert.equal(result.registration_source, 'invite');
      const c = await client(uuid, inv.id);
      assert.deepEqual(c.identities, [{ provider: String(provider), subject: 'sub-1' }]);
      assert.equal(c.email, 'ann@example.com');
      assert.equal(c.status, 'active');

      // An invite with an e-mail keeps it; an identity another client holds is a 409.
      const withEmail = await invite(uuid, { email: 'bob@example.com' });
      await refused(uuid, { endpoint_id: uuid, invite_token: withEmail.invite_token, identity: identity(uuid, provider, 'sub-1') }, 409, 'already_exists', 'identity linked');
      await expectBody(200, register({ endpoint_id: uuid, invite_token: withEmail.invite_token, identity: identity(uuid, provider, 'sub-2', 'other@example.com') }));
      assert.equal((await client(uuid, withEmail.id)).email, 'bob@example.com');

      // Mode basic does not take identities.
      const basic = await endpointIn('basic');
      const basicInvite = await invite(basic.uuid);
      await refused(basic.uuid, { endpoint_id: basic.uuid, invite_token: basicInvite.invite_token, identity: identity(basic.uuid, 1, 's') }, 400, 'invalid_request', 'identity in mode basic');
    });

    it('answers 401 for a forged, altered, expired or another endpoint’s assertion', async () => {
      const { uuid, provider } = await endpointIn('oidc');
      const other = await endpointIn('oidc');
      const inv = await invite(uuid);
      const good = identity(uuid, provider, 'sub');
      const [payload, mac] = good.split('.');
      const forgedPayload = Buffer.from(JSON.stringify({ endpoint: uuid, provider: String(provider), subject: 'admin', email: null, exp: 9999999999 })).toString('base64url');
      for (const [what, assertion] of [
        ['another secret', identity(uuid, provider, 'sub', null, undefined, new SecretBox('not-the-edge-secret'))],
        ['altered claims', `${forgedPayload}.${mac}`],
        ['altered mac', `${payload}.${mac.slice(0, -2)}AA`],
        ['expired', identity(uuid, provider, 'sub', null, Math.floor(Date.now() / 1000) - 1)],
        ['another endpoint’s', identity(other.uuid, provider, 'sub')],
        ['not an assertion', 'hello'],
      ] as const) {
        await refused(uuid, { endpoint_id: uuid, invite_token: inv.invite_token, identity: assertion }, 401, 'invalid_identity_assertion', what);
      }
      assert.equal((await register({ endpoint_id: uuid, invite_token: inv.invite_token, identity: good })).status, 200);
    });
  });

  describe('self-registration', () => {
    const settings = (uuid: string, body: unknown) => expectBody(200, t.api('PUT', `/v1/endpoints/${uuid}/rbac/settings`, { key: owner.api_key, body }));

    it('is off by default (403), then creates an active client with the default roles; an identity registers once', async () => {
      const { uuid, provider } = await endpointIn('oidc');
      await refused(uuid, { endpoint_id: uuid, identity: identity(uuid, provider, 'sub-a', 'a@example.com') }, 403, 'self_registration_disabled', 'off');
      await settings(uuid, { self_registration: { enabled: true } });
      const role = (await sql<{ id: number }>("INSERT INTO rbac_roles (endpoint_id, name, is_default) VALUES ($1, 'member', true) RETURNING id", [await endpointId(uuid)]))[0].id;
      const a = await expectBody(200, register({ endpoint_id: uuid, identity: identity(uuid, provider, 'sub-a', 'A@Example.com') }));
      assert.equal(a.identifier, 'a@example.com');
      assert.equal(a.registration_source, 'self');
      const c = await client(uuid, a.client_id);
      assert.deepEqual(
        { status: c.status, source: c.registration_source, email: c.email, identities: c.identities },
        { status: 'active', source: 'self', email: 'a@example.com', identities: [{ provider: String(provider), subject: 'sub-a' }] },
      );
      assert.deepEqual((await sql('SELECT role_id FROM rbac_memberships WHERE client_id = $1', [a.client_id])).map((r) => r.role_id), [role]);
      await refused(uuid, { endpoint_id: uuid, identity: identity(uuid, provider, 'sub-a', 'a@example.com') }, 409, 'already_exists', 'identity already linked');

      // Without an e-mail (and no domain list): identified by provider and subject.
      const b = await expectBody(200, register({ endpoint_id: uuid, identity: identity(uuid, provider, 'Sub B') }));
      assert.equal(b.identifier, `${provider}:sub%20b`);
      assert.equal((await client(uuid, b.client_id)).email, null);
    });

    it('limits registrations to the allowed e-mail domains, and needs the OAuth method', async () => {
      const { uuid, provider } = await endpointIn('oidc');
      await settings(uuid, { self_registration: { enabled: true, allowed_email_domains: ['example.com'] } });
      await refused(uuid, { endpoint_id: uuid, identity: identity(uuid, provider, 's1', 'x@other.example') }, 403, 'email_domain_not_allowed', 'other domain');
      await refused(uuid, { endpoint_id: uuid, identity: identity(uuid, provider, 's1', 'x@sub.example.com') }, 403, 'email_domain_not_allowed', 'subdomain');
      await refused(uuid, { endpoint_id: uuid, identity: identity(uuid, provider, 's1') }, 403, 'email_domain_not_allowed', 'no e-mail');
      assert.equal((await register({ endpoint_id: uuid, identity: identity(uuid, provider, 's1', 'x@EXAMPLE.com') })).status, 200);

      // The endpoint left the login modes since: the setting stays stored but takes no one.
      await expectBody(200, t.api('PUT', `/v1/endpoints/${uuid}/settings`, { key: owner.api_key, body: { mode: 'basic', basic_users: [{ username: 'u', password: 'pw' }] } }));
      await refused(uuid, { endpoint_id: uuid, identity: identity(uuid, provider, 's2', 'y@example.com') }, 400, 'invalid_request', 'mode basic');
    });
  });

  it('answers 403 when the endpoint’s plan lacks rbac, 409 when it is paused, and needs no API key', async () => {
    const user = await t.createUser('business');
    const { uuid, provider } = await endpointIn('oidc', user);
    const inv = await invite(uuid, {}, user);
    await sql('UPDATE accounts SET plan = $1 WHERE id = $2', ['free', user.account_id]);
    await refused(uuid, { endpoint_id: uuid, invite_token: inv.invite_token, identity: identity(uuid, provider, 's') }, 403, 'entitlement_required', 'free plan');
    await sql('UPDATE accounts SET plan = $1 WHERE id = $2', ['business', user.account_id]);
    assert.equal((await t.api('POST', `/v1/admin/endpoints/${uuid}/pause`)).status, 200);
    await refused(uuid, { endpoint_id: uuid, invite_token: inv.invite_token, identity: identity(uuid, provider, 's') }, 409, 'quota_paused', 'paused');
    assert.equal((await t.api('POST', `/v1/admin/endpoints/${uuid}/unpause`)).status, 200);
    // An API key is not looked at: a bogus one changes nothing.
    const res = await t.api('POST', REGISTRATION_PATH, { key: 'bogus', body: { endpoint_id: uuid, invite_token: inv.invite_token, identity: identity(uuid, provider, 's') } });
    assert.equal(res.status, 200, res.text);
  });
});
