// Visitor authentication settings of an endpoint (docs/api.md "Visitor authentication"): the resolved read, the main
// mode with its credentials, the JWT layer and webhook verification. Each route: a schema, a permission, one call.
import type { FastifyReply } from 'fastify';
import type { ControlApp, ControlDeps } from '../http.ts';
import { GetSettings, PutJwtSettings, PutSettings, PutWebhookSettings, settingsView } from '../schemas/endpoint-settings.ts';
import { endpointSettingsService } from '../services/endpoint-settings.ts';

export function endpointSettingsRoutes(app: ControlApp, deps: ControlDeps): void {
  const settings = endpointSettingsService(deps);

  app.get('/v1/endpoints/:id/settings', { schema: GetSettings, config: { permission: 'endpoints:read' } }, async (req) => {
    const { endpointId, state } = await settings.read(req.caller, req.params.id);
    return settingsView(endpointId, state, req.caller.has('endpoints:update'));
  });

  app.put('/v1/endpoints/:id/settings', { schema: PutSettings, config: { permission: 'endpoints:update' } }, async (req) => {
    const { endpointId, state } = await settings.update(req.caller, req.params.id, req.body);
    // Both writes need endpoints:update, so their answers carry the hashes GET shows such a caller.
    return settingsView(endpointId, state, true);
  });

  app.put('/v1/endpoints/:id/settings/jwt', { schema: PutJwtSettings, config: { permission: 'endpoints:update' } }, async (req, reply) => {
    await settings.updateJwt(req.caller, req.params.id, req.body);
    // docs/api.md: 200 with an empty body. send() without a payload skips the serializer, which would write "null".
    return (reply as FastifyReply).status(200).send();
  });

  app.put('/v1/endpoints/:id/settings/webhook', { schema: PutWebhookSettings, config: { permission: 'endpoints:update' } }, async (req) => {
    const { endpointId, state } = await settings.updateWebhook(req.caller, req.params.id, req.body);
    return settingsView(endpointId, state, true);
  });
}
