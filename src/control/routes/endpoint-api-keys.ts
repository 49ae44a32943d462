// Endpoint API keys: visitor bearer tokens for token mode that the platform generates (docs/api.md: "token mode bearer
// tokens can also be configured via /endpoints/{id}/api-keys"). Each route: a schema, a permission, one call.
import type { ControlApp, ControlDeps } from '../http.ts';
import { apiKeyView, CreateApiKey, createdApiKeyView, GetApiKey, ListApiKeys, RevokeApiKey } from '../schemas/endpoint-api-keys.ts';
import { endpointApiKeyService } from '../services/endpoint-api-keys.ts';

export function endpointApiKeyRoutes(app: ControlApp, deps: ControlDeps): void {
  const keys = endpointApiKeyService(deps);

  app.post('/v1/endpoints/:id/api-keys', { schema: CreateApiKey, config: { permission: 'endpoints:update' } }, async (req, reply) => {
    const { endpoint, key, token } = await keys.create(req.caller, req.params.id, req.body);
    return reply.status(201).header('location', `/v1/endpoints/${endpoint.uuid}/api-keys/${key.id}`).send(createdApiKeyView(key, token));
  });

  app.get('/v1/endpoints/:id/api-keys', { schema: ListApiKeys, config: { permission: 'endpoints:read' } }, async (req) => ({
    items: (await keys.list(req.caller, req.params.id)).map(apiKeyView),
  }));

  app.get('/v1/endpoints/:id/api-keys/:key_id', { schema: GetApiKey, config: { permission: 'endpoints:read' } }, async (req) =>
    apiKeyView(await keys.get(req.caller, req.params.id, req.params.key_id)),
  );

  app.delete('/v1/endpoints/:id/api-keys/:key_id', { schema: RevokeApiKey, config: { permission: 'endpoints:update' } }, async (req, reply) => {
    await keys.revoke(req.caller, req.params.id, req.params.key_id);
    return reply.status(204).send(null);
  });
}
