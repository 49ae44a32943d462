// RBAC roles and memberships of an endpoint, and the overview (docs/api.md "RBAC", docs/rbac.md "Roles",
// "Memberships"). Permissions are validated into the canonical form the edge compiles; every write publishes the endpoint.
import { Type } from '@sinclair/typebox';
import { fail } from '../../shared/errors.ts';
import type { Permission } from '../../shared/permissions.ts';
import {
  canonicalRbacPermissions,
  isZeroPermissions,
  MAX_RBAC_ENTRIES,
  MAX_RBAC_HEADER_VALUE_LENGTH,
  MAX_RBAC_METADATA_VALUE_LENGTH,
  MAX_RBAC_METHOD_LENGTH,
  MAX_RBAC_PATH_LENGTH,
  MAX_RBAC_RATE_LIMIT_RPS,
  RbacPermissionsError,
  type RbacPermissionsInput,
} from '../../shared/rbac-permissions.ts';
import { Strict, Timestamp, Nullable } from '../../shared/schema.ts';
import { CONTROL_CHARS } from '../../shared/match/condition.ts';
import { isUniqueViolation, type Queryable } from '../../store/db.ts';
import type { EndpointRow } from '../../store/endpoints.ts';
import * as store from '../../store/rbac.ts';
import { MAX_ROLES_PER_ENDPOINT, ROLE_NAME_KEY, type RbacMembershipRow, type RbacRoleInput, type RbacRoleRow } from '../../store/rbac.ts';
import type { Caller } from '../caller.ts';
import { endpointForCaller, requireEndpointEntitlement } from '../endpoint-access.ts';
import { int64Param, type ControlApp, type ControlDeps } from '../http.ts';
import { ErrorBody, ErrorResponses, iso, RbacClientView, rbacClientView } from '../views.ts';

const FEATURE = 'rbac' as const;

// ---------------------------------------------------------------------------------------------------------------
// Limits and validation
// ---------------------------------------------------------------------------------------------------------------

const MAX_NAME_LENGTH = 100;
const MAX_DESCRIPTION_LENGTH = 1000;
const MAX_PRIORITY = 1_000_000;
/** Ids in a body: a JSON number above 2^53 is already rounded when parsed, so it could name the wrong row. */
const MAX_ID = Number.MAX_SAFE_INTEGER;

/** A 400 naming the field, in the shape the schema validator's errors have. */
function invalid(field: string, reason: string) {
  return fail.invalid_request(`Invalid ${field}: ${reason}`, { field, reason });
}

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
 * A role body → the stored form. `forUpdate` (PUT, docs/api.md): omitted description, priority, is_default keep what the
 * role has, and so do permissions that are omitted, empty or all zero. On create, omitted fields take their defaults.
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

// ---------------------------------------------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------------------------------------------

const MethodList = (description: string) =>
  Type.Array(Type.String({ minLength: 1, maxLength: MAX_RBAC_METHOD_LENGTH }), { maxItems: MAX_RBAC_ENTRIES, description });
const PathList = (description: string) =>
  Type.Array(Type.String({ minLength: 1, maxLength: MAX_RBAC_PATH_LENGTH }), { maxItems: MAX_RBAC_ENTRIES, description });
const PATH_NOTE =
  'Patterns on the normalised path: exact (`/admin`), prefix ending in `/*` (`/api/*`: /api and everything below it), or a glob ' +
  '(`*` within one segment, `**` any depth: `/api/*/export`, `/files/**/report.pdf`); must start with "/"';

const PermissionsBody = Strict(
  {
    allowed_methods: Type.Optional(MethodList('Upper-case method tokens (RFC 9110 §9.1); "*" means any method')),
    denied_methods: Type.Optional(MethodList('Upper-case method tokens; a deny beats an allow of the same role')),
    allowed_paths: Type.Optional(PathList(PATH_NOTE)),
    denied_paths: Type.Optional(PathList('As allowed_paths; a deny beats an allow of the same role')),
    rate_limit_rps: Type.Optional(
      Type.Integer({ minimum: 0, maximum: MAX_RBAC_RATE_LIMIT_RPS, description: 'Requests per second for a client whose request this role decides; 0: none' }),
    ),
    headers: Type.Optional(
      Type.Record(Type.String(), Type.String({ maxLength: MAX_RBAC_HEADER_VALUE_LENGTH }), {
        description:
          `At most ${MAX_RBAC_ENTRIES}: header name → value, set on the forwarded request when this role decides (names lower-cased; ` +
          'never a hop-by-hop, framing, credential or edge-owned name)',
      }),
    ),
    metadata: Type.Optional(
      Type.Record(Type.String(), Type.String({ maxLength: MAX_RBAC_METADATA_VALUE_LENGTH }), { description: `At most ${MAX_RBAC_ENTRIES} strings; for the API only` }),
    ),
  },
  { description: 'Omitted sub-fields are empty' },
);

