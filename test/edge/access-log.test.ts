// The edge's access log (EDGE_ACCESS_LOG, src/edge/access-log.ts): a real node writing to a file, a real agent and
// service; one JSON line per request with the fields operators grep for: forwarded, refused by a stage, and refused
// before any endpoint was found.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import type { AccessLine } from '../../src/edge/access-log.ts';
import { loadConfig } from '../../src/shared/config.ts';
import { edgeCaughtUp, expectBody } from '../helpers/endpoint-api.ts';
import { eventually } from '../helpers/eventually.ts';
import { visit, wsUpgrade } from '../helpers/http.ts';
import { startEchoService, type Echoed, type LocalService } from '../helpers/local-service.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

describe('edge access log', () => {
  let dir: string;
  let file: string;
  let t: TestNode;
  let service: LocalService<Echoed>;
  let agent: Agent;
  let uuid: string;
  let host: string;
  let api: (method: string, path: string, body?: unknown, expect?: number) => Promise<any>;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'access-log-'));
    // A directory that does not exist yet: the log creates it.
    file = join(dir, 'logs', 'access.log');
    service = await startEchoService();
    t = await startTestNode({ EDGE_ACCESS_LOG: file });
    const user = await t.createUser('business');
    api = (method, path, body, expect = 200) => expectBody(expect, t.api(method, path, { key: user.api_key, body }), `${method} ${path}`);
    const e = await api('POST', '/v1/endpoints', {}, 201);
    uuid = e.uuid;
    host = e.hostname;
    await edgeCaughtUp(t);
    agent = await startAgent({ edgeUrl: `http://127.0.0.1:${t.node.edge!.httpPort}`, apiKey: user.api_key, endpoint: uuid, protocol: 'http', target: service.port, tracing: null });
  });
  after(async () => {
    await agent?.stop();
    await t?.close();
    await service?.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** The lines written so far, once one for `path` is there. */
  const lineFor = (path: string) =>
    eventually(async () => {
      const text = await readFile(file, 'utf8').catch(() => '');
      const lines = text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as AccessLine);
      return lines.find((l) => l.path === path);
    });

  it('off by default; a path, or stdout, when EDGE_ACCESS_LOG says so', () => {
    assert.equal(loadConfig({}).edge.accessLog, '');
    assert.equal(loadConfig({ EDGE_ACCESS_LOG: 'stdout' }).edge.accessLog, 'stdout');
  });

  it('a forwarded request: endpoint, host, method, path without the query, status, duration, bytes, client, decided_by forwarded, the visitor\'s trace id', async () => {
    const traceId = randomBytes(16).toString('hex');
    const r = await visit(t.node.edge!.httpPort, host, '/items/1?api_token=never-logged', { method: 'POST', body: 'hello', headers: { 'content-length': '5', traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` } });
    assert.equal(r.status, 200);
    const line = await lineFor('/items/1');
    assert.equal(line.endpoint, uuid);
    assert.equal(line.host, host);
    assert.equal(line.method, 'POST');
    assert.equal(line.status, 200);
    assert.equal(line.decided_by, 'forwarded');
    assert.equal(line.client, '127.0.0.1');
    assert.equal(line.bytes_in, 5);
    assert.ok(line.bytes_out > r.body.length, 'the head and body written');
    assert.equal(typeof line.duration_ms, 'number');
    assert.ok(!Number.isNaN(Date.parse(line.time)));
    assert.equal(line.trace_id, traceId);
    assert.equal(line.error, undefined);
    assert.ok(!(await readFile(file, 'utf8')).includes('never-logged'), 'no query string in the log');
  });

  it('a WebSocket upgrade: one line when its connection closes, status 101, the bytes both ways over it', async () => {
    const r = await wsUpgrade(t.node.edge!.httpPort, host, '/socket?token=not-in-the-log');
    assert.equal(r.status, 101);
    assert.equal(r.echo?.message, 'ping');
    const line = await lineFor('/socket');
    assert.equal(line.endpoint, uuid);
    assert.equal(line.method, 'GET');
    assert.equal(line.status, 101);
    assert.equal(line.decided_by, 'forwarded');
    assert.equal(line.error, undefined);
    // The visitor's frames (ping, close) in; the 101 head and the echo out.
    assert.ok(line.bytes_in >= 'ping'.length, `bytes in: ${line.bytes_in}`);
    assert.ok(line.bytes_out > 'HTTP/1.1 101 Switching Protocols\r\n'.length + JSON.stringify(r.echo).length, `bytes out: ${line.bytes_out}`);
  });

  it('a refused request: the stage that decided and the edge\'s error code; no trace id without a traceparent', async () => {
    await api('PUT', `/v1/endpoints/${uuid}/settings`, { mode: 'basic', basic_users: [{ username: 'alice', password: 'alice-password-1' }] });
    await edgeCaughtUp(t);
    const r = await visit(t.node.edge!.httpPort, host, '/refused', { headers: { authorization: `Basic ${Buffer.from('alice:wrong-secret-xyz').toString('base64')}` } });
    assert.equal(r.status, 401);
    const line = await lineFor('/refused');
    assert.equal(line.status, 401);
    assert.equal(line.decided_by, 'auth');
    assert.equal(line.error, 'invalid_credentials');
    assert.equal(line.trace_id, undefined);
    assert.ok(!(await readFile(file, 'utf8')).includes('wrong-secret-xyz'));
    // An upgrade the same stage refuses has its line too, with the refusal's status and code.
    const refusedUpgrade = await wsUpgrade(t.node.edge!.httpPort, host, '/refused-socket');
    assert.equal(refusedUpgrade.status, 401);
    const upgradeLine = await lineFor('/refused-socket');
    assert.equal(upgradeLine.status, 401);
    assert.equal(upgradeLine.decided_by, 'auth');
    assert.equal(upgradeLine.error, 'auth_required');
  });

  it('a request refused before an endpoint is found (an unknown host): a line with endpoint null, the host as sent, the edge\'s code', async () => {
    const traceId = randomBytes(16).toString('hex');
    const r = await visit(t.node.edge!.httpPort, 'nobody-here.example.net', '/unknown-host?token=never-logged-either', { headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` } });
    assert.equal(r.status, 404);
    const line = await lineFor('/unknown-host');
    assert.equal(line.endpoint, null);
    assert.equal(line.host, 'nobody-here.example.net');
    assert.equal(line.method, 'GET');
    assert.equal(line.status, 404);
    assert.equal(line.error, 'endpoint_not_found');
    assert.equal(line.decided_by, 'edge');
    assert.equal(line.client, '127.0.0.1');
    assert.ok(line.bytes_out > r.body.length, 'the head and body written');
    assert.equal(line.trace_id, traceId);
    assert.ok(!(await readFile(file, 'utf8')).includes('never-logged-either'), 'no query string in the log');
  });

  it('a malformed request (a Host that is not host[:port]) is logged as sent, cut to a bounded length', async () => {
    const badHost = `bad host ${'x'.repeat(2000)}`;
    const r = await visit(t.node.edge!.httpPort, badHost, '/malformed-host');
    assert.equal(r.status, 400);
    const line = await lineFor('/malformed-host');
    assert.equal(line.endpoint, null);
    assert.equal(line.error, 'malformed_request');
    assert.equal(line.status, 400);
    assert.ok(line.host.startsWith('bad host x') && line.host.length === 512, `host cut to 512 characters, got ${line.host.length}`);
  });
});
