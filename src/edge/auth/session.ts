// Login sessions and login attempts as signed cookies: what a visitor who logged in with an OAuth/OIDC provider
// carries, checked by one HMAC per request and never by a database or Redis (docs/architecture.md), on any edge.
//
// A value is `<kid>.<payload>.<mac>` (src/shared/signed-token.ts): the payload is base64url JSON, the MAC an
// HMAC-SHA256 over the purpose, the key id and the payload, under the key the id names as derived for the endpoint (so a value made for one endpoint
// verifies for no other). Keys rotate: the first configured key signs, every key verifies (EDGE_SESSION_KEYS); the
// key id picks the one key to try, so a check costs one HMAC however many keys are configured. The purpose (session
// or login) is in the MAC, so one kind of cookie is never read as the other.
// Values are signed, not encrypted: they hold nothing the visitor may not see (their own subject and e-mail), and
// the cookies are HttpOnly.
import { createHash, createHmac, randomBytes } from 'node:crypto';
import type { SecretBox } from '../../shared/secrets.ts';
import { openToken, signToken } from '../../shared/signed-token.ts';

/** The session cookie. `__Host-`: Secure, Path=/, no Domain, so it is bound to the one host (RFC 6265bis §4.1.3.2). */
export const SESSION_COOKIE = '__Host-edge_session';
/** The login-attempt cookie: state, nonce and PKCE verifier between the redirect to the provider and the callback. */
export const LOGIN_COOKIE = '__Host-edge_login';
/** How long a login attempt may take, from the redirect to the provider to the callback. */
export const LOGIN_TTL_SECONDS = 600;
/** The shortest secret EDGE_SESSION_KEYS accepts: 32 characters (as base64, 192 bits). */
export const MIN_SESSION_SECRET_LENGTH = 32;

type Purpose = 'session' | 'login';

interface SessionKey {
  id: string;
  key: Buffer;
}

/** The HMAC keys of sessions: the first signs, all verify. */
export class SessionKeys {
  private readonly signing: SessionKey;
  private readonly byId: Map<string, Buffer>;

  constructor(keys: readonly Buffer[] | readonly SessionKey[]) {
    if (keys.length === 0) throw new Error('SessionKeys needs at least one key');
    const all = keys.map((k) => (Buffer.isBuffer(k) ? { id: createHash('sha256').update(k).digest('base64url').slice(0, 8), key: k } : k));
    this.signing = all[0];
    this.byId = new Map(all.map((k) => [k.id, k.key]));
  }

  /**
   * The keys for one endpoint: each an HMAC of the endpoint's uuid under a configured key (HKDF-Expand's step, RFC
   * 5869 §2.3), ids kept. Made once per compile; a value signed with them verifies for this endpoint only.
   */
  forEndpoint(uuid: string): SessionKeys {
    const derived = [this.signing, ...[...this.byId].filter(([id]) => id !== this.signing.id).map(([id, key]) => ({ id, key }))].map(({ id, key }) => ({
      id,
      key: createHmac('sha256', key).update('edge-session-endpoint:').update(uuid).digest(),
    }));
    return new SessionKeys(derived);
  }

  /**
   * The keys from EDGE_SESSION_KEYS (comma-separated secrets, each stretched with SHA-256), or, when it is empty, one
   * key derived from EDGE_SECRET_KEY, which every node of a cluster shares already.
   */
  static fromSettings(secrets: string, box: SecretBox | undefined): SessionKeys {
    const list = parseSessionSecrets(secrets);
    if (list.length > 0) return new SessionKeys(list.map((s) => createHash('sha256').update('edge-session-key:').update(s).digest()));
    if (box === undefined) throw new Error('OAuth/OIDC sessions need EDGE_SESSION_KEYS or the edge secret key (EDGE_SECRET_KEY)');
    return new SessionKeys([box.derive('visitor-session')]);
  }

  /** The key a value's key id names, for openToken. */
  private readonly keyOf = (fields: readonly string[]): Buffer | undefined => this.byId.get(fields[0]);

  sign(purpose: Purpose, payload: unknown): string {
    const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
    return signToken(this.signing.key, purpose, [this.signing.id, body]);
  }

  /** The payload of a value signed for `purpose` under one of the keys, or undefined (unknown key, tampered, malformed). */
  open(purpose: Purpose, value: string): unknown {
    const fields = openToken(this.keyOf, purpose, value, 2);
    if (fields === null) return undefined;
    try {
      return JSON.parse(Buffer.from(fields[1], 'base64url').toString('utf8'));
    } catch {
      return undefined;
    }
  }
}

