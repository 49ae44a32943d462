// The tunnel end to end on real sockets: an edge http.Server with the TunnelServer attached, real agents from
// startAgent, real upstream HTTP, TCP and UDP services. Requests go through the registry as the edge pipeline will.
import { describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { createCipheriv, createHash, randomBytes, randomUUID, type Hash } from 'node:crypto';
import dgram from 'node:dgram';
import { once } from 'node:events';
import http from 'node:http';
import https from 'node:https';
import type { ClientHttp2Stream, IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import net from 'node:net';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { WebSocket, WebSocketServer } from 'ws';
import { Agent, TunnelRefusedError, startAgent, type AgentOptions } from '../../../src/agent/agent.ts';
import { TunnelRegistry, type AgentSession, type DisconnectReason } from '../../../src/edge/tunnels/registry.ts';
import { TunnelServer, type Authorize } from '../../../src/edge/tunnels/tunnel-server.ts';
import { DatagramDecoder, encodeDatagram } from '../../../src/shared/tunnel/datagram.ts';
import { TUNNEL_PATH, type TunnelEndpoint } from '../../../src/shared/tunnel/protocol.ts';
import type { KeepaliveOptions } from '../../../src/shared/tunnel/transport.ts';
import { RAW_UPGRADE_TOKEN, TUNNEL_TRANSPORTS as TRANSPORTS, encodeHandshakeFrame, readHandshakeFrame, type FrameResult, type TunnelTransport } from '../../../src/shared/tunnel/raw.ts';
import { Backoff } from '../../../src/agent/backoff.ts';
import { parseTarget } from '../../../src/agent/target.ts';
import { tunnelUrl } from '../../../src/agent/agent.ts';
import { createSelfSigned } from '../../helpers/certs.ts';
import { eventually } from '../../helpers/eventually.ts';
import { forwardToAgent } from '../../../src/edge/forward/agent.ts';

/** Generous, so a slow CI machine does not fail a correct test; a hang still fails. */
const WAIT_MS = 20_000;
const BIG = 64 * 1024 * 1024;
const CHUNK = 64 * 1024;

interface Emitter {
  on(event: string, listener: (...args: never[]) => void): unknown;
  off(event: string, listener: (...args: never[]) => void): unknown;
}

/** The arguments of the next `event` that satisfies `accept`; rejects after WAIT_MS. */
function nextEvent<T extends unknown[]>(emitter: Emitter, event: string, accept: (...args: T) => boolean = () => true): Promise<T> {
  return new Promise((resolve, reject) => {
    const listener = (...args: T) => {
      if (!accept(...args)) return;
      clearTimeout(timer);
      emitter.off(event, listener as never);
      resolve(args);
    };
    const timer = setTimeout(() => {
      emitter.off(event, listener as never);
      reject(new Error(`no '${event}' event within ${WAIT_MS} ms`));
    }, WAIT_MS);
    emitter.on(event, listener as never);
  });
}

async function listen(server: net.Server, port = 0): Promise<number> {
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as net.AddressInfo).port;
}

function closeServer(server: net.Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

/** Deterministic bytes generated on the fly (AES-CTR keystream): both sides can produce them, nobody holds them. */
function keystream(seed: string, bytes: number): Readable {
  const cipher = createCipheriv('aes-128-ctr', createHash('sha256').update(seed).digest().subarray(0, 16), Buffer.alloc(16));
  const zeros = Buffer.alloc(CHUNK);
  let left = bytes;
  return new Readable({
    read() {
      if (left === 0) return void this.push(null);
      const n = Math.min(CHUNK, left);
      left -= n;
      this.push(cipher.update(n === CHUNK ? zeros : zeros.subarray(0, n)));
    },
  });
}

function hashing(hash: Hash): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      hash.update(chunk);
      callback(null, chunk);
    },
  });
}

async function sha256Of(stream: Readable): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of stream) {
    hash.update(chunk as Buffer);
    bytes += (chunk as Buffer).length;
  }
  return { bytes, sha256: hash.digest('hex') };
}

// ---------------------------------------------------------------------------------------------------------------
// The edge side: an http.Server with the TunnelServer attached and an authorize function of the test's own.

const HOST = 'quiet-fox.edge.test';
const GOOD_KEY = 'key-good';

/** Endpoints the test's authorize knows; ephemeral ones are added when a hello names none. */
type Endpoints = Map<string, TunnelEndpoint>;

function endpointFor(uuid: string, hostname = `${uuid.slice(0, 8)}.edge.test`): TunnelEndpoint {
  return { uuid, hostname, public_url: `http://${hostname}:8080` };
}

function testAuthorize(endpoints: Endpoints): Authorize {
  return async (hello) => {
    if (hello.api_key === 'key-eu-only') return { ok: false, code: 'region_not_allowed', message: 'the plan allows eu-west; this edge is in local' };
    if (hello.api_key !== GOOD_KEY) return { ok: false, code: 'unauthorized', message: 'unknown API key' };
    if (hello.endpoint === undefined) {
      const ephemeral = endpointFor(randomUUID());
      endpoints.set(ephemeral.uuid, ephemeral);
      return { ok: true, endpoint: ephemeral };
    }
    const endpoint = endpoints.get(hello.endpoint);
    return endpoint ? { ok: true, endpoint } : { ok: false, code: 'endpoint_not_found', message: `no endpoint ${hello.endpoint}` };
  };
}

interface Edge {
  server: http.Server;
  registry: TunnelRegistry;
  tunnels: TunnelServer;
  port: number;
  url: string;
  /** Sockets accepted, upgraded ones included. */
  sockets: Set<net.Socket>;
  /** A crash: every socket cut at once, no GOAWAY, the listener gone. */
  kill(): Promise<void>;
}

interface EdgeOptions {
  port?: number;
  endpoints?: Endpoints;
  handshakeTimeoutMs?: number;
  keepalive?: KeepaliveOptions;
}

