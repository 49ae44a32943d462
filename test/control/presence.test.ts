// Presence as users see it: the agents serving an endpoint, every edge's applied config version, and the
// janitor that removes ephemeral endpoints once their agents have been gone for the idle window.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import type { EndpointConfig } from '../../src/shared/snapshot.ts';
import { recordChange } from '../../src/store/feed.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { eventually } from '../helpers/eventually.ts';
import { visit } from '../helpers/http.ts';

describe('presence, edge status and the ephemeral janitor', () => {
  let t: TestNode;
  let service: http.Server;
  let servicePort: number;
  const agents: Agent[] = [];

  before(async () => {
    // The janitor's own timer is slowed right down: tests run sweeps themselves.
    t = await startTestNode({ EDGE_PRESENCE_INTERVAL_MS: '200', EDGE_JANITOR_INTERVAL_MS: '3600000', EDGE_EPHEMERAL_IDLE_SECONDS: '60' });
    service = http.createServer((_req, res) => res.end('ok'));
    await new Promise<void>((r) => service.listen(0, '127.0.0.1', r));
    servicePort = (service.address() as AddressInfo).port;
  });
  after(async () => {
    for (const a of agents) await a.stop();
    service.close();
    await t.close();
  });

  async function connect(apiKey: string, endpoint: string | undefined, tags: string[] = []): Promise<Agent> {
    const a = await startAgent({ edgeUrl: `http://127.0.0.1:${t.node.edge!.httpPort}`, apiKey, endpoint, protocol: 'http', target: servicePort, tags, agentId: `agent-${agents.length}` });
    agents.push(a);
    return a;
  }

  async function endpointOnEdge(key: string): Promise<{ uuid: string; hostname: string }> {
    const created = await t.api('POST', '/v1/endpoints', { key, body: {} });
    assert.equal(created.status, 201);
    await eventually(async () => t.node.edge!.config.endpoint(created.body.uuid));
    return created.body;
  }

  it('lists the agents serving an endpoint with their tags, protocol, region and edge', async () => {
    const user = await t.createUser('pro');
    const endpoint = await endpointOnEdge(user.api_key);
    assert.deepEqual((await t.api('GET', `/v1/endpoints/${endpoint.uuid}/tunnels`, { key: user.api_key })).body, { items: [] });
    await connect(user.api_key, endpoint.uuid, ['API', 'blue']);
    const items = await eventually(async () => {
      const res = await t.api('GET', `/v1/endpoints/${endpoint.uuid}/tunnels`, { key: user.api_key });
      return res.body.items.length > 0 ? res.body.items : undefined;
    });
    assert.equal(items.length, 1);
    assert.deepEqual(items[0].tags, ['api', 'blue']);
    assert.equal(items[0].protocol, 'http');
    assert.equal(items[0].region, 'local');
    assert.equal(items[0].edge_node, t.node.config.nodeId);
    assert.ok(Date.parse(items[0].connected_at) > 0);

    const stranger = await t.createUser('pro');
    assert.equal((await t.api('GET', `/v1/endpoints/${endpoint.uuid}/tunnels`, { key: stranger.api_key })).status, 404);
    assert.equal((await t.api('GET', '/v1/endpoints/not-a-uuid/tunnels', { key: user.api_key })).status, 400);
  });

  it("shows every edge's applied version next to the latest, to admins only", async () => {
    const user = await t.createUser('pro');
    await endpointOnEdge(user.api_key);
    const status = await eventually(async () => {
      const res = await t.api('GET', '/v1/edges');
      const edge = res.body.items.find((e: { node_id: string }) => e.node_id === t.node.config.nodeId);
      return edge?.in_sync ? res.body : undefined;
    });
    const edge = status.items[0];
    assert.equal(edge.version, status.version);
    assert.equal(edge.region, 'local');
    assert.equal((await t.api('GET', '/v1/edges', { key: user.api_key })).status, 403);
  });

  it('lists endpoint configs an edge could not compile, while the endpoint keeps serving its previous one', async () => {
    const user = await t.createUser('pro');
    const endpoint = await endpointOnEdge(user.api_key);
    await connect(user.api_key, endpoint.uuid);
    const edgePort = t.node.edge!.httpPort;
    await eventually(async () => ((await visit(edgePort, endpoint.hostname, '/')).status === 200 ? true : undefined));
    const inForce = t.node.edge!.config.endpoint(endpoint.uuid)!;
    // A config the edge's compiler refuses, committed to the feed the way the store commits any change (the API
    // validates rules with the same compiler, so only a diverging control plane or a hand edit can produce one).
    const broken: EndpointConfig = {
      ...inForce,
      routing_rules: [
        { id: 1, name: 'broken', priority: 1, enabled: true, target_agent_id: null, target_agent_tags: ['x'], target_origin_url: null, conditions: [{ condition_type: 'source_ip', condition_key: '', pattern: 'not-an-ip' }] },
      ],
    };
    const version = await t.node.db!.transaction((tx) => recordChange(tx, 'endpoint', endpoint.uuid, broken));
    const edge = await eventually(async () => {
      const res = await t.api('GET', '/v1/edges');
      const e = res.body.items.find((x: { node_id: string }) => x.node_id === t.node.config.nodeId);
      return e?.compile_error_count > 0 ? e : undefined;
    });
    assert.deepEqual(edge.compile_errors, [{ endpoint: endpoint.uuid, version, error: 'routing rule 1 ("broken"), source_ip condition: "not-an-ip" is not an IP address or CIDR' }]);
    assert.ok(edge.version >= version, 'the edge applied the version; it just did not put the config in force');
    // The previous config keeps serving: the agent still answers.
    const reply = await visit(edgePort, endpoint.hostname, '/');
    assert.equal(reply.status, 200);
    assert.equal(reply.body, 'ok');
    assert.deepEqual(t.node.edge!.config.endpoint(endpoint.uuid), inForce);

    // A good config again clears it.
    await t.node.db!.transaction((tx) => recordChange(tx, 'endpoint', endpoint.uuid, inForce));
    await eventually(async () => {
      const res = await t.api('GET', '/v1/edges');
      const e = res.body.items.find((x: { node_id: string }) => x.node_id === t.node.config.nodeId);
      return e?.compile_error_count === 0 && e.compile_errors.length === 0 ? true : undefined;
    });
  });

  it('removes an idle ephemeral endpoint, and keeps one with a live agent and a promoted one', async () => {
    const user = await t.createUser('pro');
    const make = async () => (await t.api('POST', '/v1/admin/endpoints/ephemeral', { body: { user_id: user.id } })).body;
    const idle = await make();
    const served = await make();
    const promoted = await make();
    assert.equal((await t.api('POST', `/v1/endpoints/${promoted.uuid}/promote`, { key: user.api_key })).status, 200);
    // Age them past the idle window, as if created an hour ago.
    await t.node.db!.query("UPDATE endpoints SET created_at = now() - interval '1 hour', last_active_at = now() - interval '1 hour' WHERE uuid::text = ANY($1::text[])", [[idle.uuid, served.uuid, promoted.uuid]]);
    await eventually(async () => t.node.edge!.config.endpoint(served.uuid));
    await connect(user.api_key, served.uuid);
    await eventually(async () => ((await t.api('GET', `/v1/endpoints/${served.uuid}/tunnels`, { key: user.api_key })).body.items.length ? true : undefined));

    await t.node.janitor!.sweep();

    assert.equal((await t.api('GET', `/v1/endpoints/${idle.uuid}`, { key: user.api_key })).status, 404);
    const kept = await t.api('GET', `/v1/endpoints/${served.uuid}`, { key: user.api_key });
    assert.equal(kept.status, 200);
    assert.ok(kept.body.last_active_at, 'an ephemeral with a live agent has last_active_at stamped');
    assert.equal((await t.api('GET', `/v1/endpoints/${promoted.uuid}`, { key: user.api_key })).status, 200);
  });
});
