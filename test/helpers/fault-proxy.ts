// A TCP proxy on loopback that a test puts between a process and a server (Redis, PostgreSQL, another edge) to
// inject network faults on purpose: added latency, connections dropped, new connections refused.
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface FaultProxy {
  /** The port to point the client at (127.0.0.1). */
  readonly port: number;
  /** Connections open through the proxy right now. */
  readonly connections: number;
  /** Delays every chunk in both directions by `ms` from now on (0: none). */
  setLatency(ms: number): void;
  /** Resets every open connection (both sides see ECONNRESET / a close), as a failing network or server would. */
  dropAll(): void;
  /** While refusing, new connections are accepted and reset at once; open ones are untouched. */
  refuse(on: boolean): void;
  close(): Promise<void>;
}

/** Starts a proxy to `target` (host:port on loopback). */
export async function startFaultProxy(target: { host?: string; port: number }): Promise<FaultProxy> {
  const host = target.host ?? '127.0.0.1';
  const pairs = new Set<[Socket, Socket]>();
  let latencyMs = 0;
  let refusing = false;

  // Chunks keep their order under latency: each is written after the previous one's delay, never reordered.
  const pipeDelayed = (from: Socket, to: Socket) => {
    let queue = Promise.resolve();
    from.on('data', (chunk: Buffer) => {
      if (latencyMs === 0) {
        to.write(chunk);
        return;
      }
      const delay = latencyMs;
      from.pause();
      queue = queue.then(
        () =>
          new Promise<void>((resolve) =>
            setTimeout(() => {
              if (!to.destroyed) to.write(chunk);
              from.resume();
              resolve();
            }, delay),
          ),
      );
    });
    from.on('end', () => void queue.then(() => to.end()));
  };

  const server: Server = createServer((client) => {
    if (refusing) {
      client.resetAndDestroy();
      return;
    }
    const upstream = connect({ host, port: target.port });
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const teardown = () => {
      pairs.delete(pair);
      if (!client.destroyed) client.resetAndDestroy();
      if (!upstream.destroyed) upstream.resetAndDestroy();
    };
    client.on('error', teardown);
    upstream.on('error', teardown);
    client.on('close', teardown);
    upstream.on('close', teardown);
    pipeDelayed(client, upstream);
    pipeDelayed(upstream, client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;

  return {
    port,
    get connections() {
      return pairs.size;
    },
    setLatency(ms) {
      latencyMs = ms;
    },
    dropAll() {
      for (const [a, b] of [...pairs]) {
        a.resetAndDestroy();
        b.resetAndDestroy();
      }
      pairs.clear();
    },
    refuse(on) {
      refusing = on;
    },
    close() {
      for (const [a, b] of pairs) {
        a.destroy();
        b.destroy();
      }
      pairs.clear();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
