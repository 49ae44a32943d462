// RBAC roles and memberships of an endpoint as operations (docs/rbac.md "Roles", "Memberships"): permissions are
// validated into the canonical form the edge compiles; every write touches the endpoint through the store.
import { fail, invalid } from '../../shared/errors.ts';
import { canonicalRbacPermissions, isZeroPermissions, RbacPermissionsError, type RbacPermissionsInput } from '../../shared/rbac-permissions.ts';
import { CONTROL_CHARS } from '../../shared/match/condition.ts';
import { isUniqueViolation, type Queryable } from '../../store/db.ts';
import type { EndpointRow } from '../../store/endpoints.ts';
import * as store from '../../store/rbac.ts';
import { MAX_ROLES_PER_ENDPOINT, ROLE_NAME_KEY, type RbacClientRow, type RbacMembershipRow, type RbacRoleInput, type RbacRoleRow } from '../../store/rbac.ts';
import type { Caller } from '../caller.ts';
import { endpointForCaller, requireEndpointEntitlement } from '../endpoint-access.ts';
import { int64Param, type ControlDeps } from '../http.ts';

const FEATURE = 'rbac' as const;

export const MAX_NAME_LENGTH = 100;
export const MAX_DESCRIPTION_LENGTH = 1000;
export const MAX_PRIORITY = 1_000_000;
/** Ids in a body: a JSON number above 2^53 is already rounded when parsed, so it could name the wrong row. */
export const MAX_ID = Number.MAX_SAFE_INTEGER;

export interface RoleBody {
  name: string;
  description?: string;
  priority?: number;
  is_default?: boolean;
  permissions?: RbacPermissionsInput;
}

function roleName(name: string): string {
  if (CONTROL_CHARS.test(name) || name.includes('\t')) throw invalid('name', 'control characters are not allowed');
  if (name.trim() === '') throw invalid('name', 'must not be blank');
  return name;
}

/**
 * A role body → the stored form. `forUpdate` (PUT, docs/api.md): omitted description, priority, is_default keep what
 * the role has, and so do permissions that are omitted, empty or all zero. On create, omitted fields take their defaults.
 */
export function normalizeRole(body: RoleBody, forUpdate: boolean): RbacRoleInput {
  if (body.description !== undefined && CONTROL_CHARS.test(body.description.replace(/[\n\t]/g, ''))) {
    throw invalid('description', 'control characters other than newline and tab are not allowed');
  }
  let permissions: RbacRoleInput['permissions'];
  try {
    permissions = canonicalRbacPermissions(body.permissions);
  } catch (err) {
    if (err instanceof RbacPermissionsError) throw invalid(err.field, err.reason);
    throw err;
  }
  if (forUpdate && isZeroPermissions(permissions)) permissions = undefined;
  return { name: roleName(body.name), description: body.description, priority: body.priority, is_default: body.is_default, permissions };
}

const roleNotFound = () => fail.not_found('RBAC role not found');

/** The role id of the path; 400 unless a positive int64 (one beyond 2^53 reads as 0, which no row has: 404). */
function roleIdParam(value: string): number {
  return int64Param(value, 'role_id');
}

export interface Overview {
  endpoint: EndpointRow;
  clients: RbacClientRow[];
  roles: RbacRoleRow[];
  memberships: RbacMembershipRow[];
}

