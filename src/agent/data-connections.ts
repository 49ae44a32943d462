// The agent's data connections (docs/tunnels.md "Data connections"): spare connections to the edge kept open beside the
// raw tunnel. The first bytes on one are an HTTP/1.1 request; from then on it is spliced to a local connection of its own.
import http from 'node:http';
import https from 'node:https';
import net, { type Socket } from 'node:net';
import type { Logger } from '../shared/log.ts';
import { DATA_ID_HEADER, DATA_KEY_HEADER, DATA_UPGRADE_TOKEN, asksForDataConnection } from '../shared/tunnel/data.ts';
import type { DataConnectionGrant } from '../shared/tunnel/protocol.ts';
import { AGENT_ERROR_HEADER } from './forward-http.ts';
import type { Target } from './target.ts';

export interface AgentDataConnectionsOptions {
  /** The tunnel URL (ws:// or wss://, as the agent dials it) and the TLS settings for a wss:// edge. */
  url: URL;
  edgeTls?: https.RequestOptions;
  grant: DataConnectionGrant;
  /** Idle connections to keep ready for requests (the edge sends over HTTP/2 when none is free). */
  spares: number;
  /** A plain-HTTP local service: bytes are spliced, so the agent cannot speak TLS to it on the edge's behalf. */
  target: Target;
  logger: Logger;
  userAgent: string;
  handshakeTimeoutMs: number;
}

/** Delay before dialling again after a failed data connection: doubles from this to MAX_RETRY_MS. */
const FIRST_RETRY_MS = 250;
const MAX_RETRY_MS = 30_000;
/** Bytes of the local service's answer read at once (Node's own read size for sockets). */
const READ_BYTES = 64 * 1024;
/** TCP keepalive probes on idle spares start after this long. */
const SPARE_KEEPALIVE_MS = 30_000;

export class AgentDataConnections {
  private readonly o: AgentDataConnectionsOptions;
  /** Every open data connection, spare or spliced. */
  private readonly sockets = new Set<Socket>();
  private spares = 0;
  private dialing = 0;
  private failures = 0;
  private retry: NodeJS.Timeout | null = null;
  private stopped = false;
  private readonly allClosed: Promise<void>;
  private resolveAllClosed!: () => void;

  constructor(options: AgentDataConnectionsOptions) {
    this.o = options;
    this.allClosed = new Promise((resolve) => (this.resolveAllClosed = resolve));
  }

  /** Resolves once stop() was called and every data connection (and dial under way) has closed. */
  whenClosed(): Promise<void> {
    return this.allClosed;
  }

  private checkClosed(): void {
    if (this.stopped && this.size === 0) this.resolveAllClosed();
  }

  /** Open connections (spare or spliced) and dials under way: what counts against the edge's grant. */
  get size(): number {
    return this.sockets.size + this.dialing;
  }

  /** Spares waiting for a request. */
  get idle(): number {
    return this.spares;
  }

  start(): void {
    this.fill();
  }

