// Dedicated IPs and per-region GeoDNS groups: the operator's inventory under /v1/admin, what an account owns, and
// binding an endpoint to one address or to a group. The operations live in services/dedicated-ips.ts.
import { Type } from '@sinclair/typebox';
import type { ControlApp, ControlDeps } from '../http.ts';
import {
  AdminErrors,
  BindErrors,
  DedicatedIpView,
  EndpointParams,
  GroupBindBody,
  GroupBindingDetail,
  GroupBindingView,
  GroupCreateBody,
  GroupListQuery,
  GroupUpdateBody,
  GroupView,
  IdParams,
  IpBindBody,
  IpBindingView,
  IpCreateBody,
  IpListQuery,
  IpUpdateBody,
  dedicatedIpView,
  groupView,
} from '../schemas/dedicated-ips.ts';
import { dedicatedIpService } from '../services/dedicated-ips.ts';
import { ErrorResponses } from '../views.ts';

const ADMIN_TAGS = ['admin', 'dedicated-ips'];
const TAGS = ['dedicated-ips'];
const Deleted = Type.Null({ description: 'Detached' });

export function dedicatedIpRoutes(app: ControlApp, deps: ControlDeps): void {
  const ips = dedicatedIpService(deps);
  const group = (row: Parameters<typeof groupView>[0]) => groupView(row, row.status === 'retired' ? null : ips.geoFqdn(row.id));

  // --- the operator's inventory: every /v1/admin/ route needs an admin caller (routes/admin.ts) -------------------

  app.post(
    '/v1/admin/dedicated-ips',
    { schema: { operationId: 'createDedicatedIp', summary: 'Register a dedicated IP', description: 'One address, the region whose edges announce it, and the owning account. 409 dedicated_ip_in_use when the address is registered already.', tags: ADMIN_TAGS, body: IpCreateBody, response: { 201: DedicatedIpView, ...AdminErrors } } },
    async (req, reply) => reply.status(201).send(dedicatedIpView(await ips.createIp(req.body))),
  );

  app.get(
    '/v1/admin/dedicated-ips',
    { schema: { operationId: 'listDedicatedIps', summary: 'List dedicated IPs', tags: ADMIN_TAGS, querystring: IpListQuery, response: { 200: Type.Object({ items: Type.Array(DedicatedIpView) }), ...ErrorResponses } } },
    async (req) => ({ items: (await ips.listIps(req.query)).map(dedicatedIpView) }),
  );

  app.get(
    '/v1/admin/dedicated-ips/:id',
    { schema: { operationId: 'getDedicatedIp', summary: 'Get a dedicated IP', tags: ADMIN_TAGS, params: IdParams, response: { 200: DedicatedIpView, ...ErrorResponses } } },
    async (req) => dedicatedIpView(await ips.getIp(req.params.id)),
  );

  app.patch(
    '/v1/admin/dedicated-ips/:id',
    {
      schema: {
        operationId: 'updateDedicatedIp',
        summary: 'Move a dedicated IP to another region or account',
        description: 'An address in a group or bound to an endpoint keeps its account (409 dedicated_ip_in_use); a new region moves it between the group’s regions at once.',
        tags: ADMIN_TAGS,
        params: IdParams,
        body: IpUpdateBody,
        response: { 200: DedicatedIpView, ...AdminErrors },
      },
    },
    async (req) => dedicatedIpView(await ips.updateIp(req.params.id, req.body)),
  );

  app.delete(
    '/v1/admin/dedicated-ips/:id',
    {
      schema: {
        operationId: 'deleteDedicatedIp',
        summary: 'Retire a dedicated IP',
        description: 'It leaves its group and stops being answered; the address may be registered again. 409 while it serves an endpoint alone.',
        tags: ADMIN_TAGS,
        params: IdParams,
        response: { 200: DedicatedIpView, ...AdminErrors },
      },
    },
    async (req) => dedicatedIpView(await ips.retireIp(req.params.id)),
  );

  app.post(
    '/v1/admin/dedicated-ip-groups',
    {
      schema: {
        operationId: 'createDedicatedIpGroup',
        summary: 'Create a dedicated IP group',
        description: 'status defaults to pending (not bindable); addresses are registered dedicated IPs of the same account, in no other group and bound to no endpoint.',
        tags: ADMIN_TAGS,
        body: GroupCreateBody,
        response: { 201: GroupView, ...AdminErrors },
      },
    },
    async (req, reply) => reply.status(201).send(group(await ips.createGroup(req.body))),
  );

  app.get(
    '/v1/admin/dedicated-ip-groups',
    { schema: { operationId: 'listDedicatedIpGroups', summary: 'List dedicated IP groups', tags: ADMIN_TAGS, querystring: GroupListQuery, response: { 200: Type.Object({ items: Type.Array(GroupView) }), ...ErrorResponses } } },
    async (req) => ({ items: (await ips.listGroups(req.query)).map(group) }),
  );

  app.get(
    '/v1/admin/dedicated-ip-groups/:id',
    { schema: { operationId: 'getDedicatedIpGroup', summary: 'Get a dedicated IP group', tags: ADMIN_TAGS, params: IdParams, response: { 200: GroupView, ...ErrorResponses } } },
    async (req) => group(await ips.getGroup(req.params.id)),
  );

  app.patch(
    '/v1/admin/dedicated-ip-groups/:id',
    {
      schema: {
        operationId: 'updateDedicatedIpGroup',
        summary: 'Rename a group, activate it, or replace its addresses',
        description: 'addresses replaces the member list exactly. A group that serves endpoints cannot go back to pending (409).',
        tags: ADMIN_TAGS,
        params: IdParams,
        body: GroupUpdateBody,
        response: { 200: GroupView, ...AdminErrors },
      },
    },
    async (req) => group(await ips.updateGroup(req.params.id, req.body)),
  );

  app.delete(
    '/v1/admin/dedicated-ip-groups/:id',
    {
      schema: {
        operationId: 'deleteDedicatedIpGroup',
        summary: 'Retire a dedicated IP group',
        description: 'Its addresses are released and grp-<id> stops answering. 409 while endpoints are bound to it.',
        tags: ADMIN_TAGS,
        params: IdParams,
        response: { 200: GroupView, ...AdminErrors },
      },
    },
    async (req) => group(await ips.retireGroup(req.params.id)),
  );

  // --- what the active account owns (SPEC: "dedicated-ips group list") -------------------------------------------

  app.get(
    '/v1/dedicated-ips/groups',
    {
      config: { permission: 'endpoints:read' },
      schema: { operationId: 'listAccountDedicatedIpGroups', summary: 'List the account’s dedicated IP groups', tags: TAGS, response: { 200: Type.Object({ items: Type.Array(GroupView) }), ...ErrorResponses } },
    },
    async (req) => ({ items: (await ips.ownGroups(req.caller)).map(group) }),
  );

  app.get(
    '/v1/dedicated-ips',
    {
      config: { permission: 'endpoints:read' },
      schema: { operationId: 'listAccountDedicatedIps', summary: 'List the account’s dedicated IPs', tags: TAGS, response: { 200: Type.Object({ items: Type.Array(DedicatedIpView) }), ...ErrorResponses } },
    },
    async (req) => ({ items: (await ips.ownIps(req.caller)).map(dedicatedIpView) }),
  );

  // --- endpoint bindings -------------------------------------------------------------------------------------------

  app.post(
    '/v1/endpoints/:id/dedicated-ip-group',
    {
      config: { permission: 'endpoints:update' },
      schema: {
        operationId: 'bindEndpointDedicatedIpGroup',
        summary: 'Bind a per-region dedicated IP group',
        description:
          'SPEC contract. Clears a single-IP binding. 200 {endpoint_id, group_id, geo_fqdn}. 400 missing or non-positive group_id, invalid JSON, unknown field; ' +
          '403 plan lacks dedicated_ips, or the endpoint or group belongs to another account; 404 endpoint or group missing; 409 group not active (group_not_active) ' +
          'or endpoint paused; 502 dns_repoint_failed (the binding was reverted; safe to retry); 503 geodns_not_configured.',
        tags: TAGS,
        params: EndpointParams,
        body: GroupBindBody,
        response: { 200: GroupBindingView, ...BindErrors },
      },
    },
    async (req) => {
      const bound = await ips.bindGroup(req.caller, req.params.id, req.body);
      return { endpoint_id: bound.endpoint.id, group_id: bound.groupId, geo_fqdn: bound.geoFqdn };
    },
  );

  app.get(
    '/v1/endpoints/:id/dedicated-ip-group',
    {
      config: { permission: 'endpoints:read' },
      schema: { operationId: 'getEndpointDedicatedIpGroup', summary: 'The bound dedicated IP group', description: '404 when none is bound.', tags: TAGS, params: EndpointParams, response: { 200: GroupBindingDetail, ...ErrorResponses } },
    },
    async (req) => {
      const { endpoint, group: row } = await ips.groupBinding(req.caller, req.params.id);
      const view = group(row);
      return { endpoint_id: endpoint.id, group_id: row.id, geo_fqdn: view.geo_fqdn ?? '', group: view };
    },
  );

  app.delete(
    '/v1/endpoints/:id/dedicated-ip-group',
    {
      config: { permission: 'endpoints:update' },
      schema: {
        operationId: 'unbindEndpointDedicatedIpGroup',
        summary: 'Detach the dedicated IP group',
        description: 'The endpoint is answered with the shared edge addresses again. 404 when no group is bound; 502 dns_repoint_failed as for binding.',
        tags: TAGS,
        params: EndpointParams,
        response: { 204: Deleted, ...BindErrors },
      },
    },
    async (req, reply) => {
      await ips.unbindGroup(req.caller, req.params.id);
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/v1/endpoints/:id/dedicated-ip',
    {
      config: { permission: 'endpoints:update' },
      schema: {
        operationId: 'bindEndpointDedicatedIp',
        summary: 'Bind a single dedicated IP',
        description: 'The address serves this endpoint alone; clears a group binding. 409 dedicated_ip_in_use when it is in a group or serves another endpoint.',
        tags: TAGS,
        params: EndpointParams,
        body: IpBindBody,
        response: { 200: IpBindingView, ...BindErrors },
      },
    },
    async (req) => {
      const { endpoint, ip } = await ips.bindIp(req.caller, req.params.id, req.body);
      return { endpoint_id: endpoint.id, dedicated_ip_id: ip.id, address: ip.address, region: ip.region };
    },
  );

  app.get(
    '/v1/endpoints/:id/dedicated-ip',
    {
      config: { permission: 'endpoints:read' },
      schema: { operationId: 'getEndpointDedicatedIp', summary: 'The bound single dedicated IP', description: '404 when none is bound.', tags: TAGS, params: EndpointParams, response: { 200: IpBindingView, ...ErrorResponses } },
    },
    async (req) => {
      const { endpoint, ip } = await ips.ipBinding(req.caller, req.params.id);
      return { endpoint_id: endpoint.id, dedicated_ip_id: ip.id, address: ip.address, region: ip.region };
    },
  );

  app.delete(
    '/v1/endpoints/:id/dedicated-ip',
    {
      config: { permission: 'endpoints:update' },
      schema: { operationId: 'unbindEndpointDedicatedIp', summary: 'Detach the single dedicated IP', description: '404 when none is bound.', tags: TAGS, params: EndpointParams, response: { 204: Deleted, ...BindErrors } },
    },
    async (req, reply) => {
      await ips.unbindIp(req.caller, req.params.id);
      return reply.status(204).send(null);
    },
  );
}