/** EDGE_SESSION_KEYS as a list: comma-separated, spaces around commas ignored. Throws on a secret that is too short. */
export function parseSessionSecrets(raw: string): string[] {
  const list = raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  for (const s of list) {
    if (s.length < MIN_SESSION_SECRET_LENGTH) throw new Error(`EDGE_SESSION_KEYS: each secret needs at least ${MIN_SESSION_SECRET_LENGTH} characters`);
  }
  return list;
}

/** What a session vouches for. Times are seconds since the epoch. */
export interface Session {
  /** The endpoint's id; the keys are the endpoint's too, so a session minted for one endpoint is refused on every other. */
  endpoint: number;
  provider: number;
  subject: string;
  /** The e-mail address the provider shared, or "" when it shared none or said it is not verified. */
  email: string;
  /**
   * Whether the provider said the e-mail is verified (`email_verified: true`). False when it said nothing, and for
   * sessions issued before this was recorded: an unknown verification is never taken as a verified one (RBAC maps
   * only verified e-mails to clients, docs/rbac.md). Absent: false.
   */
  emailVerified?: boolean;
  /** Random per login, so two logins of one person are two sessions (and a logout names one). */
  id: string;
  issuedAt: number;
  expiresAt: number;
}

export function newSessionId(): string {
  return randomBytes(16).toString('base64url');
}

export function sealSession(keys: SessionKeys, s: Session): string {
  return keys.sign('session', [s.endpoint, s.provider, s.subject, s.email, s.id, s.issuedAt, s.expiresAt, s.emailVerified === true ? 1 : 0]);
}

/**
 * A session cookie's value as signed, or undefined when it is not one of ours (expiry is the caller's check). Values
 * of 7 items were issued before the e-mail's verification was recorded: still valid, read as unverified.
 */
export function openSession(keys: SessionKeys, value: string): Session | undefined {
  const p = keys.open('session', value);
  if (!Array.isArray(p) || (p.length !== 7 && p.length !== 8)) return undefined;
  const [endpoint, provider, subject, email, id, issuedAt, expiresAt, verified = 0] = p as unknown[];
  if (typeof endpoint !== 'number' || typeof provider !== 'number' || typeof subject !== 'string' || typeof email !== 'string') return undefined;
  if (typeof id !== 'string' || typeof issuedAt !== 'number' || typeof expiresAt !== 'number' || (verified !== 0 && verified !== 1)) return undefined;
  return { endpoint, provider, subject, email, id, issuedAt, expiresAt, emailVerified: verified === 1 };
}

/** A login in progress: what the callback must find again (RFC 9700 §2.1: state or PKCE, nonce for OIDC). */
export interface LoginAttempt {
  endpoint: number;
  provider: number;
  state: string;
  /** OIDC only; "" for oauth2 providers, which issue no ID token. */
  nonce: string;
  /** The PKCE code_verifier (RFC 7636). */
  verifier: string;
  /** Where the visitor goes after the login: already sanitised (./return-to.ts). */
  returnTo: string;
  expiresAt: number;
}

export function sealLogin(keys: SessionKeys, a: LoginAttempt): string {
  return keys.sign('login', [a.endpoint, a.provider, a.state, a.nonce, a.verifier, a.returnTo, a.expiresAt]);
}

export function openLogin(keys: SessionKeys, value: string): LoginAttempt | undefined {
  const p = keys.open('login', value);
  if (!Array.isArray(p) || p.length !== 7) return undefined;
  const [endpoint, provider, state, nonce, verifier, returnTo, expiresAt] = p as unknown[];
  if (typeof endpoint !== 'number' || typeof provider !== 'number' || typeof state !== 'string' || typeof nonce !== 'string') return undefined;
  if (typeof verifier !== 'string' || typeof returnTo !== 'string' || typeof expiresAt !== 'number') return undefined;
  return { endpoint, provider, state, nonce, verifier, returnTo, expiresAt };
}

/** A Set-Cookie value for a `__Host-` cookie: Secure, HttpOnly, SameSite=Lax (sent on the provider's top-level redirect back), Path=/, no Domain. */
export function setCookie(name: string, value: string, maxAgeSeconds: number): string {
  return `${name}=${value}; Max-Age=${Math.max(0, Math.floor(maxAgeSeconds))}; Path=/; Secure; HttpOnly; SameSite=Lax`;
}

/** A Set-Cookie value that removes a cookie set by setCookie (same name and attributes, RFC 6265 §5.3 step 11). */
export function clearCookie(name: string): string {
  return `${name}=; Max-Age=0; Path=/; Secure; HttpOnly; SameSite=Lax`;
}
