// The auth stage in modes oauth and oidc, compiled from plain endpoint configs behind a real HTTP server, against a
// real OpenID provider (oidc-provider on 127.0.0.1): the login through the provider and back, sessions (another
// endpoint's, tampered, expired, logged out, a provider gone), refusals (non-browser requests, bad state, replayed
// code, e-mails not allowed), provider outages, return_to, plain HTTP, reserved paths, an oauth2 provider.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type http from 'node:http';
import { SESSION_COOKIE, LOGIN_COOKIE, SessionKeys, openSession, sealSession } from '../../../src/edge/auth/session.ts';
import { compileEndpoint } from '../../../src/edge/compile.ts';
import type { AuthOutcome } from '../../../src/edge/metrics.ts';
import { runStages } from '../../../src/edge/pipeline/pipeline.ts';
import { StageMemory } from '../../../src/edge/pipeline/stage-memory.ts';
import type { Stage, StageDeps } from '../../../src/edge/pipeline/stage.ts';
import { authStage } from '../../../src/edge/stages/auth.ts';
import { SessionCache } from '../../../src/edge/auth/oidc-login.ts';
import { SecretBox } from '../../../src/shared/secrets.ts';
import type { EndpointConfig, OAuthProviderConfig, VisitorAuthConfig } from '../../../src/shared/snapshot.ts';
import { Browser, type Page } from '../../helpers/browser.ts';
import { oidcProviderConfig, visitorAuthConfig } from '../../helpers/endpoint-config.ts';
import { makeKey, sign, startJwksServer } from '../../helpers/jwks-server.ts';
import { startTestProvider, type TestProvider } from '../../helpers/oidc-provider.ts';
import { baseEndpoint, serveStage, type StageServer } from '../../helpers/stage-server.ts';

const box = new SecretBox('oidc-login-test');
const CLIENT_SECRET = 'edge-client-secret-0123456789';
const APP = 'app.edge.test';
const OTHER = 'other.edge.test';
const json = { accept: 'application/json' };

function oauthConfig(providers: OAuthProviderConfig[], over: Partial<VisitorAuthConfig> = {}): VisitorAuthConfig {
  return visitorAuthConfig({ mode: 'oidc', providers, allowed_redirects: [], ...over });
}

/** The Set-Cookie line for `name` in an answer, if any. */
function setCookieOf(page: Page, name: string): string | undefined {
  return (page.headers['set-cookie'] ?? []).find((l) => l.startsWith(`${name}=`));
}

/** The answer the stage server gives for a request it let through: what the stage decided. */
function passed(page: Page): { upstreamHeaders: Record<string, string>; dropCookie: string | string[] | null } {
  assert.equal(page.status, 200, `expected the request to pass, got ${page.status}: ${page.body.slice(0, 300)}`);
  return JSON.parse(page.body);
}

let endpointIds = 100;
const codeOf = (page: { headers: http.IncomingHttpHeaders }) => page.headers['x-edge-error'];

