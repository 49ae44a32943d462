// The `auth` stage's modes oauth and oidc: visitors log in with one of the endpoint's identity providers and then
// ride a signed session cookie (./session.ts), checked by one HMAC (or a cache hit) per request.
//
// Reserved paths on the endpoint's host, answered by the edge and never forwarded: /.edge/auth/login (?provider,
// ?return_to), /.edge/auth/callback (the redirect URI registered at the provider), /.edge/auth/logout; the whole
// /.edge/auth/ prefix is the edge's. A request without a valid session: a browser (GET or HEAD accepting text/html,
// not an upgrade) is sent to log in; anything else gets 401 login_required as JSON, never a redirect, so API clients
// and WebSockets fail plainly. Logins need HTTPS (the cookies are __Host-): on plain HTTP a browser is first
// redirected to HTTPS. docs/visitor-auth.md describes the flow.
import type { LookupFunction } from 'node:net';
import { createHash } from 'node:crypto';
import type { ErrorCode } from '../../shared/errors.ts';
import type { EndpointConfig, OAuthProviderConfig, VisitorAuthConfig } from '../../shared/snapshot.ts';
import { asHeaderValue } from '../http/credentials.ts';
import { asksForHtml } from '../http/negotiate.ts';
import { sendEdgeError } from '../http/pages.ts';
import { cookieValues } from '../match/cookies.ts';
import type { AuthOutcome } from '../metrics.ts';
import { LazyLru } from '../pipeline/lazy-cache.ts';
import { clockOf, traceIdOfRequest, type RequestContext, type Stage, type StageDeps, type Verdict, type VisitorIdentity } from '../pipeline/stage.ts';
import { httpsLocation } from '../stages/https-redirect.ts';
import { AUTH_PREFIX, CALLBACK_PATH, LOGIN_FLOW_HEADERS, LOGIN_PATH, LOGOUT_PATH, loginHref, loginPage, sendLoginPage } from './login-page.ts';
import { LoginFailedError, ProviderClient, ProviderUnavailableError, refusalOf } from './oidc-client.ts';
import { safeReturnTo } from './return-to.ts';
import {
  clearCookie,
  LOGIN_COOKIE,
  LOGIN_TTL_SECONDS,
  newSessionId,
  openLogin,
  openSession,
  sealLogin,
  sealSession,
  SESSION_COOKIE,
  SessionKeys,
  setCookie,
  type LoginAttempt,
  type Session,
} from './session.ts';

/** The fields the agent receives naming who logged in (edge-owned: visitor copies are stripped in every spelling). */
export const AUTH_USER_HEADER = 'x-edge-auth-user';
export const AUTH_EMAIL_HEADER = 'x-edge-auth-email';
export const AUTH_PROVIDER_HEADER = 'x-edge-auth-provider';

/** The platform's session lifetime when the endpoint sets none (EDGE_SESSION_TTL_SECONDS's default). */
export const DEFAULT_SESSION_TTL_SECONDS = 86_400;
/** Verified session cookies kept per endpoint (each a few hundred bytes). */
export const SESSION_CACHE_SIZE = 10_000;
/** Sessions logged out on this edge remembered per endpoint until they expire. */
const LOGGED_OUT_SIZE = 10_000;
/** The longest session lifetime the API allows (366 days): the logged-out list's default entry lifetime. */
const MAX_SESSION_TTL_MS = 31_622_400_000;
/** How often a provider outage is logged per endpoint. */
const LOG_EVERY_MS = 60_000;

/** Never forwarded: the edge's own cookies, whatever else the visitor sends. */
const DROP_COOKIES: readonly string[] = [SESSION_COOKIE, LOGIN_COOKIE];

export interface OAuthStageOptions {
  /** How provider host names are resolved (a test's resolver); still checked by the address policy. */
  lookup?: LookupFunction;
  /** Verified session cookies kept (SESSION_CACHE_SIZE); a benchmark sets 2 to measure the uncached check. */
  sessionCacheSize?: number;
}

