// The registration contract between edge and control (docs/rbac.md "Invites and self-registration"): the route and
// bodies of POST /v1/rbac/registrations, and the signed assertion with which an edge vouches for a visitor's login.
import type { SecretBox } from './secrets.ts';
import { openToken, signToken } from './signed-token.ts';

/** The public registration route: no API key; the invite token or the edge's identity assertion is the credential. */
export const REGISTRATION_PATH = '/v1/rbac/registrations';

/** SecretBox.derive purpose of the assertion key. Changing it invalidates every assertion in flight (they are short-lived). */
export const VISITOR_IDENTITY_KEY_PURPOSE = 'visitor-identity-assertion';

/** What an edge asserts about a visitor who logged in through one of the endpoint's OAuth/OIDC providers. */
export interface VisitorIdentityClaims {
  /** The endpoint's UUID: an assertion made for one endpoint is worthless on another. */
  endpoint: string;
  /** The endpoint's OAuth provider id, decimal string (as sessions and rbac_client_identities name it). */
  provider: string;
  /** The provider's subject for the visitor. */
  subject: string;
  /** A verified e-mail claim, lower-case; null when the provider verified none. */
  email: string | null;
  /** Expiry, epoch seconds. */
  exp: number;
}

export interface RegistrationRequest {
  /** The endpoint's UUID. */
  endpoint_id: string;
  invite_token?: string;
  username?: string;
  password?: string;
  /** signVisitorIdentity's output. */
  identity?: string;
}

export interface RegistrationResult {
  client_id: number;
  identifier: string;
  status: 'active';
  registration_source: 'invite' | 'self';
  /** The feed version that carries the change: an edge caught up to it admits the new client. */
  feed_version: number;
}

/** The signed-token purpose of assertions (src/shared/signed-token.ts): what the MAC says the token is for. */
const IDENTITY_PURPOSE = 'visitor-identity';

/**
 * `<base64url(JSON claims)>.<mac>` (src/shared/signed-token.ts) under a key every node derives from EDGE_SECRET_KEY,
 * so the control plane trusts what any edge vouches for and nothing else can forge it. (Until issue 20 the MAC
 * covered the payload alone: during an upgrade, an assertion made by an edge of the other release is refused, and
 * the visitor is asked to sign in again; assertions live minutes.)
 */
export function signVisitorIdentity(box: SecretBox, c: VisitorIdentityClaims): string {
  const claims: VisitorIdentityClaims = {
    endpoint: c.endpoint,
    provider: c.provider,
    subject: c.subject,
    email: c.email === null ? null : c.email.toLowerCase(),
    exp: Math.floor(c.exp),
  };
  const payload = Buffer.from(JSON.stringify(claims), 'utf8').toString('base64url');
  return signToken(box.derive(VISITOR_IDENTITY_KEY_PURPOSE), IDENTITY_PURPOSE, [payload]);
}

/**
 * The claims when the assertion is intact, made for this endpoint and not expired at nowSeconds; null otherwise
 * (one answer for every failure: the caller says 401 whatever went wrong).
 */
export function verifyVisitorIdentity(
  box: SecretBox,
  token: string,
  endpointUuid: string,
  nowSeconds: number,
): VisitorIdentityClaims | null {
  if (typeof token !== 'string' || token.length > 8192) return null;
  const fields = openToken(box.derive(VISITOR_IDENTITY_KEY_PURPOSE), IDENTITY_PURPOSE, token, 1);
  if (fields === null) return null;
  const payload = fields[0];
  let claims: unknown;
  try {
    claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  if (!isClaims(claims)) return null;
  if (claims.endpoint !== endpointUuid || claims.exp <= nowSeconds) return null;
  return claims;
}

function isClaims(v: unknown): v is VisitorIdentityClaims {
  if (typeof v !== 'object' || v === null) return false;
  const c = v as Record<string, unknown>;
  return (
    typeof c.endpoint === 'string' &&
    typeof c.provider === 'string' &&
    /^[1-9][0-9]{0,18}$/.test(c.provider) &&
    typeof c.subject === 'string' &&
    c.subject.length > 0 &&
    (c.email === null || typeof c.email === 'string') &&
    typeof c.exp === 'number' &&
    Number.isFinite(c.exp)
  );
}
