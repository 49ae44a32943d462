// RBAC clients at rest (docs/rbac.md "Clients", "Invites and self-registration"): their writes, invites, the
// self-registration setting and credential use. Reads of clients live in rbac.ts; every write here touches the endpoint.
import type { Queryable } from './db.ts';
import { touch } from './feed-changes.ts';
import { assignDefaultRoles } from './rbac.ts';
import type { RbacClientStatus } from '../shared/snapshot.ts';

/** Bound the API enforces (400 beyond it): every client is a snapshot entry on every edge serving the endpoint. */
export const MAX_CLIENTS_PER_ENDPOINT = 10_000;
/** Identities one client may link: enough for one account at each of an endpoint's providers, and then some. */
export const MAX_IDENTITIES_PER_CLIENT = 20;

export type RegistrationSource = 'admin' | 'self' | 'invite' | 'sso';
export const REGISTRATION_SOURCES: readonly RegistrationSource[] = ['admin', 'self', 'invite', 'sso'];

export interface Identity {
  /** The endpoint's OAuth provider id, decimal. */
  provider: string;
  subject: string;
}

/** A new client, validated and canonical (lower-case identifier and e-mail, bcrypt hash, keyed token digest). */
export interface ClientInsert {
  identifier: string;
  displayName: string;
  email: string | null;
  username: string | null;
  passwordHash: string | null;
  tokenDigest: string | null;
  status: RbacClientStatus;
  registrationSource: RegistrationSource;
  metadata: Record<string, unknown>;
  identities: readonly Identity[];
}

/** A change to a client: undefined keeps a field as it is; `credentials` replaces username and password together. */
export interface ClientPatch {
  displayName?: string;
  email?: string | null;
  status?: RbacClientStatus;
  registrationSource?: RegistrationSource;
  credentials?: { username: string; passwordHash: string };
  tokenDigest?: string;
  metadata?: Record<string, unknown>;
  /** Replaces the linked identities; `addIdentities` links more and keeps those linked. */
  identities?: readonly Identity[];
  addIdentities?: readonly Identity[];
}

/** What a client's identifier, e-mail, username, token or identity collides with; answered as a 409 naming it. */
export type Collision =
  | { field: 'identifier' | 'email' | 'username'; with: 'client'; value: string }
  | { field: 'username'; with: 'basic_user'; value: string }
  | { field: 'token'; with: 'client' | 'settings_token' }
  | { field: 'identities'; with: 'client'; value: Identity };

/**
 * The first collision of the given values with another client of the endpoint (not `exceptClientId`), with the
 * settings' basic users (a username) or its live settings tokens and API keys (a token digest): the edge could not
 * tell such credentials apart. Call with the endpoint row locked, so nothing can slip in between check and write; the
 * unique indexes stay as the backstop.
 */
export async function findCollision(
  tx: Queryable,
  endpointId: number,
  v: { identifier?: string; email?: string | null; username?: string | null; tokenDigest?: string | null; identities?: readonly Identity[] },
  exceptClientId = 0,
): Promise<Collision | null> {
  const other = async (column: 'identifier' | 'email' | 'username' | 'token_digest', value: string) =>
    (await tx.query(`SELECT 1 FROM rbac_clients WHERE endpoint_id = $1 AND ${column} = $2 AND id <> $3`, [endpointId, value, exceptClientId])).rows.length > 0;
  if (v.identifier !== undefined && (await other('identifier', v.identifier))) return { field: 'identifier', with: 'client', value: v.identifier };
  if (v.email != null && (await other('email', v.email))) return { field: 'email', with: 'client', value: v.email };
  if (v.username != null) {
    if (await other('username', v.username)) return { field: 'username', with: 'client', value: v.username };
    const basic = await tx.query('SELECT 1 FROM endpoint_basic_users WHERE endpoint_id = $1 AND username = $2', [endpointId, v.username]);
    if (basic.rows.length > 0) return { field: 'username', with: 'basic_user', value: v.username };
  }
  if (v.tokenDigest != null) {
    if (await other('token_digest', v.tokenDigest)) return { field: 'token', with: 'client' };
    const live = await tx.query(
      `SELECT 1 FROM endpoint_visitor_tokens WHERE endpoint_id = $1 AND digest = $2 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`,
      [endpointId, v.tokenDigest],
    );
    if (live.rows.length > 0) return { field: 'token', with: 'settings_token' };
  }
  for (const identity of v.identities ?? []) {
    const { rows } = await tx.query(
      'SELECT 1 FROM rbac_client_identities WHERE endpoint_id = $1 AND provider = $2 AND subject = $3 AND client_id <> $4',
      [endpointId, identity.provider, identity.subject, exceptClientId],
    );
    if (rows.length > 0) return { field: 'identities', with: 'client', value: identity };
  }
  return null;
}

export async function countClients(tx: Queryable, endpointId: number): Promise<number> {
  const { rows } = await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM rbac_clients WHERE endpoint_id = $1', [endpointId]);
  return rows[0].n;
}

