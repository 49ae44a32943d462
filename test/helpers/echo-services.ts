// Services behind tcp and udp tunnels in tests, and their visitors: echo servers on ephemeral ports, a free port to
// assign as an endpoint's dedicated port, a TCP round trip with half-close, and a UDP question with a deadline.
import dgram from 'node:dgram';
import net from 'node:net';
import type { AddressInfo } from 'node:net';

/** A port nothing listens on right now: bound on 0 by the kernel, then released. */
export async function freePort(protocol: 'tcp' | 'udp'): Promise<number> {
  if (protocol === 'tcp') {
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    await new Promise<void>((r) => server.close(() => r()));
    return port;
  }
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', r));
  const { port } = socket.address();
  await new Promise<void>((r) => socket.close(() => r()));
  return port;
}

/** Echoes bytes back and ends its side when the client ends its own (half-close preserved). */
export async function tcpEcho(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer({ allowHalfOpen: true }, (s) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
    s.on('error', () => {});
    s.pipe(s);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

export async function udpEcho(): Promise<{ port: number; close(): Promise<void> }> {
  const socket = dgram.createSocket('udp4');
  socket.on('message', (msg, rinfo) => socket.send(Buffer.concat([Buffer.from('echo:'), msg]), rinfo.port, rinfo.address));
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', r));
  return { port: socket.address().port, close: () => new Promise<void>((r) => socket.close(() => r())) };
}

/** Connects, sends `payload`, half-closes, and collects everything until the peer ends; rejects on error. */
export function roundTrip(port: number, payload: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('end', () => {
      socket.end();
      resolve(Buffer.concat(chunks));
    });
    socket.on('connect', () => socket.end(payload));
  });
}

/** What a visitor sees on connecting: refused, or accepted and then closed with the bytes received before that. */
export function connectOutcome(port: number): Promise<{ refused: true } | { refused: false; received: number }> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    let connected = false;
    let received = 0;
    socket.on('connect', () => (connected = true));
    socket.on('data', (c: Buffer) => (received += c.length));
    socket.on('error', () => {});
    socket.on('close', () => resolve(connected ? { refused: false, received } : { refused: true }));
  });
}

/** Sends one datagram from `socket` and waits up to `ms` for the next reply; undefined when none came. */
export function ask(socket: dgram.Socket, port: number, text: string, ms = 500): Promise<string | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      socket.off('message', on);
      resolve(undefined);
    }, ms);
    const on = (msg: Buffer) => {
      clearTimeout(timer);
      socket.off('message', on);
      resolve(msg.toString());
    };
    socket.on('message', on);
    socket.send(text, port, '127.0.0.1');
  });
}
