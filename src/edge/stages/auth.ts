// The visitor authentication stage (`auth`): the endpoint's main mode (basic, token, or an OAuth/OIDC login),
// compiled from its snapshot. Nothing per request reaches Redis or the database (docs/architecture.md).
//
// basic (RFC 7617): bcrypt runs on libuv's thread pool, once per distinct credential. The verdict, success or failure,
// is cached under a SHA-256 of a per-process random salt and the credential (so the cache holds no password and cannot
// be read as a lookup table), and identical credentials in flight share one check. A miss that would run bcrypt is
// first charged to the visitor's address (IPv6: its /64): FAILURES_PER_MINUTE failed checks a minute (a token bucket),
// then 429 without running bcrypt. The caches live as long as the endpoint's users are unchanged, across recompiles.
//
// token (RFC 6750 §2.1, or a configured header or cookie): the token's keyed digest is looked up in a Map built at
// compile time; expiry is compared per request; revoked tokens are absent from the snapshot, so refused at once.
//
// oauth / oidc: a login with one of the endpoint's identity providers, then a signed session cookie checked by HMAC
// per request; the flow, its reserved paths and the sessions are in src/edge/auth/ (oidc-login.ts).
//
// Accepted: ctx.visitor names who was admitted (the rbac stage maps it to a client; a credential with `client_id` is an
// RBAC client's), the credential is not forwarded (Authorization, the token header, or the token cookie; the session
// cookies), and the agent receives X-Edge-Auth-User (the username, the token's label, or the provider's subject;
// after a login also X-Edge-Auth-Email and X-Edge-Auth-Provider); visitor copies of them are always stripped
// (src/shared/edge-headers.ts).
import { createHash, hash as oneShotHash, randomBytes } from 'node:crypto';
import bcrypt from 'bcrypt';
import ipaddr from 'ipaddr.js';
import { headerKey } from '../../shared/edge-headers.ts';
import type { ErrorCode } from '../../shared/errors.ts';
import { AUTH_USER_HEADER, compileOAuth, type OAuthStageOptions } from '../auth/oidc-login.ts';
import type { BasicUserConfig, EndpointConfig, VisitorAuthConfig } from '../../shared/snapshot.ts';
import { tokenDigest, visitorTokenKey } from '../../shared/visitor-credentials.ts';
import { asHeaderValue, basicCredentials, credentialsOf } from '../http/credentials.ts';
import { sendEdgeError } from '../http/pages.ts';
import { cookieValues } from '../match/cookies.ts';
import type { AuthOutcome } from '../metrics.ts';
import { LazyLru } from '../pipeline/lazy-cache.ts';
import { clockOf, DEFAULT_STAGE_DEPS, traceIdOfRequest, type RequestContext, type Stage, type StageDeps, type StageFactory, type Verdict, type VisitorIdentity } from '../pipeline/stage.ts';

/** The field the agent receives naming who authenticated (edge-owned: visitor copies are stripped in every spelling). */
export { AUTH_USER_HEADER };

/** Failed password checks per visitor address and minute before further checks are refused with 429. */
export const FAILURES_PER_MINUTE = 10;
/** Distinct verdicts kept per endpoint, each kind (successes are at most one per user; failures are what floods fill). */
export const VERDICT_CACHE_SIZE = 1000;
/** Visitor addresses whose failures are counted per endpoint; the least recently failing are forgotten first. */
const LIMITED_ADDRESSES = 10_000;
/**
 * Password checks in flight in this process at most. bcrypt runs on libuv's pool (4 threads unless
 * UV_THREADPOOL_SIZE says otherwise), which DNS lookups and file I/O share: beyond this the edge answers 503 with
 * Retry-After rather than queue work that would stall origin connections. Cached verdicts are never affected.
 */
export const MAX_CHECKS_IN_FLIGHT = 32;
/**
 * Password checks in flight for one endpoint at most: a fair share of MAX_CHECKS_IN_FLIGHT, so one tenant's flood of
 * new credentials (from many addresses, each within its failure budget) cannot take every slot and lock the
 * visitors of other endpoints out of basic auth.
 */
export const MAX_CHECKS_PER_ENDPOINT = 8;

