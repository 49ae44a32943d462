// The JWT layer (`jwt`): after the main mode, every request carries a JWT verified against the endpoint's JWKS, and the
// claims the endpoint maps are handed to the agent as headers. A verified token costs microseconds after its first use.
//
// Keys come from jose's createRemoteJWKSet: fetched on first use and when stale (cacheMaxAge), and again for an unknown
// `kid` at most once per cooldown, so a flood of made-up kids cannot make the edge hammer the JWKS. The fetch goes
// through undici with the edge's address policy (a name that resolves to a private address is refused at connect
// time, unless EDGE_ORIGIN_ALLOW_PRIVATE), follows no redirect, and reads at most MAX_JWKS_BYTES. A JWKS that cannot be
// fetched is an outage, not the visitor's fault: 503 auth_unavailable unless a key held from before fits.
//
// Only asymmetric algorithms are accepted (never `none`, never HS*: an HMAC "signed" with the public key is the
// classic confusion, RFC 8725 §2.1, §3.1). `exp` is required; `iss`/`aud` are checked when set; exp and nbf allow
// CLOCK_TOLERANCE_S of skew. A verified token is cached by its SHA-256 until its `exp` (and never longer than the key
// set's lifetime, so a key removed from the JWKS stops working once the set is refetched); the cache is flushed when
// the fetched key set changes, and belongs to the endpoint's JWT config: it survives recompiles while that is unchanged.
//
// Which header carries the JWT: `Authorization: Bearer <jwt>`, except when the main mode reads Authorization itself
// (basic, or token mode without a header or cookie); then the JWT goes in `X-JWT-Assertion` (docs/visitor-auth.md).
// The JWT is forwarded as sent (the service may verify it too); mapped claim headers replace every visitor copy.
import { createHash, hash } from 'node:crypto';
import type { LookupFunction } from 'node:net';
import { createLocalJWKSet, createRemoteJWKSet, customFetch, errors, jwtVerify, type FetchImplementation, type JWSHeaderParameters, type FlattenedJWSInput, type JWTPayload } from 'jose';
import { fetch as undiciFetch } from 'undici';
import { headerKey } from '../../shared/edge-headers.ts';
import type { ErrorCode } from '../../shared/errors.ts';
import type { EndpointConfig, JwtLayerConfig } from '../../shared/snapshot.ts';
import { claimHeaderRefusal } from '../../shared/visitor-credentials.ts';
import { asHeaderValue, credentialsOf } from '../http/credentials.ts';
import { sendEdgeError } from '../http/pages.ts';
import { dropAppender } from '../http/proxy-headers.ts';
import type { AuthOutcome } from '../metrics.ts';
import { literalRefusal, policyAgent, readBounded } from '../http/policy-fetch.ts';
import { LazyLru } from '../pipeline/lazy-cache.ts';
import { clockOf, DEFAULT_STAGE_DEPS, traceIdOfRequest, type RequestContext, type Stage, type StageDeps, type StageFactory, type Verdict } from '../pipeline/stage.ts';
import { quoted } from './auth.ts';

/** RFC 7518 §3.1 and RFC 8037: the signature algorithms whose verification key is public. */
export const ASYMMETRIC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];
/** Seconds of clock skew allowed on exp and nbf. */
export const CLOCK_TOLERANCE_S = 30;
/** Verified (and refused) tokens kept per endpoint. */
export const TOKEN_CACHE_SIZE = 10_000;
/** Refused tokens kept per endpoint. */
const REFUSED_CACHE_SIZE = 1_000;
/** A refusal that cannot change by itself (bad signature, wrong issuer) is remembered this long. */
const REFUSAL_TTL_MS = 60_000;
/** The largest JWKS document read; a real one is a few KiB. */
export const MAX_JWKS_BYTES = 512 * 1024;
/** After a failed fetch, further fetches wait this long (at most the cooldown): an outage does not become a flood. */
const RETRY_AFTER_FAILURE_MS = 5_000;
/** How often an outage is logged per endpoint. */
const LOG_EVERY_MS = 60_000;

/** The field the JWT is read from when the main mode already reads Authorization. */
export const JWT_ASSERTION_HEADER = 'x-jwt-assertion';

export const DEFAULT_JWKS_TIMINGS = { timeoutMs: 5_000, cooldownMs: 30_000, cacheMaxAgeMs: 600_000 };

