// Invites and self-registration end to end: the real program configured through its control API (roles, invites,
// RBAC settings, visitor auth), the edge's registration pages on the endpoint's HTTPS host, a real origin service, and
// a real OpenID provider for the login modes. A visitor redeems an invite (a username and password, or the identity of
// their login), then gets through with it; single use, expiry, CSRF, the path rule, e-mail domain limits; both stores.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SESSION_COOKIE } from '../../src/edge/auth/session.ts';
import { Browser } from '../helpers/browser.ts';
import { edgeCaughtUp, expectBody, type User } from '../helpers/endpoint-api.ts';
import { visit, type Reply } from '../helpers/http.ts';
import { startEchoService, type Echoed, type LocalService } from '../helpers/local-service.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { startTestProvider, type TestProvider } from '../helpers/oidc-provider.ts';

const CLIENT_SECRET = 'edge-register-client-secret-0123456789';
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const csrfOf = (html: string) => /name="csrf" value="([^"]+)"/.exec(html)?.[1];
const codeOf = (r: Reply) => r.headers['x-edge-error'];
const FORM = 'application/x-www-form-urlencoded';

describe('RBAC invites and self-registration at the edge', () => {
  let t: TestNode;
  let user: User;
  let service: LocalService<Echoed>;
  let op: TestProvider;
  let httpsPort: number;
  let httpPort: number;
  /** `pw`: basic mode; `sso`: oidc with self-registration for example.com; `closed`: oidc without self-registration. */
  const ep: Record<'pw' | 'sso' | 'closed', { uuid: string; id: number; host: string }> = {} as never;

  const api = (method: string, path: string, body?: unknown, expect = 200) => expectBody(expect, t.api(method, path, { key: user.api_key, body }), `${method} ${path}`);
  const url = (host: string, path: string) => `https://${host}:${httpsPort}${path}`;
  const origin = (host: string) => `https://${host}:${httpsPort}`;
  const client = (e: { uuid: string }, id: number) => api('GET', `/v1/endpoints/${e.uuid}/rbac/clients/${id}`);
  const invite = async (e: { uuid: string }, body: Record<string, unknown> = {}) =>
    (await api('POST', `/v1/endpoints/${e.uuid}/rbac/clients/invites`, body)) as { id: number; invite_url: string; invite_token: string; status: string };
  /** The form at `path` over HTTPS, as a browser loads it: its status, body and form token. */
  const form = async (host: string, path: string, headers: Record<string, string> = {}) => {
    const r = await visit(httpsPort, host, path, { secure: true, headers: { accept: 'text/html', ...headers } });
    return { ...r, csrf: csrfOf(r.body) };
  };
  const post = (host: string, path: string, fields: Record<string, string>, headers: Record<string, string> = {}) =>
    visit(httpsPort, host, path, {
      secure: true,
      method: 'POST',
      body: new URLSearchParams(fields).toString(),
      // Host with the port, as a browser sends it to a port other than 443: what Origin is compared with.
      headers: { host: `${host}:${httpsPort}`, accept: 'text/html', 'content-type': FORM, origin: origin(host), ...headers },
    });

  before(async () => {
    service = await startEchoService();
    t = await startTestNode({ EDGE_ORIGIN_ALLOW_PRIVATE: 'true' });
    user = await t.createUser('business');
    httpsPort = t.node.edge!.httpsPort;
    httpPort = t.node.edge!.httpPort;
    const created: Record<string, { uuid: string; id: number; hostname: string }> = {};
    for (const role of ['pw', 'sso', 'closed']) created[role] = await api('POST', '/v1/endpoints', {}, 201);
    op = await startTestProvider(
      [{ client_id: 'edge-register', client_secret: CLIENT_SECRET, redirect_uris: [created.sso, created.closed].map((e) => url(e.hostname, '/.edge/auth/callback')) }],
      {
        alice: { email: 'alice@example.com', email_verified: true },
        carol: { email: 'carol@example.com', email_verified: true },
        mallory: { email: 'mallory@evil.test', email_verified: true },
      },
    );
    for (const [role, e] of Object.entries(created)) {
      ep[role as keyof typeof ep] = { uuid: e.uuid, id: e.id, host: e.hostname };
      await api('PUT', `/v1/endpoints/${e.uuid}/origin`, { url: `http://127.0.0.1:${service.port}` });
      // Mode basic needs a settings user; with RBAC on it is no client, so it is admitted nowhere (rbac_not_a_client).
      if (role === 'pw') await api('PUT', `/v1/endpoints/${e.uuid}/settings`, { mode: 'basic', basic_users: [{ username: 'owner', password: 'owner-password-0' }] });
      else {
        await api('POST', `/v1/endpoints/${e.uuid}/oauth/providers`, { kind: 'oidc', name: 'Test OP', issuer: op.issuer, client_id: 'edge-register', client_secret: CLIENT_SECRET }, 201);
        await api('PUT', `/v1/endpoints/${e.uuid}/settings`, { mode: 'oidc' });
      }
      // RBAC on: one default role, given to every invited or self-registered client.
      await api('POST', `/v1/endpoints/${e.uuid}/rbac/roles`, { name: 'reader', is_default: true, permissions: { allowed_methods: ['GET', 'HEAD'], allowed_paths: ['/*'] } }, 201);
    }
    await api('PUT', `/v1/endpoints/${ep.sso.uuid}/rbac/settings`, { self_registration: { enabled: true, allowed_email_domains: ['example.com'] } });
    await edgeCaughtUp(t);
  });
  after(async () => {
    await t?.close();
    await service?.close();
    await op?.close();
  });

  it('redeems an invite with a username and password, after which the visitor gets through with them', async () => {
    const inv = await invite(ep.pw, { email: 'bob@example.com' });
    assert.equal(inv.invite_url, `/register?endpoint=${ep.pw.id}&invite=${inv.invite_token}`);
    await edgeCaughtUp(t);
    const denied = await visit(httpsPort, ep.pw.host, '/', { secure: true, headers: { authorization: basic('bob', 'correct-horse-1'), accept: 'application/json' } });
    assert.equal(denied.status, 401, 'no such user before the registration');

    const page = await form(ep.pw.host, inv.invite_url);
    assert.equal(page.status, 200, page.body);
    assert.match(page.body, /bob@example\.com/);
    assert.ok(page.csrf);
    const done = await post(ep.pw.host, inv.invite_url, { csrf: page.csrf!, username: 'bob', password: 'correct-horse-1', confirm: 'correct-horse-1' });
    assert.equal(done.status, 200, done.body);
    assert.match(done.body, /You are registered/);

    const registered = await client(ep.pw, inv.id);
    assert.equal(registered.status, 'active');
    assert.equal(registered.registration_source, 'invite');
    assert.equal(registered.has_password, true);
    // The answer waited for this edge to apply the change: the very next request is admitted.
    const seenBefore = service.seen.length;
    const through = await visit(httpsPort, ep.pw.host, '/reports', { secure: true, headers: { authorization: basic('bob', 'correct-horse-1') } });
    assert.equal(through.status, 200, through.body);
    assert.equal(service.seen.length, seenBefore + 1);
    assert.equal(service.seen.at(-1)!.headers['x-edge-rbac-client'], 'bob@example.com');
    assert.equal(service.seen.at(-1)!.headers['x-edge-rbac-roles'], 'reader');

    // Single use: the link is now "not valid", and replaying the posted form changes nothing.
    const again = await form(ep.pw.host, inv.invite_url);
    assert.equal(again.status, 404);
    assert.equal(codeOf(again), 'invite_not_found');
    assert.match(again.body, /not valid/);
    const replay = await post(ep.pw.host, inv.invite_url, { csrf: page.csrf!, username: 'bob2', password: 'another-pass-2', confirm: 'another-pass-2' });
    assert.equal(replay.status, 404);
    assert.deepEqual(await client(ep.pw, inv.id), registered);
    assert.equal((await visit(httpsPort, ep.pw.host, '/', { secure: true, headers: { authorization: basic('bob2', 'another-pass-2'), accept: 'application/json' } })).status, 401);
  });

  it('refuses forms failing the CSRF checks with 403 and changes nothing', async () => {
    const inv = await invite(ep.pw, { email: 'dave@example.com' });
    await edgeCaughtUp(t);
    const page = await form(ep.pw.host, inv.invite_url);
    const fields = { username: 'dave', password: 'correct-horse-3', confirm: 'correct-horse-3' };
    const cases: Array<[string, Record<string, string>, Record<string, string>]> = [
      ['no form token', fields, {}],
      ['a forged form token', { ...fields, csrf: `${page.csrf!.slice(0, -4)}AAAA` }, {}],
      ['a cross-site Origin', { ...fields, csrf: page.csrf! }, { origin: 'https://evil.test' }],
      ['Sec-Fetch-Site cross-site', { ...fields, csrf: page.csrf! }, { 'sec-fetch-site': 'cross-site' }],
    ];
    for (const [what, body, headers] of cases) {
      const r = await post(ep.pw.host, inv.invite_url, body, headers);
      assert.equal(r.status, 403, what);
      assert.equal(codeOf(r), 'registration_form_invalid', what);
    }
    assert.equal((await client(ep.pw, inv.id)).status, 'invited');
    // The form itself still works.
    const ok = await post(ep.pw.host, inv.invite_url, { ...fields, csrf: page.csrf! });
    assert.equal(ok.status, 200, ok.body);
  });

  it('shows the form again on a taken username (409) or differing passwords (400), and takes the corrected one', async () => {
    const inv = await invite(ep.pw, { email: 'erin@example.com' });
    await edgeCaughtUp(t);
    const page = await form(ep.pw.host, inv.invite_url);
    const differ = await post(ep.pw.host, inv.invite_url, { csrf: page.csrf!, username: 'erin', password: 'correct-horse-4', confirm: 'correct-horse-5' });
    assert.equal(differ.status, 400);
    assert.match(differ.body, /differ/);
    const taken = await post(ep.pw.host, inv.invite_url, { csrf: page.csrf!, username: 'bob', password: 'correct-horse-4', confirm: 'correct-horse-4' });
    assert.equal(taken.status, 409, taken.body);
    assert.match(taken.body, /<form/);
    assert.equal((await client(ep.pw, inv.id)).status, 'invited');
    const ok = await post(ep.pw.host, inv.invite_url, { csrf: csrfOf(taken.body)!, username: 'erin', password: 'correct-horse-4', confirm: 'correct-horse-4' });
    assert.equal(ok.status, 200, ok.body);
  });

  it('answers an invite that expired "invite expired" (410) and changes nothing', async () => {
    const inv = await invite(ep.pw, { email: 'frank@example.com', expires_in_hours: 1 });
    await edgeCaughtUp(t);
    const page = await form(ep.pw.host, inv.invite_url);
    assert.equal(page.status, 200);
    // Expired in the store after this edge got it (an expired invite leaves the snapshot at its next publication).
    await t.node.db!.query(`UPDATE rbac_invites SET expires_at = now() - interval '1 minute' WHERE client_id = $1`, [inv.id]);
    const r = await post(ep.pw.host, inv.invite_url, { csrf: page.csrf!, username: 'frank', password: 'correct-horse-6', confirm: 'correct-horse-6' });
    assert.equal(r.status, 410, r.body);
    assert.equal(codeOf(r), 'invite_expired');
    assert.match(r.body, /expired/);
    assert.equal((await client(ep.pw, inv.id)).status, 'invited');
  });

  it('keeps answering a link that expired "invite expired" (410) after the endpoint is published again; one expired over 7 days ago is not valid (404)', async () => {
    const recent = await invite(ep.pw, { email: 'gina@example.com', expires_in_hours: 1 });
    const old = await invite(ep.pw, { email: 'hank@example.com', expires_in_hours: 1 });
    await t.node.db!.query(`UPDATE rbac_invites SET expires_at = now() - interval '1 minute' WHERE client_id = $1`, [recent.id]);
    await t.node.db!.query(`UPDATE rbac_invites SET expires_at = now() - interval '8 days' WHERE client_id = $1`, [old.id]);
    // Any write publishes the endpoint again, from the store as it is now.
    await invite(ep.pw, { email: 'ivan@example.com' });
    await edgeCaughtUp(t);
    const expired = await form(ep.pw.host, recent.invite_url);
    assert.equal(expired.status, 410, expired.body);
    assert.equal(codeOf(expired), 'invite_expired');
    assert.match(expired.body, /expired/);
    assert.equal(expired.csrf, undefined, 'no form');
    const json = await visit(httpsPort, ep.pw.host, recent.invite_url, { secure: true, headers: { accept: 'application/json' } });
    assert.equal(json.status, 410);
    assert.equal(JSON.parse(json.body).code, 'invite_expired');
    const gone = await form(ep.pw.host, old.invite_url);
    assert.equal(gone.status, 404, gone.body);
    assert.equal(codeOf(gone), 'invite_not_found');
    assert.equal((await client(ep.pw, recent.id)).status, 'invited', 'nothing changed');
  });

  it('leaves /register of another endpoint id (or none) to the service, behind visitor auth as any path', async () => {
    for (const path of [`/register?endpoint=${ep.pw.id + 1000}&invite=x`, '/register']) {
      const anonymous = await visit(httpsPort, ep.pw.host, path, { secure: true, headers: { accept: 'application/json' } });
      assert.equal(anonymous.status, 401, 'the auth stage, not a registration page');
      assert.equal(codeOf(anonymous), 'auth_required');
      const r = await visit(httpsPort, ep.pw.host, path, { secure: true, headers: { authorization: basic('bob', 'correct-horse-1') } });
      assert.equal(r.status, 200, r.body);
      assert.equal(service.seen.at(-1)!.url, path);
    }
  });

  it('sends a registration page load over plain HTTP to HTTPS', async () => {
    const r = await visit(httpPort, ep.pw.host, `/register?endpoint=${ep.pw.id}&invite=abc`, { headers: { accept: 'text/html' } });
    assert.equal(r.status, 302);
    assert.equal(r.headers.location, url(ep.pw.host, `/register?endpoint=${ep.pw.id}&invite=abc`));
  });

  it('links the identity of the visitor’s login to an invite, sending them through the login first', async () => {
    op.login = 'alice';
    const inv = await invite(ep.sso, { email: 'alice@example.com' });
    await edgeCaughtUp(t);
    const b = new Browser();
    const page = await b.load(url(ep.sso.host, inv.invite_url));
    assert.equal(page.status, 200, page.body.slice(0, 300));
    assert.ok(page.hops.some((h) => h.startsWith(op.issuer)), 'through the provider');
    assert.equal(page.url, url(ep.sso.host, inv.invite_url), 'back at the invite');
    assert.match(page.body, /Link this account/);
    assert.match(page.body, /alice@example\.com/);
    const cookie = `${SESSION_COOKIE}=${b.cookie(ep.sso.host, SESSION_COOKIE)}`;
    const done = await post(ep.sso.host, inv.invite_url, { csrf: csrfOf(page.body)! }, { cookie });
    assert.equal(done.status, 303, done.body);
    assert.equal(done.headers.location, '/');
    const linked = await client(ep.sso, inv.id);
    assert.equal(linked.status, 'active');
    assert.equal(linked.has_oauth, true);
    const through = await visit(httpsPort, ep.sso.host, '/', { secure: true, headers: { cookie } });
    assert.equal(through.status, 200, through.body);
    assert.equal(service.seen.at(-1)!.headers['x-edge-rbac-client'], 'alice@example.com');
  });

  it('self-registers a logged-in visitor of an allowed e-mail domain, who then gets through', async () => {
    op.login = 'carol';
    try {
      const b = new Browser();
      const path = `/register?endpoint=${ep.sso.uuid}`;
      const before = await b.load(url(ep.sso.host, '/'));
      assert.equal(before.status, 403, 'logged in, but not a client yet');
      const page = await b.load(url(ep.sso.host, path));
      assert.equal(page.status, 200, page.body.slice(0, 300));
      assert.match(page.body, /Request access/);
      const cookie = `${SESSION_COOKIE}=${b.cookie(ep.sso.host, SESSION_COOKIE)}`;
      const done = await post(ep.sso.host, path, { csrf: csrfOf(page.body)! }, { cookie });
      assert.equal(done.status, 303, done.body);
      const clients = (await api('GET', `/v1/endpoints/${ep.sso.uuid}/rbac/clients`)) as { items?: any[] } | any[];
      const list = Array.isArray(clients) ? clients : clients.items!;
      const carol = list.find((c) => c.email === 'carol@example.com');
      assert.ok(carol, JSON.stringify(list));
      assert.equal(carol.registration_source, 'self');
      assert.equal(carol.status, 'active');
      const through = await visit(httpsPort, ep.sso.host, '/', { secure: true, headers: { cookie } });
      assert.equal(through.status, 200, through.body);
      const again = await b.load(url(ep.sso.host, path));
      assert.match(again.body, /already have access/);
    } finally {
      op.login = 'alice';
    }
  });

  it('refuses self-registration outside the allowed e-mail domains, without a login session, and where it is off', async () => {
    op.login = 'mallory';
    try {
      const b = new Browser();
      const page = await b.load(url(ep.sso.host, `/register?endpoint=${ep.sso.id}`));
      assert.equal(page.status, 403);
      assert.equal(page.headers['x-edge-error'], 'email_domain_not_allowed');
      const cookie = `${SESSION_COOKIE}=${b.cookie(ep.sso.host, SESSION_COOKIE)}`;
      const forced = await post(ep.sso.host, `/register?endpoint=${ep.sso.id}`, { csrf: 'x' }, { cookie });
      assert.equal(forced.status, 403);
    } finally {
      op.login = 'alice';
    }
    const noSession = await post(ep.sso.host, `/register?endpoint=${ep.sso.id}`, { csrf: 'x' });
    assert.equal(noSession.status, 401);
    assert.equal(codeOf(noSession), 'login_required');
    const closed = await visit(httpsPort, ep.closed.host, `/register?endpoint=${ep.closed.id}`, { secure: true, headers: { accept: 'text/html' } });
    assert.equal(closed.status, 403);
    assert.equal(codeOf(closed), 'self_registration_disabled');
    const list = (await api('GET', `/v1/endpoints/${ep.sso.uuid}/rbac/clients`)) as { items?: any[] } | any[];
    assert.ok(!(Array.isArray(list) ? list : list.items!).some((c) => c.email === 'mallory@evil.test'), 'nobody was registered');
  });
});
