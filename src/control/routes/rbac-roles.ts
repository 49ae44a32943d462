// RBAC roles and memberships of an endpoint, and the overview (docs/rbac.md "Roles", "Memberships"); each route a
// schema, its permission and one service call. Writes need the rbac entitlement; reads do not.
import { Type } from '@sinclair/typebox';
import { MAX_ROLES_PER_ENDPOINT } from '../../store/rbac.ts';
import type { ControlApp, ControlDeps } from '../http.ts';
import {
  EndpointParams,
  Errors409,
  MembershipBody,
  MembershipView,
  membershipView,
  OverviewView,
  RoleBodySchema,
  RoleParams,
  RoleView,
  roleView,
} from '../schemas/rbac-roles.ts';
import { rbacRoleService } from '../services/rbac-roles.ts';
import { ErrorResponses, rbacClientView } from '../views.ts';

const TAGS = ['rbac'];
const WRITE_NOTE = 'Needs the rbac plan entitlement (403 entitlement_required); a paused endpoint is read-only (409 quota_paused).';

export function rbacRoleRoutes(app: ControlApp, deps: ControlDeps): void {
  const rbac = rbacRoleService(deps);

  app.get(
    '/v1/endpoints/:id/rbac',
    {
      config: { permission: 'endpoints:read' },
      schema: {
        operationId: 'getRbacOverview',
        summary: 'RBAC overview: clients, roles and memberships',
        description: 'Read from one snapshot of the store. Needs endpoints:read; no plan entitlement.',
        tags: TAGS,
        params: EndpointParams,
        response: { 200: OverviewView, ...ErrorResponses },
      },
    },
    async (req) => {
      const { endpoint, clients, roles, memberships } = await rbac.overview(req.caller, req.params.id);
      return { endpoint_id: endpoint.id, clients: clients.map(rbacClientView), roles: roles.map(roleView), memberships: memberships.map(membershipView) };
    },
  );

  app.get(
    '/v1/endpoints/:id/rbac/roles',
    {
      config: { permission: 'endpoints:read' },
      schema: {
        operationId: 'listRbacRoles',
        summary: 'List RBAC roles',
        description: 'By id. Member counts are not embedded (see …/rbac/memberships). Needs endpoints:read; no plan entitlement.',
        tags: TAGS,
        params: EndpointParams,
        response: { 200: Type.Array(RoleView), ...ErrorResponses },
      },
    },
    async (req) => (await rbac.listRoles(req.caller, req.params.id)).map(roleView),
  );

  app.post(
    '/v1/endpoints/:id/rbac/roles',
    {
      config: { permission: 'endpoints:write' },
      schema: {
        operationId: 'createRbacRole',
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
      const { endpoint, created } = await rbac.createRole(req.caller, req.params.id, req.body);
      return reply.status(201).header('location', `/v1/endpoints/${endpoint.uuid}/rbac/roles/${created.id}`).send(roleView(created));
    },
  );

  app.put(
    '/v1/endpoints/:id/rbac/roles/:role_id',
    {
      config: { permission: 'endpoints:update' },
      schema: {
        operationId: 'updateRbacRole',
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
    async (req) => roleView(await rbac.updateRole(req.caller, req.params.id, req.params.role_id, req.body)),
  );

  app.delete(
    '/v1/endpoints/:id/rbac/roles/:role_id',
    {
      config: { permission: 'endpoints:delete' },
      schema: {
        operationId: 'deleteRbacRole',
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
      await rbac.deleteRole(req.caller, req.params.id, req.params.role_id);
      return reply.status(204).send(null);
    },
  );

  app.get(
    '/v1/endpoints/:id/rbac/memberships',
    {
      config: { permission: 'endpoints:read' },
      schema: {
        operationId: 'listRbacMemberships',
        summary: 'List RBAC memberships',
        description: 'Every (client, role) pair of the endpoint, by id. Needs endpoints:read; no plan entitlement.',
        tags: TAGS,
        params: EndpointParams,
        response: { 200: Type.Array(MembershipView), ...ErrorResponses },
      },
    },
    async (req) => (await rbac.listMemberships(req.caller, req.params.id)).map(membershipView),
  );

  app.post(
    '/v1/endpoints/:id/rbac/memberships',
    {
      config: { permission: 'endpoints:write' },
      schema: {
        operationId: 'createRbacMembership',
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
    async (req) => (await rbac.addMembership(req.caller, req.params.id, req.body.client_id, req.body.role_id)).map(membershipView),
  );

  app.delete(
    '/v1/endpoints/:id/rbac/memberships',
    {
      config: { permission: 'endpoints:delete' },
      schema: {
        operationId: 'deleteRbacMembership',
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
    async (req) => (await rbac.removeMembership(req.caller, req.params.id, req.body.client_id, req.body.role_id)).map(membershipView),
  );
}
