// The edge as an OAuth 2.0 / OpenID Connect relying party, one client per provider of an endpoint, through
// openid-client (the certified relying-party library): discovery, the authorization URL with PKCE, state and nonce,
// the code exchange with ID token validation (issuer, audience, signature, nonce, expiry), userinfo.
//
// Every request to a provider (discovery, token, userinfo, its JWKS) goes through the address policy's fetch
// (../http/policy-fetch.ts) with a timeout and a bounded body. Discovery is done on first use and cached with the
// client, refreshed after DISCOVERY_MAX_AGE_MS and after any failed request to the provider (its endpoints may have
// moved); a failed discovery is retried at most every RETRY_AFTER_FAILURE_MS, so an outage is not turned into a flood.
import {
  allowInsecureRequests,
  authorizationCodeGrant,
  buildAuthorizationUrl,
  calculatePKCECodeChallenge,
  ClientError,
  ClientSecretBasic,
  ClientSecretPost,
  Configuration,
  customFetch,
  discovery,
  fetchProtectedResource,
  fetchUserInfo,
  randomNonce,
  randomPKCECodeVerifier,
  randomState,
  type ClientAuth,
  type CustomFetch,
  type ServerMetadata,
} from 'openid-client';
import type { LookupFunction } from 'node:net';
import type { OAuthProviderConfig } from '../../shared/snapshot.ts';
import { FetchRefusedError, policyFetch } from '../http/policy-fetch.ts';

/** A discovered configuration is used this long, then discovered again (endpoints and keys may move). */
export const DISCOVERY_MAX_AGE_MS = 3_600_000;
/** After a failed discovery, the next attempt waits this long; logins meanwhile get the same failure at once. */
const RETRY_AFTER_FAILURE_MS = 5_000;
/** The largest answer read from a provider (discovery documents and key sets are a few KiB). */
export const MAX_PROVIDER_RESPONSE_BYTES = 512 * 1024;

/** The provider could not be reached or answered with a server error: the visitor gets 503, not a login failure. */
export class ProviderUnavailableError extends Error {
  override name = 'ProviderUnavailableError';
  constructor(
    readonly provider: number,
    override readonly cause: unknown,
  ) {
    super(`provider ${provider} is unavailable: ${describe(cause)}`);
  }
}

/** The login itself failed (the provider refused the code, a check did not pass): the visitor may try again. */
export class LoginFailedError extends Error {
  override name = 'LoginFailedError';
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? `: ${describe(err.cause)}` : '';
  return `${err.message}${cause}`;
}

/** Whether a failure of openid-client is the provider's outage (a refused fetch, a timeout, a 5xx) rather than the login's. */
export function isOutage(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof FetchRefusedError) return true;
    if (e instanceof Response && e.status >= 500) return true;
    if (e instanceof ClientError && (e.code === 'OAUTH_TIMEOUT' || e.code === 'OAUTH_ABORT')) return true;
  }
  return false;
}

/** Who the provider vouched for. */
export interface Identity {
  subject: string;
  /** As the provider wrote it, or "" when it shared none. */
  email: string;
  /** The provider's email_verified; undefined when it said nothing. */
  emailVerified: boolean | undefined;
}

/** The start of a login: where to send the browser, and what the callback must check. */
export interface LoginStart {
  url: URL;
  state: string;
  nonce: string;
  verifier: string;
}

export interface ProviderClientOptions {
  allowPrivate: boolean;
  timeoutMs: number;
  now?: () => number;
  lookup?: LookupFunction;
}

/** One provider of one endpoint, with its client secret opened. */
export class ProviderClient {
  private current: { config: Configuration; at: number } | null = null;
  private pending: Promise<Configuration> | null = null;
  private failure: { at: number; err: unknown } | null = null;
  private readonly fetch: CustomFetch;
  private readonly now: () => number;

  constructor(
    readonly provider: OAuthProviderConfig,
    private readonly clientSecret: string,
    private readonly options: ProviderClientOptions,
  ) {
    this.fetch = policyFetch({ allowPrivate: options.allowPrivate, maxBytes: MAX_PROVIDER_RESPONSE_BYTES, lookup: options.lookup }) as CustomFetch;
    this.now = options.now ?? Date.now;
  }

  /** Plain http is accepted only where private addresses are (development: a provider on loopback). */
  private get insecureAllowed(): boolean {
    return this.options.allowPrivate;
  }