describe('OAuth/OIDC login at the edge (auth stage)', () => {
  let op: TestProvider;
  const servers: StageServer[] = [];
  const closers: Array<() => Promise<void>> = [];

  before(async () => {
    op = await startTestProvider(
      [
        {
          client_id: 'edge',
          client_secret: CLIENT_SECRET,
          redirect_uris: [`https://${APP}/.edge/auth/callback`, `https://${APP}:8443/.edge/auth/callback`, `https://${OTHER}/.edge/auth/callback`],
        },
      ],
      {
        alice: { email: 'Alice@Example.com', email_verified: true },
        mallory: { email: 'mallory@evil.test', email_verified: true },
        unverified: { email: 'bob@example.com', email_verified: false },
        anonymous: {},
      },
    );
  });
  after(async () => {
    await Promise.all(servers.map((s) => s.close()));
    for (const close of closers) await close();
    await op?.close();
  });

  const provider = (over: Partial<OAuthProviderConfig> = {}): OAuthProviderConfig =>
    oidcProviderConfig({ issuer: op.issuer, client_id: 'edge', client_secret_sealed: box.seal(CLIENT_SECRET), ...over });

  const endpointFor = (hostname: string, providers: OAuthProviderConfig[], over: Partial<VisitorAuthConfig> = {}): EndpointConfig =>
    baseEndpoint({ id: ++endpointIds, uuid: randomUUID(), hostname, auth: oauthConfig(providers, over) });

  function recordingDeps(extra: Partial<StageDeps> = {}) {
    const outcomes: AuthOutcome[] = [];
    const deps: StageDeps = {
      publicHttpsPort: () => 443,
      secrets: box,
      allowPrivate: true,
      memory: new StageMemory(),
      sessions: { keys: SessionKeys.fromSettings('', box), ttlSeconds: 3600 },
      authOutcome: (_e, _s, o) => void outcomes.push(o),
      ...extra,
    };
    return { deps, outcomes };
  }

  async function serve(endpoint: EndpointConfig, deps: StageDeps, options: { secure?: boolean; stage?: Stage } = {}) {
    const stage = options.stage ?? authStage().compile(endpoint, deps)!;
    const s = await serveStage(stage, endpoint, { secure: options.secure ?? true });
    servers.push(s);
    return s;
  }

  /** A browser whose https URLs for the endpoint's host reach the (plain HTTP) stage server. */
  const browserFor = (s: StageServer, host = APP) => new Browser({ [host]: { port: s.port, tls: false } });

  it('sends a browser without a session to the provider and back with a session; the upstream gets the identity, never the cookies', async () => {
    const { deps, outcomes } = recordingDeps();
    const endpoint = endpointFor(APP, [provider()]);
    const s = await serve(endpoint, deps);
    const b = browserFor(s);
    const page = await b.load(`https://${APP}/private/page?x=1`);
    const decided = passed(page);
    assert.deepEqual(decided.upstreamHeaders, { 'x-edge-auth-user': 'alice', 'x-edge-auth-email': 'Alice@Example.com', 'x-edge-auth-provider': '1' });
    assert.deepEqual(decided.dropCookie, [SESSION_COOKIE, LOGIN_COOKIE], 'the session and login cookies are left out of the forwarded Cookie');
    assert.equal(page.url, `https://${APP}/private/page?x=1`, 'back where the visitor was going');
    // The way there: the provider's authorization endpoint with PKCE S256, state and nonce, then the callback.
    const authorize = new URL(page.hops[1]);
    assert.equal(authorize.origin, op.issuer);
    assert.equal(authorize.searchParams.get('code_challenge_method'), 'S256');
    assert.equal(authorize.searchParams.get('redirect_uri'), `https://${APP}/.edge/auth/callback`);
    assert.ok(authorize.searchParams.get('state') && authorize.searchParams.get('nonce'));
    const callback = b.history.find((p) => p.url.startsWith(`https://${APP}/.edge/auth/callback`))!;
    assert.equal(callback.status, 302);
    const cookie = setCookieOf(callback, SESSION_COOKIE)!;
    assert.match(cookie, /; Max-Age=3600; Path=\/; Secure; HttpOnly; SameSite=Lax$/);
    assert.doesNotMatch(cookie, /domain=/i, '__Host-: no Domain');
    assert.match(setCookieOf(callback, LOGIN_COOKIE)!, /^__Host-edge_login=; Max-Age=0/, 'the login attempt is spent');
    assert.equal(callback.headers['cache-control'], 'no-store');

    // A second request rides the session: no trip to the provider.
    const tokens = op.requests.get('/token');
    const again = await b.load(`https://${APP}/other`);
    assert.equal(passed(again).upstreamHeaders['x-edge-auth-user'], 'alice');
    assert.equal(again.hops.length, 1);
    assert.equal(op.requests.get('/token'), tokens);
    assert.deepEqual(outcomes, ['missing', 'ok', 'ok', 'ok']);
  });

  it('answers a request that is not a browser page load 401 login_required as JSON, never a redirect', async () => {
    const { deps } = recordingDeps();
    const endpoint = endpointFor(APP, [provider()]);
    const s = await serve(endpoint, deps);
    const cases: Array<{ method?: string; headers: Record<string, string> }> = [
      { headers: json },
      { headers: { accept: '*/*' } },
      { headers: {} as Record<string, string> },
      { method: 'POST', headers: { accept: 'text/html' } },
      { method: 'DELETE', headers: { accept: 'text/html' } },
      // A WebSocket handshake from a browser page: never redirected.
      { headers: { accept: 'text/html', connection: 'Upgrade', upgrade: 'websocket' } },
    ];
    for (const c of cases) {
      const r = await s.request({ method: c.method, headers: { accept: '', ...c.headers } });
      assert.equal(r.status, 401, JSON.stringify(c));
      assert.equal(r.headers.location, undefined);
      assert.match(String(r.headers['content-type']), /^application\/json/);
      assert.equal(JSON.parse(r.text).code, 'login_required');
      assert.match(JSON.parse(r.text).detail, /https:\/\/app\.edge\.test\/\.edge\/auth\/login/);
      assert.match(String(r.headers['www-authenticate']), /^Session realm="app\.edge\.test"/);
    }
  });

  it('redirects plain HTTP to HTTPS first: the login path and a browser page load (on the public HTTPS port)', async () => {
    const { deps } = recordingDeps({ publicHttpsPort: () => 8443 });
    const endpoint = endpointFor(APP, [provider()]);
    const s = await serve(endpoint, deps, { secure: false });
    const b = browserFor(s);
    const login = await b.load(`http://${APP}/.edge/auth/login?return_to=%2Fx`, { follow: false });
    assert.equal(login.status, 302);
    assert.equal(login.headers.location, `https://${APP}:8443/.edge/auth/login?return_to=%2Fx`);
    const page = await b.load(`http://${APP}/docs?a=b`, { follow: false });
    assert.equal(page.status, 302);
    assert.equal(page.headers.location, `https://${APP}:8443/docs?a=b`);
    assert.equal(b.jar.get(APP), undefined, 'no cookie is set over plain HTTP');
    // Over HTTPS the redirect URI names the public port too.
    const tls = await serve(endpoint, deps);
    const start = await browserFor(tls).load(`https://${APP}/docs`, { follow: false });
    assert.equal(new URL(String(start.headers.location)).searchParams.get('redirect_uri'), `https://${APP}:8443/.edge/auth/callback`);
  });

  it('lists several providers on a login page, names escaped; a provider is picked by ?provider', async () => {
    const { deps } = recordingDeps();
    const evil = `<script>alert("x")</script> & 'Co'`;
    const endpoint = endpointFor(APP, [provider(), provider({ id: 2, name: evil })]);
    const s = await serve(endpoint, deps);
    const b = browserFor(s);
    const first = await b.load(`https://${APP}/reports?q=1`, { follow: false });
    assert.equal(first.status, 302);
    assert.equal(first.headers.location, '/.edge/auth/login?return_to=%2Freports%3Fq%3D1');
    const page = await b.load(`https://${APP}/.edge/auth/login?return_to=%2Freports%3Fq%3D1`);
    assert.equal(page.status, 200);
    assert.ok(!page.body.includes('<script>'), 'no markup from a provider name');
    assert.ok(page.body.includes('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;Co&#39;'));
    assert.ok(page.body.includes('href="/.edge/auth/login?provider=1&amp;return_to=%2Freports%3Fq%3D1"'));
    assert.ok(page.body.includes('href="/.edge/auth/login?provider=2&amp;return_to=%2Freports%3Fq%3D1"'));
    assert.match(String(page.headers['content-security-policy']), /default-src 'none'/);
    const done = await b.load(`https://${APP}/.edge/auth/login?provider=2&return_to=%2Freports%3Fq%3D1`);
    assert.equal(passed(done).upstreamHeaders['x-edge-auth-provider'], '2');
    assert.equal(done.url, `https://${APP}/reports?q=1`);
    const unknown = await b.load(`https://${APP}/.edge/auth/login?provider=9`);
    assert.equal(unknown.status, 400);
    assert.equal(codeOf(unknown), 'login_failed');
  });

  it('refuses a session cookie minted for another endpoint, a tampered one, and one signed with other keys', async () => {
    const { deps } = recordingDeps();
    const a = endpointFor(APP, [provider()]);
    const other = endpointFor(OTHER, [provider()]);
    const sa = await serve(a, deps);
    const sb = await serve(other, deps);
    const b = browserFor(sa);
    passed(await b.load(`https://${APP}/`));
    const value = b.cookie(APP, SESSION_COOKIE)!;
    const ok = await sa.request({ headers: { ...json, cookie: `${SESSION_COOKIE}=${value}` } });
    assert.equal(ok.status, 200);
    // The same value on endpoint B (same keys, same provider id): refused.
    const replayed = await sb.request({ headers: { ...json, cookie: `${SESSION_COOKIE}=${value}` } });
    assert.equal(replayed.status, 401);
    assert.equal(JSON.parse(replayed.text).code, 'login_required');
    // Tampered: the payload re-encoded with another subject, the MAC kept; a changed MAC; another key's signature.
    const [kid, body, mac] = value.split('.');
    const payload = JSON.parse(Buffer.from(body, 'base64url').toString());
    payload[2] = 'admin';
    const forged = `${kid}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.${mac}`;
    const flipped = `${kid}.${body}.${mac.slice(0, -2)}${mac.endsWith('AA') ? 'AB' : 'AA'}`;
    const session = openSession(deps.sessions!.keys.forEndpoint(a.uuid), value)!;
    assert.equal(session.endpoint, a.id);
    const foreign = sealSession(SessionKeys.fromSettings('', new SecretBox('another-edge-secret')).forEndpoint(a.uuid), session);
    // Signed with B's keys but naming A's id: B refuses it for the id, A for the keys.
    const crossed = sealSession(deps.sessions!.keys.forEndpoint(other.uuid), session);
    assert.equal((await sb.request({ headers: { ...json, cookie: `${SESSION_COOKIE}=${crossed}` } })).status, 401);
    for (const bad of [forged, flipped, foreign, crossed, 'garbage', `${kid}..`]) {
      const r = await sa.request({ headers: { ...json, cookie: `${SESSION_COOKIE}=${bad}` } });
      assert.equal(r.status, 401, bad);
    }
  });

  it('fails a login whose state does not match, has no login cookie, or replays a code', async () => {
    const { deps } = recordingDeps();
    const endpoint = endpointFor(APP, [provider()]);
    const s = await serve(endpoint, deps);
    const b = browserFor(s);
    // Go to the provider and back, stopping before the callback reaches the edge.
    const start = await b.load(`https://${APP}/`, { follow: false });
    let url = String(start.headers.location);
    for (;;) {
      const hop = await b.load(url, { follow: false });
      url = new URL(String(hop.headers.location), url).href;
      if (url.startsWith(`https://${APP}/.edge/auth/callback`)) break;
    }
    const callback = new URL(url);
    const loginCookie = b.cookie(APP, LOGIN_COOKIE)!;
    const cookie = `${LOGIN_COOKIE}=${loginCookie}`;
    const badState = new URL(callback);
    badState.searchParams.set('state', 'not-the-state');
    const r1 = await s.request({ path: badState.pathname + badState.search, headers: { accept: 'text/html', cookie } });
    assert.equal(r1.status, 400);
    assert.equal(r1.headers['x-edge-error'], 'login_failed');
    assert.equal(setCookieOf({ headers: r1.headers } as Page, SESSION_COOKIE), undefined);
    const r2 = await s.request({ path: callback.pathname + callback.search, headers: { accept: 'text/html' } });
    assert.equal(r2.status, 400, 'no login cookie');
    assert.match(r2.text, /no login is in progress/);
    // The real callback works once; the same code again (with the same login cookie) is refused by the provider.
    const r3 = await s.request({ path: callback.pathname + callback.search, headers: { accept: 'text/html', cookie } });
    assert.equal(r3.status, 302);
    assert.ok(setCookieOf({ headers: r3.headers } as Page, SESSION_COOKIE));
    const r4 = await s.request({ path: callback.pathname + callback.search, headers: { accept: 'text/html', cookie } });
    assert.equal(r4.status, 400);
    assert.equal(r4.headers['x-edge-error'], 'login_failed');
    assert.equal(setCookieOf({ headers: r4.headers } as Page, SESSION_COOKIE), undefined);
  });

  it('refuses a login whose e-mail the allow-lists do not admit (403), or that the provider calls unverified', async () => {
    const { deps } = recordingDeps();
    const endpoint = endpointFor(APP, [provider({ allowed_domains: ['example.com'] })]);
    const s = await serve(endpoint, deps);
    for (const account of ['mallory', 'unverified', 'anonymous']) {
      op.login = account;
      const b = browserFor(s);
      const page = await b.load(`https://${APP}/`);
      assert.equal(page.status, 403, account);
      assert.equal(codeOf(page), 'login_forbidden');
      assert.equal(b.cookie(APP, SESSION_COOKIE), undefined);
    }
    op.login = 'alice';
    // Upper case in the provider's answer: compared lower-case.
    passed(await browserFor(s).load(`https://${APP}/`));
    const listed = endpointFor(APP, [provider({ allowed_emails: ['alice@example.com'] })]);
    passed(await browserFor(await serve(listed, deps)).load(`https://${APP}/`));
  });

  it('refuses a session from the next request once its provider is no longer offered, or its address no longer allowed', async () => {
    const { deps } = recordingDeps();
    const endpoint = endpointFor(APP, [provider(), provider({ id: 2, name: 'Second' })]);
    const s = await serve(endpoint, deps);
    const b = browserFor(s);
    passed(await b.load(`https://${APP}/.edge/auth/login?provider=1`));
    const cookie = `${SESSION_COOKIE}=${b.cookie(APP, SESSION_COOKIE)}`;
    assert.equal((await s.request({ headers: { ...json, cookie } })).status, 200);
    // The new snapshot offers provider 2 only (1 disabled or deleted).
    const without = { ...endpoint, auth: oauthConfig([provider({ id: 2, name: 'Second' })]) };
    s.stage = authStage().compile(without, deps)!;
    assert.equal((await s.request({ headers: { ...json, cookie } })).status, 401);
    // Back, but restricted to another domain: refused too.
    const restricted = { ...endpoint, auth: oauthConfig([provider({ allowed_domains: ['corp.example'] })]) };
    s.stage = authStage().compile(restricted, deps)!;
    assert.equal((await s.request({ headers: { ...json, cookie } })).status, 401);
    s.stage = authStage().compile(endpoint, deps)!;
    assert.equal((await s.request({ headers: { ...json, cookie } })).status, 200);
  });

  it('ends a session at its expiry, and sooner when session_ttl_seconds is shortened', async () => {
    let clock = Date.now();
    const deps: StageDeps = { ...recordingDeps().deps, clock: { now: () => clock } };
    const endpoint = endpointFor(APP, [provider()], { session_ttl_seconds: 600 });
    const stage = (e: EndpointConfig) => authStage().compile(e, deps)!;
    const s = await serve(endpoint, deps, { stage: stage(endpoint) });
    const b = browserFor(s);
    passed(await b.load(`https://${APP}/`));
    const cookie = `${SESSION_COOKIE}=${b.cookie(APP, SESSION_COOKIE)}`;
    assert.match(setCookieOf(b.history.find((p) => p.url.includes('/callback'))!, SESSION_COOKIE)!, /Max-Age=600;/);
    clock += 590_000;
    assert.equal((await s.request({ headers: { ...json, cookie } })).status, 200);
    s.stage = stage({ ...endpoint, auth: oauthConfig([provider()], { session_ttl_seconds: 300 }) });
    assert.equal((await s.request({ headers: { ...json, cookie } })).status, 401, 'issued 590 s ago, now limited to 300 s');
    s.stage = stage(endpoint);
    clock += 20_000;
    assert.equal((await s.request({ headers: { ...json, cookie } })).status, 401, 'expired');
  });

  it('logs out: both cookies cleared, back to return_to, and a copy of the cookie refused on this edge', async () => {
    const { deps } = recordingDeps();
    const endpoint = endpointFor(APP, [provider()]);
    const s = await serve(endpoint, deps);
    const b = browserFor(s);
    passed(await b.load(`https://${APP}/`));
    const cookie = `${SESSION_COOKIE}=${b.cookie(APP, SESSION_COOKIE)}`;
    const out = await b.load(`https://${APP}/.edge/auth/logout?return_to=%2Fbye`, { follow: false });
    assert.equal(out.status, 302);
    assert.equal(out.headers.location, '/bye');
    assert.match(setCookieOf(out, SESSION_COOKIE)!, /^__Host-edge_session=; Max-Age=0; Path=\/; Secure; HttpOnly; SameSite=Lax$/);
    assert.ok(setCookieOf(out, LOGIN_COOKIE));
    assert.equal(b.cookie(APP, SESSION_COOKIE), undefined);
    assert.equal((await s.request({ headers: { ...json, cookie } })).status, 401);
    // Regression: a recompile with another session lifetime must not forget the logout.
    s.stage = authStage().compile({ ...endpoint, auth: oauthConfig([provider()], { session_ttl_seconds: 7200 }) }, deps)!;
    assert.equal((await s.request({ headers: { ...json, cookie } })).status, 401, 'still logged out after a recompile');
    const elsewhere = await b.load(`https://${APP}/.edge/auth/logout?return_to=https%3A%2F%2Fevil.example%2F`, { follow: false });
    assert.equal(elsewhere.headers.location, '/');
    const posted = await b.load(`https://${APP}/.edge/auth/logout`, { method: 'POST', follow: false });
    assert.equal(posted.status, 302);
  });

  it('sends the visitor back only to a path on the host or an allowed target', async () => {
    const { deps } = recordingDeps();
    const endpoint = endpointFor(APP, [provider()], { allowed_redirects: [`https://${APP}:8443/after`] });
    const s = await serve(endpoint, deps);
    const cases: Array<[string, string]> = [
      ['//evil.example/x', `https://${APP}/`],
      ['/\\evil.example', `https://${APP}/`],
      ['https://evil.example/', `https://${APP}/`],
      [`https://${APP}/not-listed`, `https://${APP}/`],
      ['/\t/evil.example', `https://${APP}/`],
      ['/ok/path?x=1', `https://${APP}/ok/path?x=1`],
      [`https://${APP}:8443/after`, `https://${APP}:8443/after`],
    ];
    const b = browserFor(s);
    for (const [returnTo, expected] of cases) {
      const page = await b.load(`https://${APP}/.edge/auth/login?return_to=${encodeURIComponent(returnTo)}`);
      passed(page);
      assert.equal(page.url, expected, returnTo);
      b.jar.get(APP)?.clear();
    }
  });

  it('answers 503 auth_unavailable, not 401, when the provider cannot be reached, and recovers when it is back', async () => {
    const { deps, outcomes } = recordingDeps();
    const endpoint = endpointFor(APP, [provider()]);
    for (const mode of ['down', 'drop'] as const) {
      // A new memory each time: nothing discovered yet.
      const d = { ...deps, memory: new StageMemory() };
      const s = await serve(endpoint, d);
      op.mode = mode;
      const page = await browserFor(s).load(`https://${APP}/`);
      assert.equal(page.status, 503, mode);
      assert.equal(codeOf(page), 'auth_unavailable');
      assert.match(page.body, /Test OP could not be reached/);
      op.mode = 'up';
    }
    assert.ok(outcomes.includes('unavailable'));
    // Discovered, then the token endpoint goes away during the callback: 503 as well.
    const s = await serve(endpoint, { ...deps, memory: new StageMemory() });
    const b = browserFor(s);
    const start = await b.load(`https://${APP}/`, { follow: false });
    let url = String(start.headers.location);
    while (!url.startsWith(`https://${APP}/`)) {
      const hop = await b.load(url, { follow: false });
      url = new URL(String(hop.headers.location), url).href;
    }
    op.mode = 'down';
    const failed = await b.load(url, { follow: false });
    op.mode = 'up';
    assert.equal(failed.status, 503);
    assert.equal(codeOf(failed), 'auth_unavailable');
  });

  it('refuses a provider on a loopback address unless private addresses are allowed (the address policy)', async () => {
    const { deps } = recordingDeps({ allowPrivate: false });
    const endpoint = endpointFor(APP, [provider()]);
    const s = await serve(endpoint, deps);
    const before = op.requests.get('/.well-known/openid-configuration') ?? 0;
    const page = await browserFor(s).load(`https://${APP}/`);
    assert.equal(page.status, 503);
    assert.equal(codeOf(page), 'auth_unavailable');
    assert.equal(op.requests.get('/.well-known/openid-configuration') ?? 0, before, 'never fetched');
  });

  it('logs in with a kind oauth2 provider: explicit URLs, identity from userinfo', async () => {
    const { deps } = recordingDeps();
    const oauth2 = provider({ kind: 'oauth2', authorization_url: `${op.issuer}/auth`, token_url: `${op.issuer}/token`, userinfo_url: `${op.issuer}/me` });
    const endpoint = endpointFor(APP, [oauth2], { mode: 'oauth' });
    const s = await serve(endpoint, deps);
    const b = browserFor(s);
    const before = op.requests.get('/.well-known/openid-configuration') ?? 0;
    const page = await b.load(`https://${APP}/x`);
    assert.deepEqual(passed(page).upstreamHeaders, { 'x-edge-auth-user': 'alice', 'x-edge-auth-email': 'Alice@Example.com', 'x-edge-auth-provider': '1' });
    assert.equal(new URL(page.hops[1]).searchParams.get('nonce'), null, 'no nonce: no ID token is read');
    assert.equal(op.requests.get('/.well-known/openid-configuration') ?? 0, before, 'no discovery');
    assert.ok((op.requests.get('/me') ?? 0) > 0);
  });

  it('keeps /.edge/auth/ to itself: unknown paths 404, other methods 405, never forwarded even with a session', async () => {
    const { deps } = recordingDeps();
    const endpoint = endpointFor(APP, [provider()]);
    const s = await serve(endpoint, deps);
    const b = browserFor(s);
    passed(await b.load(`https://${APP}/`));
    const cookie = `${SESSION_COOKIE}=${b.cookie(APP, SESSION_COOKIE)}`;
    for (const path of ['/.edge/auth', '/.edge/auth/', '/.edge/auth/other', '/.edge/auth/login/x']) {
      const r = await s.request({ path, headers: { ...json, cookie } });
      assert.equal(r.status, 404, path);
      assert.equal(JSON.parse(r.text).code, 'route_not_found');
    }
    const post = await s.request({ method: 'POST', path: '/.edge/auth/login', headers: { ...json, cookie } });
    assert.equal(post.status, 405);
    assert.equal(post.headers.allow, 'GET, HEAD');
    // Not reserved: a path that only starts with the same letters.
    assert.equal((await s.request({ path: '/.edge/authx', headers: { ...json, cookie } })).status, 200);
  });

  it('still runs the JWT layer after a session: the session alone is not enough when the endpoint requires a JWT', async () => {
    const key = await makeKey('login-jwt');
    const jwks = await startJwksServer([key]);
    closers.push(() => jwks.close());
    const { deps } = recordingDeps();
    const endpoint = { ...endpointFor(APP, [provider()]), jwt: { jwks_url: jwks.url, issuer: null, audience: null, claim_headers: {} } };
    const stages = compileEndpoint(endpoint, deps).stages;
    const both: Stage = { name: 'both', run: (ctx) => runStages(stages, ctx) };
    const s = await serve(endpoint, deps, { stage: both });
    const b = browserFor(s);
    const page = await b.load(`https://${APP}/`);
    assert.equal(page.status, 401, 'logged in, but no JWT');
    assert.equal(codeOf(page), 'auth_required');
    const token = await sign(key, { sub: 'svc' });
    const withJwt = await b.load(`https://${APP}/`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(passed(withJwt).upstreamHeaders['x-edge-auth-user'], 'alice');
  });

  it('answers browsers 503 and others 401 when no provider is offered (the last one disabled): closed, never open', async () => {
    const { deps } = recordingDeps();
    const endpoint = endpointFor(APP, []);
    const s = await serve(endpoint, deps);
    const page = await browserFor(s).load(`https://${APP}/`);
    assert.equal(page.status, 503);
    assert.equal(codeOf(page), 'auth_unavailable');
    assert.equal((await s.request({ headers: json })).status, 401);
  });
});


describe('the verified-session cache', () => {
  it('holds at most its size, keeps what is used, and drops what is not', () => {
    const cache = new SessionCache<number>(4);
    for (let i = 0; i < 100; i++) {
      cache.set(`s${i}`, i);
      assert.ok(cache.size <= 4);
      // s0 is used on every turn: it survives every generation change.
      assert.equal(cache.get('s0'), 0);
    }
    assert.equal(cache.get('s1'), undefined, 'unused entries go');
    assert.equal(cache.get('s99'), 99);
  });
});
