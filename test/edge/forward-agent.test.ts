// forwardToAgent between a real visitor socket and a real agent, on each path a request can take (a data connection,
// an HTTP/2 stream on the raw transport, one over WebSocket): what the local service receives (headers, bodies,
// aborts) and what the visitor gets back, including visitors that leave halfway through an upload or a download.
import { describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { WebSocket } from 'ws';
import { startAgent, type Agent, type AgentOptions } from '../../src/agent/agent.ts';
import type { TunnelServerOptions } from '../../src/edge/tunnels/tunnel-server.ts';
import { PROTOCOL_VERSION, TUNNEL_PATH } from '../../src/shared/tunnel/protocol.ts';
import { eventually } from '../helpers/eventually.ts';
import { startForwardingEdge } from '../helpers/forwarding-edge.ts';

const HOST = 'app.edge.test';
/** Over 64 KiB, so bodies span many socket reads, HTTP/2 DATA frames and flow-control windows. */
const BIG_BODY = randomBytes(300 * 1024 + 7);

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/**
 * The three paths a request to an agent can take: a data connection (raw transport, the default), an HTTP/2 stream
 * on the raw transport (an agent that offers no data connections), an HTTP/2 stream carried in WebSocket messages.
 */
const MODES = [
  { name: 'data connections', agent: { transport: 'raw' }, data: true },
  { name: 'raw HTTP/2 streams', agent: { transport: 'raw', dataConnections: 0 }, data: false },
  { name: 'WebSocket HTTP/2 streams', agent: { transport: 'ws' }, data: false },
] as const satisfies ReadonlyArray<{ name: string; agent: Partial<AgentOptions>; data: boolean }>;
type Mode = (typeof MODES)[number];

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
    if (path === '/echo') {
      // Streams the request body back as it comes, and its digest as a trailer once it ended.
      const hash = createHash('sha256');
      res.writeHead(200, { 'content-type': 'application/octet-stream', trailer: 'x-request-sha256' });
      req.on('data', (chunk: Buffer) => {
        hash.update(chunk);
        res.write(chunk);
      });
      return void req.on('end', () => {
        res.addTrailers({ 'x-request-sha256': hash.digest('hex') });
        res.end();
      });
    }
    if (path === '/big') {
      // A chunked body of BIG_BYTES, its digest and length in trailers after the last chunk.
      res.writeHead(200, { 'content-type': 'application/octet-stream', trailer: 'x-sha256, x-length' });
      res.write(BIG_BODY.subarray(0, 1000));
      res.write(BIG_BODY.subarray(1000));
      res.addTrailers({ 'x-sha256': sha256(BIG_BODY), 'x-length': String(BIG_BODY.length) });
      return void res.end();
    }
    if (path === '/truncated') {
      // Promises 100 bytes, sends 10, then ends the connection (a FIN, as a crashing service's kernel would send).
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '100' });
      return void res.write('x'.repeat(10), () => res.socket?.end());
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
function startBareEdge(t: TestContext, options: Partial<TunnelServerOptions> = {}) {
  return startForwardingEdge(t, HOST, options);
}

/**
 * An edge whose every request goes to the endpoint's agent through forwardToAgent, and that agent, in `mode`. With
 * data connections, it returns once the agent's spares are all at the edge, so the first request finds one.
 */
async function startEdge(t: TestContext, localPort: number, mode: Mode, agentOptions: Partial<AgentOptions> = {}, edgeOptions: Partial<TunnelServerOptions> = {}) {
  const { port, endpoint, registry } = await startBareEdge(t, edgeOptions);
  const agent = await startAgent({ edgeUrl: `http://127.0.0.1:${port}`, apiKey: 'key', endpoint: endpoint.uuid, protocol: 'http', target: localPort, ...mode.agent, ...agentOptions });
  // t.after hooks run in the order they were added: the edge closes first, and this finds the tunnel down.
  t.after(() => agent.stop(1_000));
  assert.equal(agent.transport, mode.agent.transport);
  if (mode.data) {
    const spares = Math.min(agentOptions.dataConnections ?? 8, edgeOptions.maxDataConnections ?? 128);
    await eventually(async () => {
      const session = registry.pick(endpoint.uuid);
      return agent.dataConnections?.idle === spares && session?.data?.size === spares ? true : undefined;
    });
  } else assert.equal(agent.dataConnections, null);
  return { port, agent, registry, endpoint };
}

/**
 * That the exchanges so far took the mode's path: with data connections, at least one spare was taken (a taken
 * connection stays open, spliced, beside the spares the agent dialled to replace it); otherwise the agent has none.
 */