const RoleBodySchema = Strict({
  name: Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH, description: 'Unique per endpoint' }),
  description: Type.Optional(Type.String({ maxLength: MAX_DESCRIPTION_LENGTH })),
  priority: Type.Optional(Type.Integer({ minimum: -MAX_PRIORITY, maximum: MAX_PRIORITY, description: 'Higher wins when several roles of a client decide; default 0' })),
  is_default: Type.Optional(Type.Boolean({ description: 'Given to new clients (API-created, invited or self-registered); default false' })),
  permissions: Type.Optional(PermissionsBody),
});

const PermissionsView = Type.Object({
  allowed_methods: Type.Array(Type.String()),
  denied_methods: Type.Array(Type.String()),
  allowed_paths: Type.Array(Type.String()),
  denied_paths: Type.Array(Type.String()),
  rate_limit_rps: Type.Integer(),
  headers: Type.Record(Type.String(), Type.String()),
  metadata: Type.Record(Type.String(), Type.String()),
});

const RoleView = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    description: Type.Optional(Type.String({ description: 'Omitted when empty' })),
    priority: Type.Integer(),
    is_default: Type.Boolean(),
    permissions: PermissionsView,
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { description: 'RBAC role' },
);

const MembershipView = Type.Object(
  {
    id: Type.Integer(),
    client_id: Type.Integer(),
    role_id: Type.Integer(),
    assigned_by: Nullable(Type.Integer({ description: 'The user who assigned it; null for default roles given on creation' })),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { description: 'RBAC membership' },
);

const MembershipBody = Strict({
  client_id: Type.Integer({ minimum: 1, maximum: MAX_ID, description: 'A client of this endpoint' }),
  role_id: Type.Integer({ minimum: 1, maximum: MAX_ID, description: 'A role of this endpoint' }),
});

const OverviewView = Type.Object({
  endpoint_id: Type.Integer(),
  clients: Type.Array(RbacClientView),
  roles: Type.Array(RoleView),
  memberships: Type.Array(MembershipView),
});

const EndpointParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }) });
const RoleParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }), role_id: Type.String({ description: 'Role id (int64)' }) });
const Errors409 = { ...ErrorResponses, 409: ErrorBody };

function roleView(r: RbacRoleRow) {
  return {
    id: r.id,
    name: r.name,
    ...(r.description === '' ? {} : { description: r.description }),
    priority: r.priority,
    is_default: r.is_default,
    permissions: r.permissions,
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
  };
}

function membershipView(m: RbacMembershipRow) {
  return { id: m.id, client_id: m.client_id, role_id: m.role_id, assigned_by: m.assigned_by, created_at: iso(m.created_at), updated_at: iso(m.updated_at) };
}

// ---------------------------------------------------------------------------------------------------------------
// Access
// ---------------------------------------------------------------------------------------------------------------

const roleNotFound = () => fail.not_found('RBAC role not found');

/** The role id of the path; 400 unless a positive int64 (one beyond 2^53 reads as 0, which no row has: 404). */
function roleIdParam(value: string): number {
  return int64Param(value, 'role_id');
}

// ---------------------------------------------------------------------------------------------------------------
// Routes
// ---------------------------------------------------------------------------------------------------------------

