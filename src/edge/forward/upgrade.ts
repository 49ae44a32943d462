// Relaying a visitor's WebSocket upgrade to an agent's local service or an origin, one way for both: the upgrade
// request goes out through Node's own HTTP client, so only a 101 Switching Protocols makes the connection a byte pipe.
import { ServerResponse, type ClientRequest, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { ErrorCode } from '../../shared/errors.ts';
import { endToEndHeaders } from '../../shared/tunnel/headers.ts';
import { answerOf, sendEdgeError, type Answer } from '../http/pages.ts';
import { originRequestHeaders, type ForwardRequest } from '../http/proxy-headers.ts';
import { finalStatus } from './status.ts';

/**
 * Why the edge will not carry an upgrade request, or null when it will. Only WebSocket (RFC 6455), asked the way
 * RFC 6455 §4.1 asks for it (GET, one token): an `h2c` upgrade would reach an HTTP/2 server with a connection the
 * pipeline judges only once, and other tokens name protocols nobody has reviewed. No endpoint setting opts into
 * other tokens yet (no API writes one).
 */
export function upgradeRefusal(req: IncomingMessage): string | null {
  if (req.headers.upgrade?.trim().toLowerCase() !== 'websocket') return 'the edge carries WebSocket upgrades only (Upgrade: websocket)';
  if (req.method !== 'GET') return 'a WebSocket upgrade is a GET request (RFC 6455 §4.1)';
  return null;
}

/**
 * The upgrade request's fields: the visitor's end-to-end ones and the edge's forwarding fields (the same pass as for
 * origin requests, so hop-by-hop fields and those Connection names stay behind), `host` as given, and the two
 * fields that ask for the upgrade, set by the edge rather than copied (RFC 9110 §7.8: Upgrade is hop-by-hop).
 */
export function upgradeRequestHeaders(f: Omit<ForwardRequest, 'res'>, host: string): Record<string, string | string[]> {
  const headers = originRequestHeaders(f.req, f, host);
  headers.connection = 'Upgrade';
  headers.upgrade = 'websocket';
  return headers;
}

/** How long a connection the edge is closing may go on sending before it is cut. */
const LINGER_MS = 2_000;

/**
 * Closes an upgrade connection after what was written to it. Closing a socket with unread input makes the kernel
 * send a RST, which can destroy the answer before the visitor reads it; so the edge sends its FIN, then reads and
 * drops what still arrives until the visitor closes too, for LINGER_MS at most.
 */
export function closeConnection(socket: Duplex): void {
  if (socket.destroyed) return;
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
  socket.once('end', () => socket.destroy());
  socket.end();
  socket.resume();
}

/**
 * A response written on an upgrade's raw socket (Node hands upgrades over without one): `Connection: close`, and
 * the connection closed once it is sent. Refusals, stage answers and relayed non-101 answers all use it.
 */
export function responseOnSocket(req: IncomingMessage, socket: Duplex): ServerResponse {
  const res = new ServerResponse(req);
  lastResponse.set(socket, res);
  res.assignSocket(socket as Socket);
  res.shouldKeepAlive = false;
  res.on('finish', () => closeConnection(socket));
  return res;
}

/** The last response bound to each upgrade's socket (a stage's refusal, a failure page, a relayed non-101 answer). */
const lastResponse = new WeakMap<Duplex, ServerResponse>();
/** Upgrades the upstream switched: their visitor got a 101 and then bytes both ways. */
const switched = new WeakSet<Duplex>();

/**
 * What an upgrade's visitor was answered, for its span and access-log line once its connection closed: 101 when it
 * was switched, else the status (and the edge's error code) of the response written to it; status 0 when none was.
 */
export function upgradeAnswer(socket: Duplex): Answer {
  if (switched.has(socket)) return { status: 101 };
  const res = lastResponse.get(socket);
  return res === undefined ? { status: 0 } : answerOf(res);
}

export interface UpgradeRelay {
  /** The visitor's upgrade request, its socket and the bytes already read past its head. */
  req: IncomingMessage;
  socket: Duplex;
  head: Buffer;
  /** The page a visitor gets when the upstream fails before answering. */
  failure: Extract<ErrorCode, 'agent_error' | 'origin_error'>;
  /** Ends the upstream connection for good (a CONNECT stream is reset, a socket destroyed). */
  teardown(): void;
  /** Told of an upstream failure (a refused origin address is logged). */
  onError?(err: Error): void;
}

/**
 * Sends the upgrade request `out` (built but not ended by the caller, on a connection to the local service or the
 * origin) and relays its answer:
 * - a 101 whose Upgrade is websocket: the 101 goes to the visitor, then bytes both ways (the visitor's first
 *   bytes, read with the request head, go only now: nothing of the visitor's reaches the upstream before the 101);
 * - any other final answer: relayed as an ordinary response with `Connection: close`, and the connection closed.
 *   A service that ignores Upgrade thus answers one request, and the visitor's next one never reaches it unjudged.
 * - no answer: the `failure` page.
 */
export function relayUpgrade(out: ClientRequest, relay: UpgradeRelay): void {
  const { req, socket, head } = relay;
  // Once anything was written to the visitor, a failure can only cut the connection.
  let answered = false;
  let finished = false;
  const end = () => {
    if (finished) return;
    finished = true;
    relay.teardown();
    out.destroy();
  };
  const fail = (err?: Error) => {
    if (err) relay.onError?.(err);
    if (!answered && !socket.destroyed) {
      answered = true;
      sendEdgeError(responseOnSocket(req, socket), relay.failure, req.headers.accept);
    } else socket.destroy();
    end();
  };

  out.on('upgrade', (res: IncomingMessage, upstream: Duplex, upstreamHead: Buffer) => {
    // RFC 9110 §7.8: the 101 names the protocol switched to, which must be the one asked for.
    if (res.headers.upgrade?.trim().toLowerCase() !== 'websocket') return fail();
    answered = true;
    switched.add(socket);
    socket.write(switchingProtocolsHead(res), 'latin1');
    if (upstreamHead.length > 0) socket.write(upstreamHead);
    if (head.length > 0) upstream.write(head);
    upstream.on('error', () => {
      socket.destroy();
      end();
    });
    upstream.on('close', () => socket.end());
    upstream.pipe(socket);
    socket.pipe(upstream);
  });
  out.on('response', (res: IncomingMessage) => {
    // Node reports a 101 without Upgrade/Connection fields as an ordinary response: not a switch, and no answer;
    // nor is a status writeHead would throw on, from this listener, where nothing would catch it (./status.ts).
    const status = finalStatus(res.statusCode);
    if (status === null) return fail();
    const page = responseOnSocket(req, socket);
    try {
      page.writeHead(status, res.statusMessage, endToEndHeaders(res.headers) as Record<string, string | string[]>);
    } catch (err) {
      // Nothing was written: the socket goes back for fail()'s page.
      page.detachSocket(socket as Socket);
      return fail(err as Error);
    }
    answered = true;
    // A body cut short must not look complete: the visitor's connection is cut instead of ended.
    res.on('close', () => {
      if (!res.complete) page.destroy();
    });
    res.on('error', () => {});
    res.pipe(page);
  });
  out.on('error', (err) => fail(err));
  socket.on('error', () => socket.destroy());
  socket.on('close', end);
  out.end();
}

/** The upstream's 101 head as it sent it (field lines as received; Node validated them). */
function switchingProtocolsHead(res: IncomingMessage): string {
  let head = `HTTP/1.1 101 ${res.statusMessage || 'Switching Protocols'}\r\n`;
  const raw = res.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) head += `${raw[i]}: ${raw[i + 1]}\r\n`;
  return head + '\r\n';
}
