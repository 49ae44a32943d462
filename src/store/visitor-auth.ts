// Visitor authentication at rest: the main mode and its settings, basic users, visitor tokens (settings tokens and
// endpoint API keys), the JWT layer and webhook verification. Every write touches the endpoint (docs/feed.md).
import type { Queryable } from './db.ts';
import { touch } from './feed-changes.ts';
import { listOAuthProviders, type OAuthProviderRow } from './oauth-providers.ts';
import type { VisitorAuthMode } from '../shared/snapshot.ts';

/** Bounds the API enforces (400 beyond them): each basic user costs a bcrypt hash per PUT, each token a snapshot entry. */
export const MAX_BASIC_USERS = 100;
export const MAX_SETTINGS_TOKENS = 100;
export const MAX_LIVE_API_KEYS = 100;

export type TokenSourceKind = 'settings' | 'api_key';

/** Per write mode, the config it was last given (validated by the API), e.g. `{ basic: { realm: 'x' } }`. */
export type ModeConfigs = Partial<Record<VisitorAuthMode, Record<string, unknown>>>;

export interface AuthSettingsRow {
  endpoint_id: number;
  mode: VisitorAuthMode;
  mode_config: ModeConfigs;
  session_ttl_seconds: number | null;
  enabled_auth_methods: string[];
  credentials_version: number;
}

export interface BasicUserRow {
  id: number;
  username: string;
  password_hash: string;
  created_at: Date;
  last_used_at: Date | null;
}

