// OAuth/OIDC providers over real HTTP: create, list, get, replace, toggle and delete; the OAuth settings (modes oauth
// and oidc, enabled_auth_methods, allowed_redirects, scopes); what edges receive; refusals that change nothing; access.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { TestNode } from '../helpers/node.ts';
import { createEndpoint, edgeEndpoint as edgeEndpointOf, expectBody, feedVersion, nodeWithOwner, orgWithMember, storeRows, type User } from '../helpers/endpoint-api.ts';
import { assertFingerprintOf } from '../helpers/fingerprints.ts';
import { SecretBox } from '../../src/shared/secrets.ts';
import { allowedDomain, allowedRedirect, parseIssuer } from '../../src/control/validation.ts';
import { providerInput } from '../../src/control/services/oauth-providers.ts';
import { MAX_OAUTH_PROVIDERS } from '../../src/store/oauth-providers.ts';

const SECRET_KEY = `oauth-test-${randomBytes(16).toString('hex')}`;
const box = new SecretBox(SECRET_KEY);

describe('OAuth provider parsing', () => {
  it('keeps the issuer exactly as sent once it is a public https URL without query or fragment', () => {
    assert.equal(parseIssuer('https://accounts.google.com', false), 'https://accounts.google.com', 'no trailing slash added: iss is compared as a string');
    assert.equal(parseIssuer('https://login.example.com/tenant/v2.0', false), 'https://login.example.com/tenant/v2.0');
    for (const raw of [
      'http://idp.example.com',
      'https://127.0.0.1',
      'https://10.0.0.8/realms/x',
      'https://[::1]/',
      'https://localhost/',
      'https://169.254.169.254/',
      'https://idp.example.com/?tenant=1',
      'https://idp.example.com/#x',
      'https://u:p@idp.example.com',
      'idp.example.com',
      'ftp://idp.example.com',
    ]) {
      assert.throws(() => parseIssuer(raw, false), { code: 'invalid_request' }, raw);
    }
    assert.equal(parseIssuer('http://127.0.0.1:9000/oidc', true), 'http://127.0.0.1:9000/oidc', 'development: private origins allowed');
  });

  it('takes allowed domains as lower-case A-labels of two labels or more', () => {
    assert.equal(allowedDomain('Example.COM', 'd'), 'example.com');
    assert.equal(allowedDomain('bücher.example', 'd'), 'xn--bcher-kva.example');
    for (const raw of ['@example.com', '*.example.com', 'localhost', 'exa mple.com', 'a..b', '192.168.0.1', '-x.example', 'x'.repeat(64) + '.com']) {
      assert.throws(() => allowedDomain(raw, 'd'), { code: 'invalid_request' }, raw);
    }
  });

  it('takes return targets that stay on the endpoint’s host', () => {
    const host = 'app.edge.test';
    for (const raw of ['/', '/after-login', '/a/b?x=1#top', '/%2F%2Fkept-encoded']) assert.equal(allowedRedirect(raw, host, 'r'), raw);
    assert.equal(allowedRedirect('https://APP.edge.test/x', host, 'r'), 'https://app.edge.test/x');
    assert.equal(allowedRedirect('https://app.edge.test:8443/x', host, 'r'), 'https://app.edge.test:8443/x');
    for (const raw of [
      '//evil.example',
      '/\\evil.example',
      '/a\\b',
      'https://evil.example/',
      'https://app.edge.test.evil.example/',
      'https://app.edge.test@evil.example/',
      'https://u:p@app.edge.test/',
      'http://app.edge.test/',
      'javascript:alert(1)',
      'after-login',
      '/a b',
      '/a\nb',
      '/caf\u00e9',
    ]) {
      assert.throws(() => allowedRedirect(raw, host, 'r'), { code: 'invalid_request' }, raw);
    }
  });

  it('takes oauth2 endpoints only for kind oauth2, and needs all three there', () => {
    const base = { name: 'x', issuer: 'https://idp.example.com', client_id: 'c' };
    const urls = { authorization_url: 'https://idp.example.com/auth', token_url: 'https://idp.example.com/token', userinfo_url: 'https://idp.example.com/me' };
    assert.equal(providerInput({ ...base, kind: 'oauth2', ...urls }, false).tokenUrl, 'https://idp.example.com/token');
    assert.throws(() => providerInput({ ...base, kind: 'oidc', token_url: urls.token_url }, false), { code: 'invalid_request' });
    for (const missing of Object.keys(urls)) {
      const body = { ...base, kind: 'oauth2', ...urls, [missing]: undefined };
      assert.throws(() => providerInput(body, false), { code: 'invalid_request' }, missing);
    }
    assert.throws(() => providerInput({ ...base, kind: 'oauth2', ...urls, token_url: 'http://127.0.0.1/token' }, false), { code: 'invalid_request' });
    assert.equal(providerInput({ ...base, kind: 'oauth2', ...urls, token_url: 'http://127.0.0.1/token' }, true).tokenUrl, 'http://127.0.0.1/token');
  });
});

