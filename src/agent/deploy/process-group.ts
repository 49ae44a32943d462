// Child processes of the deployer (git, the build, the application): each leads its own process group, so one signal
// reaches the whole tree a shell command starts, and its output is read line by line for the deployment log.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { MAX_LOG_LINE_LENGTH } from '../../shared/deploy.ts';

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the process could not be started at all (e.g. ENOENT for a missing `git` or `sh`). */
  error?: string;
}

export interface GroupOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** Each line of stdout and stderr, as it completes; longer lines are cut into pieces of MAX_LOG_LINE_LENGTH. */
  onLine: (line: string) => void;
}

/** How long stdout/stderr may stay open after the group was killed (a member that left the group may hold them). */
const PIPE_CLOSE_MS = 2_000;

export class ProcessGroup {
  readonly child: ChildProcess;
  /** Resolves when the leader exited, or failed to start; never rejects. */
  readonly exited: Promise<Exit>;
  exit: Exit | null = null;
  private readonly closed: Promise<void>;
  private stopping: Promise<void> | null = null;

  constructor(file: string, args: string[], options: GroupOptions) {
    // detached: the child leads a new process group (setsid), so process.kill(-pid) reaches what it started too,
    // and a Ctrl-C meant for the agent reaches only the agent, which then stops its children in order.
    this.child = spawn(file, args, { cwd: options.cwd, env: options.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const readers = [this.child.stdout!, this.child.stderr!].map((stream) => {
      const split = lineSplitter(options.onLine);
      stream.setEncoding('utf8');
      stream.on('data', split.data);
      stream.on('error', () => {});
      return new Promise<void>((resolve) => stream.once('close', () => (split.end(), resolve())));
    });
    this.closed = Promise.all(readers).then(() => {});
    this.exited = new Promise<Exit>((resolve) => {
      this.child.once('exit', (code, signal) => resolve((this.exit = { code, signal })));
      this.child.once('error', (err) => resolve((this.exit = { code: null, signal: null, error: err.message })));
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /**
   * SIGTERM to the group, SIGKILL to whatever of it is left after graceMs; resolves once the leader is gone and the
   * pipes closed. Idempotent: a second call waits for the first.
   */
  stop(graceMs: number): Promise<void> {
    this.stopping ??= (async () => {
      const pid = this.child.pid;
      if (pid === undefined) return; // never started
      signalGroup(pid, 'SIGTERM');
      // The leader (`sh -c`) may be gone while the service it started still shuts down. Its end shows as the output
      // pipes closing: every member holds them until it exits. (Polling the group with kill(-pid, 0) would also
      // count zombies an init that reaps slowly leaves behind.)
      const grace = new AbortController();
      await Promise.race([
        Promise.all([this.exited, this.closed]),
        sleep(graceMs, undefined, { signal: grace.signal }).catch(() => {}),
      ]);
      grace.abort();
      // Whatever is left of the group: past its grace, or a member that closed its output and lives on.
      signalGroup(pid, 'SIGKILL');
      await this.exited;
      const late = new AbortController();
      await Promise.race([this.closed, sleep(PIPE_CLOSE_MS, undefined, { signal: late.signal }).catch(() => {})]);
      late.abort();
      this.child.stdout?.destroy();
      this.child.stderr?.destroy();
    })();
    return this.stopping;
  }
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: the group is empty already
  }
}

/** Splits decoded output into lines (LF or CRLF), cutting lines longer than the control channel carries. */
export function lineSplitter(onLine: (line: string) => void): { data(chunk: string): void; end(): void } {
  let partial = '';
  const emit = (line: string) => {
    for (let i = 0; i < line.length || i === 0; i += MAX_LOG_LINE_LENGTH) onLine(line.slice(i, i + MAX_LOG_LINE_LENGTH));
  };
  return {
    data(chunk) {
      partial += chunk;
      let nl: number;
      while ((nl = partial.indexOf('\n')) !== -1) {
        emit(partial.slice(0, nl).replace(/\r$/, ''));
        partial = partial.slice(nl + 1);
      }
      // A producer that never ends its line must not grow the buffer without bound.
      while (partial.length >= MAX_LOG_LINE_LENGTH) {
        onLine(partial.slice(0, MAX_LOG_LINE_LENGTH));
        partial = partial.slice(MAX_LOG_LINE_LENGTH);
      }
    },
    end() {
      if (partial) emit(partial);
      partial = '';
    },
  };
}

export interface RunResult extends Exit {
  timedOut: boolean;
  aborted: boolean;
}

/**
 * Runs a command to its end (git, a build): killed with its group at timeoutMs or when `signal` aborts. Whatever the
 * command left running in its group is killed once it exits: a build's stray background job must not outlive it.
 */
export async function runToEnd(
  file: string,
  args: string[],
  options: GroupOptions & { timeoutMs: number; graceMs: number; signal?: AbortSignal },
): Promise<RunResult> {
  const group = new ProcessGroup(file, args, options);
  let timedOut = false;
  let aborted = false;
  const timer = setTimeout(() => {
    timedOut = true;
    void group.stop(options.graceMs);
  }, options.timeoutMs);
  const onAbort = () => {
    aborted = true;
    void group.stop(options.graceMs);
  };
  if (options.signal?.aborted) onAbort();
  else options.signal?.addEventListener('abort', onAbort, { once: true });
  const exit = await group.exited;
  clearTimeout(timer);
  options.signal?.removeEventListener('abort', onAbort);
  await group.stop(0);
  return { ...exit, timedOut, aborted };
}

/** A port free on 127.0.0.1 now: bound with port 0, read, closed. Another process may take it before the service does. */
export async function freePort(): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await new Promise<number>((resolve, reject) => {
        const server = createServer();
        server.unref();
        server.once('error', reject);
        server.listen(0, '127.0.0.1', () => {
          const { port } = server.address() as AddressInfo;
          server.close(() => resolve(port));
        });
      });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt >= 5) throw err;
    }
  }
}

/** "exited with code 1", "killed by signal SIGKILL", "could not start: spawn git ENOENT". */
export function describeExit(exit: Exit): string {
  if (exit.error) return `could not start: ${exit.error}`;
  if (exit.signal) return `killed by signal ${exit.signal}`;
  return `exited with code ${exit.code}`;
}