/** The JWKS could not be fetched (network, timeout, status, body) and no key held from before fits. */
export class JwksUnavailableError extends Error {
  override name = 'JwksUnavailableError';
  constructor(
    readonly url: string,
    override readonly cause: unknown,
  ) {
    super(`the JWKS at ${url} could not be fetched: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

export interface JwtStageOptions {
  /** How JWKS host names are resolved (the system resolver unless a test points elsewhere); still checked by the policy. */
  lookup?: LookupFunction;
  /** jose's jwtVerify; a test passes a counting wrapper to see what the cache spares. */
  verify?: typeof jwtVerify;
}

interface Verified {
  /** ms since the epoch after which the entry is not used. */
  until: number;
  /** Claim headers to set: [lower-case name, value]. */
  headers: ReadonlyArray<readonly [string, string]>;
}

interface Refused {
  until: number;
  why: string;
}

/** What the stage keeps while the endpoint's JWT config is unchanged. */
interface JwtState {
  getKey: (header: JWSHeaderParameters, token: FlattenedJWSInput) => Promise<CryptoKey>;
  verified: LazyLru<string, Verified>;
  refused: LazyLru<string, Refused>;
  inFlight: Map<string, Promise<Verified>>;
  loggedAt: number;
}

/**
 * The key resolver, built on the first token the endpoint sees (remoteKeys): at 100k endpoints, jose's remote set, its
 * fetch and their closures built at compile held ~4.7 KiB per endpoint with a JWT layer, before any token came
 * (docs/performance.md "Memory at scale"). The URL is checked now, so a config that names no URL still fails to compile.
 */
function keyResolver(jwt: JwtLayerConfig, timings: typeof DEFAULT_JWKS_TIMINGS, allowPrivate: boolean, options: JwtStageOptions, now: () => number, onChange: () => void): JwtState['getKey'] {
  new URL(jwt.jwks_url);
  let resolve: JwtState['getKey'] | null = null;
  return (header, token) => (resolve ??= remoteKeys(jwt, timings, allowPrivate, options, now, onChange))(header, token);
}

/**
 * jose's remote set with a fetch that applies the address policy, bounds the document and backs off after a failure;
 * when the fetch fails, a key from the last set fetched may still serve (an outage of the JWKS host does not lock
 * out tokens signed by keys already known). A new set (rotation) flushes `onChange`.
 */
function remoteKeys(jwt: JwtLayerConfig, timings: typeof DEFAULT_JWKS_TIMINGS, allowPrivate: boolean, options: JwtStageOptions, now: () => number, onChange: () => void): JwtState['getKey'] {
  const url = new URL(jwt.jwks_url);
  const refusedLiteral = literalRefusal(url, allowPrivate);
  const agent = policyAgent(allowPrivate, options.lookup);
  let failedAt = -Infinity;
  let lastFailure: unknown = null;
  let fetchedDigest = '';
  /** Fetches that delivered a key set, so the fallback set is rebuilt only when it changed. */
  let generation = 0;
  let fallback: { generation: number; keys: ReturnType<typeof createLocalJWKSet> } | null = null;
  const retryMs = Math.min(timings.cooldownMs, RETRY_AFTER_FAILURE_MS);

  const fetchJwks: FetchImplementation = async (href, init) => {
    if (now() - failedAt < retryMs) throw lastFailure;
    try {
      // Sockets skip the lookup for IP literals, so those are judged here (as origin pools do).
      if (refusedLiteral !== null) throw new Error(refusedLiteral);
      const res = await undiciFetch(href, { method: init.method, redirect: init.redirect, signal: init.signal, headers: Object.fromEntries(init.headers), dispatcher: agent });
      if (res.status !== 200) {
        await res.body?.cancel();
        throw new Error(`the JWKS answered ${res.status}`);
      }
      const body = await readBounded(res.body as AsyncIterable<Uint8Array> | null, MAX_JWKS_BYTES, 'the JWKS document');
      const text = body.toString('utf8');
      const parsed = JSON.parse(text) as { keys?: unknown };
      if (typeof parsed !== 'object' || parsed === null || !Array.isArray(parsed.keys)) throw new Error('the JWKS document has no "keys" array');
      const digest = createHash('sha256').update(body).digest('base64');
      if (digest !== fetchedDigest) {
        if (fetchedDigest !== '') onChange();
        fetchedDigest = digest;
      }
      generation++;
      failedAt = -Infinity;
      return new Response(text, { status: 200, headers: { 'content-type': 'application/json' } });
    } catch (err) {
      failedAt = now();
      lastFailure = err;
      throw err;
    }
  };
  const remote = createRemoteJWKSet(url, {
    timeoutDuration: timings.timeoutMs,
    cooldownDuration: timings.cooldownMs,
    cacheMaxAge: timings.cacheMaxAgeMs,
    [customFetch]: fetchJwks,
  });

  return async (header, token) => {
    try {
      return await remote(header, token);
    } catch (err) {
      // No key for this kid, or several: the token's fault, not an outage.
      if (err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWKSMultipleMatchingKeys) throw err;
      const held = remote.jwks();
      if (held !== undefined) {
        if (fallback === null || fallback.generation !== generation) fallback = { generation, keys: createLocalJWKSet(held) };
        try {
          return await fallback.keys(header, token);
        } catch {
          // no key held from before fits either
        }
      }
      throw new JwksUnavailableError(url.href, err);
    }
  };
}

/** Why a token was refused, and whether that can change by itself (then it is not remembered). */
function refusal(err: unknown): { why: string; lasting: boolean } | null {
  if (err instanceof errors.JWTExpired) return { why: 'the token has expired', lasting: true };
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'nbf') return { why: 'the token is not valid yet (nbf)', lasting: false };
    if (err.reason === 'missing') return { why: `the token has no "${err.claim}" claim`, lasting: true };
    return { why: `the token's "${err.claim}" claim is not accepted`, lasting: true };
  }
  if (err instanceof errors.JOSEAlgNotAllowed) return { why: 'the token is not signed with an accepted algorithm (asymmetric ones only)', lasting: true };
  if (err instanceof errors.JWKSNoMatchingKey) return { why: 'no key of the JWKS matches the token', lasting: false };
  if (err instanceof errors.JWKSMultipleMatchingKeys) return { why: 'several keys of the JWKS match the token; it needs a kid', lasting: false };
  if (err instanceof errors.JWSSignatureVerificationFailed) return { why: 'the signature does not verify', lasting: true };
  if (err instanceof errors.JWSInvalid || err instanceof errors.JWTInvalid || err instanceof errors.JOSENotSupported) return { why: 'the token is not a valid signed JWT', lasting: true };
  return null;
}

/** A checksum of what the state derives from: the JWT config and the fetch timings. */
function configChecksum(jwt: JwtLayerConfig, timings: typeof DEFAULT_JWKS_TIMINGS, allowPrivate: boolean): string {
  return createHash('sha256').update(JSON.stringify([jwt.jwks_url, jwt.issuer, jwt.audience, jwt.claim_headers, timings, allowPrivate])).digest('base64url');
}

/** Whether the endpoint's main mode reads Authorization itself, so the JWT has to go elsewhere. */
export function mainModeReadsAuthorization(endpoint: EndpointConfig): boolean {
  const auth = endpoint.auth;
  return auth !== undefined && (auth.mode === 'basic' || (auth.mode === 'token' && auth.token_source.kind === 'bearer'));
}

function compileJwt(endpoint: EndpointConfig, jwt: JwtLayerConfig, deps: StageDeps, options: JwtStageOptions): Stage {
  const timings = deps.jwks ?? DEFAULT_JWKS_TIMINGS;
  const allowPrivate = deps.allowPrivate ?? false;
  const now = clockOf(deps);
  const verifyJwt = options.verify ?? jwtVerify;
  // The API refuses such names; one stored before it did (or from a newer control plane) fails the compile rather
  // than reach the forwarders, where an invalid name throws and an edge-owned one would override the edge's own.
  for (const header of Object.values(jwt.claim_headers)) {
    const refusal = claimHeaderRefusal(header);
    if (refusal !== null) throw new Error(`claim_headers: ${refusal}`);
  }
  const claims = Object.entries(jwt.claim_headers).map(([claim, header]) => [claim, header.toLowerCase()] as const);
  // Dropped by headerKey (`_` as `-`), the form the forwarders compare visitor names in, so a name configured as
  // X_Role drops X-Role too (and the other way round) even when the token has no such claim.
  const claimNames: readonly string[] = claims.map(([, header]) => headerKey(header));
  const dropClaims = dropAppender(claimNames);
  const verifyOptions = {
    algorithms: ASYMMETRIC_ALGORITHMS,
    issuer: jwt.issuer || undefined,
    audience: jwt.audience || undefined,
    clockTolerance: CLOCK_TOLERANCE_S,
    requiredClaims: ['exp'],
  };
  const make = (): JwtState => {
    const state: JwtState = {
      getKey: null as unknown as JwtState['getKey'],
      verified: new LazyLru({ max: TOKEN_CACHE_SIZE }),
      // Anyone can mint refused tokens: fewer of them are kept than of verified ones, which only an issuer can make.
      refused: new LazyLru({ max: REFUSED_CACHE_SIZE }),
      inFlight: new Map(),
      loggedAt: -Infinity,
    };
    // A new key set (rotation, a key removed) may turn verdicts either way: both caches go.
    state.getKey = keyResolver(jwt, timings, allowPrivate, options, now, () => {
      state.verified.clear();
      state.refused.clear();
    });
    return state;
  };
  const state = deps.memory ? deps.memory.keep('jwt', endpoint.uuid, configChecksum(jwt, timings, allowPrivate), make) : make();
  const fromAssertion = mainModeReadsAuthorization(endpoint);
  const realm = `Bearer realm=${quoted(endpoint.hostname)}`;
  const uuid = endpoint.uuid;
  const count = (outcome: AuthOutcome) => deps.authOutcome?.(uuid, 'jwt', outcome);

  const refuse = (ctx: RequestContext, code: ErrorCode, outcome: AuthOutcome, why?: string): 'done' => {
    count(outcome);
    // RFC 6750 §3.1: no error attribute when the request had no token at all.
    if (code !== 'auth_unavailable') ctx.res.setHeader('www-authenticate', why === undefined ? realm : `${realm}, error="invalid_token", error_description=${quoted(why)}`);
    sendEdgeError(ctx.res, code, ctx.req.headers.accept, why);
    return 'done';
  };

  const admit = (ctx: RequestContext, verified: Verified, assertion: string | undefined): 'next' => {
    count('ok');
    // Visitor copies of every mapped name go, whether or not this token has the claim.
    if (claimNames.length > 0) ctx.dropHeaders = dropClaims(ctx.dropHeaders);
    for (const [name, value] of verified.headers) ctx.upstreamHeaders[name] = value;
    // The verified assertion goes on as sent, as the edge's own field: the forwarders then leave out every visitor
    // spelling of it (X_JWT_Assertion would otherwise reach a CGI upstream beside, or instead of, the verified one).
    if (assertion !== undefined) ctx.upstreamHeaders[JWT_ASSERTION_HEADER] = assertion;
    return 'next';
  };

  const verify = async (token: string): Promise<Verified> => {
    const { payload } = await verifyJwt(token, state.getKey, verifyOptions);
    return { until: Math.min(payload.exp! * 1000, now() + timings.cacheMaxAgeMs), headers: claimHeaders(payload) };
  };

  const claimHeaders = (payload: JWTPayload): Verified['headers'] => {
    const out: Array<readonly [string, string]> = [];
    for (const [claim, header] of claims) {
      const value = payload[claim];
      if (value === undefined || value === null) continue;
      out.push([header, asHeaderValue(value)]);
    }
    return out;
  };

  const failed = (ctx: RequestContext, digest: string, err: unknown): 'done' => {
    const known = refusal(err);
    if (known !== null) {
      if (known.lasting) state.refused.set(digest, { until: now() + REFUSAL_TTL_MS, why: known.why });
      return refuse(ctx, 'invalid_token', 'invalid', known.why);
    }
    const t = now();
    if (t - state.loggedAt >= LOG_EVERY_MS) {
      state.loggedAt = t;
      deps.logger?.warn({ err, endpoint: uuid, jwks_url: jwt.jwks_url, trace_id: traceIdOfRequest(ctx) }, 'JWT layer unavailable: the JWKS could not be fetched and no key held fits; answering 503');
    }
    return refuse(ctx, 'auth_unavailable', 'unavailable', err instanceof JwksUnavailableError ? 'the key set that verifies tokens for this endpoint could not be fetched' : undefined);
  };

  return {
    name: 'jwt',
    run(ctx): Verdict | Promise<Verdict> {
      const headers = ctx.req.headers;
      let token: string | undefined;
      let assertion: string | undefined;
      if (fromAssertion) {
        const value = headers[JWT_ASSERTION_HEADER];
        if (typeof value === 'string') token = credentialsOf((assertion = value), 'bearer') ?? value;
      } else token = credentialsOf(headers.authorization, 'bearer');
      if (token === undefined || token.length === 0) return refuse(ctx, 'auth_required', 'missing');
      // One-shot hash: no Hash object per request (about half the cost of createHash for a typical JWT).
      const digest = hash('sha256', token, 'base64');
      const t = now();
      const hit = state.verified.get(digest);
      if (hit !== undefined) {
        if (hit.until > t) return admit(ctx, hit, assertion);
        state.verified.delete(digest);
      }
      const bad = state.refused.get(digest);
      if (bad !== undefined && bad.until > t) return refuse(ctx, 'invalid_token', 'invalid', bad.why);
      let pending = state.inFlight.get(digest);
      if (pending === undefined) {
        pending = verify(token);
        state.inFlight.set(digest, pending);
        const settled = () => state.inFlight.delete(digest);
        pending.then((v) => {
          settled();
          state.verified.set(digest, v);
        }, settled);
      }
      return pending.then(
        (v) => admit(ctx, v, assertion),
        (err: unknown) => failed(ctx, digest, err),
      );
    },
  };
}

/** The stage with test hooks (a resolver for JWKS names, a counting verifier). */
export function jwtStage(options: JwtStageOptions = {}): StageFactory {
  return {
    id: 'jwt',
    healthProbe: 'skips',
    failClosed: true,
    compile(endpoint, deps = DEFAULT_STAGE_DEPS) {
      const jwt = endpoint.jwt;
      return jwt === undefined || jwt === null ? null : compileJwt(endpoint, jwt, deps, options);
    },
  };
}

export const jwt: StageFactory = jwtStage();
