// An edge reduced to its tunnel path, for tests of forwarding to agents: a TunnelServer on an http.Server whose every
// request goes to the one endpoint's agent through forwardToAgent (503 while no agent is connected).
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import type net from 'node:net';
import type { TestContext } from 'node:test';
import { forwardToAgent } from '../../src/edge/forward/agent.ts';
import { TunnelRegistry } from '../../src/edge/tunnels/registry.ts';
import { TunnelServer, type TunnelServerOptions } from '../../src/edge/tunnels/tunnel-server.ts';

export interface ForwardingEdge {
  port: number;
  url: string;
  registry: TunnelRegistry;
  endpoint: { uuid: string; hostname: string; public_url: string };
  /** Sockets the edge accepted and has not closed, upgraded ones included. */
  sockets: Set<net.Socket>;
  tunnels: TunnelServer;
}

/** `host` is the endpoint's hostname, and the authority forwarded when a visitor sends no Host. */
export async function startForwardingEdge(t: TestContext, host: string, options: Partial<TunnelServerOptions> = {}): Promise<ForwardingEdge> {
  const endpoint = { uuid: randomUUID(), hostname: host, public_url: `http://${host}` };
  const registry = new TunnelRegistry();
  const tunnels = new TunnelServer({ authorize: async () => ({ ok: true, endpoint }), registry, region: 'local', node: 'edge-test', ...options });
  const server = http.createServer((req, res) => {
    const session = registry.pick(endpoint.uuid);
    if (session === null) return void res.writeHead(503).end();
    forwardToAgent(session, { req, res, method: req.method ?? 'GET', target: req.url ?? '/', clientIp: '198.51.100.9', secure: false, host, authority: req.headers.host ?? host, extra: {} });
  });
  const sockets = new Set<net.Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  tunnels.attach(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as net.AddressInfo).port;
  t.after(async () => {
    await tunnels.close(1_000);
    server.closeAllConnections();
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { port, url: `http://127.0.0.1:${port}`, registry, endpoint, sockets, tunnels };
}