async function startEdge(t: TestContext, options: EdgeOptions = {}): Promise<Edge> {
  const server = http.createServer((_req, res) => res.end('edge\n'));
  const sockets = new Set<net.Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  const registry = new TunnelRegistry();
  const tunnels = new TunnelServer({
    authorize: testAuthorize(options.endpoints ?? new Map()),
    registry,
    region: 'local',
    node: 'edge-test',
    handshakeTimeoutMs: options.handshakeTimeoutMs,
    keepalive: options.keepalive,
  });
  tunnels.attach(server);
  const port = await listen(server, options.port);
  let closed = false;
  const kill = async () => {
    if (closed) return;
    closed = true;
    const done = closeServer(server);
    for (const socket of sockets) socket.destroy();
    await done;
  };
  t.after(async () => {
    if (!closed) await tunnels.close(1_000);
    await kill();
  });
  return { server, registry, tunnels, port, url: `http://127.0.0.1:${port}`, sockets, kill };
}

/** A TCP relay to the edge that the test can freeze: it then reads nothing either way, as a dead network would. */
async function startRelay(t: TestContext, port: number): Promise<{ url: string; freeze(): void }> {
  const sockets = new Set<net.Socket>();
  const relay = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  });
  const relayPort = await listen(relay);
  t.after(async () => {
    for (const s of sockets) s.destroy();
    await closeServer(relay);
  });
  return {
    url: `http://127.0.0.1:${relayPort}`,
    // Connections made later (the agent's reconnect) are relayed as usual.
    freeze: () => {
      for (const s of sockets) {
        s.unpipe();
        s.pause();
      }
    },
  };
}

/** A real agent with fast reconnects, stopped after the test. */
async function agentFor(t: TestContext, options: Partial<AgentOptions> & Pick<AgentOptions, 'edgeUrl' | 'target'>): Promise<Agent> {
  const agent = await startAgent({ apiKey: GOOD_KEY, protocol: 'http', backoff: { initialMs: 20, maxMs: 200 }, ...options });
  t.after(() => agent.stop(1_000));
  return agent;
}

// ---------------------------------------------------------------------------------------------------------------
// Upstream services.

interface Upstream {
  port: number;
  server: http.Server;
  /** Most requests seen in flight at once on /barrier. */
  maxInFlight: number;
}

async function startUpstream(t: TestContext, name: string): Promise<Upstream> {
  const state = { inFlight: 0, maxInFlight: 0, waiting: [] as Array<() => void> };
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://upstream');
    if (url.pathname === '/hello') {
      const text = `hello from ${name}: ${req.method} ${req.url} host=${req.headers.host}`;
      res.setHeader('x-upstream', name);
      // Explicit, so a HEAD answer carries it too (Node leaves it out of HEAD responses otherwise).
      res.setHeader('content-length', Buffer.byteLength(text));
      return void res.end(text);
    }
    if (url.pathname === '/upload') {
      // Hashed as it streams in: the body is never held.
      const result = await sha256Of(req);
      res.setHeader('content-type', 'application/json');
      return void res.end(JSON.stringify(result));
    }
    if (url.pathname === '/download') {
      const bytes = Number(url.searchParams.get('bytes'));
      res.setHeader('content-type', 'application/octet-stream');
      return void (await pipeline(keystream(url.searchParams.get('seed') ?? 'down', bytes), res));
    }
    if (url.pathname === '/trailers') {
      res.setHeader('trailer', 'x-checksum');
      res.write('part one, ');
      res.write('part two');
      res.addTrailers({ 'x-checksum': 'abc123' });
      return void res.end();
    }
    if (url.pathname === '/barrier') {
      // Answers only once `n` requests are held at the same time: passes only if they really run concurrently.
      const n = Number(url.searchParams.get('n'));
      state.inFlight++;
      state.maxInFlight = Math.max(state.maxInFlight, state.inFlight);
      await new Promise<void>((resolve) => {
        state.waiting.push(resolve);
        if (state.waiting.length >= n) for (const release of state.waiting.splice(0)) release();
      });
      state.inFlight--;
      return void res.end(`released ${url.searchParams.get('i')}`);
    }
    res.statusCode = 404;
    res.end('not found');
  });
  const wss = new WebSocketServer({ server, path: '/ws' });
  wss.on('connection', (ws) => ws.on('message', (data) => ws.send(`echo:${String(data)}`)));
  const port = await listen(server);
  t.after(async () => {
    for (const client of wss.clients) client.terminate();
    wss.close();
    server.closeAllConnections();
    await closeServer(server);
  });
  return {
    port,
    server,
    get maxInFlight() {
      return state.maxInFlight;
    },
  };
}

async function startTcpEcho(t: TestContext): Promise<number> {
  // allowHalfOpen: when the client's FIN arrives, the echo finishes sending and then ends its side.
  const sockets = new Set<net.Socket>();
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.pipe(socket);
  });
  const port = await listen(server);
  t.after(async () => {
    for (const s of sockets) s.destroy();
    await closeServer(server);
  });
  return port;
}

async function startUdpEcho(t: TestContext): Promise<number> {
  const socket = dgram.createSocket('udp4');
  socket.on('message', (message, from) => socket.send(Buffer.concat([Buffer.from('echo:'), message]), from.port, from.address));
  socket.bind(0, '127.0.0.1');
  await once(socket, 'listening');
  t.after(() => new Promise<void>((resolve) => socket.close(() => resolve())));
  return socket.address().port;
}

// ---------------------------------------------------------------------------------------------------------------
// Requests through the registry, as the edge pipeline will make them.

function requestHeaders(method: string, path: string, extra: OutgoingHttpHeaders = {}): OutgoingHttpHeaders {
  return { ':method': method, ':path': path, ':authority': HOST, ':scheme': 'http', ...extra };
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  trailers: IncomingHttpHeaders | null;
}

async function send(session: AgentSession, method: string, path: string, body?: string): Promise<Answer> {
  const stream = session.request(requestHeaders(method, path));
  stream.end(body);
  return answer(stream);
}

async function answer(stream: ClientHttp2Stream): Promise<Answer> {
  let trailers: IncomingHttpHeaders | null = null;
  stream.once('trailers', (t: IncomingHttpHeaders) => (trailers = t));
  const [headers] = (await once(stream, 'response')) as [IncomingHttpHeaders];
  let body = '';
  stream.setEncoding('utf8');
  for await (const chunk of stream) body += chunk;
  return { status: Number(headers[':status']), headers, body, trailers };
}

function pick(edge: Edge, endpoint: string): AgentSession {
  const session = edge.registry.pick(endpoint);
  assert.ok(session, `no live session for endpoint ${endpoint}`);
  return session;
}

