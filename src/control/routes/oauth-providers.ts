// OAuth/OIDC identity providers of an endpoint (docs/api.md "OAuth/OIDC providers", the toggle operation): create, list, get,
// replace, toggle and delete what modes oauth/oidc log visitors in with. Each route: a schema, a permission, one call.
import type { FastifyReply } from 'fastify';
import type { ControlApp, ControlDeps } from '../http.ts';
import { CreateProvider, DeleteProvider, GetProvider, ListProviders, providerView, ReplaceProvider, ToggleProvider } from '../schemas/oauth-providers.ts';
import { oauthProviderService, type EndpointProvider } from '../services/oauth-providers.ts';

export function oauthProviderRoutes(app: ControlApp, deps: ControlDeps): void {
  const { config, publicHttpsPort = () => config.publicHttpsPort || config.httpsPort } = deps;
  const providers = oauthProviderService(deps);
  const view = ({ endpoint, provider }: EndpointProvider) => providerView(provider, endpoint.hostname, publicHttpsPort());

  app.post('/v1/endpoints/:id/oauth/providers', { schema: CreateProvider, config: { permission: 'endpoints:update' } }, async (req, reply) => {
    const created = await providers.create(req.caller, req.params.id, req.body);
    return reply
      .status(201)
      .header('location', `/v1/endpoints/${created.endpoint.uuid}/oauth/providers/${created.provider.id}`)
      .send(view(created));
  });

  app.get('/v1/endpoints/:id/oauth/providers', { schema: ListProviders, config: { permission: 'endpoints:read' } }, async (req) => {
    const { endpoint, providers: items } = await providers.list(req.caller, req.params.id);
    return { items: items.map((provider) => view({ endpoint, provider })) };
  });

  app.get('/v1/endpoints/:id/oauth/providers/:provider_id', { schema: GetProvider, config: { permission: 'endpoints:read' } }, async (req) =>
    view(await providers.get(req.caller, req.params.id, req.params.provider_id)),
  );

  app.put('/v1/endpoints/:id/oauth/providers/:provider_id', { schema: ReplaceProvider, config: { permission: 'endpoints:update' } }, async (req) =>
    view(await providers.replace(req.caller, req.params.id, req.params.provider_id, req.body)),
  );

  app.put('/v1/endpoints/:id/oauth/providers/:provider_id/toggle', { schema: ToggleProvider, config: { permission: 'endpoints:update' } }, async (req, reply) => {
    // No body at all is a body without `enabled`: docs/api.md reads that as false.
    await providers.setEnabled(req.caller, req.params.id, req.params.provider_id, req.body?.enabled === true);
    return (reply as FastifyReply).status(204).send();
  });

  app.delete('/v1/endpoints/:id/oauth/providers/:provider_id', { schema: DeleteProvider, config: { permission: 'endpoints:update' } }, async (req, reply) => {
    await providers.remove(req.caller, req.params.id, req.params.provider_id);
    return reply.status(204).send(null);
  });
}
