// Field checks the control API shares across resources: future instants, URLs the platform fetches, scopes, tokens,
// return targets, claim headers, e-mail domains and origins. Each answers a canonical value or a 400 naming the field.
import { domainToASCII } from 'node:url';
import { Type } from '@sinclair/typebox';
import { hostRefusal } from '../shared/address-policy.ts';
import { fail, invalid } from '../shared/errors.ts';
import { canonicalOriginUrl, OriginUrlError } from '../shared/origin-url.ts';
import { isUuid, parseInt64 } from '../shared/schema.ts';
import { claimHeaderRefusal } from '../shared/visitor-credentials.ts';
import { isDnsName } from '../shared/x509.ts';
import { MAX_SCOPES } from '../store/oauth-providers.ts';
import { parseJsonBody } from './http.ts';

// ---------------------------------------------------------------------------------------------------------------
// Instants and credentials
// ---------------------------------------------------------------------------------------------------------------

/** RFC 3339 instant strictly after now, or a 400: a credential that is already expired is a mistake, not a setting. */
export function futureInstant(field: string, value: string): string {
  const at = Date.parse(value);
  if (!(at > Date.now())) throw invalid(field, 'must be in the future');
  return new Date(at).toISOString();
}

/** RFC 6750 §2.1 b64token: what fits in Authorization: Bearer, and in a header or cookie value unchanged. */
export const TOKEN_PATTERN = '^[A-Za-z0-9\\-._~+/]+=*$';
/** The shortest visitor token a person may choose (settings tokens, RBAC client tokens). */
export const MIN_TOKEN_LENGTH = 16;
/** A label shown to people and sent to agents in a header: no control characters. */
export const NO_CONTROL_PATTERN = '^[^\\x00-\\x1f\\x7f]+$';

// ---------------------------------------------------------------------------------------------------------------
// OAuth scopes and return targets
// ---------------------------------------------------------------------------------------------------------------

/** RFC 6749 §3.3 scope-token: visible ASCII but for `"` and `\`. */
export const SCOPE_TOKEN_PATTERN = '^[\\x21\\x23-\\x5b\\x5d-\\x7e]+$';
export const MAX_SCOPE_LENGTH = 256;

/** Scopes as an OAuth/OIDC setting takes them: RFC 6749 §3.3 tokens, each once. */
export const ScopesBody = (description: string, minItems = 0) =>
  Type.Array(Type.String({ minLength: 1, maxLength: MAX_SCOPE_LENGTH, pattern: SCOPE_TOKEN_PATTERN }), { minItems, maxItems: MAX_SCOPES, description });

/**
 * An extra return_to target of an OAuth login, canonical, or a 400. The edge sends a visitor back to where the login
 * started; a target elsewhere would make the endpoint an open redirector (RFC 9700 §4.11). So: a path on the same
 * host, whose second character does not turn it into a network-path reference (`//evil`, and `/\evil`, which
 * browsers read alike), or an https URL on the endpoint's own hostname.
 */
export function allowedRedirect(raw: string, hostname: string, field: string): string {
  if (!/^[\x21-\x7e]+$/.test(raw)) throw invalid(field, 'visible ASCII only (percent-encode anything else), no spaces');
  if (raw.includes('\\')) throw invalid(field, 'backslashes are not allowed (browsers read them as slashes)');
  if (raw.startsWith('/')) {
    if (raw.startsWith('//')) throw invalid(field, 'a path starting with "//" names another host');
    return raw;
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid(field, 'a path starting with "/" or an absolute https URL');
  }
  if (url.protocol !== 'https:') throw invalid(field, 'an absolute target must be https');
  if (url.username || url.password) throw invalid(field, 'credentials in the URL are not allowed');
  if (url.hostname !== hostname.toLowerCase()) throw invalid(field, `an absolute target must be on the endpoint’s own hostname (${hostname})`);
  return url.href;
}

/** An allowed domain as the edge compares it with a verified e-mail's domain: lower-case A-labels, two labels or more. */
export function allowedDomain(raw: string, field: string): string {
  if (raw.startsWith('@') || raw.startsWith('*.')) throw invalid(field, 'a bare domain (example.com), without "@" or "*."');
  const name = domainToASCII(raw);
  if (!name || !isDnsName(name)) throw invalid(field, `"${raw}" is not a valid domain name`);
  const labels = name.split('.');
  if (labels.length < 2) throw invalid(field, 'a domain needs at least two labels (example.com)');
  if (/^[0-9]+$/.test(labels[labels.length - 1])) throw invalid(field, `"${raw}" is an IP address, not a domain name`);
  return name;
}

// ---------------------------------------------------------------------------------------------------------------
// URLs the platform fetches from or forwards to
// ---------------------------------------------------------------------------------------------------------------

