// Config apply at scale: a real edge (startEdge, every listener of its config wired) restarted with no saved state
// against a feed of 100k endpoints with settings and rules (a routing rule and a rate limit each, basic, JWT and
// RBAC on one in ten), one change at that size, and a restart from the saved file. Timed, never a test.
//
// The edge runs in a child process of its own and reads the feed from this one (bench/lib/ipc-feed.ts, which hands
// a snapshot over as Redis does), so the resident memory it reports is the edge's alone: a deployed edge reads its
// feed from Redis and holds no copy of it. Standalone: `npx tsx bench/config-apply.ts` (BENCH_CONFIG_ENDPOINTS sets
// the count, default 100,000).
import { spawn } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { getHeapSpaceStatistics } from 'node:v8';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { startEdge, type EdgeNode } from '../src/edge/index.ts';
import { MemoryFeed } from '../src/shared/feed/memory.ts';
import type { FeedEntry } from '../src/shared/feed/types.ts';
import { createLogger } from '../src/shared/log.ts';
import { MemoryPresence } from '../src/shared/presence.ts';
import { SecretBox } from '../src/shared/secrets.ts';
import type { EndpointConfig } from '../src/shared/snapshot.ts';
import { request } from 'undici';
import { benchEdgeSettings } from './lib/edge-process.ts';
import { IpcFeedSource, isFeedMessage, serveFeed } from './lib/ipc-feed.ts';
import { policyEndpoint } from './lib/policy-endpoint.ts';
import { benchFile, TSX } from './lib/procs.ts';

export interface ConfigApplyResult {
  endpoints: number;
  /** Restart with no saved state: edge started → the feed's snapshot applied (read, compiled, indexed, listeners told). */
  resetMs: number;
  /** The longest the event loop was held during that reset (1 ms timer heartbeat; monitorEventLoopDelay agrees). */
  resetMaxStallMs: number;
  /** CPU time this process used within that longest stall (all threads, so GC helpers count too). */
  resetMaxStallCpuMs: number;
  /** One endpoint changed at that size: published → applied, median and worst of `changes`. */
  changeP50Ms: number;
  changeMaxMs: number;
  changes: number;
  /** Saving the state file (one JSON line per entry), and the longest stall while it was written. */
  saveMs: number;
  saveMaxStallMs: number;
  saveMaxStallCpuMs: number;
  stateFileMb: number;
  /** Restart from the saved file: load + reset, and the longest stall. */
  loadMs: number;
  loadMaxStallMs: number;
  loadMaxStallCpuMs: number;
  /** The first request to an endpoint right after the reset, answered from its compiled policy (401: no credentials). */
  firstRequestMs: number;
  firstRequestStatus: number;
  /** The highest resident set size and V8 heap in use seen during the reset (sampled every 20 ms, no GC forced). */
  peakRssMb: number;
  peakHeapMb: number;
  /** The edge's resident set size and V8 heap right after the reset and its first request (after a full GC, memoryMb). */
  rssMb: number;
  heapMb: number;
  /** The same after SETTLE_MS idle (V8 gives back the pages the reset's garbage took over a few seconds). */
  rssSettledMb: number;
  heapSettledMb: number;
  settleMs: number;
}

/** How long the edge idles after the reset before its settled memory is read. */
const SETTLE_MS = Number(process.env.BENCH_CONFIG_SETTLE_MS ?? 10_000);

/** A bcrypt hash (cost 10) stored for every endpoint's basic user: compiling never runs bcrypt, so one value serves. */
const PASSWORD_HASH = '$2b$10$CwTycUXWue0Thq9StjUM0uJ8.qGLRlhE3hL6pCnbS4cY1S7bW8dbe';

/**
 * Every `fullEvery`th endpoint (BENCH_CONFIG_FULL_EVERY, default 10) carries every policy. Their stages' caches are
 * built on first use (~23 KiB an endpoint with all three, bench/policy-memory.ts); one in ten keeps the reset well
 * inside 10 s on a shared 2-core machine (one in four took 7-8 s, every one 16 s: docs/performance.md).
 */
