// The local cluster launcher (`edge cluster`, src/cluster): control, worker and three edges as real processes that
// meet through Redis and PostgreSQL; an endpoint made through control is served by every edge; stop leaves nothing.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import { describeCluster, parseClusterArgs, ClusterUsageError } from '../../src/cluster/command.ts';
import { startLocalCluster, type LocalCluster } from '../../src/cluster/local.ts';
import { eventually } from '../helpers/eventually.ts';
import { controlApi, sendToEdge } from '../helpers/cluster-http.ts';
import { skipSlowSuite } from '../helpers/slow-suites.ts';

describe('edge cluster arguments', () => {
  it('takes --edges and --base-port, and defaults to three edges on system-chosen ports', () => {
    assert.deepEqual(parseClusterArgs([]), { edges: 3, basePort: undefined });
    assert.deepEqual(parseClusterArgs(['--edges', '5', '--base-port', '9000']), { edges: 5, basePort: 9000 });
    assert.equal(parseClusterArgs(['--help']), 'help');
  });

  it('refuses bad input with a message naming the option', () => {
    for (const args of [['--edges', '0'], ['--edges', '17'], ['--edges', 'two'], ['--base-port', '80'], ['--base-port', '65530'], ['extra']]) {
      assert.throws(() => parseClusterArgs(args), (err: Error) => err instanceof ClusterUsageError && /--edges|--base-port|unexpected argument/.test(err.message), args.join(' '));
    }
  });
});

describe('a local cluster', { skip: skipSlowSuite() }, () => {
  let cluster: LocalCluster;
  let service: http.Server;
  let servicePort: number;
  const agents: Agent[] = [];

  before(async () => {
    cluster = await startLocalCluster({
      databaseUrl: process.env.DATABASE_URL || undefined,
      redisUrl: process.env.REDIS_URL || undefined,
      env: { EDGE_PRESENCE_INTERVAL_MS: '250' },
    });
    service = http.createServer((req, res) => res.end(`served ${req.url}`));
    await new Promise<void>((r) => service.listen(0, '127.0.0.1', r));
    servicePort = (service.address() as AddressInfo).port;
  });

  after(async () => {
    for (const a of agents) await a.stop();
    service?.close();
    await cluster?.stop();
  });

  const api = controlApi(() => cluster.controlUrl);
  const get = (port: number, host: string, path: string) => sendToEdge(port, host, path);

  it('starts control, worker and three edges in three regions, each a process of its own, the worker with its ops port', () => {
    assert.deepEqual(cluster.nodes.map((n) => n.name), ['control', 'worker', 'edge-1', 'edge-2', 'edge-3']);
    assert.deepEqual(cluster.edges.map((e) => e.env.EDGE_REGION), ['eu', 'us', 'ap']);
    assert.equal(new Set(cluster.nodes.map((n) => n.pid)).size, 5);
    for (const edge of cluster.edges) assert.ok(edge.ports.http && edge.ports.ops);
    const table = describeCluster(cluster);
    // The worker's ops port (docs/operations.md) is printed with the others.
    assert.ok(cluster.worker.ports.workerOps, 'the worker reports its ops port');
    assert.match(table, new RegExp(`worker ops :${cluster.worker.ports.workerOps}`));
    for (const node of cluster.nodes) assert.match(table, new RegExp(`^${node.name}\\s+${node.pid}`, 'm'));
  });

  it('serves an endpoint made through control on every edge, through the agent on each', async () => {
    const user = (await api('POST', '/v1/admin/users', cluster.adminKey, { email: 'local@example.test', plan: 'pro' })).body;
    const endpoint = (await api('POST', '/v1/endpoints', user.api_key, {})).body;
    assert.ok(endpoint.uuid, JSON.stringify(endpoint));
    for (const edge of cluster.edges) {
      agents.push(await startAgent({ edgeUrl: `http://127.0.0.1:${edge.ports.http}`, apiKey: user.api_key, endpoint: endpoint.uuid, protocol: 'http', target: servicePort }));
    }
    for (const edge of cluster.edges) {
      const res = await eventually(async () => {
        const r = await get(edge.ports.http!, endpoint.hostname, '/hello');
        return r.status === 200 ? r : undefined;
      }, 30_000);
      assert.equal(res.body, 'served /hello');
    }
    // Every edge is listed, on the control's current version.
    const edges = await eventually(async () => {
      const res = await api('GET', '/v1/edges', cluster.adminKey);
      return res.body.items.length === 3 && res.body.items.every((e: { in_sync: boolean }) => e.in_sync) ? res.body.items : undefined;
    }, 30_000);
    assert.deepEqual(edges.map((e: { node_id: string }) => e.node_id).sort(), ['edge-1', 'edge-2', 'edge-3']);
  });

  it('stops every process it started', async () => {
    const pids = cluster.nodes.map((n) => n.pid!);
    await cluster.stop();
    for (const pid of pids) assert.throws(() => process.kill(pid, 0), /ESRCH/, `process ${pid} still runs`);
  });
});