function assertPath(agent: Agent, mode: Mode): void {
  if (!mode.data) return assert.equal(agent.dataConnections, null);
  const data = agent.dataConnections;
  assert.ok(data !== null && data.open > data.idle, `a data connection was taken: ${JSON.stringify(data)}`);
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

interface BinaryReply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  trailers: NodeJS.Dict<string>;
  /** Whether the response ended as its framing said it would; false when the connection went first. */
  complete: boolean;
}

/** A visit that resolves whatever happens to the response: complete, or cut (then `complete` is false). */
function visitBinary(port: number, method: string, path: string, headers: http.OutgoingHttpHeaders = {}, body?: Buffer): Promise<BinaryReply> {
  return new Promise((resolve, reject) => {
    const req = http.request({ port, host: '127.0.0.1', method, path, headers: { host: HOST, ...headers }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', () => {}); // 'aborted': reported by `complete`
      res.once('close', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), trailers: res.trailers, complete: res.complete }),
      );
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A free loopback port: listened on, then closed, so a connection to it is refused. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  const port = await listen(server);
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * A local service that closes each connection right after its response, without saying so (no `Connection: close`,
 * no Keep-Alive hint): whoever keeps the connection for the next request may send it on a connection already gone.
 */
async function startClosingLocal(t: TestContext) {
  let requests = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    let buffered = '';
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('latin1');
      if (!buffered.includes('\r\n\r\n')) return;
      requests++;
      socket.end('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok');
    });
  });
  const port = await listen(server);
  t.after(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return {
    port,
    get requests() {
      return requests;
    },
  };
}