const FULL_EVERY = Math.max(1, Number(process.env.BENCH_CONFIG_FULL_EVERY ?? 10));
/**
 * Every `rateLimitEvery`th endpoint has a rate-limit rule (BENCH_CONFIG_RATE_LIMIT_EVERY, default 1: 100,000 rules;
 * past the 20,000 rules an edge keeps state for, a compile no longer scans every kept state, commit c959345).
 */
const RATE_LIMIT_EVERY = Math.max(1, Number(process.env.BENCH_CONFIG_RATE_LIMIT_EVERY ?? 1));

/**
 * Endpoints with settings and rules: every one has a routing rule to an origin shared by a hundred, one in
 * RATE_LIMIT_EVERY a rate-limit rule (bench/lib/policy-endpoint.ts), a seventh enforce HTTPS, half have capture off; one in FULL_EVERY also
 * has basic auth, a JWT layer and RBAC (3 roles, a client).
 */
function endpoint(i: number): EndpointConfig {
  const e = policyEndpoint({
    id: i + 1,
    hostname: `e${i}.bench.localhost`,
    originUrl: `https://o${i % 1000}.example.com`,
    jwksUrl: `https://idp${i % 100}.example.com/jwks.json`,
    passwordHash: PASSWORD_HASH,
    capture: i % 2 === 0,
  });
  e.uuid = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
  e.enforce_https = i % 7 === 0;
  if (i % RATE_LIMIT_EVERY !== 0) e.rate_limits = [];
  if (i % FULL_EVERY !== FULL_EVERY - 1) {
    e.auth = undefined;
    e.jwt = null;
    e.rbac = null;
  }
  return e;
}

/**
 * The longest gap between ticks of a 1 ms timer while `work` runs (what a request arriving then would wait), and
 * the CPU time this process used within that gap: on a busy machine a gap can be mostly time the OS gave to other
 * processes, which no code here can shorten. monitorEventLoopDelay's maximum is checked against the gap as well.
 */
async function stalls<T>(work: () => Promise<T>): Promise<{ value: T; ms: number; maxStallMs: number; maxStallCpuMs: number }> {
  const histogram = monitorEventLoopDelay({ resolution: 5 });
  histogram.enable();
  let last = performance.now();
  let lastCpu = process.cpuUsage();
  let maxGap = 0;
  let maxGapCpu = 0;
  let ticking = true;
  const tick = () => {
    const now = performance.now();
    const cpu = process.cpuUsage();
    if (now - last > maxGap) {
      maxGap = now - last;
      maxGapCpu = (cpu.user - lastCpu.user + cpu.system - lastCpu.system) / 1000;
    }
    last = now;
    lastCpu = cpu;
    if (ticking) setTimeout(tick, 1);
  };
  setTimeout(tick, 1);
  const started = performance.now();
  try {
    const value = await work();
    return { value, ms: performance.now() - started, maxStallMs: Math.max(maxGap, histogram.max / 1e6), maxStallCpuMs: maxGapCpu };
  } finally {
    ticking = false;
    histogram.disable();
  }
}

function waitVersion(edge: EdgeNode, version: number): Promise<void> {
  if (edge.subscriber.version >= version) return Promise.resolve();
  return new Promise((resolve) => {
    const onApplied = (v: number) => {
      if (v < version) return;
      edge.subscriber.off('applied', onApplied);
      resolve();
    };
    edge.subscriber.on('applied', onApplied);
  });
}

type EdgeReport = Pick<ConfigApplyResult, 'resetMs' | 'resetMaxStallMs' | 'resetMaxStallCpuMs' | 'peakRssMb' | 'peakHeapMb' | 'firstRequestMs' | 'firstRequestStatus' | 'rssMb' | 'heapMb' | 'rssSettledMb' | 'heapSettledMb' | 'settleMs'>;
type FinishReport = Pick<ConfigApplyResult, 'saveMs' | 'saveMaxStallMs' | 'saveMaxStallCpuMs' | 'stateFileMb' | 'loadMs' | 'loadMaxStallMs' | 'loadMaxStallCpuMs'>;
/** What the edge's process tells this one, beside the feed's own messages. */
type BenchMessage = { bench: 'reset'; report: EdgeReport } | { bench: 'applied'; version: number } | { bench: 'finished'; report: FinishReport } | { bench: 'failed'; error: string };