describe('OAuth providers API', () => {
  let t: TestNode;
  let owner: User;
  before(async () => ({ t, owner } = await nodeWithOwner({ EDGE_SECRET_KEY: SECRET_KEY })));
  after(() => t.close());

  const sql = storeRows(() => t);
  const newEndpoint = (user: User = owner, headers?: Record<string, string>) => createEndpoint(t, user, headers);
  const providers = (id: string) => `/v1/endpoints/${id}/oauth/providers`;
  const SECRET = 'client-secret-' + randomBytes(12).toString('hex');
  const oidc = (over: Record<string, unknown> = {}) => ({
    kind: 'oidc',
    name: 'Company SSO',
    issuer: 'https://idp.example.com',
    client_id: 'edge-client',
    client_secret: SECRET,
    ...over,
  });
  const oauth2 = (over: Record<string, unknown> = {}) => ({
    kind: 'oauth2',
    name: 'GitHub',
    issuer: 'https://github.com',
    client_id: 'gh-client',
    client_secret: SECRET + '-gh',
    authorization_url: 'https://github.com/login/oauth/authorize',
    token_url: 'https://github.com/login/oauth/access_token',
    userinfo_url: 'https://api.github.com/user',
    scopes: ['read:user', 'user:email'],
    ...over,
  });
  const create = (id: string, body: unknown, user: User = owner, headers?: Record<string, string>) => t.api('POST', providers(id), { key: user.api_key, body, headers });
  const createOk = (id: string, body: unknown = oidc()) => expectBody(201, create(id, body));
  const list = async (id: string, user: User = owner, headers?: Record<string, string>) =>
    (await expectBody(200, t.api('GET', providers(id), { key: user.api_key, headers }))).items as any[];
  const toggle = (id: string, pid: number | string, body: unknown, user: User = owner) => t.api('PUT', `${providers(id)}/${pid}/toggle`, { key: user.api_key, body });
  const settings = (id: string, body: unknown) => t.api('PUT', `/v1/endpoints/${id}/settings`, { key: owner.api_key, body });
  const settingsOk = (id: string, body: unknown) => expectBody(200, settings(id, body));
  const getSettings = (id: string, user: User = owner, headers?: Record<string, string>) =>
    expectBody(200, t.api('GET', `/v1/endpoints/${id}/settings`, { key: user.api_key, headers }));
  /** What a refused write must not have changed: the API's views, the stored rows and the feed version. */
  const state = async (id: string, user: User = owner, headers?: Record<string, string>) => ({
    providers: await list(id, user, headers),
    settings: await getSettings(id, user, headers),
    rows: await sql(
      `SELECT (SELECT json_agg(p ORDER BY p.id) FROM endpoint_oauth_providers p WHERE p.endpoint_id = e.id) AS p,
              (SELECT row_to_json(s) FROM endpoint_auth_settings s WHERE s.endpoint_id = e.id) AS s
       FROM endpoints e WHERE e.uuid = $1`,
      [id],
    ),
    feed: await feedVersion(t),
  });

  const edgeEndpoint = (id: string) => edgeEndpointOf(t, id);

  // ---- providers --------------------------------------------------------------------------------------------

  it('creates an OIDC provider: 201, Location, never the secret; listed and read alike; the secret sealed at rest', async () => {
    const { uuid, hostname } = await newEndpoint();
    const res = await create(uuid, oidc({ allowed_emails: ['Alice@Example.com', 'alice@example.com'], allowed_domains: ['Example.ORG'] }));
    assert.equal(res.status, 201, res.text);
    const p = res.body;
    assert.equal(res.headers.get('location'), `/v1/endpoints/${uuid}/oauth/providers/${p.id}`);
    assert.ok(Number.isSafeInteger(p.id) && p.id > 0);
    assert.deepEqual(Object.keys(p).sort(), [
      'allowed_domains',
      'allowed_emails',
      'authorization_url',
      'client_id',
      'client_secret_fingerprint',
      'created_at',
      'enabled',
      'id',
      'issuer',
      'kind',
      'name',
      'redirect_uri',
      'scopes',
      'token_url',
      'updated_at',
      'userinfo_url',
    ]);
    assert.equal(p.kind, 'oidc');
    assert.equal(p.issuer, 'https://idp.example.com', 'stored as sent');
    assert.equal(p.enabled, true);
    assert.deepEqual(p.scopes, []);
    assert.deepEqual(p.allowed_emails, ['alice@example.com'], 'lower-cased, once');
    assert.deepEqual(p.allowed_domains, ['example.org']);
    assert.equal(p.authorization_url, null);
    // The edge's public HTTPS port (here the test node's bound listener) is part of it unless it is 443.
    assert.equal(p.redirect_uri, `https://${hostname}:${t.node.edge!.httpsPort}/.edge/auth/callback`);
    assert.ok(!res.text.includes(SECRET));

    assert.deepEqual(await list(uuid), [p]);
    const one = await t.api('GET', `${providers(uuid)}/${p.id}`, { key: owner.api_key });
    assert.equal(one.status, 200, one.text);
    assert.deepEqual(one.body, p);
    assert.ok(!one.text.includes(SECRET) && !JSON.stringify(await list(uuid)).includes(SECRET));

    const [row] = await sql('SELECT client_secret_sealed FROM endpoint_oauth_providers WHERE id = $1', [p.id]);
    assert.equal(box.open(row.client_secret_sealed), SECRET);
    assert.ok(!JSON.stringify(await sql('SELECT * FROM endpoint_oauth_providers')).includes(SECRET), 'no plaintext secret stored');
  });

  it('shows a salted, slow fingerprint of the client secret: it verifies, changes with the secret, stays with it, never reaches edges', async () => {
    const { uuid } = await newEndpoint();
    const p = await createOk(uuid, oidc());
    await assertFingerprintOf(p.client_secret_fingerprint, SECRET, 'on create');
    const again = await createOk(uuid, oidc({ name: 'Same secret' }));
    assert.notEqual(again.client_secret_fingerprint, p.client_secret_fingerprint, 'salted: the same secret fingerprints differently');
    const put = (body: unknown) => expectBody(200, t.api('PUT', `${providers(uuid)}/${p.id}`, { key: owner.api_key, body }));

    const kept = await put(oidc({ client_secret: undefined, name: 'Renamed' }));
    assert.equal(kept.client_secret_fingerprint, p.client_secret_fingerprint, 'an omitted secret keeps its fingerprint');
    const changed = await put(oidc({ client_secret: 'a-new-client-secret' }));
    assert.notEqual(changed.client_secret_fingerprint, p.client_secret_fingerprint);
    await assertFingerprintOf(changed.client_secret_fingerprint, 'a-new-client-secret', 'after a new secret');
    assert.deepEqual((await list(uuid)).find((x) => x.id === p.id), changed, 'listed alike');

    // Edges get the sealed secret only.
    await settingsOk(uuid, { mode: 'oidc' });
    const edge = await edgeEndpoint(uuid);
    assert.ok(edge.auth!.providers!.length > 0);
    assert.ok(!JSON.stringify(edge).includes(changed.client_secret_fingerprint) && !JSON.stringify(edge).includes('fingerprint'));

    // A secret stored before fingerprints existed reads null until it is written again.
    await sql('UPDATE endpoint_oauth_providers SET client_secret_fingerprint = NULL WHERE id = $1', [p.id]);
    assert.equal((await expectBody(200, t.api('GET', `${providers(uuid)}/${p.id}`, { key: owner.api_key }))).client_secret_fingerprint, null);
    assert.equal((await put(oidc({ client_secret: undefined }))).client_secret_fingerprint, null, 'still unknown while the secret is kept');
    await assertFingerprintOf((await put(oidc())).client_secret_fingerprint, SECRET, 'once sent again');
  });

  it('creates an oauth2 provider with its explicit endpoints, and a second one needs another name (409)', async () => {
    const { uuid } = await newEndpoint();
    const p = await createOk(uuid, oauth2());
    assert.equal(p.kind, 'oauth2');
    assert.equal(p.token_url, 'https://github.com/login/oauth/access_token');
    assert.deepEqual(p.scopes, ['read:user', 'user:email']);
    const before = await state(uuid);
    const dup = await create(uuid, oauth2());
    assert.equal(dup.status, 409, dup.text);
    assert.equal(dup.body.code, 'already_exists');
    assert.deepEqual(await state(uuid), before);
    await createOk(uuid, oauth2({ name: 'GitHub (staff)' }));
  });

  it('replaces a provider whole: an omitted secret keeps the stored one, a new one replaces it, the enabled flag stays', async () => {
    const { uuid } = await newEndpoint();
    const p = await createOk(uuid, oidc({ scopes: ['openid', 'email'], allowed_domains: ['example.com'] }));
    assert.equal((await toggle(uuid, p.id, { enabled: false })).status, 204);
    const sealed = async () => (await sql('SELECT client_secret_sealed FROM endpoint_oauth_providers WHERE id = $1', [p.id]))[0].client_secret_sealed;
    const { client_secret: _omitted, ...noSecret } = oidc({ name: 'Renamed', issuer: 'https://login.example.net/tenant' });
    const res = await t.api('PUT', `${providers(uuid)}/${p.id}`, { key: owner.api_key, body: noSecret });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.name, 'Renamed');
    assert.equal(res.body.issuer, 'https://login.example.net/tenant');
    assert.deepEqual(res.body.scopes, [], 'omitted: emptied (a full update)');
    assert.deepEqual(res.body.allowed_domains, []);
    assert.equal(res.body.enabled, false, 'the toggle’s flag is not the update’s');
    assert.equal(res.body.created_at, p.created_at);
    assert.equal(box.open(await sealed()), SECRET);
    const rotated = await t.api('PUT', `${providers(uuid)}/${p.id}`, { key: owner.api_key, body: oidc({ client_secret: 'rotated-secret' }) });
    assert.equal(rotated.status, 200, rotated.text);
    assert.equal(box.open(await sealed()), 'rotated-secret');
    // Kind may change in a full update, with what the new kind needs.
    const asOauth2 = await t.api('PUT', `${providers(uuid)}/${p.id}`, { key: owner.api_key, body: oauth2({ name: 'Renamed' }) });
    assert.equal(asOauth2.status, 200, asOauth2.text);
    assert.equal(asOauth2.body.kind, 'oauth2');
  });

  it('toggles exactly as docs/api.md says: an explicit set, omitted means false, 204 with an empty body, config kept', async () => {
    const { uuid } = await newEndpoint();
    const p = await createOk(uuid);
    const before = (await sql('SELECT * FROM endpoint_oauth_providers WHERE id = $1', [p.id]))[0];
    const enabled = async () => (await t.api('GET', `${providers(uuid)}/${p.id}`, { key: owner.api_key })).body.enabled;
    for (const [body, want] of [
      [{}, false],
      [{}, false],
      [{ enabled: true }, true],
      [{ enabled: true }, true],
      [{ enabled: false }, false],
    ] as const) {
      const res = await toggle(uuid, p.id, body);
      assert.equal(res.status, 204, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal(res.text, '');
      assert.equal(await enabled(), want, JSON.stringify(body));
    }
    assert.equal((await toggle(uuid, p.id, { enabled: true })).status, 204);
    const noBody = await t.api('PUT', `${providers(uuid)}/${p.id}/toggle`, { key: owner.api_key });
    assert.equal(noBody.status, 204, noBody.text);
    assert.equal(await enabled(), false, 'no body at all: enabled omitted, so false');
    const after = (await sql('SELECT * FROM endpoint_oauth_providers WHERE id = $1', [p.id]))[0];
    const { enabled: _a, updated_at: _b, ...kept } = after;
    const { enabled: _c, updated_at: _d, ...was } = before;
    assert.deepEqual(kept, was, 'the provider and its configuration stay stored');
  });

  it('deletes a provider (204), after which it is 404 everywhere', async () => {
    const { uuid } = await newEndpoint();
    const p = await createOk(uuid);
    const del = await t.api('DELETE', `${providers(uuid)}/${p.id}`, { key: owner.api_key });
    assert.equal(del.status, 204, del.text);
    assert.equal(del.text, '');
    assert.deepEqual(await list(uuid), []);
    for (const [method, path, body] of [
      ['GET', '', undefined],
      ['PUT', '', oidc()],
      ['PUT', '/toggle', { enabled: true }],
      ['DELETE', '', undefined],
    ] as const) {
      const res = await t.api(method, `${providers(uuid)}/${p.id}${path}`, { key: owner.api_key, body });
      assert.equal(res.status, 404, `${method} ${path}: ${res.text}`);
      assert.equal(res.body.code, 'not_found');
    }
  });

  it(`refuses more than ${MAX_OAUTH_PROVIDERS} providers per endpoint`, async () => {
    const { uuid } = await newEndpoint();
    for (let i = 0; i < MAX_OAUTH_PROVIDERS; i++) await createOk(uuid, oidc({ name: `p${i}` }));
    const before = await state(uuid);
    const res = await create(uuid, oidc({ name: 'one too many' }));
    assert.equal(res.status, 400, res.text);
    assert.equal(res.body.detail.limit, MAX_OAUTH_PROVIDERS);
    assert.deepEqual(await state(uuid), before);
  });

  it('refuses every bad provider body with a 4xx that changes nothing', async () => {
    const { uuid } = await newEndpoint();
    const p = await createOk(uuid, oidc());
    const before = await state(uuid);
    const cases: Array<[string, unknown, string?]> = [
      ['unknown field', oidc({ prompt: 'login' }), 'unknown_field'],
      ['enabled is the toggle’s', oidc({ enabled: false }), 'unknown_field'],
      ['kind missing', oidc({ kind: undefined })],
      ['kind unknown', oidc({ kind: 'saml' })],
      ['name missing', oidc({ name: undefined })],
      ['name empty', oidc({ name: '' })],
      ['name with a control character', oidc({ name: 'a\nb' })],
      ['name too long', oidc({ name: 'n'.repeat(101) })],
      ['client_id missing', oidc({ client_id: undefined })],
      ['client_id with a control character', oidc({ client_id: 'a\tb' })],
      ['client_secret empty', oidc({ client_secret: '' })],
      ['issuer missing', oidc({ issuer: undefined })],
      ['http issuer', oidc({ issuer: 'http://idp.example.com' })],
      ['loopback issuer', oidc({ issuer: 'https://127.0.0.1' })],
      ['private issuer', oidc({ issuer: 'https://10.1.2.3/realms/main' })],
      ['link-local issuer', oidc({ issuer: 'https://169.254.169.254' })],
      ['IPv6 loopback issuer', oidc({ issuer: 'https://[::1]' })],
      ['localhost issuer', oidc({ issuer: 'https://localhost:8443' })],
      ['decimal IPv4 issuer', oidc({ issuer: 'https://2130706433/' })],
      ['issuer with a query', oidc({ issuer: 'https://idp.example.com/?tenant=a' })],
      ['issuer with a fragment', oidc({ issuer: 'https://idp.example.com/#a' })],
      ['issuer with credentials', oidc({ issuer: 'https://u:p@idp.example.com' })],
      ['issuer with a space', oidc({ issuer: ' https://idp.example.com' })],
      ['issuer not a URL', oidc({ issuer: 'idp.example.com' })],
      ['oidc with an authorization_url', oidc({ authorization_url: 'https://idp.example.com/auth' })],
      ['oidc with a userinfo_url', oidc({ userinfo_url: 'https://idp.example.com/me' })],
      ['oauth2 without authorization_url', oauth2({ authorization_url: undefined })],
      ['oauth2 without token_url', oauth2({ token_url: undefined })],
      ['oauth2 without userinfo_url', oauth2({ userinfo_url: undefined })],
      ['oauth2 with an http token_url', oauth2({ token_url: 'http://github.com/token' })],
      ['oauth2 with a private userinfo_url', oauth2({ userinfo_url: 'https://192.168.1.1/me' })],
      ['oauth2 with an http issuer', oauth2({ issuer: 'http://github.com' })],
      ['scope with a space', oidc({ scopes: ['openid email'] })],
      ['scope with a quote', oidc({ scopes: ['openid', 'a"b'] })],
      ['scope with a backslash', oidc({ scopes: ['openid', 'a\\b'] })],
      ['scope empty', oidc({ scopes: ['openid', ''] })],
      ['scopes not an array', oidc({ scopes: 'openid email' })],
      ['oidc scopes without openid', oidc({ scopes: ['email', 'profile'] })],
      ['e-mail without @', oidc({ allowed_emails: ['alice.example.com'] })],
      ['e-mail with a space', oidc({ allowed_emails: ['alice @example.com'] })],
      ['e-mail without a domain dot', oidc({ allowed_emails: ['alice@localhost'] })],
      ['e-mail not a string', oidc({ allowed_emails: [1] })],
      ['domain with @', oidc({ allowed_domains: ['@example.com'] })],
      ['wildcard domain', oidc({ allowed_domains: ['*.example.com'] })],
      ['single-label domain', oidc({ allowed_domains: ['intranet'] })],
      ['IP as a domain', oidc({ allowed_domains: ['10.0.0.1'] })],
      ['domain with a space', oidc({ allowed_domains: ['exa mple.com'] })],
    ];
    for (const [name, body, code] of cases) {
      for (const [method, path] of [
        ['POST', ''],
        ['PUT', `/${p.id}`],
      ] as const) {
        const res = await t.api(method, providers(uuid) + path, { key: owner.api_key, body });
        assert.equal(res.status, 400, `${method} ${name}: ${res.status} ${res.text}`);
        if (code) assert.equal(res.body.code, code, name);
        else assert.match(res.body.code, /^(invalid_request|unknown_field)$/, name);
      }
    }
    const noSecret = await create(uuid, oidc({ client_secret: undefined, name: 'no secret' }));
    assert.equal(noSecret.status, 400, 'POST needs the client secret');
    const raw = await t.api('POST', providers(uuid), { key: owner.api_key, raw: '{"kind": "oidc",', headers: { 'content-type': 'application/json' } });
    assert.equal(raw.status, 400);
    assert.equal(raw.body.code, 'invalid_json');
    assert.deepEqual(await state(uuid), before);
  });

  it('refuses bad toggles: unknown fields, a non-boolean, a non-numeric id, another endpoint’s provider, a missing one', async () => {
    const { uuid } = await newEndpoint();
    const other = await newEndpoint();
    const p = await createOk(uuid);
    const q = await createOk(other.uuid);
    const before = await state(uuid);
    const beforeOther = await state(other.uuid);
    for (const [name, pid, body, status, code] of [
      ['unknown field', p.id, { enabled: true, reason: 'x' }, 400, 'unknown_field'],
      ['enabled as a string', p.id, { enabled: 'true' }, 400, undefined],
      ['enabled null', p.id, { enabled: null }, 400, undefined],
      ['body an array', p.id, [true], 400, undefined],
      ['non-numeric id', 'abc', { enabled: false }, 400, 'invalid_id'],
      ['negative id', '-1', { enabled: false }, 400, 'invalid_id'],
      ['zero id', '0', { enabled: false }, 400, 'invalid_id'],
      ['id with a sign', '+1', { enabled: false }, 400, 'invalid_id'],
      ['fractional id', '1.5', { enabled: false }, 400, 'invalid_id'],
      ['another endpoint’s provider', q.id, { enabled: false }, 404, 'not_found'],
      ['a missing provider', q.id + 1000, { enabled: false }, 404, 'not_found'],
      ['beyond 2^53', '9007199254740993', { enabled: false }, 404, 'not_found'],
    ] as const) {
      const res = await toggle(uuid, pid, body);
      assert.equal(res.status, status, `${name}: ${res.text}`);
      if (code) assert.equal(res.body.code, code, name);
    }
    assert.deepEqual(await state(uuid), before);
    assert.deepEqual(await state(other.uuid), beforeOther);
    for (const [method, path, body] of [
      ['GET', '', undefined],
      ['PUT', '', oidc()],
      ['DELETE', '', undefined],
    ] as const) {
      const res = await t.api(method, `${providers(uuid)}/${q.id}${path}`, { key: owner.api_key, body });
      assert.equal(res.status, 404, `${method} another endpoint’s provider`);
      const bad = await t.api(method, `${providers(uuid)}/x1${path}`, { key: owner.api_key, body });
      assert.equal(bad.status, 400, `${method} a non-numeric id`);
      assert.equal(bad.body.code, 'invalid_id');
    }
    assert.deepEqual(await state(other.uuid), beforeOther);
  });

  // ---- settings ---------------------------------------------------------------------------------------------

  it('turns on mode oauth with a provider: reported as sso with the id → enabled map, config and session lifetime', async () => {
    const { uuid, hostname } = await newEndpoint();
    const a = await createOk(uuid, oidc());
    const b = await createOk(uuid, oauth2());
    const body = await settingsOk(uuid, {
      mode: 'oauth',
      session_ttl_seconds: 3600,
      enforce_https: true,
      config: { allowed_redirects: ['/after', `https://${hostname.toUpperCase()}/x`, '/after'], scopes: ['openid', 'email'] },
    });
    assert.equal(body.mode, 'sso');
    assert.deepEqual(body.enabled_auth_methods, { [a.id]: true, [b.id]: true }, 'an empty list offers every enabled provider');
    assert.deepEqual(body.config, { allowed_redirects: ['/after', `https://${hostname}/x`], scopes: ['openid', 'email'] });
    assert.equal(body.session_ttl_seconds, 3600);
    assert.deepEqual(await getSettings(uuid), body);

    const only = await settingsOk(uuid, { mode: 'oauth', enabled_auth_methods: [String(b.id), `00${b.id}`] });
    assert.deepEqual(only.enabled_auth_methods, { [a.id]: false, [b.id]: true });
    assert.deepEqual(only.config, body.config, 'config kept when omitted');
    const [row] = await sql('SELECT enabled_auth_methods FROM endpoint_auth_settings s JOIN endpoints e ON e.id = s.endpoint_id WHERE e.uuid = $1', [uuid]);
    assert.deepEqual(row.enabled_auth_methods, [String(b.id)], 'stored once, in canonical spelling');

    assert.equal((await toggle(uuid, b.id, { enabled: false })).status, 204);
    assert.deepEqual((await getSettings(uuid)).enabled_auth_methods, { [a.id]: false, [b.id]: false });
    // Mode oidc takes only kind oidc providers; oauth2 ones read false there.
    const oidcMode = await settingsOk(uuid, { mode: 'oidc', enabled_auth_methods: null });
    assert.deepEqual(oidcMode.enabled_auth_methods, { [a.id]: true, [b.id]: false });
    assert.equal(oidcMode.config, undefined, 'each mode keeps its own config');
    const none = await settingsOk(uuid, { mode: 'none' });
    assert.equal(none.enabled_auth_methods, undefined, 'omitted outside the OAuth modes');
  });

  it('publishes the providers visitors may use now, with sealed secrets, the scopes to ask for and the return targets', async () => {
    const { uuid, hostname } = await newEndpoint();
    const a = await createOk(uuid, oidc({ allowed_emails: ['boss@example.com'], allowed_domains: ['example.com'] }));
    const b = await createOk(uuid, oauth2());
    const c = await createOk(uuid, oidc({ name: 'Custom scopes', scopes: ['openid', 'groups'] }));
    assert.equal((await edgeEndpoint(uuid)).auth, undefined, 'providers alone change nothing at the edge');

    await settingsOk(uuid, { mode: 'oauth', config: { allowed_redirects: ['/home', `https://${hostname}/app`] }, session_ttl_seconds: 600 });
    let edge = await edgeEndpoint(uuid);
    assert.equal(edge.auth?.mode, 'oauth');
    assert.equal(edge.auth?.session_ttl_seconds, 600);
    assert.deepEqual(edge.auth?.allowed_redirects, ['/home', `https://${hostname}/app`]);
    assert.deepEqual(
      edge.auth?.providers?.map((p) => [p.id, p.kind, p.scopes]),
      [
        [a.id, 'oidc', ['openid', 'email', 'profile']],
        [b.id, 'oauth2', ['read:user', 'user:email']],
        [c.id, 'oidc', ['openid', 'groups']],
      ],
      'in id order; the OIDC default where the provider names none',
    );
    const pa = edge.auth!.providers![0];
    assert.deepEqual(
      { ...pa, client_secret_sealed: box.open(pa.client_secret_sealed) },
      {
        id: a.id,
        kind: 'oidc',
        name: 'Company SSO',
        issuer: 'https://idp.example.com',
        client_id: 'edge-client',
        client_secret_sealed: SECRET,
        scopes: ['openid', 'email', 'profile'],
        allowed_emails: ['boss@example.com'],
        allowed_domains: ['example.com'],
        authorization_url: null,
        token_url: null,
        userinfo_url: null,
      },
    );
    const pb = edge.auth!.providers![1];
    assert.equal(pb.userinfo_url, 'https://api.github.com/user');
    assert.equal(box.open(pb.client_secret_sealed), SECRET + '-gh');
    assert.ok(!JSON.stringify(edge).includes(SECRET), 'no client secret in clear in the snapshot');
    assert.deepEqual(edge.auth?.basic_users, []);
    assert.deepEqual(edge.auth?.tokens, []);

    // A settings scope override applies to every provider; OIDC ones still ask for openid.
    await settingsOk(uuid, { mode: 'oauth', config: { scopes: ['email'] } });
    edge = await edgeEndpoint(uuid);
    assert.deepEqual(
      edge.auth?.providers?.map((p) => p.scopes),
      [['openid', 'email'], ['email'], ['openid', 'email']],
    );
    assert.deepEqual(edge.auth?.allowed_redirects, [], 'the config was replaced whole');

    // enabled_auth_methods narrows; the toggle and mode oidc narrow further.
    await settingsOk(uuid, { mode: 'oauth', enabled_auth_methods: [String(a.id), String(b.id)] });
    assert.deepEqual((await edgeEndpoint(uuid)).auth?.providers?.map((p) => p.id), [a.id, b.id]);
    assert.equal((await toggle(uuid, a.id, {})).status, 204);
    assert.deepEqual((await edgeEndpoint(uuid)).auth?.providers?.map((p) => p.id), [b.id]);
    assert.equal((await toggle(uuid, a.id, { enabled: true })).status, 204);
    await settingsOk(uuid, { mode: 'oidc', enabled_auth_methods: [] });
    edge = await edgeEndpoint(uuid);
    assert.equal(edge.auth?.mode, 'oidc');
    assert.deepEqual(edge.auth?.providers?.map((p) => p.id), [a.id, c.id]);

    // A replaced provider reaches the edge as replaced; a deleted one leaves it.
    const put = await t.api('PUT', `${providers(uuid)}/${c.id}`, { key: owner.api_key, body: oidc({ name: 'Custom scopes', issuer: 'https://sso.example.org' }) });
    assert.equal(put.status, 200, put.text);
    assert.equal((await edgeEndpoint(uuid)).auth?.providers?.[1].issuer, 'https://sso.example.org');
    assert.equal((await t.api('DELETE', `${providers(uuid)}/${c.id}`, { key: owner.api_key })).status, 204);
    assert.deepEqual((await edgeEndpoint(uuid)).auth?.providers?.map((p) => p.id), [a.id]);

    // Other modes carry no providers.
    await settingsOk(uuid, { mode: 'none' });
    edge = await edgeEndpoint(uuid);
    assert.equal(edge.auth?.providers, undefined);
    assert.equal(edge.auth?.allowed_redirects, undefined);
  });

  it('leaves the endpoint closed, not open, when its last usable provider is disabled or deleted', async () => {
    const { uuid } = await newEndpoint();
    const a = await createOk(uuid);
    await settingsOk(uuid, { mode: 'oidc' });
    assert.equal((await toggle(uuid, a.id, { enabled: false })).status, 204);
    let edge = await edgeEndpoint(uuid);
    assert.equal(edge.auth?.mode, 'oidc', 'still in mode oidc');
    assert.deepEqual(edge.auth?.providers, [], 'no provider: the edge refuses every visitor');
    assert.deepEqual((await getSettings(uuid)).enabled_auth_methods, { [a.id]: false });
    // Re-sending the mode now is refused: nothing to log in with.
    const again = await settings(uuid, { mode: 'oidc' });
    assert.equal(again.status, 400, again.text);

    const b = await createOk(uuid, oidc({ name: 'Second' }));
    await settingsOk(uuid, { mode: 'oidc', enabled_auth_methods: [String(b.id)] });
    assert.equal((await t.api('DELETE', `${providers(uuid)}/${b.id}`, { key: owner.api_key })).status, 204);
    edge = await edgeEndpoint(uuid);
    assert.deepEqual(edge.auth?.providers, [], 'the listed id matches nothing; the list does not widen to every provider');
    assert.equal((await toggle(uuid, a.id, { enabled: true })).status, 204);
    assert.deepEqual((await edgeEndpoint(uuid)).auth?.providers, [], 'a is enabled but not listed');
  });

  it('refuses every bad OAuth settings body with a 400 that changes nothing', async () => {
    const { uuid, hostname } = await newEndpoint();
    const fresh = await newEndpoint();
    const other = await newEndpoint();
    const a = await createOk(uuid, oidc());
    const gh = await createOk(uuid, oauth2());
    const off = await createOk(uuid, oidc({ name: 'Off' }));
    assert.equal((await toggle(uuid, off.id, { enabled: false })).status, 204);
    const foreign = await createOk(other.uuid, oidc());
    await settingsOk(uuid, { mode: 'oauth', config: { allowed_redirects: ['/x'] } });
    const before = await state(uuid);
    const cases: Array<[string, unknown, string?]> = [
      ['unknown id in enabled_auth_methods', { mode: 'oauth', enabled_auth_methods: ['999999'] }],
      ['another endpoint’s provider', { mode: 'oauth', enabled_auth_methods: [String(foreign.id)] }],
      ['non-numeric provider id', { mode: 'oauth', enabled_auth_methods: ['github'] }],
      ['empty provider id', { mode: 'oauth', enabled_auth_methods: [''] }],
      ['provider id zero', { mode: 'oauth', enabled_auth_methods: ['0'] }],
      ['provider id as a number', { mode: 'oauth', enabled_auth_methods: [a.id] }],
      ['enabled_auth_methods not an array', { mode: 'oauth', enabled_auth_methods: String(a.id) }],
      ['only a disabled provider listed', { mode: 'oauth', enabled_auth_methods: [String(off.id)] }],
      ['an oauth2 provider listed in mode oidc', { mode: 'oidc', enabled_auth_methods: [String(gh.id)] }],
      ['unknown config key', { mode: 'oauth', config: { redirect_uri: '/x' } }, 'invalid_request'],
      ['basic config in mode oauth', { mode: 'oauth', config: { realm: 'x' } }],
      ['OAuth config in mode basic', { mode: 'basic', config: { allowed_redirects: ['/x'] } }],
      ['redirect to another host', { mode: 'oauth', config: { allowed_redirects: ['https://evil.example/'] } }],
      ['protocol-relative redirect', { mode: 'oauth', config: { allowed_redirects: ['//evil.example/'] } }],
      ['backslash redirect', { mode: 'oauth', config: { allowed_redirects: ['/\\evil.example/'] } }],
      ['http redirect on the own host', { mode: 'oauth', config: { allowed_redirects: [`http://${hostname}/`] } }],
      ['javascript: redirect', { mode: 'oauth', config: { allowed_redirects: ['javascript:alert(1)'] } }],
      ['relative redirect without a slash', { mode: 'oauth', config: { allowed_redirects: ['home'] } }],
      ['redirect with a space', { mode: 'oauth', config: { allowed_redirects: ['/a b'] } }],
      ['redirect empty', { mode: 'oauth', config: { allowed_redirects: [''] } }],
      ['redirects not an array', { mode: 'oauth', config: { allowed_redirects: '/x' } }],
      ['too many redirects', { mode: 'oauth', config: { allowed_redirects: Array.from({ length: 33 }, (_, i) => `/p${i}`) } }],
      ['scope override empty', { mode: 'oauth', config: { scopes: [] } }],
      ['scope override with a space', { mode: 'oauth', config: { scopes: ['openid email'] } }],
      ['scope override without openid in mode oidc', { mode: 'oidc', config: { scopes: ['email'] } }],
      ['session_ttl_seconds 0', { mode: 'oauth', session_ttl_seconds: 0 }],
    ];
    for (const [name, body, code] of cases) {
      const res = await settings(uuid, body);
      assert.equal(res.status, 400, `${name}: ${res.status} ${res.text}`);
      if (code) assert.equal(res.body.code, code, name);
    }
    assert.deepEqual(await state(uuid), before);

    // An endpoint without providers, or with none usable in the mode, cannot enter it.
    const beforeFresh = await state(fresh.uuid);
    for (const body of [{ mode: 'oauth' }, { mode: 'oidc' }, { mode: 'oauth', enabled_auth_methods: [] }]) {
      const res = await settings(fresh.uuid, body);
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal(res.body.detail.field, 'mode');
    }
    const onlyOauth2 = await createOk(fresh.uuid, oauth2());
    const disabled = await createOk(fresh.uuid, oidc({ name: 'Disabled' }));
    assert.equal((await toggle(fresh.uuid, disabled.id, { enabled: false })).status, 204);
    const mid = await state(fresh.uuid);
    const oidcRefused = await settings(fresh.uuid, { mode: 'oidc' });
    assert.equal(oidcRefused.status, 400, 'mode oidc with only an oauth2 provider enabled');
    assert.deepEqual(await state(fresh.uuid), mid);
    assert.notDeepEqual(mid, beforeFresh);
    assert.equal((await settings(fresh.uuid, { mode: 'oauth', enabled_auth_methods: [String(onlyOauth2.id)] })).status, 200);
  });

  // ---- access -----------------------------------------------------------------------------------------------

  it('answers 404 for another account’s endpoint and 401 without a key, changing nothing', async () => {
    const { uuid } = await newEndpoint();
    const p = await createOk(uuid);
    const stranger = await t.createUser('business');
    const before = await state(uuid);
    for (const [method, path, body] of [
      ['GET', '', undefined],
      ['POST', '', oidc({ name: 'Mine now' })],
      ['GET', `/${p.id}`, undefined],
      ['PUT', `/${p.id}`, oidc({ name: 'Mine now' })],
      ['PUT', `/${p.id}/toggle`, { enabled: false }],
      ['DELETE', `/${p.id}`, undefined],
    ] as const) {
      const res = await t.api(method, providers(uuid) + path, { key: stranger.api_key, body });
      assert.equal(res.status, 404, `${method} ${path}: ${res.text}`);
      assert.equal(res.body.code, 'not_found');
      const anonymous = await t.api(method, providers(uuid) + path, { key: null, body });
      assert.equal(anonymous.status, 401, `${method} ${path}`);
    }
    const malformed = await t.api('GET', providers('not-a-uuid'), { key: owner.api_key });
    assert.equal(malformed.status, 400);
    assert.equal(malformed.body.code, 'invalid_id');
    assert.deepEqual(await state(uuid), before);
  });

  it('needs endpoints:read to read and endpoints:update to write, in the active account', async () => {
    const orgOwner = await t.createUser('business');
    const reader = await t.createUser('business');
    const { headers } = await orgWithMember(t, orgOwner, reader, ['endpoints:read']);
    const { uuid } = await newEndpoint(orgOwner, headers);
    const created = await create(uuid, oidc(), orgOwner, headers);
    assert.equal(created.status, 201, created.text);
    const p = created.body;
    const before = await state(uuid, orgOwner, headers);

    assert.deepEqual(await list(uuid, reader, headers), [p]);
    assert.equal((await t.api('GET', `${providers(uuid)}/${p.id}`, { key: reader.api_key, headers })).status, 200);
    for (const [method, path, body] of [
      ['POST', '', oidc({ name: 'Other' })],
      ['PUT', `/${p.id}`, oidc()],
      ['PUT', `/${p.id}/toggle`, { enabled: false }],
      ['DELETE', `/${p.id}`, undefined],
    ] as const) {
      const res = await t.api(method, providers(uuid) + path, { key: reader.api_key, body, headers });
      assert.equal(res.status, 403, `${method} ${path}: ${res.text}`);
      assert.equal(res.body.code, 'permission_denied');
      assert.equal(res.body.detail.permission, 'endpoints:update');
    }
    // Outside the organization (the reader's personal account is active), the endpoint is not visible at all.
    assert.equal((await t.api('GET', providers(uuid), { key: reader.api_key })).status, 404);
    assert.deepEqual(await state(uuid, orgOwner, headers), before);
  });

  it('keeps a paused endpoint’s providers read-only (409 quota_paused) and readable', async () => {
    const { uuid } = await newEndpoint();
    const p = await createOk(uuid);
    assert.equal((await t.api('POST', `/v1/admin/endpoints/${uuid}/pause`)).status, 200);
    const before = await state(uuid);
    for (const [method, path, body] of [
      ['POST', '', oidc({ name: 'Other' })],
      ['PUT', `/${p.id}`, oidc()],
      ['PUT', `/${p.id}/toggle`, { enabled: false }],
      ['DELETE', `/${p.id}`, undefined],
    ] as const) {
      const res = await t.api(method, providers(uuid) + path, { key: owner.api_key, body });
      assert.equal(res.status, 409, `${method} ${path}: ${res.text}`);
      assert.equal(res.body.code, 'quota_paused');
    }
    assert.deepEqual(await state(uuid), before);
    assert.equal((await t.api('POST', `/v1/admin/endpoints/${uuid}/unpause`)).status, 200);
  });

  it('lists the OAuth provider operations in the OpenAPI document', async () => {
    const doc = (await t.api('GET', '/v1/openapi.json', { key: null })).body;
    const paths = doc.paths;
    assert.ok(paths['/v1/endpoints/{id}/oauth/providers'].post);
    assert.ok(paths['/v1/endpoints/{id}/oauth/providers'].get);
    assert.ok(paths['/v1/endpoints/{id}/oauth/providers/{provider_id}'].get);
    assert.ok(paths['/v1/endpoints/{id}/oauth/providers/{provider_id}'].put);
    assert.ok(paths['/v1/endpoints/{id}/oauth/providers/{provider_id}'].delete);
    const toggleOp = paths['/v1/endpoints/{id}/oauth/providers/{provider_id}/toggle'].put;
    assert.ok(toggleOp);
    assert.ok(toggleOp.responses['204']);
    const schema = toggleOp.requestBody.content['application/json'].schema;
    assert.equal(schema.additionalProperties, false);
    assert.deepEqual(Object.keys(schema.properties), ['enabled']);
    const created = paths['/v1/endpoints/{id}/oauth/providers'].post.responses['201'].content['application/json'].schema;
    assert.ok(!('client_secret' in created.properties), 'the view has no secret');
    assert.ok(created.required.includes('client_secret_fingerprint'), 'its fingerprint, always present (null when unknown)');
    assert.match(created.properties.client_secret_fingerprint.description, /SHA-256/);
  });
});
