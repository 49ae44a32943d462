// The edge's internal ops port end to end: the real program, a real agent and service, visitors on the public
// listener. Liveness, readiness, the edge's own metrics as they move, and that none of it is on the public port.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import { TrafficRecorder } from '../../src/edge/capture.ts';
import { EdgeMetrics, FeedProgress } from '../../src/edge/metrics.ts';
import { OpsServer } from '../../src/edge/ops.ts';
import { loadConfig } from '../../src/shared/config.ts';
import { createLogger } from '../../src/shared/log.ts';
import { startNode, type NodeHandle } from '../../src/main.ts';
import { eventually } from '../helpers/eventually.ts';
import { visit, type Reply } from '../helpers/http.ts';
import { sample, samples } from '../helpers/metrics.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

/** One request to an ops port on loopback. */
function ops(port: number, path: string, method = 'GET'): Promise<Reply> {
  return visit(port, '127.0.0.1', path, { method });
}

/** A raw request on a fresh socket, for heads a client library would fix up; resolves with the whole answer. */
function raw(port: number, head: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(head));
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (d) => (text += d));
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
  });
}

/** A local service; `/spoof` answers 502 with an X-Edge-Error header of its own, as any upstream could. */
async function startService(): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    if (req.url === '/spoof') {
      res.writeHead(502, { 'x-edge-error': 'no_agent' });
      return res.end('upstream says so');
    }
    res.end('ok');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe('OpsServer', () => {
  async function serve(readiness: Record<string, () => boolean>, tunnels: () => number = () => 0): Promise<{ port: number; server: OpsServer }> {
    const metrics = new EdgeMetrics({ traffic: new TrafficRecorder(), tunnels, feed: new FeedProgress(), endpointLimit: 10 });
    const server = new OpsServer({ metrics, readiness, logger: createLogger('silent') });
    return { port: await server.listen(0, '127.0.0.1'), server };
  }

  it('answers /readyz 503 naming the check that fails, a throwing check counting as failed', async () => {
    const { port, server } = await serve({
      config: () => false,
      listeners: () => true,
      feed: () => {
        throw new Error('broken probe');
      },
    });
    try {
      const res = await ops(port, '/readyz');
      assert.equal(res.status, 503);
      assert.deepEqual(JSON.parse(res.body), { status: 'not_ready', checks: { config: false, listeners: true, feed: false } });
      assert.equal((await ops(port, '/healthz')).status, 200);
    } finally {
      await server.close();
    }
  });

  it('answers /metrics 500 internal when collecting fails, and keeps serving', async () => {
    let broken = true;
    const { port, server } = await serve({}, () => {
      if (broken) throw new Error('registry gone');
      return 2;
    });
    try {
      const res = await ops(port, '/metrics');
      assert.equal(res.status, 500);
      assert.equal(JSON.parse(res.body).code, 'internal');
      broken = false;
      const ok = await ops(port, '/metrics');
      assert.equal(ok.status, 200);
      assert.match(String(ok.headers['content-type']), /^text\/plain/);
      assert.equal(sample(ok.body, 'edge_tunnels'), 2);
    } finally {
      await server.close();
    }
  });

  it('closes with a scraper connection still open', async () => {
    const { port, server } = await serve({});
    const keptAlive = new http.Agent({ keepAlive: true });
    try {
      const res = await new Promise<http.IncomingMessage>((resolve, reject) => http.get({ host: '127.0.0.1', port, path: '/healthz', agent: keptAlive }, resolve).on('error', reject));
      res.resume();
      await new Promise((r) => res.on('end', r));
      await server.close();
      await assert.rejects(ops(port, '/healthz'));
    } finally {
      keptAlive.destroy();
    }
  });
});

