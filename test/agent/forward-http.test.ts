// The agent's HTTP forwarding, judged by what the edge side of a real tunnel sees (stream resets, bytes) and by what
// the agent logs: complete responses must take the success path, truncated ones and abandoned ones the failure paths.
import { describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import { constants as h2, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { startAgent } from '../../src/agent/agent.ts';
import { TUNNEL_TRANSPORTS, type TunnelTransport } from '../../src/shared/tunnel/raw.ts';
import { TunnelRegistry, type AgentSession } from '../../src/edge/tunnels/registry.ts';
import { TunnelServer } from '../../src/edge/tunnels/tunnel-server.ts';
import { cancelStream } from '../../src/shared/tunnel/reset.ts';
import { eventually } from '../helpers/eventually.ts';

const HOST = 'forward.edge.test';
const FAILURE = 'local service ended its response before the body was complete';

async function listen(server: http.Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

interface LogEntry {
  level: number;
  msg: string;
  [key: string]: unknown;
}

/** A pino logger at debug level whose entries the test can read. */
function capturingLogger() {
  const entries: LogEntry[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) entries.push(JSON.parse(line) as LogEntry);
      callback();
    },
  });
  return { logger: pino({ level: 'debug' }, sink), entries };
}

interface Local {
  port: number;
  /** Requests whose connection the agent closed before the local service had answered in full. */
  abandoned: number;
  /** How each request body to /sink ended: 'complete' (its end arrived) or 'aborted' (its connection went first). */
  uploads: Array<'pending' | 'complete' | 'aborted'>;
  /** Every request, as the local service saw it. */
  seen: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders; bytes: number }>;
  /** /flood: bytes written so far, and whether a write is waiting for 'drain' (backpressure reached it). */
  flood: { written: number; blocked: boolean };
}

/** The local service: fixed-size bodies, chunked bodies, trailers, a body cut short, a body that never ends. */
async function startLocal(t: TestContext): Promise<Local> {
  const state = { abandoned: 0 };
  const uploads: Local['uploads'] = [];
  const seen: Local['seen'] = [];
  const flood = { written: 0, blocked: false };
  const served = new WeakMap<object, number>();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://local');
    const n = Number(url.searchParams.get('n') ?? 0);
    const entry = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, bytes: 0 };
    seen.push(entry);
    req.on('data', (chunk: Buffer) => (entry.bytes += chunk.length));
    const count = (served.get(req.socket) ?? 0) + 1;
    served.set(req.socket, count);
    if ((url.pathname === '/second-fails' && count > 1) || url.pathname === '/hangup') {
      // A kept-alive connection the service closes just as the agent reuses it; /hangup: every connection.
      return void req.socket.destroy();
    }
    res.on('close', () => {
      if (!res.writableFinished) state.abandoned++;
    });
    if (url.pathname === '/sink') {
      const index = uploads.push('pending') - 1;
      req.on('end', () => {
        uploads[index] = 'complete';
        res.end('stored');
      });
      req.on('close', () => {
        if (uploads[index] === 'pending') uploads[index] = 'aborted';
      });
      return void req.resume();
    }
    if (url.pathname === '/early') {
      // Answers at once and never reads the request body.
      return void res.end('early');
    }
    req.resume();
    req.once('end', () => {
      switch (url.pathname) {
        case '/fixed':
          res.setHeader('content-length', n);
          return void res.end(Buffer.alloc(n, 'f'));
        case '/chunked':
          res.write(Buffer.alloc(n, 'c'));
          return void setImmediate(() => res.end('!'));
        case '/trailers':
          res.setHeader('trailer', 'x-sum');
          res.write(Buffer.alloc(n, 't'));
          res.addTrailers({ 'x-sum': String(n) });
          return void res.end();
        case '/cut':
          // Promises n bytes, sends a tenth, then drops the connection.
          res.setHeader('content-length', n);
          res.write(Buffer.alloc(Math.floor(n / 10), 'x'), () => res.socket?.destroy());
          return;
        case '/cut-chunked':
          // No content-length: only the reset can tell the edge that this body is not complete.
          res.write(Buffer.alloc(n, 'x'), () => res.socket?.destroy());
          return;
        case '/fields':
          // Written raw, so repeats and hop-by-hop fields reach the agent exactly as listed here.
          res.socket?.write(
            'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nCache-Control: no-cache\r\nCache-Control: private\r\n' +
              'Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Type: text/plain\r\nContent-Type: text/html\r\n' +
              'Connection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nX-Kept: yes\r\n\r\nok',
          );
          return;
        case '/second-fails':
          return void res.end('served');
        case '/hints':
          res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
          return void res.end('hinted');
        case '/flood': {
          // n bytes in 64 KiB writes, each waiting for 'drain' when the socket is full.
          const chunk = Buffer.alloc(64 * 1024, 'z');
          const pump = () => {
            while (flood.written < n) {
              flood.written += chunk.length;
              if (!res.write(chunk)) {
                flood.blocked = true;
                return void res.once('drain', () => {
                  flood.blocked = false;
                  pump();
                });
              }
            }
            res.end();
          };
          return pump();
        }
        case '/endless':
          res.setHeader('content-type', 'application/octet-stream');
          return void res.write(Buffer.alloc(1024, 'e'));
        default:
          res.statusCode = 404;
          res.end();
      }
    });
  });
  const port = await listen(server);
  t.after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return {
    port,
    uploads,
    seen,
    flood,
    get abandoned() {
      return state.abandoned;
    },
  };
}

