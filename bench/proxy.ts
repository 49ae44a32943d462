// Whole-path load run, headline = what a user runs: `edge serve` (all roles, embedded PGlite, default settings) with
// endpoints made through its control API, against a bare http-proxy-3 proxy (the baseline) and nginx, each pinned alone.
//
// Cases: origin endpoints at the default capture (on, metadata), capture full, capture off and with every policy on;
// agent tunnels (raw transport) at the default capture and capture off, WebSocket as a secondary case; and, when asked
// for, the edge alone (bench/lib/edge-process.ts). Every saturation case runs several rounds interleaved with the
// baseline, so each ratio is taken against the baseline of its own round; the table gives the median and the spread.
import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
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
import { endpointConfig } from '../test/helpers/endpoint-config.ts';
import { runLoadInChild, type LoadOptions, type LoadResult } from './lib/load.ts';
import { NGINX_BIN, startNginx } from './lib/nginx.ts';
import { applyPolicies } from './lib/policy-endpoint.ts';
import { WRK_BIN, runWrk, type LoadKind } from './lib/wrk.ts';
import { TSX, benchFile, choosePinning, cpuTimeMs, jsonLine, spawnNode, type Child } from './lib/procs.ts';
import { BODY_BYTES } from './upstream.ts';

/** One line of the printed results table. */
export interface Row {
  benchmark: string;
  result: string;
}

export type Size = 'small' | 'large';
export type PathId =
  | 'direct'
  | 'baseline'
  | 'nginx'
  | 'origin'
  | 'origin-full'
  | 'origin-off'
  | 'origin-policies'
  | 'tunnel'
  | 'tunnel-off'
  | 'tunnel-ws'
  | 'origin-alone';

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
  /** Longest wait after a window for the processes to go quiet (the in-process worker catching up on records). */
  settleMs?: number;
  /** The load generator: this folder's raw-socket one (default) or wrk, as the outside check ran it. */
  load?: LoadKind;
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
  nginx: 'nginx (reference)',
  origin: 'edge serve → origin, defaults (capture on, metadata)',
  'origin-full': 'edge serve → origin, capture full',
  'origin-off': 'edge serve → origin, capture off',
  'origin-policies': 'edge serve → origin, every policy on (capture default)',
  tunnel: 'edge serve + agent tunnel (raw), defaults',
  'tunnel-off': 'edge serve + agent tunnel (raw), capture off',
  'tunnel-ws': 'edge serve + agent tunnel (WebSocket), defaults',
  'origin-alone': 'secondary: the edge alone → origin (records dropped)',
};
/** Cases whose figures are also read against the same round's capture-off case of their kind. */
const CAPTURE_OFF_OF: Partial<Record<PathId, PathId>> = { origin: 'origin-off', 'origin-full': 'origin-off', 'origin-policies': 'origin-off', tunnel: 'tunnel-off' };
/** The cases `edge serve` serves. */
const SERVE_PATHS: PathId[] = ['origin', 'origin-full', 'origin-off', 'origin-policies', 'tunnel', 'tunnel-off', 'tunnel-ws'];
const DEFAULT_PATHS: PathId[] = ['direct', 'nginx', 'origin', 'origin-full', 'origin-off', 'origin-policies', 'tunnel', 'tunnel-off', 'tunnel-ws'];

/** Where a case's load goes, and which processes do its work. */
interface Target {
  port: number;
  host?: string;
  headers?: Record<string, string>;
  /** The process under test (the proxy whose CPU per request is reported); none for the upstream direct. */
  proxy?: Child;
  /** The agent serving a tunnel case. */
  agent?: Child;
}

interface Procs {
  upstream: Child;
  upstreamPort: number;
  baseline?: Child;
  nginx?: Child;
  /** `edge serve`: every role in one process, as `npm start` runs it. */
  edge?: Child;
  /** `edge serve`'s ops port (/metrics: the capture counters). */
  edgeOpsPort?: number;
  /** The edge alone (bench/lib/edge-process.ts), for the secondary origin case. */
  originEdge?: Child;
  agents: Child[];
  targets: Partial<Record<PathId, Target>>;
  /** What the created endpoints read back as, to show the capture defaults were not set by the bench. */
  defaults?: string;
  /** Why a case asked for was left out (nginx not installed). */
  skipped: string[];
}

