// The pipeline's first and last steps end to end on a running node: HTTPS enforcement redirects plain HTTP before
// anything is forwarded, and the capture hook sees every finished exchange, keeping details only with capture on.
// Then the pipeline's own guards, on an edge built from its parts: a stage that throws or rejects answers 500 and
// never ends the process; an upgrade request with a body is refused before any stage runs.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { STAGES } from '../../src/edge/compile.ts';
import { EndpointCache } from '../../src/edge/endpoint-cache.ts';
import type { StageFactory } from '../../src/edge/pipeline/stage.ts';
import type { EndpointConfig } from '../../src/shared/snapshot.ts';
import { endpointConfig } from '../helpers/endpoint-config.ts';
import { visit } from '../helpers/http.ts';
import { capturedLogger } from '../helpers/logger.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { closeServer, servePipeline, type PipelineEdge } from '../helpers/pipeline-edge.ts';

describe('pipeline: HTTPS enforcement and capture', () => {
  let t: TestNode;
  let origin: http.Server;
  let originUrl: string;
  const hits: string[] = [];

  before(async () => {
    t = await startTestNode({ EDGE_ORIGIN_ALLOW_PRIVATE: 'true' });
    origin = http.createServer((req, res) => {
      hits.push(`${req.method} ${req.url}`);
      req.resume();
      req.on('end', () => res.end('from origin'));
    });
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
    originUrl = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  });
  after(async () => {
    origin.closeAllConnections();
    origin.close();
    await t.close();
  });

  /** Resolves once the edge holds a config of `uuid` for which `ready` is true. */
  const applied = (uuid: string, ready: (c: EndpointConfig) => boolean) =>
    new Promise<void>((resolve) => {
      const check = () => {
        const c = t.node.edge!.config.endpoint(uuid);
        if (!c || !ready(c)) return;
        t.node.edge!.config.off('endpoint', check);
        resolve();
      };
      t.node.edge!.config.on('endpoint', check);
      check();
    });

  /** An endpoint forwarding to the test origin, HTTPS enforced through the settings API when asked. */
  async function originEndpoint(enforceHttps: boolean) {
    const user = await t.createUser('pro');
    const ep = (await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} })).body;
    assert.equal((await t.api('PUT', `/v1/endpoints/${ep.uuid}/origin`, { key: user.api_key, body: { url: originUrl } })).status, 200);
    if (enforceHttps) {
      const set = await t.api('PUT', `/v1/endpoints/${ep.uuid}/settings`, { key: user.api_key, body: { mode: 'none', enforce_https: true } });
      assert.equal(set.status, 200, set.text);
      assert.equal(set.body.enforce_https, true);
    }
    await applied(ep.uuid, (c) => c.origin_url !== null && c.enforce_https === enforceHttps);
    return { user, ep };
  }

  it('redirects plain HTTP to the HTTPS port, keeping path and query, and forwards nothing', async () => {
    const { ep } = await originEndpoint(true);
    const before = hits.length;
    const edge = t.node.edge!;

    const plain = await visit(edge.httpPort, ep.hostname, '/a/./b//c?x=1');
    assert.equal(plain.status, 301);
    assert.equal(plain.headers.location, `https://${ep.hostname}:${edge.httpsPort}/a/b/c?x=1`);
    const post = await visit(edge.httpPort, ep.hostname, '/form', { method: 'POST', body: 'secret=1' });
    assert.equal(post.status, 308);
    assert.equal(post.headers.location, `https://${ep.hostname}:${edge.httpsPort}/form`);
    assert.equal(hits.length, before, 'nothing reached the origin over plain HTTP');

    const secure = await visit(edge.httpsPort, ep.hostname, '/a/b/c?x=1', { secure: true });
    assert.equal(secure.status, 200);
    assert.equal(secure.body, 'from origin');
    assert.equal(hits.at(-1), 'GET /a/b/c?x=1');
  });

  it('serves plain HTTP on endpoints that do not enforce HTTPS', async () => {
    const { ep } = await originEndpoint(false);
    const res = await visit(t.node.edge!.httpPort, ep.hostname, '/plain');
    assert.equal(res.status, 200);
    assert.equal(res.body, 'from origin');
  });

  it('captures finished exchanges, including the edge\'s own answers, and only counts them with capture off', async () => {
    const { user, ep } = await originEndpoint(true);
    const edge = t.node.edge!;
    await visit(edge.httpPort, ep.hostname, '/redirected');
    await visit(edge.httpsPort, ep.hostname, '/served?q=2', { secure: true });
    const recent = edge.traffic.recent(ep.uuid);
    assert.deepEqual(
      recent.map((e) => [e.status, e.secure, e.path, e.query, e.completed]),
      [
        [200, true, '/served', 'q=2', true],
        [301, false, '/redirected', '', true],
      ],
    );
    assert.equal(recent[0].endpoint, ep.uuid);
    assert.equal(recent[0].host, ep.hostname);

    const off = await t.api('PUT', `/v1/endpoints/${ep.uuid}/settings/capture`, { key: user.api_key, body: { capture_enabled: false } });
    assert.equal(off.status, 200, off.text);
    await applied(ep.uuid, (c) => !c.capture_enabled);
    await visit(edge.httpsPort, ep.hostname, '/not-kept', { secure: true });
    assert.equal(edge.traffic.recent(ep.uuid).length, 2, 'no new details with capture off');
    assert.deepEqual(edge.traffic.counters(ep.uuid), { requests: 3, by_class: { '2xx': 2, '3xx': 1 }, edge_errors: {} });
  });
});

