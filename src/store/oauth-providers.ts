// OAuth/OIDC identity providers at rest: one endpoint's providers, created, replaced, toggled and deleted one at a
// time. Every write touches the endpoint (docs/feed.md); the client secret is only ever stored sealed.
import type { Queryable } from './db.ts';
import { touch } from './feed-changes.ts';

/** Bounds the API enforces (400 beyond them): each provider is a login-page entry and a snapshot entry on every edge. */
export const MAX_OAUTH_PROVIDERS = 20;
export const MAX_ALLOWED_EMAILS = 100;
export const MAX_ALLOWED_DOMAINS = 100;
export const MAX_SCOPES = 32;

export type OAuthProviderKind = 'oidc' | 'oauth2';

/** A provider as the API lists it: never the secret, sealed or not. */
export interface OAuthProviderRow {
  id: number;
  endpoint_id: number;
  kind: OAuthProviderKind;
  name: string;
  issuer: string;
  client_id: string;
  scopes: string[];
  allowed_emails: string[];
  allowed_domains: string[];
  authorization_url: string | null;
  token_url: string | null;
  userinfo_url: string | null;
  enabled: boolean;
  /** bcrypt of the secret's hex SHA-256 (docs/api.md "Secret fingerprints"); null for secrets stored before migration 017. */
  client_secret_fingerprint: string | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS =
  'id, endpoint_id, kind, name, issuer, client_id, scopes, allowed_emails, allowed_domains, authorization_url, token_url, userinfo_url, enabled, ' +
  'client_secret_fingerprint, created_at, updated_at';

/** A client secret as written: sealed for the edges, fingerprinted for the API's views. */
export interface ClientSecretInput {
  sealed: string;
  fingerprint: string;
}

/** Validated and canonical (by the API); the secret already sealed. */
export interface OAuthProviderInput {
  kind: OAuthProviderKind;
  name: string;
  issuer: string;
  clientId: string;
  scopes: string[];
  allowedEmails: string[];
  allowedDomains: string[];
  authorizationUrl: string | null;
  tokenUrl: string | null;
  userinfoUrl: string | null;
}

export async function listOAuthProviders(q: Queryable, endpointId: number): Promise<OAuthProviderRow[]> {
  const { rows } = await q.query<OAuthProviderRow>(`SELECT ${COLUMNS} FROM endpoint_oauth_providers WHERE endpoint_id = $1 ORDER BY id`, [endpointId]);
  return rows;
}

export async function findOAuthProvider(q: Queryable, endpointId: number, providerId: number): Promise<OAuthProviderRow | null> {
  const { rows } = await q.query<OAuthProviderRow>(`SELECT ${COLUMNS} FROM endpoint_oauth_providers WHERE endpoint_id = $1 AND id = $2`, [endpointId, providerId]);
  return rows[0] ?? null;
}

export async function countOAuthProviders(q: Queryable, endpointId: number): Promise<number> {
  const { rows } = await q.query<{ n: number }>('SELECT count(*)::int AS n FROM endpoint_oauth_providers WHERE endpoint_id = $1', [endpointId]);
  return rows[0].n;
}

// ---------------------------------------------------------------------------------------------------------------
// Writes. The caller holds the endpoint's row lock (endpointForCaller forUpdate), which orders them with the
// settings writes that check which providers exist and are enabled.
// ---------------------------------------------------------------------------------------------------------------

/**
 * A provider's columns in the order both writes bind them: kind, name, issuer, client_id, the sealed secret, scopes,
 * allowed_emails, allowed_domains, the three oauth2 URLs, the secret's fingerprint (both null: keep the stored secret).
 */
function providerValues(p: OAuthProviderInput, secret: ClientSecretInput | undefined): unknown[] {
  return [p.kind, p.name, p.issuer, p.clientId, secret?.sealed ?? null, p.scopes, p.allowedEmails, p.allowedDomains, p.authorizationUrl, p.tokenUrl, p.userinfoUrl, secret?.fingerprint ?? null];
}

/** A duplicate name hits endpoint_oauth_providers_name_key: the caller maps it to a 409. */
export async function insertOAuthProvider(tx: Queryable, endpointId: number, p: OAuthProviderInput, secret: ClientSecretInput): Promise<OAuthProviderRow> {
  const { rows } = await tx.query<OAuthProviderRow>(
    `INSERT INTO endpoint_oauth_providers (endpoint_id, kind, name, issuer, client_id, client_secret_sealed, scopes, allowed_emails, allowed_domains,
                                           authorization_url, token_url, userinfo_url, client_secret_fingerprint)
     VALUES ($1, $2, $3, $4, $5, $6, $7::text[], $8::text[], $9::text[], $10, $11, $12, $13)
     RETURNING ${COLUMNS}`,
    [endpointId, ...providerValues(p, secret)],
  );
  touch(tx, { endpoint: endpointId });
  return rows[0];
}

/**
 * Replaces a provider's configuration (a full update); `secret` undefined keeps the stored secret and its fingerprint,
 * and the enabled flag is the toggle's alone. Null when the endpoint has no such provider.
 */
export async function replaceOAuthProvider(
  tx: Queryable,
  endpointId: number,
  providerId: number,
  p: OAuthProviderInput,
  secret: ClientSecretInput | undefined,
): Promise<OAuthProviderRow | null> {
  const { rows } = await tx.query<OAuthProviderRow>(
    `UPDATE endpoint_oauth_providers SET kind = $3, name = $4, issuer = $5, client_id = $6, client_secret_sealed = COALESCE($7, client_secret_sealed),
       scopes = $8::text[], allowed_emails = $9::text[], allowed_domains = $10::text[], authorization_url = $11, token_url = $12, userinfo_url = $13,
       client_secret_fingerprint = CASE WHEN $7::text IS NULL THEN client_secret_fingerprint ELSE $14 END, updated_at = now()
     WHERE endpoint_id = $1 AND id = $2
     RETURNING ${COLUMNS}`,
    [endpointId, providerId, ...providerValues(p, secret)],
  );
  if (!rows[0]) return null;
  touch(tx, { endpoint: endpointId });
  return rows[0];
}

/** docs/api.md "OAuth/OIDC providers": an explicit set, not a flip. False when the endpoint has no such provider. */
export async function setOAuthProviderEnabled(tx: Queryable, endpointId: number, providerId: number, enabled: boolean): Promise<boolean> {
  const res = await tx.query(
    `UPDATE endpoint_oauth_providers SET enabled = $3, updated_at = CASE WHEN enabled = $3 THEN updated_at ELSE now() END
     WHERE endpoint_id = $1 AND id = $2`,
    [endpointId, providerId, enabled],
  );
  if (res.rowCount === 0) return false;
  touch(tx, { endpoint: endpointId });
  return true;
}

/**
 * Deletes a provider. Its id stays in the settings' enabled_auth_methods if listed there: ids are never reused, so it
 * matches nothing, and removing it could empty the list, which would widen it to every enabled provider.
 */
export async function deleteOAuthProvider(tx: Queryable, endpointId: number, providerId: number): Promise<boolean> {
  const res = await tx.query('DELETE FROM endpoint_oauth_providers WHERE endpoint_id = $1 AND id = $2', [endpointId, providerId]);
  if (res.rowCount === 0) return false;
  touch(tx, { endpoint: endpointId });
  return true;
}

// Which providers an endpoint offers lives in oauth-offers.ts, which the snapshot builder imports without this module.
export { DEFAULT_OIDC_SCOPES, offersProvider, requestedScopes } from './oauth-offers.ts';
