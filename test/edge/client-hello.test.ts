// The ClientHello reader on its own: server names from real ClientHellos (Node's own client, TLS 1.3 and 1.2),
// byte by byte and split over records; "no name" for anything that is not a ClientHello naming one; no throw on
// thousands of mangled inputs.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import net, { type AddressInfo } from 'node:net';
import tls from 'node:tls';
import { CLIENT_HELLO_MAX_RECORDS, serverNameOf } from '../../src/edge/client-hello.ts';
import { random } from '../helpers/random.ts';

/** A listener that keeps the first TLS record each client sends (its ClientHello) and then hangs up. */
function startRecorder(): Promise<{ port: number; next(): Promise<Buffer>; close(): Promise<void> }> {
  const waiting: Array<(b: Buffer) => void> = [];
  const server = net.createServer((socket) => {
    let data = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      data = Buffer.concat([data, chunk]);
      if (data.length >= 5 && data.length >= 5 + data.readUInt16BE(3)) {
        waiting.shift()?.(data.subarray(0, 5 + data.readUInt16BE(3)));
        socket.destroy();
      }
    });
    socket.on('error', () => {});
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        port: (server.address() as AddressInfo).port,
        next: () => new Promise((r) => waiting.push(r)),
        close: () => new Promise((r) => server.close(() => r())),
      }),
    ),
  );
}

/** The ClientHello Node's TLS client sends with these options. */
async function helloFrom(recorder: Awaited<ReturnType<typeof startRecorder>>, options: tls.ConnectionOptions): Promise<Buffer> {
  const hello = recorder.next();
  const socket = tls.connect({ host: '127.0.0.1', port: recorder.port, rejectUnauthorized: false, ...options });
  socket.on('error', () => {});
  return hello;
}

/** The same handshake message re-framed into handshake records of at most `size` bytes each. */
function refragment(hello: Buffer, size: number): Buffer {
  const message = hello.subarray(5);
  const records: Buffer[] = [];
  for (let i = 0; i < message.length; i += size) {
    const fragment = message.subarray(i, i + size);
    const header = Buffer.from([22, 3, 1, 0, 0]);
    header.writeUInt16BE(fragment.length, 3);
    records.push(header, fragment);
  }
  return Buffer.concat(records);
}

