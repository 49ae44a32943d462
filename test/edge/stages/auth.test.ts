// The auth stage compiled from plain endpoint configs, behind a real HTTP server: basic (bcrypt once per distinct
// credential, verdicts cached and shared in flight, failures limited per address), token (bearer, header, cookie;
// expiry), the login modes needing a session and unknown modes refused, and what is forwarded (the identity, never
// the credential).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import bcrypt from 'bcrypt';
import { CredentialUse } from '../../../src/edge/credential-use.ts';
import type { AuthOutcome } from '../../../src/edge/metrics.ts';
import { StageMemory } from '../../../src/edge/pipeline/stage-memory.ts';
import type { Stage, StageDeps } from '../../../src/edge/pipeline/stage.ts';
import { auth, authStage, limiterKey } from '../../../src/edge/stages/auth.ts';
import { SecretBox } from '../../../src/shared/secrets.ts';
import type { BasicUserConfig, EndpointConfig, TokenSource, VisitorAuthConfig, VisitorTokenConfig } from '../../../src/shared/snapshot.ts';
import { tokenDigest, visitorTokenKey } from '../../../src/shared/visitor-credentials.ts';
import { visitorAuthConfig as authConfig } from '../../helpers/endpoint-config.ts';
import { eventually } from '../../helpers/eventually.ts';
import { baseEndpoint, serveStage, type StageServer } from '../../helpers/stage-server.ts';

const basicHeader = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

/** bcrypt.compare, counted; `gate` (when set) holds every compare until it resolves. */
function countingCompare() {
  const calls: string[] = [];
  let gate: Promise<void> | null = null;
  const compare = async (password: string, hash: string) => {
    calls.push(password);
    if (gate) await gate;
    return bcrypt.compare(password, hash);
  };
  return {
    calls,
    compare,
    hold() {
      let release!: () => void;
      gate = new Promise<void>((r) => (release = r));
      return () => {
        gate = null;
        release();
      };
    },
  };
}

/** Deps that record outcomes and credential uses. */
function recordingDeps(extra: Partial<StageDeps> = {}) {
  const outcomes: Array<[string, string, AuthOutcome]> = [];
  const use = new CredentialUse();
  const deps: StageDeps = { publicHttpsPort: () => 443, authOutcome: (e, s, o) => void outcomes.push([e, s, o]), credentialUse: use, ...extra };
  return { deps, outcomes, use };
}

