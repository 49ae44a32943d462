// wrk as the proxy benchmark's load generator (BENCH_LOAD=wrk), the outside check's method: one thread, N connections,
// `--latency`; its report is parsed into the same LoadResult as bench/lib/load.ts gives, CPU read from /proc around it.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import type { LoadOptions, LoadResult } from './load.ts';
import { cpuTimeMs, spawnProgram, systemCpuTimeMs } from './procs.ts';

export type LoadKind = 'raw' | 'wrk';
export const WRK_BIN = process.env.BENCH_WRK_BIN ?? '/usr/bin/wrk';

/** "1.23ms", "456.00us", "1.02s" → ms. */
function durationMs(text: string): number {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(text.trim());
  if (!m) return Number.NaN;
  const n = Number(m[1]);
  return m[2] === 'us' ? n / 1000 : m[2] === 'ms' ? n : m[2] === 's' ? n * 1000 : n * 60_000;
}

export interface WrkReport {
  requests: number;
  seconds: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Non-2xx/3xx answers plus socket errors (connect, read, write, timeout). */
  errors: number;
  firstError?: string;
}

/** Reads wrk 4's text report (with --latency). */
export function parseWrk(out: string): WrkReport {
  const total = /(\d+) requests in ([\d.]+)(us|ms|s|m),/.exec(out);
  if (!total) throw new Error(`wrk: no "N requests in T" line in its output: ${out.slice(0, 400)}`);
  const pct = (p: string) => {
    const m = new RegExp(`^\\s*${p}%\\s+(\\S+)`, 'm').exec(out);
    return m ? durationMs(m[1]) : Number.NaN;
  };
  const max = /^\s*Latency\s+\S+\s+\S+\s+(\S+)/m.exec(out);
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out);
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const socketErrors = socket ? socket.slice(1).reduce((a, b) => a + Number(b), 0) : 0;
  const errors = (non2xx ? Number(non2xx[1]) : 0) + socketErrors;
  return {
    requests: Number(total[1]),
    seconds: durationMs(`${total[2]}${total[3]}`) / 1000,
    p50Ms: pct('50'),
    p99Ms: pct('99'),
    maxMs: max ? durationMs(max[1]) : Number.NaN,
    errors,
    firstError: errors > 0 ? (non2xx ? non2xx[0] : socket![0]) : undefined,
  };
}

async function wrk(o: LoadOptions, seconds: number, cpu: number | null, onStart?: () => void): Promise<{ out: string; selfCpuMs: number }> {
  const args = ['-t1', `-c${o.connections}`, `-d${seconds}s`, '--latency'];
  if (o.host) args.push('-H', `Host: ${o.host}`);
  for (const [name, value] of Object.entries(o.headers ?? {})) args.push('-H', `${name}: ${value}`);
  args.push(`${o.origin}${o.path}`);
  const child = spawnProgram('wrk', WRK_BIN, args, { cpu });
  let out = '';
  child.process.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  onStart?.();
  // wrk's own CPU: its /proc entry read until it exits (sampled, so up to 100 ms of its last tick may be missed).
  let selfCpuMs = 0;
  const sample = setInterval(() => {
    const t = cpuTimeMs(child.pid);
    if (Number.isFinite(t)) selfCpuMs = t;
  }, 100);
  const code = await child.exited;
  clearInterval(sample);
  if (code !== 0) throw new Error(`wrk exited with ${code}: ${child.stderr().trim()}`);
  return { out, selfCpuMs };
}

/**
 * One saturation window with wrk: an unmeasured run of `warmupMs`, then the measured one of `durationMs` with the
 * processes' CPU read at its two ends. wrk checks only the status class, not body lengths (the bench's probes did).
 */
export async function runWrk(o: LoadOptions, cpu: number | null): Promise<LoadResult> {
  if (!existsSync(WRK_BIN)) throw new Error(`BENCH_LOAD=wrk: no ${WRK_BIN}`);
  if (o.warmupMs > 0) await wrk(o, Math.max(1, Math.round(o.warmupMs / 1000)), cpu);
  const pids = o.cpuPids ?? [];
  let cpuStart: number[] = [];
  let systemStart = 0;
  const t0 = performance.now();
  const { out, selfCpuMs } = await wrk(o, Math.max(1, Math.round((o.durationMs ?? 3_000) / 1000)), cpu, () => {
    cpuStart = pids.map(cpuTimeMs);
    systemStart = systemCpuTimeMs();
  });
  const cpuMs = pids.map((pid, i) => cpuTimeMs(pid) - cpuStart[i]);
  const systemCpuMs = systemCpuTimeMs() - systemStart;
  const windowMs = performance.now() - t0;
  const r = parseWrk(out);
  return {
    requests: r.requests,
    errors: r.errors,
    firstError: r.firstError,
    windowMs,
    rps: r.requests / r.seconds,
    p50Ms: r.p50Ms,
    p99Ms: r.p99Ms,
    maxMs: r.maxMs,
    samples: r.requests,
    late: 0,
    cpuMs,
    selfCpuMs,
    systemCpuMs,
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href && process.argv[2] === '--self-test') {
  // wrk 4.1's report, as it prints it with --latency (one non-2xx answer, no socket errors).
  const sample = [
    'Running 2s test @ http://127.0.0.1:8080/small',
    '  1 threads and 16 connections',
    '  Thread Stats   Avg      Stdev     Max   +/- Stdev',
    '    Latency     1.61ms  710.35us  14.21ms   89.12%',
    '    Req/Sec    10.12k     1.01k   11.20k    85.00%',
    '  Latency Distribution',
    '     50%  850.00us',
    '     75%    1.80ms',
    '     90%    2.20ms',
    '     99%    4.10ms',
    '  20150 requests in 2.00s, 3.42MB read',
    '  Non-2xx or 3xx responses: 1',
    'Requests/sec:  10074.55',
    'Transfer/sec:      1.71MB',
  ].join('\n');
  assert.deepEqual(parseWrk(sample), { requests: 20150, seconds: 2, p50Ms: 0.85, p99Ms: 4.1, maxMs: 14.21, errors: 1, firstError: 'Non-2xx or 3xx responses: 1' });
  assert.throws(() => parseWrk('unable to connect to 127.0.0.1:1 Connection refused'), /no "N requests in T" line/);
  process.stdout.write('wrk report parsing: ok\n');
}