/**
 * The salt credentials are hashed with for the verdict caches: random per process, never stored or sent. A salted
 * one-shot SHA-256 rather than an HMAC: the key only has to be unguessable and collision-free (nothing verifies it
 * as a MAC), and createHmac builds a key object and a context per request, ~1.7 µs against ~0.3 µs on this machine
 * (docs/performance.md "Every policy on").
 */
const VERDICT_SALT = randomBytes(32).toString('base64');

/** The verdict caches' key for Basic credentials in their canonical base64 spelling. */
function verdictKey(token68: string): string {
  return oneShotHash('sha256', VERDICT_SALT + token68, 'base64');
}

export interface AuthStageOptions extends OAuthStageOptions {
  /** bcrypt's compare (async: libuv's pool); a test passes a counting wrapper. */
  compare?: (password: string, hash: string) => Promise<boolean>;
  failuresPerMinute?: number;
  maxChecksInFlight?: number;
  maxChecksPerEndpoint?: number;
}

let checksInFlight = 0;

/** A hash of the configured cost for unknown usernames, so they cost a visitor the same time as known ones. */
const decoys = new Map<number, Promise<string>>();
function decoyHash(rounds: number): Promise<string> {
  let hash = decoys.get(rounds);
  if (!hash) decoys.set(rounds, (hash = bcrypt.hash(randomBytes(18).toString('base64'), rounds)));
  return hash;
}

/**
 * Whose failure budget an address draws on: an IPv4 address (IPv4-mapped IPv6 read as IPv4), or an IPv6 address's
 * /64, the smallest block a network hands out (RFC 6177), since one host can use every address in it.
 */
export function limiterKey(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  let ip = ipaddr.parse(address);
  if (ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress()) ip = (ip as ipaddr.IPv6).toIPv4Address();
  if (ip.kind() === 'ipv4') return ip.toString();
  return `${(ip as ipaddr.IPv6).parts.slice(0, 4).map((p) => p.toString(16)).join(':')}::/64`;
}

/** Per-address failure budget: `capacity` tokens, refilled at `capacity` a minute; a check in flight holds one. */
class FailureLimiter {
  private readonly buckets = new LazyLru<string, { tokens: number; at: number }>({ max: LIMITED_ADDRESSES });
  constructor(
    private readonly capacity: number,
    private readonly now: () => number,
  ) {}

  private bucket(address: string): { tokens: number; at: number } {
    const now = this.now();
    const b = this.buckets.get(address);
    if (b === undefined) return { tokens: this.capacity, at: now };
    b.tokens = Math.min(this.capacity, b.tokens + ((now - b.at) * this.capacity) / 60_000);
    b.at = now;
    return b;
  }

  /** Takes one token for a check about to run; undefined when allowed, else the seconds until one is back. */
  take(address: string): number | undefined {
    const b = this.bucket(address);
    if (b.tokens < 1) return Math.max(1, Math.ceil(((1 - b.tokens) * 60_000) / this.capacity / 1000));
    b.tokens -= 1;
    this.buckets.set(address, b);
    return undefined;
  }

  /** A check that succeeded costs nothing: its token is given back. */
  refund(address: string): void {
    const b = this.buckets.get(address);
    if (b !== undefined) b.tokens = Math.min(this.capacity, b.tokens + 1);
  }
}

/** A basic user as compiled: what admitting them sets, built once (every request of the user shares it). */
interface BasicUser {
  id: string;
  username: string;
  passwordHash: string;
  visitor: VisitorIdentity;
  /** X-Edge-Auth-User's value (asHeaderValue of the username). */
  header: string;
}

function compileUser(u: BasicUserConfig): BasicUser {
  const visitor: VisitorIdentity = u.client_id === undefined ? { kind: 'basic', name: u.username } : { kind: 'basic', name: u.username, clientId: u.client_id };
  return { id: u.id, username: u.username, passwordHash: u.password_hash, visitor: Object.freeze(visitor), header: asHeaderValue(u.username) };
}

/** What a basic-mode stage keeps while the endpoint's users are unchanged (usersChecksum covers all of BasicUser). */
interface BasicVerdicts {
  ok: LazyLru<string, BasicUser>;
  bad: LazyLru<string, true>;
  inFlight: Map<string, Promise<BasicUser | null>>;
}

interface Outcomes {
  count(outcome: AuthOutcome): void;
}

function outcomes(endpoint: EndpointConfig, deps: StageDeps): Outcomes {
  const uuid = endpoint.uuid;
  return { count: (outcome) => deps.authOutcome?.(uuid, 'auth', outcome) };
}

