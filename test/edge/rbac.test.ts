// RBAC end to end through the real edge pipeline (config cache, auth, rbac, routing, the origin forwarder, WebSocket
// upgrades), driven by endpoint snapshots applied as the feed applies them, in front of a real local service; an
// OIDC-session client logs in through a real OpenID provider. Path tricks judged on the normalised path, headers
// stamped and visitor copies stripped, revocation and membership changes from the next request, the rate limit.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import bcrypt from 'bcrypt';
import { SessionKeys } from '../../src/edge/auth/session.ts';
import { TrafficRecorder } from '../../src/edge/capture.ts';
import { EndpointCache } from '../../src/edge/endpoint-cache.ts';
import { OriginPools } from '../../src/edge/forward/origin.ts';
import { handleRequest, handleUpgrade, type PipelineDeps } from '../../src/edge/pipeline/pipeline.ts';
import { StageMemory } from '../../src/edge/pipeline/stage-memory.ts';
import type { StageDeps } from '../../src/edge/pipeline/stage.ts';
import { TunnelRegistry } from '../../src/edge/tunnels/registry.ts';
import { SecretBox } from '../../src/shared/secrets.ts';
import type { EndpointConfig, RbacClientConfig, RbacConfig } from '../../src/shared/snapshot.ts';
import { tokenDigest, visitorTokenKey } from '../../src/shared/visitor-credentials.ts';
import { Browser } from '../helpers/browser.ts';
import { endpointConfig, oidcProviderConfig, rbacClient as client, rbacConfig, rbacRole as role, visitorAuthConfig as authConfig } from '../helpers/endpoint-config.ts';
import { visit, wsUpgrade, type Reply } from '../helpers/http.ts';
import { startEchoService, type Echoed, type LocalService } from '../helpers/local-service.ts';
import { capturedLogger } from '../helpers/logger.ts';
import { startTestProvider, type TestProvider } from '../helpers/oidc-provider.ts';

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const codeOf = (r: { headers: http.IncomingHttpHeaders }) => (r.headers['x-edge-error'] as string | undefined) ?? null;
const seenBy = (r: { body: string }) => JSON.parse(r.body) as Echoed;
const CLIENT_SECRET = 'rbac-e2e-client-secret-0123456789';