const ORIGIN_HOST = 'origin.bench.localhost';

interface Case {
  path: PathId;
  size: Size;
  /** One saturation window per round, in round order. */
  rounds: LoadResult[];
  /** The baseline's window of the same round and size (ratios are taken against it). */
  baseRounds: LoadResult[];
  /** The proxy's CPU (ms) and the time (ms) it took to go quiet after each window: work the window left behind. */
  after: Array<{ cpuMs: number; ms: number }>;
  /** `edge serve`'s capture counters over each window and its settling: exchanges captured, and those not stored. */
  capture: CaptureCounts[];
  fixed?: LoadResult;
  fixedCapture?: CaptureCounts;
}

/** Captured exchanges handed on by the edge's shipper, and those dropped (shipper queue or record sink full). */
interface CaptureCounts {
  shipped: number;
  dropped: number;
}

/** The edge's capture counters from its ops port's /metrics (docs/traffic.md; src/edge/metrics.ts). */
async function captureCounts(opsPort: number): Promise<CaptureCounts> {
  const res = await request(`http://127.0.0.1:${opsPort}/metrics`);
  const text = await res.body.text();
  const value = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
  return { shipped: value('edge_capture_shipped_total'), dropped: value('edge_capture_dropped_total') + value('edge_traffic_records_dropped_total') };
}

function countsBetween(a: CaptureCounts, b: CaptureCounts): CaptureCounts {
  return { shipped: b.shipped - a.shipped, dropped: b.dropped - a.dropped };
}

/** "all 51,234 stored" or "38,100 of 51,234 stored, 13,134 dropped (counted)". */
function storedText(c: CaptureCounts): string {
  if (c.shipped === 0) return 'none captured';
  return c.dropped === 0 ? `all ${fmt(c.shipped)} stored` : `${fmt(c.shipped - c.dropped)} of ${fmt(c.shipped)} stored, ${fmt(c.dropped)} dropped (counted)`;
}

const STARTUP_MS = 60_000;