/** Identifiers taken on the endpoint among `candidates` (self-registration picks a free one). */
export async function takenIdentifiers(tx: Queryable, endpointId: number, candidates: readonly string[]): Promise<Set<string>> {
  const { rows } = await tx.query<{ identifier: string }>('SELECT identifier FROM rbac_clients WHERE endpoint_id = $1 AND identifier = ANY($2::text[])', [
    endpointId,
    candidates,
  ]);
  return new Set(rows.map((r) => r.identifier));
}

async function linkIdentities(tx: Queryable, endpointId: number, clientId: number, identities: readonly Identity[]): Promise<void> {
  if (identities.length === 0) return;
  await tx.query(
    `INSERT INTO rbac_client_identities (client_id, endpoint_id, provider, subject)
     SELECT $1, $2, u.provider, u.subject FROM unnest($3::text[], $4::text[]) AS u(provider, subject)
     ON CONFLICT (client_id, provider, subject) DO NOTHING`,
    [clientId, endpointId, identities.map((i) => i.provider), identities.map((i) => i.subject)],
  );
}

/**
 * Edges cache credential verdicts per credentials_version (docs/visitor-auth.md): every client write (insert, update,
 * delete) moves it on, and touches the endpoint. A caller needing the feed version that carries the change runs its
 * transaction through transactionWithFeedVersion (feed-changes.ts). No settings row means mode none, where no
 * credential is checked and nothing is cached.
 */
async function clientCredentialsChanged(tx: Queryable, endpointId: number): Promise<void> {
  await tx.query('UPDATE endpoint_auth_settings SET credentials_version = credentials_version + 1, updated_at = now() WHERE endpoint_id = $1', [endpointId]);
  touch(tx, { endpoint: endpointId });
}

/**
 * Inserts a client with its identities and the endpoint's default roles. Returns its id. Collisions
 * should have been ruled out by findCollision; a race past it throws the unique violation.
 */
export async function insertClient(tx: Queryable, endpointId: number, c: ClientInsert): Promise<number> {
  const { rows } = await tx.query<{ id: number }>(
    `INSERT INTO rbac_clients (endpoint_id, identifier, display_name, email, username, password_hash, token_digest, status, registration_source, metadata)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb) RETURNING id`,
    [endpointId, c.identifier, c.displayName, c.email, c.username, c.passwordHash, c.tokenDigest, c.status, c.registrationSource, JSON.stringify(c.metadata)],
  );
  const id = Number(rows[0].id);
  await linkIdentities(tx, endpointId, id, c.identities);
  await assignDefaultRoles(tx, endpointId, id);
  await clientCredentialsChanged(tx, endpointId);
  return id;
}

/**
 * Applies a patch to a client of the endpoint (the caller checked that it exists and ruled out collisions). A client
 * leaving `invited` takes its pending invite with it: the token must not turn an active client back into a form.
 */
export async function updateClient(tx: Queryable, endpointId: number, clientId: number, p: ClientPatch): Promise<void> {
  await tx.query(
    `UPDATE rbac_clients SET
       display_name = COALESCE($3, display_name),
       email = CASE WHEN $4::boolean THEN $5 ELSE email END,
       status = COALESCE($6, status),
       registration_source = COALESCE($7, registration_source),
       username = CASE WHEN $8::boolean THEN $9 ELSE username END,
       password_hash = CASE WHEN $8::boolean THEN $10 ELSE password_hash END,
       token_digest = COALESCE($11, token_digest),
       metadata = COALESCE($12::jsonb, metadata),
       updated_at = now()
     WHERE endpoint_id = $1 AND id = $2`,
    [
      endpointId,
      clientId,
      p.displayName ?? null,
      p.email !== undefined,
      p.email ?? null,
      p.status ?? null,
      p.registrationSource ?? null,
      p.credentials !== undefined,
      p.credentials?.username ?? null,
      p.credentials?.passwordHash ?? null,
      p.tokenDigest ?? null,
      p.metadata === undefined ? null : JSON.stringify(p.metadata),
    ],
  );
  if (p.identities !== undefined) {
    await tx.query('DELETE FROM rbac_client_identities WHERE client_id = $1', [clientId]);
    await linkIdentities(tx, endpointId, clientId, p.identities);
  }
  if (p.addIdentities !== undefined) await linkIdentities(tx, endpointId, clientId, p.addIdentities);
  if (p.status !== undefined && p.status !== 'invited') {
    await tx.query('DELETE FROM rbac_invites WHERE client_id = $1 AND redeemed_at IS NULL', [clientId]);
  }
  await clientCredentialsChanged(tx, endpointId);
}