/** An edge that knows one permanent endpoint, with one upstream and one agent serving it. */
async function oneAgent(t: TestContext, transport: TunnelTransport) {
  const endpoint = endpointFor(randomUUID(), HOST);
  const edge = await startEdge(t, { endpoints: new Map([[endpoint.uuid, endpoint]]) });
  const upstream = await startUpstream(t, 'one');
  const agent = await agentFor(t, { transport, edgeUrl: edge.url, endpoint: endpoint.uuid, target: upstream.port, agentId: 'agent-one' });
  return { endpoint, edge, upstream, agent };
}

// ---------------------------------------------------------------------------------------------------------------

for (const transport of TRANSPORTS) {
  describe(`tunnel over ${transport}: HTTP forwarding`, () => {
    it('connects, is welcomed with the endpoint, and a GET returns the upstream answer', async (t) => {
      const { endpoint, edge, agent } = await oneAgent(t, transport);
      const { data_connections: grant, ...welcome } = agent.welcome!;
      assert.deepEqual(welcome, { type: 'welcome', endpoint, region: 'local', node: 'edge-test' });
      // Data connections are granted on the raw transport only (an http agent with a plain-HTTP target offers them).
      if (transport === 'raw') {
        assert.equal(grant?.max, 128);
        assert.match(grant?.id ?? '', /^[A-Za-z0-9_-]{43}$/);
        assert.match(grant?.key ?? '', /^[A-Za-z0-9_-]{43}$/);
      } else assert.equal(grant, undefined);
      const session = pick(edge, endpoint.uuid);
      assert.equal(session.agentId, 'agent-one');
      assert.equal(session.protocol, 'http');
      assert.equal(session.transport, transport);
      assert.equal(agent.transport, transport);
      assert.equal(session.remoteAddress, '127.0.0.1');

      const res = await send(session, 'GET', '/hello?x=1');
      assert.equal(res.status, 200);
      assert.equal(res.headers['x-upstream'], 'one');
      // The local service sees the visitor's host (from :authority) and the path unchanged.
      assert.equal(res.body, `hello from one: GET /hello?x=1 host=${HOST}`);
      // Connection-specific fields of the local HTTP/1.1 response did not cross (Node would have thrown on them).
      assert.equal(res.headers.connection, undefined);
      assert.equal(res.headers['keep-alive'], undefined);
    });

    it('answers HEAD without a body and carries response trailers', async (t) => {
      const { endpoint, edge } = await oneAgent(t, transport);
      const head = await send(pick(edge, endpoint.uuid), 'HEAD', '/hello');
      assert.equal(head.status, 200);
      assert.equal(head.body, '');
      assert.equal(head.headers['content-length'], String(Buffer.byteLength(`hello from one: HEAD /hello host=${HOST}`)));

      const withTrailers = await send(pick(edge, endpoint.uuid), 'GET', '/trailers');
      assert.equal(withTrailers.body, 'part one, part two');
      assert.equal(withTrailers.trailers?.['x-checksum'], 'abc123');
    });

    it('streams a 64 MiB POST body to the upstream intact', async (t) => {
      const { endpoint, edge } = await oneAgent(t, transport);
      const sent = createHash('sha256');
      const stream = pick(edge, endpoint.uuid).request(
        requestHeaders('POST', '/upload', { 'content-type': 'application/octet-stream', 'content-length': String(BIG) }),
      );
      const reply = answer(stream);
      await pipeline(keystream('upload', BIG), hashing(sent), stream);
      const res = await reply;
      assert.equal(res.status, 200);
      assert.deepEqual(JSON.parse(res.body), { bytes: BIG, sha256: sent.digest('hex') });
    });

    it('streams a 64 MiB download intact', async (t) => {
      const { endpoint, edge } = await oneAgent(t, transport);
      const stream = pick(edge, endpoint.uuid).request(requestHeaders('GET', `/download?bytes=${BIG}&seed=dl`));
      stream.end();
      const [headers] = (await once(stream, 'response')) as [IncomingHttpHeaders];
      assert.equal(headers[':status'], 200);
      const [got, expected] = await Promise.all([sha256Of(stream), sha256Of(keystream('dl', BIG))]);
      assert.deepEqual(got, expected);
    });

    it('multiplexes concurrent requests on the one tunnel connection', async (t) => {
      const { endpoint, edge, upstream } = await oneAgent(t, transport);
      const n = 24;
      const answers = await Promise.all(Array.from({ length: n }, (_, i) => send(pick(edge, endpoint.uuid), 'GET', `/barrier?n=${n}&i=${i}`)));
      assert.deepEqual(
        answers.map((a) => a.body),
        Array.from({ length: n }, (_, i) => `released ${i}`),
      );
      assert.equal(upstream.maxInFlight, n);
      assert.equal(edge.registry.size, 1);
      assert.equal(edge.tunnels.sessionCount, 1);
    });

    it('answers 502 with a clear text when the local service refuses connections', async (t) => {
      const endpoint = endpointFor(randomUUID());
      const edge = await startEdge(t, { endpoints: new Map([[endpoint.uuid, endpoint]]) });
      const unused = net.createServer();
      const deadPort = await listen(unused);
      await closeServer(unused);
      await agentFor(t, { transport, edgeUrl: edge.url, endpoint: endpoint.uuid, target: `127.0.0.1:${deadPort}` });
      const res = await send(pick(edge, endpoint.uuid), 'POST', '/anything', 'a body that goes nowhere');
      assert.equal(res.status, 502);
      assert.equal(res.headers['x-edge-agent-error'], 'local_unreachable');
      assert.match(res.body, new RegExp(`could not reach http://127\\.0\\.0\\.1:${deadPort}: .*ECONNREFUSED`));
    });

    it('carries a WebSocket upgrade end to end over a CONNECT stream', async (t) => {
      const { endpoint, edge } = await oneAgent(t, transport);
      const stream = pick(edge, endpoint.uuid).connect(`${HOST}:80`);
      const [headers] = (await once(stream, 'response')) as [IncomingHttpHeaders];
      assert.equal(headers[':status'], 200);
      // The edge replays the visitor's HTTP/1.1 upgrade request as bytes; here ws writes it onto the stream.
      const ws = new WebSocket(`ws://${HOST}/ws`, { createConnection: () => stream as unknown as net.Socket });
      t.after(() => ws.terminate());
      await once(ws, 'open');
      ws.send('ping');
      const [message] = await once(ws, 'message');
      assert.equal(String(message), 'echo:ping');
      ws.close();
      await once(ws, 'close');
    });
  });

  describe(`tunnel over ${transport}: TCP and UDP agents`, () => {
    it('a CONNECT stream echoes raw TCP bytes, with half-close', async (t) => {
      const endpoint = endpointFor(randomUUID());
      const edge = await startEdge(t, { endpoints: new Map([[endpoint.uuid, endpoint]]) });
      const echoPort = await startTcpEcho(t);
      await agentFor(t, { transport, edgeUrl: edge.url, endpoint: endpoint.uuid, protocol: 'tcp', target: echoPort });
      const session = pick(edge, endpoint.uuid);
      assert.equal(session.protocol, 'tcp');

      const stream = session.connect('tcp.edge.test:20000');
      const [headers] = (await once(stream, 'response')) as [IncomingHttpHeaders];
      assert.equal(headers[':status'], 200);
      const payload = randomBytes(1024 * 1024 + 17);
      const received = sha256Of(stream);
      // END_STREAM after the payload is the TCP FIN: the echo ends its side once it has sent everything back.
      stream.end(payload);
      assert.deepEqual(await received, { bytes: payload.length, sha256: createHash('sha256').update(payload).digest('hex') });
    });

    it('a CONNECT stream carries length-prefixed datagrams to a UDP service and back', async (t) => {
      const endpoint = endpointFor(randomUUID());
      const edge = await startEdge(t, { endpoints: new Map([[endpoint.uuid, endpoint]]) });
      const udpPort = await startUdpEcho(t);
      await agentFor(t, { transport, edgeUrl: edge.url, endpoint: endpoint.uuid, protocol: 'udp', target: udpPort });

      const stream = pick(edge, endpoint.uuid).connect('udp.edge.test:5353');
      const [headers] = (await once(stream, 'response')) as [IncomingHttpHeaders];
      assert.equal(headers[':status'], 200);
      const replies: string[] = [];
      const gotAll = new Promise<void>((resolve) => {
        const decoder = new DatagramDecoder((d) => {
          replies.push(String(d));
          if (replies.length === 3) resolve();
        });
        stream.on('data', (chunk: Buffer) => decoder.push(chunk));
      });
      // Three datagrams written as one chunk: the framing, not the chunking, separates them. Each is sent when
      // the previous reply is back, so UDP reordering cannot make the test flaky.
      for (const [i, text] of ['one', '', 'three'].entries()) {
        stream.write(encodeDatagram(Buffer.from(text)));
        while (replies.length <= i) await once(stream, 'data');
      }
      await gotAll;
      assert.deepEqual(replies, ['echo:one', 'echo:', 'echo:three']);
      stream.end();
      await once(stream, 'close');
    });

    it('an HTTP request to a tcp agent gets 501', async (t) => {
      const endpoint = endpointFor(randomUUID());
      const edge = await startEdge(t, { endpoints: new Map([[endpoint.uuid, endpoint]]) });
      await agentFor(t, { transport, edgeUrl: edge.url, endpoint: endpoint.uuid, protocol: 'tcp', target: await startTcpEcho(t) });
      const res = await send(pick(edge, endpoint.uuid), 'GET', '/');
      assert.equal(res.status, 501);
    });
  });

}

