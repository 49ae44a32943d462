// RBAC clients of an endpoint (docs/rbac.md "Clients", "Invites and self-registration"): create, read, update,
// delete, invites and the self-registration setting; each route a schema, its permission and one service call.
import { Type } from '@sinclair/typebox';
import type { ControlApp, ControlDeps } from '../http.ts';
import {
  ClientParams,
  ClientWithToken,
  clientWithToken,
  CreateBody,
  EndpointParams,
  Errors409,
  InviteBody,
  InviteView,
  inviteView,
  SettingsBody,
  SettingsView,
  UpdateBody,
} from '../schemas/rbac-clients.ts';
import { DEFAULT_INVITE_HOURS, MAX_INVITE_HOURS, rbacClientService } from '../services/rbac-clients.ts';
import { ErrorResponses, RbacClientView, rbacClientView } from '../views.ts';

const TAGS = ['rbac'];

export function rbacClientRoutes(app: ControlApp, deps: ControlDeps): void {
  const clients = rbacClientService(deps);

  app.post(
    '/v1/endpoints/:id/rbac/clients',
    {
      config: { permission: 'endpoints:write' },
      schema: {
        operationId: 'createRbacClient',
        summary: 'Create an RBAC client',
        description:
          'Strict. identifier is required and lower-cased, as is email. Credentials must match the endpoint’s visitor-auth mode: ' +
          'username + password (together) in mode basic, token or auto_generate_token (not both) in mode token, identities in mode ' +
          'oauth/oidc; 400 otherwise. status defaults to active. The endpoint’s default roles are assigned (read them from memberships). ' +
          '409 when the identifier, e-mail, username, token or an identity is another client’s, the username one of the settings’ ' +
          'basic_users or the token a live settings token or API key. Answers 200 with the client and, for auto_generate_token, ' +
          'generated_token (this once). Needs the rbac entitlement and endpoints:write.',
        tags: TAGS,
        params: EndpointParams,
        body: CreateBody,
        response: { 200: ClientWithToken, ...Errors409 },
      },
    },
    async (req) => clientWithToken(await clients.create(req.caller, req.params.id, req.body)),
  );

  app.get(
    '/v1/endpoints/:id/rbac/clients',
    {
      config: { permission: 'endpoints:read' },
      schema: {
        operationId: 'listRbacClients',
        summary: 'List the endpoint’s RBAC clients',
        description: 'By id. Never a password hash or token: has_password, has_token and has_oauth say which credentials a client has. Needs endpoints:read.',
        tags: TAGS,
        params: EndpointParams,
        response: { 200: Type.Array(RbacClientView), ...ErrorResponses },
      },
    },
    async (req) => (await clients.list(req.caller, req.params.id)).map(rbacClientView),
  );

  app.get(
    '/v1/endpoints/:id/rbac/clients/:client_id',
    {
      config: { permission: 'endpoints:read' },
      schema: {
        operationId: 'getRbacClient',
        summary: 'Get one RBAC client',
        description: 'Needs endpoints:read. 404 when the client is not on this endpoint.',
        tags: TAGS,
        params: ClientParams,
        response: { 200: RbacClientView, ...ErrorResponses },
      },
    },
    async (req) => rbacClientView(await clients.get(req.caller, req.params.id, req.params.client_id)),
  );

  app.put(
    '/v1/endpoints/:id/rbac/clients/:client_id',
    {
      config: { permission: 'endpoints:write' },
      schema: {
        operationId: 'updateRbacClient',
        summary: 'Update an RBAC client',
        description:
          'Strict, partial: omitted fields are kept. status active, disabled or revoked (invited is where a client starts, never where it ' +
          'goes back: 400); a client leaving invited loses its pending invite. Credential resets follow the endpoint’s mode as on create: ' +
          'username + password (mode basic), auto_generate_token or token (mode token; generated_token in this answer only), identities ' +
          '(mode oauth/oidc; replaces the linked ones). The same 409s as create. Effective on every edge from the next request. Needs ' +
          'the rbac entitlement and endpoints:write.',
        tags: TAGS,
        params: ClientParams,
        body: UpdateBody,
        response: { 200: ClientWithToken, ...Errors409 },
      },
    },
    async (req) => clientWithToken(await clients.update(req.caller, req.params.id, req.params.client_id, req.body)),
  );

  app.delete(
    '/v1/endpoints/:id/rbac/clients/:client_id',
    {
      config: { permission: 'endpoints:delete' },
      schema: {
        operationId: 'deleteRbacClient',
        summary: 'Delete an RBAC client',
        description:
          'Its memberships, linked identities and invite go with it; every edge refuses its credentials from the next request. Needs ' +
          'the rbac entitlement and endpoints:delete.',
        tags: TAGS,
        params: ClientParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...Errors409 },
      },
    },
    async (req, reply) => {
      await clients.remove(req.caller, req.params.id, req.params.client_id);
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/v1/endpoints/:id/rbac/clients/invites',
    {
      config: { permission: 'endpoints:write' },
      schema: {
        operationId: 'inviteRbacClient',
        summary: 'Invite a client',
        description:
          'Creates a placeholder client in status invited (identifier: the e-mail, else invite-<random>; the endpoint’s default roles ' +
          `assigned) and a single-use invite token, valid expires_in_hours (default ${DEFAULT_INVITE_HOURS} when omitted or ≤ 0, at most ` +
          `${MAX_INVITE_HOURS}). No mail is sent: hand the visitor invite_url, which the edge serves on the endpoint’s host. The token ` +
          'is in this answer only. 409 when the e-mail is another client’s. Needs the rbac entitlement and endpoints:write.',
        tags: TAGS,
        params: EndpointParams,
        body: InviteBody,
        response: { 200: InviteView, ...Errors409 },
      },
    },
    async (req) => inviteView(await clients.invite(req.caller, req.params.id, req.body)),
  );

  app.get(
    '/v1/endpoints/:id/rbac/settings',
    {
      config: { permission: 'endpoints:read' },
      schema: {
        operationId: 'getRbacSettings',
        summary: 'Read the endpoint’s RBAC settings',
        description: 'Self-registration: off unless turned on. Needs endpoints:read.',
        tags: TAGS,
        params: EndpointParams,
        response: { 200: SettingsView, ...ErrorResponses },
      },
    },
    async (req) => ({ self_registration: await clients.readSettings(req.caller, req.params.id) }),
  );

  app.put(
    '/v1/endpoints/:id/rbac/settings',
    {
      config: { permission: 'endpoints:write' },
      schema: {
        operationId: 'setRbacSettings',
        summary: 'Configure the endpoint’s RBAC settings',
        description:
          'Self-registration lets a visitor who logged in through one of the endpoint’s providers become an active client with the ' +
          'default roles, without an invite (registration_source self). Turning it on needs mode oauth or oidc: a provider’s verified ' +
          'e-mail is what allowed_email_domains judges. Domains are bare names, lower-cased; empty: any login (with or without e-mail). ' +
          'Omitted allowed_email_domains keeps the stored list. Needs the rbac entitlement and endpoints:write.',
        tags: TAGS,
        params: EndpointParams,
        body: SettingsBody,
        response: { 200: SettingsView, ...Errors409 },
      },
    },
    async (req) => ({ self_registration: await clients.writeSettings(req.caller, req.params.id, req.body) }),
  );
}
