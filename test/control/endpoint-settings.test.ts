// Visitor authentication settings over real HTTP: GET/PUT …/settings, PUT …/settings/jwt and …/settings/webhook;
// merge semantics, every refusal (400/401/403/404/409) leaving settings and feed untouched, and what edges receive.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import bcrypt from 'bcrypt';
import type { TestNode } from '../helpers/node.ts';
import { createEndpoint, edgeCaughtUp, edgeEndpoint as edgeEndpointOf, expectBody, feedVersion, nodeWithOwner, orgWithMember, storeRows, type User } from '../helpers/endpoint-api.ts';
import { visit } from '../helpers/http.ts';
import { startEchoService } from '../helpers/local-service.ts';
import { assertFingerprintOf } from '../helpers/fingerprints.ts';
import { SecretBox } from '../../src/shared/secrets.ts';
import { tokenDigest, visitorTokenKey } from '../../src/shared/visitor-credentials.ts';
import { parseClaimHeaders, parseJwksUrl, publicHttpsUrl } from '../../src/control/validation.ts';

const SECRET_KEY = `settings-test-${randomBytes(16).toString('hex')}`;
const box = new SecretBox(SECRET_KEY);
const digestOf = (token: string) => tokenDigest(visitorTokenKey(box), token);

describe('JWT settings parsing', () => {
  it('takes https JWKS URLs with public hosts; http and private hosts only where private origins are allowed', () => {
    assert.equal(parseJwksUrl('https://IdP.example.com/keys?v=2', false), 'https://idp.example.com/keys?v=2');
    for (const raw of ['http://idp.example.com/keys', 'https://127.0.0.1/keys', 'https://192.168.1.2/keys', 'https://[fe80::1]/keys', 'https://0x7f.0.0.1/keys']) {
      assert.throws(() => parseJwksUrl(raw, false), { code: 'invalid_request' }, raw);
    }
    assert.equal(parseJwksUrl('http://127.0.0.1:8080/jwks', true), 'http://127.0.0.1:8080/jwks');
    assert.equal(parseJwksUrl('https://10.0.0.1/jwks', true), 'https://10.0.0.1/jwks');
    for (const raw of ['ftp://idp.example.com/keys', 'file:///etc/passwd', 'https://idp.example.com/keys#frag']) {
      assert.throws(() => parseJwksUrl(raw, true), { code: 'invalid_request' }, raw);
    }
  });

  it('names the field it refuses, so the JWKS and OAuth provider URLs share one check', () => {
    assert.throws(() => publicHttpsUrl('token_url', 'https://10.0.0.1/token', false), (err: any) => err.detail?.field === 'token_url');
    assert.throws(() => publicHttpsUrl('issuer', 'http://idp.example.com', false), (err: any) => err.detail?.field === 'issuer');
    assert.equal(publicHttpsUrl('issuer', 'https://idp.example.com', false).hostname, 'idp.example.com');
  });

  it('reads claim_headers as a JSON-encoded map, header names lower-cased', () => {
    assert.deepEqual(parseClaimHeaders(''), {});
    assert.deepEqual(parseClaimHeaders('{}'), {});
    assert.deepEqual(parseClaimHeaders('{"sub":"X-User","https://example.com/roles":"X-Roles"}'), { sub: 'x-user', 'https://example.com/roles': 'x-roles' });
    assert.throws(() => parseClaimHeaders(JSON.stringify(Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`c${i}`, `x-c${i}`])))), { code: 'invalid_request' });
  });
});

