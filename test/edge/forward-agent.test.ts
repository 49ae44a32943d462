// forwardToAgent between a real visitor socket and a real agent: what the local service receives (headers, bodies,
// aborts) and what the visitor gets back, including visitors that leave halfway through an upload or a download.
import { describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { WebSocket } from 'ws';
import { startAgent } from '../../src/agent/agent.ts';
import { forwardToAgent } from '../../src/edge/forward/agent.ts';
import { TunnelRegistry } from '../../src/edge/tunnels/registry.ts';
import { TunnelServer } from '../../src/edge/tunnels/tunnel-server.ts';
import { PROTOCOL_VERSION, TUNNEL_PATH } from '../../src/shared/tunnel/protocol.ts';
import { eventually } from '../helpers/eventually.ts';

const HOST = 'app.edge.test';

async function listen(server: net.Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as net.AddressInfo).port;
}

function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  bytes: number;
  /** 'complete' once the body ended normally, 'aborted' if the connection went first. */
  outcome: 'pending' | 'complete' | 'aborted';
}

/** The local service: records every request, answers by path. */
async function startLocal(t: TestContext) {
  const seen: Seen[] = [];
  let unfinished = 0;
  const server = http.createServer((req, res) => {
    const entry: Seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, bytes: 0, outcome: 'pending' };
    seen.push(entry);
    req.on('data', (chunk: Buffer) => (entry.bytes += chunk.length));
    req.on('end', () => (entry.outcome = 'complete'));
    req.on('close', () => {
      if (entry.outcome === 'pending') entry.outcome = 'aborted';
    });
    res.on('close', () => {
      if (!res.writableFinished) unfinished++;
    });
    const path = new URL(req.url ?? '/', 'http://local').pathname;
    if (path === '/upload') return void req.on('end', () => res.end(`got ${entry.bytes}`));
    if (path === '/endless') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      return void res.write(Buffer.alloc(64 * 1024));
    }
    if (path === '/status/204') return void res.writeHead(204).end();
    if (path === '/headers') {
      res.setHeader('set-cookie', ['a=1; Path=/', 'b=2; Path=/']);
      res.setHeader('content-type', 'text/plain');
      res.setHeader('x-local', 'yes');
      res.setHeader('keep-alive', 'timeout=5');
      res.statusCode = 201;
      return void res.end('created');
    }
    if (path === '/trailers') {
      res.setHeader('trailer', 'x-sum');
      res.write('body');
      res.addTrailers({ 'x-sum': '4' });
      return void res.end();
    }
    req.resume();
    res.end('ok');
  });
  const port = await listen(server);
  t.after(() => closeServer(server));
  return {
    port,
    seen,
    get unfinished() {
      return unfinished;
    },
  };
}

/** An edge whose every request goes to the endpoint's agent through forwardToAgent (no agent yet: 503). */
async function startBareEdge(t: TestContext) {
  const endpoint = { uuid: randomUUID(), hostname: HOST, public_url: `http://${HOST}` };
  const registry = new TunnelRegistry();
  const tunnels = new TunnelServer({ authorize: async () => ({ ok: true, endpoint }), registry, region: 'local', node: 'edge-test' });
  const server = http.createServer((req, res) => {
    const session = registry.pick(endpoint.uuid);
    if (session === null) return void res.writeHead(503).end();
    void forwardToAgent(session, { req, res, method: req.method ?? 'GET', target: req.url ?? '/', clientIp: '198.51.100.9', secure: false, host: HOST, authority: req.headers.host ?? HOST, extra: {} });
  });
  tunnels.attach(server);
  const port = await listen(server);
  t.after(async () => {
    await tunnels.close(1_000);
    await closeServer(server);
  });
  return { port, endpoint, registry };
}

/** An edge whose every request goes to the endpoint's agent through forwardToAgent, and that agent. */
async function startEdge(t: TestContext, localPort: number) {
  const { port, endpoint } = await startBareEdge(t);
  const agent = await startAgent({ edgeUrl: `http://127.0.0.1:${port}`, apiKey: 'key', endpoint: endpoint.uuid, protocol: 'http', target: localPort });
  // Registered before the edge's own teardown, so it runs after it... and stops first (t.after runs in reverse).
  t.after(() => agent.stop(1_000));
  return port;
}

/** One HTTP/2 frame (RFC 9113 §4.1). */
function h2Frame(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(stream, 5);
  return Buffer.concat([head, payload]);
}

