// Runs `edge serve` (or any `edge` command) as a real child process, the way an operator does, and reads the
// ports it chose from its JSON log. Children still running when the test process exits are killed.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const BIN = fileURLToPath(new URL('../../bin/edge.js', import.meta.url));

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** The environment of a fresh machine (none of CI's service URLs), on loopback with port 0 everywhere. */
export function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith('EDGE_') || k === 'DATABASE_URL' || k === 'REDIS_URL') delete env[k];
  // EDGE_STORE_THREAD_NICE 0: the suite keeps both cores busy (the proxy bench takes the default back).
  return { ...env, EDGE_BIND_HOST: '127.0.0.1', EDGE_CONTROL_PORT: '0', EDGE_HTTP_PORT: '0', EDGE_HTTPS_PORT: '0', EDGE_OPS_PORT: '0', EDGE_RELAY_PORT: '0', EDGE_DNS_PORT: '0', EDGE_STORE_THREAD_NICE: '0', ...extra };
}

export function run(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env });
    live.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('exit', (code) => {
      live.delete(child);
      resolve({ code, stdout, stderr });
    });
  });
}

export interface ServedNode {
  child: ChildProcess;
  /** Control API port (undefined for an edge-only node). */
  control?: number;
  /** Edge HTTP and HTTPS ports (undefined for a control-only node). */
  http?: number;
  https?: number;
  /** The generated first admin key, when this start printed one. */
  adminKey?: string;
  exited: Promise<number | null>;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

/**
 * Starts `edge serve` and resolves once it logs "node ready" (after printing a generated key, if any). The line is
 * logged at info level, so EDGE_LOG_LEVEL must not be above info. Fails (and kills the child) after `timeoutMs`.
 */
export function serveNode(env: NodeJS.ProcessEnv, timeoutMs = 60_000): Promise<ServedNode> {
  const child = spawn(process.execPath, [BIN, 'serve'], { env });
  live.add(child);
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      live.delete(child);
      resolve(code);
    }),
  );
  return new Promise((resolve, reject) => {
    let adminKey: string | undefined;
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    void exited.then((code) => reject(new Error(`edge serve exited with ${code}: ${stderr}`)));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`edge serve was not ready within ${timeoutMs} ms: ${stderr}`));
    }, timeoutMs);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const key = /Admin API key \(shown once, store it now\): (\S+)/.exec(line);
      if (key) adminKey = key[1];
      if (!line.startsWith('{')) return;
      const entry = JSON.parse(line);
      if (entry.msg !== 'node ready') return;
      clearTimeout(timer);
      resolve({
        child,
        control: entry.control,
        http: entry.http,
        https: entry.https,
        adminKey,
        exited,
        stop: () => {
          child.kill('SIGTERM');
          return exited;
        },
      });
    });
  });
}
