// The registration stage against plain inputs: which requests are its own, invites judged from the snapshot (pending,
// unknown, expired as the clock moves), the CSRF checks (form token bound to the invite and expiring, Origin,
// Sec-Fetch-Site, plain HTTP), the bounded form, and how the control API's answers become pages. The control API is a
// recording function here; test/edge/rbac-register.test.ts runs the whole program.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FORM_TTL_SECONDS, MAX_FORM_BYTES } from '../../../src/edge/registration/form.ts';
import { registerStage } from '../../../src/edge/stages/register.ts';
import type { StageDeps } from '../../../src/edge/pipeline/stage.ts';
import type { RegistrationRequest } from '../../../src/shared/registration.ts';
import { SecretBox } from '../../../src/shared/secrets.ts';
import type { EndpointConfig, RbacConfig } from '../../../src/shared/snapshot.ts';
import { tokenDigest, visitorTokenKey } from '../../../src/shared/visitor-credentials.ts';
import { visit } from '../../helpers/http.ts';
import { baseEndpoint, serveStage, type StageServer } from '../../helpers/stage-server.ts';

/** A request to a stage server read as text (its own request() reads every 200 as the pass-through JSON). */
async function ask(s: StageServer, o: { method?: string; path: string; headers?: Record<string, string>; body?: string }) {
  const r = await visit(s.port, 'app.edge.test', o.path, { method: o.method, headers: { accept: 'application/json', ...o.headers }, body: o.body });
  return { status: r.status, headers: r.headers, text: r.body };
}

const box = new SecretBox('register-stage-test');
const key = visitorTokenKey(box);
const HOUR = 3_600_000;
const T0 = Date.parse('2026-06-01T12:00:00Z');
const ORIGIN = 'https://app.edge.test';
const form = { 'content-type': 'application/x-www-form-urlencoded', origin: ORIGIN, accept: 'text/html' };

function rbacWith(invites: Array<{ token: string; client: number; expires: number }>, over: Partial<RbacConfig> = {}): RbacConfig {
  return {
    roles: [{ id: 1, name: 'reader', priority: 0, permissions: { allowed_methods: ['GET'], denied_methods: [], allowed_paths: ['/*'], denied_paths: [], rate_limit_rps: 0, headers: {} } }],
    clients: invites.map((i) => ({ id: i.client, identifier: `client${i.client}@example.com`, status: 'invited' as const, email: `client${i.client}@example.com`, identities: [], role_ids: [1] })),
    invites: invites.map((i) => ({ client_id: i.client, digest: tokenDigest(key, i.token), expires_at: new Date(i.expires).toISOString() })),
    self_registration: { enabled: false, allowed_email_domains: [] },
    ...over,
  };
}

function endpoint(rbac: RbacConfig | null, mode: 'basic' | 'token' = 'basic'): EndpointConfig {
  return baseEndpoint({
    id: 42,
    rbac,
    auth: { mode, realm: '', token_source: { kind: 'bearer' }, basic_users: [], tokens: [], session_ttl_seconds: null, credentials_version: 1 },
  });
}

const csrfOf = (html: string) => /name="csrf" value="([^"]+)"/.exec(html)?.[1];

