// The 64 KiB stall, measured: the edge alone (bench/lib/edge-process.ts) run with --trace-gc, loaded through an origin
// endpoint, and its GC lines counted over exactly the measured windows: scavenges and mark-compacts per 10k requests
// and per 10 s, the longest pause, beside each window's req/s and p99. Not in `npm run bench` (docs/performance.md
// quotes it). `npx tsx bench/gc-trace.ts` (BENCH_GC_SIZE=small|large, BENCH_GC_REQUESTS, BENCH_GC_ROUNDS;
// BENCH_GC_NODE_ARGS adds edge flags, e.g. "--heap-prof --heap-prof-dir=/tmp/hp" for where the allocations come from).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { endpointConfig } from '../test/helpers/endpoint-config.ts';
import { runLoadInChild } from './lib/load.ts';
import { TSX, benchFile, choosePinning, jsonLine, spawnNode, type Child } from './lib/procs.ts';
import { BODY_BYTES } from './upstream.ts';

interface GcCount {
  scavenges: number;
  markCompacts: number;
  /** Longest single pause (the figure after "MB," in a trace line), ms. */
  maxPauseMs: number;
  /** Longest incremental-marking step reported by a mark-compact, ms. */
  maxStepMs: number;
}

/** Counts the --trace-gc lines a child prints, so a window's share is the difference of two readings. */
function watchGc(child: Child): () => GcCount {
  const c: GcCount = { scavenges: 0, markCompacts: 0, maxPauseMs: 0, maxStepMs: 0 };
  createInterface({ input: child.process.stdout! }).on('line', (line) => {
    const m = /ms: (Scavenge|Mark-Compact|Mark-Sweep|Minor Mark-Sweep)\b.*?MB, ([\d.]+) \//.exec(line);
    if (!m) return;
    if (m[1] === 'Scavenge' || m[1] === 'Minor Mark-Sweep') c.scavenges++;
    else c.markCompacts++;
    c.maxPauseMs = Math.max(c.maxPauseMs, Number(m[2]));
    const step = /biggest step ([\d.]+) ms/.exec(line);
    if (step) c.maxStepMs = Math.max(c.maxStepMs, Number(step[1]));
  });
  return () => ({ ...c });
}

const size = process.env.BENCH_GC_SIZE === 'small' ? '/small' : '/large';
const requests = Number(process.env.BENCH_GC_REQUESTS ?? 20_000);
const rounds = Number(process.env.BENCH_GC_ROUNDS ?? 3);
const pin = choosePinning();
const children: Child[] = [];
const dataDir = await mkdtemp(join(tmpdir(), 'bench-gc-'));
try {
  const upstream = spawnNode('upstream', benchFile('upstream.ts'), [], { cpu: pin.restCpu, nodeArgs: TSX });
  children.push(upstream);
  const portLine = (l: string) => (typeof jsonLine(l)?.port === 'number' ? (jsonLine(l)!.port as number) : undefined);
  const upstreamPort = await upstream.waitForLine(portLine, 60_000);
  const file = join(dataDir, 'endpoints.json');
  await writeFile(file, JSON.stringify([endpointConfig({ id: 1, hostname: 'origin.bench.localhost', origin_url: `http://127.0.0.1:${upstreamPort}`, capture_enabled: true })]));
  const edge = spawnNode('origin edge', benchFile('lib/edge-process.ts'), [file], { cpu: pin.proxyCpu, nodeArgs: ['--trace-gc', ...(process.env.BENCH_GC_NODE_ARGS?.split(/\s+/).filter(Boolean) ?? []), ...TSX] });
  children.push(edge);
  const read = watchGc(edge);
  const edgePort = await edge.waitForLine(portLine, 60_000);
  const load = { origin: `http://127.0.0.1:${edgePort}`, host: 'origin.bench.localhost', path: size, connections: 16, expectBytes: BODY_BYTES[size], cpuPids: [edge.pid] };
  await runLoadInChild({ ...load, warmupMs: 0, durationMs: 3_000 }, pin.restCpu); // JIT, pools
  for (let round = 1; round <= rounds; round++) {
    const before = read();
    const r = await runLoadInChild({ ...load, warmupMs: 0, requests }, pin.restCpu);
    const after = read();
    const per10k = (n: number) => ((n * 10_000) / r.requests).toFixed(1);
    const per10s = (n: number) => ((n * 10_000) / r.windowMs).toFixed(1);
    const scav = after.scavenges - before.scavenges;
    const mc = after.markCompacts - before.markCompacts;
    console.log(
      `round ${round}: ${r.requests} × ${size} at ${r.rps.toFixed(0)} req/s, p99 ${r.p99Ms.toFixed(2)} ms, edge CPU ${((r.cpuMs[0] * 1000) / r.requests).toFixed(0)} µs/req; ` +
        `scavenges ${scav} (${per10k(scav)}/10k req, ${per10s(scav)}/10 s), mark-compacts ${mc} (${per10k(mc)}/10k req, ${per10s(mc)}/10 s); ` +
        `longest pause so far ${after.maxPauseMs.toFixed(1)} ms, longest marking step ${after.maxStepMs.toFixed(1)} ms` +
        (r.errors ? `; ${r.errors} errors (${r.firstError})` : ''),
    );
  }
} finally {
  for (const c of children.reverse()) await c.stop();
  await rm(dataDir, { recursive: true, force: true });
}
