// Per-endpoint RBAC at rest (docs/rbac.md): roles, memberships and the overview read, plus the client reads other
// RBAC code shares. Uniqueness is the constraints' job; every write touches the endpoint (docs/feed.md).
import type { Queryable } from './db.ts';
import { touch } from './feed-changes.ts';
import { fillRbacPermissions } from '../shared/rbac-permissions.ts';
import type { RbacClientStatus, RbacPermissionsConfig } from '../shared/snapshot.ts';

/** Bounds the API enforces (400 beyond them): every role is compiled into every client's decision on every edge. */
export const MAX_ROLES_PER_ENDPOINT = 100;

/** The unique indexes of migration 009 that API answers rest on (isUniqueViolation names them). */
export const ROLE_NAME_KEY = 'rbac_roles_name_key';
export const MEMBERSHIP_PAIR_KEY = 'rbac_memberships_pair_key';

/** A role's permissions as stored: the canonical form edges compile, plus `metadata`, which only the API shows. */
export type StoredRbacPermissions = RbacPermissionsConfig & { metadata: Record<string, string> };

export interface RbacRoleRow {
  id: number;
  endpoint_id: number;
  name: string;
  description: string;
  priority: number;
  is_default: boolean;
  permissions: StoredRbacPermissions;
  created_at: Date;
  updated_at: Date;
}

/** A role as the API hands it over, validated and canonical. Update leaves a field as it is when it is undefined. */
export interface RbacRoleInput {
  name: string;
  description?: string;
  priority?: number;
  is_default?: boolean;
  permissions?: StoredRbacPermissions;
}

/** A client as the API shows it: never a password hash or token digest, only whether there is one. */
export interface RbacClientRow {
  id: number;
  endpoint_id: number;
  identifier: string;
  display_name: string;
  email: string | null;
  username: string | null;
  status: RbacClientStatus;
  registration_source: 'admin' | 'self' | 'invite' | 'sso';
  has_password: boolean;
  has_token: boolean;
  has_oauth: boolean;
  identities: { provider: string; subject: string }[];
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  last_used_at: Date | null;
}

export interface RbacMembershipRow {
  id: number;
  client_id: number;
  role_id: number;
  assigned_by: number | null;
  created_at: Date;
  updated_at: Date;
}

/** Both drivers parse json and jsonb, but a driver configured otherwise would hand back text; accept either. */
const parsed = <T>(value: T | string): T => (typeof value === 'string' ? (JSON.parse(value) as T) : value);

// ---------------------------------------------------------------------------------------------------------------
// Roles
// ---------------------------------------------------------------------------------------------------------------

const ROLE_COLUMNS = 'id, endpoint_id, name, description, priority, is_default, permissions, created_at, updated_at';

/** Stored rows may predate a sub-field (or hold `{}`, the column's default): the empty values filled in. */
export const fullPermissions = fillRbacPermissions;

function roleRow(row: RbacRoleRow): RbacRoleRow {
  return { ...row, permissions: fullPermissions(parsed(row.permissions)) };
}

/** The endpoint's roles by id (creation order). */
export async function listRoles(db: Queryable, endpointId: number): Promise<RbacRoleRow[]> {
  const { rows } = await db.query<RbacRoleRow>(`SELECT ${ROLE_COLUMNS} FROM rbac_roles WHERE endpoint_id = $1 ORDER BY id`, [endpointId]);
  return rows.map(roleRow);
}

/** One role of the endpoint; null when missing or on another endpoint. */
export async function findRole(db: Queryable, endpointId: number, roleId: number): Promise<RbacRoleRow | null> {
  const { rows } = await db.query<RbacRoleRow>(`SELECT ${ROLE_COLUMNS} FROM rbac_roles WHERE endpoint_id = $1 AND id = $2`, [endpointId, roleId]);
  return rows[0] ? roleRow(rows[0]) : null;
}

/** Call with the endpoint row locked, so count-then-insert cannot overrun the bound under concurrency. */
export async function countRoles(tx: Queryable, endpointId: number): Promise<number> {
  const { rows } = await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM rbac_roles WHERE endpoint_id = $1', [endpointId]);
  return rows[0].n;
}

/**
 * Inserts a role and touches the endpoint. A duplicate name throws the unique violation of ROLE_NAME_KEY (the
 * route maps it); fields left undefined take the column defaults.
 */