  /** The configuration to use now: discovered (oidc) or built from the explicit URLs (oauth2). */
  configuration(): Promise<Configuration> {
    const now = this.now();
    const current = this.current;
    if (current !== null && now - current.at < DISCOVERY_MAX_AGE_MS) return Promise.resolve(current.config);
    if (this.pending !== null) return this.pending;
    if (this.failure !== null && now - this.failure.at < RETRY_AFTER_FAILURE_MS) {
      // A stale configuration serves while the provider's discovery is failing; none at all is the outage.
      return current !== null ? Promise.resolve(current.config) : Promise.reject(this.failure.err);
    }
    const pending = this.build().then(
      (config) => {
        this.current = { config, at: this.now() };
        this.failure = null;
        this.pending = null;
        return config;
      },
      (err: unknown) => {
        const failure = new ProviderUnavailableError(this.provider.id, err);
        this.failure = { at: this.now(), err: failure };
        this.pending = null;
        if (current !== null) return current.config;
        throw failure;
      },
    );
    this.pending = pending;
    return pending;
  }

  /** After a failed request to the provider: discover again on the next login. */
  invalidate(): void {
    if (this.current !== null) this.current = { config: this.current.config, at: -Infinity };
  }

  private async build(): Promise<Configuration> {
    const p = this.provider;
    const timeout = this.options.timeoutMs / 1000;
    const insecure = this.insecureAllowed ? [allowInsecureRequests] : [];
    let config: Configuration;
    if (p.kind === 'oidc') {
      // Discovery first, with the client authentication chosen from what the provider supports.
      config = await discovery(new URL(p.issuer), p.client_id, undefined, undefined, { [customFetch]: this.fetch, timeout, execute: insecure });
      const auth = clientAuth(config.serverMetadata(), this.clientSecret);
      config = new Configuration(config.serverMetadata(), p.client_id, undefined, auth);
    } else {
      if (p.authorization_url === null || p.token_url === null || p.userinfo_url === null) throw new Error(`oauth2 provider ${p.id} lacks its endpoint URLs`);
      const server: ServerMetadata = { issuer: p.issuer, authorization_endpoint: p.authorization_url, token_endpoint: p.token_url, userinfo_endpoint: p.userinfo_url };
      // RFC 6749 §2.3.1: every server supports HTTP Basic for client passwords.
      config = new Configuration(server, p.client_id, undefined, ClientSecretBasic(this.clientSecret));
    }
    config[customFetch] = p.kind === 'oidc' ? this.fetch : withoutIdToken(this.fetch, p.token_url!);
    config.timeout = timeout;
    for (const execute of insecure) execute(config);
    return config;
  }

  /** The authorization request (RFC 6749 §4.1.1) with PKCE S256 (RFC 7636), state, and a nonce for OIDC. */
  async start(redirectUri: string): Promise<LoginStart> {
    const config = await this.configuration();
    const verifier = randomPKCECodeVerifier();
    const state = randomState();
    const nonce = this.provider.kind === 'oidc' ? randomNonce() : '';
    const params: Record<string, string> = {
      redirect_uri: redirectUri,
      response_type: 'code',
      code_challenge: await calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
    };
    if (this.provider.scopes.length > 0) params.scope = this.provider.scopes.join(' ');
    if (nonce !== '') params.nonce = nonce;
    return { url: buildAuthorizationUrl(config, params), state, nonce, verifier };
  }

