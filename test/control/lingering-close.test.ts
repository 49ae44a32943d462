// Issue 20 item 9: a client sending a body over the limit to a control API route reads the 413, instead of having its
// connection reset (EPIPE / ECONNRESET) while it is still writing, because the server lingers before closing.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { once } from 'node:events';
import { lingerBeforeClose, type LingerLimits } from '../../src/control/lingering-close.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

interface Exchange {
  /** Everything the server sent, as latin1 text. */
  answer: string;
  /** The socket error the client met while writing or reading, if any. */
  error: string | null;
  /** Whether every byte of the request was accepted by the socket before it closed. */
  sentAll: boolean;
}

/**
 * Sends a request head and body over a raw socket, writing all of it before reading, as a simple client does. With
 * `halfClose` the client then ends its side; without, it waits for the server to close (a client's FIN before the
 * answer makes Node's server abort a request still in progress, which is not what a small-body test is about).
 */
function exchange(port: number, head: string, body: Buffer, chunks = 1, halfClose = true): Promise<Exchange> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    let answer = '';
    let error: string | null = null;
    let sentAll = false;
    socket.on('data', (d) => (answer += d.toString('latin1')));
    socket.on('error', (err: NodeJS.ErrnoException) => (error ??= err.code ?? err.message));
    socket.on('close', () => resolve({ answer, error, sentAll }));
    // The server's FIN ends the exchange: the client closes its side too (allowHalfOpen would otherwise keep it).
    socket.on('end', () => socket.end());
    socket.write(head);
    const size = Math.ceil(body.length / chunks);
    for (let i = 0; i < chunks; i++) {
      const part = body.subarray(i * size, (i + 1) * size);
      socket.write(chunks === 1 ? part : Buffer.concat([Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from('\r\n')]));
    }
    socket.write(chunks === 1 ? '' : '0\r\n\r\n', () => {
      sentAll = true;
      if (halfClose) socket.end();
    });
  });
}

describe('a body over the limit (issue 20 item 9)', () => {
  let t: TestNode;
  let port: number;
  const fiveMegabytes = Buffer.alloc(5 * 1024 * 1024, 'a');
  before(async () => {
    t = await startTestNode({ EDGE_BODY_LIMIT_BYTES: String(1024 * 1024) });
    port = Number(new URL(t.controlUrl).port);
  });
  after(() => t.close());

  const head = (key: string, extra: string) =>
    `POST /v1/endpoints HTTP/1.1\r\nhost: control.test\r\nx-api-key: ${key}\r\ncontent-type: application/json\r\n${extra}\r\n`;

  // Before the fix every one of these met EPIPE while writing (the server destroyed the socket with the body unread).
  it('5 MB to POST /v1/endpoints: the client writes it all and reads the 413, every time', async () => {
    for (let i = 0; i < 8; i++) {
      const extra = `content-length: ${fiveMegabytes.length}\r\n${i % 2 === 0 ? 'connection: close\r\n' : ''}`;
      const res = await exchange(port, head(t.adminKey, extra), fiveMegabytes);
      assert.equal(res.error, null, `round ${i}: ${res.answer.slice(0, 80)}`);
      assert.ok(res.sentAll, `round ${i}`);
      assert.match(res.answer, /^HTTP\/1\.1 413 /, `round ${i}`);
      assert.match(res.answer, /"code":"body_too_large"/);
      assert.match(res.answer, /\r\nconnection: close\r\n/i);
    }
  });

  it('a chunked body that grows past the limit: the client writes it all and reads the 413', async () => {
    for (let i = 0; i < 4; i++) {
      const res = await exchange(port, head(t.adminKey, 'transfer-encoding: chunked\r\n'), fiveMegabytes, 40);
      assert.equal(res.error, null, `round ${i}: ${res.answer.slice(0, 80)}`);
      assert.ok(res.sentAll);
      assert.match(res.answer, /^HTTP\/1\.1 413 /);
    }
  });

  it('a body over the limit behind a served request on the same connection: both answers are read', async () => {
    const first = `${head(t.adminKey, 'content-length: 2\r\n')}{}`;
    const res = await exchange(port, first + head(t.adminKey, `content-length: ${fiveMegabytes.length}\r\n`), fiveMegabytes);
    assert.equal(res.error, null, res.answer.slice(0, 80));
    assert.ok(res.sentAll);
    assert.match(res.answer, /^HTTP\/1\.1 201 [^]*\r\n\r\n[^]*HTTP\/1\.1 413 /);
  });

  it('a client that stops sending half way is answered and closed, and the server serves on', async () => {
    const answer = await new Promise<string>((resolve) => {
      const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
      let text = '';
      socket.on('data', (d) => (text += d.toString('latin1')));
      socket.on('error', () => {});
      socket.on('close', () => resolve(text));
      socket.write(head(t.adminKey, `content-length: ${fiveMegabytes.length}\r\n`));
      socket.write(fiveMegabytes.subarray(0, 2 * 1024 * 1024), () => socket.end());
    });
    assert.match(answer, /^HTTP\/1\.1 413 /);
    const res = await t.api('POST', '/v1/endpoints', { body: {} });
    assert.equal(res.status, 201, res.text);
  });

  it('a body within the limit is still read and served', async () => {
    const body = Buffer.from(JSON.stringify({}));
    const res = await exchange(port, head(t.adminKey, `content-length: ${body.length}\r\nconnection: close\r\n`), body, 1, false);
    assert.equal(res.error, null);
    assert.match(res.answer, /^HTTP\/1\.1 201 /);
  });
});