describe('edge ops port (all roles in one process)', () => {
  let t: TestNode;
  let service: Awaited<ReturnType<typeof startService>>;
  let user: { api_key: string };
  let endpoint: { uuid: string; hostname: string };
  let agent: Agent | undefined;
  let opsPort: number;
  let httpPort: number;

  async function createEndpoint(): Promise<{ uuid: string; hostname: string }> {
    const created = await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} });
    assert.equal(created.status, 201);
    const edge = t.node.edge!;
    await eventually(async () => (edge.config.endpoint(created.body.uuid) ? true : undefined));
    return created.body;
  }

  const scrape = async () => (await ops(opsPort, '/metrics')).body;

  before(async () => {
    t = await startTestNode();
    service = await startService();
    user = await t.createUser('pro');
    endpoint = await createEndpoint();
    opsPort = t.node.edge!.opsPort;
    httpPort = t.node.edge!.httpPort;
    agent = await startAgent({ edgeUrl: `http://127.0.0.1:${httpPort}`, apiKey: user.api_key, endpoint: endpoint.uuid, protocol: 'http', target: service.port });
  });
  after(async () => {
    await agent?.stop();
    await service?.close();
    await t?.close();
  });

  it('listens on its own port, apart from the public and control ports', () => {
    assert.ok(opsPort > 0);
    assert.ok(![httpPort, t.node.edge!.httpsPort, t.node.control!.port].includes(opsPort));
  });

  it('answers /healthz', async () => {
    const res = await ops(opsPort, '/healthz');
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(res.body), { status: 'ok' });
    const head = await ops(opsPort, '/healthz', 'HEAD');
    assert.equal(head.status, 200);
    assert.equal(head.body, '');
  });

  it('answers /readyz 200 with each check listed once a config is applied and the listeners are bound', async () => {
    const res = await ops(opsPort, '/readyz');
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(res.body), { status: 'ready', checks: { config: true, listeners: true } });
  });

  it('answers anything else with 404 route_not_found', async () => {
    for (const [method, path] of [
      ['GET', '/'],
      ['GET', '/metrics/x'],
      ['GET', '/v1/endpoints'],
      ['POST', '/metrics'],
      ['DELETE', '/healthz'],
    ]) {
      const res = await ops(opsPort, path, method);
      assert.equal(res.status, 404, `${method} ${path}`);
      assert.equal(JSON.parse(res.body).code, 'route_not_found');
    }
    assert.equal((await ops(opsPort, '/healthz?verbose=1')).status, 200);
  });

  it('counts the live tunnel of a connected agent', async () => {
    assert.equal(sample(await scrape(), 'edge_tunnels'), 1);
  });

  it('counts a forwarded request for its endpoint by status class', async () => {
    const before = sample(await scrape(), 'edge_node_requests_total', { class: '2xx' }) ?? 0;
    const res = await visit(httpPort, endpoint.hostname, '/hello');
    assert.equal(res.status, 200);
    // The exchange is counted when its response closes on the edge, which may be just after the visitor has it.
    const text = await eventually(async () => {
      const text = await scrape();
      return sample(text, 'edge_requests_total', { endpoint: endpoint.uuid, class: '2xx' }) === 1 ? text : undefined;
    });
    assert.equal(sample(text, 'edge_node_requests_total', { class: '2xx' }), before + 1);
  });

  it('counts an unknown host under edge_errors_total only, and the public listener does not serve /metrics', async () => {
    const before = await scrape();
    const res = await visit(httpPort, 'nobody.edge.localhost', '/metrics');
    assert.equal(res.status, 404);
    assert.equal(res.headers['x-edge-error'], 'endpoint_not_found');
    assert.match(res.body, /No endpoint is configured for this hostname/);
    assert.doesNotMatch(res.body, /edge_requests_total|process_cpu/);
    for (const path of ['/healthz', '/readyz']) assert.equal((await visit(httpPort, 'nobody.edge.localhost', path)).headers['x-edge-error'], 'endpoint_not_found');

    // The refusal is counted before the handler returns: no waiting needed.
    const after = await scrape();
    assert.equal(sample(after, 'edge_errors_total', { code: 'endpoint_not_found' }), (sample(before, 'edge_errors_total', { code: 'endpoint_not_found' }) ?? 0) + 3);
    assert.equal(sample(after, 'edge_node_requests_total', { class: '4xx' }), (sample(before, 'edge_node_requests_total', { class: '4xx' }) ?? 0) + 3);
    // No endpoint series names the unknown host, and none was added for it.
    assert.deepEqual(
      samples(after, 'edge_requests_total').map((s) => s.labels.endpoint).filter((e) => e !== endpoint.uuid),
      samples(before, 'edge_requests_total').map((s) => s.labels.endpoint).filter((e) => e !== endpoint.uuid),
    );
  });

  it('counts a request with no Host (HTTP/1.0, raw) as malformed_request', async () => {
    const before = sample(await scrape(), 'edge_errors_total', { code: 'malformed_request' }) ?? 0;
    const answer = await raw(httpPort, 'GET /metrics HTTP/1.0\r\n\r\n');
    assert.match(answer, /^HTTP\/1\.[01] 400 /);
    assert.doesNotMatch(answer, /edge_requests_total/);
    assert.equal(sample(await scrape(), 'edge_errors_total', { code: 'malformed_request' }), before + 1);
  });

  it('counts no_agent for a known endpoint once, under its endpoint and under edge_errors_total', async () => {
    const lonely = await createEndpoint();
    const before = sample(await scrape(), 'edge_errors_total', { code: 'no_agent' }) ?? 0;
    const res = await visit(httpPort, lonely.hostname, '/');
    assert.equal(res.status, 502);
    assert.equal(res.headers['x-edge-error'], 'no_agent');
    const text = await eventually(async () => {
      const text = await scrape();
      return sample(text, 'edge_requests_total', { endpoint: lonely.uuid, class: '5xx' }) === 1 ? text : undefined;
    });
    // Refused synchronously after capture was armed: counted by capture, not a second time as a refusal.
    assert.equal(sample(text, 'edge_errors_total', { code: 'no_agent' }), before + 1);
  });

  it("does not count an upstream's own X-Edge-Error header as an edge error", async () => {
    const before = sample(await scrape(), 'edge_errors_total', { code: 'no_agent' }) ?? 0;
    const res = await visit(httpPort, endpoint.hostname, '/spoof');
    assert.equal(res.status, 502);
    assert.equal(res.body, 'upstream says so');
    const text = await eventually(async () => {
      const text = await scrape();
      return sample(text, 'edge_requests_total', { endpoint: endpoint.uuid, class: '5xx' }) === 1 ? text : undefined;
    });
    assert.equal(sample(text, 'edge_errors_total', { code: 'no_agent' }), before);
  });

  it('reports the applied config version, following a change through the feed', async () => {
    const edge = t.node.edge!;
    let text = await scrape();
    assert.equal(sample(text, 'edge_config_version'), edge.subscriber.version);
    assert.ok(edge.subscriber.version > 0);
    const previous = edge.subscriber.version;
    await createEndpoint();
    await eventually(async () => (edge.subscriber.version > previous ? true : undefined));
    text = await scrape();
    assert.equal(sample(text, 'edge_config_version'), edge.subscriber.version);
    assert.ok((sample(text, 'edge_feed_head_version') ?? 0) >= edge.subscriber.version);
    assert.ok((sample(text, 'edge_config_last_applied_timestamp_seconds') ?? 0) > 0);
    // Caught up: the head the edge has seen is what it serves.
    text = await eventually(async () => {
      const text = await scrape();
      return sample(text, 'edge_feed_lag_versions') === 0 ? text : undefined;
    });
    assert.equal(sample(text, 'edge_feed_lag_seconds'), 0);
  });

  it('counts slow-client closes by kind', async () => {
    const before = await scrape();
    t.node.edge!.metrics.slowClientClosed('headers');
    const text = await scrape();
    assert.equal(sample(text, 'edge_slow_client_closes_total', { kind: 'headers' }), (sample(before, 'edge_slow_client_closes_total', { kind: 'headers' }) ?? 0) + 1);
    assert.equal(sample(text, 'edge_slow_client_closes_total', { kind: 'body' }), sample(before, 'edge_slow_client_closes_total', { kind: 'body' }));
  });

  it('keeps the control API metrics on the control port and the edge metrics on the ops port', async () => {
    const edgeText = await scrape();
    assert.ok(samples(edgeText, 'edge_data_process_cpu_seconds_total').length > 0);
    assert.equal(samples(edgeText, 'edge_control_requests_total').length, 0);
    const control = await (await fetch(`${t.controlUrl}/metrics`)).text();
    assert.ok(samples(control, 'edge_control_process_cpu_seconds_total').length > 0);
    assert.equal(samples(control, 'edge_tunnels').length, 0);
  });

  it('counts the tunnel gone once the agent stops', async () => {
    await agent!.stop();
    agent = undefined;
    await eventually(async () => (sample(await scrape(), 'edge_tunnels') === 0 ? true : undefined));
  });
});

