// CPU per request of the edge pipeline on the defaults (tracing off) in the checkout at <root>: run it on two checkouts
// in turn to compare them in one session (README "Tracing: what it costs per request"). `npx tsx bench/pipeline-checkout.ts <root> [rounds] [metadata|full|off]`.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
const root = process.argv[2] ?? process.cwd();
const rounds = Number(process.argv[3] ?? 3);
// The defaults a user runs capture every exchange's metadata; `off` measures the tuned case without capture.
const capture = (process.argv[4] ?? 'metadata') as 'metadata' | 'full' | 'off';
const { STAGES } = await import(`${root}/src/edge/compile.ts`);
const { EndpointCache } = await import(`${root}/src/edge/endpoint-cache.ts`);
const { createLogger } = await import(`${root}/src/shared/log.ts`);
const { endpointConfig } = await import(`${root}/test/helpers/endpoint-config.ts`);
const { closeServer, servePipeline } = await import(`${root}/test/helpers/pipeline-edge.ts`);
const { runLoadInChild } = await import(`${root}/bench/lib/load.ts`);
const origin = http.createServer((req, res) => { req.resume(); res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 2 }).end('ok'); });
await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
const config = new EndpointCache({ logger: createLogger('silent'), stages: STAGES });
config.mirror.apply({ version: 1, topic: 'endpoint', key: 'bench', data: endpointConfig({ uuid: 'bench', hostname: 'bench.edge.localhost', origin_url: `http://127.0.0.1:${(origin.address() as AddressInfo).port}`, capture_enabled: capture !== 'off', capture_level: capture === 'off' ? null : capture }) });
const edge = await servePipeline(config, {});
const cpu: number[] = [];
for (let i = 0; i < rounds; i++) {
  const r = await runLoadInChild({ origin: `http://127.0.0.1:${edge.port}`, host: 'bench.edge.localhost', path: '/api/items/42', connections: 16, warmupMs: 1_000, durationMs: 4_000, cpuPids: [process.pid], expectBytes: 2 }, null);
  if (r.errors > 0) throw new Error(`${r.errors} errors`);
  cpu.push((r.cpuMs[0] * 1000) / r.requests);
}
await edge.close();
await closeServer(origin);
cpu.sort((a, b) => a - b);
console.log(JSON.stringify({ root, capture, median: cpu[Math.floor(cpu.length / 2)], cpu }));
