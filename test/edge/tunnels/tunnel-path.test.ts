// Where agents connect (docs/tunnels.md "Where agents connect"): the tunnel path is not taken from endpoints. An
// endpoint's own /_edge/tunnel requests reach its service; agents still connect on both transports, with data connections.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { WebSocket } from 'ws';
import { startAgent, type Agent } from '../../../src/agent/agent.ts';
import { TUNNEL_PATH, TUNNEL_SUBPROTOCOL } from '../../../src/shared/tunnel/protocol.ts';
import { eventually } from '../../helpers/eventually.ts';
import { visit, wsUpgrade } from '../../helpers/http.ts';
import { startEchoService, type Echoed, type LocalService } from '../../helpers/local-service.ts';
import { startTestNode, type TestNode } from '../../helpers/node.ts';

/**
 * A WebSocket to the tunnel path that sends a hello with a key no account holds: resolves with the edge's first text
 * message (the tunnel server's `refused` frame when it took the upgrade), or the service's echo when it did not.
 */
function helloOver(port: number, host: string, protocols: string[], headers: Record<string, string> = {}): Promise<Record<string, unknown>> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}${TUNNEL_PATH}`, protocols, { headers: { host, ...headers } });
  return new Promise((resolve, reject) => {
    ws.on('open', () => ws.send(JSON.stringify({ type: 'hello', version: 1, api_key: 'not-a-key', protocol: 'http', agent_id: 'probe', tags: [], client: 'test' })));
    ws.on('message', (m) => {
      resolve(JSON.parse(String(m)));
      ws.terminate();
    });
    ws.on('unexpected-response', (_req, res) => reject(new Error(`upgrade answered ${res.statusCode}`)));
    ws.on('error', reject);
  });
}

describe('/_edge/tunnel is claimed on every hostname before the endpoint lookup (issue 20 item 6)', () => {
  let t: TestNode;
  let service: LocalService<Echoed>;
  let endpoint: { uuid: string; hostname: string };
  let port: number;
  const agents: Agent[] = [];

  before(async () => {
    t = await startTestNode();
    service = await startEchoService();
    const user = await t.createUser('pro');
    const created = await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} });
    assert.equal(created.status, 201);
    endpoint = created.body;
    port = t.node.edge!.httpPort;
    await eventually(async () => (t.node.edge!.config.endpoint(endpoint.uuid) ? true : undefined));
    const edgeUrl = `http://127.0.0.1:${port}`;
    for (const transport of ['raw', 'ws'] as const) {
      agents.push(await startAgent({ edgeUrl, apiKey: user.api_key, endpoint: endpoint.uuid, protocol: 'http', target: service.port, transport }));
    }
  });
  after(async () => {
    for (const a of agents) await a.stop();
    await service?.close();
    await t?.close();
  });

  it("an endpoint's service receives its own GET, POST and WebSocket to /_edge/tunnel", async () => {
    for (const method of ['GET', 'POST']) {
      const r = await visit(port, endpoint.hostname, `${TUNNEL_PATH}?from=${method}`, { method, body: method === 'POST' ? 'x=1' : undefined });
      assert.equal(r.status, 200, `${method}: ${r.body}`);
      const seen = JSON.parse(r.body) as Echoed;
      assert.deepEqual([seen.method, seen.url], [method, `${TUNNEL_PATH}?from=${method}`]);
    }
    // A plain WebSocket (no agent subprotocol, a browser's User-Agent) is the application's.
    const ws = await wsUpgrade(port, endpoint.hostname, TUNNEL_PATH, { headers: { 'user-agent': 'Mozilla/5.0' } });
    assert.equal(ws.status, 101);
    assert.equal(ws.echo?.message, 'ping');
    // So is any other upgrade token: it reaches the pipeline, not the tunnel server's WebSocket answer.
    const other = await visit(port, endpoint.hostname, TUNNEL_PATH, { headers: { connection: 'Upgrade', upgrade: 'h2c' } });
    assert.notEqual(other.status, 101);
  });

  it('agents still connect: raw with data connections and WebSocket, and serve the endpoint', async () => {
    const [raw, ws] = agents;
    assert.equal(raw.transport, 'raw');
    assert.equal(ws.transport, 'ws');
    await eventually(async () => ((raw.dataConnections?.open ?? 0) > 0 ? true : undefined));
    for (let i = 0; i < 4; i++) assert.equal((await visit(port, endpoint.hostname, '/hello')).status, 200);
  });

  it('an agent WebSocket is claimed by its subprotocol on any host, and without it on the edge own name or from a previous-release agent', async () => {
    const refused = { type: 'refused', code: 'unauthorized' };
    const pick = (m: Record<string, unknown>) => ({ type: m.type, code: m.code });
    assert.deepEqual(pick(await helloOver(port, endpoint.hostname, [TUNNEL_SUBPROTOCOL])), refused, 'subprotocol on an endpoint host');
    assert.deepEqual(pick(await helloOver(port, `127.0.0.1:${port}`, [])), refused, 'the edge own address, no subprotocol');
    assert.deepEqual(pick(await helloOver(port, 'edge.unknown.test', [])), refused, 'a host no endpoint has');
    assert.deepEqual(pick(await helloOver(port, endpoint.hostname, [], { 'user-agent': 'edge-agent node/20.0.0' })), refused, 'previous-release agent, for one release');
    // The same hello without any of these goes to the endpoint's service, which echoes it.
    const echoed = await helloOver(port, endpoint.hostname, []);
    assert.equal(JSON.parse(String(echoed.message)).type, 'hello');
  });
});