/**
 * RFC 9110 §11.6.1 quoted-string, for a challenge built at compile time: `"` and `\` escaped, and any character
 * outside printable ASCII read as `?`. The API takes only printable realms, but a value stored before it checked
 * (or from a newer control plane) must not reach setHeader, which throws on a character above U+00FF.
 */
export function quoted(value: string): string {
  return `"${value.replace(/["\\]/g, '\\$&').replace(/[^\x20-\x7e]/g, '?')}"`;
}

function refuse(ctx: RequestContext, code: ErrorCode, challenge: string | null, detail?: string): 'done' {
  // Set before sendEdgeError's writeHead, which merges headers already set on the response.
  if (challenge !== null) ctx.res.setHeader('www-authenticate', challenge);
  sendEdgeError(ctx.res, code, ctx.req.headers.accept, detail);
  return 'done';
}

const DROP_AUTHORIZATION: readonly string[] = ['authorization'];

/** Marks the request as authenticated: the credential's field left out, the identity (asHeaderValue'd) set for the agent. */
function admit(ctx: RequestContext, user: string, drop: readonly string[] | null): 'next' {
  ctx.upstreamHeaders[AUTH_USER_HEADER] = user;
  if (drop !== null) ctx.dropHeaders = ctx.dropHeaders === undefined ? drop : ctx.dropHeaders.concat(drop);
  return 'next';
}

/** A checksum of the users, what the basic verdicts depend on (a cached verdict names the user and its client). */
function usersChecksum(auth: VisitorAuthConfig): string {
  const h = createHash('sha256').update(String(auth.credentials_version));
  for (const u of auth.basic_users) h.update(`\u0000${u.id}\u0000${u.username}\u0000${u.password_hash}\u0000${u.client_id ?? ''}`);
  return h.digest('base64url');
}