/** Writes `head` on a raw socket and resolves with everything read until the edge closes the connection. */
function rawExchange(port: number, head: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(head));
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (d) => (text += d));
    socket.on('close', () => resolve(text));
    socket.on('error', reject);
  });
}

function endpoint(uuid: string, hostname: string, extra: Partial<EndpointConfig> = {}): EndpointConfig {
  return endpointConfig({ uuid, hostname, ...extra });
}

describe('pipeline guards', () => {
  const { logger, lines: logged } = capturedLogger('error');
  /** A stage that fails on hosts named for it: throw.*, reject.*, late.* (throws after an earlier stage awaited). */
  const faulty: StageFactory = {
    id: 'faulty',
    healthProbe: 'runs',
    compile: (config) => ({
      name: 'faulty',
      run(ctx) {
        const kind = config.hostname.split('.')[0];
        if (kind === 'throw') throw new Error('a stage bug, thrown');
        if (kind === 'reject') return Promise.reject(new Error('a stage bug, rejected'));
        if (kind === 'late') return Promise.resolve().then(() => { throw new Error('a stage bug, thrown after an await'); });
        // Challenges like the one that once crashed the edge: a realm above U+00FF reaching setHeader.
        if (kind === 'realm') ctx.res.setHeader('www-authenticate', 'Basic realm="Zone €"');
        return 'next';
      },
    }),
  };
  let config: EndpointCache;
  let edge: PipelineEdge;
  let port: number;
  let origin: http.Server;
  const originHits: string[] = [];

  before(async () => {
    origin = http.createServer((req, res) => {
      originHits.push(`${req.method} ${req.url}`);
      req.resume();
      req.on('end', () => res.end('from origin'));
    });
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
    const originUrl = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
    config = new EndpointCache({ logger, stages: [faulty, ...STAGES] });
    edge = await servePipeline(config, { logger });
    port = edge.port;
    const names = ['throw', 'reject', 'late', 'realm', 'fine'];
    names.forEach((name, i) => config.mirror.apply({ version: i + 1, topic: 'endpoint', key: `u-${name}`, data: endpoint(`u-${name}`, `${name}.edge.localhost`, { origin_url: originUrl }) }));
  });
  after(async () => {
    await edge.close();
    await closeServer(origin);
  });

  it('a stage that throws does not crash the edge: a synchronous throw, a rejection, or a throw after an await answers 500 internal, logged, and the edge serves on', async () => {
    for (const kind of ['throw', 'reject', 'late', 'realm']) {
      logged.length = 0;
      const r = await visit(port, `${kind}.edge.localhost`, '/x', { headers: { accept: 'application/json' } });
      assert.equal(r.status, 500, `${kind}: ${r.body}`);
      assert.equal(JSON.parse(r.body).code, 'internal', kind);
      assert.equal(logged.length, 1, `${kind}: logged once`);
      assert.equal(logged[0].msg, 'the pipeline failed on a request; answering 500');
      assert.equal(logged[0].endpoint, `u-${kind}`);
      // The same through an upgrade: refused on its raw socket, never thrown out of the 'upgrade' listener.
      const upgrade = await rawExchange(port, `GET /ws HTTP/1.1\r\nHost: ${kind}.edge.localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`);
      assert.match(upgrade, /^HTTP\/1\.1 500 /, `${kind} upgrade`);
    }
    assert.deepEqual(originHits, [], 'nothing was forwarded');
    assert.equal((await visit(port, 'fine.edge.localhost', '/still')).body, 'from origin', 'the process serves on');
  });

  it('webhook verification bypassed with an upgrade: an upgrade request with a body is 400 malformed_request before any stage runs', async () => {
    const ws = 'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n';
    const before = originHits.length;
    for (const [name, framing] of [
      ['Content-Length', 'Content-Length: 34\r\n\r\n{"action":"deleted","forged":true}'],
      ['chunked', 'Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n'],
      ['chunked, empty', 'Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n'],
    ]) {
      // The "throw" host: its faulty stage would answer 500 if any stage ran.
      const text = await rawExchange(port, `GET /hook HTTP/1.1\r\nHost: throw.edge.localhost\r\nAccept: application/json\r\n${ws}${framing}`);
      assert.match(text, /^HTTP\/1\.1 400 /, `${name}: ${text.split('\r\n')[0]}`);
      assert.match(text, /x-edge-error: malformed_request/i, name);
      assert.match(text, /carries no body/, name);
    }
    assert.equal(originHits.length, before, 'nothing reached the origin');
    // Content-Length: 0 is no body: judged like any upgrade (here: the faulty stage's 500).
    assert.match(await rawExchange(port, `GET /hook HTTP/1.1\r\nHost: throw.edge.localhost\r\n${ws}Content-Length: 0\r\n\r\n`), /^HTTP\/1\.1 500 /);
  });
});
