// OAuth/OIDC login end to end: the real program configured through its control API (providers, settings, toggle),
// a real OpenID provider (oidc-provider on 127.0.0.1), real agents in front of a local service, and a visitor with a
// cookie jar on the edge's HTTPS listener following every redirect through the login. What the service receives
// (the identity headers, never the session cookies), sessions refused where they must be, WebSockets, both stores.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import { LOGIN_COOKIE, SESSION_COOKIE } from '../../src/edge/auth/session.ts';
import { Browser, type Page } from '../helpers/browser.ts';
import { edgeCaughtUp, expectBody, type User } from '../helpers/endpoint-api.ts';
import { visit, wsUpgrade } from '../helpers/http.ts';
import { startEchoService, type Echoed, type LocalService } from '../helpers/local-service.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { startTestProvider, type TestProvider } from '../helpers/oidc-provider.ts';

const CLIENT_SECRET = 'edge-e2e-client-secret-0123456789';
const json = { accept: 'application/json' };
const seenBy = (page: Page) => JSON.parse(page.body) as Echoed;

describe('OAuth/OIDC login through the program', () => {
  let t: TestNode;
  let user: User;
  let service: LocalService<Echoed>;
  let op: TestProvider;
  let httpsPort: number;
  let httpPort: number;
  const agents: Agent[] = [];
  /** Endpoints by role: `main` and `other` admit anyone the provider vouches for; `listed` only alice. */
  const ep: Record<'main' | 'other' | 'listed', { uuid: string; host: string; provider: number }> = {} as never;

  const applied = () => edgeCaughtUp(t);
  const api = (method: string, path: string, body?: unknown, expect = 200) => expectBody(expect, t.api(method, path, { key: user.api_key, body }), `${method} ${path}`);
  const url = (host: string, path: string) => `https://${host}:${httpsPort}${path}`;

  before(async () => {
    service = await startEchoService();
    // The provider is on loopback: allowed only as a development setting.
    t = await startTestNode({ EDGE_ORIGIN_ALLOW_PRIVATE: 'true' });
    user = await t.createUser('business');
    httpsPort = t.node.edge!.httpsPort;
    httpPort = t.node.edge!.httpPort;
    const created: Record<string, { uuid: string; hostname: string }> = {};
    for (const role of ['main', 'other', 'listed']) created[role] = await api('POST', '/v1/endpoints', {}, 201);
    // The client registered at the provider names each endpoint's redirect URI (with the edge's HTTPS port).
    op = await startTestProvider(
      [{ client_id: 'edge-e2e', client_secret: CLIENT_SECRET, redirect_uris: Object.values(created).map((e) => url(e.hostname, '/.edge/auth/callback')) }],
      { alice: { email: 'alice@example.com', email_verified: true }, mallory: { email: 'mallory@evil.test', email_verified: true } },
    );
    for (const [role, e] of Object.entries(created)) {
      const provider = await api(
        'POST',
        `/v1/endpoints/${e.uuid}/oauth/providers`,
        { kind: 'oidc', name: 'Test OP', issuer: op.issuer, client_id: 'edge-e2e', client_secret: CLIENT_SECRET, ...(role === 'listed' ? { allowed_emails: ['alice@example.com'] } : {}) },
        201,
      );
      // Exactly what the edge sends as redirect_uri, so it is what a user registers at the provider.
      assert.equal(provider.redirect_uri, url(e.hostname, '/.edge/auth/callback'));
      await api('PUT', `/v1/endpoints/${e.uuid}/settings`, { mode: 'oidc' });
      ep[role as keyof typeof ep] = { uuid: e.uuid, host: e.hostname, provider: provider.id };
    }
    await applied();
    for (const e of Object.values(ep)) {
      agents.push(await startAgent({ edgeUrl: `http://127.0.0.1:${httpPort}`, apiKey: user.api_key, endpoint: e.uuid, protocol: 'http', target: service.port }));
    }
  });
  after(async () => {
    for (const a of agents) await a.stop();
    await t?.close();
    await service?.close();
    await op?.close();
  });

  /** A browser logged in to `host` as the provider's current account. */
  async function loggedIn(host: string): Promise<Browser> {
    const b = new Browser();
    const page = await b.load(url(host, '/'));
    assert.equal(page.status, 200, page.body.slice(0, 300));
    return b;
  }

  it('logs a browser in through the provider to the agent, which gets the identity and never the session cookies; the next request rides the session', async () => {
    const b = new Browser();
    b.setCookie(ep.main.host, 'theme', 'dark');
    const page = await b.load(url(ep.main.host, '/reports?week=3'), { headers: { 'x-edge-auth-email': 'forged@evil.test', 'X-Edge-Auth-User': 'root' } });
    assert.equal(page.status, 200, page.body.slice(0, 300));
    assert.equal(page.url, url(ep.main.host, '/reports?week=3'), 'back where the visitor was going');
    assert.ok(page.hops.some((h) => h.startsWith(op.issuer)), 'through the provider');
    const seen = seenBy(page);
    assert.equal(seen.url, '/reports?week=3');
    assert.equal(seen.headers['x-edge-auth-user'], 'alice');
    assert.equal(seen.headers['x-edge-auth-email'], 'alice@example.com', 'the visitor copy is replaced');
    assert.equal(seen.headers['x-edge-auth-provider'], String(ep.main.provider));
    assert.equal(seen.headers.cookie, 'theme=dark', 'the edge’s cookies are removed, the application’s kept');
    assert.ok(b.cookie(ep.main.host, SESSION_COOKIE));
    assert.equal(b.cookie(ep.main.host, LOGIN_COOKIE), undefined, 'the login attempt is spent');

    const tokens = op.requests.get('/token');
    const again = await b.load(url(ep.main.host, '/second'));
    assert.equal(again.status, 200);
    assert.equal(again.hops.length, 1, 'no redirect');
    assert.equal(seenBy(again).headers['x-edge-auth-user'], 'alice');
    assert.equal(op.requests.get('/token'), tokens, 'the provider is not asked again');
  });

  it('answers a request that is not a browser page load 401 login_required JSON, never a redirect, and refuses a WebSocket without a session', async () => {
    const before = service.seen.length;
    for (const headers of [json, { accept: '*/*' }, {}]) {
      const r = await visit(httpsPort, ep.main.host, '/api/items', { secure: true, headers });
      assert.equal(r.status, 401);
      assert.equal(r.headers.location, undefined);
      assert.equal(JSON.parse(r.body).code, 'login_required');
    }
    const ws = await wsUpgrade(httpsPort, ep.main.host, '/socket', { secure: true, headers: { accept: 'text/html' } });
    assert.equal(ws.status, 401);
    assert.equal(ws.code, 'login_required');
    assert.equal(service.seen.length, before, 'nothing reached the service');
  });

  it('carries a WebSocket upgrade that has a session, with the identity and without the session cookie', async () => {
    const b = await loggedIn(ep.main.host);
    const ws = await wsUpgrade(httpsPort, ep.main.host, '/socket', { secure: true, headers: { cookie: `${SESSION_COOKIE}=${b.cookie(ep.main.host, SESSION_COOKIE)}; app=1` } });
    assert.equal(ws.status, 101);
    assert.equal(ws.echo!.headers['x-edge-auth-user'], 'alice');
    assert.equal(ws.echo!.headers.cookie, 'app=1');
  });

  it('refuses a session cookie replayed on another endpoint, and a tampered one', async () => {
    const b = await loggedIn(ep.main.host);
    const value = b.cookie(ep.main.host, SESSION_COOKIE)!;
    const onOther = await visit(httpsPort, ep.other.host, '/', { secure: true, headers: { ...json, cookie: `${SESSION_COOKIE}=${value}` } });
    assert.equal(onOther.status, 401);
    const [kid, body, mac] = value.split('.');
    const payload = JSON.parse(Buffer.from(body, 'base64url').toString());
    payload[0] += 1;
    const moved = `${kid}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.${mac}`;
    for (const [host, bad] of [
      [ep.other.host, moved],
      [ep.main.host, `${value.slice(0, -3)}AAA`],
    ]) {
      const r = await visit(httpsPort, host, '/', { secure: true, headers: { ...json, cookie: `${SESSION_COOKIE}=${bad}` } });
      assert.equal(r.status, 401, bad);
    }
    assert.equal((await visit(httpsPort, ep.main.host, '/', { secure: true, headers: { ...json, cookie: `${SESSION_COOKIE}=${value}` } })).status, 200);
  });

  it('fails a login with a bad state, and a replayed code', async () => {
    const b = new Browser();
    const start = await b.load(url(ep.other.host, '/'), { follow: false });
    let next = new URL(String(start.headers.location)).href;
    while (!next.startsWith(url(ep.other.host, '/'))) {
      const hop = await b.load(next, { follow: false });
      next = new URL(String(hop.headers.location), next).href;
    }
    const callback = new URL(next);
    const cookie = `${LOGIN_COOKIE}=${b.cookie(ep.other.host, LOGIN_COOKIE)}`;
    const tampered = new URL(callback);
    tampered.searchParams.set('state', 'forged');
    const bad = await visit(httpsPort, ep.other.host, tampered.pathname + tampered.search, { secure: true, headers: { accept: 'text/html', cookie } });
    assert.equal(bad.status, 400);
    assert.equal(bad.headers['x-edge-error'], 'login_failed');
    const good = await visit(httpsPort, ep.other.host, callback.pathname + callback.search, { secure: true, headers: { accept: 'text/html', cookie } });
    assert.equal(good.status, 302);
    assert.ok((good.headers['set-cookie'] ?? []).some((c) => c.startsWith(`${SESSION_COOKIE}=`) && !c.startsWith(`${SESSION_COOKIE}=;`)));
    const replay = await visit(httpsPort, ep.other.host, callback.pathname + callback.search, { secure: true, headers: { accept: 'text/html', cookie } });
    assert.equal(replay.status, 400);
    assert.equal(replay.headers['x-edge-error'], 'login_failed');
    assert.ok(!(replay.headers['set-cookie'] ?? []).some((c) => c.startsWith(`${SESSION_COOKIE}=`) && !c.startsWith(`${SESSION_COOKIE}=;`)));
  });

  it('refuses an e-mail the provider’s allow-list does not admit with 403, and admits a listed one', async () => {
    op.login = 'mallory';
    try {
      const b = new Browser();
      const page = await b.load(url(ep.listed.host, '/'));
      assert.equal(page.status, 403);
      assert.equal(page.headers['x-edge-error'], 'login_forbidden');
      assert.equal(b.cookie(ep.listed.host, SESSION_COOKIE), undefined);
    } finally {
      op.login = 'alice';
    }
    await loggedIn(ep.listed.host);
  });

  it('redirects plain HTTP to HTTPS before any login', async () => {
    const page = await new Browser().load(`http://${ep.main.host}:${httpPort}/docs`, { follow: false });
    assert.equal(page.status, 302);
    assert.equal(page.headers.location, url(ep.main.host, '/docs'));
    const login = await new Browser().load(`http://${ep.main.host}:${httpPort}/.edge/auth/login`, { follow: false });
    assert.equal(login.headers.location, url(ep.main.host, '/.edge/auth/login'));
  });

  it('ends the session at logout', async () => {
    const b = await loggedIn(ep.other.host);
    const cookie = `${SESSION_COOKIE}=${b.cookie(ep.other.host, SESSION_COOKIE)}`;
    const out = await b.load(url(ep.other.host, '/.edge/auth/logout?return_to=%2Fgoodbye'), { follow: false });
    assert.equal(out.status, 302);
    assert.equal(out.headers.location, '/goodbye');
    assert.equal(b.cookie(ep.other.host, SESSION_COOKIE), undefined);
    const after = await b.load(url(ep.other.host, '/'), { headers: json });
    assert.equal(after.status, 401);
    assert.equal((await visit(httpsPort, ep.other.host, '/', { secure: true, headers: { ...json, cookie } })).status, 401, 'the old cookie is refused on this edge');
  });

  it('refuses a disabled provider’s session from the next request once the change reaches the edge', async () => {
    const b = await loggedIn(ep.listed.host);
    const cookie = `${SESSION_COOKIE}=${b.cookie(ep.listed.host, SESSION_COOKIE)}`;
    assert.equal((await visit(httpsPort, ep.listed.host, '/', { secure: true, headers: { ...json, cookie } })).status, 200);
    await api('PUT', `/v1/endpoints/${ep.listed.uuid}/oauth/providers/${ep.listed.provider}/toggle`, { enabled: false }, 204);
    await applied();
    const refused = await visit(httpsPort, ep.listed.host, '/', { secure: true, headers: { ...json, cookie } });
    assert.equal(refused.status, 401);
    assert.equal(JSON.parse(refused.body).code, 'login_required');
    // A browser now finds no provider to log in with: closed, never open.
    const page = await new Browser().load(url(ep.listed.host, '/'));
    assert.equal(page.status, 503);
    assert.equal(page.headers['x-edge-error'], 'auth_unavailable');
  });
});