export function rbacRoleRoutes(app: ControlApp, { db, config }: ControlDeps): void {
  const TAGS = ['rbac'];
  const WRITE_NOTE = 'Needs the rbac plan entitlement (403 entitlement_required); a paused endpoint is read-only (409 quota_paused).';

  /** A read: endpoints:read only, no entitlement (docs/api.md: listing and the overview stay readable on any plan). */
  async function readable(caller: Caller, uuid: string): Promise<EndpointRow> {
    caller.requirePermission('endpoints:read');
    return endpointForCaller(db, caller, uuid);
  }

  /** A write: permission, then (for callers in their own account) the plan, before any query; the endpoint row locked. */
  function precheck(caller: Caller, permission: Permission): void {
    caller.requirePermission(permission);
    // Admins may act on endpoints of other accounts, whose plan decides (checked once the endpoint is known).
    if (!caller.isAdmin) caller.requireEntitlement(FEATURE);
  }

  async function writable(tx: Queryable, caller: Caller, uuid: string, permission: Permission): Promise<EndpointRow> {
    precheck(caller, permission);
    const endpoint = await endpointForCaller(tx, caller, uuid, { writable: true });
    await requireEndpointEntitlement(tx, caller, config.plans, endpoint, FEATURE);
    return endpoint;
  }

  app.get(
    '/v1/endpoints/:id/rbac',
    {
      schema: {
        summary: 'RBAC overview: clients, roles and memberships',
        description: 'Read from one snapshot of the store. Needs endpoints:read; no plan entitlement.',
        tags: TAGS,
        params: EndpointParams,
        response: { 200: OverviewView, ...ErrorResponses },
      },
    },
    async (req) => {
      const endpoint = await readable(req.caller, req.params.id);
      const { clients, roles, memberships } = await store.readOverview(db, endpoint.id);
      return { endpoint_id: endpoint.id, clients: clients.map(rbacClientView), roles: roles.map(roleView), memberships: memberships.map(membershipView) };
    },
  );

  app.get(
    '/v1/endpoints/:id/rbac/roles',
    {
      schema: {
        summary: 'List RBAC roles',
        description: 'By id. Member counts are not embedded (see …/rbac/memberships). Needs endpoints:read; no plan entitlement.',
        tags: TAGS,
        params: EndpointParams,
        response: { 200: Type.Array(RoleView), ...ErrorResponses },
      },
    },
    async (req) => {
      const endpoint = await readable(req.caller, req.params.id);
      return (await store.listRoles(db, endpoint.id)).map(roleView);
    },
  );

  app.post(
    '/v1/endpoints/:id/rbac/roles',
    {
      schema: {
        summary: 'Create an RBAC role',
        description:
          'name is required and unique per endpoint (409 already_exists). Omitted fields: description "", priority 0, is_default false, ' +
          `empty permissions. At most ${MAX_ROLES_PER_ENDPOINT} roles per endpoint; an endpoint with a role enforces RBAC on every visitor ` +
          `(docs/rbac.md). Effective from the next request. Needs endpoints:write. ${WRITE_NOTE}`,
        tags: TAGS,
        params: EndpointParams,
        body: RoleBodySchema,
        response: { 201: RoleView, ...Errors409 },
      },
    },
    async (req, reply) => {
      precheck(req.caller, 'endpoints:write');
      const role = normalizeRole(req.body, false);
      const { endpoint, created } = await db.transaction(async (tx) => {
        const endpoint = await writable(tx, req.caller, req.params.id, 'endpoints:write');
        const count = await store.countRoles(tx, endpoint.id);
        if (count >= MAX_ROLES_PER_ENDPOINT) {
          throw fail.invalid_request(`An endpoint has at most ${MAX_ROLES_PER_ENDPOINT} RBAC roles`, { limit: MAX_ROLES_PER_ENDPOINT, count });
        }
        try {
          return { endpoint, created: await store.insertRole(tx, endpoint.id, role) };
        } catch (err) {
          if (isUniqueViolation(err, ROLE_NAME_KEY)) throw fail.already_exists(`The endpoint already has a role named "${role.name}"`, { field: 'name' });
          throw err;
        }
      });
      return reply.status(201).header('location', `/v1/endpoints/${endpoint.uuid}/rbac/roles/${created.id}`).send(roleView(created));
    },
  );

  app.put(
    '/v1/endpoints/:id/rbac/roles/:role_id',
    {
      schema: {
        summary: 'Update an RBAC role',
        description:
          'The fields of create; name is required. Omitted description, priority or is_default keep their values; permissions omitted, ' +
          'empty or all zero keep the stored permissions, otherwise they replace them whole. A name another role of the endpoint has is ' +
          `a 400 (docs/api.md: an update failure, not 409). Effective from the next request of every client holding the role. Needs endpoints:update. ${WRITE_NOTE}`,
        tags: TAGS,
        params: RoleParams,
        body: RoleBodySchema,
        response: { 200: RoleView, ...Errors409 },
      },
    },
    async (req) => {
      precheck(req.caller, 'endpoints:update');
      const roleId = roleIdParam(req.params.role_id);
      const role = normalizeRole(req.body, true);
      const updated = await db.transaction(async (tx) => {
        const endpoint = await writable(tx, req.caller, req.params.id, 'endpoints:update');
        try {
          return await store.updateRole(tx, endpoint.id, roleId, role);
        } catch (err) {
          if (isUniqueViolation(err, ROLE_NAME_KEY)) throw invalid('name', `the endpoint already has a role named "${role.name}"`);
          throw err;
        }
      });
      if (!updated) throw roleNotFound();
      return roleView(updated);
    },
  );

  app.delete(
    '/v1/endpoints/:id/rbac/roles/:role_id',
    {
      schema: {
        summary: 'Delete an RBAC role',
        description:
          'Its memberships go with it. Deleting the last role turns RBAC off for the endpoint (docs/rbac.md). Effective from the next ' +
          `request. Needs endpoints:delete. ${WRITE_NOTE}`,
        tags: TAGS,
        params: RoleParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...Errors409 },
      },
    },
    async (req, reply) => {
      precheck(req.caller, 'endpoints:delete');
      const roleId = roleIdParam(req.params.role_id);
      const deleted = await db.transaction(async (tx) => {
        const endpoint = await writable(tx, req.caller, req.params.id, 'endpoints:delete');
        return store.deleteRole(tx, endpoint.id, roleId);
      });
      if (!deleted) throw roleNotFound();
      return reply.status(204).send(null);
    },
  );

  app.get(
    '/v1/endpoints/:id/rbac/memberships',
    {
      schema: {
        summary: 'List RBAC memberships',
        description: 'Every (client, role) pair of the endpoint, by id. Needs endpoints:read; no plan entitlement.',
        tags: TAGS,
        params: EndpointParams,
        response: { 200: Type.Array(MembershipView), ...ErrorResponses },
      },
    },
    async (req) => {
      const endpoint = await readable(req.caller, req.params.id);
      return (await store.listMemberships(db, endpoint.id)).map(membershipView);
    },
  );

  app.post(
    '/v1/endpoints/:id/rbac/memberships',
    {
      schema: {
        summary: 'Give a client a role',
        description:
          'Strict. 200 with the endpoint’s full memberships array. 404 when the client or the role is not on this endpoint; 409 ' +
          `when the client already holds the role (nothing changes). Effective from the client’s next request. Needs endpoints:write. ${WRITE_NOTE}`,
        tags: TAGS,
        params: EndpointParams,
        body: MembershipBody,
        response: { 200: Type.Array(MembershipView), ...Errors409 },
      },
    },
    async (req) => {
      precheck(req.caller, 'endpoints:write');
      const { client_id: clientId, role_id: roleId } = req.body;
      const memberships = await db.transaction(async (tx) => {
        const endpoint = await writable(tx, req.caller, req.params.id, 'endpoints:write');
        switch (await store.addMembership(tx, endpoint.id, clientId, roleId, req.caller.user.id)) {
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
      return memberships.map(membershipView);
    },
  );

  app.delete(
    '/v1/endpoints/:id/rbac/memberships',
    {
      schema: {
        summary: 'Take a role from a client',
        description:
          'The pair is in the body, not the path. 200 with the endpoint’s full memberships array (not 204); a pair that does not exist ' +
          'is still 200, the list unchanged. A client left without roles still authenticates but is granted nothing. Effective from the ' +
          `client’s next request. Needs endpoints:delete. ${WRITE_NOTE}`,
        tags: TAGS,
        params: EndpointParams,
        body: MembershipBody,
        response: { 200: Type.Array(MembershipView), ...Errors409 },
      },
    },
    async (req) => {
      precheck(req.caller, 'endpoints:delete');
      const { client_id: clientId, role_id: roleId } = req.body;
      const memberships = await db.transaction(async (tx) => {
        const endpoint = await writable(tx, req.caller, req.params.id, 'endpoints:delete');
        await store.removeMembership(tx, endpoint.id, clientId, roleId);
        return store.listMemberships(tx, endpoint.id);
      });
      return memberships.map(membershipView);
    },
  );
}
