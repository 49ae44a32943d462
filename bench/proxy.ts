// Whole-path load run: an upstream hit directly, through a bare http-proxy-3 proxy (the baseline), through the edge to
// an origin URL (bare, and with every visitor policy on) and through the edge and an agent tunnel, each party in its
// own pinned process. Every saturation case runs several rounds, interleaved with the baseline, so each ratio is
// taken against the baseline of its own round; the table gives the median and the spread (`tsx bench/proxy.ts`).
import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus as cpus_, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import bcrypt from 'bcrypt';
import { request } from 'undici';
import { makeKey, sign } from '../test/helpers/jwks-server.ts';
import { copyPgliteTemplate } from '../test/helpers/pglite-template.ts';
import { BIN, cleanEnv } from '../test/helpers/serve-process.ts';
import { endpointConfig } from '../test/helpers/endpoint-config.ts';
import { runLoadInChild, type LoadResult } from './lib/load.ts';
import { POLICY_USER, policyEndpoint } from './lib/policy-endpoint.ts';
import { TSX, benchFile, choosePinning, cpuTimeMs, jsonLine, spawnNode, type Child } from './lib/procs.ts';
import { BODY_BYTES } from './upstream.ts';

/** One line of the printed results table. */
export interface Row {
  benchmark: string;
  result: string;
}

export type Size = 'small' | 'large';
export type PathId = 'direct' | 'baseline' | 'origin' | 'origin-policies' | 'tunnel' | 'tunnel-ws';

export interface ProxyBenchOptions {
  /** Keep-alive connections from the load generator, one request in flight on each. */
  connections?: number;
  /** Saturation rounds: every case once per round, the baseline among them. */
  rounds?: number;
  /** Warm-up of each saturation window (every window has a fresh load generator and pool). */
  warmupMs?: number;
  /** Measured window of each saturation run. */
  measureMs?: number;
  /** Requests per second of the fixed-load runs that measure added latency (one round). */
  fixedRate?: number;
  fixedWarmupMs?: number;
  fixedMeasureMs?: number;
  sizes?: Size[];
  paths?: PathId[];
  /** Extra node flags for the edge and agent processes, e.g. ['--cpu-prof', '--cpu-prof-dir=/tmp/prof']. */
  edgeNodeArgs?: string[];
  agentNodeArgs?: string[];
  /** Progress lines; default: stderr. */
  progress?: (line: string) => void;
}

const SIZE_PATH: Record<Size, keyof typeof BODY_BYTES> = { small: '/small', large: '/large' };
const SIZE_LABEL: Record<Size, string> = { small: '100 B', large: '64 KiB' };
const PATH_LABEL: Record<PathId, string> = {
  direct: 'upstream direct',
  baseline: 'bare http-proxy-3 (baseline)',
  origin: 'edge → origin URL',
  'origin-policies': 'edge → origin, every policy on',
  tunnel: 'edge + agent tunnel (raw transport)',
  'tunnel-ws': 'edge + agent tunnel (WebSocket transport)',
};

interface Procs {
  upstream: Child;
  upstreamPort: number;
  baseline?: Child;
  baselinePort?: number;
  /** The edge alone (bench/lib/edge-process.ts) serving the origin cases. */
  originEdge?: Child;
  originEdgePort?: number;
  /** `edge serve` (every role) and its agent, for the tunnel case. */
  edge?: Child;
  edgeHttpPort?: number;
  agent?: Child;
  /** The endpoint served by the agent tunnel. */
  hostname?: string;
  /** A second agent, on the WebSocket transport (`--transport ws`), and its own endpoint. */
  agentWs?: Child;
  hostnameWs?: string;
  /** The credentials every request of the policy path sends: Basic in Authorization, a JWT in X-JWT-Assertion. */
  policyHeaders?: Record<string, string>;
}

const ORIGIN_HOST = 'origin.bench.localhost';
const POLICY_HOST = 'policies.bench.localhost';

interface Case {
  path: PathId;
  size: Size;
  /** One saturation window per round, in round order. */
  rounds: LoadResult[];
  /** The baseline's window of the same round and size (ratios are taken against it). */
  baseRounds: LoadResult[];
  fixed?: LoadResult;
}

const STARTUP_MS = 60_000;