for (const mode of MODES) describe(`forwardToAgent over ${mode.name}`, () => {
  it('sends a bodyless request with the edge fields and no hop-by-hop ones', async (t) => {
    const local = await startLocal(t);
    const { port, agent } = await startEdge(t, local.port, mode);
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
    assertPath(agent, mode);
  });

  it('streams request bodies, sized and chunked, to the local service whole', async (t) => {
    const local = await startLocal(t);
    const { port, agent } = await startEdge(t, local.port, mode);
    const body = 'x'.repeat(100_000);
    assert.equal((await visit(port, 'POST', '/upload', { 'content-length': body.length }, body)).body, `got ${body.length}`);
    assert.equal((await visit(port, 'PUT', '/upload', { 'transfer-encoding': 'chunked' }, body)).body, `got ${body.length}`);
    assert.equal((await visit(port, 'POST', '/upload', { 'content-length': 0 })).body, 'got 0');
    assert.deepEqual(
      local.seen.map((s) => s.outcome),
      ['complete', 'complete', 'complete'],
    );
    assertPath(agent, mode);
  });

  it('carries the response status, fields, repeated set-cookie and trailers back, without hop-by-hop fields', async (t) => {
    const local = await startLocal(t);
    const { port, agent } = await startEdge(t, local.port, mode);
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
    assertPath(agent, mode);
  });

  it('a visitor leaving in the middle of a chunked upload leaves the local request aborted, not complete', async (t) => {
    const local = await startLocal(t);
    const { port, agent } = await startEdge(t, local.port, mode);
    const socket = net.connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.write(`POST /upload HTTP/1.1\r\nhost: ${HOST}\r\ntransfer-encoding: chunked\r\n\r\n1000\r\n${'u'.repeat(0x1000)}\r\n`);
    await eventually(async () => (local.seen[0]?.bytes === 0x1000 ? true : undefined));
    // Checked while the exchange is on: the connection the visitor's abort cuts is replaced by a new spare.
    assertPath(agent, mode);
    socket.destroy();
    await eventually(async () => (local.seen[0].outcome !== 'pending' ? true : undefined));
    assert.equal(local.seen[0].outcome, 'aborted');
  });

  it('a visitor leaving in the middle of a download stops the local response', async (t) => {
    const local = await startLocal(t);
    const { port, agent } = await startEdge(t, local.port, mode);
    const req = http.request({ port, host: '127.0.0.1', path: '/endless', headers: { host: HOST }, agent: false });
    req.end();
    const [res] = (await once(req, 'response')) as [http.IncomingMessage];
    await once(res, 'data');
    assertPath(agent, mode);
    req.destroy();
    await eventually(async () => (local.unfinished === 1 ? true : undefined));
  });

  it('Expect: 100-continue: the edge answers 100 itself, and the local service gets the body without Expect', async (t) => {
    const local = await startLocal(t);
    const { port, agent } = await startEdge(t, local.port, mode);
    const body = 'e'.repeat(2000);
    const reply = await new Promise<Reply>((resolve, reject) => {
      const req = http.request({ port, host: '127.0.0.1', method: 'POST', path: '/upload', agent: false, headers: { host: HOST, expect: '100-continue', 'content-length': body.length } }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, rawHeaders: res.rawHeaders, body: text, trailers: res.trailers }));
      });
      req.on('error', reject);
      // The body goes only after the edge's 100 Continue: a visitor that waits for it is not left waiting.
      req.once('continue', () => req.end(body));
    });
    assert.deepEqual([reply.status, reply.body], [200, `got ${body.length}`]);
    assert.equal(local.seen[0].headers.expect, undefined);
    assertPath(agent, mode);
  });

  it('a request with both Content-Length and Transfer-Encoding is a 400 from the edge; nothing reaches the local service', async (t) => {
    const local = await startLocal(t);
    const { port } = await startEdge(t, local.port, mode);
    const socket = net.connect(port, '127.0.0.1');
    t.after(() => socket.destroy());
    await once(socket, 'connect');
    socket.write(`POST /upload HTTP/1.1\r\nhost: ${HOST}\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nhost: ${HOST}\r\n\r\n`);
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    await once(socket, 'close');
    assert.match(answer, /^HTTP\/1\.1 400 /);
    assert.equal(local.seen.length, 0);
  });

  it('carries bodies over 64 KiB both ways intact, and trailers after them', async (t) => {
    const local = await startLocal(t);
    const { port, agent } = await startEdge(t, local.port, mode);
    const up = await visitBinary(port, 'POST', '/echo', { 'content-type': 'application/octet-stream', 'content-length': BIG_BODY.length }, BIG_BODY);
    assert.equal(up.status, 200);
    assert.ok(up.complete);
    assert.equal(up.body.length, BIG_BODY.length);
    assert.equal(sha256(up.body), sha256(BIG_BODY));
    assert.equal(up.trailers['x-request-sha256'], sha256(BIG_BODY), 'the local service read the body whole');
    const down = await visitBinary(port, 'GET', '/big');
    assert.ok(down.complete);
    assert.equal(down.body.length, BIG_BODY.length);
    assert.equal(sha256(down.body), sha256(BIG_BODY));
    assert.deepEqual([down.trailers['x-sha256'], down.trailers['x-length']], [sha256(BIG_BODY), String(BIG_BODY.length)]);
    assert.deepEqual(
      local.seen.map((s) => [s.outcome, s.bytes]),
      [
        ['complete', BIG_BODY.length],
        ['complete', 0],
      ],
    );
    assertPath(agent, mode);
  });

  it('a local response cut short (less than its Content-Length, then a close) reaches the visitor cut short, not complete', async (t) => {
    const local = await startLocal(t);
    const { port, agent } = await startEdge(t, local.port, mode);
    const cut = await visitBinary(port, 'GET', '/truncated');
    assert.equal(cut.status, 200);
    assert.equal(cut.complete, false);
    assert.ok(cut.body.length <= 10, `${cut.body.length} bytes`);
    // The edge and the agent serve on.
    const next = await visit(port, 'GET', '/after');
    assert.deepEqual([next.status, next.body], [200, 'ok']);
    assertPath(agent, mode);
  });

  it('a local service that closes kept-alive connections between requests never fails the next GET', async (t) => {
    // Node's server with a 1 ms keep-alive timeout (its Keep-Alive hint says 0 s), every third answer `Connection: close`.
    let served = 0;
    const server = http.createServer((req, res) => {
      req.resume();
      if (++served % 3 === 0) res.setHeader('connection', 'close');
      res.end(`ok ${served}`);
    });
    server.keepAliveTimeout = 1;
    const quick = await listen(server);
    t.after(() => closeServer(server));
    // And one that closes each connection after its answer without a word, so a reused connection may be gone.
    const closing = await startClosingLocal(t);
    for (const local of [quick, closing.port]) {
      const { port, agent } = await startEdge(t, local, mode);
      for (let i = 0; i < 30; i++) {
        const reply = await visit(port, 'GET', `/n/${i}`);
        assert.equal(reply.status, 200, `request ${i} to :${local}: ${reply.body}`);
        assert.match(reply.body, /^ok/);
      }
      assertPath(agent, mode);
    }
    assert.ok(served >= 30);
    assert.ok(closing.requests >= 30);
  });

  it('--host-header (hostHeader) is the Host the local service sees; the visitor\'s stays in X-Forwarded-Host', async (t) => {
    const local = await startLocal(t);
    const { port, agent } = await startEdge(t, local.port, mode, { hostHeader: 'local.internal:8080' });
    assert.equal((await visit(port, 'GET', '/page')).status, 200);
    const body = 'b'.repeat(1000);
    assert.equal((await visit(port, 'POST', '/upload', { 'content-length': body.length }, body)).body, 'got 1000');
    assert.deepEqual(
      local.seen.map((s) => [s.headers.host, s.headers['x-forwarded-host']]),
      [
        ['local.internal:8080', HOST],
        ['local.internal:8080', HOST],
      ],
    );
    assertPath(agent, mode);
  });

  it('a local service that refuses connections: 502 from the agent, x-edge-agent-error local_unreachable and why', async (t) => {
    const target = await closedPort();
    const { port, agent } = await startEdge(t, target, mode);
    const get = await visit(port, 'GET', '/page');
    // A request with a body too: the agent reads it and drops it, so the answer is not lost to a reset.
    const body = 'p'.repeat(200_000);
    const post = await visit(port, 'POST', '/upload', { 'content-length': body.length }, body);
    for (const reply of [get, post]) {
      assert.equal(reply.status, 502);
      assert.equal(reply.headers['x-edge-agent-error'], 'local_unreachable');
      assert.match(reply.headers['content-type'] ?? '', /^text\/plain/);
      assert.match(reply.body, new RegExp(`^The agent could not reach http://localhost:${target}: connect ECONNREFUSED`));
    }
    assertPath(agent, mode);
  });
});

