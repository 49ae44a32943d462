// The one request-body reader of the edge's stages, on a real server: whole bodies, the byte bound (declared and
// streamed), the time bound, a visitor who goes away, and an upgrade whose bytes are not a body.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http, { type IncomingMessage } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { BodyTimeout, BodyTooLarge, readRequestBody, type BodyLimits } from '../../../src/edge/http/body.ts';

describe('readRequestBody', () => {
  let server: http.Server;
  let port: number;
  let limits: BodyLimits = { maxBytes: 16 };
  let outcome: Promise<Buffer | Error>;
  let arrived: (req: IncomingMessage) => void;

  before(async () => {
    server = http.createServer((req, res) => {
      outcome = readRequestBody(req, limits).then(
        (b) => b,
        (err: Error) => err,
      );
      arrived(req);
      void outcome.then((r) => {
        if (!res.destroyed) res.end(r instanceof Error ? r.constructor.name : `read ${r.length}`);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  /** Sends `raw` on a fresh connection; resolves with what the reader gave once the head has arrived. */
  async function send(raw: string, then?: (socket: net.Socket) => void): Promise<Buffer | Error> {
    const seen = new Promise<IncomingMessage>((r) => (arrived = r));
    const socket = net.connect(port, '127.0.0.1', () => socket.write(raw));
    socket.on('error', () => {});
    await seen;
    then?.(socket);
    const result = await outcome;
    socket.destroy();
    return result;
  }

  it('reads a whole body, with Content-Length or chunked', async () => {
    limits = { maxBytes: 16 };
    assert.equal(String(await send('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello')), 'hello');
    assert.equal(String(await send('POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n')), 'abcde');
    assert.equal((await send('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\n\r\n' + 'x'.repeat(16))) instanceof Buffer, true, 'exactly the limit is read');
  });

  it('refuses a body over the limit: declared before a byte is read, streamed as soon as it passes', async () => {
    limits = { maxBytes: 16 };
    assert.ok((await send('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n\r\n')) instanceof BodyTooLarge);
    assert.ok((await send('POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n11\r\n' + 'y'.repeat(17) + '\r\n')) instanceof BodyTooLarge);
  });

  it('gives up on a body that does not arrive in time, and on a visitor who goes away', async () => {
    limits = { maxBytes: 16, timeoutMs: 50 };
    assert.ok((await send('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc')) instanceof BodyTimeout);
    limits = { maxBytes: 16 };
    const gone = await send('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc', (socket) => socket.destroy());
    assert.ok(gone instanceof Error && !(gone instanceof BodyTooLarge) && !(gone instanceof BodyTimeout), String(gone));
  });
});