export async function insertRole(tx: Queryable, endpointId: number, role: RbacRoleInput): Promise<RbacRoleRow> {
  const { rows } = await tx.query<RbacRoleRow>(
    `INSERT INTO rbac_roles (endpoint_id, name, description, priority, is_default, permissions)
     VALUES ($1, $2, $3, $4, $5, $6::jsonb) RETURNING ${ROLE_COLUMNS}`,
    [endpointId, role.name, role.description ?? '', role.priority ?? 0, role.is_default ?? false, JSON.stringify(role.permissions ?? fullPermissions(null))],
  );
  touch(tx, { endpoint: endpointId });
  return roleRow(rows[0]);
}

/**
 * Updates a role: the name always, other fields only when given (docs/api.md: omitted priority/is_default keep theirs;
 * the API passes no permissions for an empty or zeroed object). Null when the role is not on this endpoint; a name
 * another role has throws the unique violation of ROLE_NAME_KEY.
 */
export async function updateRole(tx: Queryable, endpointId: number, roleId: number, role: RbacRoleInput): Promise<RbacRoleRow | null> {
  const { rows } = await tx.query<RbacRoleRow>(
    `UPDATE rbac_roles SET name = $3, description = COALESCE($4, description), priority = COALESCE($5, priority),
       is_default = COALESCE($6, is_default), permissions = COALESCE($7::jsonb, permissions), updated_at = now()
     WHERE endpoint_id = $1 AND id = $2 RETURNING ${ROLE_COLUMNS}`,
    [
      endpointId,
      roleId,
      role.name,
      role.description ?? null,
      role.priority ?? null,
      role.is_default ?? null,
      role.permissions === undefined ? null : JSON.stringify(role.permissions),
    ],
  );
  if (!rows[0]) return null;
  touch(tx, { endpoint: endpointId });
  return roleRow(rows[0]);
}

/** Deletes a role (its memberships cascade) and touches the endpoint; false when it is not on this endpoint. */
export async function deleteRole(tx: Queryable, endpointId: number, roleId: number): Promise<boolean> {
  const { rowCount } = await tx.query('DELETE FROM rbac_roles WHERE endpoint_id = $1 AND id = $2', [endpointId, roleId]);
  if (rowCount === 0) return false;
  touch(tx, { endpoint: endpointId });
  return true;
}

/** The ids of the endpoint's default roles (is_default), which new clients receive. */
export async function defaultRoleIds(db: Queryable, endpointId: number): Promise<number[]> {
  const { rows } = await db.query<{ id: number }>('SELECT id FROM rbac_roles WHERE endpoint_id = $1 AND is_default ORDER BY id', [endpointId]);
  return rows.map((r) => r.id);
}

/**
 * Gives a new client the endpoint's default roles (docs/api.md: API-created and self-registered clients alike) and
 * returns their ids, touching the endpoint when it adds one (the client's own insert touches it too: one publish at
 * commit). A pair the client already holds is left as it is.
 */
export async function assignDefaultRoles(tx: Queryable, endpointId: number, clientId: number): Promise<number[]> {
  const { rows } = await tx.query<{ role_id: number }>(
    `INSERT INTO rbac_memberships (endpoint_id, client_id, role_id)
     SELECT $1, $2, r.id FROM rbac_roles r WHERE r.endpoint_id = $1 AND r.is_default
     ORDER BY r.id
     ON CONFLICT (client_id, role_id) DO NOTHING RETURNING role_id`,
    [endpointId, clientId],
  );
  if (rows.length > 0) touch(tx, { endpoint: endpointId });
  return rows.map((r) => r.role_id);
}

// ---------------------------------------------------------------------------------------------------------------
// Clients (reads shared with src/store/rbac-clients.ts, which writes them)
// ---------------------------------------------------------------------------------------------------------------

/** The client columns the API shows, for `FROM rbac_clients c`; identities as one JSON array per client. */
export const CLIENT_COLUMNS = `c.id, c.endpoint_id, c.identifier, c.display_name, c.email, c.username, c.status, c.registration_source,
  c.password_hash IS NOT NULL AS has_password, c.token_digest IS NOT NULL AS has_token,
  COALESCE((SELECT json_agg(json_build_object('provider', i.provider, 'subject', i.subject) ORDER BY i.created_at, i.provider, i.subject)
            FROM rbac_client_identities i WHERE i.client_id = c.id), '[]'::json) AS identities,
  c.metadata, c.created_at, c.updated_at, c.last_used_at`;

/** A row selected with CLIENT_COLUMNS → RbacClientRow (has_oauth: at least one linked identity). */
export function clientRow(row: Omit<RbacClientRow, 'has_oauth'> & { identities: RbacClientRow['identities'] | string }): RbacClientRow {
  const identities = parsed(row.identities);
  return { ...row, identities, metadata: parsed(row.metadata), has_oauth: identities.length > 0 };
}

