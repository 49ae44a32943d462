// Load generator of the proxy benchmark: N keep-alive connections (undici Pool), fixed concurrency or a fixed rate, a
// warm-up, then a measured window recorded in a preallocated array; runLoadInChild() runs it in its own pinned process.
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Pool } from 'undici';
import { TSX, cpuTimeMs, exitWithParent, jsonLine, spawnNode, systemCpuTimeMs } from './procs.ts';

export interface LoadOptions {
  /** Origin to connect to, e.g. http://127.0.0.1:8080. */
  origin: string;
  path: string;
  /** Host header, when it must differ from the origin's (the edge routes by it). */
  host?: string;
  /** More request fields, the same on every request (credentials for an endpoint with visitor auth). */
  headers?: Record<string, string>;
  /** Keep-alive connections in the pool (one request at a time on each: no pipelining). */
  connections: number;
  /** Requests in flight at once (closed loop: a new one as soon as one finishes); default `connections`. */
  concurrency?: number;
  /**
   * Open loop instead: start requests on a fixed schedule of this many per second, at most `concurrency` in
   * flight. Latency is measured from each request's actual start, and starts more than 5 ms behind the schedule
   * are counted as `late`: when that count is not ~0, the load was not the one asked for.
   */
  rate?: number;
  /** Unmeasured run-in (JIT, pools, caches) before the window. */
  warmupMs: number;
  /** Length of the measured window; or give `requests`. */
  durationMs?: number;
  /** Measured window ends after this many completed requests (instead of a duration). */
  requests?: number;
  /** Every response must be 200 with exactly this many body bytes; anything else counts as an error. */
  expectBytes?: number;
  /** Processes whose CPU time (/proc) is read at the two edges of the window. */
  cpuPids?: number[];
  /** Capacity of the latency array; later samples in a longer window are counted but not recorded. */
  maxSamples?: number;
}

export interface LoadResult {
  /** Correct responses completed inside the window. */
  requests: number;
  errors: number;
  firstError?: string;
  windowMs: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Latencies recorded (equals `requests` unless maxSamples was reached). */
  samples: number;
  /** Fixed-rate runs: requests started more than 5 ms behind schedule. */
  late: number;
  /** CPU ms used by each of `cpuPids` during the window (NaN where unreadable). */
  cpuMs: number[];
  /** CPU ms used by the load generator itself during the window. */
  selfCpuMs: number;
  /** CPU ms the whole machine used in the window (user + system, all CPUs): ours plus anything else running. */
  systemCpuMs: number;
}

const LATE_MS = 5;

