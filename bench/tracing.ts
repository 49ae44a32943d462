// CPU per request through the edge's pipeline with tracing off (the headline: it must cost nothing measurable), on
// (every request sampled and exported over OTLP/HTTP to a local receiver) and parentbased_traceidratio at 1 %.
// The pipeline, a trivial origin and the receiver share this process (their CPU is what is measured, per request);
// the load runs in a child process. Modes interleave over rounds; read the ratios to off. `npx tsx bench/tracing.ts`.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { STAGES } from '../src/edge/compile.ts';
import { EndpointCache } from '../src/edge/endpoint-cache.ts';
import { createLogger } from '../src/shared/log.ts';
import { startTracing, type Tracing } from '../src/shared/tracing.ts';
import { endpointConfig } from '../test/helpers/endpoint-config.ts';
import { closeServer, servePipeline } from '../test/helpers/pipeline-edge.ts';
import { runLoadInChild } from './lib/load.ts';
import type { Row } from './proxy.ts';

export interface TracingBenchResult {
  mode: string;
  /** Median over rounds of this process's CPU µs per request (pipeline + origin + receiver). */
  cpuUsPerRequest: number;
  rps: number;
  exportedBatches: number;
}

const MODES = ['off', 'on (100 %)', 'parentbased_traceidratio 0.01'] as const;

/** A server on 127.0.0.1 answering every request with `answer`. */
async function listen(answer: http.RequestListener): Promise<http.Server> {
  const server = http.createServer(answer);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return server;
}

export async function benchTracing(rounds = 3, durationMs = 4_000): Promise<TracingBenchResult[]> {
  const origin = await listen((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 2 }).end('ok');
  });
  // The collector's side: takes each export and answers, without parsing (a collector's work is not the edge's).
  let batches = 0;
  const receiver = await listen((req, res) => {
    req.resume();
    req.on('end', () => {
      batches++;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  const config = new EndpointCache({ logger: createLogger('silent'), stages: STAGES });
  config.mirror.apply({ version: 1, topic: 'endpoint', key: 'bench', data: endpointConfig({ uuid: 'bench', hostname: 'bench.edge.localhost', origin_url: `http://127.0.0.1:${(origin.address() as AddressInfo).port}` }) });
  const samples = new Map<string, { cpu: number[]; rps: number[]; batches: number }>(MODES.map((m) => [m, { cpu: [], rps: [], batches: 0 }]));
  for (let round = 0; round < rounds; round++) {
    for (const mode of MODES) {
      const env = mode === 'off' ? {} : { OTEL_EXPORTER_OTLP_ENDPOINT: receiverUrl, ...(mode === 'on (100 %)' ? {} : { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01' }) };
      const tracing: Tracing | null = startTracing('edge', env);
      const edge = await servePipeline(config, { tracing });
      const before = batches;
      const r = await runLoadInChild({ origin: `http://127.0.0.1:${edge.port}`, host: 'bench.edge.localhost', path: '/api/items/42', connections: 16, warmupMs: 1_000, durationMs, cpuPids: [process.pid], expectBytes: 2 }, null);
      await tracing?.shutdown();
      await edge.close();
      if (r.errors > 0) throw new Error(`${mode}: ${r.errors} errors (${r.firstError})`);
      const s = samples.get(mode)!;
      s.cpu.push((r.cpuMs[0] * 1000) / r.requests);
      s.rps.push(r.rps);
      s.batches += batches - before;
    }
  }
  await closeServer(origin);
  await closeServer(receiver);
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  return MODES.map((mode) => {
    const s = samples.get(mode)!;
    return { mode, cpuUsPerRequest: median(s.cpu), rps: median(s.rps), exportedBatches: s.batches };
  });
}

export function describeTracing(results: TracingBenchResult[]): Row[] {
  const off = results.find((r) => r.mode === 'off')!.cpuUsPerRequest;
  return results.map((r) => ({
    benchmark: `tracing ${r.mode}: CPU per request through the edge pipeline (+ origin, receiver)`,
    result: `${r.cpuUsPerRequest.toFixed(1)} µs/request, ${(r.cpuUsPerRequest / off).toFixed(3)}× off, ${Math.round(r.rps)} req/s, ${r.exportedBatches} export batches`,
  }));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { formatTable } = await import('./proxy.ts');
  console.log(`\n${formatTable(describeTracing(await benchTracing(Number(process.env.BENCH_ROUNDS ?? 3))))}`);
}
