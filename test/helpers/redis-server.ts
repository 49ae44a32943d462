// A private redis-server per test file, on a free port and with nothing persisted, so tests can stop and
// restart it (losing all state, as a crashed cache would) without touching the machine's shared Redis.
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';

const BINARY = process.env.REDIS_SERVER_BIN ?? 'redis-server';
const START_TIMEOUT_MS = 10_000;

export interface RedisServer {
  readonly port: number;
  readonly url: string;
  /** Stops the server; everything it held is gone. */
  stop(): Promise<void>;
  /** Starts it again, empty, on the same port. */
  restart(): Promise<void>;
}

/** Servers still running, killed if the test process exits without stopping them (a failed `before`, say). */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.unref();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    let reply = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
  });
}

function spawnServer(port: number, extraArgs: readonly string[]): Promise<ChildProcess> {
  const child = spawn(
    BINARY,
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', tmpdir(), ...extraArgs],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  live.add(child);
  let stderr = '';
  child.stderr?.on('data', (chunk) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + START_TIMEOUT_MS;
    let exited = false;
    child.once('exit', (code, signal) => {
      exited = true;
      live.delete(child);
      reject(new Error(`redis-server on port ${port} exited during start (${code ?? signal}): ${stderr.trim()}`));
    });
    child.once('error', (err) => {
      exited = true;
      reject(err);
    });
    // Readiness is "answers PING": poll for it, there is no event to wait for from outside the process.
    const poll = async () => {
      if (exited) return;
      if (await ping(port)) return resolve(child);
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        return reject(new Error(`redis-server on port ${port} did not answer PING within ${START_TIMEOUT_MS} ms`));
      }
      setTimeout(poll, 20);
    };
    void poll();
  });
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => {
      live.delete(child);
      resolve();
    });
    // SIGKILL: the abrupt loss a crash or an evicted pod causes, and nothing to wait for.
    child.kill('SIGKILL');
  });
}

/** Starts a private server; extra arguments go to redis-server (e.g. ['--stream-node-max-entries', '1']). */
export async function startRedisServer(extraArgs: readonly string[] = []): Promise<RedisServer> {
  let lastError: unknown;
  // Another process may grab the probed port before redis-server binds it; a new port fixes that.
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    try {
      let child = await spawnServer(port, extraArgs);
      return {
        port,
        url: `redis://127.0.0.1:${port}`,
        stop: () => stopChild(child),
        async restart() {
          await stopChild(child);
          child = await spawnServer(port, extraArgs);
        },
      };
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError;
}
