// A real cluster: one control process and two edge processes that meet only through Redis. A change made through
// the API reaches both edges, GET /v1/edges shows both on the new version, and each edge serves its own agents.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent, type Agent } from '../src/agent/agent.ts';
import { copyPgliteTemplate } from './helpers/pglite-template.ts';
import { startRedisServer, type RedisServer } from './helpers/redis-server.ts';
import { cleanEnv, serveNode, type ServedNode } from './helpers/serve-process.ts';
import { deleteRedisPrefix } from './helpers/node.ts';
import { eventually } from './helpers/eventually.ts';
import { controlApi, sendToEdge } from './helpers/cluster-http.ts';

describe('cluster: control + two edges + Redis', () => {
  let redis: RedisServer | undefined;
  let redisUrl: string;
  const prefix = `cluster:${randomBytes(4).toString('hex')}:`;
  const adminKey = `cluster-admin-${randomBytes(12).toString('hex')}`;
  const dirs: string[] = [];
  let control: ServedNode;
  const edges: ServedNode[] = [];
  const agents: Agent[] = [];
  let service: http.Server;
  let servicePort: number;

  async function dataDir(pglite: boolean): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), 'edge-cluster-'));
    dirs.push(dir);
    if (pglite) await copyPgliteTemplate(join(dir, 'pglite'));
    return dir;
  }

  before(async () => {
    if (process.env.REDIS_URL) redisUrl = process.env.REDIS_URL;
    else {
      redis = await startRedisServer();
      redisUrl = redis.url;
    }
    const shared = {
      REDIS_URL: redisUrl,
      EDGE_REDIS_PREFIX: prefix,
      EDGE_SECRET_KEY: randomBytes(24).toString('hex'),
      EDGE_PRESENCE_INTERVAL_MS: '200',
    };
    control = await serveNode(cleanEnv({ ...shared, EDGE_ROLE: 'control', EDGE_DATA_DIR: await dataDir(true), EDGE_ADMIN_API_KEY: adminKey, EDGE_NODE_ID: 'control-1' }));
    for (const node of ['edge-a', 'edge-b']) {
      edges.push(
        await serveNode(
          cleanEnv({ ...shared, EDGE_ROLE: 'edge', EDGE_DATA_DIR: await dataDir(false), EDGE_NODE_ID: node, EDGE_CONTROL_URL: `http://127.0.0.1:${control.control}` }),
        ),
      );
    }
    service = http.createServer((req, res) => res.end(`served ${req.url}`));
    await new Promise<void>((r) => service.listen(0, '127.0.0.1', r));
    servicePort = (service.address() as AddressInfo).port;
  });

  after(async () => {
    for (const a of agents) await a.stop();
    service?.close();
    for (const n of [...edges, control]) if (n) await n.stop();
    if (redis) await redis.stop();
    else await deleteRedisPrefix(redisUrl, prefix);
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  const api = controlApi(() => `http://127.0.0.1:${control.control}`);
  const get = (port: number, host: string, path: string) => sendToEdge(port, host, path);

  it('carries a change to both edges, shows both on the new version, and serves through each', async () => {
    const user = (await api('POST', '/v1/admin/users', adminKey, { email: 'cluster@example.test', plan: 'pro' })).body;
    const endpoint = (await api('POST', '/v1/endpoints', user.api_key, {})).body;
    assert.ok(endpoint.uuid);

    // Both edges report the latest committed version.
    const status = await eventually(async () => {
      const res = await api('GET', '/v1/edges', adminKey);
      const nodes = res.body.items.filter((e: { in_sync: boolean }) => e.in_sync).map((e: { node_id: string }) => e.node_id);
      return nodes.length === 2 ? res.body : undefined;
    });
    assert.deepEqual(status.items.map((e: { node_id: string }) => e.node_id), ['edge-a', 'edge-b']);
    for (const e of status.items) assert.equal(e.version, status.version);

    // An agent on each edge; each edge serves the endpoint through its own agent.
    for (const edge of edges) {
      agents.push(await startAgent({ edgeUrl: `http://127.0.0.1:${edge.http}`, apiKey: user.api_key, endpoint: endpoint.uuid, protocol: 'http', target: servicePort }));
      const res = await get(edge.http!, endpoint.hostname, '/hello');
      assert.equal(res.status, 200);
      assert.equal(res.body, 'served /hello');
    }
    const tunnels = await eventually(async () => {
      const res = await api('GET', `/v1/endpoints/${endpoint.uuid}/tunnels`, user.api_key);
      return res.body.items.length === 2 ? res.body.items : undefined;
    });
    assert.deepEqual(tunnels.map((t: { edge_node: string }) => t.edge_node).sort(), ['edge-a', 'edge-b']);

    // A routing-rule change made through the API is applied by both edges: both report its version.
    const rule = await api('POST', `/v1/endpoints/${endpoint.uuid}/routing-rules`, user.api_key, {
      name: 'api',
      priority: 1,
      target_agent_tags: 'api',
      conditions: [{ condition_type: 'path', condition_key: 'prefix', pattern: '/api' }],
    });
    assert.equal(rule.status, 201);
    const afterRule = await eventually(async () => {
      const res = await api('GET', '/v1/edges', adminKey);
      return res.body.items.length === 2 && res.body.items.every((e: { in_sync: boolean }) => e.in_sync) ? res.body : undefined;
    });
    assert.ok(afterRule.version > status.version);
    // Neither edge has an agent tagged "api": both now answer /api/* with the page naming the rule.
    for (const edge of edges) {
      const res = await get(edge.http!, endpoint.hostname, '/api/x');
      assert.equal(res.status, 502);
      assert.match(res.body, /routing rule &quot;api&quot;|routing rule "api"/);
    }

    // A deletion made through the API stops both edges from serving the hostname.
    assert.equal((await api('DELETE', `/v1/endpoints/${endpoint.uuid}`, user.api_key)).status, 204);
    for (const edge of edges) {
      await eventually(async () => ((await get(edge.http!, endpoint.hostname, '/')).status === 404 ? true : undefined));
    }
  });
});
