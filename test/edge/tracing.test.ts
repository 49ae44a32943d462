// W3C Trace Context end to end (docs/operations.md "Traces"): a real node whose edge exports to a real OTLP/HTTP
// receiver, a real agent with its own tracer provider, a local service recording the traceparent it got; parentage
// visitor → edge → agent → service, stage events without credentials, malformed parents, and tracing off.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import { startTracing, type Tracing } from '../../src/shared/tracing.ts';
import { edgeCaughtUp, expectBody } from '../helpers/endpoint-api.ts';
import { visit, wsUpgrade } from '../helpers/http.ts';
import { startLocalService, type LocalService } from '../helpers/local-service.ts';
import { startTestNode } from '../helpers/node.ts';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.ts';

interface Seen {
  traceparent?: string;
  tracestate?: string;
}

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const SERVER = 2; // OTLP SpanKind SERVER

/** A node, a user and an agent in front of `service`; `tracing`: the agent's (null: off). */
async function stack(env: Record<string, string | undefined> | undefined, service: LocalService<Seen>, tracing: Tracing | null, logLines?: Record<string, unknown>[]) {
  // The origin test's service is on loopback.
  const t = await startTestNode({ EDGE_ORIGIN_ALLOW_PRIVATE: 'true' }, env === undefined ? {} : { otelEnv: env }, { logLines });
  const user = await t.createUser('business');
  const api = (method: string, path: string, body?: unknown, expect = 200) => expectBody(expect, t.api(method, path, { key: user.api_key, body }), `${method} ${path}`);
  const e = await api('POST', '/v1/endpoints', {}, 201);
  await edgeCaughtUp(t);
  const agent = await startAgent({ edgeUrl: `http://127.0.0.1:${t.node.edge!.httpPort}`, apiKey: user.api_key, endpoint: e.uuid, protocol: 'http', target: service.port, tracing });
  return { t, api, agent, uuid: e.uuid as string, host: e.hostname as string };
}

