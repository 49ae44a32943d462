// Micro-benchmarks of the visitor-auth stages on their hot paths (a verdict already cached), each beside the work the
// cache spares: a cached Basic credential beside one bcrypt compare, a token beside nothing (it is always a lookup),
// a cached JWT beside one RS256 verification, an OAuth/OIDC session cookie cached and not (one HMAC). Target: each
// path under 5 µs per request; reported, not asserted.
// `npx tsx bench/stages.ts` (a few seconds); `npm run bench` includes it.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import bcrypt from 'bcrypt';
import { jwtVerify, createLocalJWKSet } from 'jose';
import { Bench } from 'tinybench';
import { compileEndpoint } from '../src/edge/compile.ts';
import { runStages } from '../src/edge/pipeline/pipeline.ts';
import { StageMemory } from '../src/edge/pipeline/stage-memory.ts';
import type { RequestContext, Stage, StageDeps } from '../src/edge/pipeline/stage.ts';
import { auth, authStage } from '../src/edge/stages/auth.ts';
import { jwt, ASYMMETRIC_ALGORITHMS } from '../src/edge/stages/jwt.ts';
import { newSessionId, sealSession, SESSION_COOKIE, SessionKeys } from '../src/edge/auth/session.ts';
import { SESSION_CACHE_SIZE } from '../src/edge/auth/oidc-login.ts';
import { SecretBox } from '../src/shared/secrets.ts';
import type { EndpointConfig, VisitorAuthConfig } from '../src/shared/snapshot.ts';
import { tokenDigest, visitorTokenKey } from '../src/shared/visitor-credentials.ts';
import { endpointConfig } from '../test/helpers/endpoint-config.ts';
import { makeKey, sign } from '../test/helpers/jwks-server.ts';
import type { Row } from './proxy.ts';

const ENDPOINT = endpointConfig({ uuid: '00000000-0000-4000-8000-000000000001', hostname: 'bench.edge.localhost' });

const authConfig = (over: Partial<VisitorAuthConfig>): VisitorAuthConfig => ({
  mode: 'none',
  realm: 'bench',
  token_source: { kind: 'bearer' },
  basic_users: [],
  tokens: [],
  session_ttl_seconds: null,
  credentials_version: 1,
  ...over,
});

/** A context as the pipeline builds one per request; only what the auth stages read is real. */
function context(headers: http.IncomingHttpHeaders): RequestContext {
  return {
    req: { headers } as http.IncomingMessage,
    res: {} as http.ServerResponse,
    endpoint: ENDPOINT,
    method: 'GET',
    host: ENDPOINT.hostname,
    authority: ENDPOINT.hostname,
    path: '/api/items',
    query: '',
    clientIp: '198.51.100.20',
    secure: true,
    upstreamHeaders: {},
  };
}

/** Runs a stage once the way the bench loop will, and fails unless it passes synchronously (the cached path). */
async function warm(stage: Stage, headers: http.IncomingHttpHeaders): Promise<void> {
  const first = await stage.run(context(headers));
  if (first !== 'next') throw new Error(`${stage.name}: the warm-up request was refused`);
  if (stage.run(context(headers)) !== 'next') throw new Error(`${stage.name}: a repeat is not answered synchronously from the cache`);
}

export interface StageBenchResult {
  name: string;
  /** Mean ns per request. */
  meanNs: number;
  /** The uncached work beside it (bcrypt, a signature check), ns; NaN when there is none. */
  baselineNs: number;
  baselineName: string;
}

