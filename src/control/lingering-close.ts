// Lingering close (as nginx does it) for control API responses sent before the request body was read: the client
// reads the status (a 413, a parse error) instead of a connection reset while it is still sending.
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

export interface LingerLimits {
  /** Close when the client sends nothing for this long (nginx's lingering_timeout). */
  idleMs: number;
  /** Close after this long in all, however the client sends (nginx's lingering_time). */
  maxMs: number;
  /** Close once this much has been discarded: what a refused request may still cost the server. */
  maxBytes: number;
}

export const LINGER_LIMITS: LingerLimits = { idleMs: 5_000, maxMs: 30_000, maxBytes: 64 * 1024 * 1024 };

/** How often the limits are checked while lingering. */
const CHECK_EVERY_MS = 100;

/** The request whose unread body a socket's close waits for: the latest one armed on that (kept-alive) socket. */
const armed = new WeakMap<Socket, { req: IncomingMessage; limits: LingerLimits }>();

/**
 * Arms the lingering close of the request's connection, for a response about to be sent while the body is unread.
 *
 * Fastify marks such a response `Connection: close` (it will not read a refused body), and Node then destroys the
 * socket as soon as the response is flushed. The body keeps arriving; the kernel answers bytes for a closed socket
 * with a reset, so a client still writing gets EPIPE or ECONNRESET, often before it has read the status. Instead,
 * once the response is out the write side is shut (FIN) and the rest of the body is read and discarded; the socket
 * closes when the body has ended, or at the first limit reached (idle time, total time, bytes; checked every 100 ms,
 * so the byte limit is approximate). If the connection is kept alive instead, Node reads the body past on its own and
 * nothing here runs.
 */
export function lingerBeforeClose(req: IncomingMessage, limits: LingerLimits = LINGER_LIMITS): void {
  const socket = req.socket;
  const wasArmed = armed.has(socket);
  armed.set(socket, { req, limits });
  if (wasArmed) return;
  // Node closes a connection after its last response through this method (after flushing, end() then destroy()).
  socket.destroySoon = () => {
    const { req: last, limits: bounds } = armed.get(socket)!;
    linger(socket, last, bounds);
  };
}

function linger(socket: Socket, req: IncomingMessage, limits: LingerLimits): void {
  socket.end();
  // Node reads a refused body past without handing it to JavaScript (the parser consumes the socket directly), so
  // the limits are checked on the socket's byte count at short intervals rather than per chunk.
  const start = socket.bytesRead;
  const began = Date.now();
  let seen = start;
  let quietSince = began;
  const watch = setInterval(() => {
    const now = Date.now();
    if (socket.bytesRead !== seen) [seen, quietSince] = [socket.bytesRead, now];
    if (seen - start > limits.maxBytes || now - quietSince >= limits.idleMs || now - began >= limits.maxMs) finish(true);
  }, Math.min(CHECK_EVERY_MS, limits.idleMs)).unref();
  const done = () => finish(false);
  const release = () => {
    clearInterval(watch);
    req.off('end', done).off('close', done).off('error', done);
    socket.off('close', release);
  };
  function finish(cut: boolean) {
    release();
    // At a limit the connection is cut; once the body has ended nothing unread is left, and the response is let
    // finish flushing first, as Node's own destroySoon does.
    if (cut || socket.writableFinished) socket.destroy();
    else socket.once('finish', () => socket.destroy());
  }
  // The body's end is known from its framing (Content-Length or the last chunk): the client has nothing more to send.
  req.once('end', done).once('close', done).once('error', done);
  // The client may close first (Node destroys the socket when it ends a body half sent): nothing is left to wait for.
  socket.once('close', release);
  // The body may have ended between the response and now.
  if (req.complete) done();
}