/** An edge (tunnel server and registry on a real listener) and one agent in front of the local service. */
async function tunnelTo(t: TestContext, localPort: number, transport: TunnelTransport = 'raw') {
  const endpoint = { uuid: randomUUID(), hostname: HOST, public_url: `http://${HOST}` };
  const registry = new TunnelRegistry();
  const tunnels = new TunnelServer({ authorize: async () => ({ ok: true, endpoint }), registry, region: 'local', node: 'edge-test' });
  const server = http.createServer((_req, res) => res.end());
  tunnels.attach(server);
  const port = await listen(server);
  const { logger, entries } = capturingLogger();
  const agent = await startAgent({ edgeUrl: `http://127.0.0.1:${port}`, apiKey: 'key', endpoint: endpoint.uuid, protocol: 'http', target: localPort, logger, transport });
  t.after(async () => {
    await agent.stop(1_000);
    await tunnels.close(1_000);
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const session = registry.pick(endpoint.uuid);
  assert.ok(session);
  return { session, entries, tunnels };
}

interface Exchange {
  status: number;
  bytes: number;
  trailers: IncomingHttpHeaders | null;
  /** The RST_STREAM code the stream closed with (NGHTTP2_NO_ERROR for a normal end). */
  rstCode: number | undefined;
}

async function exchange(stream: ClientHttp2Stream): Promise<Exchange> {
  let status = 0;
  let bytes = 0;
  let trailers: IncomingHttpHeaders | null = null;
  stream.on('response', (headers) => (status = Number(headers[':status'])));
  stream.on('trailers', (t: IncomingHttpHeaders) => (trailers = t));
  stream.on('data', (chunk: Buffer) => (bytes += chunk.length));
  stream.on('error', () => {}); // a reset is reported by rstCode below
  await new Promise((resolve) => stream.once('close', resolve));
  return { status, bytes, trailers, rstCode: stream.rstCode };
}

/** Without a body, END_STREAM goes with the HEADERS, as the edge sends bodyless requests. */
function request(session: AgentSession, method: string, path: string, body?: Buffer): ClientHttp2Stream {
  const stream = session.request({ ':method': method, ':path': path, ':authority': HOST, ':scheme': 'http' }, { endStream: body === undefined });
  if (body !== undefined) stream.end(body);
  return stream;
}

const failures = (entries: LogEntry[]) => entries.filter((e) => e.msg === FAILURE);

describe('agent HTTP forwarding: success and failure paths', () => {
  it('completes responses of every shape without a reset, and never takes the failure path', async (t) => {
    const local = await startLocal(t);
    const { session, entries } = await tunnelTo(t, local.port);
    const shapes = [
      { method: 'GET', path: '/fixed?n=100', bytes: 100 },
      { method: 'GET', path: '/fixed?n=0', bytes: 0 },
      { method: 'GET', path: '/fixed?n=200000', bytes: 200_000 },
      { method: 'POST', path: '/fixed?n=100', bytes: 100, body: Buffer.alloc(5_000, 'b') },
      { method: 'GET', path: '/chunked?n=3000', bytes: 3_001 },
      { method: 'GET', path: '/trailers?n=10', bytes: 10, trailers: true },
    ];
    // Sequential rounds and concurrent ones: the old pipeline misfired on every one of these.
    for (let round = 0; round < 10; round++) {
      const results = await Promise.all(shapes.map((s) => exchange(request(session, s.method, s.path, s.body))));
      results.forEach((r, i) => {
        const shape = shapes[i];
        assert.equal(r.status, 200, shape.path);
        assert.equal(r.bytes, shape.bytes, shape.path);
        assert.equal(r.rstCode, h2.NGHTTP2_NO_ERROR, shape.path);
        if (shape.trailers) assert.equal(r.trailers?.['x-sum'], '10');
      });
    }
    assert.deepEqual(failures(entries), []);
    assert.equal(local.abandoned, 0);
  });

  // Truncation is where a transport could turn a reset into a clean end: checked over both.
  for (const transport of TUNNEL_TRANSPORTS) {
    it(`resets the stream with INTERNAL_ERROR when the local service cuts its body short, and says so once (${transport})`, async (t) => {
      const local = await startLocal(t);
      const { session, entries } = await tunnelTo(t, local.port, transport);
      // With a content-length the edge could tell on its own; without one, only the reset says the body is not whole.
      for (const path of ['/cut?n=100000', '/cut-chunked?n=10000']) {
        const r = await exchange(request(session, 'GET', path));
        assert.equal(r.status, 200, path);
        assert.equal(r.rstCode, h2.NGHTTP2_INTERNAL_ERROR, path);
        assert.ok(r.bytes < 100_000, `a truncated body must not arrive whole (${r.bytes} bytes)`);
        assert.deepEqual(
          failures(entries).map((e) => e.path),
          [path],
        );
        entries.length = 0;
      }
    });
  }

  it('stops the local request when the edge cancels the stream, without calling it a local failure', async (t) => {
    const local = await startLocal(t);
    const { session, entries } = await tunnelTo(t, local.port);
    const stream = request(session, 'GET', '/endless');
    const result = exchange(stream);
    await once(stream, 'data');
    stream.close(h2.NGHTTP2_CANCEL);
    assert.equal((await result).rstCode, h2.NGHTTP2_CANCEL);
    await eventually(async () => (local.abandoned === 1 ? true : undefined));
    assert.deepEqual(failures(entries), []);
  });

  it('a response complete before the request body ends the request side with RST_STREAM NO_ERROR', async (t) => {
    const local = await startLocal(t);
    const { session, entries } = await tunnelTo(t, local.port);
    const stream = session.request({ ':method': 'POST', ':path': '/early', ':authority': HOST, ':scheme': 'http' });
    stream.write(Buffer.alloc(1024, 'u')); // and never ended: the agent must tell the edge to stop
    const r = await exchange(stream);
    assert.equal(r.status, 200);
    assert.equal(r.bytes, 'early'.length);
    assert.equal(r.rstCode, h2.NGHTTP2_NO_ERROR);
    assert.deepEqual(failures(entries), []);
  });

  it('an upload the edge cancels, or the tunnel drops, reaches the local service aborted, never complete', async (t) => {
    const local = await startLocal(t);
    const { session, tunnels } = await tunnelTo(t, local.port);
    // No content-length: the local request is chunked, so only an abort can tell it the body was cut.
    const cancelled = session.request({ ':method': 'POST', ':path': '/sink', ':authority': HOST, ':scheme': 'http' });
    cancelled.on('error', () => {});
    cancelled.write(Buffer.alloc(4096, 'u'));
    await eventually(async () => (local.uploads.length === 1 ? true : undefined));
    cancelStream(cancelled);
    await eventually(async () => (local.uploads[0] !== 'pending' ? true : undefined));
    assert.equal(local.uploads[0], 'aborted');

    const dropped = session.request({ ':method': 'POST', ':path': '/sink', ':authority': HOST, ':scheme': 'http' });
    dropped.on('error', () => {});
    dropped.write(Buffer.alloc(4096, 'u'));
    await eventually(async () => (local.uploads.length === 2 ? true : undefined));
    await tunnels.close(0);
    await eventually(async () => (local.uploads[1] !== 'pending' ? true : undefined));
    assert.equal(local.uploads[1], 'aborted');
  });

  it('maps the local response fields in one pass: repeats folded, hop-by-hop and Connection-named fields gone', async (t) => {
    const local = await startLocal(t);
    const { session } = await tunnelTo(t, local.port);
    const stream = request(session, 'GET', '/fields');
    const [headers] = (await once(stream, 'response')) as [IncomingHttpHeaders];
    const r = await exchange(stream);
    assert.equal(r.bytes, 2);
    assert.equal(headers['cache-control'], 'no-cache, private');
    assert.deepEqual(headers['set-cookie'], ['a=1', 'b=2']);
    assert.equal(headers['content-type'], 'text/plain');
    assert.equal(headers['x-kept'], 'yes');
    for (const name of ['connection', 'keep-alive', 'x-hop']) assert.equal(headers[name], undefined, name);
  });

  it('passes 103 Early Hints on before the response', async (t) => {
    const local = await startLocal(t);
    const { session } = await tunnelTo(t, local.port);
    const stream = request(session, 'GET', '/hints');
    const [hints] = (await once(stream, 'headers')) as [IncomingHttpHeaders];
    assert.equal(hints[':status'], 103);
    assert.equal(hints.link, '</style.css>; rel=preload; as=style');
    const r = await exchange(stream);
    assert.equal(r.bytes, 'hinted'.length);
  });

  it('sends no Expect to the local service: 100-continue was between the visitor and the edge', async (t) => {
    const local = await startLocal(t);
    const { session } = await tunnelTo(t, local.port);
    const stream = session.request({ ':method': 'PUT', ':path': '/fixed?n=3', ':authority': HOST, ':scheme': 'http', expect: '100-continue', 'content-length': '5' });
    stream.end('hello');
    const r = await exchange(stream);
    assert.equal(r.status, 200);
    assert.equal(local.seen[0].headers.expect, undefined);
    assert.equal(local.seen[0].bytes, 5);
  });

  it('resends a bodyless idempotent request once when a reused connection fails before any answer', async (t) => {
    const local = await startLocal(t);
    const { session, entries } = await tunnelTo(t, local.port);
    assert.equal((await exchange(request(session, 'GET', '/second-fails'))).status, 200);
    // The second request reuses the connection, which the service closes: resent on a new one.
    const retried = await exchange(request(session, 'GET', '/second-fails'));
    assert.equal(retried.status, 200);
    assert.equal(retried.bytes, 'served'.length);
    assert.equal(local.seen.length, 3);
    assert.deepEqual(entries.filter((e) => e.msg === 'local service unreachable'), []);
    // Resent once only; and never a POST, which is not idempotent (RFC 9110 §9.2.2).
    assert.equal((await exchange(request(session, 'GET', '/hangup'))).status, 502);
    assert.equal(local.seen.length, 5);
    assert.equal((await exchange(request(session, 'POST', '/hangup'))).status, 502);
    assert.equal(local.seen.length, 6);
    assert.equal(entries.filter((e) => e.msg === 'local service unreachable').length, 2);
  });

  it('stops reading the local response while the edge does not read, and resumes when it does', async (t) => {
    const local = await startLocal(t);
    const { session } = await tunnelTo(t, local.port);
    const n = 32 * 1024 * 1024;
    const stream = request(session, 'GET', `/flood?n=${n}`);
    await once(stream, 'response');
    // Nothing reads the stream: HTTP/2 flow control and the agent's pause must reach the local service.
    await eventually(async () => (local.flood.blocked ? true : undefined));
    assert.ok(local.flood.written < n, 'the local service was held back before it wrote everything');
    let bytes = 0;
    for await (const chunk of stream) bytes += (chunk as Buffer).length;
    assert.equal(bytes, n);
  });
});
