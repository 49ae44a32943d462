// Child processes for load runs: spawns servers, agents and load generators pinned to a CPU with `taskset -c`
// where it exists, waits for the line that says each is ready, reads their CPU time, and kills every one at the end.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, fstatSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { constants as osConstants } from 'node:os';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** Node flags that run a TypeScript entry point, the way `npm run bench` runs this folder. */
export const TSX = ['--import', 'tsx'];

/** Absolute path of a file in this folder (bench/), for child entry points. */
export function benchFile(relative: string): string {
  return fileURLToPath(new URL(`../${relative}`, import.meta.url));
}

export interface Pinning {
  /** CPU for the process under test (the bare proxy or the edge); null when nothing is pinned. */
  proxyCpu: number | null;
  /** CPU for everything else: upstream, agent, load generator. */
  restCpu: number | null;
  /** One line for the output saying what was done. */
  how: string;
}

/** The CPUs this process may run on, from Cpus_allowed_list ("0-1", "0,2-3"); empty when unknown. */
function allowedCpus(): number[] {
  try {
    const line = /^Cpus_allowed_list:\s*(\S+)/m.exec(readFileSync('/proc/self/status', 'utf8'));
    if (!line) return [];
    return line[1].split(',').flatMap((part) => {
      const [a, b] = part.split('-').map(Number);
      return Array.from({ length: (b ?? a) - a + 1 }, (_, i) => a + i);
    });
  } catch {
    return [];
  }
}

let pinning: Pinning | undefined;

/**
 * Two CPUs from the allowed set: the proxy under test gets one to itself so its CPU time and throughput are not
 * disturbed by the load generator, which shares the other with the upstream (and the agent). Without taskset or
 * a second CPU, nothing is pinned and the output says so.
 */
export function choosePinning(): Pinning {
  if (pinning) return pinning;
  const cpus = allowedCpus();
  const works = cpus.length >= 2 && spawnSync('taskset', ['-c', String(cpus[0]), 'true'], { stdio: 'ignore' }).status === 0;
  pinning = works
    ? {
        proxyCpu: cpus[1],
        restCpu: cpus[0],
        how: `taskset: proxy/edge alone on CPU ${cpus[1]}; upstream, agent and load generator on CPU ${cpus[0]}`,
      }
    : {
        proxyCpu: null,
        restCpu: null,
        how: cpus.length < 2 ? 'not pinned (fewer than 2 CPUs allowed)' : 'not pinned (taskset not available)',
      };
  return Object.freeze(pinning);
}

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    const out = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
    const n = Number(out.stdout?.trim());
    // 100 is what Linux reports on every mainstream architecture; getconf missing is the only way to get here.
    ticksPerSecond = Number.isInteger(n) && n > 0 ? n : 100;
  }
  return ticksPerSecond;
}

/**
 * User + system CPU time a process has used so far, in ms, from /proc/<pid>/stat (all its threads: V8's GC
 * helpers and libuv's pool count too, as they should). NaN where /proc is not available. Resolution: one clock
 * tick (10 ms), which is 0.1 % of a 10 s run on a busy core.
 */
export function cpuTimeMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 2 (comm) may contain spaces and parentheses; fields are counted from after its closing one.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of proc(5); fields[0] here is field 3.
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTicks();
  } catch {
    return Number.NaN;
  }
}

/**
 * CPU time the whole machine spent in user and system mode so far (all CPUs, ms), from /proc/stat. Compared with
 * the benchmark's own processes over a window, it shows whether something else ran meanwhile. irq and softirq
 * time are left out: loopback traffic puts our own packet processing there. NaN where /proc is not available.
 */
export function systemCpuTimeMs(): number {
  try {
    const line = readFileSync('/proc/stat', 'utf8').slice(0, 256).split('\n')[0];
    const [, user, nice, system] = line.split(/\s+/).map(Number);
    return ((user + nice + system) * 1000) / clockTicks();
  } catch {
    return Number.NaN;
  }
}

export interface Child {
  name: string;
  pid: number;
  process: ChildProcess;
  /** stderr gathered so far, for error messages. */
  stderr(): string;
  /** Resolves with the first stdout line that `match` accepts (a match result or true). */
  waitForLine<T>(match: (line: string) => T | null | undefined | false, timeoutMs: number): Promise<T>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process has exited. */
  stop(graceMs?: number): Promise<void>;
  exited: Promise<number | null>;
}

const live = new Set<ChildProcess>();

function killLive(): void {
  for (const child of live) child.kill('SIGKILL');
  live.clear();
}

