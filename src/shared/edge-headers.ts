// The request header names the edge owns: it sets them itself or strips them, so no visitor copy reaches an upstream.
// One list for the edge's header pass and for the control API, which refuses to let a setting name one of them.

/**
 * Lower-case, hyphenated names. Add here every field a stage sets from what the edge verified (identity, claims,
 * client certificate): the edge then strips visitor copies in every spelling, and the control API refuses a
 * configured header name that collides with one.
 */
export const EDGE_OWNED_HEADERS: readonly string[] = [
  // Forwarding facts the edge sets from the connection (RFC 7239 Forwarded and the de-facto X-Forwarded-* set).
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-forwarded-port',
  'forwarded',
  'x-real-ip',
  // Client-address fields other proxies and CDNs set; an upstream framework that trusts any of them would take the
  // visitor's word for its address, so the edge sets none of them and lets none through.
  'x-client-ip',
  'true-client-ip',
  'cf-connecting-ip',
  'x-cluster-client-ip',
  'client-ip',
  // The client certificate the edge verified for an endpoint with mTLS on (src/edge/stages/mtls.ts).
  'x-edge-client-cert-verify',
  'x-edge-client-cert-subject',
  'x-edge-client-cert-fingerprint',
  // Who visitor authentication admitted: the basic username, the token's label or the provider's subject
  // (src/edge/stages/auth.ts); after an OAuth/OIDC login also the e-mail and the provider's id (src/edge/auth/).
  'x-edge-auth-user',
  'x-edge-auth-email',
  'x-edge-auth-provider',
  // Rewrite hints the edge never sets and always strips: Symfony before CVE-2018-14773, Zend (ZF2018-01) and IIS
  // URL Rewrite setups route on them instead of the request line, past a path RBAC or a rate limit judged.
  'x-original-url',
  'x-rewrite-url',
];

const OWNED = new Set(EDGE_OWNED_HEADERS);

/** Every spelling of `name` with each `-` as `-` or `_` (2^hyphens of them: a handful per name). */
function underscoreSpellings(name: string): string[] {
  let out = [''];
  for (const c of name) out = c === '-' ? out.flatMap((p) => [`${p}-`, `${p}_`]) : out.map((p) => p + c);
  return out;
}

/** The owned names in every lower-case spelling CGI reads as the same: one Set lookup per visitor field. */
const OWNED_SPELLINGS = new Set(EDGE_OWNED_HEADERS.flatMap(underscoreSpellings));

/**
 * A field name as CGI reads it (RFC 3875 §4.1.18: `-` becomes `_`, so `X_Forwarded_For` and `X-Forwarded-For` both
 * arrive as HTTP_X_FORWARDED_FOR in WSGI, Rack and PHP): lower case, `_` read as `-`. Two names with the same key
 * are the same field to such an upstream.
 */
export function headerKey(name: string): string {
  const lower = name.toLowerCase();
  return lower.indexOf('_') === -1 ? lower : lower.replaceAll('_', '-');
}

/**
 * Name spaces the edge owns whole, beyond the listed names: `X-Forwarded-*` (frameworks also build links from
 * X-Forwarded-Prefix, -Server, -Scheme...) and `X-Edge-*` (the edge's identity fields, today's and those to come).
 * A visitor copy of any of them is stripped; the control API refuses to let a setting name one.
 */
export const EDGE_OWNED_PREFIXES: readonly string[] = ['x-forwarded-', 'x-edge-'];

function inOwnedNamespace(key: string): boolean {
  for (const prefix of EDGE_OWNED_PREFIXES) if (key.startsWith(prefix)) return true;
  return false;
}

/** Whether a field name, in any case and with `_` for `-` anywhere, is one the edge owns. */
export function isEdgeOwnedHeader(name: string): boolean {
  const key = headerKey(name);
  return OWNED.has(key) || inOwnedNamespace(key);
}

/**
 * The hot-path form of isEdgeOwnedHeader for a name already lower-cased (Node's header names): one Set lookup, no
 * folding, since the set holds every `_` spelling of each owned name.
 */
export function isEdgeOwnedLower(lower: string): boolean {
  if (OWNED_SPELLINGS.has(lower)) return true;
  // Both owned name spaces start with "x": other names cost one character comparison more.
  return lower.charCodeAt(0) === 120 /* x */ && inOwnedNamespace(lower.indexOf('_') === -1 ? lower : lower.replaceAll('_', '-'));
}
