// Live state the control plane reads from presence: the agents serving an endpoint, and every edge's applied
// config version next to the control plane's, so a user can see that a change has reached all edges.
import { Type } from '@sinclair/typebox';
import { Timestamp } from '../../shared/schema.ts';
import type { ControlApp, ControlDeps } from '../http.ts';
import { presenceService } from '../services/presence.ts';
import { ErrorResponses } from '../views.ts';

const TunnelView = Type.Object({
  agent_id: Type.String(),
  tags: Type.Array(Type.String()),
  protocol: Type.String(),
  region: Type.String(),
  edge_node: Type.String(),
  connected_at: Timestamp(),
});

const EdgeView = Type.Object({
  node_id: Type.String(),
  region: Type.String(),
  version: Type.Integer({ description: 'The config feed version this edge has applied' }),
  last_heartbeat: Timestamp(),
  agents: Type.Integer({ description: 'Agents connected to this edge' }),
  in_sync: Type.Boolean({ description: 'True when the edge has applied the latest committed version' }),
  compile_errors: Type.Array(
    Type.Object({
      endpoint: Type.String({ description: 'The endpoint id (uuid)' }),
      version: Type.Integer({ description: 'The config version that failed to compile' }),
      error: Type.String(),
    }),
    { description: 'Endpoint configs this edge refused because they failed to compile, newest first (at most 20); each endpoint keeps serving its previous config, or answers 503 if it has none' },
  ),
  compile_error_count: Type.Integer({ description: 'How many endpoints have a config this edge refused, in all' }),
  relay: Type.Union([Type.String({ description: 'host:port where other edges relay to this one (docs/cluster.md)' }), Type.Null()]),
  load: Type.Integer({ description: 'Streams in flight on this edge\'s agent tunnels at its last heartbeat' }),
  addresses: Type.Array(Type.String(), { description: 'Shared public addresses the edge announces (EDGE_PUBLIC_ADDRESSES)' }),
  dedicated_addresses: Type.Array(Type.String(), { description: 'Dedicated IPs the edge listens on beside its bind host (docs/dedicated-ips.md)' }),
});

export function presenceRoutes(app: ControlApp, deps: ControlDeps): void {
  const presence = presenceService(deps);

  app.get(
    '/v1/endpoints/:id/tunnels',
    {
      config: { permission: 'endpoints:read' },
      schema: {
        operationId: 'listEndpointTunnels',
        summary: 'The agents serving an endpoint right now, on every edge',
        tags: ['endpoints'],
        params: Type.Object({ id: Type.String() }),
        response: { 200: Type.Object({ items: Type.Array(TunnelView) }), ...ErrorResponses },
      },
    },
    async (req) => {
      const tunnels = await presence.tunnels(req.caller, req.params.id);
      return {
        items: tunnels.map((t) => ({ agent_id: t.agent_id, tags: t.tags, protocol: t.protocol, region: t.region, edge_node: t.node, connected_at: t.connected_at })),
      };
    },
  );

  app.get(
    '/v1/edges',
    {
      schema: {
        operationId: 'listEdges',
        summary: 'Every live edge: node id, region, applied config version, last heartbeat and endpoint configs it could not compile (admin)',
        tags: ['admin'],
        response: { 200: Type.Object({ version: Type.Integer({ description: 'The latest committed config version' }), items: Type.Array(EdgeView) }), ...ErrorResponses },
      },
    },
    async (req) => {
      const { version, edges } = await presence.edges(req.caller);
      return {
        version,
        items: edges.map((e) => ({
          node_id: e.node,
          region: e.region,
          version: e.version,
          last_heartbeat: e.heartbeat_at,
          agents: e.agents.length,
          in_sync: e.version >= version,
          // Edges from before compile errors were reported send neither field.
          compile_errors: e.compile_errors ?? [],
          compile_error_count: e.compile_error_count ?? e.compile_errors?.length ?? 0,
          // Edges without shared presence (or from before the relay) advertise none.
          relay: e.relay ? `${e.relay.host}:${e.relay.port}` : null,
          load: e.load ?? 0,
          addresses: e.addresses ?? [],
          dedicated_addresses: e.dedicated_addresses ?? [],
        })),
      };
    },
  );
}
