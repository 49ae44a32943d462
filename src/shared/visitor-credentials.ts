// Visitor credentials as control and edge both handle them: the keyed token digest, the mode GET settings reports,
// and which header names a JWT claim may be written to. One module, so the side that stores and the side that checks agree.
import { createHmac } from 'node:crypto';
import type { SecretBox } from './secrets.ts';
import type { TokenSource, VisitorAuthMode } from './snapshot.ts';

/** The SecretBox.derive purpose of the token digest key. Changing it invalidates every stored token digest. */
export const VISITOR_TOKEN_KEY_PURPOSE = 'visitor-token-digest';

/** The key tokens are digested under, shared by every node through EDGE_SECRET_KEY. */
export function visitorTokenKey(box: SecretBox): Buffer {
  return box.derive(VISITOR_TOKEN_KEY_PURPOSE);
}

/**
 * HMAC-SHA256 of a visitor token, base64url. Keyed so that a database or Redis dump is not a lookup table for
 * guessable tokens; fast, unlike bcrypt, because the edge computes it on every request that carries a token.
 */
export function tokenDigest(key: Buffer, token: string): string {
  return createHmac('sha256', key).update(token, 'utf8').digest('base64url');
}

/** bcrypt's cost floor for basic users (OWASP's minimum); the API hashes at this cost or more. */
export const BCRYPT_MIN_COST = 10;
/** bcrypt reads at most 72 bytes of a password; longer ones are refused rather than silently truncated. */
export const BCRYPT_MAX_PASSWORD_BYTES = 72;

/** What GET …/settings reports as `mode` (SPEC.md "Endpoint auth settings"). */
export type ReportedAuthMode = 'none' | 'jwt' | 'basic' | 'token' | 'header' | 'cookie' | 'sso';

/**
 * The reported mode: the main mode, except that `none` with the JWT layer on reads `jwt`, token mode names where
 * the token is read from (`header`, `cookie`; `token` for Authorization: Bearer), and both login modes read `sso`.
 */
export function reportedAuthMode(mode: VisitorAuthMode, tokenSource: TokenSource, jwtEnabled: boolean): ReportedAuthMode {
  switch (mode) {
    case 'none':
      return jwtEnabled ? 'jwt' : 'none';
    case 'basic':
      return 'basic';
    case 'token':
      return tokenSource.kind === 'bearer' ? 'token' : tokenSource.kind;
    case 'oauth':
    case 'oidc':
      return 'sso';
  }
}

/** RFC 9110 §5.1: a field name is a token (§5.6.2). */
const FIELD_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

export function isFieldName(name: string): boolean {
  return FIELD_NAME.test(name);
}

/**
 * Headers a claim may never be written to: hop-by-hop (RFC 9110 §7.6.1), framing and routing (Host,
 * Content-Length, Transfer-Encoding), the visitor's credentials (Authorization, Cookie: the agent would see a
 * forged credential), and the ones the edge sets itself (forwarding, X-Edge-*), which a claim must not spoof.
 */
const RESERVED_HEADERS = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
  'authorization',
  'cookie',
  'forwarded',
  'x-real-ip',
]);

/** Why a header name cannot carry a claim, or null when it can. `name` is as the user sent it. */
export function claimHeaderRefusal(name: string): string | null {
  if (!isFieldName(name)) return `"${name}" is not a valid header name`;
  // Underscores count as dashes: CGI-style servers and some proxies fold X_Forwarded_For onto X-Forwarded-For.
  const lower = name.toLowerCase().replaceAll('_', '-');
  if (RESERVED_HEADERS.has(lower) || lower.startsWith('x-forwarded-') || lower.startsWith('x-edge-')) {
    return `"${name}" is a header the edge manages and cannot carry a claim`;
  }
  return null;
}
