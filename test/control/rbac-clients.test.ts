// RBAC clients over real HTTP (docs/api.md "RBAC"): create (200, generated_token once, default roles),
// list, get, update, delete, invites and the self-registration setting; credentials bound to the endpoint's mode;
// every collision a 409; refusals that change nothing; who may do what across accounts and plans.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import bcrypt from 'bcrypt';
import type { TestNode } from '../helpers/node.ts';
import { createEndpoint, expectBody, feedVersion, nodeWithOwner, orgWithMember, storeRows, type User } from '../helpers/endpoint-api.ts';
import { SecretBox } from '../../src/shared/secrets.ts';
import { tokenDigest, visitorTokenKey } from '../../src/shared/visitor-credentials.ts';

const SECRET_KEY = `rbac-clients-test-${randomBytes(16).toString('hex')}`;
const digestOf = (token: string) => tokenDigest(visitorTokenKey(new SecretBox(SECRET_KEY)), token);
const SETTINGS_TOKEN = 'settings-token-0123456789';

describe('RBAC clients', () => {
  let t: TestNode;
  let owner: User;
  before(async () => ({ t, owner } = await nodeWithOwner({ EDGE_SECRET_KEY: SECRET_KEY })));
  after(() => t.close());

  const sql = storeRows(() => t);
  const clients = (id: string) => `/v1/endpoints/${id}/rbac/clients`;
  const create = (id: string, body: unknown, user: User = owner, headers?: Record<string, string>) => t.api('POST', clients(id), { key: user.api_key, body, headers });
  const createOk = (id: string, body: unknown) => expectBody(200, create(id, body));
  const update = (id: string, clientId: number | string, body: unknown) => t.api('PUT', `${clients(id)}/${clientId}`, { key: owner.api_key, body });
  const list = (id: string, user: User = owner, headers?: Record<string, string>) => expectBody(200, t.api('GET', clients(id), { key: user.api_key, headers }));
  const endpointId = async (uuid: string) => (await sql<{ id: number }>('SELECT id FROM endpoints WHERE uuid = $1', [uuid]))[0].id;
  const defaultRole = async (uuid: string, name = 'reader', isDefault = true) =>
    (await sql<{ id: number }>('INSERT INTO rbac_roles (endpoint_id, name, is_default) VALUES ($1, $2, $3) RETURNING id', [await endpointId(uuid), name, isDefault]))[0].id;
  const rolesOf = async (clientId: number) => (await sql<{ role_id: number }>('SELECT role_id FROM rbac_memberships WHERE client_id = $1 ORDER BY role_id', [clientId])).map((r) => r.role_id);
  /** What a refused write must not have changed: the API's list, the stored rows and the feed version. */
  const state = async (id: string, user: User = owner, headers?: Record<string, string>) => ({
    clients: await list(id, user, headers),
    rows: await sql('SELECT c.*, (SELECT count(*)::int FROM rbac_client_identities i WHERE i.client_id = c.id) AS identities FROM rbac_clients c JOIN endpoints e ON e.id = c.endpoint_id WHERE e.uuid = $1 ORDER BY c.id', [id]),
    invites: await sql('SELECT i.* FROM rbac_invites i JOIN endpoints e ON e.id = i.endpoint_id WHERE e.uuid = $1 ORDER BY i.id', [id]),
    feed: await feedVersion(t),
  });

  /** An endpoint in visitor-auth mode `mode` (basic: one settings user `settings-user`; token: one settings token; oidc: one provider). */
  async function endpointIn(mode: 'none' | 'basic' | 'token' | 'oidc', user: User = owner, headers?: Record<string, string>): Promise<{ uuid: string; provider?: { id: number; name: string } }> {
    const { uuid } = await createEndpoint(t, user, headers);
    let provider: { id: number; name: string } | undefined;
    const settings = (body: unknown) => expectBody(200, t.api('PUT', `/v1/endpoints/${uuid}/settings`, { key: user.api_key, body, headers }), 'settings');
    if (mode === 'basic') await settings({ mode, basic_users: [{ username: 'settings-user', password: 'pw' }] });
    if (mode === 'token') await settings({ mode, tokens: [{ name: 's', token: SETTINGS_TOKEN }] });
    if (mode === 'oidc') {
      provider = await expectBody(
        201,
        t.api('POST', `/v1/endpoints/${uuid}/oauth/providers`, {
          key: user.api_key,
          headers,
          body: { kind: 'oidc', name: 'Company SSO', issuer: 'https://idp.example.com', client_id: 'c', client_secret: 'client-secret-0123456789' },
        }),
        'provider',
      );
      await settings({ mode });
    }
    return { uuid, provider };
  }

  it('creates a client: 200 with the docs/api.md fields, identifier and e-mail lower-cased, default roles assigned, the feed moved on', async () => {
    const { uuid } = await endpointIn('none');
    const reader = await defaultRole(uuid, 'reader');
    await defaultRole(uuid, 'admin', false);
    const feedBefore = await feedVersion(t);
    const client = await createOk(uuid, { identifier: 'Alice@Example.COM', display_name: 'Alice', email: 'Alice@Example.COM', metadata: { team: 'ops', n: 1 } });
    assert.deepEqual(
      { ...client, id: 0, created_at: 0, updated_at: 0 },
      {
        id: 0,
        identifier: 'alice@example.com',
        display_name: 'Alice',
        email: 'alice@example.com',
        username: null,
        status: 'active',
        has_password: false,
        has_token: false,
        has_oauth: false,
        identities: [],
        registration_source: 'admin',
        metadata: { team: 'ops', n: 1 },
        created_at: 0,
        updated_at: 0,
      },
    );
    assert.ok(!('generated_token' in client));
    assert.deepEqual(await rolesOf(client.id), [reader], 'only the default role');
    const memberships = await expectBody(200, t.api('GET', `/v1/endpoints/${uuid}/rbac/memberships`, { key: owner.api_key }));
    assert.deepEqual(
      memberships.map((m: any) => [m.client_id, m.role_id]),
      [[client.id, reader]],
      'the default role, visible through the memberships API',
    );
    const overview = await expectBody(200, t.api('GET', `/v1/endpoints/${uuid}/rbac`, { key: owner.api_key }));
    assert.deepEqual(overview.clients, [client], 'the overview shows the same client');
    assert.deepEqual(await list(uuid), [client]);
    assert.deepEqual(await expectBody(200, t.api('GET', `${clients(uuid)}/${client.id}`, { key: owner.api_key })), client);
    assert.ok(await feedVersion(t) > feedBefore, 'published');

    // status as sent; empty is active; registration_source as sent.
    assert.equal((await createOk(uuid, { identifier: 'bob', status: 'disabled' })).status, 'disabled');
    assert.equal((await createOk(uuid, { identifier: 'carol', status: '' })).status, 'active');
    assert.equal((await createOk(uuid, { identifier: 'dave', status: 'invited', registration_source: 'sso' })).registration_source, 'sso');
    assert.equal((await createOk(uuid, { identifier: 'erin', status: 'revoked' })).status, 'revoked');
  });

  it('mode basic: username and password (bcrypt, cost ≥ 10); 409 for a username another client or the settings’ basic_users hold', async () => {
    const { uuid } = await endpointIn('basic');
    const versionBefore = (await sql('SELECT credentials_version FROM endpoint_auth_settings WHERE endpoint_id = $1', [await endpointId(uuid)]))[0].credentials_version;
    const client = await createOk(uuid, { identifier: 'alice', username: 'alice', password: 'correct horse' });
    assert.equal(client.has_password, true);
    assert.equal(client.username, 'alice');
    const [row] = await sql('SELECT password_hash FROM rbac_clients WHERE id = $1', [client.id]);
    assert.ok(await bcrypt.compare('correct horse', row.password_hash));
    assert.ok(bcrypt.getRounds(row.password_hash) >= 10);
    const [after] = await sql('SELECT credentials_version FROM endpoint_auth_settings WHERE endpoint_id = $1', [await endpointId(uuid)]);
    assert.ok(after.credentials_version > versionBefore, 'edges flush their credential caches');

    const before = await state(uuid);
    for (const [name, body, field] of [
      ['another client’s username', { identifier: 'x1', username: 'alice', password: 'pw' }, 'username'],
      ['a settings basic user', { identifier: 'x2', username: 'settings-user', password: 'pw' }, 'username'],
      ['identifier in another case', { identifier: 'ALICE' }, 'identifier'],
    ] as const) {
      const res = await create(uuid, body);
      assert.equal(res.status, 409, `${name}: ${res.text}`);
      assert.equal(res.body.code, 'already_exists');
      assert.equal(res.body.detail.field, field, name);
    }
    for (const [name, body] of [
      ['username without password', { identifier: 'y', username: 'y' }],
      ['password without username', { identifier: 'y', password: 'y' }],
      ['username with a colon', { identifier: 'y', username: 'a:b', password: 'pw' }],
      ['password over 72 bytes', { identifier: 'y', username: 'y', password: 'é'.repeat(37) }],
      ['a token in mode basic', { identifier: 'y', auto_generate_token: true }],
      ['identities in mode basic', { identifier: 'y', identities: [{ provider: 1, subject: 's' }] }],
    ] as const) {
      const res = await create(uuid, body);
      assert.equal(res.status, 400, `${name}: ${res.text}`);
      assert.equal(res.body.code, 'invalid_request', name);
    }
    assert.deepEqual(await state(uuid), before);
  });

  it('mode token: generated_token once and never in reads, a token of one’s own, 409 for another client’s or a settings token', async () => {
    const { uuid } = await endpointIn('token');
    const generated = await createOk(uuid, { identifier: 'robot', auto_generate_token: true });
    assert.match(generated.generated_token, /^evc_[A-Za-z0-9_-]{43}$/);
    assert.equal(generated.has_token, true);
    const [row] = await sql('SELECT token_digest FROM rbac_clients WHERE id = $1', [generated.id]);
    assert.equal(row.token_digest, digestOf(generated.generated_token));
    const reads = JSON.stringify([await list(uuid), (await t.api('GET', `${clients(uuid)}/${generated.id}`, { key: owner.api_key })).body, await sql('SELECT * FROM rbac_clients')]);
    assert.ok(!reads.includes(generated.generated_token), 'never read back, never stored');
    assert.ok(!reads.includes('generated_token'));

    const own = await createOk(uuid, { identifier: 'own', token: 'my-own-token-0123456789' });
    assert.equal(own.has_token, true);
    assert.ok(!('generated_token' in own));

    const before = await state(uuid);
    for (const [name, body] of [
      ['another client’s token', { identifier: 'x', token: 'my-own-token-0123456789' }],
      ['a settings token', { identifier: 'x', token: SETTINGS_TOKEN }],
    ] as const) {
      const res = await create(uuid, body);
      assert.equal(res.status, 409, `${name}: ${res.text}`);
      assert.equal(res.body.detail.field, 'token');
    }
    for (const [name, body] of [
      ['token and auto_generate_token', { identifier: 'x', token: 'my-other-token-0123456789', auto_generate_token: true }],
      ['a short token', { identifier: 'x', token: 'short' }],
      ['a token with spaces', { identifier: 'x', token: 'has spaces in it 0123456789' }],
      ['a password in mode token', { identifier: 'x', username: 'x', password: 'pw' }],
    ] as const) {
      const res = await create(uuid, body);
      assert.equal(res.status, 400, `${name}: ${res.text}`);
    }
    assert.deepEqual(await state(uuid), before);
  });

  it('PUT …/settings refuses a basic user whose username, or a token whose value, an RBAC client holds: 409, nothing changed', async () => {
    const settings = (uuid: string, body: unknown) => t.api('PUT', `/v1/endpoints/${uuid}/settings`, { key: owner.api_key, body });
    const settingsState = async (uuid: string) => ({
      users: await sql('SELECT username, password_hash FROM endpoint_basic_users WHERE endpoint_id = $1 ORDER BY id', [await endpointId(uuid)]),
      tokens: await sql('SELECT label, digest, revoked_at FROM endpoint_visitor_tokens WHERE endpoint_id = $1 ORDER BY id', [await endpointId(uuid)]),
      feed: await feedVersion(t),
    });

    const basic = await endpointIn('basic');
    await createOk(basic.uuid, { identifier: 'alice', username: 'alice', password: 'correct horse' });
    let before = await settingsState(basic.uuid);
    const taken = await settings(basic.uuid, { mode: 'basic', basic_users: [{ username: 'settings-user', password: 'pw' }, { username: 'alice', password: 'other' }] });
    assert.equal(taken.status, 409, taken.text);
    assert.equal(taken.body.code, 'already_exists');
    assert.equal(taken.body.detail.field, 'basic_users.1.username');
    assert.match(taken.body.error, /RBAC client "alice"/);
    assert.deepEqual(await settingsState(basic.uuid), before, 'nothing changed');
    // Usernames are case-sensitive (RFC 7617): another spelling is another user.
    await expectBody(200, settings(basic.uuid, { mode: 'basic', basic_users: [{ username: 'settings-user', password: 'pw' }, { username: 'Alice', password: 'other' }] }));

    const token = await endpointIn('token');
    const robot = await createOk(token.uuid, { identifier: 'robot', auto_generate_token: true });
    before = await settingsState(token.uuid);
    for (const [name, tokens, index] of [
      ['a generated client token', [{ name: 'copy', token: robot.generated_token }], 0],
      ['a client token of its own, second in the list', [{ name: 's', token: SETTINGS_TOKEN }, { name: 'copy', token: 'my-client-token-0123456789' }], 1],
    ] as const) {
      if (index === 1) await createOk(token.uuid, { identifier: 'own', token: 'my-client-token-0123456789' });
      if (index === 1) before = await settingsState(token.uuid);
      const res = await settings(token.uuid, { mode: 'token', tokens });
      assert.equal(res.status, 409, `${name}: ${res.text}`);
      assert.equal(res.body.code, 'already_exists', name);
      assert.equal(res.body.detail.field, `tokens.${index}.token`, name);
      assert.ok(!res.text.includes(tokens[index]!.token), 'the token is not echoed');
      assert.deepEqual(await settingsState(token.uuid), before, `${name}: nothing changed`);
    }
    await expectBody(200, settings(token.uuid, { mode: 'token', tokens: [{ name: 'fresh', token: 'a-fresh-settings-token-0123456789' }] }));
  });

  it('mode oidc: identities by provider id or name, read back as the id; unknown provider 400; an identity linked twice 409', async () => {
    const { uuid, provider } = await endpointIn('oidc');
    const a = await createOk(uuid, { identifier: 'a', identities: [{ provider: provider!.id, subject: 'sub-a' }] });
    assert.deepEqual(a.identities, [{ provider: String(provider!.id), subject: 'sub-a' }]);
    assert.equal(a.has_oauth, true);
    const b = await createOk(uuid, { identifier: 'b', identities: [{ provider: String(provider!.id), subject: 'sub-b' }, { provider: 'Company SSO', subject: 'sub-b2' }] });
    assert.deepEqual(b.identities.map((i: any) => i.provider), [String(provider!.id), String(provider!.id)]);

    const before = await state(uuid);
    const taken = await create(uuid, { identifier: 'c', identities: [{ provider: 'Company SSO', subject: 'sub-a' }] });
    assert.equal(taken.status, 409, taken.text);
    assert.equal(taken.body.detail.field, 'identities');
    for (const [name, body] of [
      ['unknown provider id', { identifier: 'c', identities: [{ provider: 999999, subject: 's' }] }],
      ['unknown provider name', { identifier: 'c', identities: [{ provider: 'Nope', subject: 's' }] }],
      ['no subject', { identifier: 'c', identities: [{ provider: provider!.id }] }],
      ['unknown field in an identity', { identifier: 'c', identities: [{ provider: provider!.id, subject: 's', email: 'x@y.z' }] }],
      ['the same identity twice', { identifier: 'c', identities: [{ provider: provider!.id, subject: 's' }, { provider: 'Company SSO', subject: 's' }] }],
      ['a token in mode oidc', { identifier: 'c', token: 'my-own-token-0123456789' }],
    ] as const) {
      const res = await create(uuid, body);
      assert.equal(res.status, 400, `${name}: ${res.text}`);
    }
    assert.deepEqual(await state(uuid), before);

    // Identities need the OAuth method: not in mode none.
    const { uuid: none } = await endpointIn('none');
    const res = await create(none, { identifier: 'c', identities: [{ provider: 1, subject: 's' }] });
    assert.equal(res.status, 400);
    assert.match(res.body.error, /mode oauth or oidc/);
  });

  it('refuses bad input with a 400 that changes nothing, and identifier or e-mail collisions with a 409', async () => {
    const { uuid } = await endpointIn('none');
    await createOk(uuid, { identifier: 'taken', email: 'taken@example.com' });
    const before = await state(uuid);
    for (const [name, body, code] of [
      ['no identifier', {}, 'invalid_request'],
      ['empty identifier', { identifier: '' }, 'invalid_request'],
      ['identifier with a space', { identifier: 'a b' }, 'invalid_request'],
      ['identifier beyond ASCII', { identifier: 'jürgen' }, 'invalid_request'],
      ['identifier too long', { identifier: 'x'.repeat(256) }, 'invalid_request'],
      ['identifier not a string', { identifier: 5 }, 'invalid_request'],
      ['unknown field', { identifier: 'x', role: 'admin' }, 'unknown_field'],
      ['invalid status', { identifier: 'x', status: 'enabled' }, 'invalid_request'],
      ['invalid e-mail', { identifier: 'x', email: 'not-an-email' }, 'invalid_request'],
      ['metadata an array', { identifier: 'x', metadata: [1] }, 'invalid_request'],
      ['metadata a string', { identifier: 'x', metadata: 'x' }, 'invalid_request'],
      ['metadata too large', { identifier: 'x', metadata: { a: 'x'.repeat(17_000) } }, 'invalid_request'],
      ['invalid registration_source', { identifier: 'x', registration_source: 'api' }, 'invalid_request'],
      ['display_name with a newline', { identifier: 'x', display_name: 'a\nb' }, 'invalid_request'],
      ['auto_generate_token not a boolean', { identifier: 'x', auto_generate_token: 'yes' }, 'invalid_request'],
    ] as const) {
      const res = await create(uuid, body);
      assert.equal(res.status, 400, `${name}: ${res.text}`);
      assert.equal(res.body.code, code, name);
    }
    const json = await t.api('POST', clients(uuid), { key: owner.api_key, raw: '{"identifier":', headers: { 'content-type': 'application/json' } });
    assert.equal(json.status, 400);
    for (const [name, body, field] of [
      ['identifier', { identifier: 'TAKEN' }, 'identifier'],
      ['e-mail', { identifier: 'other', email: 'Taken@Example.com' }, 'email'],
    ] as const) {
      const res = await create(uuid, body);
      assert.equal(res.status, 409, `${name}: ${res.text}`);
      assert.equal(res.body.detail.field, field);
    }
    assert.deepEqual(await state(uuid), before);
  });

  it('updates a client partially: display name, e-mail, status (never back to invited), credential resets by mode, identities, metadata', async () => {
    const { uuid } = await endpointIn('token');
    const c = await createOk(uuid, { identifier: 'robot', display_name: 'Robot', auto_generate_token: true, metadata: { a: 1 } });
    const renamed = await expectBody(200, update(uuid, c.id, { display_name: 'R2', email: 'R2@Example.com' }));
    assert.equal(renamed.display_name, 'R2');
    assert.equal(renamed.email, 'r2@example.com');
    assert.deepEqual(renamed.metadata, { a: 1 }, 'omitted fields are kept');
    assert.ok(!('generated_token' in renamed));

    const [{ token_digest: oldDigest }] = await sql('SELECT token_digest FROM rbac_clients WHERE id = $1', [c.id]);
    const reset = await expectBody(200, update(uuid, c.id, { auto_generate_token: true }));
    assert.match(reset.generated_token, /^evc_/);
    assert.notEqual(reset.generated_token, c.generated_token);
    const [{ token_digest: newDigest }] = await sql('SELECT token_digest FROM rbac_clients WHERE id = $1', [c.id]);
    assert.equal(newDigest, digestOf(reset.generated_token));
    assert.notEqual(newDigest, oldDigest);
    assert.ok(!('generated_token' in (await expectBody(200, t.api('GET', `${clients(uuid)}/${c.id}`, { key: owner.api_key })))));

    for (const status of ['disabled', 'revoked', 'active']) assert.equal((await expectBody(200, update(uuid, c.id, { status }))).status, status);
    const meta = await expectBody(200, update(uuid, c.id, { metadata: { b: 'two' }, email: null }));
    assert.deepEqual(meta.metadata, { b: 'two' });
    assert.equal(meta.email, null);

    const other = await createOk(uuid, { identifier: 'other', email: 'other@example.com', token: 'other-token-0123456789' });
    const before = await state(uuid);
    for (const [name, body, status] of [
      ['back to invited', { status: 'invited' }, 400],
      ['unknown status', { status: 'paused' }, 400],
      ['identifier (not updatable)', { identifier: 'x' }, 400],
      ['unknown field', { roles: [] }, 400],
      ['password in mode token', { username: 'u', password: 'pw' }, 400],
      ['identities in mode token', { identities: [{ provider: 1, subject: 's' }] }, 400],
      ['token and auto_generate_token', { token: 'yet-another-token-0123', auto_generate_token: true }, 400],
      ['another client’s e-mail', { email: 'OTHER@example.com' }, 409],
      ['another client’s token', { token: 'other-token-0123456789' }, 409],
      ['a settings token', { token: SETTINGS_TOKEN }, 409],
    ] as const) {
      const res = await update(uuid, c.id, body);
      assert.equal(res.status, status, `${name}: ${res.text}`);
    }
    // Its own values are no collision.
    assert.equal((await update(uuid, other.id, { email: 'other@example.com', token: 'other-token-0123456789' })).status, 200);
    const after = await state(uuid);
    assert.deepEqual(after.clients.filter((x: any) => x.id !== other.id), before.clients.filter((x: any) => x.id !== other.id));

    for (const clientId of ['abc', '0', '-1']) assert.equal((await update(uuid, clientId, {})).status, 400, clientId);
    const { uuid: elsewhere } = await endpointIn('none');
    const foreign = await createOk(elsewhere, { identifier: 'foreign' });
    for (const clientId of [999999999, foreign.id]) {
      assert.equal((await update(uuid, clientId, { display_name: 'x' })).status, 404);
      assert.equal((await t.api('GET', `${clients(uuid)}/${clientId}`, { key: owner.api_key })).status, 404);
      assert.equal((await t.api('DELETE', `${clients(uuid)}/${clientId}`, { key: owner.api_key })).status, 404);
    }
  });

  it('resets a password in mode basic and replaces identities in mode oidc', async () => {
    const basic = await endpointIn('basic');
    const c = await createOk(basic.uuid, { identifier: 'alice' });
    assert.equal(c.has_password, false);
    const withPassword = await expectBody(200, update(basic.uuid, c.id, { username: 'alice', password: 'new password' }));
    assert.equal(withPassword.has_password, true);
    const [row] = await sql('SELECT password_hash FROM rbac_clients WHERE id = $1', [c.id]);
    assert.ok(await bcrypt.compare('new password', row.password_hash));
    assert.equal((await update(basic.uuid, c.id, { username: 'settings-user', password: 'x' })).status, 409);
    assert.equal((await update(basic.uuid, c.id, { username: 'alice' })).status, 400);

    const oidc = await endpointIn('oidc');
    const d = await createOk(oidc.uuid, { identifier: 'd', identities: [{ provider: oidc.provider!.id, subject: 'one' }] });
    const replaced = await expectBody(200, update(oidc.uuid, d.id, { identities: [{ provider: 'Company SSO', subject: 'two' }] }));
    assert.deepEqual(replaced.identities, [{ provider: String(oidc.provider!.id), subject: 'two' }]);
    // The released identity is free for another client.
    assert.equal((await create(oidc.uuid, { identifier: 'e', identities: [{ provider: oidc.provider!.id, subject: 'one' }] })).status, 200);
    const cleared = await expectBody(200, update(oidc.uuid, d.id, { identities: [] }));
    assert.equal(cleared.has_oauth, false);
  });

  it('deletes a client with its memberships, identities and invite: 204, then 404', async () => {
    const { uuid, provider } = await endpointIn('oidc');
    await defaultRole(uuid);
    const c = await createOk(uuid, { identifier: 'gone', identities: [{ provider: provider!.id, subject: 's' }] });
    assert.equal((await rolesOf(c.id)).length, 1);
    const res = await t.api('DELETE', `${clients(uuid)}/${c.id}`, { key: owner.api_key });
    assert.equal(res.status, 204, res.text);
    assert.equal(res.text, '');
    assert.deepEqual(await rolesOf(c.id), []);
    assert.deepEqual(await sql('SELECT * FROM rbac_client_identities WHERE client_id = $1', [c.id]), []);
    assert.equal((await t.api('DELETE', `${clients(uuid)}/${c.id}`, { key: owner.api_key })).status, 404);
    assert.equal((await t.api('GET', `${clients(uuid)}/${c.id}`, { key: owner.api_key })).status, 404);
    const invite = await expectBody(200, t.api('POST', `${clients(uuid)}/invites`, { key: owner.api_key, body: { email: 'inv@example.com' } }));
    assert.equal((await t.api('DELETE', `${clients(uuid)}/${invite.id}`, { key: owner.api_key })).status, 204);
    assert.deepEqual(await sql('SELECT * FROM rbac_invites WHERE client_id = $1', [invite.id]), []);
  });

  describe('invites', () => {
    const invite = (id: string, body: unknown) => t.api('POST', `${clients(id)}/invites`, { key: owner.api_key, body });
    const hoursUntil = (iso: string) => Math.round((Date.parse(iso) - Date.now()) / 3_600_000);

    it('creates an invited placeholder client with the default roles and a single-use token stored as a digest', async () => {
      const { uuid } = await endpointIn('basic');
      const role = await defaultRole(uuid);
      const inv = await expectBody(200, invite(uuid, { email: 'New@Example.com', display_name: 'Newcomer' }));
      assert.deepEqual(Object.keys(inv).sort(), ['display_name', 'email', 'expires_at', 'id', 'invite_token', 'invite_url', 'status']);
      assert.equal(inv.status, 'invited');
      assert.equal(inv.email, 'new@example.com');
      assert.equal(inv.display_name, 'Newcomer');
      assert.equal(hoursUntil(inv.expires_at), 72);
      assert.match(inv.invite_token, /^evi_[A-Za-z0-9_-]{43}$/);
      assert.equal(inv.invite_url, `/register?endpoint=${await endpointId(uuid)}&invite=${inv.invite_token}`);
      const client = await expectBody(200, t.api('GET', `${clients(uuid)}/${inv.id}`, { key: owner.api_key }));
      assert.equal(client.identifier, 'new@example.com');
      assert.equal(client.status, 'invited');
      assert.equal(client.registration_source, 'invite');
      assert.deepEqual(await rolesOf(inv.id), [role]);
      const [row] = await sql('SELECT token_digest, redeemed_at FROM rbac_invites WHERE client_id = $1', [inv.id]);
      assert.deepEqual(row, { token_digest: digestOf(inv.invite_token), redeemed_at: null });
      assert.ok(!JSON.stringify(await sql('SELECT * FROM rbac_invites')).includes(inv.invite_token));

      const anonymous = await expectBody(200, invite(uuid, {}));
      assert.equal(anonymous.email, null);
      assert.equal(anonymous.display_name, '');
      const placeholder = await expectBody(200, t.api('GET', `${clients(uuid)}/${anonymous.id}`, { key: owner.api_key }));
      assert.match(placeholder.identifier, /^invite-[0-9a-f]{12}$/);
    });

    it('takes expires_in_hours: default 72 when omitted or ≤ 0, capped at 8760', async () => {
      const { uuid } = await endpointIn('none');
      for (const [hours, expected] of [
        [undefined, 72],
        [0, 72],
        [-5, 72],
        [1, 1],
        [500, 500],
        [8760, 8760],
        [100000, 8760],
      ] as const) {
        const inv = await expectBody(200, invite(uuid, hours === undefined ? {} : { expires_in_hours: hours }));
        assert.equal(hoursUntil(inv.expires_at), expected, String(hours));
      }
    });

    it('refuses bad input and a taken e-mail, changing nothing', async () => {
      const { uuid } = await endpointIn('none');
      await createOk(uuid, { identifier: 'x', email: 'taken@example.com' });
      const before = await state(uuid);
      for (const [name, body, status] of [
        ['unknown field', { email: 'a@example.com', role: 1 }, 400],
        ['invalid e-mail', { email: 'nope' }, 400],
        ['hours not an integer', { expires_in_hours: 1.5 }, 400],
        ['hours a string', { expires_in_hours: '72' }, 400],
        ['taken e-mail', { email: 'TAKEN@example.com' }, 409],
      ] as const) {
        const res = await invite(uuid, body);
        assert.equal(res.status, status, `${name}: ${res.text}`);
      }
      assert.deepEqual(await state(uuid), before);
    });
  });

  describe('settings', () => {
    const settingsPath = (id: string) => `/v1/endpoints/${id}/rbac/settings`;
    const put = (id: string, body: unknown) => t.api('PUT', settingsPath(id), { key: owner.api_key, body });

    it('reads self-registration off by default; turning it on needs mode oauth/oidc; domains canonical', async () => {
      const { uuid: basic } = await endpointIn('basic');
      assert.deepEqual(await expectBody(200, t.api('GET', settingsPath(basic), { key: owner.api_key })), {
        self_registration: { enabled: false, allowed_email_domains: [] },
      });
      const refused = await put(basic, { self_registration: { enabled: true } });
      assert.equal(refused.status, 400);
      assert.match(refused.body.error, /mode oauth or oidc/);
      assert.deepEqual((await expectBody(200, put(basic, { self_registration: { enabled: false, allowed_email_domains: ['Example.COM'] } }))).self_registration, {
        enabled: false,
        allowed_email_domains: ['example.com'],
      });

      const { uuid } = await endpointIn('oidc');
      const on = await expectBody(200, put(uuid, { self_registration: { enabled: true, allowed_email_domains: ['Example.com', 'example.com', 'corp.example.org'] } }));
      assert.deepEqual(on, { self_registration: { enabled: true, allowed_email_domains: ['example.com', 'corp.example.org'] } });
      assert.deepEqual(await expectBody(200, put(uuid, { self_registration: { enabled: true } })), on, 'omitted domains are kept');
      assert.deepEqual(await expectBody(200, t.api('GET', settingsPath(uuid), { key: owner.api_key })), on);

      const before = await feedVersion(t);
      for (const [name, body] of [
        ['no self_registration', {}],
        ['enabled missing', { self_registration: {} }],
        ['unknown field', { self_registration: { enabled: true, domains: [] } }],
        ['unknown top-level field', { self_registration: { enabled: true }, x: 1 }],
        ['a domain with @', { self_registration: { enabled: true, allowed_email_domains: ['@example.com'] } }],
        ['a wildcard', { self_registration: { enabled: true, allowed_email_domains: ['*.example.com'] } }],
        ['one label', { self_registration: { enabled: true, allowed_email_domains: ['localhost'] } }],
        ['an IP address', { self_registration: { enabled: true, allowed_email_domains: ['10.0.0.1'] } }],
      ] as const) {
        const res = await put(uuid, body);
        assert.equal(res.status, 400, `${name}: ${res.text}`);
      }
      assert.equal(await feedVersion(t), before);
      assert.deepEqual(await expectBody(200, t.api('GET', settingsPath(uuid), { key: owner.api_key })), on);
    });
  });

  it('answers 404 for another account’s endpoint, 401 without a key, 403 for a reader or a plan without rbac; a paused endpoint is read-only', async () => {
    const { uuid } = await endpointIn('none');
    const c = await createOk(uuid, { identifier: 'c' });
    const stranger = await t.createUser('business');
    const operations = (id: string, clientId: number) =>
      [
        ['POST', clients(id), { identifier: 'new' }],
        ['GET', clients(id), undefined],
        ['GET', `${clients(id)}/${clientId}`, undefined],
        ['PUT', `${clients(id)}/${clientId}`, { display_name: 'x' }],
        ['DELETE', `${clients(id)}/${clientId}`, undefined],
        ['POST', `${clients(id)}/invites`, {}],
        ['GET', `/v1/endpoints/${id}/rbac/settings`, undefined],
        ['PUT', `/v1/endpoints/${id}/rbac/settings`, { self_registration: { enabled: false } }],
      ] as const;
    const before = await state(uuid);
    for (const [method, path, body] of operations(uuid, c.id)) {
      const res = await t.api(method, path, { key: stranger.api_key, body });
      assert.equal(res.status, 404, `${method} ${path}: ${res.text}`);
      assert.equal((await t.api(method, path, { key: null, body })).status, 401, `${method} ${path}`);
    }
    assert.deepEqual(await state(uuid), before);

    // A reader: reads yes, writes 403 naming the permission.
    const orgOwner = await t.createUser('business');
    const reader = await t.createUser('business');
    const { headers } = await orgWithMember(t, orgOwner, reader, ['endpoints:read']);
    const org = await endpointIn('none', orgOwner, headers);
    const orgClient = await expectBody(200, create(org.uuid, { identifier: 'o' }, orgOwner, headers));
    const orgBefore = await state(org.uuid, orgOwner, headers);
    for (const [method, path, body] of operations(org.uuid, orgClient.id)) {
      const res = await t.api(method, path, { key: reader.api_key, body, headers });
      if (method === 'GET') assert.equal(res.status, 200, `${method} ${path}: ${res.text}`);
      else {
        assert.equal(res.status, 403, `${method} ${path}: ${res.text}`);
        assert.equal(res.body.detail.permission, method === 'DELETE' ? 'endpoints:delete' : 'endpoints:write');
      }
    }
    assert.deepEqual(await state(org.uuid, orgOwner, headers), orgBefore);

    // Free plan: reads yes, writes 403 entitlement_required.
    const free = await t.createUser('free');
    const { uuid: freeEndpoint } = await createEndpoint(t, free);
    const freeClient = (await sql<{ id: number }>("INSERT INTO rbac_clients (endpoint_id, identifier) VALUES ($1, 'seeded') RETURNING id", [await endpointId(freeEndpoint)]))[0].id;
    for (const [method, path, body] of operations(freeEndpoint, freeClient)) {
      const res = await t.api(method, path, { key: free.api_key, body });
      if (method === 'GET') assert.equal(res.status, 200, `${method} ${path}: ${res.text}`);
      else {
        assert.equal(res.status, 403, `${method} ${path}: ${res.text}`);
        assert.equal(res.body.code, 'entitlement_required');
      }
    }
    // An admin acting on the free account's endpoint is held to that account's plan.
    const admin = await t.api('POST', clients(freeEndpoint), { body: { identifier: 'by-admin' } });
    assert.equal(admin.status, 403, admin.text);
    assert.equal(admin.body.code, 'entitlement_required');

    assert.equal((await t.api('POST', `/v1/admin/endpoints/${uuid}/pause`)).status, 200);
    const paused = await state(uuid);
    for (const [method, path, body] of operations(uuid, c.id)) {
      const res = await t.api(method, path, { key: owner.api_key, body });
      if (method === 'GET') assert.equal(res.status, 200, `${method} ${path}: ${res.text}`);
      else {
        assert.equal(res.status, 409, `${method} ${path}: ${res.text}`);
        assert.equal(res.body.code, 'quota_paused');
      }
    }
    assert.deepEqual(await state(uuid), paused);
    assert.equal((await t.api('POST', `/v1/admin/endpoints/${uuid}/unpause`)).status, 200);
  });

  it('lists every operation in the OpenAPI document', async () => {
    const doc = await expectBody(200, t.api('GET', '/v1/openapi.json', { key: null }));
    const paths = doc.paths;
    assert.ok(paths['/v1/endpoints/{id}/rbac/clients'].post);
    assert.ok(paths['/v1/endpoints/{id}/rbac/clients'].get);
    assert.ok(paths['/v1/endpoints/{id}/rbac/clients/{client_id}'].get);
    assert.ok(paths['/v1/endpoints/{id}/rbac/clients/{client_id}'].put);
    assert.ok(paths['/v1/endpoints/{id}/rbac/clients/{client_id}'].delete);
    assert.ok(paths['/v1/endpoints/{id}/rbac/clients/invites'].post);
    assert.ok(paths['/v1/endpoints/{id}/rbac/settings'].get);
    assert.ok(paths['/v1/endpoints/{id}/rbac/settings'].put);
    const registration = paths['/v1/rbac/registrations'].post;
    assert.deepEqual(registration.security, [], 'no API key');
    assert.ok(paths['/v1/endpoints/{id}/rbac/clients'].post.responses['200'].content['application/json'].schema.properties.generated_token);
  });
});