function compileBasic(endpoint: EndpointConfig, auth: VisitorAuthConfig, deps: StageDeps, options: AuthStageOptions): Stage {
  const compare = options.compare ?? ((password: string, hash: string) => bcrypt.compare(password, hash));
  const now = clockOf(deps);
  const maxInFlight = options.maxChecksInFlight ?? MAX_CHECKS_IN_FLIGHT;
  const failures = options.failuresPerMinute ?? FAILURES_PER_MINUTE;
  const users = new Map(auth.basic_users.map((u) => [u.username, compileUser(u)]));
  // Unknown usernames are checked against a decoy of the same cost as the users' hashes.
  const rounds = auth.basic_users.length > 0 ? bcrypt.getRounds(auth.basic_users[0].password_hash) : 10;
  const challenge = `Basic realm=${quoted(auth.realm || endpoint.hostname)}, charset="UTF-8"`;
  const make = (): BasicVerdicts => ({ ok: new LazyLru({ max: VERDICT_CACHE_SIZE }), bad: new LazyLru({ max: VERDICT_CACHE_SIZE }), inFlight: new Map() });
  const verdicts = deps.memory ? deps.memory.keep('auth:basic', endpoint.uuid, usersChecksum(auth), make) : make();
  // The failure budget outlives changes to the users: a visitor cannot reset it.
  const makeLimiter = () => new FailureLimiter(failures, now);
  const limiter = deps.memory ? deps.memory.keep('auth:limiter', endpoint.uuid, String(failures), makeLimiter) : makeLimiter();
  // The endpoint's checks in flight, counted across recompiles (a check started under the previous users still runs).
  const perEndpoint = options.maxChecksPerEndpoint ?? MAX_CHECKS_PER_ENDPOINT;
  const makeRunning = () => ({ checks: 0 });
  const running = deps.memory ? deps.memory.keep('auth:running', endpoint.uuid, '', makeRunning) : makeRunning();
  const count = outcomes(endpoint, deps);
  const use = deps.credentialUse;

  const accept = (ctx: RequestContext, user: BasicUser): 'next' => {
    count.count('ok');
    use?.basicUser(user.id);
    ctx.visitor = user.visitor;
    return admit(ctx, user.header, DROP_AUTHORIZATION);
  };
  const wrong = (ctx: RequestContext): 'done' => {
    count.count('invalid');
    return refuse(ctx, 'invalid_credentials', challenge);
  };

  /** One bcrypt check; the verdict is cached, the address's token given back on success. */
  const check = async (key: string, username: string, password: string, address: string): Promise<BasicUser | null> => {
    checksInFlight++;
    running.checks++;
    try {
      const user = users.get(username);
      const ok = await compare(password, user?.passwordHash ?? (await decoyHash(rounds)));
      if (ok && user !== undefined) {
        verdicts.ok.set(key, user);
        limiter.refund(address);
        return user;
      }
      verdicts.bad.set(key, true);
      return null;
    } finally {
      checksInFlight--;
      running.checks--;
    }
  };

  return {
    name: 'auth',
    run(ctx): Verdict | Promise<Verdict> {
      const given = credentialsOf(ctx.req.headers.authorization, 'basic');
      if (given === undefined) {
        count.count('missing');
        return refuse(ctx, 'auth_required', challenge);
      }
      // Verdicts are kept under the canonical base64 of the decoded bytes, so every spelling of one credential (padding,
      // unused trailing bits) shares one. Clients send the canonical one: it is looked up as sent, without decoding;
      // a hit means it is a stored canonical spelling, so valid base64 of user-id:password.
      let key = verdictKey(given);
      let known = verdicts.ok.get(key);
      if (known !== undefined) return accept(ctx, known);
      if (verdicts.bad.has(key)) return wrong(ctx);
      const creds = basicCredentials(given);
      if (creds === undefined) {
        count.count('invalid');
        return refuse(ctx, 'invalid_credentials', challenge, 'the Basic credentials are not base64 of user-id:password (RFC 7617)');
      }
      const canonical = creds.raw.toString('base64');
      if (canonical !== given) {
        key = verdictKey(canonical);
        known = verdicts.ok.get(key);
        if (known !== undefined) return accept(ctx, known);
        if (verdicts.bad.has(key)) return wrong(ctx);
      }
      let pending = verdicts.inFlight.get(key);
      if (pending === undefined) {
        if (checksInFlight >= maxInFlight || running.checks >= perEndpoint) {
          count.count('unavailable');
          ctx.res.setHeader('retry-after', '1');
          return refuse(ctx, 'auth_unavailable', null, 'too many password checks are in progress on this edge; retry shortly');
        }
        const address = limiterKey(ctx.clientIp);
        const wait = limiter.take(address);
        if (wait !== undefined) {
          count.count('invalid');
          ctx.res.setHeader('retry-after', String(wait));
          return refuse(ctx, 'too_many_auth_failures', null, `retry in ${wait} s`);
        }
        pending = check(key, creds.username, creds.password, address);
        verdicts.inFlight.set(key, pending);
        const settled = () => verdicts.inFlight.delete(key);
        pending.then(settled, settled);
      }
      return pending.then(
        (user) => (user !== null ? accept(ctx, user) : wrong(ctx)),
        (err: unknown) => {
          deps.logger?.error({ err, endpoint: endpoint.uuid, trace_id: traceIdOfRequest(ctx) }, 'password check failed');
          count.count('unavailable');
          return refuse(ctx, 'auth_unavailable', null);
        },
      );
    },
  };
}

interface LiveToken {
  id: string;
  /** X-Edge-Auth-User's value (asHeaderValue of the token's label). */
  header: string;
  /** Who the token admits (built once: every request with the token shares it). */
  visitor: VisitorIdentity;
  /** ms since the epoch; Infinity never expires. */
  expiresAt: number;
}

