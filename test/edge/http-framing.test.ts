// HTTP framing and slow clients at the edge, spoken on raw sockets (a client library would normalise the bytes):
// upgrades that get no 101, upgrade tokens other than websocket, HTTP/1.0 with Transfer-Encoding, stalled heads and
// bodies, oversized heads. The real program, a real agent and real local services or origins on ephemeral ports.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import { checkingIntervalMs } from '../../src/edge/http/listeners.ts';
import { eventually } from '../helpers/eventually.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

const WS_HEADERS = 'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n';

interface RawService {
  port: number;
  /** Request lines in the order they arrived, over every connection. */
  seen: string[];
  /** Resolves when every connection the service accepted so far has closed. */
  allClosed(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A local service written on node:net that ignores Upgrade, as many do: every request head (bodies are not
 * expected) gets a 200 with a Content-Length on a kept-alive connection. Or, with `switching`, a WebSocket service
 * that answers 101 and then echoes bytes, recording in `early` whether bytes past the head had already arrived
 * when it answered.
 */
async function startRawService(mode: 'ignore' | 'switching' = 'ignore'): Promise<RawService & { early: boolean[] }> {
  const seen: string[] = [];
  const early: boolean[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buffered = Buffer.alloc(0);
    let switched = false;
    socket.on('data', (chunk: Buffer) => {
      if (switched) return void socket.write(chunk);
      buffered = Buffer.concat([buffered, chunk]);
      for (let end = buffered.indexOf('\r\n\r\n'); end !== -1; end = buffered.indexOf('\r\n\r\n')) {
        const head = buffered.subarray(0, end).toString('latin1');
        buffered = buffered.subarray(end + 4);
        const line = head.split('\r\n')[0];
        seen.push(line);
        if (mode === 'switching') {
          early.push(buffered.length > 0);
          switched = true;
          socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Service: yes\r\n\r\n');
          if (buffered.length > 0) socket.write(buffered);
          return;
        }
        const body = `ignored ${line}\n`;
        socket.write(`HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\nConnection: keep-alive\r\n\r\n${body}`);
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as net.AddressInfo).port,
    seen,
    early,
    async allClosed() {
      await Promise.all([...sockets].map((s) => (s.destroyed ? undefined : once(s, 'close'))));
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Writes `data` on a fresh connection to the edge and resolves with everything it answered, once it closed. */
function exchange(port: number, data: string | Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(data));
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (text += d));
    socket.on('error', reject);
    socket.on('close', () => resolve(text));
  });
}

/** The status lines of every response in `text` (a response body here never starts a line with HTTP/1.x). */
function statusLines(text: string): string[] {
  return text.split(/\r?\n/).filter((l) => /^HTTP\/1\.[01] \d{3}/.test(l));
}

function headerOf(text: string, name: string): string | undefined {
  const head = text.slice(0, text.indexOf('\r\n\r\n'));
  const line = head.split('\r\n').find((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`));
  return line?.slice(name.length + 1).trim();
}

describe('HTTP framing and slow clients at the edge', () => {
  let t: TestNode;
  let user: { api_key: string };
  const agents: Agent[] = [];
  const services: Array<{ close(): Promise<void> }> = [];
  let edgePort: number;

  before(async () => {
    t = await startTestNode({ EDGE_HEADERS_TIMEOUT_MS: '1000', EDGE_REQUEST_BODY_IDLE_TIMEOUT_MS: '1000', EDGE_ORIGIN_ALLOW_PRIVATE: 'true' });
    user = await t.createUser('pro');
    edgePort = t.node.edge!.httpPort;
  });
  after(async () => {
    for (const a of agents) await a.stop();
    for (const s of services) await s.close();
    await t.close();
  });

  /** A new endpoint served by an agent whose local service listens on `port`. */
  async function agentEndpoint(port: number): Promise<string> {
    const ep = (await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} })).body;
    await eventually(async () => (t.node.edge!.config.endpoint(ep.uuid) ? true : undefined));
    const edgeUrl = `http://127.0.0.1:${edgePort}`;
    agents.push(await startAgent({ edgeUrl, apiKey: user.api_key, endpoint: ep.uuid, protocol: 'http', target: port }));
    return ep.hostname;
  }

  /** A new endpoint forwarding to the origin at `url`. */
  async function originEndpoint(url: string): Promise<string> {
    const ep = (await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} })).body;
    const set = await t.api('PUT', `/v1/endpoints/${ep.uuid}/origin`, { key: user.api_key, body: { url } });
    assert.equal(set.status, 200, set.text);
    await eventually(async () => (t.node.edge!.config.endpoint(ep.uuid)?.origin_url ? true : undefined));
    return ep.hostname;
  }

  for (const via of ['agent', 'origin'] as const) {
    const endpointFor = (port: number) => (via === 'agent' ? agentEndpoint(port) : originEndpoint(`http://127.0.0.1:${port}`));

    it(`upgrade without a 101 (${via}): the answer is relayed with Connection: close and the visitor's next request never reaches the service`, async () => {
      const service = await startRawService();
      services.push(service);
      const host = await endpointFor(service.port);
      const text = await exchange(
        edgePort,
        `GET /first HTTP/1.1\r\nHost: ${host}\r\n${WS_HEADERS}\r\nGET /second HTTP/1.1\r\nHost: ${host}\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n`,
      );
      assert.deepEqual(statusLines(text), ['HTTP/1.1 200 OK'], text);
      assert.equal(headerOf(text, 'connection')?.toLowerCase(), 'close');
      assert.ok(text.endsWith('ignored GET /first HTTP/1.1\n'), text);
      // The edge has closed the visitor's connection; the service's connection goes with it.
      await service.allClosed();
      assert.deepEqual(service.seen, ['GET /first HTTP/1.1']);
    });

    it(`upgrade with a 101 (${via}): bytes sent with the upgrade request reach the service only after its 101`, async () => {
      const service = await startRawService('switching');
      services.push(service);
      const host = await endpointFor(service.port);
      const socket = net.connect(edgePort, '127.0.0.1');
      socket.setEncoding('latin1');
      await once(socket, 'connect');
      socket.write(`GET /live HTTP/1.1\r\nHost: ${host}\r\n${WS_HEADERS}\r\nframe-bytes`);
      let text = '';
      for await (const chunk of socket) {
        text += chunk;
        if (text.endsWith('frame-bytes')) break;
      }
      socket.destroy();
      assert.match(text, /^HTTP\/1\.1 101 Switching Protocols\r\n/);
      assert.equal(headerOf(text, 'x-service'), 'yes');
      assert.equal(text.slice(text.indexOf('\r\n\r\n') + 4), 'frame-bytes');
      assert.deepEqual(service.seen, ['GET /live HTTP/1.1']);
      assert.deepEqual(service.early, [false], 'the visitor bytes arrived with the upgrade request, before the 101');
    });
  }

  it('refuses upgrade tokens other than websocket, and WebSocket upgrades that are not GET, before anything is forwarded (501)', async () => {
    const service = await startRawService();
    services.push(service);
    const host = await agentEndpoint(service.port);
    const refused = [
      `GET / HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n`,
      `GET / HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: foo\r\n\r\n`,
      `GET / HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket, h2c\r\n\r\n`,
      `POST / HTTP/1.1\r\nHost: ${host}\r\n${WS_HEADERS}Content-Length: 0\r\n\r\n`,
    ];
    for (const request of refused) {
      const text = await exchange(edgePort, request);
      assert.deepEqual(statusLines(text), ['HTTP/1.1 501 Not Implemented'], request);
      assert.equal(headerOf(text, 'x-edge-error'), 'upgrade_not_supported');
      assert.equal(headerOf(text, 'connection')?.toLowerCase(), 'close');
    }
    // Any case of the one carried token is fine.
    const text = await exchange(edgePort, `GET /ok HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: WebSocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`);
    assert.deepEqual(statusLines(text), ['HTTP/1.1 200 OK']);
    assert.deepEqual(service.seen, ['GET /ok HTTP/1.1']);
  });

  it('HTTP/1.0 with Transfer-Encoding is 400 and closes the connection: the request behind it is never served', async () => {
    const service = await startRawService();
    services.push(service);
    const host = await agentEndpoint(service.port);
    for (const te of ['chunked', 'gzip, chunked']) {
      const text = await exchange(
        edgePort,
        `POST /a HTTP/1.0\r\nHost: ${host}\r\nConnection: keep-alive\r\nTransfer-Encoding: ${te}\r\n\r\n3\r\nabc\r\n0\r\n\r\n` +
          `GET /smuggled HTTP/1.0\r\nHost: ${host}\r\nConnection: keep-alive\r\n\r\n`,
      );
      assert.deepEqual(statusLines(text), ['HTTP/1.1 400 Bad Request'], text);
      assert.equal(headerOf(text, 'x-edge-error'), 'malformed_request');
      assert.equal(headerOf(text, 'connection')?.toLowerCase(), 'close');
    }
    // An upgrade request framed that way is refused as well, before anything is forwarded.
    const upgrade = await exchange(edgePort, `GET /ws HTTP/1.0\r\nHost: ${host}\r\n${WS_HEADERS}Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n`);
    assert.deepEqual(statusLines(upgrade), ['HTTP/1.1 400 Bad Request'], upgrade);
    assert.equal(headerOf(upgrade, 'x-edge-error'), 'malformed_request');
    // The same upgrade smuggled behind it is not served either.
    const text = await exchange(
      edgePort,
      `POST /a HTTP/1.0\r\nHost: ${host}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /ws HTTP/1.1\r\nHost: ${host}\r\n${WS_HEADERS}\r\n`,
    );
    assert.deepEqual(statusLines(text), ['HTTP/1.1 400 Bad Request'], text);
    assert.deepEqual(service.seen, []);
    // HTTP/1.0 without Transfer-Encoding is still served, kept alive when asked.
    const kept = await exchange(
      edgePort,
      `GET /one HTTP/1.0\r\nHost: ${host}\r\nConnection: keep-alive\r\n\r\nGET /two HTTP/1.0\r\nHost: ${host}\r\n\r\n`,
    );
    assert.equal(statusLines(kept).length, 2, kept);
    // Pipelined requests go to the agent as concurrent streams: the service may see them in either order.
    assert.deepEqual([...service.seen].sort(), ['GET /one HTTP/1.1', 'GET /two HTTP/1.1']);
  });

  it('a request head that stalls is answered 408 after the headers timeout, not after Node’s 30 s check', { timeout: 15_000 }, async () => {
    const before = await slowCloses('headers');
    // Half a head: the request line and one field, never the blank line.
    const text = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(edgePort, '127.0.0.1', () => socket.write('GET / HTTP/1.1\r\nHost: nobody.example\r\n'));
      let got = '';
      socket.setEncoding('latin1');
      socket.on('data', (d: string) => (got += d));
      socket.on('error', reject);
      socket.on('close', () => resolve(got));
    });
    assert.deepEqual(statusLines(text), ['HTTP/1.1 408 Request Timeout'], text);
    assert.equal(headerOf(text, 'x-edge-error'), 'request_timeout');
    assert.equal(await slowCloses('headers'), before + 1);
  });

  /** The edge's count of connections closed because a client stalled. */
  async function slowCloses(kind: 'headers' | 'body'): Promise<number> {
    const text = await t.node.edge!.metrics.text();
    const line = text.split('\n').find((l) => l.startsWith(`edge_slow_client_closes_total{kind="${kind}"}`));
    return Number(line?.split(' ').at(-1) ?? 0);
  }

  describe('request bodies', () => {
    let host: string;
    const seen: Array<{ url: string; outcome: 'pending' | 'complete' | 'aborted'; bytes: number }> = [];

    before(async () => {
      // Reads the whole body before answering, except /early, which answers at once and then reads it.
      const server = http.createServer((req, res) => {
        const entry = { url: req.url!, outcome: 'pending' as 'pending' | 'complete' | 'aborted', bytes: 0 };
        seen.push(entry);
        req.on('data', (d: Buffer) => (entry.bytes += d.length));
        req.on('end', () => {
          entry.outcome = 'complete';
          res.end(`got ${entry.bytes}`);
        });
        req.on('close', () => {
          if (entry.outcome === 'pending') entry.outcome = 'aborted';
        });
        if (req.url === '/early') {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.write('started ');
        }
      });
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      services.push({
        close: () =>
          new Promise<void>((resolve) => {
            server.closeAllConnections();
            server.close(() => resolve());
          }),
      });
      host = await agentEndpoint((server.address() as net.AddressInfo).port);
    });

    it('a body that stops arriving is answered 408 and its connection closed; the local service never sees it complete', { timeout: 15_000 }, async () => {
      const before = await slowCloses('body');
      const text = await exchange(edgePort, `POST /stalled HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 100\r\n\r\n0123456789`);
      assert.deepEqual(statusLines(text), ['HTTP/1.1 408 Request Timeout'], text);
      assert.equal(headerOf(text, 'x-edge-error'), 'request_timeout');
      assert.equal(headerOf(text, 'connection')?.toLowerCase(), 'close');
      assert.equal(await slowCloses('body'), before + 1);
      const entry = await eventually(async () => seen.find((s) => s.url === '/stalled' && s.outcome !== 'pending'));
      assert.equal(entry.outcome, 'aborted');
    });

    it('a chunked body that stalls after the response started: the connection is cut, no 408 after the 200', { timeout: 15_000 }, async () => {
      const text = await exchange(edgePort, `POST /early HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n`);
      assert.deepEqual(statusLines(text), ['HTTP/1.1 200 OK'], text);
      assert.ok(!text.endsWith('0\r\n\r\n'), 'the response must not look complete');
    });

    it('a body that keeps arriving, however slowly, is not cut', async () => {
      const socket = net.connect(edgePort, '127.0.0.1');
      socket.setEncoding('latin1');
      await once(socket, 'connect');
      const parts = [...'abcdefghij'];
      socket.write(`POST /trickle HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${parts.length}\r\nConnection: close\r\n\r\n`);
      // A client pacing its writes: each gap is well inside the idle timeout, all of them together are not.
      const pacing = setInterval(() => {
        const next = parts.shift();
        if (next !== undefined) socket.write(next);
        else clearInterval(pacing);
      }, 150);
      let text = '';
      socket.on('data', (d: string) => (text += d));
      await once(socket, 'close');
      clearInterval(pacing);
      assert.deepEqual(statusLines(text), ['HTTP/1.1 200 OK'], text);
      assert.ok(text.endsWith('got 10'), text);
    });
  });

  it('an oversized request head is answered 431; a malformed one 400', async () => {
    const big = await exchange(edgePort, `GET / HTTP/1.1\r\nHost: nobody.example\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    assert.deepEqual(statusLines(big), ['HTTP/1.1 431 Request Header Fields Too Large'], big);
    assert.equal(headerOf(big, 'x-edge-error'), 'request_header_too_large');
    assert.equal(headerOf(big, 'connection')?.toLowerCase(), 'close');
    const bad = await exchange(edgePort, 'GET / HTTP/1.1\r\nHost: nobody.example\r\nno colon here\r\n\r\n');
    assert.deepEqual(statusLines(bad), ['HTTP/1.1 400 Bad Request'], bad);
    assert.equal(headerOf(bad, 'x-edge-error'), 'malformed_request');
  });
});

describe('listener checking interval', () => {
  it('is a quarter of the shortest timeout, between 250 ms and Node’s 30 s default', () => {
    assert.equal(checkingIntervalMs({ headersTimeoutMs: 20_000, requestBodyIdleTimeoutMs: 30_000 }), 5_000);
    assert.equal(checkingIntervalMs({ headersTimeoutMs: 3_000, requestBodyIdleTimeoutMs: 30_000 }), 750);
    assert.equal(checkingIntervalMs({ headersTimeoutMs: 1_000, requestBodyIdleTimeoutMs: 1_000 }), 250);
    assert.equal(checkingIntervalMs({ headersTimeoutMs: 1_000_000, requestBodyIdleTimeoutMs: 1_000_000 }), 30_000);
  });
});