async function api(base: string, key: string, method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await request(`${base}${path}`, {
    method: method as 'POST',
    headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.body.text();
  if (res.statusCode >= 300) throw new Error(`${method} ${path}: ${res.statusCode} ${text}`);
  // PUT …/settings/capture and …/settings/jwt answer 200 with an empty body (docs/api.md).
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

/** A JWKS on loopback for the JWT layer (fetched once by the edge, then cached) and a token it verifies. */
async function startJwks(cleanup: Array<() => Promise<unknown>>): Promise<{ url: string; jwt: string; key: Awaited<ReturnType<typeof makeKey>> }> {
  const key = await makeKey('bench-rs256');
  const jwks = http.createServer((_req, res) => res.end(JSON.stringify({ keys: [key.jwk] })));
  await new Promise<void>((r) => jwks.listen(0, '127.0.0.1', r));
  cleanup.push(() => new Promise<void>((r) => (jwks.closeAllConnections(), jwks.close(() => r()))));
  const jwt = await sign(key, { sub: 'bench-user', exp: Math.floor(Date.now() / 1000) + 24 * 3600 });
  return { url: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`, jwt, key };
}

/**
 * The headline: `edge serve` as `npm start` runs it (every role in one process, PGlite in a fresh data dir, no
 * REDIS_URL, default settings but one), a pro user, and the endpoints each case needs made through the control API
 * with only what the case is about: an origin URL for the origin cases, nothing for the tunnels; capture is changed
 * only for the capture-full and capture-off cases (PUT …/settings/capture). The one setting:
 * EDGE_ORIGIN_ALLOW_PRIVATE=true, since the upstream and the JWKS are on loopback (a user's public origin needs none).
 */
async function startServe(procs: Procs, dataDir: string, paths: PathId[], options: ProxyBenchOptions, cleanup: Array<() => Promise<unknown>>): Promise<void> {
  const { proxyCpu, restCpu } = choosePinning();
  await copyPgliteTemplate(join(dataDir, 'pglite'));
  const adminKey = `bench-admin-${randomBytes(16).toString('hex')}`;
  const env = cleanEnv({ EDGE_DATA_DIR: dataDir, EDGE_ADMIN_API_KEY: adminKey, EDGE_ORIGIN_ALLOW_PRIVATE: 'true' });
  // The default a user runs (cleanEnv sets 0 for the test suite).
  delete env.EDGE_STORE_THREAD_NICE;
  const edge = spawnNode('edge serve', BIN, ['serve'], { cpu: proxyCpu, env, nodeArgs: options.edgeNodeArgs });
  cleanup.push(() => edge.stop(10_000));
  procs.edge = edge;
  const ready = await edge.waitForLine((l) => {
    const entry = jsonLine(l);
    return entry?.msg === 'node ready' ? entry : undefined;
  }, STARTUP_MS);
  const control = `http://127.0.0.1:${ready.control as number}`;
  procs.edgeOpsPort = ready.ops as number | undefined;
  const httpPort = ready.http as number;
  const user = await api(control, adminKey, 'POST', '/v1/admin/users', { email: `bench-${randomBytes(4).toString('hex')}@example.test`, plan: 'pro' });
  const userApi = (method: string, path: string, body?: unknown) => api(control, user.api_key as string, method, path, body);
  const originUrl = `http://127.0.0.1:${procs.upstreamPort}`;
  const jwks = paths.includes('origin-policies') ? await startJwks(cleanup) : undefined;
  const reads: string[] = [];

  const create = async (path: PathId): Promise<{ uuid: string; hostname: string }> => {
    const endpoint = await userApi('POST', '/v1/endpoints', {});
    const uuid = endpoint.uuid as string;
    if (path.startsWith('origin')) await userApi('PUT', `/v1/endpoints/${uuid}/origin`, { url: originUrl });
    if (path === 'origin-full') await userApi('PUT', `/v1/endpoints/${uuid}/settings/capture`, { capture_enabled: true, capture_level: 'full' });
    if (path === 'origin-off' || path === 'tunnel-off') await userApi('PUT', `/v1/endpoints/${uuid}/settings/capture`, { capture_enabled: false });
    const read = await userApi('GET', `/v1/endpoints/${uuid}`);
    reads.push(`${path}: capture_enabled ${String(read.capture_enabled)}, capture_level ${String(read.capture_level)}`);
    return { uuid, hostname: endpoint.hostname as string };
  };
  // Served once the feed has brought the endpoint (and its last change) to the edge's config mirror.
  const reaches = (hostname: string, headers?: Record<string, string>) =>
    until(`${hostname} reaching the edge`, 15_000, async () => {
      const r = await probe(httpPort, '/small', hostname, headers);
      return r.status === 200 ? true : undefined;
    });

  for (const path of paths.filter((p) => p === 'origin' || p === 'origin-full' || p === 'origin-off' || p === 'origin-policies')) {
    const { uuid, hostname } = await create(path);
    let headers: Record<string, string> | undefined;
    if (path === 'origin-policies') headers = await applyPolicies(userApi, uuid, { originUrl, jwksUrl: jwks!.url, jwt: jwks!.jwt });
    await reaches(hostname, headers);
    procs.targets[path] = { port: httpPort, host: hostname, headers, proxy: edge };
  }
  for (const path of paths.filter((p) => p === 'tunnel' || p === 'tunnel-off' || p === 'tunnel-ws')) {
    const { uuid, hostname } = await create(path);
    // The agent is admitted from the edge's config mirror: wait until the feed has brought the endpoint there.
    await until(`${hostname} reaching the edge`, 15_000, async () => ((await probe(httpPort, '/', hostname)).edgeError === 'endpoint_not_found' ? undefined : true));
    const transport = path === 'tunnel-ws' ? 'ws' : 'raw';
    const agent = spawnNode(
      `agent (${path})`,
      BIN,
      ['agent', 'http', String(procs.upstreamPort), '--edge', `http://127.0.0.1:${httpPort}`, '--endpoint', uuid, '--api-key', user.api_key as string, '--transport', transport],
      { cpu: restCpu, env: cleanEnv({ EDGE_LOG_LEVEL: 'warn' }), nodeArgs: options.agentNodeArgs },
    );
    cleanup.push(() => agent.stop(10_000));
    procs.agents.push(agent);
    await agent.waitForLine((l) => (l.startsWith('Forwarding ') ? true : undefined), STARTUP_MS);
    procs.targets[path] = { port: httpPort, host: hostname, proxy: edge, agent };
  }
  procs.defaults = reads.join('; ');
}

/**
 * The secondary origin case: the edge alone with one endpoint on the upstream at capture metadata, its records built,
 * shipped and dropped (no worker, no store): what the edge's own request path costs without `edge serve`'s roles.
 */
async function startOriginEdge(procs: Procs, dataDir: string, options: ProxyBenchOptions, cleanup: Array<() => Promise<unknown>>): Promise<void> {
  const endpoints = [
    endpointConfig({ id: 1, uuid: '00000000-0000-4000-8000-000000000001', hostname: ORIGIN_HOST, origin_url: `http://127.0.0.1:${procs.upstreamPort}`, capture_enabled: true }),
  ];
  const file = join(dataDir, 'endpoints.json');
  writeFileSync(file, JSON.stringify(endpoints));
  const edge = spawnNode('origin edge', benchFile('lib/edge-process.ts'), [file], { cpu: choosePinning().proxyCpu, nodeArgs: [...(options.edgeNodeArgs ?? []), ...TSX] });
  cleanup.push(() => edge.stop(10_000));
  procs.originEdge = edge;
  procs.targets['origin-alone'] = { port: await edge.waitForLine(portLine, STARTUP_MS), host: ORIGIN_HOST, proxy: edge };
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
 * the baseline of the same round (and, for the default-capture cases, against the same round's capture-off case);
 * then the fixed-rate runs (added latency against the upstream hit directly).
 */
function buildRows(cases: Case[], f: RowFacts): Row[] {
  const { procs, cpuPids } = f;
  const cpuOf = (r: LoadResult, c: Child | undefined) => (c ? r.cpuMs[cpuPids.indexOf(c.pid)] : Number.NaN);
  const perReq = (cpuMsUsed: number, r: LoadResult) => (cpuMsUsed * 1000) / r.requests; // µs
  const proxyOf = (path: PathId) => (path === 'baseline' ? procs.baseline : procs.targets[path]?.proxy);
  const who = (path: PathId) => (path === 'baseline' || path === 'nginx' ? 'proxy' : 'edge');
  let worstForeign = 0;
  const foreignOf = (r: LoadResult) => {
    const ours = r.cpuMs.reduce((a, b) => a + (Number.isFinite(b) ? b : 0), 0) + r.selfCpuMs;
    const foreign = ((r.systemCpuMs - ours) / r.windowMs) * 100;
    if (Number.isFinite(foreign)) worstForeign = Math.max(worstForeign, foreign);
    return foreign;
  };
  // Everything pinned beside the load generator: the upstream and the agents.
  const harnessMs = (r: LoadResult) => [procs.upstream, ...procs.agents].reduce((a, c) => a + (Number.isFinite(cpuOf(r, c)) ? cpuOf(r, c) : 0), r.selfCpuMs);
  const errorsOf = (rs: LoadResult[]) => {
    const e = rs.reduce((a, r) => a + r.errors, 0);
    return e > 0 ? `; ${e} ERRORS (first: ${rs.find((r) => r.firstError)?.firstError})` : '';
  };
  const caseOf = (path: PathId, size: Size) => cases.find((c) => c.path === path && c.size === size && c.rounds.length > 0);
  const rows: Row[] = [];
  for (const c of cases.filter((x) => x.rounds.length > 0)) {
    const proxy = proxyOf(c.path);
    const rps = c.rounds.map((r) => r.rps);
    const cpu = c.rounds.map((r) => perReq(cpuOf(r, proxy), r));
    let result = `${spread(rps, (n) => fmt(n))} req/s`;
    if (c.path !== 'baseline') result += `, ${spread(c.rounds.map((r, i) => r.rps / c.baseRounds[i].rps), ratio)} baseline`;
    result += `; p50 ${spread(c.rounds.map((r) => r.p50Ms), (n) => fmt(n, 2))} ms, p99 ${spread(c.rounds.map((r) => r.p99Ms), (n) => fmt(n, 2))} ms`;
    if (c.path !== 'baseline') {
      result += ` (p99 ${spread(c.rounds.map((r, i) => r.p99Ms / c.baseRounds[i].p99Ms), ratio)} baseline's)`;
    }
    result += `; ${who(c.path)} CPU ${spread(cpu, (n) => fmt(n))} µs/req`;
    if (c.path !== 'baseline') result += ` (${spread(c.rounds.map((r, i) => perReq(cpuOf(r, proxy), r) / perReq(cpuOf(c.baseRounds[i], procs.baseline), c.baseRounds[i])), ratio)} baseline's)`;
    // Against nginx of the same round: the issue's "edge CPU per request ≤ 2× nginx's".
    const ref = c.path !== 'nginx' && c.path !== 'baseline' ? caseOf('nginx', c.size) : undefined;
    if (ref && ref.rounds.length === c.rounds.length) {
      result += ` (${spread(c.rounds.map((r, i) => perReq(cpuOf(r, proxy), r) / perReq(cpuOf(ref.rounds[i], procs.nginx), ref.rounds[i])), ratio)} nginx's)`;
    }
    const agent = procs.targets[c.path]?.agent;
    if (agent) result += `, agent ${spread(c.rounds.map((r) => perReq(cpuOf(r, agent), r)), (n) => fmt(n))} µs/req`;
    // Work a window left behind on the proxy's CPU (`edge serve`'s worker writing that window's records into PGlite),
    // per request of the window: with it, what the window cost in all.
    if (proxy === procs.edge) {
      const later = c.after.map((a, i) => perReq(a.cpuMs, c.rounds[i]));
      if (later.some((n) => n >= 1)) result += ` + ${spread(later, (n) => fmt(n))} µs/req after the window (${spread(c.after.map((a) => a.ms / 1000), (n) => fmt(n, 1))} s to go quiet)`;
    }
    // What capture kept of the window (warm-up included): at saturation on one core the store thread, at the lowest
    // priority, may fall behind; the edge then drops and counts rather than slowing down (docs/architecture.md).
    if (c.capture.some((k) => k.shipped > 0)) result += `; captured exchanges: ${c.capture.map(storedText).join(' / ')}`;
    const off = CAPTURE_OFF_OF[c.path] ? caseOf(CAPTURE_OFF_OF[c.path]!, c.size) : undefined;
    if (off && off.rounds.length === c.rounds.length) {
      result += `; × capture off of the round: req/s ${spread(c.rounds.map((r, i) => r.rps / off.rounds[i].rps), ratio)}, p99 ${spread(c.rounds.map((r, i) => r.p99Ms / off.rounds[i].p99Ms), ratio)}`;
    }
    result += proxy ? `; ${who(c.path)} busy ${spread(c.rounds.map((r) => (cpuOf(r, proxy) / r.windowMs) * 100), (n) => `${fmt(n)}%`)}` : '';
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
      if (proxy) result += `; ${who(c.path)} CPU ${fmt(perReq(cpuOf(r, proxy), r))} µs/req`;
      result += `; ${fmt(r.rps)} req/s achieved`;
      if (r.late > 0) result += `, ${fmt(r.late)} starts >5 ms behind schedule`;
      if (c.fixedCapture && c.fixedCapture.shipped > 0) result += `; captured exchanges: ${storedText(c.fixedCapture)}`;
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
 * Waits (at most `limitMs`) until the bench's own processes are quiet: under 5 % of a CPU together over 200 ms, and
 * answers how long that took and the CPU `watch` used meanwhile. After a window with capture on, `edge serve`'s
 * in-process worker still writes that window's records into PGlite on the proxy's CPU; a window started then would
 * measure that work too, and the work is part of what the window's requests cost.
 */
async function settle(pids: number[], watch: number | undefined, limitMs: number): Promise<{ cpuMs: number; ms: number }> {
  const busy = () => pids.reduce((sum, pid) => sum + cpuTimeMs(pid), 0);
  const t0 = performance.now();
  const watched0 = watch ? cpuTimeMs(watch) : Number.NaN;
  while (performance.now() - t0 < limitMs) {
    const before = busy();
    await new Promise((r) => setTimeout(r, 200));
    if ((busy() - before) / 200 < 0.05) break;
  }
  // The quiet 200 ms closing the wait are not the window's (nor is the idle timer work in them, a few ms/s).
  const waited = Math.max(0, performance.now() - t0 - 200);
  return { cpuMs: watch ? cpuTimeMs(watch) - watched0 : Number.NaN, ms: waited };
}

/** Rejects options that would make a run meaningless before any process starts (they may come from the environment). */
function validate(options: ProxyBenchOptions): void {
  for (const key of ['connections', 'rounds', 'warmupMs', 'measureMs', 'fixedRate', 'fixedWarmupMs', 'fixedMeasureMs', 'settleMs'] as const) {
    const v = options[key];
    if (v !== undefined && !(Number.isFinite(v) && v > 0)) throw new RangeError(`benchProxy: ${key} must be a positive number, got ${v}`);
  }
  if (options.rounds !== undefined && !Number.isInteger(options.rounds)) throw new RangeError(`benchProxy: rounds must be an integer, got ${options.rounds}`);
  if (options.load !== undefined && options.load !== 'raw' && options.load !== 'wrk') throw new RangeError(`benchProxy: load must be raw or wrk, got ${options.load}`);
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
  const settleMs = options.settleMs ?? 30_000;
  const loadKind = options.load ?? 'raw';
  const sizes = options.sizes ?? ['small', 'large'];
  // The baseline always runs: every ratio needs its round's baseline.
  let paths: PathId[] = [...new Set<PathId>(['baseline', ...(options.paths ?? DEFAULT_PATHS)])];
  const progress = options.progress ?? ((line: string) => process.stderr.write(`proxy bench: ${line}\n`));
  const pin = choosePinning();

  const cleanup: Array<() => Promise<unknown>> = [];
  try {
    progress('starting upstream, baseline proxy, nginx, edge serve and agents');
    const upstream = spawnNode('upstream', benchFile('upstream.ts'), [], { cpu: pin.restCpu, nodeArgs: TSX });
    cleanup.push(() => upstream.stop());
    const procs: Procs = { upstream, upstreamPort: await upstream.waitForLine(portLine, STARTUP_MS), agents: [], targets: {}, skipped: [] };
    procs.targets.direct = { port: procs.upstreamPort };
    procs.baseline = spawnNode('baseline proxy', benchFile('baseline-proxy.ts'), [String(procs.upstreamPort)], { cpu: pin.proxyCpu, nodeArgs: TSX });
    cleanup.push(() => procs.baseline!.stop());
    procs.targets.baseline = { port: await procs.baseline.waitForLine(portLine, STARTUP_MS), proxy: procs.baseline };
    if (paths.includes('nginx')) {
      const nginx = await startNginx(procs.upstreamPort, pin.proxyCpu);
      if (nginx) {
        cleanup.push(() => nginx.stop());
        procs.nginx = nginx.child;
        procs.targets.nginx = { port: nginx.port, proxy: nginx.child };
      } else {
        procs.skipped.push(`nginx: no ${NGINX_BIN}, row skipped`);
        paths = paths.filter((p) => p !== 'nginx');
      }
    }
    const dataDir = await mkdtemp(join(tmpdir(), 'edge-bench-'));
    cleanup.push(() => rm(dataDir, { recursive: true, force: true }));
    // Should this process die before the cleanup runs, the store copy (tens of MB) still goes.
    process.once('exit', () => rmSync(dataDir, { recursive: true, force: true }));
    if (paths.some((p) => SERVE_PATHS.includes(p))) await startServe(procs, dataDir, paths, options, cleanup);
    if (paths.includes('origin-alone')) await startOriginEdge(procs, dataDir, options, cleanup);

    // Every path must answer correctly before any figure is taken from it.
    for (const path of paths) {
      for (const size of sizes) {
        const { port, host, headers } = procs.targets[path]!;
        const r = await probe(port, SIZE_PATH[size], host, headers);
        if (r.status !== 200 || r.bytes !== BODY_BYTES[SIZE_PATH[size]]) {
          throw new Error(`${PATH_LABEL[path]} answered ${r.status} with ${r.bytes} bytes${r.edgeError ? ` (${r.edgeError})` : ''} for ${SIZE_PATH[size]}`);
        }
      }
    }

    // Every run reads all the processes; idle ones read ~0.
    const watched = [procs.upstream, procs.baseline, procs.nginx, procs.edge, procs.originEdge, ...procs.agents];
    const cpuPids = watched.map((c) => c?.pid ?? 0).filter((pid) => pid > 0);
    await settle(cpuPids, undefined, settleMs);
    // Background work of the all-in-one node (timers of the worker role, presence, feed checks) runs on the edge's
    // CPU during its windows too; measured here so the per-request figures can be read against it.
    let edgeIdleMsPerS = Number.NaN;
    if (procs.edge) {
      const before = cpuTimeMs(procs.edge.pid);
      await new Promise((r) => setTimeout(r, 2_000));
      edgeIdleMsPerS = (cpuTimeMs(procs.edge.pid) - before) / 2;
    }
    const loadOf = (path: PathId, size: Size): LoadOptions => {
      const { port, host, headers } = procs.targets[path]!;
      return { origin: `http://127.0.0.1:${port}`, host, headers, path: SIZE_PATH[size], connections, expectBytes: BODY_BYTES[SIZE_PATH[size]], cpuPids, warmupMs: 0 };
    };
    const saturate = (o: LoadOptions) => (loadKind === 'wrk' ? runWrk({ ...o, warmupMs, durationMs: measureMs }, pin.restCpu) : runLoadInChild({ ...o, warmupMs, durationMs: measureMs }, pin.restCpu));

    const cases: Case[] = [];
    for (const size of sizes) for (const path of paths) cases.push({ path, size, rounds: [], baseRounds: [], after: [], capture: [] });
    const caseOf = (path: PathId, size: Size) => cases.find((c) => c.path === path && c.size === size)!;
    // Saturation, interleaved: each round runs every case of a size back to back, in an order rotated per round (so
    // no case always follows the same neighbour), and each case's ratio is against its own round's baseline.
    const saturated = paths.filter((p) => p !== 'direct');
    // A node that has been serving: one discarded window per `edge serve` case first. The first captured exchanges
    // make V8 optimise PGlite's WebAssembly (tier-up compiles on its own threads, at the process's priority), a
    // one-time cost of a fresh process that otherwise lands in whichever case of round 1 captures first.
    for (const path of saturated.filter((p) => procs.targets[p]?.proxy === procs.edge)) {
      progress(`warming ${PATH_LABEL[path]} (discarded)`);
      await saturate(loadOf(path, sizes[0]));
      await settle(cpuPids, procs.edge?.pid, settleMs);
    }
    for (let round = 0; round < rounds; round++) {
      for (const size of sizes) {
        const order = saturated.map((_, i) => saturated[(i + round) % saturated.length]);
        const results = new Map<PathId, LoadResult>();
        for (const path of order) {
          progress(`round ${round + 1}/${rounds}, ${SIZE_LABEL[size]}, ${PATH_LABEL[path]}: ${connections} connections, ${warmupMs / 1000} s warm-up + ${measureMs / 1000} s (${loadKind})`);
          const counted = procs.targets[path]?.proxy === procs.edge && procs.edgeOpsPort !== undefined;
          const before = counted ? await captureCounts(procs.edgeOpsPort!) : undefined;
          results.set(path, await saturate(loadOf(path, size)));
          caseOf(path, size).after.push(await settle(cpuPids, procs.targets[path]?.proxy?.pid, settleMs));
          if (before) caseOf(path, size).capture.push(countsBetween(before, await captureCounts(procs.edgeOpsPort!)));
        }
        for (const path of order) {
          caseOf(path, size).rounds.push(results.get(path)!);
          caseOf(path, size).baseRounds.push(results.get('baseline')!);
        }
      }
    }
    // Added latency at a fixed, moderate rate: one run per case (always the raw-socket generator: wrk has no fixed rate).
    for (const size of sizes) {
      for (const path of paths) {
        progress(`${SIZE_LABEL[size]}, ${PATH_LABEL[path]}: ${fixedRate} req/s, ${fixedWarmupMs / 1000} s warm-up + ${fixedMeasureMs / 1000} s`);
        const counted = procs.targets[path]?.proxy === procs.edge && procs.edgeOpsPort !== undefined;
        const before = counted ? await captureCounts(procs.edgeOpsPort!) : undefined;
        caseOf(path, size).fixed = await runLoadInChild({ ...loadOf(path, size), rate: fixedRate, warmupMs: fixedWarmupMs, durationMs: fixedMeasureMs }, pin.restCpu);
        await settle(cpuPids, undefined, settleMs);
        if (before) caseOf(path, size).fixedCapture = countsBetween(before, await captureCounts(procs.edgeOpsPort!));
      }
    }

    const generator =
      loadKind === 'wrk'
        ? `wrk -t1 -c${connections} --latency (${WRK_BIN}), a ${warmupMs / 1000} s run unmeasured then ${measureMs / 1000} s measured per case`
        : `closed loop: ${connections} raw keep-alive connections (bench/lib/load.ts), ${warmupMs / 1000} s warm-up + ${measureMs / 1000} s measured per case`;
    return buildRows(cases, {
      procs,
      cpuPids,
      fixedRate,
      method:
        `${generator}, ${rounds} rounds interleaved with the baseline; figures are median (min–max) over rounds, ratios against the same round's baseline; ` +
        `fixed load: ${fmt(fixedRate)} req/s for ${fixedMeasureMs / 1000} s (raw-socket generator); CPU per request = the process's utime+stime (/proc) over the window ÷ responses`,
      machine: `node ${process.version}, ${machine()}; ${pin.how}`,
      processes:
        `headline: \`edge serve\` as \`npm start\` runs it (all roles, PGlite in a fresh data dir, no REDIS_URL, default settings but EDGE_ORIGIN_ALLOW_PRIVATE=true for the loopback upstream; idle ${fmt(edgeIdleMsPerS, 1)} ms CPU/s), ` +
        `endpoints made with POST /v1/endpoints (origin: + PUT …/origin; capture cases: + PUT …/settings/capture; policies: through the API) and read back as ${procs.defaults ?? 'n/a'}; ` +
        `agents: \`edge agent http --transport raw|ws\`; nginx: bench/lib/nginx.ts (one process, keep-alive upstream); baseline = bench/baseline-proxy.ts, upstream = bench/upstream.ts` +
        (procs.originEdge ? '; secondary: the edge alone (bench/lib/edge-process.ts: startEdge, in-process feed, records dropped)' : '') +
        (procs.skipped.length > 0 ? `; ${procs.skipped.join('; ')}` : ''),
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
  // Short runs for exploring: BENCH_PROXY_ROUNDS=1 BENCH_PROXY_PATHS='origin origin-off' BENCH_PROXY_SIZES=large tsx bench/proxy.ts
  const env = (name: string) => (process.env[name] ? Number(process.env[name]) : undefined);
  const split = (name: string) => process.env[name]?.split(/\s+/).filter(Boolean);
  const rows = await benchProxy({
    rounds: env('BENCH_PROXY_ROUNDS'),
    warmupMs: env('BENCH_PROXY_WARMUP_MS'),
    measureMs: env('BENCH_PROXY_MEASURE_MS'),
    fixedRate: env('BENCH_PROXY_FIXED_RATE'),
    settleMs: env('BENCH_PROXY_SETTLE_MS'),
    load: process.env.BENCH_LOAD as LoadKind | undefined,
    sizes: split('BENCH_PROXY_SIZES') as Size[] | undefined,
    paths: split('BENCH_PROXY_PATHS') as PathId[] | undefined,
    edgeNodeArgs: split('BENCH_EDGE_NODE_ARGS'),
    agentNodeArgs: split('BENCH_AGENT_NODE_ARGS'),
  });
  console.log(`\n${formatTable(rows)}`);
}
