// Raw DNS clients for tests of the DNS role: one UDP socket and one TCP connection that send exact bytes and hand
// back replies in arrival order, so a test can prove "no reply" by the next reply being the one to a later query.
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { connect, type Socket } from 'node:net';
import dnsPacket, { type DecodedPacket, type Packet } from 'dns-packet';

/** Guards against a hang only: a reply that never comes fails the test instead of stalling the run. */
const REPLY_GUARD_MS = 5_000;

/** Replies in arrival order; `next()` waits for one (rejecting only after the guard). */
class Inbox {
  private readonly queue: Buffer[] = [];
  private waiter: ((message: Buffer) => void) | null = null;

  put(message: Buffer): void {
    if (this.waiter) {
      const waiter = this.waiter;
      this.waiter = null;
      waiter(message);
    } else {
      this.queue.push(message);
    }
  }

  next(what: string): Promise<Buffer> {
    const queued = this.queue.shift();
    if (queued) return Promise.resolve(queued);
    return new Promise((resolve, reject) => {
      const guard = setTimeout(() => {
        this.waiter = null;
        reject(new Error(`no reply to ${what} within ${REPLY_GUARD_MS} ms`));
      }, REPLY_GUARD_MS);
      this.waiter = (message) => {
        clearTimeout(guard);
        resolve(message);
      };
    });
  }
}

export function query(name: string, type: string, extra: Partial<Packet> = {}): Buffer {
  return dnsPacket.encode({ type: 'query', id: nextId(), flags: dnsPacket.RECURSION_DESIRED, questions: [{ name, type: type as 'A' }], ...extra });
}

let lastId = 0;
function nextId(): number {
  lastId = (lastId + 1) % 0x10000;
  return lastId;
}

export function idOf(message: Buffer): number {
  return message.readUInt16BE(0);
}

export class UdpClient {
  private readonly socket: UdpSocket = createSocket('udp4');
  private readonly inbox = new Inbox();

  constructor(private readonly port: number) {
    this.socket.on('message', (message) => this.inbox.put(message));
  }

  send(message: Buffer): void {
    this.socket.send(message, this.port, '127.0.0.1');
  }

  next(): Promise<Buffer> {
    return this.inbox.next('a UDP query');
  }

  /** Sends and decodes the next reply, which must answer this query. */
  async ask(message: Buffer): Promise<DecodedPacket & { size: number }> {
    this.send(message);
    const reply = await this.next();
    if (idOf(reply) !== idOf(message)) throw new Error(`reply ${idOf(reply)} to query ${idOf(message)}`);
    return { ...dnsPacket.decode(reply), size: reply.length };
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.socket.close(() => resolve()));
  }
}

export class TcpClient {
  private readonly inbox = new Inbox();
  private pending = Buffer.alloc(0);
  /** Replies received on this connection so far. */
  replies = 0;
  /** Settles when the server (or anything) closes the connection. */
  readonly closed: Promise<void>;

  private constructor(private readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    socket.on('error', () => {});
    this.closed = new Promise((resolve) => socket.once('close', () => resolve()));
  }

  static open(port: number): Promise<TcpClient> {
    return new Promise((resolve, reject) => {
      const socket = connect({ port, host: '127.0.0.1' }, () => {
        socket.off('error', reject);
        resolve(new TcpClient(socket));
      });
      socket.once('error', reject);
    });
  }

  /** Writes bytes as they are: framing is the caller's (see `framed`). */
  write(bytes: Buffer): Promise<void> {
    return new Promise((resolve, reject) => this.socket.write(bytes, (err) => (err ? reject(err) : resolve())));
  }

  next(): Promise<Buffer> {
    return this.inbox.next('a TCP query');
  }

  async ask(message: Buffer): Promise<DecodedPacket & { size: number }> {
    await this.write(framed(message));
    const reply = await this.next();
    if (idOf(reply) !== idOf(message)) throw new Error(`reply ${idOf(reply)} to query ${idOf(message)}`);
    return { ...dnsPacket.decode(reply), size: reply.length };
  }

  close(): Promise<void> {
    this.socket.destroy();
    return this.closed;
  }

  private read(chunk: Buffer): void {
    this.pending = Buffer.concat([this.pending, chunk]);
    while (this.pending.length >= 2 && this.pending.length >= 2 + this.pending.readUInt16BE(0)) {
      const length = this.pending.readUInt16BE(0);
      this.replies += 1;
      this.inbox.put(this.pending.subarray(2, 2 + length));
      this.pending = this.pending.subarray(2 + length);
    }
  }
}

export function framed(message: Buffer): Buffer {
  const length = Buffer.alloc(2);
  length.writeUInt16BE(message.length);
  return Buffer.concat([length, message]);
}
