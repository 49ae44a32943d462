// Whole-path load run: an upstream hit directly, through a bare http-proxy-3 proxy (the baseline), through the edge to
// an origin URL (without and with basic auth + the JWT layer on) and through the edge and an agent tunnel, each in its
// own pinned process (`tsx bench/proxy.ts`).
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus as cpus_, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { makeKey, sign } from '../test/helpers/jwks-server.ts';
import { copyPgliteTemplate } from '../test/helpers/pglite-template.ts';
import { BIN, cleanEnv } from '../test/helpers/serve-process.ts';
import { runLoadInChild, type LoadResult } from './lib/load.ts';
import { TSX, benchFile, choosePinning, cpuTimeMs, jsonLine, spawnNode, type Child } from './lib/procs.ts';
import { BODY_BYTES } from './upstream.ts';

/** One line of the printed results table. */
export interface Row {
  benchmark: string;
  result: string;
}

export type Size = 'small' | 'large';
export type PathId = 'direct' | 'baseline' | 'origin' | 'origin-auth' | 'tunnel';

export interface ProxyBenchOptions {
  /** Keep-alive connections from the load generator, one request in flight on each. */
  connections?: number;
  /** Warm-up before a path's first measured window (JIT, pools); later sizes on the same path get `rewarmMs`. */
  warmupMs?: number;
  rewarmMs?: number;
  /** Measured window of each saturation run. */
  measureMs?: number;
  /** Requests per second of the fixed-load runs that measure added latency. */
  fixedRate?: number;
  fixedWarmupMs?: number;
  fixedMeasureMs?: number;
  sizes?: Size[];
  paths?: PathId[];
  /** Extra node flags for the edge and agent processes, e.g. ['--cpu-prof', '--cpu-prof-dir=/tmp/prof']. */
  edgeNodeArgs?: string[];
  agentNodeArgs?: string[];
  /** Progress lines (a run takes about two minutes); default: stderr. */
  progress?: (line: string) => void;
}

const SIZE_PATH: Record<Size, keyof typeof BODY_BYTES> = { small: '/small', large: '/large' };
const SIZE_LABEL: Record<Size, string> = { small: '100 B', large: '64 KiB' };
const PATH_LABEL: Record<PathId, string> = {
  direct: 'upstream direct',
  baseline: 'bare http-proxy-3 (baseline)',
  origin: 'edge → origin URL',
  'origin-auth': 'edge → origin with basic + JWT on',
  tunnel: 'edge + agent tunnel',
};

interface Procs {
  upstream: Child;
  upstreamPort: number;
  baseline?: Child;
  baselinePort?: number;
  edge?: Child;
  edgeHttpPort?: number;
  agent?: Child;
  /** The endpoint served by the agent tunnel. */
  hostname?: string;
  /** The endpoint whose origin URL is the upstream. */
  originHostname?: string;
  /** The same origin behind basic auth and the JWT layer, and the credentials every request of that path sends. */
  authHostname?: string;
  authHeaders?: Record<string, string>;
}

