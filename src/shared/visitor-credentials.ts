// Visitor credentials as control and edge both handle them: the keyed token digest, the mode GET settings reports,
// and which header names a JWT claim may be written to. One module, so the side that stores and the side that checks agree.
import { createHmac } from 'node:crypto';
import { headerKey, isEdgeOwnedHeader } from './edge-headers.ts';
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
/**
 * The highest bcrypt cost a password_hash may carry. Every edge runs a visitor's first check of a credential at the
 * hash's cost, so an imported cost-31 hash would hold a pool thread for hours; 15 is 32 times the API's own cost 10.
 */
export const BCRYPT_MAX_IMPORTED_COST = 15;

/**
 * A bcrypt hash in the modular crypt format: the variant ($2a$, $2b$; $2y$ is PHP's name for $2b$), a two-digit cost,
 * then 22 characters of salt and 31 of hash in bcrypt's base64 alphabet. The API and configuration as code both test
 * hashes with it (the cost range with bcryptHashRefusal).
 */
export const BCRYPT_HASH = /^\$2[aby]\$(\d\d)\$[./A-Za-z0-9]{53}$/;

/** BCRYPT_HASH narrowed to the costs allowed (BCRYPT_MIN_COST..BCRYPT_MAX_IMPORTED_COST), as a JSON Schema pattern. */
export const IMPORTABLE_BCRYPT_HASH_PATTERN = '^\\$2[aby]\\$1[0-5]\\$[./A-Za-z0-9]{53}$';

/** Why a password_hash cannot be stored, or null when it is a bcrypt hash of an allowed cost. */
export function bcryptHashRefusal(hash: string): string | null {
  const match = BCRYPT_HASH.exec(hash);
  if (!match) return 'not a bcrypt hash: $2a$, $2b$ or $2y$, a two-digit cost, then 53 characters of salt and hash (./A-Za-z0-9)';
  const cost = Number(match[1]);
  if (cost < BCRYPT_MIN_COST || cost > BCRYPT_MAX_IMPORTED_COST) return `cost ${cost}: bcrypt cost must be between ${BCRYPT_MIN_COST} and ${BCRYPT_MAX_IMPORTED_COST}`;
  return null;
}

/** What GET …/settings reports as `mode` (docs/api.md "Endpoint auth settings"). */
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

/**
 * Where token mode reads the token, from the mode's stored `config` (`{header}` or `{cookie}`, at most one, both
 * validated by the control API): a header name is lower-cased, as Node hands header names to the edge.
 */
export function tokenSourceOf(config: { header?: unknown; cookie?: unknown } | undefined): TokenSource {
  if (typeof config?.header === 'string') return { kind: 'header', name: config.header.toLowerCase() };
  if (typeof config?.cookie === 'string') return { kind: 'cookie', name: config.cookie };
  return { kind: 'bearer' };
}

/** RFC 9110 §5.1: a field name is a token (§5.6.2). */
const FIELD_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

export function isFieldName(name: string): boolean {
  return FIELD_NAME.test(name);
}

/** RFC 9110 §7.6.1 hop-by-hop fields, and Proxy-Connection (non-standard, still sent): a proxy consumes them. */
export const HOP_BY_HOP_HEADERS: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** Framing and routing of the message itself (RFC 9112 §6, RFC 9110 §7.2): never a place for application data. */
const FRAMING_HEADERS: ReadonlySet<string> = new Set(['host', 'content-length', 'transfer-encoding']);

/** The visitor's credentials: the agent would take a claim written there for a credential the visitor sent. */
const CREDENTIAL_HEADERS: ReadonlySet<string> = new Set(['authorization', 'cookie']);

/**
 * Why a header name cannot carry a JWT claim, or null when it can: not a field name, hop-by-hop, framing, the
 * visitor's credentials, a header the edge owns (src/shared/edge-headers.ts) or one of the edge's X-Edge-* identity
 * headers. Names are compared as CGI upstreams read them, `_` as `-` (X_Forwarded_For is X-Forwarded-For there).
 */
export function claimHeaderRefusal(name: string): string | null {
  if (!isFieldName(name)) return `"${name}" is not a valid header name (RFC 9110 §5.1)`;
  const key = headerKey(name);
  if (HOP_BY_HOP_HEADERS.has(key)) return `"${name}" is a hop-by-hop header`;
  if (FRAMING_HEADERS.has(key)) return `"${name}" frames or routes the request`;
  if (CREDENTIAL_HEADERS.has(key)) return `"${name}" carries the visitor's credentials`;
  if (isEdgeOwnedHeader(name)) return `"${name}" is a header the edge sets`;
  return null;
}

/**
 * Why a header name cannot be where a credential is read from (token mode's header, the webhook signature), or null.
 * Hop-by-hop and framing fields never reach the stage intact; the edge-owned ones it sets itself.
 */
export function credentialHeaderRefusal(name: string): string | null {
  if (!isFieldName(name)) return `"${name}" is not a valid header name (RFC 9110 §5.1)`;
  const key = headerKey(name);
  if (HOP_BY_HOP_HEADERS.has(key)) return `"${name}" is a hop-by-hop header`;
  if (FRAMING_HEADERS.has(key)) return `"${name}" frames or routes the request`;
  if (isEdgeOwnedHeader(name)) return `"${name}" is a header the edge sets`;
  return null;
}