describe('tracing across visitor → edge → agent → service', () => {
  let receiver: OtlpReceiver;
  let service: LocalService<Seen>;
  let agentTracing: Tracing;
  let on: Awaited<ReturnType<typeof stack>>;
  let off: Awaited<ReturnType<typeof stack>> | undefined;
  const agents: Agent[] = [];
  /** The traced node's log, line by line. */
  const edgeLog: Record<string, unknown>[] = [];

  before(async () => {
    receiver = await startOtlpReceiver();
    service = await startLocalService<Seen>(
      (req, res, record) => {
        record({ traceparent: req.headers.traceparent as string | undefined, tracestate: req.headers.tracestate as string | undefined });
        req.resume();
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      },
      // A WebSocket echoes the message and the upgrade's headers (wsUpgrade reads the traceparent from them).
      (ws, req) => ws.on('message', (m) => ws.send(JSON.stringify({ message: String(m), headers: req.headers }))),
    );
    agentTracing = startTracing('agent', { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }, { 'edge.agent_id': 'traced' })!;
    on = await stack({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: 'edge-under-test' }, service, agentTracing, edgeLog);
    agents.push(on.agent);
  });
  after(async () => {
    for (const a of agents) await a.stop();
    await agentTracing?.shutdown();
    await on?.t.close();
    await off?.t.close();
    await service?.close();
    await receiver?.close();
  });

  const flush = async () => {
    await on.t.node.tracing!.forceFlush();
    await agentTracing.forceFlush();
  };
  const edgeSpanOf = (traceId: string) => receiver.waitFor((s) => s.traceId === traceId && s.resource['service.name'] === 'edge-under-test');
  const agentSpanOf = (traceId: string) => receiver.waitFor((s) => s.traceId === traceId && s.resource['service.name'] === 'edge-agent');

  it('the edge span is the visitor span\'s child, the agent span the edge span\'s, and the service sees the agent span as its parent', async () => {
    const traceId = hex(16);
    const visitorSpan = hex(8);
    const before = service.seen.length;
    const r = await visit(on.t.node.edge!.httpPort, on.host, '/orders/7?token=secret-query-value', { headers: { traceparent: `00-${traceId}-${visitorSpan}-01`, tracestate: 'vendor=abc' } });
    assert.equal(r.status, 200, r.body);
    const seen = service.seen[before];
    await flush();
    const edge = await edgeSpanOf(traceId);
    const agent = await agentSpanOf(traceId);
    assert.equal(edge.parentSpanId, visitorSpan);
    assert.equal(edge.kind, SERVER);
    assert.equal(agent.parentSpanId, edge.spanId);
    assert.equal(seen.traceparent, `00-${traceId}-${agent.spanId}-01`);
    assert.equal(seen.tracestate, 'vendor=abc', 'tracestate passes along');
    assert.equal(edge.attributes['edge.endpoint'], on.uuid);
    assert.equal(edge.attributes['server.address'], on.host);
    assert.equal(edge.attributes['http.request.method'], 'GET');
    assert.equal(edge.attributes['url.path'], '/orders/7');
    assert.equal(edge.attributes['http.response.status_code'], 200);
    assert.equal(edge.attributes['edge.decided_by'], 'forwarded');
    assert.equal(edge.attributes['client.address'], '127.0.0.1');
    assert.ok(Number(edge.attributes['edge.bytes_out']) > 0);
    assert.equal(edge.resource['edge.role'], 'node');
    assert.equal(agent.attributes['url.path'], '/orders/7');
    assert.equal(agent.resource['edge.agent_id'], 'traced');
    assert.ok(!receiver.bodies.some((b) => b.includes('secret-query-value')), 'no query string is exported');
  });

  it('a refused request: the deciding stage\'s event and the status, and the wrong credential appears nowhere', async () => {
    await on.api('PUT', `/v1/endpoints/${on.uuid}/settings`, { mode: 'basic', basic_users: [{ username: 'alice', password: 'alice-password-1' }] });
    await edgeCaughtUp(on.t);
    const traceId = hex(16);
    const password = `wrong-${hex(8)}`;
    const credential = Buffer.from(`alice:${password}`).toString('base64');
    const before = service.seen.length;
    const r = await visit(on.t.node.edge!.httpPort, on.host, '/', { headers: { traceparent: `00-${traceId}-${hex(8)}-01`, authorization: `Basic ${credential}`, cookie: `sid=${password}` } });
    assert.equal(r.status, 401);
    assert.equal(service.seen.length, before);
    await flush();
    const edge = await edgeSpanOf(traceId);
    assert.equal(edge.attributes['http.response.status_code'], 401);
    assert.equal(edge.attributes['edge.decided_by'], 'auth');
    assert.equal(edge.attributes['edge.error'], 'invalid_credentials');
    const event = edge.events.find((e) => e.attributes['edge.stage'] === 'auth');
    assert.deepEqual(event?.attributes, { 'edge.stage': 'auth', 'edge.outcome': 'refused', 'edge.error': 'invalid_credentials' });
    for (const body of receiver.bodies) {
      assert.ok(!body.includes(password) && !body.includes(credential), 'no credential in any export');
    }
    await on.api('PUT', `/v1/endpoints/${on.uuid}/settings`, { mode: 'none' });
    await edgeCaughtUp(on.t);
  });

  it('a WebSocket upgrade: a span for the connection\'s life, status 101, its traceparent carried to the service', async () => {
    const traceId = hex(16);
    const visitorSpan = hex(8);
    const r = await wsUpgrade(on.t.node.edge!.httpPort, on.host, '/socket', { headers: { traceparent: `00-${traceId}-${visitorSpan}-01` } });
    assert.equal(r.status, 101);
    await flush();
    const edge = await edgeSpanOf(traceId);
    assert.equal(edge.parentSpanId, visitorSpan);
    assert.equal(edge.attributes['http.response.status_code'], 101);
    assert.equal(edge.attributes['edge.decided_by'], 'forwarded');
    // The agent carries an upgrade's bytes without parsing them (no span of its own): the service sees the edge's.
    assert.equal(r.echo?.headers.traceparent, `00-${traceId}-${edge.spanId}-01`);
  });

  it('a request refused before an endpoint is found (an unknown host) still gets its span, child of the visitor\'s', async () => {
    const traceId = hex(16);
    const visitorSpan = hex(8);
    const r = await visit(on.t.node.edge!.httpPort, 'nobody-here.example.net', '/', { headers: { traceparent: `00-${traceId}-${visitorSpan}-01` } });
    assert.equal(r.status, 404);
    await flush();
    const edge = await edgeSpanOf(traceId);
    assert.equal(edge.parentSpanId, visitorSpan);
    assert.equal(edge.kind, SERVER);
    assert.equal(edge.name, 'GET edge');
    assert.equal(edge.attributes['http.response.status_code'], 404);
    assert.equal(edge.attributes['edge.error'], 'endpoint_not_found');
    assert.equal(edge.attributes['edge.decided_by'], 'edge');
    assert.equal(edge.attributes['edge.endpoint'], undefined);
  });

  it('a log line the edge writes while handling a traced request carries the request\'s trace id', async () => {
    // The JWT layer with a key set nobody serves: the stage logs why it answers 503 (after its fetch failed, so the
    // line is written from a callback the request started, not from the request's own call).
    const e = await on.api('POST', '/v1/endpoints', {}, 201);
    await on.api('PUT', `/v1/endpoints/${e.uuid}/settings/jwt`, { enabled: true, jwks_url: 'http://127.0.0.1:9/jwks.json' });
    await edgeCaughtUp(on.t);
    const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const token = `${b64({ alg: 'RS256', kid: 'k1' })}.${b64({ sub: 'visitor', exp: Math.floor(Date.now() / 1000) + 600 })}.${b64({ sig: 1 })}`;
    const traceId = hex(16);
    const r = await visit(on.t.node.edge!.httpPort, e.hostname, '/', { headers: { traceparent: `00-${traceId}-${hex(8)}-01`, authorization: `Bearer ${token}` } });
    assert.equal(r.status, 503, r.body);
    const line = edgeLog.find((l) => l.endpoint === e.uuid && String(l.msg).startsWith('JWT layer unavailable'));
    assert.ok(line, 'the JWT stage logged the unreachable key set');
    assert.equal(line.trace_id, traceId);
    // Lines written outside any request (startup, the feed) name no trace.
    assert.ok(edgeLog.some((l) => l.trace_id === undefined));
  });

  it('a malformed traceparent is ignored: a new trace starts at the edge', async () => {
    const bad = `00-${hex(16)}-${'0'.repeat(16)}-01`; // an all-zero parent id is invalid (W3C §3.2.2.4)
    const marker = `/malformed-${hex(4)}`;
    const before = service.seen.length;
    const r = await visit(on.t.node.edge!.httpPort, on.host, marker, { headers: { traceparent: bad } });
    assert.equal(r.status, 200);
    await flush();
    const edge = await receiver.waitFor((s) => s.attributes['url.path'] === marker && s.resource['service.name'] === 'edge-under-test');
    assert.equal(edge.parentSpanId, '');
    assert.notEqual(edge.traceId, bad.slice(3, 35));
    const agent = await agentSpanOf(edge.traceId);
    assert.equal(agent.parentSpanId, edge.spanId);
    assert.equal(service.seen[before].traceparent, `00-${edge.traceId}-${agent.spanId}-01`);
  });

  it('stage events: one per stage that ran, passed ones included', async () => {
    await on.api('PUT', `/v1/endpoints/${on.uuid}/settings`, { mode: 'basic', basic_users: [{ username: 'alice', password: 'alice-password-1' }] });
    await edgeCaughtUp(on.t);
    const traceId = hex(16);
    const r = await visit(on.t.node.edge!.httpPort, on.host, '/', { headers: { traceparent: `00-${traceId}-${hex(8)}-01`, authorization: `Basic ${Buffer.from('alice:alice-password-1').toString('base64')}` } });
    assert.equal(r.status, 200);
    await flush();
    const edge = await edgeSpanOf(traceId);
    assert.deepEqual(edge.events.find((e) => e.attributes['edge.stage'] === 'auth')?.attributes, { 'edge.stage': 'auth', 'edge.outcome': 'passed' });
    assert.ok(!receiver.bodies.some((b) => b.includes('alice-password-1')));
    await on.api('PUT', `/v1/endpoints/${on.uuid}/settings`, { mode: 'none' });
    await edgeCaughtUp(on.t);
  });

  it('an origin URL receives the edge span as its parent, tracestate carried on', async () => {
    const e = await on.api('POST', '/v1/endpoints', {}, 201);
    await on.api('PUT', `/v1/endpoints/${e.uuid}/origin`, { url: `http://127.0.0.1:${service.port}` });
    await edgeCaughtUp(on.t);
    const traceId = hex(16);
    const visitorSpan = hex(8);
    const before = service.seen.length;
    const r = await visit(on.t.node.edge!.httpPort, e.hostname, '/from-origin', { headers: { traceparent: `00-${traceId}-${visitorSpan}-01`, tracestate: 'vendor=xyz' } });
    assert.equal(r.status, 200, r.body);
    await flush();
    const edge = await edgeSpanOf(traceId);
    assert.equal(edge.parentSpanId, visitorSpan);
    assert.deepEqual(service.seen[before], { traceparent: `00-${traceId}-${edge.spanId}-01`, tracestate: 'vendor=xyz' });
  });

  it('tracing off (no endpoint set): nothing is created, and the visitor\'s traceparent reaches the service unchanged', async () => {
    off = await stack({}, service, null);
    agents.push(off.agent);
    assert.equal(off.t.node.tracing, undefined);
    const traceparent = `00-${hex(16)}-${hex(8)}-01`;
    const before = service.seen.length;
    const exportsBefore = receiver.bodies.length;
    const r = await visit(off.t.node.edge!.httpPort, off.host, '/', { headers: { traceparent, tracestate: 'v=1' } });
    assert.equal(r.status, 200);
    assert.deepEqual(service.seen[before], { traceparent, tracestate: 'v=1' });
    await flush();
    assert.ok(!receiver.bodies.slice(exportsBefore).some((b) => b.includes(traceparent.slice(3, 35))), 'no export names the untraced request');
  });
});