/** A session judged valid on this compile of the endpoint, with the fields it sets. */
interface Admitted {
  /** The session's id (a logout names it). */
  id: string;
  /** ms since the epoch from which the session is no longer accepted. */
  until: number;
  user: string;
  email: string;
  provider: string;
  /** Who the session admits, for the rbac stage: the e-mail only when the provider said it is verified. */
  visitor: VisitorIdentity;
}

/**
 * Verified sessions by cookie value, at most `max`: two generations of Maps, the current one filled until it holds
 * half, then made the previous one (whose entries are dropped at the next turn unless used again, which moves them
 * to the current one). A hit is one or two Map lookups with no per-request bookkeeping, unlike an LRU list.
 */
export class SessionCache<V> {
  private current = new Map<string, V>();
  private previous = new Map<string, V>();
  constructor(private readonly max: number) {}

  get(key: string): V | undefined {
    const hit = this.current.get(key);
    if (hit !== undefined) return hit;
    const old = this.previous.get(key);
    if (old !== undefined) this.set(key, old);
    return old;
  }

  set(key: string, value: V): void {
    if (this.current.size >= this.max / 2) {
      this.previous = this.current;
      this.current = new Map();
    }
    this.current.set(key, value);
  }

  get size(): number {
    return this.current.size + this.previous.size;
  }
}

/** What lives across recompiles: provider clients (discovery caches) while the providers are unchanged. */
interface ProviderState {
  clients: Map<number, ProviderClient>;
  loggedAt: number;
}

function providersChecksum(providers: readonly OAuthProviderConfig[], allowPrivate: boolean, timeoutMs: number): string {
  return createHash('sha256').update(JSON.stringify([providers, allowPrivate, timeoutMs])).digest('base64url');
}

/** Whether the request comes from a browser that can follow a login: a page load, not an API call or an upgrade. */
function isBrowserNavigation(ctx: RequestContext): boolean {
  if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return false;
  const req = ctx.req;
  if (req.headers.upgrade !== undefined || (req as { upgrade?: boolean }).upgrade === true) return false;
  return asksForHtml(req.headers.accept);
}

function queryParam(query: string, name: string): string | null {
  return query === '' ? null : new URLSearchParams(query).get(name);
}