/** A token as listed: never its digest. */
export interface VisitorTokenRow {
  id: number;
  source: TokenSourceKind;
  label: string;
  expires_at: Date | null;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

export interface JwtSettingsRow {
  enabled: boolean;
  jwks_url: string | null;
  issuer: string;
  audience: string;
  claim_headers: Record<string, string>;
}

export interface WebhookVerificationRow {
  enabled: boolean;
  header: string | null;
  algo: 'sha256' | 'sha1' | null;
  secret_sealed: string | null;
  /** bcrypt of the secret's hex SHA-256 (docs/api.md "Secret fingerprints"); null without a secret or for one stored before migration 017. */
  secret_fingerprint: string | null;
  prefix: string;
}

/** Everything GET …/settings resolves, in one read. `settings` is null until any auth write happened. */
export interface AuthState {
  settings: AuthSettingsRow | null;
  enforce_https: boolean;
  basic_users: BasicUserRow[];
  tokens: VisitorTokenRow[];
  jwt: JwtSettingsRow | null;
  webhook: WebhookVerificationRow | null;
  /** The endpoint's OAuth/OIDC providers, enabled or not (never a secret): enabled_auth_methods is reported against them. */
  oauth_providers: OAuthProviderRow[];
}

const TOKEN_COLUMNS = 'id, source, label, expires_at, created_at, last_used_at, revoked_at';

/** Both drivers parse jsonb, but accept text too, as the routing-rule reader does. */
function json<T>(value: T | string): T {
  return typeof value === 'string' ? (JSON.parse(value) as T) : value;
}

export async function findAuthSettings(q: Queryable, endpointId: number): Promise<AuthSettingsRow | null> {
  const { rows } = await q.query<AuthSettingsRow>(
    `SELECT endpoint_id, mode, mode_config, session_ttl_seconds, enabled_auth_methods, credentials_version
     FROM endpoint_auth_settings WHERE endpoint_id = $1`,
    [endpointId],
  );
  const row = rows[0];
  return row ? { ...row, mode_config: json(row.mode_config) } : null;
}

export async function listBasicUsers(q: Queryable, endpointId: number): Promise<BasicUserRow[]> {
  const { rows } = await q.query<BasicUserRow>(
    'SELECT id, username, password_hash, created_at, last_used_at FROM endpoint_basic_users WHERE endpoint_id = $1 ORDER BY id',
    [endpointId],
  );
  return rows;
}

/** Settings tokens and API keys together, revoked ones included (they stay listed), oldest first. */
export async function listVisitorTokens(q: Queryable, endpointId: number, source?: TokenSourceKind): Promise<VisitorTokenRow[]> {
  const { rows } = await q.query<VisitorTokenRow>(
    `SELECT ${TOKEN_COLUMNS} FROM endpoint_visitor_tokens WHERE endpoint_id = $1 AND ($2::text IS NULL OR source = $2) ORDER BY id`,
    [endpointId, source ?? null],
  );
  return rows;
}

export async function findJwtSettings(q: Queryable, endpointId: number): Promise<JwtSettingsRow | null> {
  const { rows } = await q.query<JwtSettingsRow>('SELECT enabled, jwks_url, issuer, audience, claim_headers FROM endpoint_jwt_settings WHERE endpoint_id = $1', [
    endpointId,
  ]);
  return rows[0] ? { ...rows[0], claim_headers: json(rows[0].claim_headers) } : null;
}

export async function findWebhookVerification(q: Queryable, endpointId: number): Promise<WebhookVerificationRow | null> {
  const { rows } = await q.query<WebhookVerificationRow>(
    'SELECT enabled, header, algo, secret_sealed, secret_fingerprint, prefix FROM endpoint_webhook_verification WHERE endpoint_id = $1',
    [endpointId],
  );
  return rows[0] ?? null;
}

export async function loadAuthState(q: Queryable, endpointId: number): Promise<AuthState> {
  // One after another: inside a transaction the queries share one connection anyway.
  const settings = await findAuthSettings(q, endpointId);
  const https = await q.query<{ enforce_https: boolean }>('SELECT enforce_https FROM endpoints WHERE id = $1', [endpointId]);
  return {
    settings,
    enforce_https: https.rows[0]?.enforce_https ?? false,
    basic_users: await listBasicUsers(q, endpointId),
    tokens: await listVisitorTokens(q, endpointId),
    jwt: settings ? await findJwtSettings(q, endpointId) : null,
    webhook: settings ? await findWebhookVerification(q, endpointId) : null,
    oauth_providers: await listOAuthProviders(q, endpointId),
  };
}

/**
 * Live tokens of an endpoint (not revoked, not expired), by source. What decides whether token mode has anything
 * a visitor could present: live API keys let PUT settings choose token mode without sending `tokens`.
 */
export async function countLiveTokens(q: Queryable, endpointId: number): Promise<Record<TokenSourceKind, number>> {
  const { rows } = await q.query<{ source: TokenSourceKind; n: number }>(
    `SELECT source, count(*)::int AS n FROM endpoint_visitor_tokens
     WHERE endpoint_id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()) GROUP BY source`,
    [endpointId],
  );
  const out: Record<TokenSourceKind, number> = { settings: 0, api_key: 0 };
  for (const r of rows) out[r.source] = r.n;
  return out;
}

/**
 * The first of the given settings credentials an RBAC client of the endpoint already holds: a username among
 * `usernames` (by its index) or a token digest among `digests` (by its index); null when none. The clients API refuses
 * the other direction; the edge could not tell the two apart (docs/rbac.md "The snapshot"). Call with the endpoint
 * row locked (both writers take it), so no client can take the name between this check and the write.
 */
export async function rbacClientHolding(
  q: Queryable,
  endpointId: number,
  usernames: readonly string[],
  digests: readonly string[],
): Promise<{ field: 'username' | 'token'; index: number; client: string } | null> {
  if (usernames.length > 0) {
    const { rows } = await q.query<{ username: string; identifier: string }>(
      'SELECT username, identifier FROM rbac_clients WHERE endpoint_id = $1 AND username = ANY($2::text[]) ORDER BY id',
      [endpointId, usernames],
    );
    if (rows.length > 0) {
      const taken = new Map(rows.map((r) => [r.username, r.identifier]));
      const index = usernames.findIndex((u) => taken.has(u));
      return { field: 'username', index, client: taken.get(usernames[index])! };
    }
  }
  if (digests.length > 0) {
    const { rows } = await q.query<{ token_digest: string; identifier: string }>(
      'SELECT token_digest, identifier FROM rbac_clients WHERE endpoint_id = $1 AND token_digest = ANY($2::text[]) ORDER BY id',
      [endpointId, digests],
    );
    if (rows.length > 0) {
      const taken = new Map(rows.map((r) => [r.token_digest, r.identifier]));
      const index = digests.findIndex((d) => taken.has(d));
      return { field: 'token', index, client: taken.get(digests[index])! };
    }
  }
  return null;
}

// ---------------------------------------------------------------------------------------------------------------
// Writes. The caller holds the endpoint's row lock (endpointForCaller forUpdate), which orders auth writers.
// ---------------------------------------------------------------------------------------------------------------

/** The settings row every auth write hangs off; created with mode none on first use. */
async function ensureAuthSettings(tx: Queryable, endpointId: number): Promise<void> {
  await tx.query('INSERT INTO endpoint_auth_settings (endpoint_id) VALUES ($1) ON CONFLICT (endpoint_id) DO NOTHING', [endpointId]);
}

async function bumpCredentialsVersion(tx: Queryable, endpointId: number): Promise<void> {
  await tx.query('UPDATE endpoint_auth_settings SET credentials_version = credentials_version + 1, updated_at = now() WHERE endpoint_id = $1', [endpointId]);
}

export interface BasicUserInput {
  username: string;
  /** bcrypt, already computed (off the transaction) or imported as sent: the stored hash when the password was unchanged. */
  passwordHash: string;
}

/**
 * Makes the endpoint's basic users exactly `users`. A user is its username: one sent again keeps its id,
 * created_at and last_used_at (its hash is replaced if the password changed); one left out is deleted.
 * Returns whether anything changed.
 */
async function replaceBasicUsers(tx: Queryable, endpointId: number, users: readonly BasicUserInput[]): Promise<boolean> {
  const removed = await tx.query('DELETE FROM endpoint_basic_users WHERE endpoint_id = $1 AND NOT (username = ANY($2::text[]))', [
    endpointId,
    users.map((u) => u.username),
  ]);
  if (users.length === 0) return removed.rowCount > 0;
  // xmax = 0 tells an inserted row from an updated one; the WHERE skips rows whose hash is unchanged.
  const written = await tx.query(
    `INSERT INTO endpoint_basic_users (endpoint_id, username, password_hash)
     SELECT $1, u.username, u.hash FROM unnest($2::text[], $3::text[]) AS u(username, hash)
     ON CONFLICT (endpoint_id, username) DO UPDATE SET password_hash = EXCLUDED.password_hash, updated_at = now()
       WHERE endpoint_basic_users.password_hash IS DISTINCT FROM EXCLUDED.password_hash`,
    [endpointId, users.map((u) => u.username), users.map((u) => u.passwordHash)],
  );
  return removed.rowCount > 0 || written.rowCount > 0;
}

export interface SettingsTokenInput {
  label: string;
  digest: string;
  expiresAt: string | null;
}

/**
 * Makes the endpoint's settings tokens exactly `tokens` (API keys are not touched). A token is its value: one sent
 * again keeps its id, created_at and last_used_at (label and expiry are updated); one left out is deleted.
 * Returns whether anything changed.
 */
async function replaceSettingsTokens(tx: Queryable, endpointId: number, tokens: readonly SettingsTokenInput[]): Promise<boolean> {
  const removed = await tx.query(
    `DELETE FROM endpoint_visitor_tokens WHERE endpoint_id = $1 AND source = 'settings' AND NOT (digest = ANY($2::text[]))`,
    [endpointId, tokens.map((t) => t.digest)],
  );
  if (tokens.length === 0) return removed.rowCount > 0;
  const updated = await tx.query(
    `UPDATE endpoint_visitor_tokens t SET label = u.label, expires_at = u.expires_at
     FROM unnest($2::text[], $3::text[], $4::timestamptz[]) AS u(digest, label, expires_at)
     WHERE t.endpoint_id = $1 AND t.source = 'settings' AND t.digest = u.digest
       AND (t.label IS DISTINCT FROM u.label OR t.expires_at IS DISTINCT FROM u.expires_at)`,
    [endpointId, tokens.map((t) => t.digest), tokens.map((t) => t.label), tokens.map((t) => t.expiresAt)],
  );
  // A digest equal to a live API key's hits the unique index: the caller maps that to a 400.
  const inserted = await tx.query(
    `INSERT INTO endpoint_visitor_tokens (endpoint_id, source, label, digest, expires_at)
     SELECT $1, 'settings', u.label, u.digest, u.expires_at FROM unnest($2::text[], $3::text[], $4::timestamptz[]) AS u(digest, label, expires_at)
     WHERE NOT EXISTS (SELECT 1 FROM endpoint_visitor_tokens t WHERE t.endpoint_id = $1 AND t.source = 'settings' AND t.digest = u.digest)`,
    [endpointId, tokens.map((t) => t.digest), tokens.map((t) => t.label), tokens.map((t) => t.expiresAt)],
  );
  return removed.rowCount > 0 || updated.rowCount > 0 || inserted.rowCount > 0;
}

/** A PUT …/settings after the merge: every field is the new value, except credentials, where undefined keeps them. */
export interface AuthSettingsWrite {
  mode: VisitorAuthMode;
  modeConfig: ModeConfigs;
  sessionTtlSeconds: number | null;
  enabledAuthMethods: string[];
  enforceHttps: boolean;
  /** The whole set of basic users; undefined leaves them as they are. */
  basicUsers?: readonly BasicUserInput[];
  /** The whole set of settings tokens; undefined leaves them as they are. */
  tokens?: readonly SettingsTokenInput[];
}

export async function writeAuthSettings(tx: Queryable, endpointId: number, w: AuthSettingsWrite): Promise<void> {
  await ensureAuthSettings(tx, endpointId);
  await tx.query(
    `UPDATE endpoint_auth_settings SET mode = $2, mode_config = $3::jsonb, session_ttl_seconds = $4, enabled_auth_methods = $5::text[], updated_at = now()
     WHERE endpoint_id = $1`,
    [endpointId, w.mode, JSON.stringify(w.modeConfig), w.sessionTtlSeconds, w.enabledAuthMethods],
  );
  await tx.query('UPDATE endpoints SET enforce_https = $2, updated_at = now() WHERE id = $1 AND enforce_https IS DISTINCT FROM $2', [endpointId, w.enforceHttps]);
  let changed = false;
  if (w.basicUsers !== undefined) changed = (await replaceBasicUsers(tx, endpointId, w.basicUsers)) || changed;
  if (w.tokens !== undefined) changed = (await replaceSettingsTokens(tx, endpointId, w.tokens)) || changed;
  if (changed) await bumpCredentialsVersion(tx, endpointId);
  touch(tx, { endpoint: endpointId });
}

export interface JwtSettingsWrite {
  enabled: boolean;
  jwksUrl: string | null;
  issuer: string;
  audience: string;
  claimHeaders: Record<string, string>;
}

export async function writeJwtSettings(tx: Queryable, endpointId: number, w: JwtSettingsWrite): Promise<void> {
  await ensureAuthSettings(tx, endpointId);
  await tx.query(
    `INSERT INTO endpoint_jwt_settings (endpoint_id, enabled, jwks_url, issuer, audience, claim_headers) VALUES ($1, $2, $3, $4, $5, $6::jsonb)
     ON CONFLICT (endpoint_id) DO UPDATE SET enabled = EXCLUDED.enabled, jwks_url = EXCLUDED.jwks_url, issuer = EXCLUDED.issuer,
       audience = EXCLUDED.audience, claim_headers = EXCLUDED.claim_headers, updated_at = now()`,
    [endpointId, w.enabled, w.jwksUrl, w.issuer, w.audience, JSON.stringify(w.claimHeaders)],
  );
  touch(tx, { endpoint: endpointId });
}

export interface WebhookVerificationWrite {
  enabled: boolean;
  header: string | null;
  algo: 'sha256' | 'sha1' | null;
  secretSealed: string | null;
  /** Written with the secret: the new secret's, or the stored one's when the secret is kept. */
  secretFingerprint: string | null;
  prefix: string;
}

export async function writeWebhookVerification(tx: Queryable, endpointId: number, w: WebhookVerificationWrite): Promise<void> {
  await ensureAuthSettings(tx, endpointId);
  await tx.query(
    `INSERT INTO endpoint_webhook_verification (endpoint_id, enabled, header, algo, secret_sealed, secret_fingerprint, prefix) VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (endpoint_id) DO UPDATE SET enabled = EXCLUDED.enabled, header = EXCLUDED.header, algo = EXCLUDED.algo,
       secret_sealed = EXCLUDED.secret_sealed, secret_fingerprint = EXCLUDED.secret_fingerprint, prefix = EXCLUDED.prefix, updated_at = now()`,
    [endpointId, w.enabled, w.header, w.algo, w.secretSealed, w.secretFingerprint, w.prefix],
  );
  touch(tx, { endpoint: endpointId });
}

// ---------------------------------------------------------------------------------------------------------------
// Endpoint API keys: visitor tokens with a generated secret, created and revoked one at a time.
// ---------------------------------------------------------------------------------------------------------------

export async function insertEndpointApiKey(
  tx: Queryable,
  endpointId: number,
  key: { label: string; digest: string; expiresAt: string | null },
): Promise<VisitorTokenRow> {
  await ensureAuthSettings(tx, endpointId);
  const { rows } = await tx.query<VisitorTokenRow>(
    `INSERT INTO endpoint_visitor_tokens (endpoint_id, source, label, digest, expires_at) VALUES ($1, 'api_key', $2, $3, $4)
     RETURNING ${TOKEN_COLUMNS}`,
    [endpointId, key.label, key.digest, key.expiresAt],
  );
  await bumpCredentialsVersion(tx, endpointId);
  touch(tx, { endpoint: endpointId });
  return rows[0];
}

export async function findEndpointApiKey(q: Queryable, endpointId: number, keyId: number): Promise<VisitorTokenRow | null> {
  const { rows } = await q.query<VisitorTokenRow>(
    `SELECT ${TOKEN_COLUMNS} FROM endpoint_visitor_tokens WHERE endpoint_id = $1 AND id = $2 AND source = 'api_key'`,
    [endpointId, keyId],
  );
  return rows[0] ?? null;
}

/**
 * Revokes an API key (it stays listed with revoked_at; revoking again keeps the first time) and touches the endpoint, so every
 * edge refuses it from its next request. Null when the endpoint has no such API key.
 */
export async function revokeEndpointApiKey(tx: Queryable, endpointId: number, keyId: number): Promise<VisitorTokenRow | null> {
  const { rows } = await tx.query<VisitorTokenRow>(
    `UPDATE endpoint_visitor_tokens SET revoked_at = now() WHERE endpoint_id = $1 AND id = $2 AND source = 'api_key' AND revoked_at IS NULL
     RETURNING ${TOKEN_COLUMNS}`,
    [endpointId, keyId],
  );
  if (rows[0]) {
    await bumpCredentialsVersion(tx, endpointId);
    touch(tx, { endpoint: endpointId });
    return rows[0];
  }
  return findEndpointApiKey(tx, endpointId, keyId);
}

// ---------------------------------------------------------------------------------------------------------------
// last_used_at, from the uses edges report in their heartbeats (edges never write the store).
// ---------------------------------------------------------------------------------------------------------------

export interface CredentialUses {
  /** [basic user id, time of last use]; each id at most once. */
  basicUsers: ReadonlyArray<readonly [number, Date]>;
  /** [token id, time of last use]; each id at most once. */
  tokens: ReadonlyArray<readonly [number, Date]>;
}

/**
 * Applies a batch of uses: one statement per table, last_used_at only ever moves forward (edges report the same
 * use in many heartbeats, and in any order), and a time ahead of the database's clock is taken as now.
 * Unknown ids (deleted users, tokens) match nothing. Returns the rows updated.
 */
export async function recordCredentialUse(q: Queryable, uses: CredentialUses): Promise<number> {
  let updated = 0;
  for (const [table, batch] of [
    ['endpoint_basic_users', uses.basicUsers],
    ['endpoint_visitor_tokens', uses.tokens],
  ] as const) {
    if (batch.length === 0) continue;
    const res = await q.query(
      `UPDATE ${table} c SET last_used_at = GREATEST(coalesce(c.last_used_at, '-infinity'::timestamptz), LEAST(u.at, now()))
       FROM unnest($1::bigint[], $2::timestamptz[]) AS u(id, at)
       WHERE c.id = u.id AND (c.last_used_at IS NULL OR c.last_used_at < LEAST(u.at, now()))`,
      [batch.map(([id]) => id), batch.map(([, at]) => at.toISOString())],
    );
    updated += res.rowCount;
  }
  return updated;
}
