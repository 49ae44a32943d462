// Pointing an endpoint at an origin URL: the edge then forwards visitors there over a keep-alive pool instead of
// to agents (a matching routing rule still wins). Private and loopback origins need operator consent.
import { Type } from '@sinclair/typebox';
import { Nullable, Strict } from '../../shared/schema.ts';
import type { ControlApp, ControlDeps } from '../http.ts';
import { endpointOriginService } from '../services/endpoint-origin.ts';
import { ErrorResponses } from '../views.ts';

const SetOrigin = {
  operationId: 'setEndpointOrigin',
  summary: 'Forward the endpoint to an origin URL instead of agents (null clears it)',
  description:
    'http or https, no credentials, query or fragment; its path prefixes forwarded paths. Addresses that are not public unicast (loopback, private, link-local, CGNAT, documentation, multicast, and IPv6 forms embedding such an IPv4: docs/address-policy.md) are refused ' +
    'unless the platform sets EDGE_ORIGIN_ALLOW_PRIVATE; a name is checked again by the edge against every address it resolves to. ' +
    'A matching routing rule still sends its requests where it says (its agents, or its own origin).',
  tags: ['endpoints'],
  params: Type.Object({ id: Type.String() }),
  body: Strict({ url: Nullable(Type.String({ minLength: 1, maxLength: 2048 })) }),
  response: { 200: Type.Object({ ok: Type.Literal(true), origin_url: Nullable(Type.String()) }), ...ErrorResponses },
};

export function endpointOriginRoutes(app: ControlApp, deps: ControlDeps): void {
  const origins = endpointOriginService(deps);

  app.put('/v1/endpoints/:id/origin', { schema: SetOrigin, config: { permission: 'endpoints:update' } }, async (req) => {
    const endpoint = await origins.set(req.caller, req.params.id, req.body.url);
    return { ok: true as const, origin_url: endpoint.origin_url };
  });
}