describe('register stage', () => {
  let clock = T0;
  const calls: RegistrationRequest[] = [];
  let answer: { status: number; body: unknown } | 'down' = { status: 200, body: { client_id: 7, identifier: 'client7@example.com', status: 'active', registration_source: 'invite', feed_version: 12 } };
  const waited: number[] = [];
  const deps: StageDeps = {
    publicHttpsPort: () => 443,
    clock: { now: () => clock },
    secrets: box,
    register: async (body) => {
      calls.push(body);
      if (answer === 'down') throw new Error('connect ECONNREFUSED');
      return answer;
    },
    applied: async (version) => {
      waited.push(version);
      return true;
    },
  };
  const stage = registerStage();
  const config = endpoint(rbacWith([{ token: 'evi_good', client: 7, expires: T0 + 2 * HOUR }, { token: 'evi_old', client: 8, expires: T0 + HOUR / 2 }]));
  let server: StageServer;
  let plain: StageServer;
  const invite = (token: string, id: string | number = 42) => `/register?endpoint=${id}&invite=${token}`;

  before(async () => {
    server = await serveStage(stage.compile(config, deps)!, config, { secure: true });
    plain = await serveStage(stage.compile(config, deps)!, config, { secure: false });
  });
  after(async () => {
    await server.close();
    await plain.close();
  });

  it('is absent without RBAC, and without invites, self-registration or roles', () => {
    assert.equal(stage.compile(endpoint(null), deps), null);
    assert.equal(stage.compile(endpoint(rbacWith([], { roles: [] })), deps), null);
    assert.notEqual(stage.compile(endpoint(rbacWith([])), deps), null, 'RBAC on: a used invite link still gets its page');
  });

  it('leaves every other /register to the service: another endpoint id, no id, other methods, other paths', async () => {
    for (const [method, path] of [
      ['GET', '/register?endpoint=43&invite=evi_good'],
      ['GET', '/register'],
      ['GET', '/register?invite=evi_good'],
      ['PUT', invite('evi_good')],
      ['GET', `/register/${invite('evi_good')}`],
      ['GET', `/signup?endpoint=42&invite=evi_good`],
    ]) {
      const r = await server.request({ method, path });
      assert.ok(r.passed, `${method} ${path} passes: ${r.text.slice(0, 200)}`);
      assert.deepEqual(r.passed.upstreamHeaders, {});
    }
  });

  it('serves the form for a pending invite, by id or by uuid; escapes what it echoes; never cached, framed or referred', async () => {
    for (const id of [42, config.uuid]) {
      const r = await ask(server, { path: invite('evi_good', id), headers: { accept: 'text/html' } });
      assert.equal(r.status, 200);
      assert.match(r.text, /<form method="post" action="\/register\?endpoint=[^"]+&amp;invite=evi_good">/);
      assert.match(r.text, /client7@example\.com/);
      assert.ok(csrfOf(r.text));
      assert.equal(r.headers['cache-control'], 'no-store');
      assert.equal(r.headers['referrer-policy'], 'no-referrer');
      assert.match(String(r.headers['content-security-policy']), /form-action 'self'/);
    }
    const json = await ask(server, { path: invite('evi_good') });
    assert.equal(JSON.parse(json.text).form, 'password');
    const echoed = await ask(server, { path: `${invite('evi_good')}&x=%22%3E%3Cscript%3E`, headers: { accept: 'text/html' } });
    assert.ok(!echoed.text.includes('"><script>'), 'the action attribute is escaped');
  });

  it('answers an unknown invite 404 and one that expired since the snapshot 410, without asking the control API', async () => {
    const before = calls.length;
    const unknown = await ask(server, { path: invite('evi_nope'), headers: { accept: 'text/html' } });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.headers['x-edge-error'], 'invite_not_found');
    assert.match(unknown.text, /not valid/);
    clock = T0 + HOUR;
    try {
      const expired = await ask(server, { path: invite('evi_old') });
      assert.equal(expired.status, 410);
      assert.equal(JSON.parse(expired.text).code, 'invite_expired');
      const posted = await ask(server, { method: 'POST', path: invite('evi_old'), headers: form, body: 'csrf=x&username=a&password=abcdefgh' });
      assert.equal(posted.status, 410);
    } finally {
      clock = T0;
    }
    assert.equal(calls.length, before);
  });

  it('sends a page load over plain HTTP to HTTPS and refuses a form posted there', async () => {
    const r = await ask(plain, { path: invite('evi_good') });
    assert.equal(r.status, 302);
    assert.equal(r.headers.location, `https://app.edge.test${invite('evi_good')}`);
    const posted = await ask(plain, { method: 'POST', path: invite('evi_good'), headers: form, body: 'username=a' });
    assert.equal(posted.status, 403);
    assert.equal(posted.headers['x-edge-error'], 'registration_form_invalid');
  });

  it('refuses posts failing the CSRF checks with 403 and never calls the control API', async () => {
    const page = await ask(server, { path: invite('evi_good'), headers: { accept: 'text/html' } });
    const csrf = csrfOf(page.text)!;
    const other = csrfOf((await ask(server, { path: invite('evi_old'), headers: { accept: 'text/html' } })).text)!;
    const fields = 'username=bob&password=correct-horse&confirm=correct-horse';
    const before = calls.length;
    const cases: Array<[string, Record<string, string>, string]> = [
      ['no token', form, fields],
      ['a forged token', form, `csrf=${csrf.slice(0, -2)}AA&${fields}`],
      ['another invite’s token', form, `csrf=${other}&${fields}`],
      ['a cross-site Origin', { ...form, origin: 'https://evil.test' }, `csrf=${csrf}&${fields}`],
      ['Origin null', { ...form, origin: 'null' }, `csrf=${csrf}&${fields}`],
      ['the plain-HTTP origin', { ...form, origin: 'http://app.edge.test' }, `csrf=${csrf}&${fields}`],
      ['Sec-Fetch-Site cross-site', { 'content-type': form['content-type'], 'sec-fetch-site': 'cross-site' }, `csrf=${csrf}&${fields}`],
      ['Sec-Fetch-Site same-site', { 'content-type': form['content-type'], 'sec-fetch-site': 'same-site' }, `csrf=${csrf}&${fields}`],
    ];
    for (const [what, headers, body] of cases) {
      const r = await ask(server, { method: 'POST', path: invite('evi_good'), headers, body });
      assert.equal(r.status, 403, what);
      assert.equal(r.headers['x-edge-error'], 'registration_form_invalid', what);
    }
    clock = T0 + (FORM_TTL_SECONDS + 1) * 1000;
    try {
      const late = await ask(server, { method: 'POST', path: invite('evi_good'), headers: form, body: `csrf=${csrf}&${fields}` });
      assert.equal(late.status, 403, 'an expired form token');
    } finally {
      clock = T0;
    }
    assert.equal(calls.length, before);
  });

  it('refuses malformed forms: media type, size, repeated or unknown fields, bad username, short or differing passwords', async () => {
    const csrf = csrfOf((await ask(server, { path: invite('evi_good'), headers: { accept: 'text/html' } })).text)!;
    const before = calls.length;
    const post = (body: string, headers: Record<string, string> = form) => ask(server, { method: 'POST', path: invite('evi_good'), headers, body });
    const wrongType = await post(`csrf=${csrf}&username=bob&password=correct-horse`, { ...form, 'content-type': 'application/json' });
    assert.equal(wrongType.status, 400);
    const big = await post(`csrf=${csrf}&username=bob&password=${'x'.repeat(MAX_FORM_BYTES)}`);
    assert.equal(big.status, 413);
    for (const [body, pattern] of [
      [`csrf=${csrf}&username=bob&username=eve&password=correct-horse`, /repeated/],
      [`csrf=${csrf}&username=bob&password=correct-horse&role=admin`, /unexpected field/],
      [`csrf=${csrf}&username=b%3Ab&password=correct-horse`, /username/],
      [`csrf=${csrf}&username=bob&password=short`, /at least 8/],
      [`csrf=${csrf}&username=bob&password=correct-horse&confirm=correct-h0rse`, /differ/],
    ] as const) {
      const r = await post(body);
      assert.equal(r.status, 400, body);
      assert.equal(r.headers['x-edge-error'], 'registration_invalid');
      assert.match(r.text, pattern);
    }
    const shown = await post(`csrf=${csrf}&username=%3Cb%3Ebob&password=short&confirm=short`);
    assert.match(shown.text, /<form/, 'the form is shown again');
    assert.match(shown.text, /value="&lt;b&gt;bob"/, 'with the username escaped');
    assert.equal(calls.length, before);
  });

  it('registers through the control API, waits for the feed version, then says how to sign in', async () => {
    const csrf = csrfOf((await ask(server, { path: invite('evi_good'), headers: { accept: 'text/html' } })).text)!;
    const r = await ask(server, { method: 'POST', path: invite('evi_good'), headers: { ...form, 'sec-fetch-site': 'same-origin' }, body: `csrf=${csrf}&username=Bob&password=correct-horse&confirm=correct-horse` });
    assert.equal(r.status, 200, r.text);
    assert.match(r.text, /You are registered/);
    assert.deepEqual(calls.at(-1), { endpoint_id: config.uuid, invite_token: 'evi_good', username: 'Bob', password: 'correct-horse' });
    assert.equal(waited.at(-1), 12);
  });

  it('maps the control API’s refusals to pages, and an unreachable control API to 503', async () => {
    const csrf = csrfOf((await ask(server, { path: invite('evi_good'), headers: { accept: 'text/html' } })).text)!;
    const post = () => ask(server, { method: 'POST', path: invite('evi_good'), headers: form, body: `csrf=${csrf}&username=bob&password=correct-horse` });
    const cases: Array<[number, string, string]> = [
      [404, 'invite_not_found', 'invite_not_found'],
      [410, 'invite_expired', 'invite_expired'],
      [409, 'already_exists', 'already_exists'],
      [400, 'invalid_request', 'registration_invalid'],
      [500, 'internal', 'registration_unavailable'],
    ];
    try {
      for (const [status, code, edgeCode] of cases) {
        answer = { status, body: { error: `control said ${status}`, code, detail: { field: 'username', reason: 'taken <b>' } } };
        const r = await post();
        assert.equal(r.status, edgeCode === 'registration_unavailable' ? 503 : status, code);
        assert.equal(r.headers['x-edge-error'], edgeCode);
        assert.ok(!r.text.includes('<b>'), 'the control API’s words are escaped');
      }
      answer = 'down';
      const down = await post();
      assert.equal(down.status, 503);
      assert.equal(down.headers['x-edge-error'], 'registration_unavailable');
    } finally {
      answer = { status: 200, body: { client_id: 7, identifier: 'client7@example.com', status: 'active', registration_source: 'invite', feed_version: 12 } };
    }
  });

  it('takes no invite in token mode, and no self-registration outside oauth/oidc', async () => {
    const tokenConfig = endpoint(rbacWith([{ token: 'evi_t', client: 9, expires: T0 + HOUR }]), 'token');
    const s = await serveStage(stage.compile(tokenConfig, deps)!, tokenConfig, { secure: true });
    try {
      const r = await ask(s, { path: invite('evi_t') });
      assert.equal(r.status, 409);
      assert.equal(JSON.parse(r.text).code, 'registration_not_offered');
      const self = await ask(s, { path: '/register?endpoint=42' });
      assert.equal(self.status, 403);
      assert.equal(JSON.parse(self.text).code, 'self_registration_disabled');
    } finally {
      await s.close();
    }
  });
});
