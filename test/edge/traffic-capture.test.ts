// Traffic capture end to end in the real program: visitors' requests through a real agent to a local service are
// shipped by the edge (a Redis Stream with REDIS_URL, in-process otherwise) and written by the worker: rows in
// traffic_logs where capture is on (full: redacted headers and bodies; metadata: neither), none where it is off,
// while usage counts every exchange whatever the setting.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import { endpointUsage } from '../../src/store/traffic.ts';
import { createEndpoint, edgeCaughtUp, expectBody, type User } from '../helpers/endpoint-api.ts';
import { eventually } from '../helpers/eventually.ts';
import { visit } from '../helpers/http.ts';
import { startLocalService, type LocalService } from '../helpers/local-service.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

interface Row {
  id: string;
  method: string;
  path: string;
  query: string;
  status_code: number;
  host: string;
  endpoint_uuid: string;
  endpoint_name: string;
  edge_node: string;
  region: string;
  source_ip: string;
  user_agent: string;
  bytes_in: string;
  capture_level: string;
  request_headers: Record<string, string> | null;
  response_headers: Record<string, string> | null;
  request_body: Uint8Array | null;
  response_body: Uint8Array | null;
}

describe('traffic capture, edge to store', () => {
  let t: TestNode;
  let user: User;
  let service: LocalService<string>;
  const agents: Agent[] = [];
  const endpoints: Record<'full' | 'metadata' | 'off', { uuid: string; hostname: string }> = {} as never;

  before(async () => {
    // Answers with the status the path asks for (/status/503), echoing the request body.
    service = await startLocalService<string>((req, res, record) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        record(`${req.method} ${req.url}`);
        const status = /^\/status\/(\d{3})/.exec(req.url ?? '')?.[1];
        res.writeHead(status ? Number(status) : 200, { 'content-type': 'text/plain', 'set-cookie': 'session=abc', 'x-service': 'local' });
        res.end(Buffer.concat([Buffer.from('echo:'), ...chunks]));
      });
    }, () => {});
    t = await startTestNode({ EDGE_CAPTURE_REDACT_HEADERS: 'X-Internal-Token', EDGE_REGION: 'eu-test' });
    user = await t.createUser('pro');
    for (const level of ['full', 'metadata', 'off'] as const) {
      const endpoint = await createEndpoint(t, user);
      endpoints[level] = endpoint;
      // Metadata is the default (capture on, no level stored): that endpoint keeps it; the others are set as a user would.
      if (level !== 'metadata') {
        const body = level === 'off' ? { capture_enabled: false, capture_level: 'off' } : { capture_enabled: true, capture_level: 'full' };
        await expectBody(200, t.api('PUT', `/v1/endpoints/${endpoint.uuid}/settings/capture`, { key: user.api_key, body }));
      }
    }
    await edgeCaughtUp(t);
    const edgeUrl = `http://127.0.0.1:${t.node.edge!.httpPort}`;
    for (const e of Object.values(endpoints)) {
      agents.push(await startAgent({ edgeUrl, apiKey: user.api_key, endpoint: e.uuid, protocol: 'http', target: service.port }));
    }
  });
  after(async () => {
    for (const a of agents) await a.stop();
    await t?.close();
    await service?.close();
  });

  const rows = async (endpoint: { uuid: string }) =>
    (await t.node.db!.query<Row>('SELECT * FROM traffic_logs WHERE endpoint_uuid = $1 ORDER BY id', [endpoint.uuid])).rows;
  const rowsWhenThere = (endpoint: { uuid: string }, n: number) =>
    eventually(async () => {
      const r = await rows(endpoint);
      return r.length >= n ? r : undefined;
    });

  it('full capture: a row with the exchange, redacted headers and both bodies', async () => {
    const { hostname } = endpoints.full;
    const res = await visit(t.node.edge!.httpPort, hostname, '/orders?page=2', {
      method: 'POST',
      body: '{"item":42}',
      headers: { 'content-type': 'application/json', authorization: 'Bearer secret-token', cookie: 'sid=s', 'x-internal-token': 'abc', 'user-agent': 'capture-test/1' },
    });
    assert.equal(res.status, 200);
    assert.equal(res.body, 'echo:{"item":42}');
    const [row] = await rowsWhenThere(endpoints.full, 1);
    assert.equal(row.method, 'POST');
    assert.equal(row.path, '/orders');
    assert.equal(row.query, 'page=2');
    assert.equal(row.status_code, 200);
    assert.equal(row.host, hostname);
    assert.equal(row.endpoint_name, hostname.split('.')[0]);
    assert.equal(row.edge_node, t.node.config.nodeId);
    assert.equal(row.region, 'eu-test');
    assert.equal(row.source_ip, '127.0.0.1');
    assert.equal(row.user_agent, 'capture-test/1');
    assert.equal(Number(row.bytes_in), 11);
    assert.equal(row.capture_level, 'full');
    assert.equal(row.request_headers!.authorization, '[redacted]');
    assert.equal(row.request_headers!.cookie, '[redacted]');
    assert.equal(row.request_headers!['x-internal-token'], '[redacted]');
    assert.equal(row.request_headers!['content-type'], 'application/json');
    assert.equal(row.response_headers!['set-cookie'], '[redacted]');
    assert.equal(row.response_headers!['x-service'], 'local');
    assert.equal(Buffer.from(row.request_body!).toString(), '{"item":42}');
    assert.equal(Buffer.from(row.response_body!).toString(), 'echo:{"item":42}');
  });

  it('metadata capture (the default): the exchange without headers or bodies; an upstream error is a row too', async () => {
    const res = await visit(t.node.edge!.httpPort, endpoints.metadata.hostname, '/status/503', { method: 'PUT', body: 'x', headers: { authorization: 'Basic eA==' } });
    assert.equal(res.status, 503);
    const [row] = await rowsWhenThere(endpoints.metadata, 1);
    assert.equal(row.status_code, 503);
    assert.equal(row.capture_level, 'metadata');
    assert.equal(row.request_headers, null);
    assert.equal(row.response_headers, null);
    assert.equal(row.request_body, null);
    assert.equal(row.response_body, null);
  });

  it('capture off: no rows, while usage still counts every exchange; capture on counts too', async () => {
    for (const path of ['/a', '/status/404', '/status/500']) await visit(t.node.edge!.httpPort, endpoints.off.hostname, path);
    // A full-capture request sent after them: once its row is written, rows of the requests before it would be too
    // (one edge, one stream, one worker, in order).
    const before = (await rows(endpoints.full)).length;
    await visit(t.node.edge!.httpPort, endpoints.full.hostname, '/marker');
    await rowsWhenThere(endpoints.full, before + 1);
    assert.deepEqual(await rows(endpoints.off), []);
    assert.equal(service.seen.filter((s) => s.startsWith('GET /status/') || s === 'GET /a').length, 3, 'the service was reached');

    // Usage is sent every ~2 s: wait for it, no sleep.
    const [day] = await eventually(async () => {
      const usage = await endpointUsage(t.node.db!, endpoints.off.uuid);
      return usage.length > 0 && usage[0].requests >= 3 ? usage : undefined;
    });
    assert.equal(day.requests, 3);
    assert.equal(day.errors_4xx, 1);
    assert.equal(day.errors_5xx, 1);
    assert.ok(day.bytes_out > 0);
    const full = await eventually(async () => {
      const usage = await endpointUsage(t.node.db!, endpoints.full.uuid);
      return usage.length > 0 && usage[0].requests >= before + 1 ? usage : undefined;
    });
    assert.equal(full[0].requests, before + 1);
    const { rows: minutes } = await t.node.db!.query<{ requests: string }>('SELECT requests FROM endpoint_traffic_minutely WHERE endpoint_uuid = $1', [endpoints.off.uuid]);
    assert.equal(minutes.reduce((n, m) => n + Number(m.requests), 0), 3, 'the per-minute rollup agrees');

    // The edge's ops port: exchanges shipped, none dropped.
    const metrics = await (await fetch(`http://127.0.0.1:${t.node.edge!.opsPort}/metrics`)).text();
    assert.match(metrics, /^edge_capture_shipped_total [1-9]/m);
    assert.match(metrics, /^edge_capture_dropped_total 0$/m);
  });
});
