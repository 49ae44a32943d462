// The JWT layer compiled from plain endpoint configs, behind a real HTTP server, against a real JWKS server: what it
// accepts (asymmetric signatures from the JWKS, iss/aud/exp/nbf), what it refuses (alg none, HS256 with the public key,
// unknown kids without a fetch flood), outages (503, keys held from before), rotation, caching and claim headers.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { exportSPKI, jwtVerify, UnsecuredJWT } from 'jose';
import type { Logger } from '../../../src/shared/log.ts';
import type { AuthOutcome } from '../../../src/edge/metrics.ts';
import { StageMemory } from '../../../src/edge/pipeline/stage-memory.ts';
import type { StageDeps } from '../../../src/edge/pipeline/stage.ts';
import { jwt, jwtStage, type JwtStageOptions } from '../../../src/edge/stages/jwt.ts';
import type { EndpointConfig, JwtLayerConfig, VisitorAuthConfig } from '../../../src/shared/snapshot.ts';
import { makeKey, sign, startJwksServer, type JwksServer, type TestKey } from '../../helpers/jwks-server.ts';
import { baseEndpoint, serveStage, type StageServer } from '../../helpers/stage-server.ts';

const b64url = (s: string | Buffer) => Buffer.from(s).toString('base64url');

describe('jwt stage', () => {
  let key1: TestKey;
  let key2: TestKey;
  let jwks: JwksServer;
  const servers: StageServer[] = [];
  const cleanups: Array<() => Promise<void>> = [];

  before(async () => {
    key1 = await makeKey('key-1');
    key2 = await makeKey('key-2', 'ES256');
    jwks = await startJwksServer([key1]);
  });
  after(async () => {
    await Promise.all(servers.map((s) => s.close()));
    for (const c of cleanups) await c();
    await jwks.close();
  });

  const layer = (over: Partial<JwtLayerConfig> = {}, server: JwksServer = jwks): JwtLayerConfig => ({
    jwks_url: server.url,
    issuer: null,
    audience: null,
    claim_headers: {},
    ...over,
  });
  let endpoints = 0;
  /** A fresh endpoint (its own uuid, so no state is shared between tests unless they share the StageMemory). */
  const endpointWith = (jwtConfig: JwtLayerConfig, auth?: VisitorAuthConfig) =>
    baseEndpoint({ uuid: `00000000-0000-4000-8000-${String(++endpoints).padStart(12, '0')}`, jwt: jwtConfig, auth });

  interface Setup {
    s: StageServer;
    outcomes: AuthOutcome[];
    logs: string[];
    verifications: () => number;
    endpoint: EndpointConfig;
  }
  async function setup(jwtConfig: JwtLayerConfig, over: { deps?: Partial<StageDeps>; options?: JwtStageOptions; auth?: VisitorAuthConfig } = {}): Promise<Setup> {
    const outcomes: AuthOutcome[] = [];
    const logs: string[] = [];
    let verifications = 0;
    const logger = { warn: (_obj: unknown, msg: string) => logs.push(msg), error: (_obj: unknown, msg: string) => logs.push(msg) } as unknown as Logger;
    const deps: StageDeps = {
      publicHttpsPort: () => 443,
      allowPrivate: true,
      jwks: { timeoutMs: 2_000, cooldownMs: 60_000, cacheMaxAgeMs: 600_000 },
      authOutcome: (_e, _s, o) => void outcomes.push(o),
      logger,
      ...over.deps,
    };
    const endpoint = endpointWith(jwtConfig, over.auth);
    const verify: typeof jwtVerify = ((...args: Parameters<typeof jwtVerify>) => (verifications++, jwtVerify(...args))) as typeof jwtVerify;
    const stage = jwtStage({ verify, ...over.options }).compile(endpoint, deps)!;
    const s = await serveStage(stage, endpoint);
    servers.push(s);
    return { s, outcomes, logs, verifications: () => verifications, endpoint };
  }
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const codeOf = (r: { text: string }) => JSON.parse(r.text).code as string;

  it('is absent for endpoints without a JWT layer', () => {
    assert.equal(jwt.compile(baseEndpoint()), null);
    assert.equal(jwt.compile(baseEndpoint({ jwt: null })), null);
    assert.equal(jwt.compile(baseEndpoint({ jwt: layer() }))?.name, 'jwt');
  });

  it('admits a token signed by a JWKS key, maps claims to headers and strips every mapped name', async () => {
    const { s, outcomes } = await setup(layer({ claim_headers: { sub: 'X-User', roles: 'x-roles', name: 'x-name', email: 'x-email' } }));
    const token = await sign(key1, { sub: 'user-42', roles: ['admin', 'dev'], name: 'José' });
    const r = await s.request({ headers: bearer(token) });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.passed!.upstreamHeaders, { 'x-user': 'user-42', 'x-roles': '["admin","dev"]', 'x-name': '"Jos\\u00e9"' });
    assert.deepEqual(r.passed!.dropHeaders.sort(), ['x-email', 'x-name', 'x-roles', 'x-user'], 'an absent claim (email) still strips the visitor copy');
    assert.deepEqual(outcomes, ['ok']);
  });

  it('challenges a request without a token: 401 auth_required, a Bearer challenge without an error (RFC 6750 §3.1)', async () => {
    const { s, outcomes } = await setup(layer());
    for (const headers of [{}, { authorization: 'Basic dXNlcjpwdw==' }, { authorization: 'Bearer' }] as Array<Record<string, string>>) {
      const r = await s.request({ headers });
      assert.equal(r.status, 401);
      assert.equal(codeOf(r), 'auth_required');
      assert.equal(r.headers['www-authenticate'], 'Bearer realm="app.edge.test"');
    }
    assert.deepEqual(outcomes, ['missing', 'missing', 'missing']);
  });

  it('refuses alg none, without fetching the JWKS', async () => {
    const server = await startJwksServer([key1]);
    cleanups.push(() => server.close());
    const { s, outcomes } = await setup(layer({}, server));
    const unsigned = new UnsecuredJWT({ sub: 'admin' }).setExpirationTime('1h').encode();
    const r = await s.request({ headers: bearer(unsigned) });
    assert.equal(r.status, 401);
    assert.equal(codeOf(r), 'invalid_token');
    assert.match(r.headers['www-authenticate']!, /^Bearer realm="app\.edge\.test", error="invalid_token", error_description="the token is not signed with an accepted algorithm/);
    assert.equal(server.fetches, 0);
    assert.deepEqual(outcomes, ['invalid']);
  });

  it('refuses HS256 signed with the RSA public key (algorithm confusion), without fetching the JWKS', async () => {
    const server = await startJwksServer([key1]);
    cleanups.push(() => server.close());
    const { s } = await setup(layer({}, server));
    const pem = await exportSPKI(key1.publicKey);
    const head = b64url(JSON.stringify({ alg: 'HS256', typ: 'JWT', kid: key1.kid }));
    const body = b64url(JSON.stringify({ sub: 'admin', exp: Math.floor(Date.now() / 1000) + 3600 }));
    const forged = `${head}.${body}.${createHmac('sha256', pem).update(`${head}.${body}`).digest('base64url')}`;
    const r = await s.request({ headers: bearer(forged) });
    assert.equal(r.status, 401);
    assert.equal(codeOf(r), 'invalid_token');
    assert.equal(server.fetches, 0);
  });

  it('fetches the JWKS once for a burst of unknown kids: jose refetches at most once per cooldown', async () => {
    const server = await startJwksServer([key1]);
    cleanups.push(() => server.close());
    const { s } = await setup(layer({}, server));
    assert.equal((await s.request({ headers: bearer(await sign(key1, { sub: 'a' })) })).status, 200);
    assert.equal(server.fetches, 1);
    const stranger = await makeKey('unknown');
    const flood = await Promise.all(
      Array.from({ length: 30 }, async (_, i) => s.request({ headers: bearer(await sign({ ...stranger, kid: `made-up-${i}` }, { sub: 'x' })) })),
    );
    assert.ok(flood.every((r) => r.status === 401 && codeOf(r) === 'invalid_token'));
    assert.equal(server.fetches, 1, 'no refetch within the cooldown, however many kids are made up');
  });

  it('refuses expired tokens and tokens not valid yet, allowing a small clock skew', async () => {
    const { s } = await setup(layer());
    const now = Math.floor(Date.now() / 1000);
    const expired = await s.request({ headers: bearer(await sign(key1, { exp: now - 120 })) });
    assert.equal(expired.status, 401);
    assert.match(expired.headers['www-authenticate']!, /error_description="the token has expired"/);
    const early = await s.request({ headers: bearer(await sign(key1, { nbf: now + 600 })) });
    assert.equal(early.status, 401);
    assert.match(JSON.parse(early.text).detail, /not valid yet/);
    assert.equal((await s.request({ headers: bearer(await sign(key1, { exp: now - 5 })) })).status, 200, 'within the 30 s tolerance');
    const noExp = await s.request({ headers: bearer(await sign(key1, { exp: null })) });
    assert.equal(noExp.status, 401, 'a token that never expires is not accepted');
    assert.match(JSON.parse(noExp.text).detail, /"exp"/);
  });

  it('checks iss and aud when set', async () => {
    const { s } = await setup(layer({ issuer: 'https://issuer.example', audience: 'api://edge' }));
    const good = await sign(key1, { iss: 'https://issuer.example', aud: ['other', 'api://edge'] });
    assert.equal((await s.request({ headers: bearer(good) })).status, 200);
    for (const claims of [{ iss: 'https://evil.example', aud: 'api://edge' }, { iss: 'https://issuer.example', aud: 'api://other' }, { aud: 'api://edge' }]) {
      const r = await s.request({ headers: bearer(await sign(key1, claims)) });
      assert.equal(r.status, 401, JSON.stringify(claims));
      assert.equal(codeOf(r), 'invalid_token');
    }
  });

  it('refuses a signature that does not verify', async () => {
    const { s } = await setup(layer());
    const token = await sign(key1, { sub: 'a' });
    const [h, p] = token.split('.');
    const other = (await sign(key1, { sub: 'b' })).split('.')[2];
    const r = await s.request({ headers: bearer(`${h}.${p}.${other}`) });
    assert.equal(r.status, 401);
    assert.equal(JSON.parse(r.text).detail, 'the signature does not verify');
  });

  it('verifies a token once: repeats are answered from the cache until exp, and the cache survives an unchanged recompile', async () => {
    const memory = new StageMemory();
    const { s, verifications, endpoint } = await setup(layer({ claim_headers: { sub: 'x-user' } }), { deps: { memory } });
    const token = await sign(key1, { sub: 'cached' });
    for (let i = 0; i < 5; i++) assert.equal((await s.request({ headers: bearer(token) })).passed?.upstreamHeaders['x-user'], 'cached');
    assert.equal(verifications(), 1);
    // Recompiled for an unrelated change with the same JWT config: the same state, no new verification.
    s.stage = jwtStage({ verify: (() => assert.fail('verified again')) as unknown as typeof jwtVerify }).compile({ ...endpoint, capture_enabled: true }, {
      publicHttpsPort: () => 443,
      allowPrivate: true,
      jwks: { timeoutMs: 2_000, cooldownMs: 60_000, cacheMaxAgeMs: 600_000 },
      memory,
    })!;
    assert.equal((await s.request({ headers: bearer(token) })).status, 200);
  });

  it('drops a cached verification at the token exp', async () => {
    let now = Date.now();
    const { s, verifications } = await setup(layer(), { deps: { clock: { now: () => now } } });
    const token = await sign(key1, { exp: Math.floor(now / 1000) + 60 });
    assert.equal((await s.request({ headers: bearer(token) })).status, 200);
    now += 61_000;
    // jose checks exp with the real clock (still valid there); what matters is that the cache did not answer.
    await s.request({ headers: bearer(token) });
    assert.equal(verifications(), 2);
  });

  it('answers 503 auth_unavailable (not 401) when the JWKS cannot be fetched and no key is held, logged once', async () => {
    for (const mode of [503, 'drop', 'huge'] as const) {
      const server = await startJwksServer([key1]);
      cleanups.push(() => server.close());
      server.mode = mode;
      const { s, outcomes, logs } = await setup(layer({}, server), { deps: { jwks: { timeoutMs: 2_000, cooldownMs: 0, cacheMaxAgeMs: 600_000 } } });
      for (let i = 0; i < 3; i++) {
        const r = await s.request({ headers: bearer(await sign(key1, { sub: `u${i}` })) });
        assert.equal(r.status, 503, String(mode));
        assert.equal(codeOf(r), 'auth_unavailable');
        assert.equal(r.headers['www-authenticate'], undefined, 'an outage is no challenge');
      }
      assert.deepEqual(outcomes, ['unavailable', 'unavailable', 'unavailable']);
      assert.equal(logs.length, 1, 'logged at most once a minute');
    }
  });

  it('keeps verifying with keys held from before while the JWKS is down', async () => {
    const server = await startJwksServer([key1]);
    cleanups.push(() => server.close());
    // cacheMaxAge 0: every verification wants a fresh set, so each one meets the outage.
    const { s } = await setup(layer({}, server), { deps: { jwks: { timeoutMs: 2_000, cooldownMs: 0, cacheMaxAgeMs: 0 } } });
    assert.equal((await s.request({ headers: bearer(await sign(key1, { sub: 'before' })) })).status, 200);
    server.mode = 500;
    const r = await s.request({ headers: bearer(await sign(key1, { sub: 'during' })) });
    assert.equal(r.status, 200, r.text);
    const unknownKid = await s.request({ headers: bearer(await sign(key2, { sub: 'new key' })) });
    assert.equal(unknownKid.status, 503, 'a kid no held key has is an outage while the JWKS is down');
  });

  it('picks up a rotated key set: new kids verify, tokens of a removed key stop verifying even when cached', async () => {
    const server = await startJwksServer([key1]);
    cleanups.push(() => server.close());
    const { s } = await setup(layer({}, server), { deps: { jwks: { timeoutMs: 2_000, cooldownMs: 0, cacheMaxAgeMs: 600_000 } } });
    const old = await sign(key1, { sub: 'old' });
    assert.equal((await s.request({ headers: bearer(old) })).status, 200);
    server.keys = [key2];
    assert.equal((await s.request({ headers: bearer(await sign(key2, { sub: 'new' })) })).status, 200, 'an unknown kid refetches after the cooldown');
    const stale = await s.request({ headers: bearer(old) });
    assert.equal(stale.status, 401, 'the new key set flushed the cached verification');
  });

  it('reads the JWT from X-JWT-Assertion when the main mode reads Authorization itself', async () => {
    const basic: VisitorAuthConfig = { mode: 'basic', realm: 'r', token_source: { kind: 'bearer' }, basic_users: [], tokens: [], session_ttl_seconds: null, credentials_version: 1 };
    const { s } = await setup(layer(), { auth: basic });
    const token = await sign(key1, { sub: 'a' });
    assert.equal((await s.request({ headers: { authorization: 'Basic dXNlcjpwdw==', 'x-jwt-assertion': token } })).status, 200);
    assert.equal((await s.request({ headers: { 'x-jwt-assertion': `Bearer ${token}` } })).status, 200);
    const inAuthorization = await s.request({ headers: bearer(token) });
    assert.equal(inAuthorization.status, 401);
    assert.equal(codeOf(inAuthorization), 'auth_required');
  });

  it('claim header with an underscore, claim absent: the visitor copies are dropped in every spelling (names compared by headerKey)', async () => {
    const { s } = await setup(layer({ claim_headers: { role: 'X_Role', sub: 'x-sub' } }));
    const r = await s.request({ headers: bearer(await sign(key1, { sub: 'user-1' })) });
    assert.equal(r.status, 200, r.text);
    // The forwarders compare headerKey(visitor name) with these: x-role drops X-Role, X_Role and X-Role's other spellings.
    assert.deepEqual(r.passed!.dropHeaders.sort(), ['x-role', 'x-sub']);
    assert.deepEqual(r.passed!.upstreamHeaders, { 'x-sub': 'user-1' }, 'an absent claim sets nothing');
    const withRole = await s.request({ headers: bearer(await sign(key1, { sub: 'user-2', role: 'admin' })) });
    assert.deepEqual(withRole.passed!.upstreamHeaders, { x_role: 'admin', 'x-sub': 'user-2' }, 'set under the name as configured');
  });

  it('asHeaderValue ambiguity: a string claim that reads as JSON is sent JSON-encoded, unlike the array or string it imitates', async () => {
    const { s } = await setup(layer({ claim_headers: { nick: 'x-nick', roles: 'x-roles', alias: 'x-alias', level: 'x-level', code: 'x-code' } }));
    const token = await sign(key1, { sub: 'a', nick: '["admin"]', roles: ['admin'], alias: '"\\u0061dmin"', level: 5, code: '5' });
    const r = await s.request({ headers: bearer(token) });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.passed!.upstreamHeaders, { 'x-nick': '"[\\"admin\\"]"', 'x-roles': '["admin"]', 'x-alias': '"\\"\\\\u0061dmin\\""', 'x-level': '5', 'x-code': '"5"' });
  });

  it('X_JWT_Assertion forwarded next to the verified one: the verified assertion is the edge\'s own field, every visitor spelling dropped', async () => {
    const basic: VisitorAuthConfig = { mode: 'basic', realm: 'r', token_source: { kind: 'bearer' }, basic_users: [], tokens: [], session_ttl_seconds: null, credentials_version: 1 };
    const { s } = await setup(layer(), { auth: basic });
    const token = await sign(key1, { sub: 'a' });
    const r = await s.request({ headers: { 'x-jwt-assertion': token, x_jwt_assertion: 'forged.forged.forged' } });
    assert.equal(r.status, 200, r.text);
    // Set by the stage: the forwarders leave out visitor fields whose headerKey is a stage field's.
    assert.deepEqual(r.passed!.upstreamHeaders, { 'x-jwt-assertion': token });
    const prefixed = await s.request({ headers: { 'x-jwt-assertion': `Bearer ${token}` } });
    assert.deepEqual(prefixed.passed!.upstreamHeaders, { 'x-jwt-assertion': `Bearer ${token}` }, 'as sent');
    // Read from Authorization (no main mode reading it), nothing is added: the JWT stays where the visitor put it.
    const plain = await setup(layer());
    assert.deepEqual((await plain.s.request({ headers: bearer(token) })).passed!.upstreamHeaders, {});
  });

  it('refuses to compile a stored claim header name the API would refuse (invalid, framing, edge-owned), so it never reaches a forwarder', () => {
    for (const header of ['x role', 'X-Rôle', 'x-forwarded-for', 'X_Forwarded_For', 'x-edge-auth-user', 'content-length', 'connection', 'authorization']) {
      assert.throws(() => jwt.compile(endpointWith(layer({ claim_headers: { role: header } })), { publicHttpsPort: () => 443 }), /claim_headers/, header);
    }
  });

  it('refuses to compile a stored jwks_url that is not a URL, though the key set itself is built on the first token', () => {
    assert.throws(() => jwt.compile(endpointWith(layer({ jwks_url: 'idp.example.com/jwks' })), { publicHttpsPort: () => 443 }), TypeError);
    // No token yet, so nothing is fetched and no key set exists: compiling a JWKS on a host that does not resolve is fine.
    assert.equal(jwt.compile(endpointWith(layer({ jwks_url: 'https://idp.invalid/jwks.json' })), { publicHttpsPort: () => 443 })?.name, 'jwt');
  });

  it('refuses to fetch a JWKS on a private address unless private addresses are allowed', async () => {
    const server = await startJwksServer([key1]);
    cleanups.push(() => server.close());
    const token = await sign(key1, { sub: 'a' });
    const deps = { allowPrivate: false, jwks: { timeoutMs: 2_000, cooldownMs: 0, cacheMaxAgeMs: 600_000 } };
    const literal = await setup(layer({}, server), { deps });
    assert.equal((await literal.s.request({ headers: bearer(token) })).status, 503);
    // A name that resolves to loopback is refused at connect time (DNS rebinding), as origin names are.
    const named = await setup(layer({ jwks_url: `http://jwks.test:${server.port}/jwks.json` }, server), {
      deps,
      options: { lookup: ((_host: string, options: { all?: boolean }, cb: (...a: unknown[]) => void) => (options.all ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4))) as never },
    });
    assert.equal((await named.s.request({ headers: bearer(token) })).status, 503);
    assert.equal(server.fetches, 0, 'nothing reached the private address');
  });
});