describe('lingering close is bounded', () => {
  /**
   * A server that refuses every body at once, as the control API does over the limit, lingering with `limits`;
   * `closed` resolves when its side of the (first) connection has closed.
   */
  async function refusingServer(limits: LingerLimits): Promise<{ server: Server; port: number; closed: Promise<void> }> {
    const server = createServer((req, res) => {
      lingerBeforeClose(req, limits);
      res.writeHead(413, { connection: 'close', 'content-type': 'text/plain' }).end('too large');
    });
    const closed = once(server, 'connection').then(([socket]) => once(socket as Socket, 'close')).then(() => undefined);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return { server, port: (server.address() as AddressInfo).port, closed };
  }

  const ANNOUNCED = 2 ** 40;

  /** Sends a head announcing a terabyte, then writes up to `stopAfter` bytes of it or until the connection breaks. */
  function upload(port: number, stopAfter: number): { socket: Socket; result: Promise<{ answer: string; written: number }> } {
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    let answer = '';
    let written = 0;
    let broken = false;
    const chunk = Buffer.alloc(64 * 1024, 'b');
    socket.on('data', (d) => (answer += d.toString('latin1')));
    socket.on('error', () => (broken = true));
    socket.write(`POST /upload HTTP/1.1\r\nhost: x\r\ncontent-length: ${ANNOUNCED}\r\n\r\n`);
    const pump = () => {
      while (!broken && !socket.destroyed && written < stopAfter) {
        written += chunk.length;
        if (!socket.write(chunk)) return void socket.once('drain', pump);
      }
    };
    pump();
    // (events.once would reject on the 'error' a broken write emits before 'close'.)
    return { socket, result: new Promise((resolve) => socket.on('close', () => resolve({ answer, written }))) };
  }

  it('cuts the connection once the byte limit has been discarded, the 413 read first', async () => {
    const { server, port, closed } = await refusingServer({ idleMs: 60_000, maxMs: 60_000, maxBytes: 1024 * 1024 });
    const { result } = upload(port, Infinity);
    await closed;
    const res = await result;
    server.close();
    assert.match(res.answer, /^HTTP\/1\.1 413 /);
    assert.ok(res.written < ANNOUNCED, `${res.written} bytes written`);
  });

  it('closes a connection whose client stops sending, once it has been idle for the idle limit', async () => {
    const { server, port, closed } = await refusingServer({ idleMs: 20, maxMs: 60_000, maxBytes: ANNOUNCED });
    const { socket, result } = upload(port, 256 * 1024);
    await closed;
    socket.destroy();
    server.close();
    assert.match((await result).answer, /^HTTP\/1\.1 413 /);
  });
});
