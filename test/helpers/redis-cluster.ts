// A real Redis Cluster (three primaries) and a real Sentinel deployment (a primary watched by one sentinel), on
// free loopback ports with their files in temporary directories, for tests of the distributed Redis forms.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../src/cluster/services.ts';
import { eventually } from './eventually.ts';

const run = promisify(execFile);
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

function server(args: string[]): ChildProcess {
  const child = spawn('redis-server', args, { stdio: 'ignore' });
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

async function cli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-p', String(port), ...args]);
  return stdout;
}

async function answers(port: number): Promise<true | undefined> {
  return (await cli(port, 'ping').catch(() => '')).includes('PONG') ? true : undefined;
}

export interface RedisDeployment {
  /** host:port list, as REDIS_CLUSTER_NODES / REDIS_SENTINELS take it. */
  nodes: string;
  /** The REDIS_URL form (redis+cluster:// or redis+sentinel://). */
  url: string;
  stop(): Promise<void>;
}

async function stopAll(children: ChildProcess[], dir: string): Promise<void> {
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          c.once('exit', () => resolve());
          c.kill('SIGKILL');
        }),
    ),
  );
  await rm(dir, { recursive: true, force: true });
}

/** Three primaries, slots spread by `redis-cli --cluster create`, ready once cluster_state is ok. */
export async function startRedisCluster(): Promise<RedisDeployment> {
  const dir = await mkdtemp(join(tmpdir(), 'edge-redis-cluster-'));
  const ports = [await freePort(), await freePort(), await freePort()];
  const children = ports.map((port) =>
    server(['--port', String(port), '--bind', '127.0.0.1', '--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${port}.conf`), '--save', '', '--appendonly', 'no', '--dir', dir]),
  );
  try {
    for (const port of ports) await eventually(() => answers(port), 10_000);
    await run('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes']);
    await eventually(async () => ((await cli(ports[0], 'cluster', 'info')).includes('cluster_state:ok') ? true : undefined), 20_000);
  } catch (err) {
    await stopAll(children, dir);
    throw err;
  }
  const nodes = ports.map((p) => `127.0.0.1:${p}`).join(',');
  return { nodes, url: `redis+cluster://${nodes}`, stop: () => stopAll(children, dir) };
}

/** A primary and one sentinel monitoring it as `mymaster`, ready once the sentinel names the primary. */
export async function startRedisSentinel(): Promise<RedisDeployment> {
  const dir = await mkdtemp(join(tmpdir(), 'edge-redis-sentinel-'));
  const primary = await freePort();
  const sentinel = await freePort();
  const children = [server(['--port', String(primary), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir])];
  try {
    await eventually(() => answers(primary), 10_000);
    // A sentinel rewrites its configuration file, so it gets one of its own.
    const conf = join(dir, 'sentinel.conf');
    await writeFile(conf, `port ${sentinel}\nbind 127.0.0.1\ndir ${dir}\nsentinel monitor mymaster 127.0.0.1 ${primary} 1\nsentinel down-after-milliseconds mymaster 1000\n`);
    children.push(server([conf, '--sentinel']));
    await eventually(async () => ((await cli(sentinel, 'sentinel', 'get-master-addr-by-name', 'mymaster').catch(() => '')).includes(String(primary)) ? true : undefined), 10_000);
  } catch (err) {
    await stopAll(children, dir);
    throw err;
  }
  const nodes = `127.0.0.1:${sentinel}`;
  return { nodes, url: `redis+sentinel://${nodes}/mymaster`, stop: () => stopAll(children, dir) };
}