  /**
   * The callback: the authorization response checked (state, the issuer parameter of RFC 9207 where the provider
   * sends it), the code exchanged with the PKCE verifier, the ID token validated (OIDC), the identity read.
   * `callbackUrl` is the redirect URI with the callback's query, so the redirect_uri sent is the one registered.
   */
  async complete(callbackUrl: URL, expected: { state: string; nonce: string; verifier: string }): Promise<Identity> {
    const config = await this.configuration();
    try {
      const oidc = this.provider.kind === 'oidc';
      const tokens = await authorizationCodeGrant(config, callbackUrl, {
        pkceCodeVerifier: expected.verifier,
        expectedState: expected.state,
        ...(oidc ? { expectedNonce: expected.nonce, idTokenExpected: true } : {}),
      });
      if (oidc) {
        const claims = tokens.claims();
        if (claims === undefined) throw new LoginFailedError('the provider sent no ID token');
        let identity = identityFrom(claims);
        // OIDC Core §5.4: with the code flow, scope claims (email) are usually at the userinfo endpoint only.
        if (identity.email === '' && config.serverMetadata().userinfo_endpoint !== undefined) {
          const info = await fetchUserInfo(config, tokens.access_token, claims.sub);
          identity = { subject: claims.sub, email: stringClaim(info.email), emailVerified: booleanClaim(info.email_verified) };
        }
        return identity;
      }
      const res = await fetchProtectedResource(config, tokens.access_token, new URL(this.provider.userinfo_url!), 'GET');
      if (res.status >= 500) throw new ProviderUnavailableError(this.provider.id, new Error(`the userinfo endpoint answered ${res.status}`));
      if (res.status !== 200) throw new LoginFailedError(`the provider's userinfo endpoint answered ${res.status}`);
      let body: unknown;
      try {
        body = await res.json();
      } catch {
        throw new LoginFailedError("the provider's userinfo answer is not JSON");
      }
      if (typeof body !== 'object' || body === null) throw new LoginFailedError("the provider's userinfo answer is not a JSON object");
      return identityFrom(body as Record<string, unknown>);
    } catch (err) {
      if (err instanceof LoginFailedError || err instanceof ProviderUnavailableError) throw err;
      if (isOutage(err)) {
        this.invalidate();
        throw new ProviderUnavailableError(this.provider.id, err);
      }
      throw new LoginFailedError(describe(err));
    }
  }
}

/**
 * An oauth2 provider's identity comes from its userinfo answer alone. An ID token it sends along (an OpenID provider
 * configured as plain OAuth 2.0) is dropped from the token answer: without discovery the edge has no key set to
 * check it with, and an unchecked token must not be read.
 */
function withoutIdToken(fetch: CustomFetch, tokenUrl: string): CustomFetch {
  const token = new URL(tokenUrl).href;
  return async (url, init) => {
    const res = await fetch(url, init);
    if (res.status !== 200 || new URL(url).href !== token) return res;
    const text = await res.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return new Response(text, { status: res.status, headers: res.headers });
    }
    if (typeof body === 'object' && body !== null && 'id_token' in body) delete (body as { id_token?: unknown }).id_token;
    return new Response(JSON.stringify(body), { status: res.status, headers: res.headers });
  };
}

/**
 * RFC 8414 §2: a server that lists no methods supports client_secret_basic. Basic is preferred when listed (RFC 6749
 * §2.3.1 makes it the one every server supports), else client_secret_post.
 */
function clientAuth(server: ServerMetadata, secret: string): ClientAuth {
  const methods = server.token_endpoint_auth_methods_supported;
  if (methods === undefined || methods.includes('client_secret_basic') || !methods.includes('client_secret_post')) return ClientSecretBasic(secret);
  return ClientSecretPost(secret);
}

function stringClaim(v: unknown): string {
  return typeof v === 'string' ? v.trim() : '';
}

function booleanClaim(v: unknown): boolean | undefined {
  // Some providers send the flag as a string.
  if (v === true || v === 'true') return true;
  if (v === false || v === 'false') return false;
  return undefined;
}

/** The identity in ID token claims or a userinfo answer: `sub`, else an oauth2 provider's `id` (GitHub's, numeric). */
export function identityFrom(claims: Record<string, unknown>): Identity {
  const raw = claims.sub ?? claims.id;
  const subject = typeof raw === 'string' ? raw : typeof raw === 'number' && Number.isFinite(raw) ? String(raw) : '';
  if (subject === '') throw new LoginFailedError('the provider named no subject (sub) for the account');
  return { subject, email: stringClaim(claims.email), emailVerified: booleanClaim(claims.email_verified) };
}

/**
 * Whether an identity may log in under a provider's allow-lists: both empty allows anyone the provider vouches for;
 * otherwise the e-mail, which the provider must not call unverified, must be listed or be at a listed domain
 * (exactly: a subdomain is not the domain). Null when allowed, else why not.
 */
export function refusalOf(identity: Identity, emails: ReadonlySet<string>, domains: ReadonlySet<string>): string | null {
  if (emails.size === 0 && domains.size === 0) return null;
  if (identity.email === '') return 'the provider did not share an e-mail address, and this endpoint admits listed addresses only';
  if (identity.emailVerified === false) return `the provider says ${identity.email} is not verified`;
  const email = identity.email.toLowerCase();
  if (emails.has(email)) return null;
  const at = email.lastIndexOf('@');
  if (at !== -1 && domains.has(email.slice(at + 1))) return null;
  return `${identity.email} may not sign in to this endpoint`;
}