/** The client's status, row-locked; null when it is not a client of the endpoint. */
export async function lockClient(tx: Queryable, endpointId: number, clientId: number): Promise<{ status: RbacClientStatus; email: string | null } | null> {
  const { rows } = await tx.query<{ status: RbacClientStatus; email: string | null }>(
    'SELECT status, email FROM rbac_clients WHERE endpoint_id = $1 AND id = $2 FOR UPDATE',
    [endpointId, clientId],
  );
  return rows[0] ?? null;
}

/** Deletes a client (memberships, identities and invite cascade); false when it is not a client of the endpoint. */
export async function deleteClient(tx: Queryable, endpointId: number, clientId: number): Promise<boolean> {
  const { rowCount } = await tx.query('DELETE FROM rbac_clients WHERE endpoint_id = $1 AND id = $2', [endpointId, clientId]);
  if (rowCount === 0) return false;
  await clientCredentialsChanged(tx, endpointId);
  return true;
}

// ---------------------------------------------------------------------------------------------------------------
// Invites
// ---------------------------------------------------------------------------------------------------------------

export interface InviteRow {
  id: number;
  client_id: number;
  expires_at: Date;
  redeemed_at: Date | null;
  /** The placeholder client's. */
  status: RbacClientStatus;
  email: string | null;
}

export async function insertInvite(tx: Queryable, endpointId: number, clientId: number, digest: string, expiresAt: Date): Promise<{ expires_at: Date }> {
  const { rows } = await tx.query<{ expires_at: Date }>(
    'INSERT INTO rbac_invites (endpoint_id, client_id, token_digest, expires_at) VALUES ($1, $2, $3, $4) RETURNING expires_at',
    [endpointId, clientId, digest, expiresAt.toISOString()],
  );
  return rows[0];
}

/** The invite with this token digest on the endpoint, its row and the placeholder client's locked (single use). */
export async function lockInvite(tx: Queryable, endpointId: number, digest: string): Promise<InviteRow | null> {
  const { rows } = await tx.query<InviteRow>(
    `SELECT i.id, i.client_id, i.expires_at, i.redeemed_at, c.status, c.email
     FROM rbac_invites i JOIN rbac_clients c ON c.id = i.client_id
     WHERE i.endpoint_id = $1 AND i.token_digest = $2 FOR UPDATE`,
    [endpointId, digest],
  );
  return rows[0] ? { ...rows[0], id: Number(rows[0].id), client_id: Number(rows[0].client_id) } : null;
}

export async function markInviteRedeemed(tx: Queryable, inviteId: number): Promise<void> {
  await tx.query('UPDATE rbac_invites SET redeemed_at = now() WHERE id = $1', [inviteId]);
}

// ---------------------------------------------------------------------------------------------------------------
// Self-registration setting
// ---------------------------------------------------------------------------------------------------------------

export interface SelfRegistration {
  enabled: boolean;
  /** Lower-case; empty: any verified e-mail (or none). */
  allowed_email_domains: string[];
}

export async function readSelfRegistration(q: Queryable, endpointId: number): Promise<SelfRegistration> {
  const { rows } = await q.query<{ enabled: boolean; domains: string[] }>(
    'SELECT self_registration_enabled AS enabled, self_registration_domains AS domains FROM endpoint_rbac_settings WHERE endpoint_id = $1',
    [endpointId],
  );
  return rows[0] ? { enabled: rows[0].enabled, allowed_email_domains: rows[0].domains } : { enabled: false, allowed_email_domains: [] };
}

export async function writeSelfRegistration(tx: Queryable, endpointId: number, s: SelfRegistration): Promise<void> {
  await tx.query(
    `INSERT INTO endpoint_rbac_settings (endpoint_id, self_registration_enabled, self_registration_domains) VALUES ($1, $2, $3::text[])
     ON CONFLICT (endpoint_id) DO UPDATE SET self_registration_enabled = EXCLUDED.self_registration_enabled,
       self_registration_domains = EXCLUDED.self_registration_domains, updated_at = now()`,
    [endpointId, s.enabled, s.allowed_email_domains],
  );
  touch(tx, { endpoint: endpointId });
}

// ---------------------------------------------------------------------------------------------------------------
// last_used_at, from the uses edges report (ids `rbac-client:<id>` in the heartbeat's credential_use).
// ---------------------------------------------------------------------------------------------------------------

/** As recordCredentialUse (visitor-auth.ts): last_used_at only moves forward, a time ahead of now is taken as now. */
export async function recordClientUse(q: Queryable, uses: ReadonlyArray<readonly [number, Date]>): Promise<number> {
  if (uses.length === 0) return 0;
  const res = await q.query(
    `UPDATE rbac_clients c SET last_used_at = GREATEST(coalesce(c.last_used_at, '-infinity'::timestamptz), LEAST(u.at, now()))
     FROM unnest($1::bigint[], $2::timestamptz[]) AS u(id, at)
     WHERE c.id = u.id AND (c.last_used_at IS NULL OR c.last_used_at < LEAST(u.at, now()))`,
    [uses.map(([id]) => id), uses.map(([, at]) => at.toISOString())],
  );
  return res.rowCount;
}
