// The edge's request pipeline on a plain HTTP listener of a test's own, without a node: the test feeds the config
// mirror, origin pools follow it, and WebSocket upgrades go through the same pipeline.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { TrafficRecorder } from '../../src/edge/capture.ts';
import type { EndpointCache } from '../../src/edge/endpoint-cache.ts';
import { OriginPools } from '../../src/edge/forward/origin.ts';
import { handleRequest, handleUpgrade, type PipelineDeps } from '../../src/edge/pipeline/pipeline.ts';
import { TunnelRegistry } from '../../src/edge/tunnels/registry.ts';

export interface PipelineEdge {
  port: number;
  origins: OriginPools;
  /** Closes the listener with its connections, then the origin pools. */
  close(): Promise<void>;
}

/** Closes `server` and every connection it still holds (keep-alive ones would hold close() open). */
export async function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
}

/**
 * Serves `config` through the pipeline on 127.0.0.1 with private origins allowed, a tunnel registry of its own and a
 * fresh recorder unless `over` gives deps; `secure`: the listener stands in for the HTTPS one.
 */
export async function servePipeline(config: EndpointCache, over: Partial<PipelineDeps> = {}, secure = false): Promise<PipelineEdge> {
  const origins = new OriginPools({ allowPrivate: true });
  config.on('endpoint', (_uuid, next, previous) => origins.track(previous, next));
  const deps: PipelineDeps = { config, registry: new TunnelRegistry(), origins, capture: new TrafficRecorder(), ...over };
  const server = http.createServer((req, res) => handleRequest(deps, req, res, secure));
  server.on('upgrade', (req, socket, head) => handleUpgrade(deps, req, socket, head, secure));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    origins,
    async close() {
      await closeServer(server);
      await origins.close();
    },
  };
}
