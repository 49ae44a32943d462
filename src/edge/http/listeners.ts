// The edge's public HTTP and HTTPS listeners: Node's servers with the edge's limits, and the checks that belong to a
// connection rather than to an endpoint: framing HTTP/1.1 forbids, request heads too large or too slow, stalled bodies.
import http, { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { ERROR_CODES, type ErrorCode } from '../../shared/errors.ts';
import { closeConnection, responseOnSocket } from '../forward/upgrade.ts';
import { sendEdgeError } from './pages.ts';

/** What stalled when the edge closed a slow client's connection: its request head, or its request body. */
export type SlowClient = 'headers' | 'body';

export interface ListenerLimits {
  /** Largest request head (request line and fields); 431 beyond. */
  maxHeaderBytes: number;
  /** A request head must be complete this long after its first byte (or the connection's start); 408 after. */
  headersTimeoutMs: number;
  /** An idle kept-alive connection is closed after this long. */
  keepAliveTimeoutMs: number;
  /** A request body that delivers no byte for this long closes its connection (408 if no response started). */
  requestBodyIdleTimeoutMs: number;
}

export interface ListenerHandlers {
  request(req: IncomingMessage, res: ServerResponse, secure: boolean): void;
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, secure: boolean): void;
  /** An answer the listeners gave themselves, before any endpoint was looked up (for the refusal counters). */
  onRefusal?(status: number, code: ErrorCode): void;
  /** A connection closed because its client stalled. */
  onSlowClient?(kind: SlowClient): void;
}

export interface Listeners {
  plain: http.Server;
  secure: https.Server;
  /** Stops watching request bodies (the servers are closed by their owner). */
  close(): void;
}

/**
 * How often Node looks for heads past headersTimeout (it checks on a timer, every 30 s by default, so a 3 s limit
 * fired after up to 30 s), and how often stalled bodies are looked for: a quarter of the shortest limit, so either
 * fires within 125% of its setting, kept between 250 ms and Node's default.
 */
export function checkingIntervalMs(limits: Pick<ListenerLimits, 'headersTimeoutMs' | 'requestBodyIdleTimeoutMs'>): number {
  return Math.min(30_000, Math.max(250, Math.floor(Math.min(limits.headersTimeoutMs, limits.requestBodyIdleTimeoutMs) / 4)));
}

export function createListeners(limits: ListenerLimits, handlers: ListenerHandlers, tls: https.ServerOptions): Listeners {
  const intervalMs = checkingIntervalMs(limits);
  const options: http.ServerOptions = {
    maxHeaderSize: limits.maxHeaderBytes,
    headersTimeout: limits.headersTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // No limit on a whole request: a large upload on a slow link is legitimate. A stalled one is not (BodyWatch).
    requestTimeout: 0,
    connectionsCheckingInterval: intervalMs,
  };
  const refused = handlers.onRefusal ?? (() => {});
  const slow = handlers.onSlowClient ?? (() => {});
  const bodies = new BodyWatch(limits.requestBodyIdleTimeoutMs, intervalMs, (stalled) => {
    slow('body');
    if (answerStall(stalled)) refused(ERROR_CODES.request_timeout[0], 'request_timeout');
  });
  // Connections whose framing was refused: requests Node already parsed behind the refused one are never served.
  const condemned = new WeakSet<Duplex>();

  const onRequest = (secure: boolean) => (req: IncomingMessage, res: ServerResponse) => {
    if (condemned.has(req.socket)) return; // unanswered: Node closes the connection after the refusal before it
    const fault = framingFault(req);
    if (fault !== null) {
      condemned.add(req.socket);
      res.shouldKeepAlive = false;
      sendEdgeError(res, 'malformed_request', req.headers.accept, fault);
      return refused(ERROR_CODES.malformed_request[0], 'malformed_request');
    }
    bodies.watch(req, res);
    handlers.request(req, res, secure);
  };
  const onUpgrade = (secure: boolean) => (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (condemned.has(socket)) return closeConnection(socket);
    const fault = framingFault(req);
    if (fault !== null) {
      socket.on('error', () => socket.destroy());
      sendEdgeError(responseOnSocket(req, socket), 'malformed_request', req.headers.accept, fault);
      return refused(ERROR_CODES.malformed_request[0], 'malformed_request');
    }
    handlers.upgrade(req, socket, head, secure);
  };

  const plain = http.createServer(options, onRequest(false));
  const secure = https.createServer({ ...options, ...tls }, onRequest(true));
  for (const [server, secureFlag] of [[plain, false], [secure, true]] as const) {
    server.on('upgrade', onUpgrade(secureFlag));
    server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
      const code: ErrorCode =
        err.code === 'HPE_HEADER_OVERFLOW' ? 'request_header_too_large' : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'request_timeout' : 'malformed_request';
      // Node reports headersTimeout (requestTimeout is off) as ERR_HTTP_REQUEST_TIMEOUT here, and nowhere else.
      if (code === 'request_timeout') slow('headers');
      // Node's own rule: answer only where no response is under way, and never on a connection already reset.
      const current = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
      if (err.code !== 'ECONNRESET' && socket.writable && (!current || !current.headersSent)) {
        socket.end(RAW_ANSWERS[code]);
        (socket as Socket).destroySoon();
        refused(ERROR_CODES[code][0], code);
      } else socket.destroy();
    });
  }
  return { plain, secure, close: () => bodies.close() };
}