describe('visitor auth settings API', () => {
  let t: TestNode;
  let owner: User;
  before(async () => ({ t, owner } = await nodeWithOwner({ EDGE_SECRET_KEY: SECRET_KEY })));
  after(() => t.close());

  const sql = storeRows(() => t);
  const newEndpoint = async (user: User = owner, headers?: Record<string, string>) => (await createEndpoint(t, user, headers)).uuid;
  const settings = (id: string) => `/v1/endpoints/${id}/settings`;
  const get = (id: string, user: User = owner, headers?: Record<string, string>) => expectBody(200, t.api('GET', settings(id), { key: user.api_key, headers }));
  const put = (id: string, body: unknown, path = '', user: User = owner) => t.api('PUT', settings(id) + path, { key: user.api_key, body });
  const putOk = (id: string, body: unknown, path = '') => expectBody(200, put(id, body, path));
  /** What a refused write must not have changed: the API's view, the stored rows and the feed version. */
  const state = async (id: string, user: User = owner, headers?: Record<string, string>) => ({
    settings: await get(id, user, headers),
    rows: await sql(
      `SELECT (SELECT row_to_json(s) FROM endpoint_auth_settings s WHERE s.endpoint_id = e.id) AS s,
              (SELECT row_to_json(j) FROM endpoint_jwt_settings j WHERE j.endpoint_id = e.id) AS j,
              (SELECT row_to_json(w) FROM endpoint_webhook_verification w WHERE w.endpoint_id = e.id) AS w,
              (SELECT json_agg(u ORDER BY u.id) FROM endpoint_basic_users u WHERE u.endpoint_id = e.id) AS u,
              (SELECT json_agg(v ORDER BY v.id) FROM endpoint_visitor_tokens v WHERE v.endpoint_id = e.id) AS v,
              e.enforce_https
       FROM endpoints e WHERE e.uuid = $1`,
      [id],
    ),
    feed: await feedVersion(t),
  });
  const edgeEndpoint = (id: string) => edgeEndpointOf(t, id);

  const PASSWORD = 'correct horse battery staple';
  /** A well-formed bcrypt hash of cost 10, the base the bad password_hash cases alter. */
  const GOOD_HASH = bcrypt.hashSync('some password', 10);
  const TOKEN = 'tok_' + 'a'.repeat(28);

  // ---- read -------------------------------------------------------------------------------------------------

  it('reads an endpoint never configured as mode none, with nothing secret and no optional field', async () => {
    const id = await newEndpoint();
    const body = await get(id);
    assert.deepEqual(Object.keys(body).sort(), ['basic_users', 'endpoint_id', 'enforce_https', 'mode', 'tokens']);
    assert.equal(body.mode, 'none');
    assert.equal(body.enforce_https, false);
    assert.deepEqual(body.tokens, []);
    assert.deepEqual(body.basic_users, []);
    const [row] = await sql('SELECT id FROM endpoints WHERE uuid = $1', [id]);
    assert.equal(body.endpoint_id, row.id);
    const edge = await edgeEndpoint(id);
    assert.equal(edge.auth, undefined, 'no auth in the snapshot of an endpoint never configured (edges read it as none)');
  });

  // ---- basic ------------------------------------------------------------------------------------------------

  it('turns on basic auth: bcrypt hashes at cost ≥ 10, the GET shape back, and the users and realm on every edge', async () => {
    const id = await newEndpoint();
    const body = await putOk(id, { mode: 'basic', basic_users: [{ username: 'alice', password: PASSWORD }], config: { realm: 'Staff only' } });
    assert.equal(body.mode, 'basic');
    assert.deepEqual(body.config, { realm: 'Staff only' });
    assert.equal(body.basic_users.length, 1);
    assert.deepEqual(Object.keys(body.basic_users[0]).sort(), ['created_at', 'id', 'password_hash', 'username']);
    assert.equal(body.basic_users[0].username, 'alice');
    assert.deepEqual(await get(id), body, 'the PUT answers what GET reads');
    assert.ok(!JSON.stringify(body).includes(PASSWORD));

    const [stored] = await sql('SELECT password_hash FROM endpoint_basic_users WHERE id = $1', [body.basic_users[0].id]);
    assert.equal(body.basic_users[0].password_hash, stored.password_hash, 'a caller with endpoints:update reads the hash, never the password');
    assert.ok(bcrypt.getRounds(stored.password_hash) >= 10);
    assert.ok(await bcrypt.compare(PASSWORD, stored.password_hash));

    const edge = await edgeEndpoint(id);
    assert.equal(edge.auth?.mode, 'basic');
    assert.equal(edge.auth?.realm, 'Staff only');
    assert.deepEqual(edge.auth?.basic_users, [{ id: String(body.basic_users[0].id), username: 'alice', password_hash: stored.password_hash }]);
    assert.deepEqual(edge.auth?.tokens, []);
    assert.equal(edge.jwt, null);
    assert.equal(edge.webhook, null);
    assert.ok(!JSON.stringify(edge).includes(PASSWORD), 'no plaintext password in the snapshot');
  });

  it('defaults the realm to the hostname', async () => {
    const id = await newEndpoint();
    await putOk(id, { mode: 'basic', basic_users: [{ username: 'bob', password: PASSWORD }] });
    const edge = await edgeEndpoint(id);
    assert.equal(edge.auth?.realm, edge.hostname);
    assert.equal((await get(id)).config, undefined, 'no config stored, none reported');
  });

  it('keeps users by username: resending keeps ids, hashes and credentials_version; a new password keeps the id; a user left out is removed', async () => {
    const id = await newEndpoint();
    const first = await putOk(id, {
      mode: 'basic',
      basic_users: [
        { username: 'alice', password: PASSWORD },
        { username: 'bob', password: 'hunter22' },
      ],
    });
    const hashes = async () =>
      Object.fromEntries(
        (await sql('SELECT u.username, u.password_hash FROM endpoint_basic_users u JOIN endpoints e ON e.id = u.endpoint_id WHERE e.uuid = $1 ORDER BY u.id', [id])).map((r) => [
          r.username,
          r.password_hash,
        ]),
      );
    const before1 = await hashes();
    const v1 = (await edgeEndpoint(id)).auth!.credentials_version;

    const again = await putOk(id, {
      mode: 'basic',
      basic_users: [
        { username: 'alice', password: PASSWORD },
        { username: 'bob', password: 'hunter22' },
      ],
    });
    assert.deepEqual(again.basic_users, first.basic_users);
    assert.deepEqual(await hashes(), before1);
    assert.equal((await edgeEndpoint(id)).auth!.credentials_version, v1, 'nothing changed, caches stay');

    const changed = await putOk(id, { mode: 'basic', basic_users: [{ username: 'alice', password: 'a new password' }] });
    assert.deepEqual(
      changed.basic_users.map((u: any) => [u.id, u.username]),
      [[first.basic_users[0].id, 'alice']],
    );
    const after = await hashes();
    assert.notEqual(after.alice, before1.alice);
    assert.ok(await bcrypt.compare('a new password', after.alice));
    assert.equal(after.bob, undefined);
    const v2 = (await edgeEndpoint(id)).auth!.credentials_version;
    assert.ok(v2 > v1, 'edges are told to flush their verdict caches');
  });

  it('takes users as bcrypt hashes ($2a$, $2b$, $2y$; cost 10-15) stored and shown as sent, beside users with passwords', async () => {
    const id = await newEndpoint();
    const b10 = await bcrypt.hash('pw-b', 10);
    const y10 = '$2y$' + (await bcrypt.hash('pw-y', 10)).slice(4);
    const b11 = await bcrypt.hash('pw-c', 11);
    // The highest cost taken, made from a cost-10 hash rather than computed (32 times as slow): the API judges the form.
    const a15 = '$2a$15$' + (await bcrypt.hash('pw-a', 10)).slice(7);
    const body = await putOk(id, {
      mode: 'basic',
      basic_users: [
        { username: 'b', password_hash: b10 },
        { username: 'y', password_hash: y10 },
        { username: 'a', password_hash: a15 },
        { username: 'c', password_hash: b11 },
        { username: 'p', password: PASSWORD },
      ],
    });
    assert.deepEqual(body.basic_users.slice(0, 4).map((u: any) => [u.username, u.password_hash]), [['b', b10], ['y', y10], ['a', a15], ['c', b11]]);
    assert.ok(await bcrypt.compare(PASSWORD, body.basic_users[4].password_hash));
    const stored = await sql('SELECT u.password_hash FROM endpoint_basic_users u JOIN endpoints e ON e.id = u.endpoint_id WHERE e.uuid = $1 ORDER BY u.id', [id]);
    assert.deepEqual(stored.slice(0, 4).map((r) => r.password_hash), [b10, y10, a15, b11], 'stored exactly as sent');

    // Edges check with node's bcrypt, which knows $2y$ as $2b$ (the same algorithm).
    const edge = await edgeEndpoint(id);
    assert.deepEqual(edge.auth!.basic_users.slice(0, 4).map((u) => u.password_hash), [b10, '$2b$' + y10.slice(4), a15, b11]);
    assert.ok(await bcrypt.compare('pw-y', edge.auth!.basic_users[1].password_hash));

    // What an export reads back, applied again, changes nothing; nor does a password that matches a $2y$ hash.
    const v1 = edge.auth!.credentials_version;
    const exported = body.basic_users.map((u: any) => ({ username: u.username, password_hash: u.password_hash }));
    assert.deepEqual((await putOk(id, { mode: 'basic', basic_users: exported })).basic_users, body.basic_users);
    const hashOf = async (username: string) =>
      (await sql('SELECT password_hash FROM endpoint_basic_users u JOIN endpoints e ON e.id = u.endpoint_id WHERE e.uuid = $1 AND username = $2', [id, username]))[0].password_hash;
    const withPassword = (username: string, password: string) => exported.map((u: any) => (u.username === username ? { username, password } : u));
    await putOk(id, { mode: 'basic', basic_users: withPassword('y', 'pw-y') });
    assert.equal(await hashOf('y'), y10, 'the password matches the imported hash: kept');
    assert.equal((await edgeEndpoint(id)).auth!.credentials_version, v1, 'nothing changed, edges keep their caches');
    // A hash imported at a cost above the API's own is not compared (it would cost the shared pool 2^(cost-10) times
    // as much per user): the password is hashed anew, at cost 10.
    await putOk(id, { mode: 'basic', basic_users: withPassword('c', 'pw-c') });
    const c = await hashOf('c');
    assert.notEqual(c, b11);
    assert.equal(bcrypt.getRounds(c), 10);
    assert.ok(await bcrypt.compare('pw-c', c));
  });

  it('shows basic users’ password_hash only to callers holding endpoints:update', async () => {
    const orgOwner = await t.createUser('business');
    const reader = await t.createUser('business');
    const updater = await t.createUser('business');
    const org = await orgWithMember(t, orgOwner, reader, ['endpoints:read', 'endpoints:write', 'endpoints:delete']);
    await expectBody(201, t.api('POST', `/v1/organizations/${org.id}/members`, { key: orgOwner.api_key, body: { email: updater.email, permissions: ['endpoints:read', 'endpoints:update'] } }));
    const id = await newEndpoint(orgOwner, org.headers);
    const hash = await bcrypt.hash(PASSWORD, 10);
    const written = await expectBody(200, t.api('PUT', settings(id), { key: updater.api_key, headers: org.headers, body: { mode: 'basic', basic_users: [{ username: 'u', password_hash: hash }] } }));
    assert.equal(written.basic_users[0].password_hash, hash);

    const asReader = await get(id, reader, org.headers);
    assert.deepEqual(Object.keys(asReader.basic_users[0]).sort(), ['created_at', 'id', 'username'], 'a read-only caller sees no hash');
    assert.ok(!JSON.stringify(asReader).includes(hash.slice(7)));
    assert.equal((await get(id, updater, org.headers)).basic_users[0].password_hash, hash);
    assert.equal((await get(id, orgOwner, org.headers)).basic_users[0].password_hash, hash, 'owners hold every permission');
    assert.equal((await get(id, { api_key: t.adminKey } as User)).basic_users[0].password_hash, hash, 'admins too');
  });

  it('names the user and the rule a refused password_hash breaks', async () => {
    const id = await newEndpoint();
    const refusal = async (users: unknown[]) => (await expectBody(400, put(id, { mode: 'basic', basic_users: users }))).detail;
    assert.deepEqual(await refusal([{ username: 'a', password: 'x' }, { username: 'b', password: 'x', password_hash: GOOD_HASH }]), {
      field: 'basic_users.1',
      reason: 'exactly one of password and password_hash',
    });
    assert.deepEqual(await refusal([{ username: 'a', password_hash: GOOD_HASH.replace('$10$', '$16$') }]), {
      field: 'basic_users.0.password_hash',
      reason: 'cost 16: bcrypt cost must be between 10 and 15',
    });
    assert.match((await refusal([{ username: 'a', password_hash: 'plain' }])).reason, /^not a bcrypt hash/);
  });

  it('merges: omitted fields are kept, null clears them', async () => {
    const id = await newEndpoint();
    await putOk(id, {
      mode: 'basic',
      basic_users: [{ username: 'alice', password: PASSWORD }],
      config: { realm: 'R' },
      session_ttl_seconds: 3600,
      enforce_https: true,
    });
    const kept = await putOk(id, { mode: 'basic' });
    assert.deepEqual(kept.config, { realm: 'R' });
    assert.equal(kept.session_ttl_seconds, 3600);
    assert.equal(kept.enforce_https, true);
    assert.equal(kept.basic_users.length, 1);
    assert.equal((await edgeEndpoint(id)).enforce_https, true, 'enforce_https is written to the endpoint the HTTPS stage reads');

    const cleared = await putOk(id, { mode: 'basic', config: null, session_ttl_seconds: null, enforce_https: null });
    assert.equal(cleared.config, undefined);
    assert.equal(cleared.session_ttl_seconds, undefined);
    assert.equal(cleared.enforce_https, false);
    assert.equal(cleared.basic_users.length, 1);

    // Switching to none keeps the users (stored, not used); null removes them.
    const none = await putOk(id, { mode: 'none' });
    assert.equal(none.mode, 'none');
    assert.equal(none.basic_users.length, 1);
    assert.deepEqual((await edgeEndpoint(id)).auth?.basic_users, [], 'edges get only the credentials the mode uses');
    assert.equal((await putOk(id, { mode: 'none', basic_users: null })).basic_users.length, 0);
  });

  it('keeps each mode’s config apart: switching modes and back restores it', async () => {
    const id = await newEndpoint();
    await putOk(id, { mode: 'basic', basic_users: [{ username: 'alice', password: PASSWORD }], config: { realm: 'Back office' } });
    const token = await putOk(id, { mode: 'token', tokens: [{ name: 'ci', token: TOKEN }], config: { cookie: 'session_token' } });
    assert.equal(token.mode, 'cookie');
    assert.deepEqual(token.config, { cookie: 'session_token' });
    const back = await putOk(id, { mode: 'basic' });
    assert.deepEqual(back.config, { realm: 'Back office' });
  });

  it('accepts a password of exactly 72 bytes', async () => {
    const id = await newEndpoint();
    await putOk(id, { mode: 'basic', basic_users: [{ username: 'max', password: 'p'.repeat(72) }] });
    const [stored] = await sql('SELECT password_hash FROM endpoint_basic_users u JOIN endpoints e ON e.id = u.endpoint_id WHERE e.uuid = $1', [id]);
    assert.ok(await bcrypt.compare('p'.repeat(72), stored.password_hash));
  });

  // ---- token ------------------------------------------------------------------------------------------------

  it('turns on token mode: keyed digests stored and published, never the token; header and cookie sources reported', async () => {
    const id = await newEndpoint();
    const expires = new Date(Date.now() + 86_400_000).toISOString();
    const body = await putOk(id, {
      mode: 'token',
      tokens: [
        { name: 'ci', token: TOKEN },
        { name: 'deploy', token: 'deploy-' + 'b'.repeat(20), expires_at: expires },
      ],
    });
    assert.equal(body.mode, 'token');
    assert.deepEqual(
      body.tokens.map((x: any) => [x.label, x.source, x.expires_at]),
      [
        ['ci', 'settings', undefined],
        ['deploy', 'settings', expires],
      ],
    );
    for (const x of body.tokens) assert.deepEqual(Object.keys(x).sort(), x.expires_at ? ['created_at', 'expires_at', 'id', 'label', 'source'] : ['created_at', 'id', 'label', 'source']);
    assert.ok(!JSON.stringify(body).includes(TOKEN));
    const rows = await sql('SELECT digest FROM endpoint_visitor_tokens v JOIN endpoints e ON e.id = v.endpoint_id WHERE e.uuid = $1 ORDER BY v.id', [id]);
    assert.equal(rows[0].digest, digestOf(TOKEN));

    const edge = await edgeEndpoint(id);
    assert.deepEqual(edge.auth?.token_source, { kind: 'bearer' });
    assert.deepEqual(edge.auth?.tokens, [
      { id: String(body.tokens[0].id), label: 'ci', digest: digestOf(TOKEN), expires_at: null },
      { id: String(body.tokens[1].id), label: 'deploy', digest: digestOf('deploy-' + 'b'.repeat(20)), expires_at: expires },
    ]);
    assert.ok(!JSON.stringify(edge).includes(TOKEN), 'no plaintext token in the snapshot');

    const header = await putOk(id, { mode: 'token', config: { header: 'X-Api-Token' } });
    assert.equal(header.mode, 'header');
    assert.deepEqual(header.config, { header: 'x-api-token' });
    assert.deepEqual((await edgeEndpoint(id)).auth?.token_source, { kind: 'header', name: 'x-api-token' });
    const cookie = await putOk(id, { mode: 'token', config: { cookie: 'tok' } });
    assert.equal(cookie.mode, 'cookie');
    assert.deepEqual((await edgeEndpoint(id)).auth?.token_source, { kind: 'cookie', name: 'tok' });
  });

  it('keeps tokens by value: resent ones keep their ids (renamed in place), others are removed, API keys untouched', async () => {
    const id = await newEndpoint();
    const first = await putOk(id, { mode: 'token', tokens: [{ name: 'one', token: TOKEN }, { name: 'two', token: 'second-' + 'c'.repeat(20) }] });
    const key = await t.api('POST', `/v1/endpoints/${id}/api-keys`, { key: owner.api_key, body: { name: 'robot' } });
    assert.equal(key.status, 201, key.text);
    const next = await putOk(id, { mode: 'token', tokens: [{ name: 'renamed', token: TOKEN }] });
    assert.deepEqual(
      next.tokens.map((x: any) => [x.id, x.label, x.source]),
      [
        [first.tokens[0].id, 'renamed', 'settings'],
        [key.body.id, 'robot', 'api_key'],
      ],
    );
    // null removes every settings token; the API key keeps token mode possible.
    const cleared = await putOk(id, { mode: 'token', tokens: null });
    assert.deepEqual(
      cleared.tokens.map((x: any) => x.source),
      ['api_key'],
    );
  });

  // ---- JWT layer ----------------------------------------------------------------------------------------------

  it('turns the JWT layer on (200, empty body), reports it, publishes it; disabling keeps the stored config', async () => {
    const id = await newEndpoint();
    const res = await put(id, { enabled: true, jwks_url: 'https://login.example.com/.well-known/jwks.json', issuer: 'https://login.example.com/', audience: 'api', claim_headers: '{"sub":"X-User","email":"X-User-Email"}' }, '/jwt');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.text, '');
    const body = await get(id);
    assert.equal(body.mode, 'jwt', 'main mode none with the JWT layer on reads jwt');
    assert.deepEqual(body.config, {
      jwks_url: 'https://login.example.com/.well-known/jwks.json',
      issuer: 'https://login.example.com/',
      audience: 'api',
      claim_headers: '{"sub":"x-user","email":"x-user-email"}',
    });
    assert.deepEqual((await edgeEndpoint(id)).jwt, {
      jwks_url: 'https://login.example.com/.well-known/jwks.json',
      issuer: 'https://login.example.com/',
      audience: 'api',
      claim_headers: { sub: 'x-user', email: 'x-user-email' },
    });

    assert.equal((await put(id, { enabled: false }, '/jwt')).status, 200);
    assert.equal((await get(id)).mode, 'none');
    assert.equal((await get(id)).config, undefined);
    assert.equal((await edgeEndpoint(id)).jwt, null);
    // Enabled again without resending anything: the stored configuration is back.
    assert.equal((await put(id, { enabled: true }, '/jwt')).status, 200);
    assert.equal((await edgeEndpoint(id)).jwt?.audience, 'api');
    // Empty issuer/audience: not enforced (null in the snapshot).
    assert.equal((await put(id, { enabled: true, issuer: '', audience: '', claim_headers: '' }, '/jwt')).status, 200);
    assert.deepEqual((await edgeEndpoint(id)).jwt, { jwks_url: 'https://login.example.com/.well-known/jwks.json', issuer: null, audience: null, claim_headers: {} });
  });

  it('reports the main mode beside the JWT layer, with both configs', async () => {
    const id = await newEndpoint();
    await putOk(id, { mode: 'token', tokens: [{ name: 'ci', token: TOKEN }], config: { header: 'X-Api-Token' } });
    assert.equal((await put(id, { enabled: true, jwks_url: 'https://idp.example.com/jwks' }, '/jwt')).status, 200);
    const body = await get(id);
    assert.equal(body.mode, 'header');
    assert.equal(body.config.header, 'x-api-token');
    assert.equal(body.config.jwks_url, 'https://idp.example.com/jwks');
  });

  // ---- webhook verification -----------------------------------------------------------------------------------

  it('turns webhook verification on: the secret sealed at rest and in the snapshot, never returned', async () => {
    const id = await newEndpoint();
    const secret = "It's a Secret to Everybody";
    const res = await put(id, { enabled: true, header: 'X-Hub-Signature-256', algo: 'sha256', secret, prefix: 'sha256=' }, '/webhook');
    assert.equal(res.status, 200, res.text);
    const fingerprint = res.body.config.webhook.secret_fingerprint;
    assert.deepEqual(res.body.config, { webhook: { header: 'x-hub-signature-256', algo: 'sha256', prefix: 'sha256=', secret_fingerprint: fingerprint } });
    await assertFingerprintOf(fingerprint, secret, 'webhook secret');
    assert.deepEqual(await get(id), res.body);
    assert.ok(!res.text.includes(secret));
    const [row] = await sql('SELECT w.secret_sealed FROM endpoint_webhook_verification w JOIN endpoints e ON e.id = w.endpoint_id WHERE e.uuid = $1', [id]);
    assert.ok(!row.secret_sealed.includes(secret));
    const edge = await edgeEndpoint(id);
    assert.equal(edge.webhook?.header, 'x-hub-signature-256');
    assert.equal(edge.webhook?.algo, 'sha256');
    assert.equal(edge.webhook?.prefix, 'sha256=');
    assert.equal(box.open(edge.webhook!.secret_sealed), secret, 'edges open the secret with the shared key');
    assert.ok(!JSON.stringify(edge).includes(secret));
    assert.ok(!JSON.stringify(edge).includes(fingerprint), 'the fingerprint is for API clients, not edges');

    // Disabled keeps the stored secret; enabled again with a new algo alone.
    assert.equal((await put(id, { enabled: false }, '/webhook')).status, 200);
    assert.equal((await edgeEndpoint(id)).webhook, null);
    assert.equal((await get(id)).config, undefined);
    const again = await put(id, { enabled: true, algo: 'sha1', prefix: 'sha1=' }, '/webhook');
    assert.equal(again.status, 200, again.text);
    assert.equal(box.open((await edgeEndpoint(id)).webhook!.secret_sealed), secret);
    assert.equal((await edgeEndpoint(id)).webhook!.algo, 'sha1');
    assert.equal(again.body.config.webhook.secret_fingerprint, fingerprint, 'a kept secret keeps its fingerprint');

    // A new secret, a new fingerprint; a read-only caller sees it too (it reveals nothing guessable).
    const rotated = await expectBody(200, put(id, { enabled: true, secret: 'rotated secret, 2nd' }, '/webhook'));
    assert.notEqual(rotated.config.webhook.secret_fingerprint, fingerprint);
    await assertFingerprintOf(rotated.config.webhook.secret_fingerprint, 'rotated secret, 2nd', 'rotated webhook secret');
    // A secret stored before fingerprints existed reads null until it is sent again.
    await sql('UPDATE endpoint_webhook_verification w SET secret_fingerprint = NULL FROM endpoints e WHERE e.id = w.endpoint_id AND e.uuid = $1', [id]);
    assert.equal((await get(id)).config.webhook.secret_fingerprint, null);
  });

  // ---- refusals ---------------------------------------------------------------------------------------------

  it('refuses every bad settings body with a 400 that changes nothing', async () => {
    const id = await newEndpoint();
    await putOk(id, { mode: 'basic', basic_users: [{ username: 'alice', password: PASSWORD }], config: { realm: 'R' }, session_ttl_seconds: 60 });
    const before = await state(id);
    const user = (over: Record<string, unknown> = {}) => ({ username: 'carol', password: 'pw', ...over });
    const cases: Array<[string, unknown, string?]> = [
      ['unknown field', { mode: 'basic', colour: 'red' }, 'unknown_field'],
      ['mode missing', {}],
      ['mode not a string', { mode: 1 }],
      ['unknown mode', { mode: 'digest' }],
      ['mode null', { mode: null }],
      ['basic_users with mode token', { mode: 'token', basic_users: [user()], tokens: [{ name: 'x', token: TOKEN }] }],
      ['tokens with mode basic', { mode: 'basic', tokens: [{ name: 'x', token: TOKEN }] }],
      ['basic_users with mode none', { mode: 'none', basic_users: [user()] }],
      ['tokens with mode none, even empty', { mode: 'none', tokens: [] }],
      ['mode basic with no users left', { mode: 'basic', basic_users: [] }],
      ['mode basic, users cleared', { mode: 'basic', basic_users: null }],
      ['mode token with no tokens and no API keys', { mode: 'token' }],
      ['mode token with an empty token list', { mode: 'token', tokens: [] }],
      ['password of 73 bytes', { mode: 'basic', basic_users: [user({ password: 'p'.repeat(73) })] }],
      ['password of 74 UTF-8 bytes in 37 characters', { mode: 'basic', basic_users: [user({ password: 'é'.repeat(37) })] }],
      ['empty password', { mode: 'basic', basic_users: [user({ password: '' })] }],
      ['username with a colon', { mode: 'basic', basic_users: [user({ username: 'a:b' })] }],
      ['username with a control character', { mode: 'basic', basic_users: [user({ username: 'a\nb' })] }],
      ['username twice', { mode: 'basic', basic_users: [user(), user()] }],
      ['user with an unknown field', { mode: 'basic', basic_users: [user({ role: 'admin' })] }, 'unknown_field'],
      ['basic_users not an array', { mode: 'basic', basic_users: { username: 'a', password: 'b' } }],
      ['both password and password_hash', { mode: 'basic', basic_users: [user({ password_hash: GOOD_HASH })] }],
      ['neither password nor password_hash', { mode: 'basic', basic_users: [{ username: 'carol' }] }],
      ['password_hash not bcrypt (argon2)', { mode: 'basic', basic_users: [{ username: 'carol', password_hash: '$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo' }] }],
      ['password_hash a SHA-256 hex digest', { mode: 'basic', basic_users: [{ username: 'carol', password_hash: 'a'.repeat(60) }] }],
      ['password_hash of variant $2x$', { mode: 'basic', basic_users: [{ username: 'carol', password_hash: '$2x$' + GOOD_HASH.slice(4) }] }],
      ['password_hash of cost 9', { mode: 'basic', basic_users: [{ username: 'carol', password_hash: GOOD_HASH.replace('$10$', '$09$') }] }],
      ['password_hash of cost 4', { mode: 'basic', basic_users: [{ username: 'carol', password_hash: GOOD_HASH.replace('$10$', '$04$') }] }],
      ['password_hash of cost 16', { mode: 'basic', basic_users: [{ username: 'carol', password_hash: GOOD_HASH.replace('$10$', '$16$') }] }],
      ['password_hash one character short', { mode: 'basic', basic_users: [{ username: 'carol', password_hash: GOOD_HASH.slice(0, -1) }] }],
      ['password_hash with a character outside bcrypt’s alphabet', { mode: 'basic', basic_users: [{ username: 'carol', password_hash: GOOD_HASH.slice(0, -1) + '+' }] }],
      ['password_hash empty', { mode: 'basic', basic_users: [{ username: 'carol', password_hash: '' }] }],
      ['password_hash not a string', { mode: 'basic', basic_users: [{ username: 'carol', password_hash: 10 }] }],
      ['password_hash with mode token', { mode: 'token', tokens: [{ name: 'x', token: TOKEN }], basic_users: [{ username: 'carol', password_hash: GOOD_HASH }] }],
      ['session_ttl_seconds 0', { mode: 'basic', session_ttl_seconds: 0 }],
      ['session_ttl_seconds -1', { mode: 'basic', session_ttl_seconds: -1 }],
      ['session_ttl_seconds fractional', { mode: 'basic', session_ttl_seconds: 1.5 }],
      ['session_ttl_seconds as a string', { mode: 'basic', session_ttl_seconds: '60' }],
      ['enforce_https as a string', { mode: 'basic', enforce_https: 'yes' }],
      ['basic config with an unknown key', { mode: 'basic', config: { realm: 'x', header: 'x-a' } }],
      ['realm with a quote', { mode: 'basic', config: { realm: 'a"b' } }],
      ['realm empty', { mode: 'basic', config: { realm: '' } }],
      ['config not an object', { mode: 'basic', config: 'realm' }],
      ['token config with header and cookie', { mode: 'token', tokens: [{ name: 'x', token: TOKEN }], config: { header: 'x-a', cookie: 'c' } }],
      ['token header not a field name', { mode: 'token', tokens: [{ name: 'x', token: TOKEN }], config: { header: 'x a' } }],
      ['token header host', { mode: 'token', tokens: [{ name: 'x', token: TOKEN }], config: { header: 'Host' } }],
      ['token header x-forwarded-for', { mode: 'token', tokens: [{ name: 'x', token: TOKEN }], config: { header: 'X_Forwarded_For' } }],
      ['token cookie not a token', { mode: 'token', tokens: [{ name: 'x', token: TOKEN }], config: { cookie: 'a;b' } }],
      ['token config with a realm', { mode: 'token', tokens: [{ name: 'x', token: TOKEN }], config: { realm: 'x' } }],
      ['none config with a key', { mode: 'none', config: { realm: 'x' } }],
      ['token shorter than 16 characters', { mode: 'token', tokens: [{ name: 'x', token: 'short' }] }],
      ['token with a space', { mode: 'token', tokens: [{ name: 'x', token: 'a'.repeat(10) + ' ' + 'b'.repeat(10) }] }],
      ['token expired', { mode: 'token', tokens: [{ name: 'x', token: TOKEN, expires_at: '2001-01-01T00:00:00Z' }] }],
      ['token expiry not a timestamp', { mode: 'token', tokens: [{ name: 'x', token: TOKEN, expires_at: 'tomorrow' }] }],
      ['token name twice', { mode: 'token', tokens: [{ name: 'x', token: TOKEN }, { name: 'x', token: TOKEN + 'z' }] }],
      ['token value twice', { mode: 'token', tokens: [{ name: 'x', token: TOKEN }, { name: 'y', token: TOKEN }] }],
      ['token without a name', { mode: 'token', tokens: [{ token: TOKEN }] }],
      ['mode oauth without providers', { mode: 'oauth' }],
      ['mode oidc without providers', { mode: 'oidc' }],
      ['unknown provider in enabled_auth_methods', { mode: 'basic', enabled_auth_methods: ['42'] }],
      ['non-numeric provider in enabled_auth_methods', { mode: 'basic', enabled_auth_methods: ['google'] }],
      ['mode oauth with a config but no provider', { mode: 'oauth', config: { allowed_redirects: ['/home'] } }],
      ['OAuth config keys in mode basic', { mode: 'basic', config: { scopes: ['openid'] } }],
    ];
    for (const [name, body, code] of cases) {
      const res = await put(id, body);
      assert.equal(res.status, 400, `${name}: ${res.status} ${res.text}`);
      if (code) assert.equal(res.body.code, code, name);
      else assert.match(res.body.code, /^invalid_request|unknown_field$/, name);
    }
    const raw = await t.api('PUT', settings(id), { key: owner.api_key, raw: '{"mode": "basic",', headers: { 'content-type': 'application/json' } });
    assert.equal(raw.status, 400);
    assert.equal(raw.body.code, 'invalid_json');
    assert.deepEqual(await state(id), before);
  });

  it('realm above U+00FF crashes the edge: a realm that is not printable ASCII (or has a quote or backslash) is a 400 that changes nothing', async () => {
    const id = await newEndpoint();
    await putOk(id, { mode: 'basic', basic_users: [{ username: 'alice', password: PASSWORD }], config: { realm: 'Staff only' } });
    const before = await state(id);
    for (const realm of ['Zone €', 'Zoné', 'tab\there', 'new\nline', 'del\x7f', 'a\\b', 'a"b', '\u00a0nbsp']) {
      const res = await put(id, { mode: 'basic', config: { realm } });
      assert.equal(res.status, 400, `${JSON.stringify(realm)}: ${res.status} ${res.text}`);
      assert.equal(res.body.code, 'invalid_request', realm);
      assert.equal(res.body.detail?.field, 'config.realm', realm);
    }
    assert.deepEqual(await state(id), before);
    // Every printable ASCII character but the two quoted-string escapes is taken.
    const printable = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).filter((c) => c !== '"' && c !== '\\').join('');
    assert.deepEqual((await putOk(id, { mode: 'basic', config: { realm: printable.slice(0, 100) } })).config, { realm: printable.slice(0, 100) });
  });

  it('refuses every bad JWT body with a 400 that changes nothing', async () => {
    const id = await newEndpoint();
    const fresh = await newEndpoint();
    const ok = { enabled: true, jwks_url: 'https://idp.example.com/jwks' };
    assert.equal((await put(id, ok, '/jwt')).status, 200);
    const before = await state(id);
    const beforeFresh = await state(fresh);
    const claims = (map: Record<string, unknown>) => ({ ...ok, claim_headers: JSON.stringify(map) });
    const cases: Array<[string, unknown, string?]> = [
      ['enabled missing', { jwks_url: ok.jwks_url }],
      ['enabled not a boolean', { enabled: 'true' }],
      ['unknown field', { ...ok, algorithms: ['RS256'] }, 'unknown_field'],
      ['http jwks_url', { enabled: true, jwks_url: 'http://idp.example.com/jwks' }],
      ['not a URL', { enabled: true, jwks_url: 'idp.example.com/jwks' }],
      ['ftp', { enabled: true, jwks_url: 'ftp://idp.example.com/jwks' }],
      ['loopback', { enabled: true, jwks_url: 'https://127.0.0.1/jwks' }],
      ['private', { enabled: true, jwks_url: 'https://10.1.2.3/jwks' }],
      ['link-local metadata', { enabled: true, jwks_url: 'https://169.254.169.254/latest' }],
      ['IPv6 loopback', { enabled: true, jwks_url: 'https://[::1]/jwks' }],
      ['localhost', { enabled: true, jwks_url: 'https://localhost/jwks' }],
      ['credentials in the URL', { enabled: true, jwks_url: 'https://u:p@idp.example.com/jwks' }],
      ['jwks_url not a string', { enabled: true, jwks_url: 5 }],
      ['claim_headers not JSON', { ...ok, claim_headers: '{sub: X-User}' }],
      ['claim_headers an array', { ...ok, claim_headers: '["sub"]' }],
      ['claim_headers a string', { ...ok, claim_headers: '"sub"' }],
      ['claim_headers an object, not a string', { ...ok, claim_headers: { sub: 'x-user' } }],
      ['claim header not a string', claims({ sub: 5 })],
      ['claim to host', claims({ sub: 'host' })],
      ['claim to x-forwarded-for', claims({ sub: 'x-forwarded-for' })],
      ['claim to X_Forwarded_For', claims({ sub: 'X_Forwarded_For' })],
      ['claim to x-forwarded-proto', claims({ sub: 'X-Forwarded-Proto' })],
      ['claim to forwarded', claims({ sub: 'Forwarded' })],
      ['claim to x-real-ip', claims({ sub: 'X-Real-IP' })],
      ['claim to connection', claims({ sub: 'connection' })],
      ['claim to keep-alive', claims({ sub: 'Keep-Alive' })],
      ['claim to upgrade', claims({ sub: 'upgrade' })],
      ['claim to authorization', claims({ sub: 'authorization' })],
      ['claim to cookie', claims({ sub: 'Cookie' })],
      ['claim to content-length', claims({ sub: 'Content-Length' })],
      ['claim to transfer-encoding', claims({ sub: 'Transfer-Encoding' })],
      ['claim to the edge’s identity header', claims({ sub: 'X-Edge-Auth-User' })],
      ['claim header with a space', claims({ sub: 'X User' })],
      ['claim header with a colon', claims({ sub: 'x-user:' })],
      ['claim header with parentheses', claims({ sub: 'x(user)' })],
      ['claim header empty', claims({ sub: '' })],
      ['two claims into one header', claims({ sub: 'x-user', email: 'X_User' })],
      ['empty claim name', claims({ '': 'x-user' })],
      ['prototype key', { ...ok, claim_headers: '{"__proto__": "x-user"}' }],
    ];
    for (const [name, body, code] of cases) {
      const res = await put(id, body, '/jwt');
      assert.equal(res.status, 400, `${name}: ${res.status} ${res.text}`);
      if (code) assert.equal(res.body.code, code, name);
    }
    assert.deepEqual(await state(id), before);
    const missing = await put(fresh, { enabled: true }, '/jwt');
    assert.equal(missing.status, 400, 'enabled true without a jwks_url, none stored');
    assert.equal(missing.body.detail.field, 'jwks_url');
    assert.deepEqual(await state(fresh), beforeFresh);
  });

  it('refuses every bad webhook body with a 400 that changes nothing', async () => {
    const id = await newEndpoint();
    const ok = { enabled: true, header: 'X-Signature', algo: 'sha256', secret: 's3cret' };
    const fresh = await newEndpoint();
    assert.equal((await put(id, ok, '/webhook')).status, 200);
    const before = await state(id);
    const beforeFresh = await state(fresh);
    const cases: Array<[string, unknown]> = [
      ['enabled missing', { header: 'x-sig' }],
      ['unknown field', { ...ok, encoding: 'hex' }],
      ['algo md5', { ...ok, algo: 'md5' }],
      ['header not a field name', { ...ok, header: 'x sig' }],
      ['header host', { ...ok, header: 'Host' }],
      ['header connection', { ...ok, header: 'Connection' }],
      ['empty secret', { ...ok, secret: '' }],
      ['prefix with a space', { ...ok, prefix: 'sha 256=' }],
      ['prefix too long', { ...ok, prefix: 'p'.repeat(33) }],
    ];
    for (const [name, body] of cases) {
      const res = await put(id, body, '/webhook');
      assert.equal(res.status, 400, `${name}: ${res.status} ${res.text}`);
    }
    assert.deepEqual(await state(id), before);
    for (const body of [{ enabled: true, header: 'x-sig', algo: 'sha256' }, { enabled: true, secret: 'x', algo: 'sha1' }, { enabled: true, header: 'x-sig', secret: 'x' }]) {
      const res = await put(fresh, body, '/webhook');
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
    }
    assert.deepEqual(await state(fresh), beforeFresh);
  });

  // ---- access -----------------------------------------------------------------------------------------------

  it('answers 404 for another account’s endpoint and 401 without a key, changing nothing', async () => {
    const id = await newEndpoint();
    const stranger = await t.createUser('business');
    const before = await state(id);
    for (const [method, path, body] of [
      ['GET', '', undefined],
      ['PUT', '', { mode: 'none' }],
      ['PUT', '/jwt', { enabled: false }],
      ['PUT', '/webhook', { enabled: false }],
    ] as const) {
      const res = await t.api(method, settings(id) + path, { key: stranger.api_key, body });
      assert.equal(res.status, 404, `${method} ${path}`);
      assert.equal(res.body.code, 'not_found');
      const anonymous = await t.api(method, settings(id) + path, { key: null, body });
      assert.equal(anonymous.status, 401, `${method} ${path}`);
    }
    const malformed = await t.api('GET', settings('not-a-uuid'), { key: owner.api_key });
    assert.equal(malformed.status, 400);
    assert.equal(malformed.body.code, 'invalid_id');
    assert.deepEqual(await state(id), before);
  });

  it('needs endpoints:read to read and endpoints:update to write, in the active account', async () => {
    const orgOwner = await t.createUser('business');
    const reader = await t.createUser('business');
    const { headers } = await orgWithMember(t, orgOwner, reader, ['endpoints:read']);
    const id = await newEndpoint(orgOwner, headers);
    const before = await state(id, orgOwner, headers);

    const read = await t.api('GET', settings(id), { key: reader.api_key, headers });
    assert.equal(read.status, 200, read.text);
    for (const [path, body] of [
      ['', { mode: 'basic', basic_users: [{ username: 'a', password: 'b' }] }],
      ['/jwt', { enabled: true, jwks_url: 'https://idp.example.com/jwks' }],
      ['/webhook', { enabled: true, header: 'x-sig', algo: 'sha256', secret: 's' }],
    ] as const) {
      const res = await t.api('PUT', settings(id) + path, { key: reader.api_key, body, headers });
      assert.equal(res.status, 403, `PUT ${path}: ${res.text}`);
      assert.equal(res.body.code, 'permission_denied');
      assert.equal(res.body.detail.permission, 'endpoints:update');
    }
    // Outside the organization (the reader's personal account is active), the endpoint is not visible at all.
    assert.equal((await t.api('GET', settings(id), { key: reader.api_key })).status, 404);
    assert.deepEqual(await state(id, orgOwner, headers), before);
  });

  it('keeps a paused endpoint’s settings read-only (409 quota_paused) and readable', async () => {
    const id = await newEndpoint();
    assert.equal((await t.api('POST', `/v1/admin/endpoints/${id}/pause`)).status, 200);
    const before = await state(id);
    for (const [path, body] of [
      ['', { mode: 'basic', basic_users: [{ username: 'a', password: 'b' }] }],
      ['/jwt', { enabled: true, jwks_url: 'https://idp.example.com/jwks' }],
      ['/webhook', { enabled: true, header: 'x-sig', algo: 'sha256', secret: 's' }],
    ] as const) {
      const res = await put(id, body, path);
      assert.equal(res.status, 409, `PUT ${path}: ${res.text}`);
      assert.equal(res.body.code, 'quota_paused');
    }
    assert.deepEqual(await state(id), before);
    assert.equal((await t.api('POST', `/v1/admin/endpoints/${id}/unpause`)).status, 200);
  });

  it('lists the visitor auth operations in the OpenAPI document', async () => {
    const doc = (await t.api('GET', '/v1/openapi.json', { key: null })).body;
    const paths = doc.paths;
    assert.ok(paths['/v1/endpoints/{id}/settings'].get);
    assert.ok(paths['/v1/endpoints/{id}/settings'].put);
    assert.ok(paths['/v1/endpoints/{id}/settings/jwt'].put);
    assert.ok(paths['/v1/endpoints/{id}/settings/webhook'].put);
    assert.ok(paths['/v1/endpoints/{id}/api-keys'].post);
    assert.ok(paths['/v1/endpoints/{id}/api-keys'].get);
    assert.ok(paths['/v1/endpoints/{id}/api-keys/{key_id}'].get);
    assert.ok(paths['/v1/endpoints/{id}/api-keys/{key_id}'].delete);
  });
});

