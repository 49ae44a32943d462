// The endpoint lifecycle API: create, list, get, delete, promote, dedicated ports, request capture, and the admin
// operations around them (ephemeral creation, pause). Each route is a schema, a permission and one service call.
import type { FastifyReply } from 'fastify';
import { requireJsonContentType, type ControlApp, type ControlDeps } from '../http.ts';
import {
  AdminCreateEphemeral,
  adminEndpointView,
  CreateEndpoint,
  CreateEphemeral,
  createdView,
  DeleteEndpoint,
  endpointView,
  GetEndpoint,
  ListEndpoints,
  portsView,
  PromoteEndpoint,
  SetCapture,
  SetPaused,
  SetPorts,
  SetTags,
} from '../schemas/endpoints.ts';
import { endpointService } from '../services/endpoints.ts';

export function endpointRoutes(app: ControlApp, deps: ControlDeps): void {
  const endpoints = endpointService(deps);
  const location = (uuid: string) => `/v1/endpoints/${uuid}`;

  app.post('/v1/endpoints', { schema: CreateEndpoint, config: { permission: 'endpoints:write' } }, async (req, reply) => {
    const endpoint = await endpoints.create(req.caller, req.body);
    return reply.status(201).header('location', location(endpoint.uuid)).send(createdView(endpoint));
  });

  app.get('/v1/endpoints', { schema: ListEndpoints, config: { permission: 'endpoints:read' } }, async (req) => {
    const { rows, total, page, pageSize } = await endpoints.list(req.caller, req.query);
    return { items: rows.map(endpointView), total, page, page_size: pageSize };
  });

  app.get('/v1/endpoints/:id', { schema: GetEndpoint, config: { permission: 'endpoints:read' } }, async (req) =>
    endpointView(await endpoints.get(req.caller, req.params.id)),
  );

  app.delete('/v1/endpoints/:id', { schema: DeleteEndpoint, config: { permission: 'endpoints:delete' } }, async (req, reply) => {
    await endpoints.remove(req.caller, req.params.id);
    return reply.status(204).send(null);
  });

  app.post('/v1/endpoints/:id/promote', { schema: PromoteEndpoint, config: { permission: 'endpoints:update' } }, async (req) => {
    const promoted = await endpoints.promote(req.caller, req.params.id);
    return { endpoint_id: promoted.id, uuid: promoted.uuid, ephemeral: false as const };
  });

  app.put('/v1/endpoints/:id/ports', { schema: SetPorts, config: { permission: 'endpoints:update' } }, async (req) =>
    portsView(await endpoints.setPorts(req.caller, req.params.id, req.body)),
  );

  app.put('/v1/endpoints/:id/tags', { schema: SetTags, config: { permission: 'endpoints:update' } }, async (req) =>
    endpointView(await endpoints.setTags(req.caller, req.params.id, req.body.tags)),
  );

  // No declared permission: a bad capture_level has always been a 400 before the 403, so the service checks
  // endpoints:update itself, after judging the level.
  app.put('/v1/endpoints/:id/settings/capture', { preValidation: requireJsonContentType, schema: SetCapture }, async (req, reply) => {
    await endpoints.setCapture(req.caller, req.params.id, req.body);
    // docs/api.md: 200 with an empty body. send() without a payload skips the serializer, which would write "null".
    return (reply as FastifyReply).status(200).send();
  });

  // The endpoint exists to carry this key's agent, so the key must also be allowed to attach one (as edges check).
  app.post('/v1/endpoints/ephemeral', { schema: CreateEphemeral, config: { permission: ['endpoints:write', 'tunnels:connect'] } }, async (req, reply) => {
    const endpoint = await endpoints.createEphemeral(req.caller, req.body.device_fingerprint, req.body.tags);
    return reply.status(201).header('location', location(endpoint.uuid)).send(endpointView(endpoint));
  });

  // ---- Admin ----------------------------------------------------------------------------------------------------

  app.post('/v1/admin/endpoints/ephemeral', { schema: AdminCreateEphemeral }, async (req, reply) => {
    req.caller.requireAdmin();
    const endpoint = await endpoints.createEphemeralFor(req.body.user_id, req.body.device_fingerprint);
    return reply.status(201).header('location', location(endpoint.uuid)).send(endpointView(endpoint));
  });

  for (const [action, paused] of [['pause', true], ['unpause', false]] as const) {
    app.post(`/v1/admin/endpoints/:id/${action}`, { schema: SetPaused(paused) }, async (req) => {
      req.caller.requireAdmin();
      return adminEndpointView(await endpoints.setPaused(req.caller, req.params.id, paused));
    });
  }
}
