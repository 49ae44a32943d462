// Tunnel tuning from data: HTTP/2 stream windows, Nagle (setNoDelay) and the two transports, on loopback and on a
// link with added delay, edge and agent in this one process (`tsx bench/tunnel-tuning.ts`; BENCH_TUNING_QUICK=1).
import { once } from 'node:events';
import http from 'node:http';
import type { ClientHttp2Stream, IncomingHttpHeaders } from 'node:http2';
import net from 'node:net';
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { startAgent, type Agent } from '../src/agent/agent.ts';
import { TunnelRegistry, type AgentSession } from '../src/edge/tunnels/registry.ts';
import { TunnelServer } from '../src/edge/tunnels/tunnel-server.ts';
import type { TunnelTransport } from '../src/shared/tunnel/raw.ts';
import { DEFAULT_TUNING, type TunnelTuning } from '../src/shared/tunnel/transport.ts';

const MiB = 1024 * 1024;
const KiB = 1024;

interface Setup {
  transport: TunnelTransport;
  streamWindowBytes: number;
  /** One-way delay added by a relay between agent and edge, in ms (0: the agent dials the edge directly). */
  delayMs: number;
  /** false: Nagle's algorithm left on (setNoDelay(false) on every socket, over what Node and ws ask for). */
  noDelay: boolean;
}

export interface TuningResult extends Setup {
  /** One 32 MiB download, MB/s. */
  bulkMBps: number;
  /** 64 KiB answers, 16 in flight: requests per second. */
  mediumRps: number;
  /** 100 B answers one at a time: median round trip in ms. */
  smallP50Ms: number;
}

/** A relay that holds every chunk `delayMs` before passing it on, both ways (a link with latency, unlimited rate). */
async function delayingRelay(port: number, delayMs: number): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const relay = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    sockets.add(client).add(upstream);
    const delayed = (from: net.Socket, to: net.Socket) => {
      from.on('data', (chunk) => setTimeout(() => to.writable && to.write(chunk), delayMs));
      from.on('end', () => setTimeout(() => to.end(), delayMs));
      from.on('error', () => to.destroy());
    };
    delayed(client, upstream);
    delayed(upstream, client);
  });
  relay.listen(0, '127.0.0.1');
  await once(relay, 'listening');
  return {
    port: (relay.address() as net.AddressInfo).port,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => relay.close(() => resolve()));
    },
  };
}

async function drain(stream: ClientHttp2Stream): Promise<number> {
  let bytes = 0;
  for await (const chunk of stream) bytes += (chunk as Buffer).length;
  return bytes;
}

async function get(session: AgentSession, path: string): Promise<number> {
  const stream = session.request({ ':method': 'GET', ':path': path, ':authority': 'bench.edge.test', ':scheme': 'http' });
  stream.end();
  const [headers] = (await once(stream, 'response')) as [IncomingHttpHeaders];
  if (Number(headers[':status']) !== 200) throw new Error(`status ${headers[':status']}`);
  return drain(stream);
}