for (const transport of TRANSPORTS) {
  describe(`tunnel over ${transport}: refusals`, () => {
    it('a refused hello rejects startAgent with the code and message, and is not retried', async (t) => {
      const edge = await startEdge(t);
      const upstream = await startUpstream(t, 'one');
      await assert.rejects(
        startAgent({ transport, edgeUrl: edge.url, apiKey: 'key-wrong', protocol: 'http', target: upstream.port }),
        (err: unknown) => err instanceof TunnelRefusedError && err.code === 'unauthorized' && err.message === 'unknown API key',
      );

      const agent = new Agent({ transport, edgeUrl: edge.url, apiKey: 'key-eu-only', protocol: 'http', target: upstream.port, backoff: { initialMs: 20, maxMs: 40 } });
      let retries = 0;
      agent.on('reconnecting', () => retries++);
      await assert.rejects(agent.start(), { name: 'TunnelRefusedError', code: 'region_not_allowed', message: 'the plan allows eu-west; this edge is in local' });
      assert.equal(retries, 0);
      assert.equal(edge.registry.size, 0);
    });

    it('refuses an unknown endpoint', async (t) => {
      const edge = await startEdge(t);
      await assert.rejects(startAgent({ transport, edgeUrl: edge.url, apiKey: GOOD_KEY, endpoint: randomUUID(), protocol: 'tcp', target: 1 }), { code: 'endpoint_not_found' });
    });

    it('gives up at once when the edge URL answers the upgrade with a 4xx (a wrong --edge)', async (t) => {
      const server = http.createServer();
      const upgrades: string[] = [];
      server.on('upgrade', (req, socket) => {
        upgrades.push(String(req.headers.upgrade));
        socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      });
      const port = await listen(server);
      t.after(() => closeServer(server));
      await assert.rejects(startAgent({ transport, edgeUrl: `http://127.0.0.1:${port}`, apiKey: GOOD_KEY, protocol: 'tcp', target: 1 }), {
        name: 'TunnelRefusedError',
        code: 'not_a_tunnel_endpoint',
        message: new RegExp(`ws://127\\.0\\.0\\.1:${port}${TUNNEL_PATH} answered HTTP 404`),
      });
      assert.deepEqual(upgrades, [transport === 'raw' ? RAW_UPGRADE_TOKEN : 'websocket']);
    });
  });
}

