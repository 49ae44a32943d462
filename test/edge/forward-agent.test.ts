// forwardToAgent between a real visitor socket and a real agent: what the local service receives (headers, bodies,
// aborts) and what the visitor gets back, including visitors that leave halfway through an upload or a download.
import { describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { startAgent } from '../../src/agent/agent.ts';
import { forwardToAgent } from '../../src/edge/forward/agent.ts';
import { TunnelRegistry } from '../../src/edge/tunnels/registry.ts';
import { TunnelServer } from '../../src/edge/tunnels/tunnel-server.ts';
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

/** An edge whose every request goes to the endpoint's agent through forwardToAgent, and that agent. */
async function startEdge(t: TestContext, localPort: number) {
  const endpoint = { uuid: randomUUID(), hostname: HOST, public_url: `http://${HOST}` };
  const registry = new TunnelRegistry();
  const tunnels = new TunnelServer({ authorize: async () => ({ ok: true, endpoint }), registry, region: 'local', node: 'edge-test' });
  const server = http.createServer((req, res) => {
    const session = registry.pick(endpoint.uuid);
    assert.ok(session);
    void forwardToAgent(session, { req, res, method: req.method ?? 'GET', target: req.url ?? '/', clientIp: '198.51.100.9', secure: false, host: HOST, authority: req.headers.host ?? HOST, extra: {} });
  });
  tunnels.attach(server);
  const port = await listen(server);
  const agent = await startAgent({ edgeUrl: `http://127.0.0.1:${port}`, apiKey: 'key', endpoint: endpoint.uuid, protocol: 'http', target: localPort });
  t.after(async () => {
    await agent.stop(1_000);
    await tunnels.close(1_000);
    await closeServer(server);
  });
  return port;
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
