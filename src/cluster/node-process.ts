// One `edge serve` process of a local cluster, started the way an operator starts it, with the ports it chose read
// from its `node ready` log line; it can be stopped, killed, frozen (SIGSTOP) and started again with the same settings.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../../bin/edge.js', import.meta.url));
const READY_TIMEOUT_MS = 90_000;
/** Log lines kept per process, for the error a failed start reports and for a test's diagnostics. */
const LOG_LINES_KEPT = 400;

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) {
    child.kill('SIGKILL');
  }
});

export type NodeRole = 'control' | 'worker' | 'edge' | 'all';

/** What the `node ready` line says a process listens on (absent: the role has no such listener). */
export interface NodePorts {
  control?: number;
  http?: number;
  https?: number;
  ops?: number;
  /** The worker role's ops port (WORKER_OPS_PORT; docs/operations.md). */
  workerOps?: number;
  relay?: number;
  /** The DNS role's UDP and TCP port (docs/dedicated-ips.md). */
  dns?: number;
}

export class NodeProcess {
  private child: ChildProcess | null = null;
  private exitPromise: Promise<number | null> = Promise.resolve(null);
  ports: NodePorts = {};
  /** The admin API key a control node printed at its first start (EDGE_ADMIN_API_KEY unset). */
  adminKey: string | undefined;
  /** The process's recent output (JSON log lines and anything else), newest last. */
  readonly log: string[] = [];

  constructor(
    readonly name: string,
    readonly role: NodeRole,
    /** The whole environment of the process. */
    readonly env: NodeJS.ProcessEnv,
  ) {}

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Resolves with the exit code when the current run of the process ends. */
  get exited(): Promise<number | null> {
    return this.exitPromise;
  }

  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Starts the process and resolves once it is ready; a restart keeps the settings (ports 0 may change). */
  start(): Promise<void> {
    if (this.running) return Promise.reject(new Error(`${this.name} is already running`));
    const child = spawn(process.execPath, [BIN, 'serve'], { env: this.env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    live.add(child);
    this.exitPromise = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        live.delete(child);
        resolve(code ?? (signal ? -1 : null));
      }),
    );
    const keep = (line: string) => {
      this.log.push(line);
      if (this.log.length > LOG_LINES_KEPT) this.log.splice(0, this.log.length - LOG_LINES_KEPT);
    };
    createInterface({ input: child.stderr! }).on('line', keep);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`${this.name} was not ready within ${READY_TIMEOUT_MS} ms:\n${this.log.slice(-20).join('\n')}`));
      }, READY_TIMEOUT_MS);
      void this.exitPromise.then((code) => {
        clearTimeout(timer);
        reject(new Error(`${this.name} exited with ${code} before it was ready:\n${this.log.slice(-20).join('\n')}`));
      });
      createInterface({ input: child.stdout! }).on('line', (line) => {
        keep(line);
        const key = /Admin API key \(shown once, store it now\): (\S+)/.exec(line);
        if (key) this.adminKey = key[1];
        if (!line.startsWith('{')) return;
        let entry: { msg?: string; worker_ops?: number } & NodePorts;
        try {
          entry = JSON.parse(line);
        } catch {
          return;
        }
        if (entry.msg !== 'node ready') return;
        clearTimeout(timer);
        this.ports = { control: entry.control, http: entry.http, https: entry.https, ops: entry.ops, workerOps: entry.worker_ops, relay: entry.relay, dns: entry.dns };
        resolve();
      });
    });
  }

  /** SIGTERM (a graceful drain), then the exit code. */
  async stop(): Promise<number | null> {
    if (!this.running) return this.exitPromise;
    // A frozen process would hold SIGTERM until thawed.
    this.child!.kill('SIGCONT');
    this.child!.kill('SIGTERM');
    return this.exitPromise;
  }

  /** The abrupt end of a crash or a lost host: SIGKILL, no goodbye to presence, nothing flushed. */
  async kill(): Promise<void> {
    if (!this.running) return;
    this.child!.kill('SIGKILL');
    await this.exitPromise;
  }

  /** SIGSTOP: the process holds its sockets but answers nothing, like a host that hangs. */
  freeze(): void {
    if (this.running) this.child!.kill('SIGSTOP');
  }

  thaw(): void {
    if (this.running) this.child!.kill('SIGCONT');
  }

  /** Resident memory in bytes (Linux /proc), or null when the process is gone. */
  async rss(): Promise<number | null> {
    if (!this.running || this.pid === undefined) return null;
    const status = await readFile(`/proc/${this.pid}/status`, 'utf8').catch(() => null);
    const m = status && /VmRSS:\s+(\d+) kB/.exec(status);
    return m ? Number(m[1]) * 1024 : null;
  }
}