describe('tunnel over ws: handshake frames', () => {
  it('refuses an invalid hello with close code 4400', async (t) => {
    const edge = await startEdge(t);
    const ws = new WebSocket(`ws://127.0.0.1:${edge.port}${TUNNEL_PATH}`);
    t.after(() => ws.terminate());
    await once(ws, 'open');
    const frame = nextEvent<[Buffer]>(ws, 'message');
    const closed = nextEvent<[number, Buffer]>(ws, 'close');
    ws.send(JSON.stringify({ type: 'hello', version: 1, api_key: GOOD_KEY, protocol: 'http', agent_id: 'x', tags: ['ok'], client: 'raw', extra: 1 }));
    const refused = JSON.parse(String((await frame)[0]));
    assert.deepEqual(refused, { type: 'refused', code: 'invalid_hello', message: 'invalid hello: unknown field /extra' });
    assert.equal((await closed)[0], 4400);
  });

  it('refuses a silent client after the handshake timeout, and an unsupported version', async (t) => {
    const edge = await startEdge(t, { handshakeTimeoutMs: 200 });
    const silent = new WebSocket(`ws://127.0.0.1:${edge.port}${TUNNEL_PATH}`);
    t.after(() => silent.terminate());
    const frame = nextEvent<[Buffer]>(silent, 'message');
    const [code] = await nextEvent<[number]>(silent, 'close');
    assert.equal(code, 4408);
    assert.equal(JSON.parse(String((await frame)[0])).code, 'handshake_timeout');

    const future = new WebSocket(`ws://127.0.0.1:${edge.port}${TUNNEL_PATH}`);
    t.after(() => future.terminate());
    await once(future, 'open');
    const closed = nextEvent<[number]>(future, 'close');
    future.send(JSON.stringify({ type: 'hello', version: 2, api_key: GOOD_KEY, protocol: 'http', agent_id: 'x', tags: [], client: 'raw' }));
    assert.equal((await closed)[0], 4426);
  });

  it('closes with 4400 on a text frame after the welcome, and drops the session', async (t) => {
    const endpoint = endpointFor(randomUUID());
    const edge = await startEdge(t, { endpoints: new Map([[endpoint.uuid, endpoint]]) });
    const ws = new WebSocket(`ws://127.0.0.1:${edge.port}${TUNNEL_PATH}`);
    t.after(() => ws.terminate());
    await once(ws, 'open');
    const welcome = nextEvent<[Buffer, boolean]>(ws, 'message', (_data, isBinary) => !isBinary);
    const connected = nextEvent<[AgentSession]>(edge.registry, 'connect');
    ws.send(JSON.stringify({ type: 'hello', version: 1, api_key: GOOD_KEY, endpoint: endpoint.uuid, protocol: 'tcp', agent_id: 'raw', tags: [], client: 'raw' }));
    assert.equal(JSON.parse(String((await welcome)[0])).type, 'welcome');
    await connected;
    const closed = nextEvent<[number]>(ws, 'close');
    const gone = nextEvent<[AgentSession, DisconnectReason]>(edge.registry, 'disconnect');
    ws.send('not HTTP/2');
    assert.equal((await closed)[0], 4400);
    await gone;
    assert.equal(edge.registry.size, 0);
  });

  it('leaves other upgrade paths alone: 404 when nobody else handles them', async (t) => {
    const edge = await startEdge(t);
    const ws = new WebSocket(`ws://127.0.0.1:${edge.port}/somewhere-else`);
    t.after(() => ws.terminate());
    ws.on('error', () => {});
    const [, res] = await nextEvent<[http.ClientRequest, http.IncomingMessage]>(ws, 'unexpected-response');
    assert.equal(res.statusCode, 404);
    res.resume();
  });
});

/** A raw-transport client by hand: the `edge-tunnel/2` upgrade; the socket and the bytes behind the 101. */
async function rawUpgrade(t: TestContext, port: number, token = RAW_UPGRADE_TOKEN): Promise<{ socket: net.Socket; head: Buffer }> {
  const req = http.request({ host: '127.0.0.1', port, path: TUNNEL_PATH, headers: { connection: 'Upgrade', upgrade: token } });
  req.end();
  const [res, socket, head] = (await nextEvent(req as unknown as Emitter, 'upgrade')) as [http.IncomingMessage, net.Socket, Buffer];
  t.after(() => socket.destroy());
  assert.equal(res.statusCode, 101);
  assert.equal(res.headers.upgrade, RAW_UPGRADE_TOKEN);
  return { socket, head };
}

/** The next handshake frame from the edge, parsed. */
async function rawFrame(socket: net.Socket, head: Buffer): Promise<{ type: string; code?: string; message?: string }> {
  const result = await new Promise<FrameResult>((resolve) => readHandshakeFrame(socket, head, 8192, resolve));
  assert.ok(result.ok, 'a handshake frame');
  return JSON.parse(result.frame.toString('utf8'));
}

/** Resolves when the edge has ended the connection (FIN or reset), reading and dropping what comes first. */
function ended(socket: net.Socket): Promise<void> {
  socket.resume();
  socket.on('error', () => {});
  return socket.closed ? Promise.resolve() : nextEvent(socket as unknown as Emitter, 'close').then(() => undefined);
}

const rawHello = (fields: Record<string, unknown> = {}) =>
  encodeHandshakeFrame(JSON.stringify({ type: 'hello', version: 1, api_key: GOOD_KEY, protocol: 'tcp', agent_id: 'raw', tags: [], client: 'raw', ...fields }));

describe('tunnel over raw: handshake frames', () => {
  it('refuses an invalid hello with a refused frame, then ends the connection', async (t) => {
    const edge = await startEdge(t);
    const { socket, head } = await rawUpgrade(t, edge.port);
    socket.write(rawHello({ extra: 1 }));
    assert.deepEqual(await rawFrame(socket, head), { type: 'refused', code: 'invalid_hello', message: 'invalid hello: unknown field /extra' });
    await ended(socket);
  });

  it('refuses a declared length over 8 KiB at once, and a hello that is not JSON', async (t) => {
    const edge = await startEdge(t);
    const big = await rawUpgrade(t, edge.port);
    const prefix = Buffer.alloc(4);
    prefix.writeUInt32BE(1 << 30);
    big.socket.write(prefix);
    assert.deepEqual(await rawFrame(big.socket, big.head), { type: 'refused', code: 'invalid_hello', message: `invalid hello: frame of ${1 << 30} bytes exceeds the limit of 8192` });

    const garbage = await rawUpgrade(t, edge.port);
    garbage.socket.write(encodeHandshakeFrame('{not json'));
    assert.equal((await rawFrame(garbage.socket, garbage.head)).message, 'invalid hello: frame is not valid JSON');
  });

  it('refuses a silent client after the handshake timeout, and an unsupported version', async (t) => {
    const edge = await startEdge(t, { handshakeTimeoutMs: 200 });
    const silent = await rawUpgrade(t, edge.port);
    assert.equal((await rawFrame(silent.socket, silent.head)).code, 'handshake_timeout');
    await ended(silent.socket);

    const future = await rawUpgrade(t, edge.port);
    future.socket.write(rawHello({ version: 2 }));
    assert.equal((await rawFrame(future.socket, future.head)).code, 'unsupported_version');
  });

  it('refuses bytes sent behind the hello, before the welcome', async (t) => {
    const endpoint = endpointFor(randomUUID());
    const edge = await startEdge(t, { endpoints: new Map([[endpoint.uuid, endpoint]]) });
    const { socket, head } = await rawUpgrade(t, edge.port);
    socket.write(Buffer.concat([rawHello({ endpoint: endpoint.uuid }), Buffer.from('PRI * HTTP/2.0')]));
    assert.deepEqual(await rawFrame(socket, head), { type: 'refused', code: 'invalid_hello', message: 'the agent sent bytes before the welcome' });
    assert.equal(edge.registry.size, 0);
  });

  it('accepts the token case-insensitively; bytes after the welcome that are not HTTP/2 end the session', async (t) => {
    const endpoint = endpointFor(randomUUID());
    const edge = await startEdge(t, { endpoints: new Map([[endpoint.uuid, endpoint]]) });
    const { socket, head } = await rawUpgrade(t, edge.port, 'Edge-Tunnel/2');
    const connected = nextEvent<[AgentSession]>(edge.registry, 'connect');
    socket.write(rawHello({ endpoint: endpoint.uuid }));
    assert.equal((await rawFrame(socket, head)).type, 'welcome');
    const [session] = await connected;
    assert.equal(session.transport, 'raw');
    const gone = nextEvent<[AgentSession, DisconnectReason]>(edge.registry, 'disconnect');
    socket.write('not HTTP/2 at all, just bytes\r\n\r\n');
    await gone;
    await ended(socket);
    assert.equal(edge.registry.size, 0);
  });
});