describe('ClientHello server name', () => {
  let recorder: Awaited<ReturnType<typeof startRecorder>>;
  let hello13: Buffer;
  let hello12: Buffer;
  const longName = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.example.test`;

  before(async () => {
    recorder = await startRecorder();
    hello13 = await helloFrom(recorder, { servername: 'App.Example.test', ALPNProtocols: ['http/1.1'] });
    hello12 = await helloFrom(recorder, { servername: 'old.example.test', maxVersion: 'TLSv1.2' });
  });
  after(() => recorder.close());

  it('reads the name from real TLS 1.3 and TLS 1.2 ClientHellos, as sent', async () => {
    assert.equal(serverNameOf(hello13), 'App.Example.test');
    assert.equal(serverNameOf(hello12), 'old.example.test');
    assert.equal(serverNameOf(await helloFrom(recorder, { servername: longName })), longName);
    // Bytes after the ClientHello (more records the client sent at once) change nothing.
    assert.equal(serverNameOf(Buffer.concat([hello13, Buffer.from([23, 3, 3, 0, 2, 1, 2])])), 'App.Example.test');
  });

  it('asks for more bytes until the ClientHello is complete, one byte at a time, never for more than it lacks', () => {
    for (let n = 0; n < hello13.length; n++) {
      const need = serverNameOf(hello13.subarray(0, n));
      assert.ok(typeof need === 'number' && need > n && need <= hello13.length, `prefix of ${n} bytes: ${need}`);
    }
  });

  it('joins a ClientHello split over several handshake records (RFC 8446 §5.1)', () => {
    for (const size of [40, 100, 1000]) {
      const split = refragment(hello13, size);
      assert.equal(serverNameOf(split), 'App.Example.test', `records of ${size} bytes`);
      for (let n = 0; n < split.length; n += 13) {
        const need = serverNameOf(split.subarray(0, n));
        assert.ok(typeof need === 'number' && need > n && need <= split.length, `${size}-byte records, prefix ${n}: ${need}`);
      }
    }
  });

  it('reads no name from a ClientHello split over more records than it reads', () => {
    assert.equal(serverNameOf(refragment(hello13, 1)), null);
    assert.equal(serverNameOf(refragment(hello13, Math.ceil((hello13.length - 5) / CLIENT_HELLO_MAX_RECORDS))), 'App.Example.test');
  });

  it('reads no name from a ClientHello without server_name: a client connecting by IP address', async () => {
    assert.equal(serverNameOf(await helloFrom(recorder, {})), null);
  });

  it('reads no name from what is not a TLS ClientHello', () => {
    assert.equal(serverNameOf(Buffer.from('GET / HTTP/1.1\r\nHost: app.example.test\r\n\r\n')), null);
    assert.equal(serverNameOf(Buffer.from([0x80, 0x2e, 0x01, 0x00, 0x02])), null, 'SSLv2-format hello');
    assert.equal(serverNameOf(Buffer.from([21, 3, 3, 0, 2, 2, 40])), null, 'an alert record');
    const notHello = Buffer.from(hello13);
    notHello[5] = 2; // a ServerHello
    assert.equal(serverNameOf(notHello), null);
    assert.equal(serverNameOf(Buffer.from([22, 3, 1, 0, 0])), null, 'an empty handshake record');
    // A record followed by something other than a handshake record before the message is complete.
    const split = refragment(hello13, 50);
    split[55] = 23;
    assert.equal(serverNameOf(split), null);
  });

  it('gives up on a ClientHello larger than it reads, without waiting for all of it', () => {
    const huge = Buffer.from([22, 3, 1, 0x40, 0x00, 1, 0x10, 0x00, 0x00]);
    assert.equal(serverNameOf(huge), null);
    // The same message header arriving in a record of its own.
    assert.equal(serverNameOf(Buffer.from([22, 3, 1, 0, 4, 1, 0x10, 0x00, 0x00])), null);
    assert.equal(serverNameOf(Buffer.from([22, 3, 1, 0, 4, 1, 0, 0x7f, 0xfc])), 9 + 5, 'a ClientHello of exactly the limit is read');
  });

  it('reads no name where a length runs past its container', () => {
    const body = 5 + 4;
    const sessionIdLength = body + 2 + 32;
    const bad = Buffer.from(hello12);
    bad[sessionIdLength] = 255;
    assert.equal(serverNameOf(bad), null, 'session id');
    // Find the server_name extension and make its inner list longer than the extension.
    const at = hello12.indexOf(Buffer.from('old.example.test', 'latin1'));
    const list = Buffer.from(hello12);
    list.writeUInt16BE(0xffff, at - 5);
    assert.equal(serverNameOf(list), null, 'server name list');
    const name = Buffer.from(hello12);
    name.writeUInt16BE(0xfff0, at - 2);
    assert.equal(serverNameOf(name), null, 'host name');
  });

  it('never throws on mangled ClientHellos, and any name it reads is in the bytes (3000 inputs, fixed seed)', () => {
    const rand = random(0x5e1ec7);
    const seeds = [hello13, hello12, refragment(hello13, 200)];
    for (let i = 0; i < 3000; i++) {
      const input = Buffer.from(seeds[rand(seeds.length)]);
      const flips = 1 + rand(4);
      for (let f = 0; f < flips; f++) input[rand(input.length)] = rand(256);
      const cut = rand(3) === 0 ? input.subarray(0, rand(input.length)) : input;
      const name = serverNameOf(cut);
      assert.ok(name === null || (typeof name === 'number' && name > cut.length) || (typeof name === 'string' && name.length > 0 && cut.includes(Buffer.from(name, 'latin1'))), `input ${i}`);
    }
  });
});