describe('basic users given as bcrypt hashes, at the edge', () => {
  let t: TestNode;
  let owner: User;
  let service: Awaited<ReturnType<typeof startEchoService>>;
  before(async () => {
    service = await startEchoService();
    // The echo service is the endpoint's origin, on loopback.
    ({ t, owner } = await nodeWithOwner({ EDGE_ORIGIN_ALLOW_PRIVATE: 'true' }));
  });
  after(async () => {
    await t?.close();
    await service?.close();
  });

  const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

  it('lets a visitor log in with the password whose hash was imported, whatever the variant and cost; a wrong one is 401', async () => {
    const e = await createEndpoint(t, owner);
    await expectBody(200, t.api('PUT', `/v1/endpoints/${e.uuid}/origin`, { key: owner.api_key, body: { url: `http://127.0.0.1:${service.port}` } }));
    const users = [
      { username: 'bea', password: 'bea-password', hash: await bcrypt.hash('bea-password', 10) },
      { username: 'yan', password: 'yan-password', hash: '$2y$' + (await bcrypt.hash('yan-password', 11)).slice(4) },
      { username: 'ada', password: 'ada-password', hash: '$2a$' + (await bcrypt.hash('ada-password', 10)).slice(4) },
    ];
    await expectBody(
      200,
      t.api('PUT', `/v1/endpoints/${e.uuid}/settings`, {
        key: owner.api_key,
        body: { mode: 'basic', basic_users: users.map((u) => ({ username: u.username, password_hash: u.hash })) },
      }),
    );
    await edgeCaughtUp(t);
    const edgePort = t.node.edge!.httpPort;
    for (const u of users) {
      const ok = await visit(edgePort, e.hostname, '/in', { headers: { authorization: basic(u.username, u.password) } });
      assert.equal(ok.status, 200, `${u.username}: ${ok.body}`);
      assert.equal(JSON.parse(ok.body).headers['x-edge-auth-user'], u.username, 'reached the origin as this user');
      const wrong = await visit(edgePort, e.hostname, '/in', { headers: { authorization: basic(u.username, `${u.password}!`) } });
      assert.equal(wrong.status, 401, u.username);
    }
    assert.equal((await visit(edgePort, e.hostname, '/in')).status, 401, 'no credentials');
  });
});