describe('auth stage', () => {
  let alice: BasicUserConfig;
  let bob: BasicUserConfig;
  const servers: StageServer[] = [];
  const serve = async (stage: Stage, endpoint: EndpointConfig) => {
    const s = await serveStage(stage, endpoint);
    servers.push(s);
    return s;
  };
  before(async () => {
    alice = { id: '11', username: 'alice', password_hash: await bcrypt.hash('alice-password', 10) };
    bob = { id: '12', username: 'bøb', password_hash: await bcrypt.hash('bob-password', 10) };
  });
  after(() => Promise.all(servers.map((s) => s.close())));

  const basicEndpoint = (users = [alice, bob], over: Partial<VisitorAuthConfig> = {}) =>
    baseEndpoint({ auth: authConfig({ mode: 'basic', realm: 'Staff only', basic_users: users, ...over }) });

  it('is absent for endpoints without auth or with mode none', () => {
    assert.equal(auth.compile(baseEndpoint()), null);
    assert.equal(auth.compile(baseEndpoint({ auth: authConfig({ mode: 'none' }) })), null);
    assert.equal(auth.compile(basicEndpoint())?.name, 'auth');
  });

  describe('basic', () => {
    it('challenges a request without credentials: 401 auth_required with the realm and charset', async () => {
      const { deps, outcomes } = recordingDeps();
      const s = await serve(authStage().compile(basicEndpoint(), deps)!, basicEndpoint());
      const r = await s.request();
      assert.equal(r.status, 401);
      assert.equal(r.headers['www-authenticate'], 'Basic realm="Staff only", charset="UTF-8"');
      assert.equal(JSON.parse(r.text).code, 'auth_required');
      const bearer = await s.request({ headers: { authorization: 'Bearer abc' } });
      assert.equal(bearer.status, 401, 'another scheme is no Basic credential');
      assert.equal(JSON.parse(bearer.text).code, 'auth_required');
      assert.deepEqual(outcomes.map((o) => o[2]), ['missing', 'missing']);
    });

    it('defaults the realm to the hostname', async () => {
      const endpoint = basicEndpoint([alice], { realm: '' });
      const s = await serve(auth.compile(endpoint)!, endpoint);
      assert.equal((await s.request()).headers['www-authenticate'], 'Basic realm="app.edge.test", charset="UTF-8"');
    });

    it('admits a right password: X-Edge-Auth-User set, Authorization not forwarded, the use noted and counted', async () => {
      const { deps, outcomes, use } = recordingDeps();
      const s = await serve(auth.compile(basicEndpoint(), deps)!, basicEndpoint());
      const r = await s.request({ headers: { authorization: basicHeader('alice', 'alice-password') } });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.passed!.upstreamHeaders, { 'x-edge-auth-user': 'alice' });
      assert.deepEqual(r.passed!.dropHeaders, ['authorization']);
      assert.deepEqual(outcomes, [[basicEndpoint().uuid, 'auth', 'ok']]);
      assert.deepEqual(Object.keys(use.report().credential_use!.basic_users!), ['11']);
    });

    it('sends a username that is not printable ASCII JSON-escaped, so it stays one ASCII field value', async () => {
      const s = await serve(auth.compile(basicEndpoint())!, basicEndpoint());
      const r = await s.request({ headers: { authorization: basicHeader('bøb', 'bob-password') } });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.passed!.upstreamHeaders['x-edge-auth-user'], '"b\\u00f8b"');
    });

    it('refuses a wrong password, an unknown user and malformed credentials with 401 invalid_credentials and the challenge', async () => {
      const { deps, outcomes } = recordingDeps();
      const counted = countingCompare();
      const s = await serve(authStage({ compare: counted.compare }).compile(basicEndpoint(), deps)!, basicEndpoint());
      for (const authorization of [basicHeader('alice', 'wrong'), basicHeader('mallory', 'alice-password'), 'Basic !!!notbase64', `Basic ${Buffer.from('no-colon').toString('base64')}`]) {
        const r = await s.request({ headers: { authorization } });
        assert.equal(r.status, 401, authorization);
        assert.equal(JSON.parse(r.text).code, 'invalid_credentials');
        assert.equal(r.headers['www-authenticate'], 'Basic realm="Staff only", charset="UTF-8"');
      }
      // The unknown user was checked against a decoy hash (same cost, no hint that the name does not exist).
      assert.deepEqual(counted.calls, ['wrong', 'alice-password']);
      assert.deepEqual(outcomes.map((o) => o[2]), ['invalid', 'invalid', 'invalid', 'invalid']);
    });

    it('runs bcrypt once per distinct credential: repeats of a right or a wrong one are answered from the cache', async () => {
      const counted = countingCompare();
      const s = await serve(authStage({ compare: counted.compare }).compile(basicEndpoint())!, basicEndpoint());
      for (let i = 0; i < 5; i++) {
        assert.equal((await s.request({ headers: { authorization: basicHeader('alice', 'alice-password') } })).status, 200);
        assert.equal((await s.request({ headers: { authorization: basicHeader('alice', 'nope') } })).status, 401);
      }
      assert.deepEqual(counted.calls, ['alice-password', 'nope']);
    });

    it('shares one verdict among spellings of one credential (padding, unused trailing bits): bcrypt runs once for them all', async () => {
      // Verdicts are looked up under the credential as sent, then under its canonical base64: a respelling is neither
      // a new bcrypt check nor a way around a cached refusal.
      const counted = countingCompare();
      const s = await serve(authStage({ compare: counted.compare }).compile(basicEndpoint())!, basicEndpoint());
      const spellings = (user: string, password: string) => {
        const canonical = Buffer.from(`${user}:${password}`).toString('base64');
        const body = canonical.replace(/=+$/, '');
        const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
        const bits = body.slice(0, -1) + alphabet[alphabet.indexOf(body.at(-1)!) + 1];
        assert.equal(Buffer.from(bits, 'base64').toString(), `${user}:${password}`, 'the respelling decodes to the same credential');
        return [body, canonical, bits];
      };
      for (const spelling of spellings('alice', 'alice-password')) assert.equal((await s.request({ headers: { authorization: `Basic ${spelling}` } })).status, 200);
      for (const spelling of spellings('alice', 'nope!')) assert.equal((await s.request({ headers: { authorization: `Basic ${spelling}` } })).status, 401);
      assert.deepEqual(counted.calls, ['alice-password', 'nope!']);
    });

    it('shares one bcrypt check among concurrent requests with the same credential', async () => {
      const counted = countingCompare();
      const inner = authStage({ compare: counted.compare }).compile(basicEndpoint())!;
      let arrived = 0;
      const s = await serve({ name: 'auth', run: (ctx) => (arrived++, inner.run(ctx)) }, basicEndpoint());
      const release = counted.hold();
      const replies = Array.from({ length: 5 }, () => s.request({ headers: { authorization: basicHeader('alice', 'alice-password') } }));
      await eventually(async () => (arrived === 5 ? true : undefined));
      release();
      assert.deepEqual((await Promise.all(replies)).map((r) => r.status), [200, 200, 200, 200, 200]);
      assert.equal(counted.calls.length, 1);
    });

    it('limits failed checks per visitor address before bcrypt runs: 429 with Retry-After, other addresses unaffected, budget back after a minute', async () => {
      let now = 1_000_000;
      const counted = countingCompare();
      const { deps, outcomes } = recordingDeps();
      const stage = authStage({ compare: counted.compare, failuresPerMinute: 3 }).compile(basicEndpoint(), { ...deps, clock: { now: () => now } })!;
      const s = await serve(stage, basicEndpoint());
      const attempt = (password: string, clientIp: string) => s.request({ headers: { authorization: basicHeader('alice', password) }, clientIp });
      for (const p of ['guess1', 'guess2', 'guess3']) assert.equal((await attempt(p, '198.51.100.7')).status, 401);
      const limited = await attempt('guess4', '198.51.100.7');
      assert.equal(limited.status, 429);
      assert.equal(JSON.parse(limited.text).code, 'too_many_auth_failures');
      assert.ok(Number(limited.headers['retry-after']) >= 1);
      // Even the right password is not checked from a limited address (it would be a free guess)...
      assert.equal((await attempt('alice-password', '198.51.100.7')).status, 429);
      assert.equal(counted.calls.length, 3, 'no bcrypt for limited attempts');
      // ...but another address is, and a credential already known to be right passes from anywhere.
      assert.equal((await attempt('alice-password', '203.0.113.9')).status, 200);
      assert.equal((await attempt('alice-password', '198.51.100.7')).status, 200);
      // A cached failure costs nothing and is still a 401.
      assert.equal((await attempt('guess1', '198.51.100.7')).status, 401);
      now += 60_000;
      assert.equal((await attempt('guess5', '198.51.100.7')).status, 401, 'a minute later the address may try again');
      assert.equal(counted.calls.length, 5);
      assert.ok(outcomes.some((o) => o[2] === 'invalid'));
    });

    it('counts an IPv6 /64 as one address (one host can use all of it), and an IPv4-mapped address as its IPv4', async () => {
      assert.equal(limiterKey('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64');
      assert.equal(limiterKey('2001:db8:1:2:ffff:ffff:ffff:ffff'), '2001:db8:1:2::/64');
      assert.notEqual(limiterKey('2001:db8:1:3::1'), limiterKey('2001:db8:1:2::1'));
      assert.equal(limiterKey('::ffff:198.51.100.7'), '198.51.100.7');
      assert.equal(limiterKey('198.51.100.7'), '198.51.100.7');
      const counted = countingCompare();
      const stage = authStage({ compare: counted.compare, failuresPerMinute: 2 }).compile(basicEndpoint())!;
      const s = await serve(stage, basicEndpoint());
      const attempt = (password: string, clientIp: string) => s.request({ headers: { authorization: basicHeader('alice', password) }, clientIp });
      assert.equal((await attempt('v6-guess1', '2001:db8:1:2::1')).status, 401);
      assert.equal((await attempt('v6-guess2', '2001:db8:1:2::2')).status, 401);
      assert.equal((await attempt('v6-guess3', '2001:db8:1:2::3')).status, 429, 'another address of the same /64 shares the budget');
      assert.equal((await attempt('v6-guess3', '2001:db8:1:9::1')).status, 401, 'another /64 does not');
    });

    it('answers 503 auth_unavailable with Retry-After when too many password checks are in flight, never queueing more', async () => {
      const counted = countingCompare();
      const stage = authStage({ compare: counted.compare, maxChecksInFlight: 1 }).compile(basicEndpoint())!;
      const s = await serve(stage, basicEndpoint());
      const release = counted.hold();
      const first = s.request({ headers: { authorization: basicHeader('alice', 'alice-password') } });
      await eventually(async () => (counted.calls.length === 1 ? true : undefined));
      const second = await s.request({ headers: { authorization: basicHeader('bøb', 'bob-password') } });
      assert.equal(second.status, 503);
      assert.equal(second.headers['retry-after'], '1');
      assert.equal(JSON.parse(second.text).code, 'auth_unavailable');
      release();
      assert.equal((await first).status, 200);
    });

    it('bcrypt slots shared across tenants: one endpoint holds at most its share of password checks, others still get theirs', async () => {
      const counted = countingCompare();
      const memory = new StageMemory();
      const factory = authStage({ compare: counted.compare, maxChecksPerEndpoint: 2 });
      const deps: StageDeps = { publicHttpsPort: () => 443, memory };
      const busy = basicEndpoint();
      const other = { ...basicEndpoint(), uuid: '00000000-0000-4000-8000-0000000000b2', hostname: 'other.edge.test' };
      const a = await serve(factory.compile(busy, deps)!, busy);
      const b = await serve(factory.compile(other, deps)!, other);
      const release = counted.hold();
      // Two new credentials on the busy endpoint take its share (from two addresses, each within its budget)...
      const held = [a.request({ headers: { authorization: basicHeader('alice', 'flood-1') }, clientIp: '198.51.100.1' }), a.request({ headers: { authorization: basicHeader('alice', 'flood-2') }, clientIp: '198.51.100.2' })];
      await eventually(async () => (counted.calls.length === 2 ? true : undefined));
      // ...a third waits for nothing: 503 with Retry-After, no bcrypt...
      const third = await a.request({ headers: { authorization: basicHeader('alice', 'flood-3') }, clientIp: '198.51.100.3' });
      assert.equal(third.status, 503);
      assert.equal(third.headers['retry-after'], '1');
      assert.equal(JSON.parse(third.text).code, 'auth_unavailable');
      // ...and a recompile (users changed) does not hand the endpoint a fresh share while its checks still run.
      a.stage = factory.compile(basicEndpoint([alice, bob], { credentials_version: 2 }), deps)!;
      assert.equal((await a.request({ headers: { authorization: basicHeader('alice', 'flood-4') }, clientIp: '198.51.100.4' })).status, 503);
      assert.equal(counted.calls.length, 2);
      // The other endpoint's visitors are checked meanwhile.
      const elsewhere = b.request({ headers: { authorization: basicHeader('alice', 'alice-password') } });
      await eventually(async () => (counted.calls.length === 3 ? true : undefined));
      release();
      assert.equal((await elsewhere).status, 200);
      assert.deepEqual((await Promise.all(held)).map((r) => r.status), [401, 401]);
      // The share is free again once the checks end.
      assert.equal((await a.request({ headers: { authorization: basicHeader('alice', 'alice-password') } })).status, 200);
    });

    it('realm above U+00FF crashes the edge: a stored realm that is not printable ASCII is sent with ? in its place, never thrown', async () => {
      for (const [realm, sent] of [['Zone €', 'Zone ?'], ['Zoné\u0000', 'Zon??'], ['a"b\\c', 'a\\"b\\\\c']]) {
        const endpoint = basicEndpoint([alice], { realm });
        const s = await serve(auth.compile(endpoint)!, endpoint);
        const r = await s.request();
        assert.equal(r.status, 401, realm);
        assert.equal(r.headers['www-authenticate'], `Basic realm="${sent}", charset="UTF-8"`, realm);
      }
    });

    it('keeps its verdicts across recompiles while the users are unchanged, and drops them when they change', async () => {
      const counted = countingCompare();
      const memory = new StageMemory();
      const factory = authStage({ compare: counted.compare });
      const deps: StageDeps = { publicHttpsPort: () => 443, memory };
      const endpoint = basicEndpoint();
      const s = await serve(factory.compile(endpoint, deps)!, endpoint);
      const alicePasses = async () => (await s.request({ headers: { authorization: basicHeader('alice', 'alice-password') } })).status;
      assert.equal(await alicePasses(), 200);
      // An unrelated change (routing, capture) recompiles the endpoint: same users, same verdicts.
      s.stage = factory.compile({ ...endpoint, capture_enabled: true }, deps)!;
      assert.equal(await alicePasses(), 200);
      assert.equal(counted.calls.length, 1);
      // Alice's password changes: the old credential is checked again, against the new hash, and refused.
      const changed = { ...alice, password_hash: await bcrypt.hash('new-password', 10) };
      s.stage = factory.compile(basicEndpoint([changed, bob], { credentials_version: 2 }), deps)!;
      assert.equal(await alicePasses(), 401);
      assert.equal(counted.calls.length, 2);
      // A user removed: refused from the next request, even though the verdict was cached before.
      s.stage = factory.compile(basicEndpoint([bob], { credentials_version: 3 }), deps)!;
      assert.equal((await s.request({ headers: { authorization: basicHeader('alice', 'new-password') } })).status, 401);
    });
  });

  describe('token', () => {
    const box = new SecretBox('auth-stage-test-secret');
    const key = visitorTokenKey(box);
    const TOKEN = 'evk_0123456789abcdefghijklmnopqrstuvwxyz';
    const OTHER = 'evk_another-token-0123456789abcdefghijkl';
    const token = (over: Partial<VisitorTokenConfig> = {}): VisitorTokenConfig => ({ id: '7', label: 'ci pipeline', digest: tokenDigest(key, TOKEN), expires_at: null, ...over });
    const tokenEndpoint = (source: TokenSource = { kind: 'bearer' }, tokens = [token()]) => baseEndpoint({ auth: authConfig({ mode: 'token', token_source: source, tokens }) });
    const deps = (extra: Partial<StageDeps> = {}) => recordingDeps({ secrets: box, ...extra });

    it('refuses to compile without the edge secret key (no digest key, no way to check)', () => {
      assert.throws(() => auth.compile(tokenEndpoint()), /EDGE_SECRET_KEY/);
    });

    it('admits Authorization: Bearer with a live token: its label as X-Edge-Auth-User, Authorization not forwarded', async () => {
      const { deps: d, outcomes, use } = deps();
      const s = await serve(auth.compile(tokenEndpoint(), d)!, tokenEndpoint());
      const r = await s.request({ headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.passed!.upstreamHeaders, { 'x-edge-auth-user': 'ci pipeline' });
      assert.deepEqual(r.passed!.dropHeaders, ['authorization']);
      assert.equal((await s.request({ headers: { authorization: `bearer   ${TOKEN}` } })).status, 200, 'the scheme is case-insensitive');
      assert.deepEqual(Object.keys(use.report().credential_use!.tokens!), ['7']);
      assert.deepEqual(outcomes.map((o) => o[2]), ['ok', 'ok']);
    });

    it('refuses a missing, unknown or expired bearer token with 401 and RFC 6750 challenges', async () => {
      let now = Date.parse('2030-01-01T00:00:00Z');
      const endpoint = tokenEndpoint({ kind: 'bearer' }, [token(), token({ id: '8', digest: tokenDigest(key, OTHER), expires_at: '2030-01-01T00:01:00.000Z' })]);
      const { deps: d, outcomes } = deps();
      const s = await serve(authStage().compile(endpoint, { ...d, clock: { now: () => now } })!, endpoint);
      const missing = await s.request();
      assert.equal(missing.status, 401);
      assert.equal(missing.headers['www-authenticate'], 'Bearer realm="app.edge.test"');
      assert.equal(JSON.parse(missing.text).code, 'auth_required');
      const unknown = await s.request({ headers: { authorization: 'Bearer evk_not-a-token-of-this-endpoint-xxxx' } });
      assert.equal(unknown.status, 401);
      assert.equal(JSON.parse(unknown.text).code, 'invalid_credentials');
      assert.match(unknown.headers['www-authenticate']!, /^Bearer realm="app.edge.test", error="invalid_token", error_description="the token is not valid for this endpoint"$/);
      assert.equal((await s.request({ headers: { authorization: `Bearer ${OTHER}` } })).status, 200, 'before its expiry');
      now += 60_000;
      const expired = await s.request({ headers: { authorization: `Bearer ${OTHER}` } });
      assert.equal(expired.status, 401, 'from its expires_at on');
      assert.equal(JSON.parse(expired.text).detail, 'the token has expired');
      assert.deepEqual(outcomes.map((o) => o[2]), ['missing', 'invalid', 'ok', 'invalid']);
    });

    it('reads a configured header instead: that header is not forwarded, Authorization is left alone', async () => {
      const endpoint = tokenEndpoint({ kind: 'header', name: 'x-api-token' });
      const s = await serve(auth.compile(endpoint, deps().deps)!, endpoint);
      const r = await s.request({ headers: { 'X-Api-Token': TOKEN, authorization: 'Bearer for-the-app' } });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.passed!.dropHeaders, ['x-api-token']);
      const bearerOnly = await s.request({ headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(bearerOnly.status, 401, 'the token is read where the endpoint says, nowhere else');
      assert.equal(bearerOnly.headers['www-authenticate'], 'Token realm="app.edge.test", header="x-api-token"');
    });

    it('token header configured with an underscore is forwarded upstream: it is read as configured and dropped in headerKey form', async () => {
      const endpoint = tokenEndpoint({ kind: 'header', name: 'x_api_token' });
      const s = await serve(auth.compile(endpoint, deps().deps)!, endpoint);
      const r = await s.request({ headers: { X_Api_Token: TOKEN } });
      assert.equal(r.status, 200, r.text);
      // The forwarders compare headerKey(visitor name) with this: X_Api_Token, X-Api-Token and the rest all go.
      assert.deepEqual(r.passed!.dropHeaders, ['x-api-token']);
      assert.equal((await s.request({ headers: { 'X-Api-Token': TOKEN } })).status, 401, 'read only under the configured name');
      // A stored name in another case (older snapshots) reads and drops the same.
      const mixed = tokenEndpoint({ kind: 'header', name: 'X_Api_Token' });
      const m = await serve(auth.compile(mixed, deps().deps)!, mixed);
      const rm = await m.request({ headers: { x_api_token: TOKEN } });
      assert.equal(rm.status, 200, rm.text);
      assert.deepEqual(rm.passed!.dropHeaders, ['x-api-token']);
    });

    it('reads a configured cookie instead: that cookie is left out of the forwarded Cookie field', async () => {
      const endpoint = tokenEndpoint({ kind: 'cookie', name: 'edge_token' });
      const s = await serve(auth.compile(endpoint, deps().deps)!, endpoint);
      const r = await s.request({ headers: { cookie: `theme=dark; edge_token=stale-value-xxxxxxxxxxxxxxxx; edge_token=${TOKEN}` } });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.passed!.dropCookie, 'edge_token');
      assert.deepEqual(r.passed!.dropHeaders, [], 'the Cookie field itself is rewritten, not dropped');
      assert.equal((await s.request({ headers: { cookie: 'theme=dark' } })).status, 401);
    });

    it('refuses every token once it is revoked: absent from the next snapshot, absent from the compiled map', async () => {
      const { deps: d } = deps();
      const s = await serve(auth.compile(tokenEndpoint(), d)!, tokenEndpoint());
      assert.equal((await s.request({ headers: { authorization: `Bearer ${TOKEN}` } })).status, 200);
      s.stage = auth.compile(tokenEndpoint({ kind: 'bearer' }, []), d)!;
      assert.equal((await s.request({ headers: { authorization: `Bearer ${TOKEN}` } })).status, 401);
    });
  });

  for (const mode of ['oauth', 'oidc'] as const) {
    it(`requires a login session in ${mode} mode: other credentials are not one (the flow: test/edge/auth/oidc-login.test.ts)`, async () => {
      const { deps, outcomes } = recordingDeps({ secrets: new SecretBox('auth-stage-test') });
      const endpoint = baseEndpoint({ auth: authConfig({ mode, providers: [], allowed_redirects: [] }) });
      const s = await serve(auth.compile(endpoint, deps)!, endpoint);
      for (const headers of [{} as Record<string, string>, { authorization: basicHeader('alice', 'alice-password') }, { authorization: 'Bearer anything' }]) {
        const r = await s.request({ headers });
        assert.equal(r.status, 401);
        assert.equal(JSON.parse(r.text).code, 'login_required');
      }
      assert.deepEqual(outcomes.map((o) => o[2]), ['missing', 'missing', 'missing']);
    });
  }

  it('refuses every request to an endpoint in a mode this edge does not know with 503 auth_unavailable (never open)', async () => {
    const { deps, outcomes } = recordingDeps();
    const endpoint = baseEndpoint({ auth: authConfig({ mode: 'saml' as VisitorAuthConfig['mode'] }) });
    const s = await serve(auth.compile(endpoint, deps)!, endpoint);
    for (const headers of [{} as Record<string, string>, { authorization: basicHeader('alice', 'alice-password') }]) {
      const r = await s.request({ headers });
      assert.equal(r.status, 503);
      assert.equal(JSON.parse(r.text).code, 'auth_unavailable');
    }
    assert.deepEqual(outcomes.map((o) => o[2]), ['unavailable', 'unavailable']);
  });
});