for (const transport of TRANSPORTS) {
  describe(`tunnel over ${transport}: lifecycle`, () => {
    it('after the edge dies and a new one starts on the same port, the agent reconnects and keeps its hostname', async (t) => {
      const endpoints: Endpoints = new Map();
      const edge1 = await startEdge(t, { endpoints });
      const upstream = await startUpstream(t, 'one');
      // No endpoint named: the one-shot flow, an ephemeral endpoint the agent must keep across reconnects.
      const agent = await agentFor(t, { transport, edgeUrl: edge1.url, target: upstream.port });
      const first = agent.welcome!;
      assert.equal((await send(pick(edge1, first.endpoint.uuid), 'GET', '/hello')).status, 200);

      const disconnected = nextEvent<[{ code: string }]>(agent, 'disconnected');
      const reconnected = nextEvent<[typeof first]>(agent, 'connected');
      // Regression: the side whose own socket died kept an HTTP/2 session that looked open forever, because the
      // ws duplex never emitted 'close' (see openTunnelStream). The dying edge must see its session close too.
      const edgeSideClosed = nextEvent<[AgentSession, DisconnectReason]>(edge1.registry, 'disconnect');
      await edge1.kill();
      assert.equal((await disconnected)[0].code, 'connection_lost');
      assert.equal((await edgeSideClosed)[1].code, 'connection_lost');

      const edge2 = await startEdge(t, { port: edge1.port, endpoints });
      const [welcome] = await reconnected;
      assert.deepEqual(welcome.endpoint, first.endpoint);
      const res = await send(pick(edge2, first.endpoint.uuid), 'GET', '/hello');
      assert.equal(res.body, `hello from one: GET /hello host=${HOST}`);
    });

    it('a draining edge sends shutting_down; the agent reconnects; a stopping agent says agent_stopping', async (t) => {
      const endpoints: Endpoints = new Map();
      const edge1 = await startEdge(t, { endpoints });
      const agent = await agentFor(t, { transport, edgeUrl: edge1.url, target: (await startUpstream(t, 'one')).port });
      const disconnected = nextEvent<[{ code: string }]>(agent, 'disconnected');
      const reconnecting = nextEvent(agent, 'reconnecting');
      await edge1.tunnels.close(1_000);
      assert.equal((await disconnected)[0].code, 'shutting_down');
      await reconnecting;
      await edge1.kill();

      const edge2 = await startEdge(t, { port: edge1.port, endpoints });
      if (!agent.connected) await nextEvent(agent, 'connected');
      const left = nextEvent<[AgentSession, DisconnectReason]>(edge2.registry, 'disconnect');
      const stopped = nextEvent<[Error | null]>(agent, 'stopped');
      await agent.stop();
      assert.equal((await left)[1].code, 'agent_stopping');
      assert.equal((await stopped)[0], null);
      assert.equal(edge2.registry.size, 0);
    });

    it('a peer that stops answering PINGs is cut (ping_timeout) and the agent reconnects', async (t) => {
      const endpoint = endpointFor(randomUUID());
      const fast = { intervalMs: 50, timeoutMs: 200 };
      const edge = await startEdge(t, { endpoints: new Map([[endpoint.uuid, endpoint]]), keepalive: fast });
      const relay = await startRelay(t, edge.port);
      const agent = await agentFor(t, { transport, edgeUrl: relay.url, endpoint: endpoint.uuid, protocol: 'tcp', target: await startTcpEcho(t), keepalive: fast });
      const cut = nextEvent<[AgentSession, DisconnectReason]>(edge.registry, 'disconnect');
      const reconnected = nextEvent(agent, 'connected');
      // The network between them goes silent: the relay stops reading both ways, so PING ACKs never arrive,
      // nothing else does either, and no FIN tells anyone. (Pausing the edge's socket is no longer enough: on
      // the raw transport Node's HTTP/2 reads the socket natively, whatever its JS side says.)
      relay.freeze();
      const [, reason] = await cut;
      assert.equal(reason.code, 'ping_timeout');
      await reconnected;
      assert.ok(edge.registry.pick(endpoint.uuid));
    });

    it('a second connection with the same agent id replaces the first, which stops with "replaced"', async (t) => {
      const { endpoint, edge, upstream, agent: first } = await oneAgent(t, transport);
      const stopped = nextEvent<[TunnelRefusedError | null]>(first, 'stopped');
      const second = await agentFor(t, { transport, edgeUrl: edge.url, endpoint: endpoint.uuid, target: upstream.port, agentId: 'agent-one' });
      const [err] = await stopped;
      assert.equal(err?.code, 'replaced');
      const sessions = edge.registry.sessions(endpoint.uuid);
      assert.equal(sessions.length, 1);
      assert.equal(second.connected, true);
      assert.equal((await send(sessions[0], 'GET', '/hello')).status, 200);
    });
  });

}

