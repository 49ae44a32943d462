// Runs node:http2 over a tunnel link (the WebSocket transport here, the raw socket in raw.ts): the edge is the
// HTTP/2 client, the agent the server. It mends what ws.createWebSocketStream lacks and holds shared tuning and keepalive.
import http2, { type ClientHttp2Session, type Http2Session, type ServerHttp2Session } from 'node:http2';
import type { Duplex } from 'node:stream';
import { createWebSocketStream, type WebSocket } from 'ws';

/**
 * Largest WebSocket message either side accepts (ws `maxPayload`). Outgoing writes are coalesced into messages of
 * at most COALESCE_BYTES, and a single HTTP/2 frame is at most 16 KiB + 9 (the SETTINGS_MAX_FRAME_SIZE left at its
 * default, RFC 9113 §6.5.2), so a well-behaved peer stays far below it; a hostile one is bounded by it.
 */
export const MAX_MESSAGE_BYTES = 1024 * 1024;
const COALESCE_BYTES = 256 * 1024;

export interface TunnelTuning {
  /**
   * SETTINGS_INITIAL_WINDOW_SIZE (RFC 9113 §6.5.2): bytes a peer may send on one stream before the receiver
   * consumes them. Node consumes a stream's window only as the JS side reads, so this is also the most one stalled
   * stream buffers. 64 KiB (the default) caps a stream at 64 KiB per round trip; 1 MiB allows ~10 MB/s at 100 ms.
   */
  streamWindowBytes: number;
  /** Connection-level receive window (RFC 9113 §6.9.1). Node consumes it as bytes arrive, so it never stalls alone. */
  connectionWindowBytes: number;
  /** SETTINGS_MAX_CONCURRENT_STREAMS the agent grants the edge (RFC 9113 §5.1.2). */
  maxConcurrentStreams: number;
  /** Node's per-session memory ceiling in MB; beyond it new streams are refused (ENHANCE_YOUR_CALM). */
  maxSessionMemoryMb: number;
  /** Header fields per request or response: Node's HTTP/1.1 default (2000) rather than HTTP/2's default of 128. */
  maxHeaderListPairs: number;
}

export const DEFAULT_TUNING: Readonly<TunnelTuning> = Object.freeze({
  streamWindowBytes: 1024 * 1024,
  connectionWindowBytes: 16 * 1024 * 1024,
  maxConcurrentStreams: 1000,
  maxSessionMemoryMb: 64,
  maxHeaderListPairs: 2000,
});

/** The byte stream under an HTTP/2 session, and what it shows of the peer's liveness. */
export interface TunnelLink {
  stream: Duplex;
  /**
   * Called as a PING goes out; the function returned tells, once the PING is overdue, whether the peer showed
   * itself alive meanwhile: something arrived, or, while our writes were blocked, the kernel accepted more of them
   * (so the peer's TCP is acknowledging).
   */
  watch(): () => boolean;
  /**
   * Cuts the connection at once. session.destroy() alone is not enough on a dead link: Node then ends the socket
   * gracefully, and the ws duplex's end waits for the peer's close frame (ws closeTimeout, 30 s).
   */
  terminate(): void;
}