describe('forwardToAgent, a hostile agent', () => {
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
});

describe('forwardToAgent over data connections, visitors leaving', () => {
  it('a visitor leaving mid-upload or mid-download frees its data connection on both sides: the counts go back to the spares', async (t) => {
    const local = await startLocal(t);
    const { port, agent, registry, endpoint } = await startEdge(t, local.port, MODES[0], { dataConnections: 2 });
    const data = registry.pick(endpoint.uuid)!.data!;
    const upload = net.connect(port, '127.0.0.1');
    upload.on('error', () => {});
    await once(upload, 'connect');
    upload.write(`POST /upload HTTP/1.1\r\nhost: ${HOST}\r\ntransfer-encoding: chunked\r\n\r\n10\r\n${'u'.repeat(16)}\r\n`);
    const download = http.request({ port, host: '127.0.0.1', path: '/endless', headers: { host: HOST }, agent: false });
    download.on('error', () => {});
    download.end();
    const [res] = (await once(download, 'response')) as [http.IncomingMessage];
    await once(res, 'data');
    await eventually(async () => (local.seen.length === 2 && local.seen[0].bytes === 16 ? true : undefined));
    // Both on data connections (taken, each replaced by a new spare), none on an HTTP/2 stream.
    assert.equal(registry.pick(endpoint.uuid)!.activeStreams, 0);
    await eventually(async () => (agent.dataConnections?.open === 4 && data.size === 4 ? true : undefined));
    upload.destroy();
    download.destroy();
    // The local service saw the upload aborted, and both its responses cut short (neither finished).
    await eventually(async () => (local.seen[0].outcome === 'aborted' && local.unfinished === 2 ? true : undefined));
    await eventually(async () => (agent.dataConnections?.open === 2 && agent.dataConnections.idle === 2 && data.size === 2 ? true : undefined));
    assert.equal(data.hasCapacity(), true);
    assert.equal((await visit(port, 'GET', '/after')).body, 'ok');
    assert.equal(data.exchanges, 3);
  });
});

describe('forwardToAgent over data connections, beyond the free ones', () => {
  it('40 concurrent requests with 2 spares and at most 4 data connections all succeed, the rest over HTTP/2 streams', async (t) => {
    const COUNT = 40;
    // Holds every request until all of them arrived, so they are all in flight at once.
    const held: http.ServerResponse[] = [];
    const server = http.createServer((req, res) => {
      req.resume();
      held.push(res);
    });
    const localPort = await listen(server);
    t.after(() => closeServer(server));
    const { port, agent, registry, endpoint } = await startEdge(t, localPort, MODES[0], { dataConnections: 2 }, { maxDataConnections: 4 });
    const replies = Array.from({ length: COUNT }, (_, i) => visit(port, 'GET', `/held/${i}`));
    await eventually(async () => (held.length === COUNT ? true : undefined));
    // Every request is in flight: the ones on HTTP/2 streams are the session's open streams, the rest data connections.
    const session = registry.pick(endpoint.uuid)!;
    const streams = session.activeStreams;
    assert.ok(streams >= COUNT - 4 && streams < COUNT, `${streams} of ${COUNT} on HTTP/2 streams`);
    assert.ok(session.data!.size <= 4);
    for (const [i, res] of held.entries()) res.end(`ok ${new URL(res.req.url ?? '/', 'http://local').pathname} ${i}`);
    for (const [i, reply] of (await Promise.all(replies)).entries()) {
      assert.equal(reply.status, 200, `request ${i}: ${reply.body}`);
      assert.match(reply.body, new RegExp(`^ok /held/${i} `));
    }
    assertPath(agent, MODES[0]);
    // The agent dials spares up to the edge's max, never beyond it.
    assert.ok(agent.dataConnections!.open <= 4);
  });
});