/**
 * A hostile agent: the tunnel handshake, then raw HTTP/2 frames, so it can send what Node's HTTP/2 server refuses to
 * (any digits in `:status`). It answers the edge's SETTINGS and PINGs, and every request with a HEADERS frame whose
 * `:status` is the next of `statuses` (HPACK: literal without indexing, name index 8, `:status`), then, for a 2xx, a
 * DATA frame `ok` ending the stream; other answers leave the stream open, as a body still to come would. Records
 * the streams the edge reset (RST_STREAM).
 */
async function startRawAgent(t: TestContext, port: number, endpoint: string, statuses: string[]) {
  const ws = new WebSocket(`ws://127.0.0.1:${port}${TUNNEL_PATH}`);
  t.after(() => ws.terminate());
  const reset: number[] = [];
  let welcomed = false;
  let preface = false;
  let buffered = Buffer.alloc(0);
  const welcome = new Promise<void>((resolve, reject) => {
    ws.on('error', reject);
    // One listener from the start: the edge's HTTP/2 preface may come in the same read as the welcome.
    ws.on('message', (data: Buffer, isBinary) => {
      if (!welcomed) {
        assert.equal(isBinary, false);
        assert.equal(JSON.parse(String(data)).type, 'welcome');
        welcomed = true;
        ws.send(h2Frame(4, 0, 0)); // the server's SETTINGS, empty
        return resolve();
      }
      buffered = Buffer.concat([buffered, data]);
      if (!preface) {
        if (buffered.length < 24) return;
        buffered = buffered.subarray(24);
        preface = true;
      }
      while (buffered.length >= 9) {
        const length = buffered.readUIntBE(0, 3);
        if (buffered.length < 9 + length) break;
        const [type, flags] = [buffered[3], buffered[4]];
        const stream = buffered.readUInt32BE(5) & 0x7fffffff;
        const payload = buffered.subarray(9, 9 + length);
        buffered = buffered.subarray(9 + length);
        if (type === 4 && (flags & 1) === 0) ws.send(h2Frame(4, 1, 0));
        else if (type === 6 && (flags & 1) === 0) ws.send(h2Frame(6, 1, 0, payload));
        else if (type === 3) reset.push(stream);
        else if (type === 1) {
          const status = Buffer.from(statuses.shift() ?? '200');
          ws.send(h2Frame(1, 0x4 /* END_HEADERS */, stream, Buffer.concat([Buffer.from([0x08, status.length]), status])));
          if (status[0] === 0x32 /* 2 */) ws.send(h2Frame(0, 0x1 /* END_STREAM */, stream, Buffer.from('ok')));
        }
      }
    });
  });
  await once(ws, 'open');
  ws.send(JSON.stringify({ type: 'hello', version: PROTOCOL_VERSION, api_key: 'key', endpoint, protocol: 'http', agent_id: 'raw-h2', tags: [], client: 'raw-h2-test' }));
  await welcome;
  return { reset };
}

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
  trailers: NodeJS.Dict<string>;
}