async function api(base: string, key: string, method: string, path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await request(`${base}${path}`, {
    method: method as 'POST',
    headers: { 'x-api-key': key, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.body.text();
  if (res.statusCode >= 300) throw new Error(`${method} ${path}: ${res.statusCode} ${text}`);
  // PUT …/settings/jwt answers 200 with an empty body (docs/api.md).
  return (text ? JSON.parse(text) : {}) as Record<string, unknown>;
}

/** One GET, for checks before loading: status, body length and the edge's error code if it answered itself. */
async function probe(port: number, path: string, host?: string, headers?: Record<string, string>): Promise<{ status: number; bytes: number; edgeError?: string }> {
  const res = await request(`http://127.0.0.1:${port}${path}`, { headers: host || headers ? { ...headers, ...(host ? { host } : {}) } : undefined });
  const body = Buffer.from(await res.body.arrayBuffer());
  const edgeError = res.headers['x-edge-error'];
  return { status: res.statusCode, bytes: body.length, edgeError: typeof edgeError === 'string' ? edgeError : undefined };
}

async function until<T>(what: string, timeoutMs: number, attempt: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await attempt().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const portLine = (line: string) => {
  const port = jsonLine(line)?.port;
  return typeof port === 'number' ? port : undefined;
};

/**
 * `edge serve` with every role in one process (what `npm start` runs) on PGlite and the in-process feed, then a
 * pro user, an endpoint and an agent serving it from another process: the tunnel case. Nothing on the request
 * path logs at info, so the level costs nothing per request.
 */
async function startTunnelPath(
  procs: Procs,
  dataDir: string,
  options: ProxyBenchOptions,
  cleanup: Array<() => Promise<unknown>>,
  transports: Array<'raw' | 'ws'>,
): Promise<void> {
  const { proxyCpu, restCpu } = choosePinning();
  await copyPgliteTemplate(join(dataDir, 'pglite'));
  const adminKey = `bench-admin-${randomBytes(16).toString('hex')}`;
  const env = cleanEnv({ EDGE_DATA_DIR: dataDir, EDGE_ADMIN_API_KEY: adminKey, EDGE_LOG_LEVEL: 'info' });
  const edge = spawnNode('edge', BIN, ['serve'], { cpu: proxyCpu, env, nodeArgs: options.edgeNodeArgs });
  cleanup.push(() => edge.stop(10_000));
  procs.edge = edge;
  const ready = await edge.waitForLine((l) => {
    const entry = jsonLine(l);
    return entry?.msg === 'node ready' ? entry : undefined;
  }, STARTUP_MS);
  const control = `http://127.0.0.1:${ready.control as number}`;
  procs.edgeHttpPort = ready.http as number;
  const user = await api(control, adminKey, 'POST', '/v1/admin/users', { email: `bench-${randomBytes(4).toString('hex')}@example.test`, plan: 'pro' });
  const apiKey = user.api_key as string;
  // One endpoint and agent per transport asked for: raw (the default) and WebSocket, on the same edge.
  for (const transport of transports) {
    const endpoint = await api(control, apiKey, 'POST', '/v1/endpoints', {});
    const hostname = endpoint.hostname as string;
    // Capture off, as the origin cases drop their records: with it on (the default), the in-process worker of `edge
    // serve` writes every exchange into PGlite on the edge's own CPU, which measures the embedded store, not the
    // tunnel. Usage is still counted (per-minute aggregates).
    await api(control, apiKey, 'PUT', `/v1/endpoints/${endpoint.uuid as string}/settings/capture`, { capture_enabled: false });
    // The agent is admitted from the edge's config mirror, so wait until the feed has brought the endpoint there.
    await until('the endpoint reaching the edge', 15_000, async () => ((await probe(procs.edgeHttpPort!, '/', hostname)).edgeError === 'endpoint_not_found' ? undefined : true));
    const agent = spawnNode(
      `agent (${transport})`,
      BIN,
      ['agent', 'http', String(procs.upstreamPort), '--edge', `http://127.0.0.1:${procs.edgeHttpPort}`, '--endpoint', endpoint.uuid as string, '--api-key', apiKey, '--transport', transport],
      { cpu: restCpu, env: cleanEnv({ EDGE_LOG_LEVEL: 'warn' }), nodeArgs: options.agentNodeArgs },
    );
    cleanup.push(() => agent.stop(10_000));
    await agent.waitForLine((l) => (l.startsWith('Forwarding ') ? true : undefined), STARTUP_MS);
    if (transport === 'raw') {
      procs.agent = agent;
      procs.hostname = hostname;
    } else {
      procs.agentWs = agent;
      procs.hostnameWs = hostname;
    }
  }
}

/**
 * The edge alone with two endpoints on the upstream: one bare (capture at its default, on: metadata records are
 * built and shipped, to a sink that drops them), one with every policy on (rate limit, basic, JWT, RBAC, a routing
 * rule choosing the origin). The JWKS is served by this process on loopback (fetched once, then cached).
 */
async function startOriginEdge(procs: Procs, dataDir: string, options: ProxyBenchOptions, cleanup: Array<() => Promise<unknown>>): Promise<void> {
  const key = await makeKey('bench-rs256');
  const jwks = http.createServer((_req, res) => res.end(JSON.stringify({ keys: [key.jwk] })));
  await new Promise<void>((r) => jwks.listen(0, '127.0.0.1', r));
  cleanup.push(() => new Promise<void>((r) => (jwks.closeAllConnections(), jwks.close(() => r()))));
  const originUrl = `http://127.0.0.1:${procs.upstreamPort}`;
  const endpoints = [
    endpointConfig({ id: 1, uuid: '00000000-0000-4000-8000-000000000001', hostname: ORIGIN_HOST, origin_url: originUrl, capture_enabled: true }),
    policyEndpoint({
      id: 2,
      hostname: POLICY_HOST,
      originUrl,
      jwksUrl: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`,
      passwordHash: await bcrypt.hash(POLICY_USER.password, 10),
    }),
  ];
  const file = join(dataDir, 'endpoints.json');
  writeFileSync(file, JSON.stringify(endpoints));
  procs.policyHeaders = {
    authorization: `Basic ${Buffer.from(`${POLICY_USER.username}:${POLICY_USER.password}`).toString('base64')}`,
    'x-jwt-assertion': await sign(key, { sub: 'bench-user', exp: Math.floor(Date.now() / 1000) + 24 * 3600 }),
  };
  const edge = spawnNode('origin edge', benchFile('lib/edge-process.ts'), [file], { cpu: choosePinning().proxyCpu, nodeArgs: [...(options.edgeNodeArgs ?? []), ...TSX] });
  cleanup.push(() => edge.stop(10_000));
  procs.originEdge = edge;
  procs.originEdgePort = await edge.waitForLine(portLine, STARTUP_MS);
}

function fmt(n: number, digits = 0): string {
  if (!Number.isFinite(n)) return 'n/a';
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}
const ms = (n: number) => `${fmt(n, 2)} ms`;
const signedMs = (n: number) => `${n < 0 ? '−' : '+'}${ms(Math.abs(n))}`;
const ratio = (n: number) => (Number.isFinite(n) ? `${n.toFixed(2)}×` : 'n/a');

/** CPU model and count, for the setup row: figures are for this machine only. */
function machine(): string {
  const cpus = cpus_();
  return cpus.length > 0 ? `${cpus.length}× ${cpus[0].model.replace(/\s+/g, ' ').trim()}` : 'unknown CPU';
}

/** Median of the values (NaN for none). */
function median(values: number[]): number {
  const v = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (v.length === 0) return Number.NaN;
  const mid = v.length >> 1;
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

/** "median (min–max)" of per-round figures. */
function spread(values: number[], show: (n: number) => string): string {
  const v = values.filter(Number.isFinite);
  if (v.length === 0) return 'n/a';
  if (v.length === 1) return show(v[0]);
  return `${show(median(v))} (${show(Math.min(...v))}–${show(Math.max(...v))})`;
}

interface RowFacts {
  procs: Procs;
  cpuPids: number[];
  fixedRate: number;
  method: string;
  machine: string;
  processes: string;
  restCpu: number | null;
}

/**
 * The figures, as rows: per saturation case the median over rounds and the spread, each round's ratio taken against
 * the baseline of the same round; then the fixed-rate runs (added latency against the upstream hit directly).
 */
function buildRows(cases: Case[], f: RowFacts): Row[] {
  const { procs, cpuPids } = f;
  const cpuOf = (r: LoadResult, c: Child | undefined) => (c ? r.cpuMs[cpuPids.indexOf(c.pid)] : Number.NaN);
  const perReq = (cpuMsUsed: number, r: LoadResult) => (cpuMsUsed * 1000) / r.requests; // µs
  const proxyOf = (path: PathId) =>
    path === 'baseline' ? procs.baseline : path === 'direct' ? undefined : path === 'tunnel' || path === 'tunnel-ws' ? procs.edge : procs.originEdge;
  let worstForeign = 0;
  const foreignOf = (r: LoadResult) => {
    const ours = r.cpuMs.reduce((a, b) => a + (Number.isFinite(b) ? b : 0), 0) + r.selfCpuMs;
    const foreign = ((r.systemCpuMs - ours) / r.windowMs) * 100;
    if (Number.isFinite(foreign)) worstForeign = Math.max(worstForeign, foreign);
    return foreign;
  };
  // Everything pinned beside the load generator: the upstream and the agents.
  const harnessMs = (r: LoadResult) =>
    [procs.upstream, procs.agent, procs.agentWs].reduce((a, c) => a + (c && Number.isFinite(cpuOf(r, c)) ? cpuOf(r, c) : 0), r.selfCpuMs);
  const errorsOf = (rs: LoadResult[]) => {
    const e = rs.reduce((a, r) => a + r.errors, 0);
    return e > 0 ? `; ${e} ERRORS (first: ${rs.find((r) => r.firstError)?.firstError})` : '';
  };
  const rows: Row[] = [];
  for (const c of cases.filter((x) => x.rounds.length > 0)) {
    const proxy = proxyOf(c.path);
    const rps = c.rounds.map((r) => r.rps);
    let result = `${spread(rps, (n) => fmt(n))} req/s`;
    if (c.path !== 'baseline') result += `, ${spread(c.rounds.map((r, i) => r.rps / c.baseRounds[i].rps), ratio)} baseline`;
    result += `; p50 ${spread(c.rounds.map((r) => r.p50Ms), (n) => fmt(n, 2))} ms, p99 ${spread(c.rounds.map((r) => r.p99Ms), (n) => fmt(n, 2))} ms`;
    if (c.path !== 'baseline') {
      result += ` (p99 ${spread(c.rounds.map((r, i) => r.p99Ms / c.baseRounds[i].p99Ms), ratio)} baseline's)`;
    }
    const cpu = c.rounds.map((r) => perReq(cpuOf(r, proxy), r));
    result += `; ${c.path === 'baseline' ? 'proxy' : 'edge'} CPU ${spread(cpu, (n) => fmt(n))} µs/req`;
    if (c.path !== 'baseline') result += ` (${spread(c.rounds.map((r, i) => perReq(cpuOf(r, proxy), r) / perReq(cpuOf(c.baseRounds[i], procs.baseline), c.baseRounds[i])), ratio)})`;
    if (c.path === 'tunnel' || c.path === 'tunnel-ws') {
      const agent = c.path === 'tunnel' ? procs.agent : procs.agentWs;
      result += `, agent ${spread(c.rounds.map((r) => perReq(cpuOf(r, agent), r)), (n) => fmt(n))} µs/req`;
    }
    result += `; ${proxy ? `${c.path === 'baseline' ? 'proxy' : 'edge'} busy ${spread(c.rounds.map((r) => (cpuOf(r, proxy) / r.windowMs) * 100), (n) => `${fmt(n)}%`)}` : ''}`;
    // The other side's share: when it nears 100 %, the harness, not the proxy, set this case's req/s.
    result += `, ${f.restCpu === null ? 'harness' : 'other core'} busy ${spread(c.rounds.map((r) => (harnessMs(r) / r.windowMs) * 100), (n) => `${fmt(n)}%`)}`;
    const foreign = Math.max(...c.rounds.map(foreignOf));
    if (foreign > 10) result += `; NOISY: other processes up to ~${fmt(foreign)}% of a CPU`;
    rows.push({ benchmark: `proxy ${SIZE_LABEL[c.size]}, ${PATH_LABEL[c.path]}`, result: result + errorsOf(c.rounds) });
  }
  for (const size of [...new Set(cases.map((c) => c.size))]) {
    const direct = cases.find((c) => c.path === 'direct' && c.size === size)?.fixed;
    for (const c of cases.filter((x) => x.size === size && x.fixed)) {
      const r = c.fixed!;
      let result = `p50 ${ms(r.p50Ms)}, p99 ${ms(r.p99Ms)}`;
      if (c.path !== 'direct' && direct) result += ` (${signedMs(r.p50Ms - direct.p50Ms)} p50, ${signedMs(r.p99Ms - direct.p99Ms)} p99 vs direct)`;
      const proxy = proxyOf(c.path);
      if (proxy) result += `; ${c.path === 'baseline' ? 'proxy' : 'edge'} CPU ${fmt(perReq(cpuOf(r, proxy), r))} µs/req`;
      result += `; ${fmt(r.rps)} req/s achieved`;
      if (r.late > 0) result += `, ${fmt(r.late)} starts >5 ms behind schedule`;
      const foreign = foreignOf(r);
      if (foreign > 10) result += `; NOISY: other processes ~${fmt(foreign)}% of a CPU`;
      rows.push({ benchmark: `proxy ${SIZE_LABEL[size]} at ${fmt(f.fixedRate)} req/s, ${PATH_LABEL[c.path]}`, result: result + errorsOf([r]) });
    }
  }
  // The harness's own cost per request, over every saturation window of a size: the budget of the other core.
  const saturatedOf = (size: Size) => cases.filter((c) => c.size === size).flatMap((c) => c.rounds);
  const harness = [...new Set(cases.map((c) => c.size))]
    .map((size) => {
      const rs = saturatedOf(size);
      const load = median(rs.map((r) => perReq(r.selfCpuMs, r)));
      const upstream = median(rs.map((r) => perReq(cpuOf(r, procs.upstream), r)));
      const busy = median(rs.map((r) => (harnessMs(r) / r.windowMs) * 100));
      return `${SIZE_LABEL[size]}: load generator ${fmt(load)} µs/req, upstream ${fmt(upstream)} µs/req, ${f.restCpu === null ? 'harness' : 'other core'} busy ${fmt(busy)}%`;
    })
    .join('; ');
  rows.unshift(
    { benchmark: 'proxy: method', result: `${f.method}; harness CPU (median of the saturation windows) ${harness}` },
    { benchmark: 'proxy: machine', result: `${f.machine}; other processes during the windows: max ~${fmt(worstForeign)}% of a CPU` },
    { benchmark: 'proxy: processes', result: f.processes },
  );
  return rows;
}

/**
 * Waits (at most 5 s) until the bench's own processes are quiet: under 5 % of a CPU together over 200 ms. After a
 * tunnel window `edge serve`'s in-process worker still writes that window's usage records, on the proxy's CPU, and an
 * origin window started then measured that work too (the edge's CPU per 64 KiB request swung 114-192 µs by round).
 */
async function settle(pids: number[]): Promise<void> {
  const busy = () => pids.reduce((sum, pid) => sum + cpuTimeMs(pid), 0);
  for (let i = 0; i < 25; i++) {
    const before = busy();
    await new Promise((r) => setTimeout(r, 200));
    if ((busy() - before) / 200 < 0.05) return;
  }
}

/** Rejects options that would make a run meaningless before any process starts (they may come from the environment). */
function validate(options: ProxyBenchOptions): void {
  for (const key of ['connections', 'rounds', 'warmupMs', 'measureMs', 'fixedRate', 'fixedWarmupMs', 'fixedMeasureMs'] as const) {
    const v = options[key];
    if (v !== undefined && !(Number.isFinite(v) && v > 0)) throw new RangeError(`benchProxy: ${key} must be a positive number, got ${v}`);
  }
  if (options.rounds !== undefined && !Number.isInteger(options.rounds)) throw new RangeError(`benchProxy: rounds must be an integer, got ${options.rounds}`);
  for (const size of options.sizes ?? []) {
    if (!(size in SIZE_PATH)) throw new RangeError(`benchProxy: unknown size "${size}" (use ${Object.keys(SIZE_PATH).join(', ')})`);
  }
  for (const path of options.paths ?? []) {
    if (!(path in PATH_LABEL)) throw new RangeError(`benchProxy: unknown path "${path}" (use ${Object.keys(PATH_LABEL).join(', ')})`);
  }
}

export async function benchProxy(options: ProxyBenchOptions = {}): Promise<Row[]> {
  validate(options);
  const connections = options.connections ?? 16;
  const rounds = options.rounds ?? 3;
  const warmupMs = options.warmupMs ?? 1_000;
  const measureMs = options.measureMs ?? 3_000;
  const fixedRate = options.fixedRate ?? 250;
  const fixedWarmupMs = options.fixedWarmupMs ?? 500;
  const fixedMeasureMs = options.fixedMeasureMs ?? 4_000;
  const sizes = options.sizes ?? ['small', 'large'];
  // The baseline always runs: every ratio needs its round's baseline.
  const paths: PathId[] = [...new Set<PathId>(['baseline', ...(options.paths ?? ['direct', 'origin', 'origin-policies', 'tunnel', 'tunnel-ws'])])];
  const progress = options.progress ?? ((line: string) => process.stderr.write(`proxy bench: ${line}\n`));
  const pin = choosePinning();

  const cleanup: Array<() => Promise<unknown>> = [];
  try {
    progress('starting upstream, baseline proxy, edges and agent');
    const upstream = spawnNode('upstream', benchFile('upstream.ts'), [], { cpu: pin.restCpu, nodeArgs: TSX });
    cleanup.push(() => upstream.stop());
    const procs: Procs = { upstream, upstreamPort: await upstream.waitForLine(portLine, STARTUP_MS) };
    procs.baseline = spawnNode('baseline proxy', benchFile('baseline-proxy.ts'), [String(procs.upstreamPort)], { cpu: pin.proxyCpu, nodeArgs: TSX });
    cleanup.push(() => procs.baseline!.stop());
    procs.baselinePort = await procs.baseline.waitForLine(portLine, STARTUP_MS);
    const dataDir = await mkdtemp(join(tmpdir(), 'edge-bench-'));
    cleanup.push(() => rm(dataDir, { recursive: true, force: true }));
    // Should this process die before the cleanup runs, the store copy (tens of MB) still goes.
    process.once('exit', () => rmSync(dataDir, { recursive: true, force: true }));
    if (paths.includes('origin') || paths.includes('origin-policies')) await startOriginEdge(procs, dataDir, options, cleanup);
    const transports = (['raw', 'ws'] as const).filter((t) => paths.includes(t === 'raw' ? 'tunnel' : 'tunnel-ws'));
    if (transports.length > 0) await startTunnelPath(procs, dataDir, options, cleanup, transports);

    const target = (path: PathId): { port: number; host?: string; headers?: Record<string, string> } =>
      path === 'direct'
        ? { port: procs.upstreamPort }
        : path === 'baseline'
          ? { port: procs.baselinePort! }
          : path === 'origin'
            ? { port: procs.originEdgePort!, host: ORIGIN_HOST }
            : path === 'origin-policies'
              ? { port: procs.originEdgePort!, host: POLICY_HOST, headers: procs.policyHeaders }
              : { port: procs.edgeHttpPort!, host: path === 'tunnel-ws' ? procs.hostnameWs : procs.hostname };
    // Every path must answer correctly before any figure is taken from it.
    for (const path of paths) {
      for (const size of sizes) {
        const { port, host, headers } = target(path);
        const r = await probe(port, SIZE_PATH[size], host, headers);
        if (r.status !== 200 || r.bytes !== BODY_BYTES[SIZE_PATH[size]]) {
          throw new Error(`${PATH_LABEL[path]} answered ${r.status} with ${r.bytes} bytes${r.edgeError ? ` (${r.edgeError})` : ''} for ${SIZE_PATH[size]}`);
        }
      }
    }

    // Background work of the all-in-one node (timers of the worker role, presence, feed checks) runs on the edge's
    // CPU during the tunnel windows too; measured here so the per-request figures can be read against it.
    let edgeIdleMsPerS = Number.NaN;
    if (procs.edge) {
      const before = cpuTimeMs(procs.edge.pid);
      await new Promise((r) => setTimeout(r, 2_000));
      edgeIdleMsPerS = (cpuTimeMs(procs.edge.pid) - before) / 2;
    }

    // Every run reads all the processes; idle ones read ~0.
    const watched = [procs.upstream, procs.baseline, procs.originEdge, procs.edge, procs.agent, procs.agentWs];
    const cpuPids = watched.map((c) => c?.pid ?? 0).filter((pid) => pid > 0);
    const loadOf = (path: PathId, size: Size) => {
      const { port, host, headers } = target(path);
      return { origin: `http://127.0.0.1:${port}`, host, headers, path: SIZE_PATH[size], connections, expectBytes: BODY_BYTES[SIZE_PATH[size]], cpuPids };
    };

    const cases: Case[] = [];
    for (const size of sizes) for (const path of paths) cases.push({ path, size, rounds: [], baseRounds: [] });
    const caseOf = (path: PathId, size: Size) => cases.find((c) => c.path === path && c.size === size)!;
    // Saturation, interleaved: each round runs every case of a size back to back, in an order rotated per round (so
    // no case always follows the same neighbour), and each case's ratio is against its own round's baseline.
    const saturated = paths.filter((p) => p !== 'direct');
    for (let round = 0; round < rounds; round++) {
      for (const size of sizes) {
        const order = saturated.map((_, i) => saturated[(i + round) % saturated.length]);
        const results = new Map<PathId, LoadResult>();
        for (const path of order) {
          progress(`round ${round + 1}/${rounds}, ${SIZE_LABEL[size]}, ${PATH_LABEL[path]}: ${connections} connections, ${warmupMs / 1000} s warm-up + ${measureMs / 1000} s`);
          await settle(cpuPids);
          results.set(path, await runLoadInChild({ ...loadOf(path, size), warmupMs, durationMs: measureMs }, pin.restCpu));
        }
        for (const path of order) {
          caseOf(path, size).rounds.push(results.get(path)!);
          caseOf(path, size).baseRounds.push(results.get('baseline')!);
        }
      }
    }
    // Added latency at a fixed, moderate rate: one run per case.
    for (const size of sizes) {
      for (const path of paths) {
        progress(`${SIZE_LABEL[size]}, ${PATH_LABEL[path]}: ${fixedRate} req/s, ${fixedWarmupMs / 1000} s warm-up + ${fixedMeasureMs / 1000} s`);
        await settle(cpuPids);
        caseOf(path, size).fixed = await runLoadInChild({ ...loadOf(path, size), rate: fixedRate, warmupMs: fixedWarmupMs, durationMs: fixedMeasureMs }, pin.restCpu);
      }
    }

    return buildRows(cases, {
      procs,
      cpuPids,
      fixedRate,
      method:
        `closed loop: ${connections} raw keep-alive connections (bench/lib/load.ts), ${rounds} rounds of ${warmupMs / 1000} s warm-up + ${measureMs / 1000} s measured per case, ` +
        `interleaved with the baseline; figures are median (min–max) over rounds, ratios against the same round's baseline; ` +
        `fixed load: ${fmt(fixedRate)} req/s for ${fixedMeasureMs / 1000} s; CPU per request = the process's utime+stime (/proc) over the window ÷ responses`,
      machine: `node ${process.version}, ${machine()}; ${pin.how}`,
      processes:
        `origin cases: the edge alone (bench/lib/edge-process.ts: startEdge, in-process feed, records dropped); ` +
        `tunnel: \`edge serve\` (all roles, PGlite; idle ${fmt(edgeIdleMsPerS, 1)} ms CPU/s) + \`edge agent http --transport raw\` (and \`ws\`, on its own endpoint); ` +
        `baseline = bench/baseline-proxy.ts, upstream = bench/upstream.ts`,
      restCpu: pin.restCpu,
    });
  } finally {
    progress('stopping child processes');
    for (const step of cleanup.reverse()) await step().catch(() => {});
  }
}

/** The results table `npm run bench` prints: one row per figure, the benchmark's name and its result. */
export function formatTable(rows: Row[]): string {
  const width = Math.max('benchmark'.length, ...rows.map((r) => r.benchmark.length));
  const lines = [`${'benchmark'.padEnd(width)} | result`, `${'-'.repeat(width)}-|-${'-'.repeat(40)}`];
  for (const r of rows) lines.push(`${r.benchmark.padEnd(width)} | ${r.result}`);
  return lines.join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  // Short runs for exploring: BENCH_PROXY_ROUNDS=1 BENCH_PROXY_PATHS=origin BENCH_PROXY_SIZES=large tsx bench/proxy.ts
  const env = (name: string) => (process.env[name] ? Number(process.env[name]) : undefined);
  const split = (name: string) => process.env[name]?.split(/\s+/).filter(Boolean);
  const rows = await benchProxy({
    rounds: env('BENCH_PROXY_ROUNDS'),
    warmupMs: env('BENCH_PROXY_WARMUP_MS'),
    measureMs: env('BENCH_PROXY_MEASURE_MS'),
    fixedRate: env('BENCH_PROXY_FIXED_RATE'),
    sizes: split('BENCH_PROXY_SIZES') as Size[] | undefined,
    paths: split('BENCH_PROXY_PATHS') as PathId[] | undefined,
    edgeNodeArgs: split('BENCH_EDGE_NODE_ARGS'),
    agentNodeArgs: split('BENCH_AGENT_NODE_ARGS'),
  });
  console.log(`\n${formatTable(rows)}`);
}