export function compileOAuth(endpoint: EndpointConfig, auth: VisitorAuthConfig, deps: StageDeps, options: OAuthStageOptions = {}): Stage {
  const uuid = endpoint.uuid;
  const keys = (deps.sessions?.keys ?? SessionKeys.fromSettings('', deps.secrets)).forEndpoint(uuid);
  const endpointId = endpoint.id;
  const ttlSeconds = auth.session_ttl_seconds ?? deps.sessions?.ttlSeconds ?? DEFAULT_SESSION_TTL_SECONDS;
  const now = clockOf(deps);
  const allowPrivate = deps.allowPrivate ?? false;
  const timeoutMs = deps.jwks?.timeoutMs ?? 5_000;
  const providers = auth.providers ?? [];
  const byId = new Map(providers.map((p) => [p.id, p]));
  const allowedRedirects = new Set(auth.allowed_redirects ?? []);
  const lists = new Map(providers.map((p) => [p.id, { emails: new Set(p.allowed_emails), domains: new Set(p.allowed_domains) }]));

  const makeClients = (): ProviderState => {
    if (providers.length > 0 && deps.secrets === undefined) throw new Error('OAuth/OIDC providers need the edge secret key (EDGE_SECRET_KEY) to open their client secrets');
    // A secret sealed under another key fails here: the config does not compile and the previous one stays in force.
    const clients = new Map(providers.map((p) => [p.id, new ProviderClient(p, deps.secrets!.open(p.client_secret_sealed), { allowPrivate, timeoutMs, now, lookup: options.lookup })]));
    return { clients, loggedAt: -Infinity };
  };
  const version = providersChecksum(providers, allowPrivate, timeoutMs);
  const state = deps.memory ? deps.memory.keep('auth:oauth', uuid, version, makeClients) : makeClients();
  // Logouts on this edge, each until its session would have expired (set per entry): a copy of the cookie is
  // refused here from then on. Kept whatever else changes, so a new lifetime does not revive logged-out sessions.
  const makeLoggedOut = () => new LazyLru<string, true>({ max: LOGGED_OUT_SIZE, ttl: MAX_SESSION_TTL_MS });
  const loggedOut = deps.memory ? deps.memory.keep('auth:logged-out', uuid, 'v1', makeLoggedOut) : makeLoggedOut();
  // Judged against this compile's providers and allow-lists: a new snapshot starts it afresh.
  const admitted = new SessionCache<Admitted>(options.sessionCacheSize ?? SESSION_CACHE_SIZE);
  const count = (outcome: AuthOutcome) => deps.authOutcome?.(uuid, 'auth', outcome);
  const challenge = `Session realm="${endpoint.hostname.replace(/["\\]/g, '')}"`;

  /** The session a cookie value carries, if it is valid for this endpoint now; cached by the value. */
  const judge = (value: string, t: number): Admitted | undefined => {
    let hit = admitted.get(value);
    if (hit === undefined) {
      const session = openSession(keys, value);
      if (session === undefined || session.endpoint !== endpointId) return undefined;
      // The provider must still be offered; the allow-lists as they are now (an address removed stops at once).
      const provider = byId.get(session.provider);
      const list = lists.get(session.provider);
      if (provider === undefined || list === undefined) return undefined;
      if (refusalOf({ subject: session.subject, email: session.email, emailVerified: undefined }, list.emails, list.domains) !== null) return undefined;
      // A shorter session_ttl_seconds applies to sessions issued before it too.
      const until = Math.min(session.expiresAt, session.issuedAt + ttlSeconds) * 1000;
      const visitor: VisitorIdentity = {
        kind: 'session',
        provider: String(session.provider),
        subject: session.subject,
        email: session.emailVerified === true && session.email !== '' ? session.email : null,
      };
      hit = {
        id: session.id,
        until,
        user: asHeaderValue(session.subject),
        email: session.email === '' ? '' : asHeaderValue(session.email),
        provider: String(session.provider),
        visitor: Object.freeze(visitor),
      };
      admitted.set(value, hit);
    }
    if (hit.until <= t || loggedOut.has(hit.id)) return undefined;
    return hit;
  };

  const sessionOf = (ctx: RequestContext): Admitted | undefined => {
    const values = cookieValues(ctx.req.headers.cookie, SESSION_COOKIE);
    if (values === undefined) return undefined;
    const t = now();
    for (const value of values) {
      const hit = judge(value, t);
      if (hit !== undefined) return hit;
    }
    return undefined;
  };

  const admit = (ctx: RequestContext, a: Admitted): 'next' => {
    count('ok');
    const h = ctx.upstreamHeaders;
    h[AUTH_USER_HEADER] = a.user;
    if (a.email !== '') h[AUTH_EMAIL_HEADER] = a.email;
    h[AUTH_PROVIDER_HEADER] = a.provider;
    ctx.visitor = a.visitor;
    ctx.dropCookie = DROP_COOKIES;
    return 'next';
  };

  const target = (ctx: RequestContext) => (ctx.query ? `${ctx.path}?${ctx.query}` : ctx.path);
  const redirectUri = (ctx: RequestContext) => httpsLocation(ctx.host, deps.publicHttpsPort(), CALLBACK_PATH);

  const redirect = (ctx: RequestContext, location: string, cookies?: string[]): 'done' => {
    const res = ctx.res;
    const body = ctx.method === 'HEAD' ? '' : `Redirecting to ${location}\n`;
    const headers: Record<string, string | string[] | number> = { ...LOGIN_FLOW_HEADERS, location, 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body) };
    if (cookies !== undefined) headers['set-cookie'] = cookies;
    // A body the visitor sent is not read: closing after the answer keeps it from being parsed as a request.
    res.shouldKeepAlive = ctx.req.headers['content-length'] === undefined && ctx.req.headers['transfer-encoding'] === undefined;
    res.writeHead(302, headers);
    res.end(body);
    return 'done';
  };

  const refuse = (ctx: RequestContext, code: ErrorCode, outcome: AuthOutcome, detail?: string, cookies?: string[]): 'done' => {
    count(outcome);
    if (cookies !== undefined) ctx.res.setHeader('set-cookie', cookies);
    for (const [name, value] of Object.entries(LOGIN_FLOW_HEADERS)) ctx.res.setHeader(name, value);
    sendEdgeError(ctx.res, code, ctx.req.headers.accept, detail);
    return 'done';
  };

  const unavailable = (ctx: RequestContext, err: unknown, cookies?: string[]): 'done' => {
    const t = now();
    if (t - state.loggedAt >= LOG_EVERY_MS) {
      state.loggedAt = t;
      deps.logger?.warn({ err, endpoint: uuid, trace_id: traceIdOfRequest(ctx) }, 'OAuth/OIDC login unavailable: the identity provider could not be reached; answering 503');
    }
    const provider = err instanceof ProviderUnavailableError ? byId.get(err.provider)?.name : undefined;
    return refuse(ctx, 'auth_unavailable', 'unavailable', `the identity provider${provider ? ` ${provider}` : ''} could not be reached; try again shortly`, cookies);
  };

  /** Sends the browser to the provider, with the attempt in the login cookie. */
  const startLogin = (ctx: RequestContext, provider: OAuthProviderConfig, returnTo: string): Promise<Verdict> => {
    const client = state.clients.get(provider.id)!;
    return client.start(redirectUri(ctx)).then(
      (start) => {
        count('missing');
        const attempt: LoginAttempt = {
          endpoint: endpointId,
          provider: provider.id,
          state: start.state,
          nonce: start.nonce,
          verifier: start.verifier,
          returnTo,
          expiresAt: Math.floor(now() / 1000) + LOGIN_TTL_SECONDS,
        };
        return redirect(ctx, start.url.href, [setCookie(LOGIN_COOKIE, sealLogin(keys, attempt), LOGIN_TTL_SECONDS)]);
      },
      (err: unknown) => unavailable(ctx, err),
    );
  };

  /** No valid session: a browser is sent to log in (over HTTPS first); anything else is refused plainly. */
  const unauthenticated = (ctx: RequestContext): Verdict | Promise<Verdict> => {
    if (!isBrowserNavigation(ctx)) {
      count('missing');
      ctx.res.setHeader('www-authenticate', challenge);
      // JSON whatever the Accept: a client that is not a browser reads the code, and is never redirected.
      sendEdgeError(ctx.res, 'login_required', 'application/json', `sign in with a browser at ${httpsLocation(ctx.host, deps.publicHttpsPort(), LOGIN_PATH)}`);
      return 'done';
    }
    if (!ctx.secure) {
      count('missing');
      return redirect(ctx, httpsLocation(ctx.host, deps.publicHttpsPort(), target(ctx)));
    }
    if (providers.length === 0) return refuse(ctx, 'auth_unavailable', 'unavailable', 'no identity provider is enabled for this endpoint');
    const returnTo = target(ctx);
    if (providers.length === 1) return startLogin(ctx, providers[0], returnTo);
    count('missing');
    return redirect(ctx, loginHref(returnTo));
  };

  /** /.edge/auth/login: the provider asked for, the only one, or the choice. */
  const login = (ctx: RequestContext): Verdict | Promise<Verdict> => {
    const returnTo = safeReturnTo(queryParam(ctx.query, 'return_to'), allowedRedirects);
    const asked = queryParam(ctx.query, 'provider');
    if (asked !== null) {
      const provider = /^[1-9][0-9]{0,18}$/.test(asked) ? byId.get(Number(asked)) : undefined;
      if (provider === undefined) return refuse(ctx, 'login_failed', 'invalid', `this endpoint offers no provider ${JSON.stringify(asked.slice(0, 40))}`);
      return startLogin(ctx, provider, returnTo);
    }
    if (providers.length === 0) return refuse(ctx, 'auth_unavailable', 'unavailable', 'no identity provider is enabled for this endpoint');
    if (providers.length === 1) return startLogin(ctx, providers[0], returnTo);
    count('missing');
    sendLoginPage(ctx.res, loginPage(ctx.host, providers, returnTo), ctx.method === 'HEAD');
    return 'done';
  };

  /** The login attempt the browser's cookie carries for this endpoint, if any is valid now. */
  const attemptOf = (ctx: RequestContext): LoginAttempt | undefined => {
    const values = cookieValues(ctx.req.headers.cookie, LOGIN_COOKIE);
    if (values === undefined) return undefined;
    const t = now() / 1000;
    for (const value of values) {
      const a = openLogin(keys, value);
      if (a !== undefined && a.endpoint === endpointId && a.expiresAt > t) return a;
    }
    return undefined;
  };

  /** /.edge/auth/callback: the provider's answer checked against the attempt, the session minted. */
  const callback = (ctx: RequestContext): Verdict | Promise<Verdict> => {
    // The attempt is over whatever happens now: a second use of the same callback finds no cookie.
    const spent = clearCookie(LOGIN_COOKIE);
    const attempt = attemptOf(ctx);
    if (attempt === undefined) {
      return refuse(ctx, 'login_failed', 'invalid', `no login is in progress in this browser for this endpoint (it expires after ${LOGIN_TTL_SECONDS / 60} minutes); start again at ${LOGIN_PATH}`, [spent]);
    }
    const provider = byId.get(attempt.provider);
    if (provider === undefined) return refuse(ctx, 'login_failed', 'invalid', 'the provider this login started with is no longer offered by this endpoint', [spent]);
    const client = state.clients.get(provider.id)!;
    const url = new URL(ctx.query ? `${redirectUri(ctx)}?${ctx.query}` : redirectUri(ctx));
    return client.complete(url, attempt).then(
      (identity) => {
        const list = lists.get(provider.id)!;
        const why = refusalOf(identity, list.emails, list.domains);
        if (why !== null) return refuse(ctx, 'login_forbidden', 'invalid', why, [spent]);
        const issuedAt = Math.floor(now() / 1000);
        const session: Session = {
          endpoint: endpointId,
          provider: provider.id,
          subject: identity.subject,
          // An address the provider calls unverified is not vouched for.
          email: identity.emailVerified === false ? '' : identity.email,
          // Recorded, so that "the provider said nothing" is never read as verified (RBAC's e-mail mapping).
          emailVerified: identity.emailVerified === true,
          id: newSessionId(),
          issuedAt,
          expiresAt: issuedAt + ttlSeconds,
        };
        count('ok');
        return redirect(ctx, safeReturnTo(attempt.returnTo, allowedRedirects), [spent, setCookie(SESSION_COOKIE, sealSession(keys, session), ttlSeconds)]);
      },
      (err: unknown) => {
        if (err instanceof LoginFailedError) return refuse(ctx, 'login_failed', 'invalid', `the login with ${provider.name} failed: ${err.message}`, [spent]);
        return unavailable(ctx, err, [spent]);
      },
    );
  };

  /** /.edge/auth/logout: the cookies cleared, the session refused on this edge from now on. */
  const logout = (ctx: RequestContext): 'done' => {
    const current = sessionOf(ctx);
    if (current !== undefined) {
      const left = current.until - now();
      if (left > 0) loggedOut.set(current.id, true, { ttl: left });
    }
    count('ok');
    const returnTo = safeReturnTo(queryParam(ctx.query, 'return_to'), allowedRedirects);
    return redirect(ctx, returnTo, [clearCookie(SESSION_COOKIE), clearCookie(LOGIN_COOKIE)]);
  };

  const reserved = (ctx: RequestContext): Verdict | Promise<Verdict> => {
    const path = ctx.path;
    const known = path === LOGIN_PATH || path === CALLBACK_PATH || path === LOGOUT_PATH;
    if (!known) return refuse(ctx, 'route_not_found', 'invalid', `${AUTH_PREFIX}/ is reserved for the edge's login (login, callback, logout)`);
    const methods = path === LOGOUT_PATH ? ['GET', 'HEAD', 'POST'] : ['GET', 'HEAD'];
    if (!methods.includes(ctx.method)) {
      ctx.res.setHeader('allow', methods.join(', '));
      return refuse(ctx, 'method_not_allowed', 'invalid', `${path} accepts ${methods.join(', ')}`);
    }
    // The cookies are __Host- (Secure): nothing of the flow works over plain HTTP.
    if (!ctx.secure) return redirect(ctx, httpsLocation(ctx.host, deps.publicHttpsPort(), target(ctx)));
    if (path === LOGIN_PATH) return login(ctx);
    if (path === CALLBACK_PATH) return callback(ctx);
    return logout(ctx);
  };

  return {
    name: 'auth',
    run(ctx): Verdict | Promise<Verdict> {
      const path = ctx.path;
      if (path.startsWith(AUTH_PREFIX) && (path.length === AUTH_PREFIX.length || path.charCodeAt(AUTH_PREFIX.length) === 47 /* / */)) return reserved(ctx);
      const hit = sessionOf(ctx);
      if (hit !== undefined) return admit(ctx, hit);
      return unauthenticated(ctx);
    },
  };
}