/**
 * Framing RFC 9112 forbids that Node's parser accepts. §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty
 * framing (1.0 has no chunked coding, so an intermediary that reads it as 1.0 sees a different body, and the rest
 * of the connection as a different request): 400, and the connection closed. Node parses the chunked body and then
 * the next request on the connection as if nothing were wrong.
 */
function framingFault(req: IncomingMessage): string | null {
  if (req.httpVersionMajor === 1 && req.httpVersionMinor === 0 && req.headers['transfer-encoding'] !== undefined) {
    return 'an HTTP/1.0 request cannot use Transfer-Encoding (RFC 9112 §6.1)';
  }
  return null;
}

/**
 * The edge's answers on a connection with no parsed request (Node's clientError): no Accept to negotiate a page
 * format from, so plain text, with the code in X-Edge-Error as on every edge page, and the connection closed.
 */
const RAW_ANSWERS = Object.fromEntries(
  (['request_header_too_large', 'request_timeout', 'malformed_request'] as const).map((code) => {
    const [status, message] = ERROR_CODES[code];
    const body = `${message}.\n`;
    const head =
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nconnection: close\r\ncontent-type: text/plain; charset=utf-8\r\n` +
      `cache-control: no-store\r\nx-edge-error: ${code}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`;
    return [code, head + body];
  }),
) as Record<ErrorCode, string>;

interface Watched {
  req: IncomingMessage;
  res: ServerResponse;
  /** The connection's bytesRead when last seen to move, and when that was. */
  bytes: number;
  since: number;
}

/**
 * Request bodies still arriving, checked on the same period as Node's own head check: one whose connection has
 * read no byte for the idle limit while the edge was ready for more is a stalled client. Ready means not paused:
 * when the edge stops reading (an agent or origin slower than the visitor, backpressure), the clock restarts, so
 * only a client that stops sending is cut. Bodies that arrive whole with their head are never watched.
 */
class BodyWatch {
  private readonly watched = new Set<Watched>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly idleMs: number,
    private readonly intervalMs: number,
    private readonly stalled: (w: Watched) => void,
  ) {}

  watch(req: IncomingMessage, res: ServerResponse): void {
    if (req.complete) return;
    // RFC 9112 §6.3: neither Transfer-Encoding nor Content-Length (or a zero one) means no body.
    const length = req.headers['content-length'];
    if (req.headers['transfer-encoding'] === undefined && (length === undefined || length === '0')) return;
    this.watched.add({ req, res, bytes: req.socket.bytesRead, since: Date.now() });
    this.timer ??= setInterval(() => this.sweep(), this.intervalMs).unref();
  }

  private sweep(): void {
    const now = Date.now();
    for (const w of this.watched) {
      const socket = w.req.socket;
      if (w.req.complete || socket.destroyed) {
        this.watched.delete(w);
        continue;
      }
      const bytes = socket.bytesRead;
      if (bytes !== w.bytes || socket.isPaused()) {
        w.bytes = bytes;
        w.since = now;
      } else if (now - w.since >= this.idleMs) {
        this.watched.delete(w);
        this.stalled(w);
      }
    }
    if (this.watched.size === 0) this.close();
  }

  close(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}

/**
 * Closes a stalled request's connection; true when a 408 went out. Written on the socket, not through the response:
 * the request may be on its way to an agent or origin, whose answer must then find the connection gone (the
 * forwarders see the response close and cancel), not a response already sent.
 */
function answerStall({ res, req }: Watched): boolean {
  const socket = req.socket;
  const answer = !res.headersSent && socket.writable && (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage === res;
  if (answer) {
    socket.end(RAW_ANSWERS.request_timeout);
    socket.destroySoon();
  } else socket.destroy();
  return answer;
}