export async function measure(setup: Setup, quick: boolean): Promise<TuningResult> {
  const original = net.Socket.prototype.setNoDelay;
  if (!setup.noDelay) {
    net.Socket.prototype.setNoDelay = function (this: net.Socket) {
      return original.call(this, false);
    };
  }
  const small = Buffer.alloc(100, 'a');
  const medium = Buffer.alloc(64 * KiB, 'b');
  const chunk = Buffer.alloc(MiB, 'c');
  const upstream = http.createServer((req, res) => {
    if (req.url === '/small') return void res.end(small);
    if (req.url === '/medium') return void res.end(medium);
    let left = 32;
    const pump = () => {
      while (left > 0) {
        left--;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  const endpoint = { uuid: randomUUID(), hostname: 'bench.edge.test', public_url: 'http://bench.edge.test' };
  const tuning: Partial<TunnelTuning> = { streamWindowBytes: setup.streamWindowBytes };
  const registry = new TunnelRegistry();
  const tunnels = new TunnelServer({ authorize: async () => ({ ok: true, endpoint }), registry, region: 'bench', node: 'bench', tuning });
  const edge = http.createServer();
  tunnels.attach(edge);
  edge.listen(0, '127.0.0.1');
  await once(edge, 'listening');
  const edgePort = (edge.address() as net.AddressInfo).port;
  const relay = setup.delayMs > 0 ? await delayingRelay(edgePort, setup.delayMs) : null;
  let agent: Agent | null = null;
  try {
    agent = await startAgent({
      edgeUrl: `http://127.0.0.1:${relay ? relay.port : edgePort}`,
      apiKey: 'bench',
      endpoint: endpoint.uuid,
      protocol: 'http',
      target: (upstream.address() as net.AddressInfo).port,
      transport: setup.transport,
      tuning,
    });
    const session = registry.pick(endpoint.uuid)!;
    // Warm-up: JIT, the agent's local pool, HTTP/2 windows opened.
    for (let i = 0; i < 50; i++) await get(session, '/small');
    await get(session, '/bulk');

    const bulkRuns = quick ? 1 : 3;
    let best = 0;
    for (let i = 0; i < bulkRuns; i++) {
      const t0 = performance.now();
      const bytes = await get(session, '/bulk');
      best = Math.max(best, bytes / 1e6 / ((performance.now() - t0) / 1000));
    }

    const mediumTotal = quick ? 400 : 1600;
    let started = 0;
    const t1 = performance.now();
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (started < mediumTotal) {
          started++;
          await get(session, '/medium');
        }
      }),
    );
    const mediumRps = mediumTotal / ((performance.now() - t1) / 1000);

    const times: number[] = [];
    for (let i = 0; i < (quick ? 100 : 300); i++) {
      const t = performance.now();
      await get(session, '/small');
      times.push(performance.now() - t);
    }
    times.sort((a, b) => a - b);
    return { ...setup, bulkMBps: best, mediumRps, smallP50Ms: times[times.length >> 1] };
  } finally {
    await agent?.stop(1_000);
    await tunnels.close(1_000);
    edge.closeAllConnections();
    upstream.closeAllConnections();
    await relay?.close();
    await new Promise<void>((r) => edge.close(() => r()));
    await new Promise<void>((r) => upstream.close(() => r()));
    net.Socket.prototype.setNoDelay = original;
  }
}

function row(r: TuningResult): string {
  const w = r.streamWindowBytes >= MiB ? `${r.streamWindowBytes / MiB} MiB` : `${Math.round(r.streamWindowBytes / KiB)} KiB`;
  return [
    r.transport.padEnd(4),
    `window ${w}`.padEnd(15),
    `delay ${r.delayMs} ms`.padEnd(12),
    (r.noDelay ? 'nodelay' : 'NAGLE').padEnd(8),
    `bulk ${r.bulkMBps.toFixed(0).padStart(5)} MB/s`,
    `64KiB×16 ${r.mediumRps.toFixed(0).padStart(5)} req/s`,
    `100B p50 ${r.smallP50Ms.toFixed(2)} ms`,
  ].join('  ');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const quick = process.env.BENCH_TUNING_QUICK === '1';
  const rounds = Number(process.env.BENCH_TUNING_ROUNDS ?? (quick ? 1 : 2));
  const setups: Setup[] = [];
  for (const transport of ['raw', 'ws'] as const) {
    for (const delayMs of [0, 10]) {
      for (const streamWindowBytes of [64 * KiB - 1, 256 * KiB, DEFAULT_TUNING.streamWindowBytes, 4 * MiB]) setups.push({ transport, streamWindowBytes, delayMs, noDelay: true });
      setups.push({ transport, streamWindowBytes: DEFAULT_TUNING.streamWindowBytes, delayMs, noDelay: false });
    }
  }
  // Interleaved rounds: every setup once per round, so a burst of load from elsewhere does not hit one setup only.
  for (let round = 1; round <= rounds; round++) {
    console.log(`round ${round}/${rounds}`);
    for (const setup of setups) console.log(row(await measure(setup, quick)));
  }
}
