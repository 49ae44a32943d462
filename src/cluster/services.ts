// Private Redis and PostgreSQL servers for a local cluster (`edge cluster`, the fault tests, the soak): each on a free
// loopback port with its files in a temporary directory, and each can be killed and started again on purpose.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { chown, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const START_TIMEOUT_MS = 15_000;

/** Children still running when this process exits are killed, so a failed start or test leaves nothing behind. */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export function freePort(): Promise<number> {
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

/** Waits (polling, as nothing outside the process signals readiness) until `ready` says yes or the time is up. */
async function waitFor(what: string, ready: () => Promise<boolean>, failed: () => string | null): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    const failure = failed();
    if (failure) throw new Error(`${what}: ${failure}`);
    if (await ready()) return;
    if (Date.now() > deadline) throw new Error(`${what} was not ready within ${START_TIMEOUT_MS} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

function redisPing(port: number): Promise<boolean> {
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

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

export interface LocalRedis {
  readonly port: number;
  readonly url: string;
  readonly pid: number | undefined;
  /** SIGKILL: the abrupt loss of a crash. Nothing was persisted, so what it held is gone. */
  kill(): Promise<void>;
  /** Starts it again, empty, on the same port. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** A redis-server that keeps nothing on disk, on a free port (`args` go to redis-server as they are). */
export async function startLocalRedis(options: { binary?: string; args?: readonly string[] } = {}): Promise<LocalRedis> {
  let lastError: unknown;
  // Another process may take the probed port before redis-server binds it; a new port fixes that.
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await redisOnPort(await freePort(), options);
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError;
}

async function redisOnPort(port: number, options: { binary?: string; args?: readonly string[] }): Promise<LocalRedis> {
  const binary = options.binary ?? process.env.REDIS_SERVER_BIN ?? 'redis-server';
  const dir = await mkdtemp(join(tmpdir(), 'edge-redis-'));
  let child: ChildProcess | undefined;
  const start = async () => {
    // Stopped means its directory went too; a start after that makes it again.
    await mkdir(dir, { recursive: true });
    const c = spawn(binary, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...(options.args ?? [])], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child = c;
    live.add(c);
    let stderr = '';
    let spawnError: Error | null = null;
    c.stderr?.on('data', (d) => (stderr += d));
    c.once('error', (err) => (spawnError = err));
    c.once('exit', () => live.delete(c));
    await waitFor(`redis-server on port ${port}`, () => redisPing(port), () =>
      spawnError ? spawnError.message : c.exitCode !== null ? `exited with ${c.exitCode}: ${stderr.trim()}` : null,
    ).catch(async (err: unknown) => {
      c.kill('SIGKILL');
      throw err;
    });
  };
  const kill = async () => {
    if (!child) return;
    child.kill('SIGKILL');
    await exited(child);
  };
  try {
    await start();
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    get pid() {
      return child?.pid;
    },
    kill,
    start,
    async stop() {
      await kill();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface LocalPostgres {
  readonly port: number;
  /** postgres://postgres@127.0.0.1:<port>/postgres */
  readonly url: string;
  /** `pg_ctl stop -m immediate`: every backend killed at once, as when the primary's host fails. */
  kill(): Promise<void>;
  start(): Promise<void>;
  /** Stops it and removes its files. */
  stop(): Promise<void>;
}

/** The newest installed PostgreSQL's bin directory (Debian's layout), or null when none is installed. */
export function postgresBinDir(): string | null {
  if (process.env.EDGE_POSTGRES_BIN_DIR) return process.env.EDGE_POSTGRES_BIN_DIR;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length > 0 ? join(root, versions[0], 'bin') : null;
}

/**
 * A private PostgreSQL (initdb in a temporary directory, trust auth, loopback only, fsync off: a test server). The
 * server refuses to run as root, so under root it runs as the `postgres` user, which Debian's package creates.
 */
export async function startLocalPostgres(): Promise<LocalPostgres> {
  const bin = postgresBinDir();
  if (!bin) throw new Error('no PostgreSQL installation found (looked in /usr/lib/postgresql/*/bin; set EDGE_POSTGRES_BIN_DIR)');
  const asRoot = userInfo().uid === 0;
  const exec = (tool: string, args: string[]) => (asRoot ? run('runuser', ['-u', 'postgres', '--', join(bin, tool), ...args]) : run(join(bin, tool), args));
  const dir = await mkdtemp(join(tmpdir(), 'edge-postgres-'));
  if (asRoot) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    await chown(dir, Number(stdout.trim()), Number(gid.trim()));
  }
  const data = join(dir, 'data');
  await exec('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const port = await freePort();
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  const start = async () => {
    await exec('pg_ctl', ['-D', data, '-o', options, '-l', join(dir, 'server.log'), '-w', '-t', '30', 'start']);
  };
  const kill = async () => {
    await exec('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => {});
  };
  await start();
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    kill,
    start,
    async stop() {
      await kill();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
