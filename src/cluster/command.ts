// `edge cluster` (`npm run cluster`): starts a local cluster for a person to use, prints where each process listens
// and how to connect an agent, and stops everything on Ctrl-C or SIGTERM.
import { parseArgs } from 'node:util';
import { startLocalCluster, type LocalCluster } from './local.ts';

export const CLUSTER_HELP = `Usage: edge cluster [--edges N] [--base-port P]

Starts control, worker and N edges (default 3, regions eu, us, ap) as separate processes on this machine,
meeting through Redis and PostgreSQL: DATABASE_URL and REDIS_URL when set, otherwise a private PostgreSQL
(installed on this machine) and a private redis-server, removed at exit.

  --edges N        how many edges, 1 to 16 (default 3)
  --base-port P    fixed ports: control on P, worker ops on P+1, edge i on P+10i (http), +1 (https), +2 (ops), +3 (relay), +4 (DNS);
                   without it every port is chosen by the system and printed`;

export class ClusterUsageError extends Error {}

export interface ClusterCommandOptions {
  edges: number;
  basePort?: number;
}

export function parseClusterArgs(args: string[]): ClusterCommandOptions | 'help' {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { edges: { type: 'string' }, 'base-port': { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) return 'help';
  if (positionals.length > 0) throw new ClusterUsageError(`unexpected argument "${positionals[0]}"\n\n${CLUSTER_HELP}`);
  const edges = values.edges ?? '3';
  if (!/^[0-9]{1,2}$/.test(edges) || Number(edges) < 1 || Number(edges) > 16) throw new ClusterUsageError(`--edges must be a whole number from 1 to 16, got "${edges}"`);
  const base = values['base-port'];
  // The highest port used is base + 10 * edges + 3.
  if (base !== undefined && (!/^[0-9]{1,5}$/.test(base) || Number(base) < 1024 || Number(base) + 10 * Number(edges) + 3 > 65535)) {
    throw new ClusterUsageError(`--base-port must be a whole number from 1024 that leaves room for ${edges} edges below 65536, got "${base}"`);
  }
  return { edges: Number(edges), basePort: base === undefined ? undefined : Number(base) };
}

/** The table `edge cluster` prints: one row per process. */
export function describeCluster(cluster: LocalCluster): string {
  const rows = [['process', 'pid', 'region', 'listens on']];
  for (const node of cluster.nodes) {
    const p = node.ports;
    const where = [
      p.control && `control API http://127.0.0.1:${p.control}`,
      p.http && `http :${p.http}`,
      p.https && `https :${p.https}`,
      p.ops && `ops :${p.ops}`,
      p.workerOps && `worker ops :${p.workerOps}`,
      p.relay && `relay :${p.relay}`,
      p.dns && `dns :${p.dns}`,
    ].filter(Boolean);
    rows.push([node.name, String(node.pid ?? '-'), node.env.EDGE_REGION ?? '', where.join(', ') || '(no listener)']);
  }
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const table = rows.map((r) => r.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd()).join('\n');
  const edgeList = cluster.edges.map((e) => `http://127.0.0.1:${e.ports.http}`).join(',');
  return [
    table,
    '',
    `Redis:      ${cluster.redisUrl}${cluster.redis ? ' (private, removed at exit)' : ''}`,
    `PostgreSQL: ${cluster.databaseUrl}${cluster.postgres ? ' (private, removed at exit)' : ''}`,
    `Admin API key: ${cluster.adminKey}`,
    '',
    'Create a user and an endpoint through the control API, then run an agent on every edge:',
    `  curl -s -X POST ${cluster.controlUrl}/v1/admin/users -H 'x-api-key: ${cluster.adminKey}' -H 'content-type: application/json' -d '{"email":"me@example.test","plan":"pro"}'`,
    `  edge agent http 3000 --api-key <the user's api_key> --edges ${edgeList}`,
  ].join('\n');
}

export async function clusterCommand(args: string[]): Promise<void> {
  const parsed = parseClusterArgs(args);
  if (parsed === 'help') return void process.stdout.write(CLUSTER_HELP + '\n');
  process.stdout.write(`starting control, worker and ${parsed.edges} edges...\n`);
  const cluster = await startLocalCluster({
    edges: parsed.edges,
    basePort: parsed.basePort,
    databaseUrl: process.env.DATABASE_URL || undefined,
    redisUrl: process.env.REDIS_URL || undefined,
  });
  process.stdout.write(describeCluster(cluster) + '\n\nCtrl-C stops every process.\n');
  // A process of the cluster that dies is said at once; the rest keep running (that is what a cluster is for).
  let stopping = false;
  for (const node of cluster.nodes) void node.exited.then((code) => stopping || process.stdout.write(`${node.name} exited (${code})\n`));
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    process.stdout.write('stopping...\n');
    await cluster.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
}