/**
 * The edge's memory after a full GC (--expose-gc), in MB, read UNMAP_MS later: V8 gives the pages a GC freed back to
 * the OS on a background thread, so RSS read at once still counts 100-160 MB of them at this size.
 */
async function memoryMb(): Promise<{ rss: number; heap: number }> {
  (globalThis as { gc?: () => void }).gc?.();
  await sleep(UNMAP_MS);
  const m = process.memoryUsage();
  return { rss: m.rss / 1e6, heap: m.heapUsed / 1e6 };
}

/** How long after the GC memory is read (see memoryMb). */
const UNMAP_MS = 500;

/**
 * The highest RSS and heap in use while `work` runs, sampled on a timer (so between the reset's slices): what the
 * reset's peak costs, which V8 keeps committed for a few seconds after it.
 */
async function peakMemory<T>(work: () => Promise<T>): Promise<{ value: T; rssMb: number; heapMb: number }> {
  let rss = 0;
  let heap = 0;
  const sample = () => {
    const m = process.memoryUsage();
    rss = Math.max(rss, m.rss);
    heap = Math.max(heap, m.heapUsed);
  };
  const timer = setInterval(sample, 20);
  try {
    const value = await work();
    sample();
    return { value, rssMb: rss / 1e6, heapMb: heap / 1e6 };
  } finally {
    clearInterval(timer);
  }
}

/** With BENCH_CONFIG_SPACES=1, each V8 heap space's committed and used MB on stderr (where the RSS is). */
function printSpaces(label: string): void {
  if (!process.env.BENCH_CONFIG_SPACES) return;
  const spaces = getHeapSpaceStatistics()
    .filter((s) => s.space_size > 1e6)
    .map((s) => `${s.space_name} ${(s.space_size / 1e6).toFixed(0)}/${(s.space_used_size / 1e6).toFixed(0)}`);
  console.error(`[config-apply] ${label}: rss ${(process.memoryUsage().rss / 1e6).toFixed(0)} MB; committed/used MB: ${spaces.join(', ')}`);
}

/**
 * The edge's side, in the child process: started with no saved state against the parent's feed, measured, then on
 * the parent's word the state file is saved and the edge restarted from it.
 */