/**
 * An HTTP proxy in front of the edge that passes WebSocket upgrades only, as some corporate proxies and load
 * balancers do: any other upgrade is answered `refuseWith` (an HTTP status) or, with 'drop', cut without an answer.
 */
async function webSocketOnlyProxy(t: TestContext, edgePort: number, refuseWith: number | 'drop'): Promise<{ url: string; upgrades: string[] }> {
  const upgrades: string[] = [];
  const sockets = new Set<net.Socket>();
  const proxy = http.createServer((_req, res) => res.writeHead(502).end());
  proxy.on('upgrade', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    upgrades.push(String(req.headers.upgrade));
    sockets.add(socket);
    if (String(req.headers.upgrade).toLowerCase() !== 'websocket') {
      if (refuseWith === 'drop') return void socket.destroy();
      return void socket.end(`HTTP/1.1 ${refuseWith} ${http.STATUS_CODES[refuseWith]}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
    }
    const upstream = net.connect(edgePort, '127.0.0.1');
    sockets.add(upstream);
    let requestHead = `${req.method} ${req.url} HTTP/1.1\r\n`;
    for (let i = 0; i < req.rawHeaders.length; i += 2) requestHead += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`;
    upstream.write(requestHead + '\r\n');
    upstream.write(head);
    socket.pipe(upstream).pipe(socket);
    socket.on('error', () => upstream.destroy());
    upstream.on('error', () => socket.destroy());
  });
  const port = await listen(proxy);
  t.after(async () => {
    for (const s of sockets) s.destroy();
    await closeServer(proxy);
  });
  return { url: `http://127.0.0.1:${port}`, upgrades };
}

describe('tunnel: transport choice', () => {
  for (const refuseWith of [403, 'drop'] as const) {
    it(`auto falls back to WebSocket behind a proxy that ${refuseWith === 'drop' ? 'drops' : `answers ${refuseWith} to`} edge-tunnel/2`, async (t) => {
      const endpoint = endpointFor(randomUUID(), HOST);
      const edge = await startEdge(t, { endpoints: new Map([[endpoint.uuid, endpoint]]) });
      const proxy = await webSocketOnlyProxy(t, edge.port, refuseWith);
      const upstream = await startUpstream(t, 'one');
      const agent = await agentFor(t, { edgeUrl: proxy.url, endpoint: endpoint.uuid, target: upstream.port });
      assert.equal(agent.transport, 'ws');
      assert.deepEqual(proxy.upgrades, [RAW_UPGRADE_TOKEN, 'websocket']);
      const session = pick(edge, endpoint.uuid);
      assert.equal(session.transport, 'ws');
      assert.equal((await send(session, 'GET', '/hello')).body, `hello from one: GET /hello host=${HOST}`);

      // Every connection tries raw first again: after a drop, the agent probes edge-tunnel/2, then falls back.
      const reconnected = nextEvent(agent, 'connected');
      await session.destroy();
      await reconnected;
      assert.deepEqual(proxy.upgrades, [RAW_UPGRADE_TOKEN, 'websocket', RAW_UPGRADE_TOKEN, 'websocket']);
      assert.equal(agent.transport, 'ws');
    });
  }

  it('--transport raw behind such a proxy stops with not_a_tunnel_endpoint and says to try ws', async (t) => {
    const edge = await startEdge(t);
    const proxy = await webSocketOnlyProxy(t, edge.port, 400);
    await assert.rejects(startAgent({ transport: 'raw', edgeUrl: proxy.url, apiKey: GOOD_KEY, protocol: 'tcp', target: 1 }), {
      code: 'not_a_tunnel_endpoint',
      message: /answered HTTP 400 to the edge-tunnel\/2 upgrade; check --edge, or try --transport ws/,
    });
    assert.deepEqual(proxy.upgrades, [RAW_UPGRADE_TOKEN]);
  });

  it('--transport raw retries a proxy that drops edge-tunnel/2, never trying WebSocket', async (t) => {
    const edge = await startEdge(t);
    const proxy = await webSocketOnlyProxy(t, edge.port, 'drop');
    const agent = new Agent({ transport: 'raw', edgeUrl: proxy.url, apiKey: GOOD_KEY, protocol: 'tcp', target: 1, backoff: { initialMs: 5, maxMs: 10 } });
    const started = agent.start();
    started.catch(() => {});
    const [info] = await nextEvent<[{ reason: string }]>(agent, 'reconnecting', () => proxy.upgrades.length >= 2);
    assert.match(info.reason, /closed without an answer to the edge-tunnel\/2 upgrade/);
    await agent.stop();
    await assert.rejects(started);
    assert.ok(proxy.upgrades.every((u) => u === RAW_UPGRADE_TOKEN), proxy.upgrades.join());
  });

  it('carries the raw transport over the HTTPS listener (a TLS socket handed to HTTP/2)', async (t) => {
    const cert = await createSelfSigned({ dns: ['localhost'] });
    const endpoint = endpointFor(randomUUID(), HOST);
    const server = https.createServer({ key: cert.keyPem, cert: cert.certPem });
    const registry = new TunnelRegistry();
    const tunnels = new TunnelServer({ authorize: testAuthorize(new Map([[endpoint.uuid, endpoint]])), registry, region: 'local', node: 'edge-test' });
    tunnels.attach(server);
    const port = await listen(server);
    t.after(async () => {
      await tunnels.close(1_000);
      server.closeAllConnections();
      await closeServer(server);
    });
    const upstream = await startUpstream(t, 'one');
    const agent = await agentFor(t, { edgeUrl: `https://localhost:${port}`, edgeTls: { ca: cert.certPem }, endpoint: endpoint.uuid, target: upstream.port });
    assert.equal(agent.transport, 'raw');
    const session = registry.pick(endpoint.uuid);
    assert.ok(session);
    assert.equal(session.transport, 'raw');
    const stream = session.request(requestHeaders('GET', `/download?bytes=${4 * 1024 * 1024}&seed=tls`));
    stream.end();
    const [got, expected] = await Promise.all([sha256Of(stream), sha256Of(keystream('tls', 4 * 1024 * 1024))]);
    assert.deepEqual(got, expected);

    // The data connections come over TLS too, and a visitor's request takes one (undici on a server-side TLSSocket).
    await eventually(async () => ((session.data?.size ?? 0) >= 1 ? true : undefined));
    const visitors = http.createServer((req, res) =>
      forwardToAgent(session, { req, res, method: req.method ?? 'GET', target: req.url ?? '/', clientIp: '198.51.100.7', secure: true, host: HOST, authority: HOST, extra: {} }),
    );
    const visitorPort = await listen(visitors);
    t.after(() => closeServer(visitors));
    const res = await fetch(`http://127.0.0.1:${visitorPort}/download?bytes=${1024 * 1024}&seed=tls-data`);
    assert.equal(res.status, 200);
    const body = Buffer.from(await res.arrayBuffer());
    assert.deepEqual(await sha256Of(Readable.from([body])), await sha256Of(keystream('tls-data', 1024 * 1024)));
    assert.equal(session.data!.exchanges, 1, 'the request went on a data connection');
  });
});

describe('tunnel: registry', () => {
  async function twoAgents(t: TestContext) {
    const endpoint = endpointFor(randomUUID(), HOST);
    const edge = await startEdge(t, { endpoints: new Map([[endpoint.uuid, endpoint]]) });
    const [one, two] = await Promise.all([startUpstream(t, 'one'), startUpstream(t, 'two')]);
    await agentFor(t, { edgeUrl: edge.url, endpoint: endpoint.uuid, target: one.port, agentId: 'a1', tags: ['blue', 'eu'] });
    await agentFor(t, { edgeUrl: edge.url, endpoint: endpoint.uuid, target: two.port, agentId: 'a2', tags: ['green', 'EU'] });
    return { endpoint, edge };
  }

  it('two agents on one endpoint share requests round-robin', async (t) => {
    const { endpoint, edge } = await twoAgents(t);
    const served: string[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await send(pick(edge, endpoint.uuid), 'GET', '/hello');
      served.push(String(res.headers['x-upstream']));
    }
    assert.equal(served.filter((s) => s === 'one').length, 3);
    assert.equal(served.filter((s) => s === 'two').length, 3);
    for (let i = 1; i < served.length; i++) assert.notEqual(served[i], served[i - 1], `${served}`);
  });

  it('pick with tags selects only agents carrying all of them; agentId pins one', async (t) => {
    const { endpoint, edge } = await twoAgents(t);
    const ids = (options: Parameters<TunnelRegistry['pick']>[1], times = 4) =>
      Array.from({ length: times }, () => edge.registry.pick(endpoint.uuid, options)?.agentId ?? null);

    assert.deepEqual(new Set(ids({ tags: ['eu'] })), new Set(['a1', 'a2']));
    assert.deepEqual(ids({ tags: ['Blue', 'eu'] }), ['a1', 'a1', 'a1', 'a1']);
    assert.deepEqual(ids({ tags: ['green'] }), ['a2', 'a2', 'a2', 'a2']);
    assert.deepEqual(ids({ tags: ['blue', 'green'] }), [null, null, null, null]);
    assert.deepEqual(ids({ agentId: 'a2', tags: ['eu'] }), ['a2', 'a2', 'a2', 'a2']);
    assert.deepEqual(ids({ agentId: 'a1', tags: ['green'] }), [null, null, null, null]);
    assert.equal(edge.registry.pick(randomUUID()), null);
    assert.deepEqual(edge.registry.pick(endpoint.uuid, { tags: ['blue'] })?.tags, ['blue', 'eu']);
  });
});

describe('agent options', () => {
  it('parses targets: a port, host:port, and URLs per protocol', () => {
    assert.deepEqual(parseTarget('http', 3000), { protocol: 'http', host: 'localhost', port: 3000, tls: false, display: 'http://localhost:3000' });
    assert.deepEqual(parseTarget('http', 'https://app.local'), { protocol: 'http', host: 'app.local', port: 443, tls: true, display: 'https://app.local:443' });
    assert.equal(parseTarget('http', '10.0.0.5:8080').display, 'http://10.0.0.5:8080');
    assert.equal(parseTarget('tcp', '[::1]:22').host, '::1');
    assert.equal(parseTarget('udp', '53').display, 'udp://127.0.0.1:53');
    assert.throws(() => parseTarget('http', 'http://localhost:3000/api'), /must not have a path/);
    assert.throws(() => parseTarget('tcp', 'localhost'), /needs a port/);
    assert.throws(() => parseTarget('tcp', 'http://localhost:80'), /scheme http: but a tcp agent accepts tcp:/);
    assert.throws(() => parseTarget('http', 70000), /out of range/);
  });

  it('derives the tunnel URL from the edge base URL', () => {
    assert.equal(tunnelUrl('http://127.0.0.1:8080').href, `ws://127.0.0.1:8080${TUNNEL_PATH}`);
    assert.equal(tunnelUrl('https://edge.example.com/base/').href, `wss://edge.example.com/base${TUNNEL_PATH}`);
    assert.throws(() => tunnelUrl('ftp://edge'), /must be http\(s\):\/\/ or ws\(s\):\/\//);
  });

  it('backs off with full jitter below a doubling cap, and resets', () => {
    const top = new Backoff({ initialMs: 500, maxMs: 30_000, random: () => 0.999999 });
    assert.deepEqual(Array.from({ length: 8 }, () => top.next()), [499, 999, 1999, 3999, 7999, 15999, 29999, 29999]);
    top.reset();
    assert.equal(top.next(), 499);
    const bottom = new Backoff({ initialMs: 500, maxMs: 30_000, random: () => 0 });
    assert.equal(bottom.next(), 0);
  });

  it('rejects bad options when the agent is built, naming them', () => {
    const base = { edgeUrl: 'http://127.0.0.1:1', apiKey: 'k', protocol: 'http' as const, target: 3000 };
    assert.throws(() => new Agent({ ...base, tags: ['bad tag'] }), /invalid agent option: \/tags\/0/);
    assert.throws(() => new Agent({ ...base, agentId: 'x'.repeat(65) }), /\/agent_id/);
    assert.throws(() => new Agent({ ...base, endpoint: 'nope' }), /\/endpoint/);
    assert.throws(() => new Agent({ ...base, apiKey: '' }), /API key is required/);
    assert.throws(() => new Agent({ ...base, protocol: 'quic' as never }), /protocol must be one of http, tcp, udp/);
    assert.throws(() => new Agent({ ...base, transport: 'quic' as never }), /transport must be one of auto, raw, ws, got "quic"/);
  });
});