  /**
   * No new connections; spares close now, and connections carrying an exchange get `graceMs` to finish (the edge
   * closes them as soon as they are idle) before they are cut.
   */
  stop(graceMs: number): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    for (const socket of this.sockets) if ((socket as DataSocket)[SPARE]) socket.destroy();
    this.checkClosed();
    if (this.sockets.size === 0) return;
    const cut = setTimeout(() => {
      for (const socket of this.sockets) socket.destroy();
    }, graceMs);
    cut.unref();
    void this.allClosed.then(() => clearTimeout(cut));
  }

  private fill(): void {
    while (!this.stopped && this.retry === null && this.spares + this.dialing < this.o.spares && this.size < this.o.grant.max) this.dial();
  }

  /** Dials after a failure, later each time, so an edge that refuses (or is gone) is not hammered. */
  private failed(reason: string): void {
    this.failures++;
    if (this.stopped || this.retry) return;
    const delay = Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** Math.min(this.failures - 1, 16));
    this.o.logger.debug({ reason, delayMs: delay }, 'data connection failed');
    this.retry = setTimeout(() => {
      this.retry = null;
      this.fill();
    }, delay);
    this.retry.unref();
  }

  private dial(): void {
    const { url, grant } = this.o;
    const secure = url.protocol === 'wss:';
    this.dialing++;
    let settled = false;
    const settle = () => {
      if (settled) return false;
      settled = true;
      this.dialing--;
      clearTimeout(timer);
      this.checkClosed();
      return true;
    };
    const req = (secure ? https : http).request({
      host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: url.port || (secure ? 443 : 80),
      path: url.pathname,
      method: 'GET',
      agent: false,
      headers: {
        connection: 'Upgrade',
        upgrade: DATA_UPGRADE_TOKEN,
        'user-agent': this.o.userAgent,
        [DATA_ID_HEADER]: grant.id,
        [DATA_KEY_HEADER]: grant.key,
      },
      ...(secure ? (this.o.edgeTls ?? {}) : {}),
    });
    const timer = setTimeout(() => req.destroy(new Error(`no answer to the data connection upgrade within ${this.o.handshakeTimeoutMs} ms`)), this.o.handshakeTimeoutMs);
    req.on('error', (err) => {
      if (settle()) this.failed(err.message);
    });
    req.once('response', (res) => {
      res.resume();
      req.destroy();
      if (!settle()) return;
      // 403: the grant is gone (the session closed); the next session brings a new one.
      if (res.statusCode === 403) return this.stop(0);
      this.failed(`the edge answered HTTP ${res.statusCode} to the data connection upgrade`);
    });
    req.once('upgrade', (res, socket: Socket, head: Buffer) => {
      if (!settle()) return void socket.destroy();
      if (this.stopped || !asksForDataConnection(res.headers.upgrade) || head.length > 0) {
        socket.destroy();
        return this.stopped ? undefined : this.failed('the edge answered the data connection upgrade with something else');
      }
      this.addSpare(socket);
      this.fill();
    });
    req.end();
  }

  private addSpare(socket: Socket): void {
    const s = socket as DataSocket;
    s[SPARE] = true;
    this.spares++;
    this.sockets.add(socket);
    socket.setNoDelay(true);
    // A spare may idle for hours: TCP keepalive keeps NAT and firewall state on the way from forgetting it.
    socket.setKeepAlive(true, SPARE_KEEPALIVE_MS);
    socket.on('error', () => socket.destroy());
    socket.once('close', () => {
      this.sockets.delete(socket);
      this.checkClosed();
      if (s[SPARE]) {
        s[SPARE] = false;
        this.spares--;
        // Closed while idle (by the edge, or by a middlebox's idle timeout on the way): dialled again, after the
        // failure delay, so an edge that accepts and closes at once is not dialled in a loop.
        this.failed('an idle data connection closed');
      }
    });
    // The first bytes are the edge's first request on it: from then on this connection is taken.
    socket.once('data', (first: Buffer) => {
      s[SPARE] = false;
      this.spares--;
      // Only a spare that carried a request proves the path: an edge or a middlebox that accepts and then closes
      // at once keeps the delay growing.
      this.failures = 0;
      this.fill();
      this.splice(socket, first);
    });
  }

  /**
   * Joins a taken data connection to a new local connection: bytes both ways under backpressure (pipe), the local
   * service's FIN passed on once its bytes are written (a body read to the close), any other end of either side cuts
   * the other at once, so a request the edge abandoned never reaches the local service looking complete.
   */
  private splice(socket: Socket, first: Buffer): void {
    socket.pause();
    const { target } = this.o;
    // The local service's answer is read into one buffer per connection, reused while each write of it completes at
    // once (the kernel took it all): a fresh 64 KiB Buffer per read made large bodies' array buffers pile up in V8's
    // external memory, and the agent ran a full mark-compact about once a second under 64 KiB load (up to 17 ms
    // marking steps; docs/tunnels.md "Cost per request"). A write left queued keeps its chunk: the next read gets a
    // new buffer.
    let readBuffer = Buffer.allocUnsafe(READ_BYTES);
    const local = net.connect({
      host: target.host,
      port: target.port,
      onread: {
        buffer: () => readBuffer,
        callback: (bytes: number, buffer: Uint8Array): boolean => {
          const flushed = socket.write(buffer.subarray(0, bytes));
          if (socket.writableLength > 0) readBuffer = Buffer.allocUnsafe(READ_BYTES);
          if (flushed) return true;
          // The edge reads slower than the local service answers: stop reading it until the data connection drains.
          socket.once('drain', () => local.resume());
          return false;
        },
      },
    });
    local.setNoDelay(true);
    let connected = false;
    local.once('connect', () => {
      connected = true;
      local.write(first);
      socket.pipe(local, { end: false });
      socket.resume();
    });
    // The local FIN goes on after what was read (a body read to the close).
    local.once('end', () => socket.end());
    local.on('error', (err) => {
      if (connected) return void socket.destroy();
      this.answerUnreachable(socket, err);
    });
    local.once('close', () => {
      // After the local FIN the data connection ends once what was read is written; a reset cuts it.
      if (!socket.writableEnded) socket.destroy();
    });
    socket.once('end', () => local.destroy());
    socket.once('close', () => local.destroy());
  }

  /** The local service refused or is absent: the answer the HTTP/2 path gives, as HTTP/1.1, and the connection closes. */
  private answerUnreachable(socket: Socket, err: Error): void {
    const { target, logger } = this.o;
    logger.warn({ err: err.message }, 'local service unreachable');
    if (socket.destroyed) return;
    const text = `The agent could not reach ${target.display}: ${err.message}\n`;
    socket.end(
      'HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain; charset=utf-8\r\ncache-control: no-store\r\n' +
        `${AGENT_ERROR_HEADER}: local_unreachable\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`,
    );
    // The rest of the request is read and dropped, so the answer is not lost to a reset.
    socket.resume();
  }
}

const SPARE = Symbol('spare');
type DataSocket = Socket & { [SPARE]?: boolean };