interface Case {
  path: PathId;
  size: Size;
  saturated: LoadResult;
  fixed: LoadResult;
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
  // PUT …/settings/jwt answers 200 with an empty body (SPEC.md).
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
 * pro user, an endpoint and an agent serving it from another process. Everything logs at info or below only at
 * start: nothing on the request path logs at info, so the level costs nothing per request.
 */
async function startEdgePath(procs: Procs, dataDir: string, options: ProxyBenchOptions, cleanup: Array<() => Promise<unknown>>): Promise<void> {
  const { proxyCpu, restCpu } = choosePinning();
  await copyPgliteTemplate(join(dataDir, 'pglite'));
  const adminKey = `bench-admin-${randomBytes(16).toString('hex')}`;
  // "node ready" is an info line, so the level cannot be above info.
  // The upstream is on loopback, which origin URLs may name only where the operator allows private origins.
  const env = cleanEnv({ EDGE_DATA_DIR: dataDir, EDGE_ADMIN_API_KEY: adminKey, EDGE_LOG_LEVEL: 'info', EDGE_ORIGIN_ALLOW_PRIVATE: 'true' });
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
  const endpoint = await api(control, apiKey, 'POST', '/v1/endpoints', {});
  const hostname = endpoint.hostname as string;
  procs.hostname = hostname;
  const originEndpoint = await api(control, apiKey, 'POST', '/v1/endpoints', {});
  await api(control, apiKey, 'PUT', `/v1/endpoints/${originEndpoint.uuid as string}/origin`, { url: `http://127.0.0.1:${procs.upstreamPort}` });
  procs.originHostname = originEndpoint.hostname as string;
  // The same origin with visitor auth: basic (bcrypt once, then the cached verdict) and a JWT layer whose JWKS this
  // process serves on loopback (fetched once); the JWT goes in X-JWT-Assertion since Basic holds Authorization.
  const key = await makeKey('bench-rs256');
  const jwks = http.createServer((_req, res) => res.end(JSON.stringify({ keys: [key.jwk] })));
  await new Promise<void>((r) => jwks.listen(0, '127.0.0.1', r));
  cleanup.push(() => new Promise<void>((r) => (jwks.closeAllConnections(), jwks.close(() => r()))));
  const authEndpoint = await api(control, apiKey, 'POST', '/v1/endpoints', {});
  const authUuid = authEndpoint.uuid as string;
  await api(control, apiKey, 'PUT', `/v1/endpoints/${authUuid}/origin`, { url: `http://127.0.0.1:${procs.upstreamPort}` });
  await api(control, apiKey, 'PUT', `/v1/endpoints/${authUuid}/settings`, { mode: 'basic', basic_users: [{ username: 'bench', password: 'bench-password-1' }] });
  await api(control, apiKey, 'PUT', `/v1/endpoints/${authUuid}/settings/jwt`, {
    enabled: true,
    jwks_url: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`,
    claim_headers: JSON.stringify({ sub: 'x-user' }),
  });
  procs.authHostname = authEndpoint.hostname as string;
  procs.authHeaders = {
    authorization: `Basic ${Buffer.from('bench:bench-password-1').toString('base64')}`,
    'x-jwt-assertion': await sign(key, { sub: 'bench-user', exp: Math.floor(Date.now() / 1000) + 24 * 3600 }),
  };
  // The agent is admitted from the edge's config mirror, so wait until the feed has brought both endpoints there.
  await until('the endpoints reaching the edge', 15_000, async () => {
    const tunnel = await probe(procs.edgeHttpPort!, '/', hostname);
    const origin = await probe(procs.edgeHttpPort!, '/small', procs.originHostname);
    const authed = await probe(procs.edgeHttpPort!, '/small', procs.authHostname, procs.authHeaders);
    return tunnel.edgeError === 'endpoint_not_found' || origin.status !== 200 || authed.status !== 200 ? undefined : true;
  });

  const agent = spawnNode(
    'agent',
    BIN,
    ['agent', 'http', String(procs.upstreamPort), '--edge', `http://127.0.0.1:${procs.edgeHttpPort}`, '--endpoint', endpoint.uuid as string, '--api-key', apiKey],
    { cpu: restCpu, env: cleanEnv({ EDGE_LOG_LEVEL: 'warn' }), nodeArgs: options.agentNodeArgs },
  );
  cleanup.push(() => agent.stop(10_000));
  procs.agent = agent;
  await agent.waitForLine((l) => (l.startsWith('Forwarding ') ? true : undefined), STARTUP_MS);
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

interface RowFacts {
  procs: Procs;
  cpuPids: number[];
  fixedRate: number;
  /** How the load was made, where things ran, what the edge process is: the first rows of the table. */
  method: string;
  machine: string;
  edgeProcess: string;
  restCpu: number | null;
}

/**
 * The figures, as rows. Saturated runs give throughput and the cost per request at full load; the fixed-rate runs
 * give added latency and the cost per request with every path under the same load, the fairer CPU comparison
 * (a process that is not saturated batches less work per wake-up, so its cost per request is higher).
 */
function buildRows(cases: Case[], f: RowFacts): Row[] {
  const { procs, cpuPids } = f;
  const cpuOf = (r: LoadResult, c: Child | undefined) => (c ? r.cpuMs[cpuPids.indexOf(c.pid)] : Number.NaN);
  const perReq = (cpuMsUsed: number, r: LoadResult) => (cpuMsUsed * 1000) / r.requests; // µs
  const pct = (cpuMsUsed: number, r: LoadResult) => `${fmt((cpuMsUsed / r.windowMs) * 100)}%`;
  const proxyOf = (path: PathId) => (path === 'baseline' ? procs.baseline : path === 'direct' ? undefined : procs.edge);
  // What ran during the window besides this benchmark (other people's tests, say): a figure taken then is suspect.
  let worstForeign = 0;
  const notes = (r: LoadResult) => {
    let out = r.errors > 0 ? `; ${r.errors} ERRORS (first: ${r.firstError})` : '';
    const ours = r.cpuMs.reduce((a, b) => a + (Number.isFinite(b) ? b : 0), 0) + r.selfCpuMs;
    const foreign = ((r.systemCpuMs - ours) / r.windowMs) * 100;
    if (Number.isFinite(foreign)) worstForeign = Math.max(worstForeign, foreign);
    if (foreign > 10) out += `; NOISY: other processes used ~${fmt(foreign)}% of a CPU`;
    return out;
  };
  /** The proxying processes' CPU per request, against the baseline proxy's in the same kind of run. */
  const cpuNote = (path: PathId, r: LoadResult, baseCpu: number): string => {
    if (path === 'baseline') return `; proxy CPU ${fmt(baseCpu)} µs/req`;
    if (path === 'direct') return '';
    const edge = perReq(cpuOf(r, procs.edge), r);
    let note = `; edge CPU ${fmt(edge)} µs/req (${ratio(edge / baseCpu)} baseline)`;
    if (path === 'tunnel') {
      const agent = perReq(cpuOf(r, procs.agent), r);
      note += `, agent ${fmt(agent)} µs/req, edge+agent ${fmt(edge + agent)} µs/req (${ratio((edge + agent) / baseCpu)})`;
    }
    return note;
  };
  const find = (path: PathId, size: Size) => cases.find((c) => c.path === path && c.size === size);

  const rows: Row[] = [];
  for (const size of [...new Set(cases.map((c) => c.size))]) {
    const base = find('baseline', size)?.saturated;
    const baseCpu = base ? perReq(cpuOf(base, procs.baseline), base) : Number.NaN;
    for (const c of cases.filter((x) => x.size === size)) {
      const r = c.saturated;
      const proxy = proxyOf(c.path);
      let result = `${fmt(r.rps)} req/s`;
      if (c.path !== 'direct') result += ` (${ratio(base ? r.rps / base.rps : Number.NaN)} baseline)`;
      result += `, p50 ${ms(r.p50Ms)}, p99 ${ms(r.p99Ms)}`;
      result += cpuNote(c.path, r, baseCpu);
      // Which CPU was the limit: the proxy's own, or the one the upstream, agent and load generator share.
      const rest = cpuOf(r, procs.upstream) + (c.path === 'tunnel' ? cpuOf(r, procs.agent) : 0) + r.selfCpuMs;
      const restName = f.restCpu === null ? 'upstream+agent+load gen' : `CPU ${f.restCpu}`;
      result += `; busy: ${proxy ? `${c.path === 'baseline' ? 'proxy' : 'edge'} ${pct(cpuOf(r, proxy), r)}, ` : ''}${restName} ${pct(rest, r)}`;
      rows.push({ benchmark: `proxy ${SIZE_LABEL[size]}, ${PATH_LABEL[c.path]}`, result: result + notes(r) });
    }
  }
  for (const size of [...new Set(cases.map((c) => c.size))]) {
    const direct = find('direct', size)?.fixed;
    const base = find('baseline', size)?.fixed;
    const baseCpu = base ? perReq(cpuOf(base, procs.baseline), base) : Number.NaN;
    for (const c of cases.filter((x) => x.size === size)) {
      const r = c.fixed;
      let result = `p50 ${ms(r.p50Ms)}, p99 ${ms(r.p99Ms)}`;
      if (c.path !== 'direct' && direct) result += ` (${signedMs(r.p50Ms - direct.p50Ms)} p50, ${signedMs(r.p99Ms - direct.p99Ms)} p99 vs direct)`;
      result += cpuNote(c.path, r, baseCpu);
      // The schedule was kept or not: a path that cannot sustain the rate reports queueing, not latency.
      result += `; ${fmt(r.rps)} req/s achieved`;
      if (r.late > 0) result += `, ${fmt(r.late)} starts >5 ms behind schedule`;
      rows.push({ benchmark: `proxy ${SIZE_LABEL[size]} at ${fmt(f.fixedRate)} req/s, ${PATH_LABEL[c.path]}`, result: result + notes(r) });
    }
  }
  rows.unshift(
    { benchmark: 'proxy: method', result: f.method },
    { benchmark: 'proxy: machine', result: `${f.machine}; other processes during the windows: max ~${fmt(worstForeign)}% of a CPU` },
    { benchmark: 'proxy: processes', result: f.edgeProcess },
  );
  return rows;
}

/** Rejects options that would make a run meaningless before any process starts (they may come from the environment). */
function validate(options: ProxyBenchOptions): void {
  for (const key of ['connections', 'warmupMs', 'rewarmMs', 'measureMs', 'fixedRate', 'fixedWarmupMs', 'fixedMeasureMs'] as const) {
    const v = options[key];
    if (v !== undefined && !(Number.isFinite(v) && v > 0)) throw new RangeError(`benchProxy: ${key} must be a positive number, got ${v}`);
  }
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
  const warmupMs = options.warmupMs ?? 5_000;
  const rewarmMs = options.rewarmMs ?? 2_000;
  const measureMs = options.measureMs ?? 10_000;
  const fixedRate = options.fixedRate ?? 250;
  const fixedWarmupMs = options.fixedWarmupMs ?? 1_000;
  const fixedMeasureMs = options.fixedMeasureMs ?? 6_000;
  const sizes = options.sizes ?? ['small', 'large'];
  const paths = options.paths ?? ['direct', 'baseline', 'origin', 'origin-auth', 'tunnel'];
  const progress = options.progress ?? ((line: string) => process.stderr.write(`proxy bench: ${line}\n`));
  const pin = choosePinning();

  const cleanup: Array<() => Promise<unknown>> = [];
  try {
    progress('starting upstream, baseline proxy, edge and agent');
    const upstream = spawnNode('upstream', benchFile('upstream.ts'), [], { cpu: pin.restCpu, nodeArgs: TSX });
    cleanup.push(() => upstream.stop());
    const procs: Procs = { upstream, upstreamPort: await upstream.waitForLine(portLine, STARTUP_MS) };
    if (paths.includes('baseline')) {
      procs.baseline = spawnNode('baseline proxy', benchFile('baseline-proxy.ts'), [String(procs.upstreamPort)], { cpu: pin.proxyCpu, nodeArgs: TSX });
      cleanup.push(() => procs.baseline!.stop());
      procs.baselinePort = await procs.baseline.waitForLine(portLine, STARTUP_MS);
    }
    if (paths.includes('tunnel') || paths.includes('origin') || paths.includes('origin-auth')) {
      const dataDir = await mkdtemp(join(tmpdir(), 'edge-bench-'));
      cleanup.push(() => rm(dataDir, { recursive: true, force: true }));
      // Should this process die before the cleanup runs, the store copy (tens of MB) still goes.
      process.once('exit', () => rmSync(dataDir, { recursive: true, force: true }));
      await startEdgePath(procs, dataDir, options, cleanup);
    }

    const target = (path: PathId): { port: number; host?: string; headers?: Record<string, string> } =>
      path === 'direct'
        ? { port: procs.upstreamPort }
        : path === 'baseline'
          ? { port: procs.baselinePort! }
          : path === 'origin-auth'
            ? { port: procs.edgeHttpPort!, host: procs.authHostname, headers: procs.authHeaders }
            : { port: procs.edgeHttpPort!, host: path === 'origin' ? procs.originHostname : procs.hostname };
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
    // CPU during its windows too; measured here so the per-request figures can be read against it.
    let edgeIdleMsPerS = Number.NaN;
    if (procs.edge) {
      const before = cpuTimeMs(procs.edge.pid);
      await new Promise((r) => setTimeout(r, 2_000));
      edgeIdleMsPerS = (cpuTimeMs(procs.edge.pid) - before) / 2;
    }

    // Every run reads all four processes; idle ones read ~0. Order: [upstream, baseline, edge, agent].
    const watched = [procs.upstream, procs.baseline, procs.edge, procs.agent];
    const cpuPids = watched.map((c) => c?.pid ?? 0).filter((pid) => pid > 0);

    const cases: Case[] = [];
    for (const path of paths) {
      let first = true;
      for (const size of sizes) {
        const { port, host, headers } = target(path);
        const load = { origin: `http://127.0.0.1:${port}`, host, headers, path: SIZE_PATH[size], connections, expectBytes: BODY_BYTES[SIZE_PATH[size]], cpuPids };
        const warm = first ? warmupMs : rewarmMs;
        first = false;
        progress(`${PATH_LABEL[path]}, ${SIZE_LABEL[size]}: ${connections} connections, ${warm / 1000} s warm-up + ${measureMs / 1000} s`);
        const saturated = await runLoadInChild({ ...load, warmupMs: warm, durationMs: measureMs }, pin.restCpu);
        progress(`${PATH_LABEL[path]}, ${SIZE_LABEL[size]}: ${fixedRate} req/s, ${fixedWarmupMs / 1000} s warm-up + ${fixedMeasureMs / 1000} s`);
        const fixed = await runLoadInChild({ ...load, rate: fixedRate, warmupMs: fixedWarmupMs, durationMs: fixedMeasureMs }, pin.restCpu);
        cases.push({ path, size, saturated, fixed });
      }
    }

    return buildRows(cases, {
      procs,
      cpuPids,
      fixedRate,
      method:
        `closed loop: ${connections} keep-alive connections (undici Pool), ${warmupMs / 1000} s warm-up + ${measureMs / 1000} s measured per case; ` +
        `fixed load: ${fmt(fixedRate)} req/s for ${fixedMeasureMs / 1000} s; CPU per request = the process's utime+stime (/proc) over the window ÷ responses`,
      machine: `node ${process.version}, ${machine()}; ${pin.how}`,
      edgeProcess:
        `edge = \`edge serve\` (all roles in one process, PGlite, in-process feed; idle ${fmt(edgeIdleMsPerS, 1)} ms CPU/s), ` +
        `agent = \`edge agent http\` in its own process, baseline = bench/baseline-proxy.ts, upstream = bench/upstream.ts`,
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
  // Short runs for exploring: BENCH_PROXY_MEASURE_MS=3000 BENCH_PROXY_WARMUP_MS=1000 tsx bench/proxy.ts
  const env = (name: string) => (process.env[name] ? Number(process.env[name]) : undefined);
  const split = (name: string) => process.env[name]?.split(/\s+/).filter(Boolean);
  const rows = await benchProxy({
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