export async function benchStages(): Promise<StageBenchResult[]> {
  const box = new SecretBox('bench-stages');
  const deps: StageDeps = { publicHttpsPort: () => 443, secrets: box, memory: new StageMemory(), allowPrivate: true };
  const password = 'correct horse battery';
  const hash = await bcrypt.hash(password, 10);
  const basicHeaders = { authorization: `Basic ${Buffer.from(`alice:${password}`).toString('base64')}` };
  const basic = auth.compile({ ...ENDPOINT, auth: authConfig({ mode: 'basic', basic_users: [{ id: '1', username: 'alice', password_hash: hash }] }) }, deps)!;

  const token = 'evk_benchmark-token-0123456789abcdefghijklmnop';
  const tokens = Array.from({ length: 100 }, (_, i) => ({ id: String(i + 1), label: `t${i}`, digest: tokenDigest(visitorTokenKey(box), i === 57 ? token : `other-${i}-token-xxxxxxxx`), expires_at: null }));
  const tokenStage = auth.compile({ ...ENDPOINT, auth: authConfig({ mode: 'token', tokens }) }, deps)!;
  const tokenHeaders = { authorization: `Bearer ${token}` };

  // A real JWKS on loopback, fetched once by the stage.
  const key = await makeKey('bench-rs256');
  const jwks = http.createServer((_req, res) => res.end(JSON.stringify({ keys: [key.jwk] })));
  await new Promise<void>((r) => jwks.listen(0, '127.0.0.1', r));
  const jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`;
  const jwtEndpoint: EndpointConfig = { ...ENDPOINT, jwt: { jwks_url: jwksUrl, issuer: 'https://idp.example', audience: 'api', claim_headers: { sub: 'x-user', groups: 'x-groups' } } };
  const jwtStage = jwt.compile(jwtEndpoint, deps)!;
  const jwtToken = await sign(key, { sub: 'user-1', groups: ['eng', 'ops'], iss: 'https://idp.example', aud: 'api' });
  const jwtHeaders = { authorization: `Bearer ${jwtToken}` };
  const localKeys = createLocalJWKSet({ keys: [key.jwk] });

  // Both layers as the pipeline runs them: basic in Authorization, the JWT in X-JWT-Assertion.
  const both = compileEndpoint(
    { ...jwtEndpoint, auth: authConfig({ mode: 'basic', basic_users: [{ id: '1', username: 'alice', password_hash: hash }] }) },
    deps,
  ).stages;
  const bothHeaders = { ...basicHeaders, 'x-jwt-assertion': jwtToken };

  // An endpoint in mode oidc (no provider is contacted: a valid session needs none) and session cookies for it:
  // one, which the stage's cache holds after its first use; four cycled through a stage that keeps two, so each
  // request pays the HMAC check (and the JSON parse of the payload); and twice the real cache's size cycled through,
  // so every lookup also misses in cold memory and evicts (a worst case: 20,000 sessions new to this compile).
  const sessionKeys = SessionKeys.fromSettings('', box);
  const endpointKeys = sessionKeys.forEndpoint(ENDPOINT.uuid);
  const sessionDeps: StageDeps = { ...deps, sessions: { keys: sessionKeys, ttlSeconds: 86_400 } };
  const oidcEndpoint: EndpointConfig = {
    ...ENDPOINT,
    auth: authConfig({
      mode: 'oidc',
      providers: [
        { id: 1, kind: 'oidc', name: 'IdP', issuer: 'https://idp.example', client_id: 'edge', client_secret_sealed: box.seal('secret'), scopes: ['openid', 'email'], allowed_emails: [], allowed_domains: ['example.com'], authorization_url: null, token_url: null, userinfo_url: null },
      ],
      allowed_redirects: [],
    }),
  };
  const oidcStage = auth.compile(oidcEndpoint, sessionDeps)!;
  const uncachedStage = authStage({ sessionCacheSize: 2 }).compile(oidcEndpoint, sessionDeps)!;
  const now = Math.floor(Date.now() / 1000);
  const sessionCookie = (i: number) =>
    `theme=dark; ${SESSION_COOKIE}=${sealSession(endpointKeys, { endpoint: ENDPOINT.id, provider: 1, subject: `user-${i}-00u1a2b3c4d5e6f7g8h9`, email: `user${i}@example.com`, id: newSessionId(), issuedAt: now, expiresAt: now + 86_400 })}`;
  const sessionHeaders = { cookie: sessionCookie(0) };
  const fewMisses = Array.from({ length: 4 }, (_, i) => ({ cookie: sessionCookie(i + 1) }));
  const misses = Array.from({ length: 2 * SESSION_CACHE_SIZE }, (_, i) => ({ cookie: sessionCookie(i + 1) }));
  let miss = 0;
  let fewMiss = 0;

  try {
    await warm(basic, basicHeaders);
    await warm(tokenStage, tokenHeaders);
    await warm(jwtStage, jwtHeaders);
    for (const stage of both) await warm(stage, bothHeaders);
    await warm(oidcStage, sessionHeaders);

    let sink = 0;
    const fast = new Bench({ time: 1_000 });
    fast
      .add('auth basic, cached verdict', () => {
        if (basic.run(context(basicHeaders)) === 'next') sink++;
      })
      .add('auth token (bearer, 100 live tokens)', () => {
        if (tokenStage.run(context(tokenHeaders)) === 'next') sink++;
      })
      .add('jwt, cached verification (2 claim headers)', () => {
        if (jwtStage.run(context(jwtHeaders)) === 'next') sink++;
      })
      .add('auth basic + jwt through runStages, both cached', () => {
        if (runStages(both, context(bothHeaders)) === 'next') sink++;
      })
      .add('auth oidc session, cached', () => {
        if (oidcStage.run(context(sessionHeaders)) === 'next') sink++;
      })
      .add('auth oidc session, uncached (HMAC-SHA256 per request)', () => {
        if (uncachedStage.run(context(fewMisses[fewMiss++ % fewMisses.length])) === 'next') sink++;
      })
      .add('auth oidc session, 20,000 new sessions cycling (cache thrashed)', () => {
        if (oidcStage.run(context(misses[miss++ % misses.length])) === 'next') sink++;
      })
      .add('context only (what every line above includes)', () => {
        if (context(basicHeaders).secure) sink++;
      });
    const slow = new Bench({ time: 1_000, iterations: 5 });
    slow
      .add('bcrypt.compare, cost 10 (what the cache spares)', async () => {
        if (await bcrypt.compare(password, hash)) sink++;
      })
      .add('jose jwtVerify RS256 (what the cache spares)', async () => {
        const { payload } = await jwtVerify(jwtToken, localKeys, { algorithms: ASYMMETRIC_ALGORITHMS, issuer: 'https://idp.example', audience: 'api' });
        if (payload.sub) sink++;
      });
    await fast.run();
    await slow.run();
    if (sink < 0) console.log(sink);
    const mean = (b: Bench, name: string) => {
      const r = b.getTask(name)?.result;
      return r && 'latency' in r ? r.latency.mean * 1e6 : Number.NaN;
    };
    const bcryptNs = mean(slow, 'bcrypt.compare, cost 10 (what the cache spares)');
    const verifyNs = mean(slow, 'jose jwtVerify RS256 (what the cache spares)');
    return [
      { name: 'auth basic, cached verdict', meanNs: mean(fast, 'auth basic, cached verdict'), baselineNs: bcryptNs, baselineName: 'bcrypt.compare cost 10' },
      { name: 'auth token (bearer, 100 live tokens)', meanNs: mean(fast, 'auth token (bearer, 100 live tokens)'), baselineNs: Number.NaN, baselineName: '' },
      { name: 'jwt, cached verification', meanNs: mean(fast, 'jwt, cached verification (2 claim headers)'), baselineNs: verifyNs, baselineName: 'jose RS256 verify' },
      { name: 'auth basic + jwt, both cached (runStages)', meanNs: mean(fast, 'auth basic + jwt through runStages, both cached'), baselineNs: bcryptNs + verifyNs, baselineName: 'bcrypt + RS256 verify' },
      { name: 'auth oidc session, cached', meanNs: mean(fast, 'auth oidc session, cached'), baselineNs: Number.NaN, baselineName: '' },
      { name: 'auth oidc session, uncached (one HMAC)', meanNs: mean(fast, 'auth oidc session, uncached (HMAC-SHA256 per request)'), baselineNs: Number.NaN, baselineName: '' },
      {
        name: 'auth oidc session, worst case: every request a new session (cache thrashed)',
        meanNs: mean(fast, 'auth oidc session, 20,000 new sessions cycling (cache thrashed)'),
        baselineNs: Number.NaN,
        baselineName: '',
      },
      { name: 'request context alone (included above)', meanNs: mean(fast, 'context only (what every line above includes)'), baselineNs: Number.NaN, baselineName: '' },
    ];
  } finally {
    jwks.closeAllConnections();
    await new Promise<void>((r) => jwks.close(() => r()));
  }
}

/** The results as rows of the printed table: ns per request, µs against the 5 µs target, and the work spared. */
export function describeStages(results: StageBenchResult[]): Row[] {
  return results.map((r) => {
    const us = r.meanNs / 1000;
    let result = `${us.toFixed(2)} µs/request`;
    if (r.name.includes('worst case')) result += ' (informational: each session pays this once per compile)';
    else if (!r.name.startsWith('request context')) result += us < 5 ? ' (target < 5 µs: met)' : ' (target < 5 µs: NOT met)';
    if (Number.isFinite(r.baselineNs)) result += `; uncached: ${r.baselineName} ${(r.baselineNs / 1000).toFixed(0)} µs (${(r.baselineNs / r.meanNs).toFixed(0)}× the cached path)`;
    return { benchmark: `stage ${r.name}`, result };
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { formatTable } = await import('./proxy.ts');
  console.log(`\n${formatTable(describeStages(await benchStages()))}`);
}