/**
 * Wraps an OPEN WebSocket (after the handshake frames) as a Duplex for HTTP/2. Call it synchronously in the
 * handler of the last handshake message: the peer's first HTTP/2 bytes may arrive in the same TCP read, and ws
 * emits 'message' events back to back, so a later call would lose them (we saw "bad client magic byte string").
 *
 * Repairs over a bare createWebSocketStream:
 * 1. Lifecycle. When the WebSocket closes, the duplex only pushes EOF; it emits 'close' solely from destroy(), and
 *    its _final waits for the TCP socket's 'finish', which never comes once the socket was destroyed. Node's
 *    HTTP/2 session (through its JSStreamSocket wrapper) ends only on the wrapped stream's 'close', so the side
 *    whose own socket died kept a session that looked open forever; worse, its shutdown stayed pending and the
 *    next HTTP/2 write (a PING) tripped `assert(this[kCurrentShutdownRequest] === null)` in JSStreamSocket.doWrite,
 *    an ERR_INTERNAL_ASSERTION that crashed the process. Here the duplex is destroyed once the WebSocket has
 *    closed and the session has read everything already received.
 * 2. Coalescing. Node writes each HTTP/2 flush as a batch of buffers (frame headers, payloads, 13-byte
 *    WINDOW_UPDATEs); without _writev each became its own WebSocket message and its own socket write, one at a
 *    time. A batch now goes out as one message (7x fewer messages on a 64 MiB transfer).
 * 3. A text message after the handshake is a protocol violation: `onProtocolError` runs (callers close with
 *    4400) and no further message reaches HTTP/2.
 */
export function openTunnelStream(ws: WebSocket, onProtocolError?: (message: string) => void): TunnelLink {
  let receivedAt = performance.now();
  let progressAt = receivedAt;
  let pendingWrites = 0;
  let violated = false;
  // Registered before createWebSocketStream's own listener, which then pushes the same message into the stream.
  ws.prependListener('message', (_data, isBinary) => {
    receivedAt = performance.now();
    if (!isBinary && !violated) {
      violated = true;
      onProtocolError?.('text frame after the handshake');
    }
  });
  const stream = createWebSocketStream(ws);
  // After a violation nothing more reaches the HTTP/2 parser (EOF still does, so the session ends normally).
  // Destroying the stream instead would make ws terminate the socket before the close frame got out; answering
  // false would make ws pause the socket, and the peer's closing frame would never be read.
  const push = stream.push.bind(stream);
  stream.push = (chunk: unknown, encoding?: BufferEncoding) => (violated && chunk !== null ? true : push(chunk, encoding));

  const send = (data: Buffer, callback: (err?: Error | null) => void) => {
    pendingWrites++;
    ws.send(data, (err) => {
      pendingWrites--;
      if (!err) progressAt = performance.now();
      callback(err);
    });
  };
  stream._write = (chunk: Buffer, _encoding, callback) => send(chunk, callback);
  stream._writev = (chunks, callback) => {
    // Split a very large batch so no message approaches the peer's maxPayload.
    let pending: Buffer[] = [];
    let size = 0;
    const messages: Buffer[] = [];
    for (const { chunk } of chunks as Array<{ chunk: Buffer }>) {
      if (size > 0 && size + chunk.length > COALESCE_BYTES) {
        messages.push(Buffer.concat(pending, size));
        pending = [];
        size = 0;
      }
      pending.push(chunk);
      size += chunk.length;
    }
    if (size > 0) messages.push(pending.length === 1 ? pending[0] : Buffer.concat(pending, size));
    for (let i = 0; i < messages.length - 1; i++) ws.send(messages[i]);
    send(messages[messages.length - 1], callback);
  };

  const destroy = () => {
    if (!stream.destroyed) stream.destroy();
  };
  ws.once('close', () => {
    // createWebSocketStream has pushed EOF (its listener runs first). Let HTTP/2 read what is buffered, then end.
    if (stream.destroyed || stream.readableEnded) return destroy();
    stream.once('end', destroy);
    // HTTP/2 stops reading while one of its writes is pending; a write to a closed WebSocket fails and destroys
    // the stream, so 'end' or 'close' always follows. The timer is a backstop, not a path a test relies on.
    const backstop = setTimeout(destroy, 5_000);
    backstop.unref();
    stream.once('close', () => clearTimeout(backstop));
  });
  // A completed write alone proves nothing (a dead peer's kernel buffer still takes the PING itself); it counts
  // only while writes are queued, which is also when Node's HTTP/2 stops reading and so cannot see the ACK.
  const watch = () => {
    const t = performance.now();
    return () => receivedAt > t || (pendingWrites > 0 && progressAt > t);
  };
  return { stream, watch, terminate: () => ws.terminate() };
}