function visit(port: number, method: string, path: string, headers: http.OutgoingHttpHeaders = {}, body?: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request({ port, host: '127.0.0.1', method, path, headers: { host: HOST, ...headers }, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, rawHeaders: res.rawHeaders, body: text, trailers: res.trailers }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('forwardToAgent', () => {
  it('sends a bodyless request with the edge fields and no hop-by-hop ones', async (t) => {
    const local = await startLocal(t);
    const port = await startEdge(t, local.port);
    const reply = await visit(port, 'GET', '/page?q=1', {
      connection: 'keep-alive, x-hop',
      'x-hop': 'secret',
      'keep-alive': 'timeout=5',
      'x-forwarded-for': '10.9.9.9',
      cookie: 'a=1',
    });
    assert.equal(reply.status, 200);
    const [seen] = local.seen;
    assert.equal(seen.method, 'GET');
    assert.equal(seen.url, '/page?q=1');
    assert.equal(seen.headers.host, HOST);
    assert.equal(seen.headers['x-forwarded-for'], '198.51.100.9');
    assert.equal(seen.headers['x-forwarded-proto'], 'http');
    assert.equal(seen.headers['x-forwarded-host'], HOST);
    assert.equal(seen.headers.cookie, 'a=1');
    assert.equal(seen.headers['x-hop'], undefined);
    assert.equal(seen.headers['keep-alive'], undefined);
    // Nothing says a body follows: the local request is bodyless too.
    assert.equal(seen.headers['content-length'], undefined);
    assert.equal(seen.headers['transfer-encoding'], undefined);
    assert.equal(seen.outcome, 'complete');
  });

  it('streams request bodies, sized and chunked, to the local service whole', async (t) => {
    const local = await startLocal(t);
    const port = await startEdge(t, local.port);
    const body = 'x'.repeat(100_000);
    assert.equal((await visit(port, 'POST', '/upload', { 'content-length': body.length }, body)).body, `got ${body.length}`);
    assert.equal((await visit(port, 'PUT', '/upload', { 'transfer-encoding': 'chunked' }, body)).body, `got ${body.length}`);
    assert.equal((await visit(port, 'POST', '/upload', { 'content-length': 0 })).body, 'got 0');
    assert.deepEqual(
      local.seen.map((s) => s.outcome),
      ['complete', 'complete', 'complete'],
    );
  });

  it('carries the response status, fields, repeated set-cookie and trailers back, without hop-by-hop fields', async (t) => {
    const local = await startLocal(t);
    const port = await startEdge(t, local.port);
    const reply = await visit(port, 'GET', '/headers');
    assert.equal(reply.status, 201);
    assert.equal(reply.body, 'created');
    assert.deepEqual(reply.headers['set-cookie'], ['a=1; Path=/', 'b=2; Path=/']);
    assert.equal(reply.headers['content-type'], 'text/plain');
    assert.equal(reply.headers['x-local'], 'yes');
    // The local service's keep-alive was for its own hop; what the visitor gets is the edge's.
    assert.notEqual(reply.headers['keep-alive'], 'timeout=5');
    assert.ok(!reply.rawHeaders.some((name) => name.startsWith(':')));
    assert.equal((await visit(port, 'GET', '/status/204')).status, 204);
    const withTrailers = await visit(port, 'GET', '/trailers');
    assert.equal(withTrailers.body, 'body');
    assert.equal(withTrailers.trailers['x-sum'], '4');
  });

  it('a visitor leaving in the middle of a chunked upload leaves the local request aborted, not complete', async (t) => {
    const local = await startLocal(t);
    const port = await startEdge(t, local.port);
    const socket = net.connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.write(`POST /upload HTTP/1.1\r\nhost: ${HOST}\r\ntransfer-encoding: chunked\r\n\r\n1000\r\n${'u'.repeat(0x1000)}\r\n`);
    await eventually(async () => (local.seen[0]?.bytes === 0x1000 ? true : undefined));
    socket.destroy();
    await eventually(async () => (local.seen[0].outcome !== 'pending' ? true : undefined));
    assert.equal(local.seen[0].outcome, 'aborted');
  });

  it('an agent :status below 100 crashes the edge: an answer with no final status is 502 agent_error and its stream reset', async (t) => {
    const { port, endpoint, registry } = await startBareEdge(t);
    const agent = await startRawAgent(t, port, endpoint.uuid, ['099', '200', '600', '999', '000', '201']);
    await eventually(async () => (registry.pick(endpoint.uuid) !== null ? true : undefined));
    const bad = await visit(port, 'GET', '/a', { accept: 'application/json' });
    assert.equal(bad.status, 502, bad.body);
    assert.equal(JSON.parse(bad.body).code, 'agent_error');
    assert.match(JSON.parse(bad.body).detail, /:status 99 is not a final status/);
    const good = await visit(port, 'GET', '/b');
    assert.deepEqual([good.status, good.body], [200, 'ok'], 'the edge serves on, on the same tunnel');
    for (const path of ['/c', '/d', '/e']) {
      const reply = await visit(port, 'GET', path, { accept: 'application/json' });
      assert.equal(reply.status, 502, `${path}: ${reply.body}`);
    }
    assert.equal((await visit(port, 'GET', '/f')).status, 201);
    // The refused answers' streams were reset, so the agent stops sending on them (1, 5, 7, 9: the edge's streams
    // are odd, one per request, in order).
    await eventually(async () => (agent.reset.length === 4 ? true : undefined));
    assert.deepEqual(agent.reset, [1, 5, 7, 9]);
  });

  it('a visitor leaving in the middle of a download stops the local response', async (t) => {
    const local = await startLocal(t);
    const port = await startEdge(t, local.port);
    const req = http.request({ port, host: '127.0.0.1', path: '/endless', headers: { host: HOST }, agent: false });
    req.end();
    const [res] = (await once(req, 'response')) as [http.IncomingMessage];
    await once(res, 'data');
    req.destroy();
    await eventually(async () => (local.unfinished === 1 ? true : undefined));
  });
});