describe('RBAC at the edge, end to end', () => {
  const box = new SecretBox('rbac-e2e-secret');
  const { logger } = capturedLogger('error');
  let service: LocalService<Echoed>;
  let config: EndpointCache;
  let origins: OriginPools;
  let edge: http.Server;
  let port: number;
  let op: TestProvider;
  let version = 0;
  let hash: string;

  /** Applies an endpoint snapshot the way the feed does (the next version), compiled and in force on return. */
  const apply = (e: EndpointConfig) => config.mirror.apply({ version: ++version, topic: 'endpoint', key: e.uuid, data: e });
  const get = (host: string, path: string, headers: Record<string, string>, method = 'GET') => visit(port, host, path, { method, headers: { accept: 'application/json', ...headers } });

  before(async () => {
    hash = await bcrypt.hash('pw-0123456789', 10);
    service = await startEchoService();
    const stageDeps: StageDeps = {
      // The listener below is plain HTTP standing in for the HTTPS one (the pipeline is told the requests are secure).
      publicHttpsPort: () => port,
      secrets: box,
      allowPrivate: true,
      memory: new StageMemory(),
      sessions: { keys: SessionKeys.fromSettings('', box), ttlSeconds: 3600 },
    };
    config = new EndpointCache({ logger, stageDeps });
    origins = new OriginPools({ allowPrivate: true });
    config.on('endpoint', (_uuid, next, previous) => origins.track(previous, next));
    const deps: PipelineDeps = { config, registry: new TunnelRegistry(), origins, capture: new TrafficRecorder(), logger };
    edge = http.createServer((req, res) => handleRequest(deps, req, res, true));
    edge.on('upgrade', (req, socket, head) => handleUpgrade(deps, req, socket, head, true));
    await new Promise<void>((r) => edge.listen(0, '127.0.0.1', r));
    port = (edge.address() as AddressInfo).port;
    op = await startTestProvider([{ client_id: 'edge-rbac', client_secret: CLIENT_SECRET, redirect_uris: [`https://oidc.rbac.localhost:${port}/.edge/auth/callback`] }], {
      alice: { email: 'alice@example.com', email_verified: true },
      bob: { email: 'Bob@Example.com', email_verified: true },
      // The provider says nothing about this address: never taken as verified.
      carl: { email: 'carl@example.com' },
      mallory: { email: 'mallory@evil.test', email_verified: true },
    });
  });
  after(async () => {
    edge?.closeAllConnections();
    await new Promise<void>((r) => (edge ? edge.close(() => r()) : r()));
    await origins?.close();
    await service?.close();
    await op?.close();
  });

  // Basic-auth endpoint: alice is admin and reader; bob is a reader kept out of /admin.
  const reader = role(1, 'reader', 10, { allowed_methods: ['GET', 'HEAD'], headers: { 'x-role': 'reader' } });
  const admin = role(2, 'admin', 30, { allowed_methods: ['*'], allowed_paths: ['/admin/*'], headers: { 'x-role': 'admin' } });
  const noAdmin = role(3, 'no-admin', 20, { denied_paths: ['/admin/*'] });
  const basicEndpoint = (clients: RbacClientConfig[], roles = [reader, admin, noAdmin]): EndpointConfig =>
    endpointConfig({
      uuid: 'e0000000-0000-4000-8000-000000000001',
      id: 901,
      hostname: 'basic.rbac.localhost',
      origin_url: `http://127.0.0.1:${service.port}`,
      auth: authConfig({
        mode: 'basic',
        credentials_version: version + 1,
        basic_users: [
          { id: 'rbac-client:1', client_id: 1, username: 'alice', password_hash: hash },
          { id: 'rbac-client:2', client_id: 2, username: 'bob', password_hash: hash },
          { id: '9', username: 'settings-user', password_hash: hash },
        ],
      }),
      rbac: rbacConfig(roles, clients),
    });
  const alice = (over: Partial<RbacClientConfig> = {}) => client(1, 'alice', [1, 2], over);
  const bob = (over: Partial<RbacClientConfig> = {}) => client(2, 'bob', [1, 3], over);
  const asAlice = { authorization: basic('alice', 'pw-0123456789') };
  const asBob = { authorization: basic('bob', 'pw-0123456789') };

  it('judges the normalised path the service receives: /%61dmin, /x/../admin, //admin are /admin; denies match /ADMIN and /admin%2Fx too', async () => {
    apply(basicEndpoint([alice(), bob()]));
    const host = 'basic.rbac.localhost';
    const before = service.seen.length;
    for (const trick of [
      '/admin',
      '/%61dmin',
      '/x/../admin',
      '//admin',
      '/admin/',
      '/%61dmin/users',
      '/admin;x/users',
      '/;x/admin',
      // A service routing case-insensitively (Express's default) serves these as /admin: a deny matches any case.
      '/ADMIN',
      '/Admin/users',
      // Go's net/http and WSGI decode %2F before routing: /admin/users, /admin.
      '/admin%2Fusers',
      '/admin%2fusers',
      '/public/..%2Fadmin',
      '/%2Fadmin',
      // An absolute-form target is judged by its path like any other.
      `http://${host}/admin/users`,
      `http://${host}/x/../ADMIN`,
    ]) {
      const r = await get(host, trick, asBob);
      assert.equal(r.status, 403, `${trick}: ${r.body}`);
      assert.equal(codeOf(r), 'rbac_forbidden', trick);
    }
    assert.equal(service.seen.length, before, 'nothing refused reached the service');
    // An encoded slash elsewhere is data: allowed, and the service receives the path as judged.
    const encoded = await get(host, '/repos/group%2fproject', asBob);
    assert.equal(encoded.status, 200, encoded.body);
    assert.equal(seenBy(encoded).url, '/repos/group%2Fproject');
    // The admin reaches it under every spelling, and the service receives the path that was judged.
    for (const [trick, judged] of [
      ['/%61dmin/users', '/admin/users'],
      ['/x/../admin/users', '/admin/users'],
      ['//admin//users', '/admin/users'],
    ]) {
      const r = await get(host, trick, asAlice, 'DELETE');
      assert.equal(r.status, 200, `${trick}: ${r.body}`);
      assert.equal(seenBy(r).url, judged);
      assert.equal(seenBy(r).method, 'DELETE');
    }
  });

  it('judges HEAD as GET where GET is denied, and the methods X-HTTP-Method-Override and its kin name; OPTIONS is a method like any', async () => {
    const noGetReports = role(4, 'no-get-reports', 25, { denied_methods: ['GET'], denied_paths: [] });
    const readerAll = role(5, 'reader-all', 10, { allowed_methods: ['*'], allowed_paths: ['/reports/*'] });
    apply(basicEndpoint([alice(), bob()]));
    const host = 'basic.rbac.localhost';
    const before = service.seen.length;
    for (const [name, headers, path, method] of [
      ['X-HTTP-Method-Override: DELETE on a GET', { 'x-http-method-override': 'DELETE' }, '/docs', 'GET'],
      ['X-HTTP-Method: PUT on a POST', { 'x-http-method': 'PUT' }, '/docs', 'POST'],
      ['X-Method-Override: PATCH', { 'x-method-override': 'patch' }, '/docs', 'HEAD'],
      ['_method=DELETE in the query', {}, '/docs?_method=DELETE', 'GET'],
      ['OPTIONS, which the reader does not allow', {}, '/docs', 'OPTIONS'],
    ] as const) {
      const r = await get(host, path, { ...asBob, ...headers }, method);
      assert.equal(r.status, 403, `${name}: ${r.body}`);
      assert.equal(codeOf(r), 'rbac_forbidden', name);
    }
    assert.equal(service.seen.length, before, 'nothing refused reached the service');
    const ok = await get(host, '/docs', { ...asBob, 'x-http-method-override': 'GET' });
    assert.equal(ok.status, 200, ok.body);
    assert.equal(seenBy(ok).headers['x-http-method-override'], 'GET', 'an allowed override reaches the service as sent');

    // A role that denies GET denies HEAD: the service would run its GET handler.
    apply(basicEndpoint([alice(), client(2, 'bob', [4, 5])], [noGetReports, readerAll]));
    const head = await visit(port, host, '/reports/q1', { method: 'HEAD', headers: asBob });
    assert.equal(head.status, 403);
    assert.equal(codeOf(head), 'rbac_forbidden');
    assert.equal((await get(host, '/reports/q1', asBob, 'POST')).status, 200);
  });

  it('stamps the deciding role headers, X-Edge-Rbac-Client and -Roles; visitor copies never reach the service', async () => {
    apply(basicEndpoint([alice(), bob()]));
    const forged = { 'X-Edge-Rbac-Client': 'root', 'x_edge_rbac_roles': 'admin', 'x-edge-rbac-roles': 'admin', 'X-Role': 'forged' };
    const r = await get('basic.rbac.localhost', '/reports', { ...asBob, ...forged });
    assert.equal(r.status, 200, r.body);
    const h = seenBy(r).headers;
    assert.equal(h['x-edge-rbac-client'], 'bob');
    assert.equal(h['x-edge-rbac-roles'], 'no-admin,reader');
    assert.equal(h['x-role'], 'reader', 'the role header replaces the visitor copy');
    assert.equal(h['x_edge_rbac_roles'], undefined);
    assert.equal(h.authorization, undefined, 'the credential is not forwarded');
    const a = await get('basic.rbac.localhost', '/admin/panel', asAlice, 'POST');
    assert.equal(seenBy(a).headers['x-role'], 'admin');
    assert.equal(seenBy(a).headers['x-edge-rbac-roles'], 'admin,reader');
  });

  it('strips visitor copies of every role header of the endpoint, also where the deciding role sets none (no forged X-Admin)', async () => {
    const plain = role(1, 'plain', 10, { allowed_methods: ['GET'] });
    const boss = role(2, 'boss', 30, { allowed_methods: ['*'], allowed_paths: ['/boss/*'], headers: { 'x-admin': '1', 'x-tenant': 'acme' } });
    apply(basicEndpoint([client(1, 'alice', [1, 2]), client(2, 'bob', [1])], [plain, boss]));
    const forged = { 'X-Admin': '1', x_tenant: 'acme', 'X-Other': 'kept' };
    const r = await get('basic.rbac.localhost', '/reports', { ...asBob, ...forged });
    assert.equal(r.status, 200, r.body);
    const h = seenBy(r).headers;
    assert.equal(h['x-admin'], undefined, 'a role header the deciding role does not set is still the edge’s');
    assert.equal(h['x_tenant'], undefined, 'in every spelling');
    assert.equal(h['x-tenant'], undefined);
    assert.equal(h['x-other'], 'kept', 'other visitor fields pass');
    // An exact deny covers the path with a final slash and in any case too.
    apply(basicEndpoint([client(1, 'alice', [1, 3]), client(2, 'bob', [1, 3])], [plain, boss, role(3, 'no-export', 20, { denied_paths: ['/export'] })]));
    for (const trick of ['/export', '/export/', '/EXPORT/', '/x/../Export']) {
      const d = await get('basic.rbac.localhost', trick, asBob);
      assert.equal(d.status, 403, `${trick}: ${d.body}`);
    }
    apply(basicEndpoint([client(1, 'alice', [1, 2]), client(2, 'bob', [1])], [plain, boss]));
    // The boss role's own request still gets them, from the edge.
    const a = await get('basic.rbac.localhost', '/boss/x', { ...asAlice, 'X-Admin': 'forged' });
    assert.equal(seenBy(a).headers['x-admin'], '1');
    assert.equal(seenBy(a).headers['x-tenant'], 'acme');
  });

  it('refuses settings users (no client) and answers the pages by Accept with X-Edge-Error', async () => {
    apply(basicEndpoint([alice(), bob()]));
    const json = await get('basic.rbac.localhost', '/', { authorization: basic('settings-user', 'pw-0123456789') });
    assert.equal(json.status, 403);
    assert.equal(codeOf(json), 'rbac_not_a_client');
    assert.equal(JSON.parse(json.body).code, 'rbac_not_a_client');
    const html = await get('basic.rbac.localhost', '/', { ...asBob, accept: 'text/html' }, 'PUT');
    assert.equal(html.status, 403);
    assert.match(String(html.headers['content-type']), /^text\/html/);
    assert.equal(codeOf(html), 'rbac_forbidden');
  });

  it('judges WebSocket upgrades like requests', async () => {
    apply(basicEndpoint([alice(), bob()]));
    const ok = await wsUpgrade(port, 'basic.rbac.localhost', '/socket', { headers: asBob });
    assert.equal(ok.status, 101);
    assert.equal(ok.echo!.headers['x-edge-rbac-client'], 'bob');
    const refused = await wsUpgrade(port, 'basic.rbac.localhost', '/admin/socket', { headers: asBob });
    assert.equal(refused.status, 403);
    assert.equal(refused.code, 'rbac_forbidden');
  });

  it('applies client, membership and role changes from the next request: revoked, a membership removed, a role tightened', async () => {
    apply(basicEndpoint([alice(), bob()]));
    const host = 'basic.rbac.localhost';
    assert.equal((await get(host, '/x', asAlice)).status, 200);
    apply(basicEndpoint([alice({ status: 'revoked' }), bob()]));
    const revoked = await get(host, '/x', asAlice);
    assert.equal(revoked.status, 403);
    assert.equal(codeOf(revoked), 'rbac_client_inactive');
    // Bob's reader membership removed: still authenticated (not 401), granted nothing.
    apply(basicEndpoint([alice(), bob({ role_ids: [3] })]));
    const removed = await get(host, '/x', asBob);
    assert.equal(removed.status, 403);
    assert.equal(codeOf(removed), 'rbac_forbidden');
    assert.equal((await get(host, '/x', asAlice)).status, 200, 'alice active again');
    // The reader role loses HEAD... and GET: a role change applies to every holder.
    apply(basicEndpoint([alice(), bob()], [role(1, 'reader', 10, { allowed_methods: ['HEAD'] }), admin, noAdmin]));
    assert.equal((await get(host, '/x', asBob)).status, 403);
  });

  it('limits a client to its role rate across connections on this edge: 429 rbac_rate_limited with Retry-After', async () => {
    apply(basicEndpoint([alice(), bob()], [role(1, 'reader', 10, { allowed_methods: ['GET'], rate_limit_rps: 1 }), admin, noAdmin]));
    // Twelve requests at once, each on its own connection: one second's budget is one request, however slow the machine
    // (a refill needs a second per request, so at most a few of twelve can pass).
    const replies: Reply[] = await Promise.all(Array.from({ length: 12 }, () => get('basic.rbac.localhost', '/x', asBob)));
    const limited = replies.filter((r) => r.status === 429);
    assert.ok(replies.some((r) => r.status === 200));
    assert.ok(limited.length > 0, `statuses: ${replies.map((r) => r.status).join(',')}`);
    assert.equal(codeOf(limited[0]), 'rbac_rate_limited');
    assert.ok(Number(limited[0].headers['retry-after']) >= 1);
  });

  it('token clients: a client token passes as its client, an endpoint API key is no client', async () => {
    const key = visitorTokenKey(box);
    const e = endpointConfig({
      uuid: 'e0000000-0000-4000-8000-000000000002',
      id: 902,
      hostname: 'token.rbac.localhost',
      origin_url: `http://127.0.0.1:${service.port}`,
      auth: authConfig({
        mode: 'token',
        tokens: [
          { id: 'rbac-client:5', client_id: 5, label: 'ci', digest: tokenDigest(key, 'evk_client-token-0123456789'), expires_at: null },
          { id: 'key-1', label: 'deploy key', digest: tokenDigest(key, 'evk_api-key-0123456789'), expires_at: null },
        ],
      }),
      rbac: rbacConfig([reader], [client(5, 'ci-bot', [1])]),
    });
    apply(e);
    const ok = await get('token.rbac.localhost', '/builds', { authorization: 'Bearer evk_client-token-0123456789' });
    assert.equal(ok.status, 200, ok.body);
    assert.equal(seenBy(ok).headers['x-edge-rbac-client'], 'ci-bot');
    const apiKey = await get('token.rbac.localhost', '/builds', { authorization: 'Bearer evk_api-key-0123456789' });
    assert.equal(codeOf(apiKey), 'rbac_not_a_client');
  });

  it('RBAC judges _method only in its literal spelling: %5Fmethod, %5fmethod, _m%65thod (and PHP\'s .method, +_method) are judged as _method', async () => {
    apply(basicEndpoint([alice(), bob()]));
    const host = 'basic.rbac.localhost';
    const before = service.seen.length;
    for (const query of ['%5Fmethod=DELETE', '%5fmethod=DELETE', '_m%65thod=DELETE', '_method=D%45LETE', 'a=1&%5Fmethod=PUT', 'a=1;_method=PUT', '.method=DELETE', '+_method=PATCH']) {
      // Node's querystring, URLSearchParams and Python's parse_qs read each of these as _method.
      const r = await get(host, `/docs?${query}`, asBob);
      assert.equal(r.status, 403, `${query}: ${r.body}`);
      assert.equal(codeOf(r), 'rbac_forbidden', query);
    }
    assert.equal(service.seen.length, before, 'nothing refused reached the service');
    for (const query of ['method=DELETE', '_methods=DELETE', '%5Fmethod=GET', 'q=100%25']) {
      const r = await get(host, `/docs?${query}`, asBob);
      assert.equal(r.status, 200, `${query}: ${r.body}`);
    }
  });

  it('method-override headers in underscore spelling are forwarded unjudged: X_HTTP_Method_Override and kin are judged by their folded name', async () => {
    apply(basicEndpoint([alice(), bob()]));
    const host = 'basic.rbac.localhost';
    const before = service.seen.length;
    // WSGI and Rack read these as HTTP_X_HTTP_METHOD_OVERRIDE and act on them (the CVE-2024-45614 class).
    for (const name of ['X_HTTP_Method_Override', 'x_http_method_override', 'X_Method_Override', 'X_HTTP_Method', 'x-http_method-override']) {
      const r = await get(host, '/docs', { ...asBob, [name]: 'DELETE' });
      assert.equal(r.status, 403, `${name}: ${r.body}`);
      assert.equal(codeOf(r), 'rbac_forbidden', name);
      assert.match(r.body, /overridden as DELETE/, name);
    }
    assert.equal(service.seen.length, before, 'nothing refused reached the service');
    const ok = await get(host, '/docs', { ...asBob, X_HTTP_Method_Override: 'GET' });
    assert.equal(ok.status, 200, ok.body);
  });

  it('X-Original-URL and X-Rewrite-URL reach the service: stripped in every spelling', async () => {
    apply(basicEndpoint([alice(), bob()]));
    const hints = { 'X-Original-URL': '/admin/panel', 'x-rewrite-url': '/admin/panel', X_Original_URL: '/admin/panel', 'X_REWRITE_URL': '/admin/panel', 'x-original_url': '/admin' };
    const r = await get('basic.rbac.localhost', '/docs', { ...asBob, ...hints });
    assert.equal(r.status, 200, r.body);
    const seen = Object.keys(seenBy(r).headers).filter((n) => /original|rewrite/i.test(n));
    assert.deepEqual(seen, [], 'no rewrite hint reaches the service');
  });

  describe('OIDC sessions', () => {
    const host = 'oidc.rbac.localhost';
    const url = (path: string) => `https://${host}:${port}${path}`;
    const oidcEndpoint = (rbac: Partial<RbacConfig> = {}): EndpointConfig =>
      endpointConfig({
        uuid: 'e0000000-0000-4000-8000-000000000003',
        id: 903,
        hostname: host,
        origin_url: `http://127.0.0.1:${service.port}`,
        auth: authConfig({
          mode: 'oidc',
          providers: [oidcProviderConfig({ id: 7, issuer: op.issuer, client_id: 'edge-rbac', client_secret_sealed: box.seal(CLIENT_SECRET) })],
          allowed_redirects: [],
        }),
        rbac: rbacConfig(
          [reader],
          [
            client(11, 'alice', [1], { identities: [{ provider: '7', subject: 'alice' }] }),
            client(12, 'bob', [1], { email: 'bob@example.com' }),
            client(13, 'carl', [1], { email: 'carl@example.com' }),
          ],
          { self_registration: { enabled: true, allowed_email_domains: [] }, ...rbac },
        ),
      });
    /** A browser (with its own cookie jar) logged in through the provider as `account`, and its first page. */
    const loginAs = async (account: string, path = '/home') => {
      op.login = account;
      const b = new Browser({ [host]: { port, tls: false } });
      const page = await b.load(url(path));
      assert.ok(page.hops.some((h) => h.startsWith(op.issuer)), `${account} went through the provider`);
      return { b, page };
    };

    it('maps the login to a client by linked identity or verified e-mail; others are offered registration', async () => {
      apply(oidcEndpoint());
      const a = await loginAs('alice');
      assert.equal(a.page.status, 200, a.page.body.slice(0, 300));
      assert.equal(seenBy(a.page).headers['x-edge-rbac-client'], 'alice');
      assert.equal(seenBy(a.page).headers['x-edge-auth-user'], 'alice');
      const b = await loginAs('bob');
      assert.equal(b.page.status, 200, b.page.body.slice(0, 300));
      assert.equal(seenBy(b.page).headers['x-edge-rbac-client'], 'bob', 'the verified e-mail, in any case');
      // carl's e-mail matches a client, but the provider did not say it is verified.
      for (const account of ['carl', 'mallory']) {
        const { page } = await loginAs(account);
        assert.equal(page.status, 403, account);
        assert.equal(codeOf(page), 'rbac_not_a_client', account);
        assert.ok(page.body.includes(`href="/register?endpoint=${oidcEndpoint().uuid}"`), `${account}: ${page.body}`);
      }
      // The session rides on; revoking alice applies to her next request.
      assert.equal((await a.b.load(url('/next'))).status, 200);
      apply(oidcEndpoint({ clients: [client(11, 'alice', [1], { status: 'disabled', identities: [{ provider: '7', subject: 'alice' }] })] }));
      const disabled = await a.b.load(url('/next'));
      assert.equal(disabled.status, 403);
      assert.equal(codeOf(disabled), 'rbac_client_inactive');
    });
  });
});