/** Nearest-rank percentile of sorted values. */
function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function validate(o: LoadOptions): void {
  const positiveInt = (name: string, v: number | undefined, optional: boolean) => {
    if (v === undefined && optional) return;
    if (!Number.isInteger(v) || (v as number) <= 0) throw new RangeError(`load: ${name} must be a positive integer, got ${v}`);
  };
  positiveInt('connections', o.connections, false);
  positiveInt('concurrency', o.concurrency, true);
  positiveInt('durationMs', o.durationMs, true);
  positiveInt('requests', o.requests, true);
  if (!(o.warmupMs >= 0)) throw new RangeError(`load: warmupMs must be >= 0, got ${o.warmupMs}`);
  if ((o.durationMs === undefined) === (o.requests === undefined)) throw new RangeError('load: give exactly one of durationMs and requests');
  if (o.rate !== undefined && !(o.rate > 0)) throw new RangeError(`load: rate must be > 0 requests/s, got ${o.rate}`);
}

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  validate(options);
  const concurrency = options.concurrency ?? options.connections;
  const pids = options.cpuPids ?? [];
  const latencies = new Float64Array(options.maxSamples ?? 1 << 21);
  const pool = new Pool(options.origin, { connections: options.connections, pipelining: 1 });
  const headers = options.host || options.headers ? { ...options.headers, ...(options.host ? { host: options.host } : {}) } : undefined;
  const request = { path: options.path, method: 'GET' as const, headers };

  // Window state. A request counts where it completes: steady state makes that unbiased, and the CPU readings
  // bracket exactly the same interval.
  let measuring = false;
  let stopping = false;
  let count = 0;
  let errors = 0;
  let late = 0;
  let firstError: string | undefined;
  let windowStart = 0;
  let windowEnd = 0;
  let cpuStart: number[] = [];
  let cpuEnd: number[] = [];
  let systemStart = 0;
  let systemEnd = 0;
  let selfStart: NodeJS.CpuUsage | undefined;
  let selfEnd: NodeJS.CpuUsage | undefined;
  let endWindow: () => void = () => {};
  const windowOver = new Promise<void>((resolve) => {
    endWindow = () => {
      if (!measuring) return;
      windowEnd = performance.now();
      cpuEnd = pids.map(cpuTimeMs);
      systemEnd = systemCpuTimeMs();
      selfEnd = process.cpuUsage(selfStart);
      measuring = false;
      stopping = true;
      resolve();
    };
  });
  const startWindow = () => {
    selfStart = process.cpuUsage();
    cpuStart = pids.map(cpuTimeMs);
    systemStart = systemCpuTimeMs();
    windowStart = performance.now();
    measuring = true;
  };

  const fail = (message: string) => {
    if (!measuring) return;
    errors++;
    firstError ??= message;
  };

  async function once(): Promise<void> {
    const t0 = performance.now();
    let ok = false;
    try {
      const { statusCode, body } = await pool.request(request);
      let bytes = 0;
      for await (const chunk of body) bytes += (chunk as Buffer).length;
      if (statusCode !== 200) fail(`status ${statusCode}`);
      else if (options.expectBytes !== undefined && bytes !== options.expectBytes) fail(`${bytes} body bytes, expected ${options.expectBytes}`);
      else ok = true;
    } catch (err) {
      fail((err as Error).message);
    }
    if (!ok || !measuring) return;
    if (count < latencies.length) latencies[count] = performance.now() - t0;
    count++;
    if (options.requests !== undefined && count >= options.requests) endWindow();
  }

  const t0 = performance.now();
  const interval = options.rate ? 1000 / options.rate : 0;
  let slot = 0;
  async function worker(): Promise<void> {
    while (!stopping) {
      if (interval > 0) {
        // Claim the next slot of the schedule and wait for its time; a worker that comes back late starts at once.
        const due = t0 + slot++ * interval;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        else if (measuring && -wait > LATE_MS) late++;
        if (stopping) return;
      }
      await once();
    }
  }

  const warmup = setTimeout(() => {
    startWindow();
    if (options.durationMs !== undefined) setTimeout(endWindow, options.durationMs);
  }, options.warmupMs);
  const workers = Array.from({ length: concurrency }, worker);
  try {
    await windowOver;
    await Promise.all(workers);
  } finally {
    clearTimeout(warmup);
    stopping = true;
    await pool.destroy();
  }

  const windowMs = windowEnd - windowStart;
  const samples = Math.min(count, latencies.length);
  const sorted = latencies.subarray(0, samples).sort();
  return {
    requests: count,
    errors,
    firstError,
    windowMs,
    rps: (count * 1000) / windowMs,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    maxMs: samples > 0 ? sorted[samples - 1] : Number.NaN,
    samples,
    late,
    cpuMs: pids.map((_, i) => cpuEnd[i] - cpuStart[i]),
    selfCpuMs: selfEnd ? (selfEnd.user + selfEnd.system) / 1000 : Number.NaN,
    systemCpuMs: systemEnd - systemStart,
  };
}

/**
 * Runs the load in a child process of its own (pinned to `cpu` when given), so that the generator's CPU use is
 * placed where the benchmark decides and never shares an event loop with the code that orchestrates the run.
 */
export async function runLoadInChild(options: LoadOptions, cpu: number | null): Promise<LoadResult> {
  validate(options);
  // V8's incremental marking, driven by the external memory of socket reads (64 MB/s at 1,000 large responses/s),
  // ran steps of up to 18 ms in the generator and put them into the p99 of every path; marking in one go makes
  // those pauses 3-6 ms and rarer. It tunes the instrument only: the processes under test keep V8's defaults.
  const nodeArgs = ['--no-incremental-marking', ...TSX];
  const child = spawnNode('load generator', fileURLToPath(import.meta.url), [JSON.stringify(options)], { cpu, nodeArgs });
  try {
    const bound = options.durationMs ?? 600_000;
    const line = await child.waitForLine((l) => jsonLine(l)?.result as LoadResult | undefined, options.warmupMs + bound + 30_000);
    // JSON has no NaN: a missing value comes back as null.
    const num = (v: number | null) => (v === null ? Number.NaN : v);
    return { ...line, cpuMs: line.cpuMs.map(num), selfCpuMs: num(line.selfCpuMs), systemCpuMs: num(line.systemCpuMs) };
  } finally {
    await child.stop();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  exitWithParent();
  const result = await runLoad(JSON.parse(process.argv[2] ?? '{}') as LoadOptions);
  process.stdout.write(`${JSON.stringify({ result })}\n`);
  process.exit(0);
}