/**
 * A URL the platform fetches from on a user's behalf (a JWKS, an identity provider's endpoints): https (http only
 * where private origins are allowed, i.e. development), no credentials or fragment, and not a private, loopback or
 * link-local address by what it says. Whoever fetches must check the addresses the name resolves to, as the edge
 * does for origins (src/shared/address-policy.ts). `field` names it in the 400.
 */
export function publicHttpsUrl(field: string, raw: string, allowPrivate: boolean): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid(field, 'not a valid absolute URL');
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && allowPrivate)) {
    throw invalid(field, allowPrivate ? 'only http and https URLs are supported' : 'must be https (what is fetched over plain http could be replaced in transit)');
  }
  if (url.username || url.password) throw invalid(field, 'credentials in the URL are not allowed');
  if (url.hash) throw invalid(field, 'a URL fetched by the platform has no fragment');
  if (!allowPrivate) {
    const refusal = hostRefusal(url.hostname);
    if (refusal !== null) throw invalid(field, `must have a public address: ${refusal}`);
  }
  return url;
}

/** A JWKS URL (publicHttpsUrl), in its canonical spelling. */
export function parseJwksUrl(raw: string, allowPrivate: boolean): string {
  return publicHttpsUrl('jwks_url', raw, allowPrivate).href;
}

/**
 * The issuer as stored: the string sent, once it is a public https URL (publicHttpsUrl) without a query (OpenID
 * Connect Discovery §4.3, RFC 8414 §2). Not re-spelled: an ID token's iss must equal it character for character
 * (OpenID Connect Core §3.1.3.7), and "https://idp.example" and its canonical "https://idp.example/" differ.
 */
export function parseIssuer(raw: string, allowPrivate: boolean): string {
  const url = publicHttpsUrl('issuer', raw, allowPrivate);
  if (url.search) throw invalid('issuer', 'an issuer has no query component (RFC 8414 §2)');
  return raw;
}

/** A canonical origin URL, or a 400 saying what is wrong with it (the checks live in src/shared/origin-url.ts). */
export function parseOriginUrl(raw: string, allowPrivate: boolean): string {
  try {
    return canonicalOriginUrl(raw, allowPrivate);
  } catch (err) {
    if (!(err instanceof OriginUrlError)) throw err;
    throw fail.invalid_request('Invalid request body', { field: 'url', reason: err.message });
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Claim headers of the JWT layer
// ---------------------------------------------------------------------------------------------------------------

const MAX_CLAIM_HEADERS = 32;
const MAX_CLAIM_NAME_LENGTH = 128;

/** docs/api.md: claim_headers is a JSON-encoded string holding an object of claim name → header name. "" clears it. */
export function parseClaimHeaders(raw: string): Record<string, string> {
  if (raw.trim() === '') return {};
  let value: unknown;
  try {
    value = parseJsonBody(raw);
  } catch (err) {
    throw invalid('claim_headers', `not valid JSON (${(err as Error).message})`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid('claim_headers', 'must encode a JSON object of claim name → header name');
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MAX_CLAIM_HEADERS) throw invalid('claim_headers', `at most ${MAX_CLAIM_HEADERS} claims`);
  const out: Record<string, string> = {};
  const headers = new Map<string, string>();
  for (const [claim, header] of entries) {
    if (claim === '' || claim.length > MAX_CLAIM_NAME_LENGTH || /[\x00-\x1f\x7f]/.test(claim)) {
      throw invalid('claim_headers', `claim name "${claim}" must be 1-${MAX_CLAIM_NAME_LENGTH} characters without control characters`);
    }
    if (typeof header !== 'string') throw invalid('claim_headers', `the header for claim "${claim}" must be a string`, { claim });
    const refusal = claimHeaderRefusal(header);
    if (refusal !== null) throw invalid('claim_headers', refusal, { claim, header });
    const lower = header.toLowerCase();
    const key = lower.replaceAll('_', '-');
    const other = headers.get(key);
    if (other !== undefined) throw invalid('claim_headers', `claims "${other}" and "${claim}" both map to ${header}`, { claim, header });
    headers.set(key, claim);
    out[claim] = lower;
  }
  return out;
}

/** A resource named by its uuid or by its numeric id (endpoints in filters and bodies accept both). */
export type UuidOrId = { uuid: string } | { id: number };

/** A uuid (lower-cased) or a positive int64 id, as sent in a body (a number) or a query or path (a string); null when neither. */
export function uuidOrId(value: string | number): UuidOrId | null {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value > 0 ? { id: value } : null;
  if (isUuid(value)) return { uuid: value.toLowerCase() };
  const id = parseInt64(value);
  return id === null ? null : { id };
}