async function runEdge(count: number): Promise<void> {
  const send = (m: BenchMessage) => process.send!(m);
  const dataDir = await mkdtemp(join(tmpdir(), 'bench-config-'));
  const source = new IpcFeedSource();
  let edge: EdgeNode | null = null;
  // The bench process gone (killed, crashed): its feed and its orders with it, so this edge has nothing left to do.
  let finished = false;
  process.once('disconnect', () => {
    if (!finished) process.exit(1);
  });
  try {
    const settings = await benchEdgeSettings(dataDir, { EDGE_ROLE: 'all', EDGE_LOG_LEVEL: 'silent' });
    const deps = {
      settings,
      source,
      secrets: new SecretBox('bench'),
      presence: new MemoryPresence(60_000),
      logger: createLogger(process.env.BENCH_LOG_LEVEL ?? 'silent'),
      createEphemeral: async () => '',
    };
    // The parent's word to save and restart, with the version its last change published.
    const finish = new Promise<number>((resolve) => {
      process.on('message', (m: unknown) => {
        if (!isFeedMessage(m) && (m as { bench?: string }).bench === 'finish') resolve((m as { version: number }).version);
      });
    });
    // 1. Restart with no saved state: the whole snapshot arrives as one reset.
    const peak = await peakMemory(() =>
      stalls(async () => {
        edge = await startEdge(deps);
        await waitVersion(edge, count);
        return edge;
      }),
    );
    const reset = peak.value;
    printSpaces('after the reset');
    // Serving: a visitor of the last endpoint (stages compiled at apply, so this is one request, not a compile).
    const firstStarted = performance.now();
    const first = await request(`http://127.0.0.1:${reset.value.httpPort}/small`, { headers: { host: `e${count - 1}.bench.localhost` } });
    await first.body.dump();
    const firstRequestMs = performance.now() - firstStarted;
    const entriesHeld = reset.value.config.mirror.size;
    const now = await memoryMb();
    printSpaces('right after (GC, 0.5 s)');
    await sleep(SETTLE_MS);
    const settled = await memoryMb();
    printSpaces('settled');
    reset.value.subscriber.on('applied', (version) => send({ bench: 'applied', version }));
    send({
      bench: 'reset',
      report: {
        resetMs: reset.ms,
        resetMaxStallMs: reset.maxStallMs,
        resetMaxStallCpuMs: reset.maxStallCpuMs,
        peakRssMb: peak.rssMb,
        peakHeapMb: peak.heapMb,
        firstRequestMs,
        firstRequestStatus: first.statusCode,
        rssMb: now.rss,
        heapMb: now.heap,
        rssSettledMb: settled.rss,
        heapSettledMb: settled.heap,
        settleMs: SETTLE_MS,
      },
    });
    const version = await finish;
    await waitVersion(reset.value, version);

    // 3. The state file, written in slices (flush forces the write the changes scheduled).
    reset.value.config.scheduleSave(0);
    const save = await stalls(() => reset.value.config.flush());
    const stateFileMb = (await stat(join(dataDir, 'edge-config.json'))).size / 1e6;

    // 4. Restart from that file: load it (streamed, then reset in slices); the feed has nothing newer.
    await reset.value.close();
    edge = null;
    const load = await stalls(async () => {
      edge = await startEdge(deps);
      await waitVersion(edge, version);
      return edge;
    });
    if (load.value.config.mirror.size !== entriesHeld) throw new Error(`restored ${load.value.config.mirror.size} entries, expected ${entriesHeld}`);
    send({
      bench: 'finished',
      report: {
        saveMs: save.ms,
        saveMaxStallMs: save.maxStallMs,
        saveMaxStallCpuMs: save.maxStallCpuMs,
        stateFileMb,
        loadMs: load.ms,
        loadMaxStallMs: load.maxStallMs,
        loadMaxStallCpuMs: load.maxStallCpuMs,
      },
    });
  } catch (err) {
    send({ bench: 'failed', error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  } finally {
    await (edge as EdgeNode | null)?.close();
    await source.close();
    await rm(dataDir, { recursive: true, force: true });
    finished = true;
    process.disconnect?.();
  }
}

/**
 * The measurement: this process builds and holds the feed (`count` endpoints), the edge runs in a child that reads
 * it over IPC, and each of `changes` changes is timed here from publish to the edge's word that it is applied.
 */
export async function measureConfigApply(count: number, changes = 50): Promise<ConfigApplyResult> {
  const feed = new MemoryFeed();
  const entries: FeedEntry[] = [];
  for (let i = 0; i < count; i++) {
    const data = endpoint(i);
    entries.push({ topic: 'endpoint', key: data.uuid, version: i + 1, data });
  }
  await feed.reset({ version: count, entries });
  entries.length = 0;
  // BENCH_CONFIG_EDGE_FLAGS: more Node flags for the edge's process (--trace-gc, a heap size), for looking into it.
  const flags = (process.env.BENCH_CONFIG_EDGE_FLAGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...TSX, '--expose-gc', ...flags, benchFile('config-apply.ts'), '--edge'], {
    env: { ...process.env, BENCH_CONFIG_ENDPOINTS: String(count) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    // Structured clone: the snapshot's 100k strings cross without a JSON round trip of their own.
    serialization: 'advanced',
  });
  const stopServing = await serveFeed(child, feed);
  const waiting: Array<(m: BenchMessage) => boolean> = [];
  let failure: Error | null = null;
  const failAll = (err: Error) => {
    failure ??= err;
    for (const w of waiting.splice(0)) w({ bench: 'failed', error: err.message });
  };
  child.on('message', (m: unknown) => {
    if (isFeedMessage(m)) return;
    const message = m as BenchMessage;
    if (message.bench === 'failed') return failAll(new Error(`config-apply edge failed: ${message.error}`));
    for (let i = 0; i < waiting.length; i++) if (waiting[i](message)) waiting.splice(i--, 1);
  });
  child.once('exit', (code) => failAll(new Error(`config-apply edge exited with ${code}`)));
  /** The edge's next message of `kind` matching `accept`. */
  const next = <K extends BenchMessage['bench']>(kind: K, accept: (m: Extract<BenchMessage, { bench: K }>) => boolean = () => true) =>
    new Promise<Extract<BenchMessage, { bench: K }>>((resolve, reject) => {
      if (failure) return reject(failure);
      waiting.push((m) => {
        if (m.bench === 'failed') reject(failure);
        else if (m.bench === kind && accept(m as Extract<BenchMessage, { bench: K }>)) resolve(m as Extract<BenchMessage, { bench: K }>);
        else return false;
        return true;
      });
    });
  try {
    const reset = (await next('reset')).report;

    // 2. One change at that size, published and applied, `changes` times.
    const times: number[] = [];
    let version = count;
    for (let i = 0; i < changes; i++) {
      const data = { ...endpoint(i * 7), origin_url: `https://moved${i}.example.com`, hostname: `moved${i}.bench.localhost` };
      const started = performance.now();
      version++;
      const target = version;
      const applied = next('applied', (m) => m.version >= target);
      await feed.publish({ version, topic: 'endpoint', key: data.uuid, data });
      await applied;
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    const finished = next('finished');
    child.send({ bench: 'finish', version });
    const finish = (await finished).report;
    return {
      endpoints: count,
      ...reset,
      changeP50Ms: times[Math.floor(times.length / 2)],
      changeMaxMs: times[times.length - 1],
      changes,
      ...finish,
    };
  } finally {
    stopServing();
    if (child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      if (!child.connected) child.kill();
      await exited;
    }
    await feed.close();
  }
}

/** The measurement from a runner (npm run bench): the feed in this process, the edge in a child of its own. */
export function benchConfigApply(count = 100_000): Promise<ConfigApplyResult> {
  return measureConfigApply(count);
}

export function describeConfigApply(r: ConfigApplyResult): Array<{ benchmark: string; result: string }> {
  const n = r.endpoints.toLocaleString('en');
  const stall = (wall: number, cpu: number) => `longest event-loop stall ${wall.toFixed(0)} ms (${cpu.toFixed(0)} ms of it on CPU)`;
  return [
    {
      benchmark: `config reset, ${n} endpoints: routing rule each, rate limit on 1 in ${RATE_LIMIT_EVERY}, basic + JWT + RBAC on 1 in ${FULL_EVERY} (restart, no saved state)`,
      result:
        `${(r.resetMs / 1000).toFixed(2)} s to serving (target < 10 s: ${r.resetMs < 10_000 ? 'met' : 'NOT met'}), ${stall(r.resetMaxStallMs, r.resetMaxStallCpuMs)}, ` +
        `edge RSS peak ${r.peakRssMb.toFixed(0)} MB during it (heap ${r.peakHeapMb.toFixed(0)} MB), ${r.rssMb.toFixed(0)} MB right after (target < 500 MB: ${r.rssMb < 500 ? 'met' : 'NOT met'}; heap ${r.heapMb.toFixed(0)} MB), ` +
        `${r.rssSettledMb.toFixed(0)} MB after ${(r.settleMs / 1000).toFixed(0)} s idle (heap ${r.heapSettledMb.toFixed(0)} MB); ` +
        `first request after it ${r.firstRequestMs.toFixed(1)} ms (${r.firstRequestStatus})`,
    },
    { benchmark: `one endpoint change at ${n} endpoints, published → applied`, result: `p50 ${r.changeP50Ms.toFixed(2)} ms, max ${r.changeMaxMs.toFixed(2)} ms (${r.changes} changes)` },
    { benchmark: `state file save, ${n} endpoints (${r.stateFileMb.toFixed(0)} MB)`, result: `${r.saveMs.toFixed(0)} ms, ${stall(r.saveMaxStallMs, r.saveMaxStallCpuMs)}` },
    { benchmark: `edge restart from the state file, ${n} endpoints`, result: `${(r.loadMs / 1000).toFixed(2)} s, ${stall(r.loadMaxStallMs, r.loadMaxStallCpuMs)}` },
  ];
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const count = Number(process.env.BENCH_CONFIG_ENDPOINTS ?? 100_000);
  if (process.argv.includes('--edge')) await runEdge(count);
  else {
    const result = await measureConfigApply(count);
    if (process.argv.includes('--json')) console.log(JSON.stringify(result));
    else for (const row of describeConfigApply(result)) console.log(`${row.benchmark}: ${row.result}`);
  }
}