/** The edge's side: an HTTP/2 client session over the tunnel. `:authority` is set per request, never from here. */
export function connectTunnelClient(link: TunnelLink, tuning: TunnelTuning = DEFAULT_TUNING): ClientHttp2Session {
  const session = http2.connect('http://agent.invalid', {
    createConnection: () => link.stream,
    maxSessionMemory: tuning.maxSessionMemoryMb,
    maxHeaderListPairs: tuning.maxHeaderListPairs,
    // The agent never pushes (RFC 9113 §8.4); the edge opens every stream.
    settings: { enablePush: false, initialWindowSize: tuning.streamWindowBytes },
  });
  setConnectionWindow(session, tuning);
  return session;
}

/** The agent's side: an HTTP/2 server session over the tunnel (http2.performServerHandshake, Node ≥ 20.12). */
export function acceptTunnelServer(link: TunnelLink, tuning: TunnelTuning = DEFAULT_TUNING): ServerHttp2Session {
  const session = http2.performServerHandshake(link.stream, {
    maxSessionMemory: tuning.maxSessionMemoryMb,
    maxHeaderListPairs: tuning.maxHeaderListPairs,
    settings: {
      initialWindowSize: tuning.streamWindowBytes,
      maxConcurrentStreams: tuning.maxConcurrentStreams,
      // CONNECT with :protocol (RFC 8441) is not used: WebSocket upgrades travel as plain CONNECT byte streams.
      enableConnectProtocol: false,
    },
  });
  setConnectionWindow(session, tuning);
  return session;
}

function setConnectionWindow(session: Http2Session, tuning: TunnelTuning): void {
  // The connection window starts at 65,535 whatever SETTINGS say (RFC 9113 §6.9.2); only WINDOW_UPDATE raises it.
  if (tuning.connectionWindowBytes > 65_535) session.setLocalWindowSize(tuning.connectionWindowBytes);
}

export interface KeepaliveOptions {
  /** Time between PINGs (RFC 9113 §6.7). */
  intervalMs: number;
  /** How long a PING may stay unanswered while nothing else arrives or leaves either. */
  timeoutMs: number;
}

export const DEFAULT_KEEPALIVE: Readonly<KeepaliveOptions> = Object.freeze({ intervalMs: 20_000, timeoutMs: 15_000 });

/**
 * Sends a PING every interval and calls `onDead` when one goes unanswered for `timeoutMs` and the link showed no
 * other sign of life meanwhile. The second condition matters on slow links: the ACK can queue behind megabytes
 * of DATA in the peer's socket buffer, and Node's HTTP/2 stops reading while its own write is pending, so a busy
 * but healthy connection must not be cut. A dead one accepts no writes and delivers nothing.
 */
export function startKeepalive(session: Http2Session, link: TunnelLink, options: KeepaliveOptions, onDead: (reason: string) => void): () => void {
  let waiting: NodeJS.Timeout | null = null;
  let aliveSince: () => boolean = () => true;
  const check = () => {
    waiting = null;
    if (aliveSince()) return; // alive, just busy; the next tick pings again
    stop();
    onDead(`no PING acknowledgement or other traffic for ${options.timeoutMs} ms`);
  };
  const tick = () => {
    if (waiting || session.destroyed) return;
    aliveSince = link.watch();
    let sent = false;
    try {
      sent = session.ping((err) => {
        // An error means the session is going away; its own 'close' handles that.
        if (!err && waiting) {
          clearTimeout(waiting);
          waiting = null;
        }
      });
    } catch {
      return; // destroyed between the check and the call
    }
    if (sent) {
      waiting = setTimeout(check, options.timeoutMs);
      waiting.unref();
    }
  };
  const interval = setInterval(tick, options.intervalMs);
  interval.unref();
  function stop() {
    clearInterval(interval);
    if (waiting) clearTimeout(waiting);
    waiting = null;
  }
  session.once('close', stop);
  return stop;
}