describe('edge ops port on an edge-only node', { skip: process.env.REDIS_URL ? false : 'an edge-only node needs REDIS_URL (set it to run this part)' }, () => {
  let control: TestNode;
  let edge: NodeHandle;
  let dataDir: string;

  before(async () => {
    const secretKey = randomBytes(24).toString('hex');
    control = await startTestNode({ EDGE_ROLE: 'control', EDGE_SECRET_KEY: secretKey });
    dataDir = await mkdtemp(join(tmpdir(), 'edge-ops-'));
    const config = loadConfig({
      ...control.env,
      EDGE_ROLE: 'edge',
      EDGE_DATA_DIR: dataDir,
      EDGE_NODE_ID: `edge-ops-${randomBytes(3).toString('hex')}`,
      EDGE_CONTROL_URL: control.controlUrl,
    });
    edge = await startNode(config, createLogger(config.logLevel));
  });
  after(async () => {
    await edge?.close();
    await control?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('serves /healthz, /readyz and /metrics with the version the control plane published', async () => {
    assert.equal(edge.control, undefined);
    const opsPort = edge.edge!.opsPort;
    assert.equal((await ops(opsPort, '/healthz')).status, 200);
    const user = await control.createUser('pro');
    const created = await control.api('POST', '/v1/endpoints', { key: user.api_key, body: {} });
    assert.equal(created.status, 201);

    // The edge reports the control plane's latest version in GET /v1/edges; its own metrics say the same.
    const version = await eventually(async () => {
      const res = await control.api('GET', '/v1/edges');
      const mine = res.body.items.find((e: { node_id: string }) => e.node_id === edge.config.nodeId);
      return mine?.in_sync ? (res.body.version as number) : undefined;
    });
    const ready = await ops(opsPort, '/readyz');
    assert.equal(ready.status, 200);
    assert.deepEqual(JSON.parse(ready.body).checks, { config: true, listeners: true });
    const text = (await ops(opsPort, '/metrics')).body;
    assert.equal(sample(text, 'edge_config_version'), version);
    assert.equal(sample(text, 'edge_feed_lag_versions'), 0);
    assert.equal(sample(text, 'edge_tunnels'), 0);

    const res = await visit(edge.edge!.httpPort, 'nobody.edge.localhost', '/metrics');
    assert.equal(res.headers['x-edge-error'], 'endpoint_not_found');
    assert.equal(sample((await ops(opsPort, '/metrics')).body, 'edge_errors_total', { code: 'endpoint_not_found' }), 1);
  });
});