function compileToken(endpoint: EndpointConfig, auth: VisitorAuthConfig, deps: StageDeps): Stage {
  if (deps.secrets === undefined) throw new Error('token mode needs the edge secret key (EDGE_SECRET_KEY) to digest visitor tokens');
  const key = visitorTokenKey(deps.secrets);
  const now = clockOf(deps);
  const tokens = new Map<string, LiveToken>();
  for (const t of auth.tokens) {
    const expiresAt = t.expires_at === null ? Infinity : Date.parse(t.expires_at);
    if (Number.isNaN(expiresAt)) throw new Error(`token ${t.id} has an unreadable expires_at: ${t.expires_at}`);
    const visitor: VisitorIdentity = t.client_id === undefined ? { kind: 'token', name: t.label } : { kind: 'token', name: t.label, clientId: t.client_id };
    tokens.set(t.digest, { id: t.id, header: asHeaderValue(t.label), visitor: Object.freeze(visitor), expiresAt });
  }
  const source = auth.token_source;
  const realm = `realm=${quoted(endpoint.hostname)}`;
  // RFC 9110 §15.5.2: a 401 carries a challenge. Bearer is RFC 6750's; a header or cookie source has no registered
  // scheme, so the challenge names where the token goes.
  const challenge =
    source.kind === 'bearer' ? `Bearer ${realm}` : source.kind === 'header' ? `Token ${realm}, header=${quoted(source.name)}` : `Token ${realm}, cookie=${quoted(source.name)}`;
  const invalidChallenge = (why: string) => (source.kind === 'bearer' ? `${challenge}, error="invalid_token", error_description=${quoted(why)}` : challenge);
  // Dropped by headerKey (`_` as `-`), the form the forwarders compare visitor names in: a header configured as
  // X_Api_Token must not reach a CGI upstream as X-Api-Token or the other way round.
  const headerName = source.kind === 'header' ? source.name.toLowerCase() : '';
  const drop: readonly string[] | null = source.kind === 'bearer' ? DROP_AUTHORIZATION : source.kind === 'header' ? [headerKey(source.name)] : null;
  const count = outcomes(endpoint, deps);
  const use = deps.credentialUse;

  const tokensOf = (ctx: RequestContext): string | string[] | undefined => {
    const headers = ctx.req.headers;
    switch (source.kind) {
      case 'bearer':
        return credentialsOf(headers.authorization, 'bearer');
      case 'header': {
        const value = headers[headerName];
        return typeof value === 'string' && value.length > 0 ? value : undefined;
      }
      case 'cookie':
        return cookieValues(headers.cookie, source.name);
    }
  };

  const judge = (ctx: RequestContext, token: string): LiveToken | 'unknown' | 'expired' => {
    const live = tokens.get(tokenDigest(key, token));
    if (live === undefined) return 'unknown';
    return live.expiresAt <= now() ? 'expired' : live;
  };

  return {
    name: 'auth',
    run(ctx) {
      const given = tokensOf(ctx);
      if (given === undefined) {
        count.count('missing');
        return refuse(ctx, 'auth_required', challenge);
      }
      let verdict: LiveToken | 'unknown' | 'expired' = 'unknown';
      if (typeof given === 'string') verdict = judge(ctx, given);
      else {
        // A cookie name may occur more than once (other paths or domains); one live token among them is enough.
        for (const value of given) if (typeof (verdict = judge(ctx, value)) !== 'string') break;
      }
      if (typeof verdict === 'string') {
        count.count('invalid');
        const why = verdict === 'expired' ? 'the token has expired' : 'the token is not valid for this endpoint';
        return refuse(ctx, 'invalid_credentials', invalidChallenge(why), why);
      }
      count.count('ok');
      use?.token(verdict.id);
      if (source.kind === 'cookie') ctx.dropCookie = source.name;
      ctx.visitor = verdict.visitor;
      return admit(ctx, verdict.header, drop);
    },
  };
}

/** A mode this edge does not know (a newer control plane): every request answers 503, never served unauthenticated. */
function compileUnavailable(endpoint: EndpointConfig, auth: VisitorAuthConfig, deps: StageDeps): Stage {
  const count = outcomes(endpoint, deps);
  const detail = `this endpoint signs visitors in with ${auth.mode}, which this edge does not offer`;
  return {
    name: 'auth',
    run(ctx) {
      count.count('unavailable');
      return refuse(ctx, 'auth_unavailable', null, detail);
    },
  };
}

/** The stage with test hooks (a counting bcrypt, another failure budget, a resolver for provider names). */
export function authStage(options: AuthStageOptions = {}): StageFactory {
  return {
    id: 'auth',
    healthProbe: 'skips',
    failClosed: true,
    compile(endpoint, deps = DEFAULT_STAGE_DEPS) {
      const auth = endpoint.auth;
      if (auth === undefined || auth.mode === 'none') return null;
      switch (auth.mode) {
        case 'basic':
          return compileBasic(endpoint, auth, deps, options);
        case 'token':
          return compileToken(endpoint, auth, deps);
        case 'oauth':
        case 'oidc':
          return compileOAuth(endpoint, auth, deps, options);
        default:
          // A mode this edge does not know (a newer control plane): refused, never open.
          return compileUnavailable(endpoint, auth, deps);
      }
    },
  };
}

export const auth: StageFactory = authStage();