/** The endpoint's clients by id. */
export async function listClients(db: Queryable, endpointId: number): Promise<RbacClientRow[]> {
  const { rows } = await db.query<Parameters<typeof clientRow>[0]>(`SELECT ${CLIENT_COLUMNS} FROM rbac_clients c WHERE c.endpoint_id = $1 ORDER BY c.id`, [endpointId]);
  return rows.map(clientRow);
}

/** One client of the endpoint; null when missing or on another endpoint. */
export async function findClient(db: Queryable, endpointId: number, clientId: number): Promise<RbacClientRow | null> {
  const { rows } = await db.query<Parameters<typeof clientRow>[0]>(`SELECT ${CLIENT_COLUMNS} FROM rbac_clients c WHERE c.endpoint_id = $1 AND c.id = $2`, [
    endpointId,
    clientId,
  ]);
  return rows[0] ? clientRow(rows[0]) : null;
}

// ---------------------------------------------------------------------------------------------------------------
// Memberships
// ---------------------------------------------------------------------------------------------------------------

const MEMBERSHIP_COLUMNS = 'id, client_id, role_id, assigned_by, created_at, updated_at';

/** The endpoint's memberships by id (assignment order). */
export async function listMemberships(db: Queryable, endpointId: number): Promise<RbacMembershipRow[]> {
  const { rows } = await db.query<RbacMembershipRow>(`SELECT ${MEMBERSHIP_COLUMNS} FROM rbac_memberships WHERE endpoint_id = $1 ORDER BY id`, [endpointId]);
  return rows;
}

export type AddMembershipOutcome = 'added' | 'client_missing' | 'role_missing' | 'exists';

/**
 * Gives a client a role, both of this endpoint; touches the endpoint when the pair is new. The pair's unique index
 * decides `exists` (ON CONFLICT, so concurrent adds of one pair cannot both succeed); when nothing was inserted, one
 * read says why.
 */
export async function addMembership(tx: Queryable, endpointId: number, clientId: number, roleId: number, assignedBy: number | null): Promise<AddMembershipOutcome> {
  const { rowCount } = await tx.query(
    `INSERT INTO rbac_memberships (endpoint_id, client_id, role_id, assigned_by)
     SELECT $1, c.id, r.id, $4 FROM rbac_clients c, rbac_roles r
     WHERE c.endpoint_id = $1 AND c.id = $2 AND r.endpoint_id = $1 AND r.id = $3
     ON CONFLICT (client_id, role_id) DO NOTHING`,
    [endpointId, clientId, roleId, assignedBy],
  );
  if (rowCount > 0) {
    touch(tx, { endpoint: endpointId });
    return 'added';
  }
  const { rows } = await tx.query<{ client: boolean; role: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM rbac_clients WHERE endpoint_id = $1 AND id = $2) AS client,
            EXISTS (SELECT 1 FROM rbac_roles WHERE endpoint_id = $1 AND id = $3) AS role`,
    [endpointId, clientId, roleId],
  );
  if (!rows[0].client) return 'client_missing';
  if (!rows[0].role) return 'role_missing';
  return 'exists';
}

/** Takes a role from a client; touches the endpoint only when the pair existed (docs/api.md: a missing pair changes nothing). */
export async function removeMembership(tx: Queryable, endpointId: number, clientId: number, roleId: number): Promise<boolean> {
  const { rowCount } = await tx.query('DELETE FROM rbac_memberships WHERE endpoint_id = $1 AND client_id = $2 AND role_id = $3', [endpointId, clientId, roleId]);
  if (rowCount === 0) return false;
  touch(tx, { endpoint: endpointId });
  return true;
}

// ---------------------------------------------------------------------------------------------------------------
// Overview
// ---------------------------------------------------------------------------------------------------------------

export interface RbacOverview {
  clients: RbacClientRow[];
  roles: RbacRoleRow[];
  memberships: RbacMembershipRow[];
}

/**
 * Everything GET …/rbac shows, read in one repeatable-read transaction: one snapshot for the three lists, so a
 * membership never names a client or role the same answer lacks.
 */
export async function readOverview(db: { transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> }, endpointId: number): Promise<RbacOverview> {
  return db.transaction(async (tx) => {
    await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
    const clients = await listClients(tx, endpointId);
    const roles = await listRoles(tx, endpointId);
    const memberships = await listMemberships(tx, endpointId);
    return { clients, roles, memberships };
  });
}