/** The operations on one endpoint's roles and memberships. The route has checked the caller's permission (config.permission). */
export function rbacRoleService({ db, config }: Pick<ControlDeps, 'db' | 'config'>) {
  /** A read: no entitlement (listing and the overview stay readable on any plan). */
  const readable = (caller: Caller, uuid: string): Promise<EndpointRow> => endpointForCaller(db, caller, uuid);

  /** A write by a caller in their own account: the plan is refused before any query (admins: once the endpoint is known). */
  function precheck(caller: Caller): void {
    if (!caller.isAdmin) caller.requireEntitlement(FEATURE);
  }

  async function writable(tx: Queryable, caller: Caller, uuid: string): Promise<EndpointRow> {
    const endpoint = await endpointForCaller(tx, caller, uuid, { writable: true });
    await requireEndpointEntitlement(tx, caller, config.plans, endpoint, FEATURE);
    return endpoint;
  }

  return {
    async overview(caller: Caller, uuid: string): Promise<Overview> {
      const endpoint = await readable(caller, uuid);
      return { endpoint, ...(await store.readOverview(db, endpoint.id)) };
    },

    async listRoles(caller: Caller, uuid: string): Promise<RbacRoleRow[]> {
      return store.listRoles(db, (await readable(caller, uuid)).id);
    },

    async createRole(caller: Caller, uuid: string, body: RoleBody): Promise<{ endpoint: EndpointRow; created: RbacRoleRow }> {
      precheck(caller);
      const role = normalizeRole(body, false);
      return db.transaction(async (tx) => {
        const endpoint = await writable(tx, caller, uuid);
        const count = await store.countRoles(tx, endpoint.id);
        if (count >= MAX_ROLES_PER_ENDPOINT) {
          throw fail.invalid_request(`An endpoint has at most ${MAX_ROLES_PER_ENDPOINT} RBAC roles`, { field: 'roles', reason: `at most ${MAX_ROLES_PER_ENDPOINT} per endpoint`, limit: MAX_ROLES_PER_ENDPOINT, count });
        }
        try {
          return { endpoint, created: await store.insertRole(tx, endpoint.id, role) };
        } catch (err) {
          if (isUniqueViolation(err, ROLE_NAME_KEY)) throw fail.already_exists(`The endpoint already has a role named "${role.name}"`, { field: 'name' });
          throw err;
        }
      });
    },

    /** A name another role has is a 400 here (docs/api.md: an update failure, not 409). */
    async updateRole(caller: Caller, uuid: string, rawRoleId: string, body: RoleBody): Promise<RbacRoleRow> {
      precheck(caller);
      const roleId = roleIdParam(rawRoleId);
      const role = normalizeRole(body, true);
      const updated = await db.transaction(async (tx) => {
        const endpoint = await writable(tx, caller, uuid);
        try {
          return await store.updateRole(tx, endpoint.id, roleId, role);
        } catch (err) {
          if (isUniqueViolation(err, ROLE_NAME_KEY)) throw invalid('name', `the endpoint already has a role named "${role.name}"`);
          throw err;
        }
      });
      if (!updated) throw roleNotFound();
      return updated;
    },

    async deleteRole(caller: Caller, uuid: string, rawRoleId: string): Promise<void> {
      precheck(caller);
      const roleId = roleIdParam(rawRoleId);
      const deleted = await db.transaction(async (tx) => store.deleteRole(tx, (await writable(tx, caller, uuid)).id, roleId));
      if (!deleted) throw roleNotFound();
    },

    async listMemberships(caller: Caller, uuid: string): Promise<RbacMembershipRow[]> {
      return store.listMemberships(db, (await readable(caller, uuid)).id);
    },

    /** The endpoint's memberships after giving the client the role. */
    async addMembership(caller: Caller, uuid: string, clientId: number, roleId: number): Promise<RbacMembershipRow[]> {
      precheck(caller);
      return db.transaction(async (tx) => {
        const endpoint = await writable(tx, caller, uuid);
        switch (await store.addMembership(tx, endpoint.id, clientId, roleId, caller.user.id)) {
          case 'client_missing':
            throw fail.not_found('RBAC client not found on this endpoint', { field: 'client_id' });
          case 'role_missing':
            throw fail.not_found('RBAC role not found on this endpoint', { field: 'role_id' });
          case 'exists':
            throw fail.already_exists('The client already holds this role', { client_id: clientId, role_id: roleId });
          case 'added':
            return store.listMemberships(tx, endpoint.id);
        }
      });
    },

    /** The endpoint's memberships after taking the role from the client; a pair that does not exist changes nothing. */
    async removeMembership(caller: Caller, uuid: string, clientId: number, roleId: number): Promise<RbacMembershipRow[]> {
      precheck(caller);
      return db.transaction(async (tx) => {
        const endpoint = await writable(tx, caller, uuid);
        await store.removeMembership(tx, endpoint.id, clientId, roleId);
        return store.listMemberships(tx, endpoint.id);
      });
    },
  };
}