/** Who a valid login session names (the registration pages link it to an RBAC client, src/edge/stages/register.ts). */
export interface SessionIdentity {
  /** The endpoint's provider id. */
  provider: number;
  subject: string;
  /** The verified e-mail, or "" when the provider vouched for none. */
  email: string;
}

/**
 * Reads the login session of a request's Cookie field for an endpoint in mode oauth/oidc, judged as the auth stage
 * judges it (this endpoint's keys, a provider still offered and its allow-lists, the lifetime, logouts on this
 * edge), for stages that run before `auth`. Built once per compile; each call is one HMAC per cookie value.
 */
export function sessionReader(endpoint: EndpointConfig, deps: StageDeps): (cookie: string | string[] | undefined) => SessionIdentity | undefined {
  const auth = endpoint.auth;
  if (auth === undefined || (auth.mode !== 'oauth' && auth.mode !== 'oidc')) return () => undefined;
  const now = clockOf(deps);
  const keys = (deps.sessions?.keys ?? SessionKeys.fromSettings('', deps.secrets)).forEndpoint(endpoint.uuid);
  const ttlSeconds = auth.session_ttl_seconds ?? deps.sessions?.ttlSeconds ?? DEFAULT_SESSION_TTL_SECONDS;
  const lists = new Map((auth.providers ?? []).map((p) => [p.id, { emails: new Set(p.allowed_emails), domains: new Set(p.allowed_domains) }]));
  // The auth stage's list (same stage key and version), so a logout on this edge counts here too.
  const loggedOut = deps.memory?.keep('auth:logged-out', endpoint.uuid, 'v1', () => new LazyLru<string, true>({ max: LOGGED_OUT_SIZE, ttl: MAX_SESSION_TTL_MS }));
  return (cookie) => {
    const values = cookieValues(cookie, SESSION_COOKIE);
    if (values === undefined) return undefined;
    const t = now();
    for (const value of values) {
      const s = openSession(keys, value);
      if (s === undefined || s.endpoint !== endpoint.id) continue;
      const list = lists.get(s.provider);
      if (list === undefined || refusalOf({ subject: s.subject, email: s.email, emailVerified: undefined }, list.emails, list.domains) !== null) continue;
      if (Math.min(s.expiresAt, s.issuedAt + ttlSeconds) * 1000 <= t || loggedOut?.has(s.id) === true) continue;
      // Only what the provider said is verified (sessions record it; older ones count as unverified).
      return { provider: s.provider, subject: s.subject, email: s.emailVerified === true ? s.email : '' };
    }
    return undefined;
  };
}