// 'exit' covers normal ends and thrown errors; a signal ends the process without 'exit', so those are turned into
// an exit (status 128 + signal number, as a shell reports it) that runs every 'exit' handler, this one and the
// callers' (temporary directories). Only while children run, so a host's own signal handling is otherwise kept.
process.once('exit', killLive);
const onSignal = (signal: NodeJS.Signals) => {
  process.exit(128 + (osConstants.signals[signal] ?? 0));
};
function watchSignals(on: boolean): void {
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    if (on && process.listenerCount(signal) === 0) process.once(signal, onSignal);
    if (!on) process.off(signal, onSignal);
  }
}

export interface SpawnOptions {
  /** CPU to pin the child to with taskset; null or undefined: not pinned. */
  cpu?: number | null;
  env?: NodeJS.ProcessEnv;
  /** Node flags before the script. */
  nodeArgs?: string[];
}

/**
 * Starts `node [nodeArgs] script args` as a child, pinned with `taskset -c` when `cpu` is set. taskset execs
 * node, so the child's pid is node's own and its /proc/<pid>/stat is the process under test. stdin is a pipe
 * that the bench scripts watch: if this process dies without killing them, they see EOF and exit.
 */
export function spawnNode(name: string, script: string, args: string[], options: SpawnOptions = {}): Child {
  return spawnProgram(name, process.execPath, [...(options.nodeArgs ?? []), script, ...args], options);
}

/**
 * Any program as a bench child (nginx, the reference proxy), pinned and watched like spawnNode's: taskset execs it,
 * so the pid is the program's own. `options.nodeArgs` is not used.
 */
export function spawnProgram(name: string, command: string, argv: string[], options: SpawnOptions = {}): Child {
  const child =
    options.cpu === null || options.cpu === undefined
      ? spawn(command, argv, { env: options.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] })
      : spawn('taskset', ['-c', String(options.cpu), command, ...argv], { env: options.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
  if (child.pid === undefined) throw new Error(`could not start ${name}`);
  live.add(child);
  watchSignals(true);
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (d: string) => {
    // Bounded: a chatty child must not grow this process's memory during a long run.
    stderr = (stderr + d).slice(-16_384);
  });
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => {
      live.delete(child);
      if (live.size === 0) watchSignals(false);
      resolve(code);
    });
  });
  child.stdin!.on('error', () => {}); // EPIPE when the child exits first
  // BENCH_CHILD_LOG_DIR keeps every child's stdout (e.g. --trace-gc output) as <dir>/<name>.log, for diagnosis.
  const logDir = process.env.BENCH_CHILD_LOG_DIR;
  if (logDir) child.stdout!.pipe(createWriteStream(join(logDir, `${name.replace(/[^a-z0-9-]+/gi, '-')}.log`)));
  const lines = createInterface({ input: child.stdout! });
  const listeners = new Set<(line: string) => void>();
  lines.on('line', (line) => {
    for (const l of listeners) l(line);
  });

  return {
    name,
    pid: child.pid,
    process: child,
    stderr: () => stderr,
    exited,
    waitForLine<T>(match: (line: string) => T | null | undefined | false, timeoutMs: number): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        const done = () => {
          clearTimeout(timer);
          listeners.delete(onLine);
        };
        const onLine = (line: string) => {
          const m = match(line);
          if (m === null || m === undefined || m === false) return;
          done();
          resolve(m);
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`${name} gave no expected output within ${timeoutMs} ms; stderr: ${stderr.trim() || '(empty)'}`));
        }, timeoutMs);
        listeners.add(onLine);
        void exited.then((code) => {
          if (!listeners.has(onLine)) return;
          done();
          reject(new Error(`${name} exited with ${code}; stderr: ${stderr.trim() || '(empty)'}`));
        });
      });
    },
    async stop(graceMs = 3_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Parses a JSON line, or returns null for anything else (log lines, banners). */
export function jsonLine(line: string): Record<string, unknown> | null {
  if (!line.startsWith('{')) return null;
  try {
    return JSON.parse(line) as Record<string, unknown>;
  } catch {
    return null;
  }
}

/**
 * For bench scripts run as children: exit when the parent goes away (stdin reaches EOF), so a parent killed
 * with SIGKILL leaves no server behind.
 */
export function exitWithParent(): void {
  // Only under spawnNode (stdin a pipe): run by hand, stdin may be a terminal or /dev/null, which says nothing.
  if (!fstatSync(0).isFIFO()) return;
  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('error', () => process.exit(0));
  process.stdin.resume();
}
