// The raw tunnel transport: after an HTTP/1.1 Upgrade to `edge-tunnel/2`, HTTP/2 runs on the TCP or TLS socket
// itself, so frames take Node's native stream path; the hello/welcome travel first as length-prefixed JSON frames.
import type { Socket } from 'node:net';
import type { TunnelLink } from './transport.ts';

/**
 * The Upgrade token (RFC 9110 §7.8) of the raw transport. The `/2` names this framing (handshake frames, then
 * HTTP/2 on the socket); the WebSocket transport is the first one, kept as the fallback.
 */
export const RAW_UPGRADE_TOKEN = 'edge-tunnel/2';

/** The two ways to carry a tunnel; `auto` (agents only) tries raw and falls back to WebSocket. */
export const TUNNEL_TRANSPORTS = ['raw', 'ws'] as const;
export type TunnelTransport = (typeof TUNNEL_TRANSPORTS)[number];

/** Length prefix of a handshake frame: a 32-bit big-endian byte count, then that many bytes of UTF-8 JSON. */
const PREFIX_BYTES = 4;

/** Whether an Upgrade field value names the raw transport (tokens compare case-insensitively, RFC 9110 §7.8). */
export function asksForRawTunnel(upgrade: string | undefined): boolean {
  return hasUpgradeToken(upgrade, RAW_UPGRADE_TOKEN);
}

/** Whether an Upgrade field value lists `token` (lower case). */
export function hasUpgradeToken(upgrade: string | undefined, token: string): boolean {
  if (!upgrade) return false;
  return upgrade.split(',').some((t) => t.trim().toLowerCase() === token);
}

/** One handshake frame (hello, welcome or refused) as it goes on the socket. */
export function encodeHandshakeFrame(json: string): Buffer {
  const body = Buffer.from(json, 'utf8');
  const frame = Buffer.allocUnsafe(PREFIX_BYTES + body.length);
  frame.writeUInt32BE(body.length, 0);
  body.copy(frame, PREFIX_BYTES);
  return frame;
}

export type FrameResult = { ok: true; frame: Buffer; rest: Buffer } | { ok: false; message: string };

/**
 * Reads one handshake frame from `socket` (after `initial`, the bytes already read behind the HTTP head), then
 * stops reading and calls `done` with the frame and whatever followed it in the same reads. A declared length
 * over `maxBytes` fails at once, before the body is waited for. Returns a function that stops waiting.
 */
export function readHandshakeFrame(socket: Socket, initial: Buffer, maxBytes: number, done: (result: FrameResult) => void): () => void {
  let buffered = initial;
  let finished = false;
  const finish = (result: FrameResult) => {
    if (finished) return;
    finished = true;
    socket.off('data', onData);
    socket.pause();
    done(result);
  };
  const check = () => {
    if (buffered.length < PREFIX_BYTES) return;
    const length = buffered.readUInt32BE(0);
    if (length > maxBytes) return finish({ ok: false, message: `frame of ${length} bytes exceeds the limit of ${maxBytes}` });
    if (buffered.length < PREFIX_BYTES + length) return;
    finish({ ok: true, frame: buffered.subarray(PREFIX_BYTES, PREFIX_BYTES + length), rest: buffered.subarray(PREFIX_BYTES + length) });
  };
  const onData = (chunk: Buffer) => {
    buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
    check();
  };
  socket.on('data', onData);
  check();
  return () => {
    finished = true;
    socket.off('data', onData);
  };
}

/** Counters of the TCP handle under a socket (a TLS socket's TLSWrap sits on one): libuv's, not JS's. */
interface HandleCounters {
  bytesRead: number;
  bytesWritten: number;
  writeQueueSize: number;
}

function tcpHandle(socket: Socket): HandleCounters | null {
  let handle = (socket as unknown as { _handle?: { _parent?: unknown } | null })._handle;
  // A TLS socket's handle is a TLSWrap, which takes writes into its own buffer even when TCP is blocked; the TCP
  // handle under it shows what the kernel accepted.
  while (handle && handle._parent) handle = handle._parent as typeof handle;
  const h = handle as unknown as Partial<HandleCounters> | null | undefined;
  return h && typeof h.bytesRead === 'number' && typeof h.bytesWritten === 'number' && typeof h.writeQueueSize === 'number' ? (h as HandleCounters) : null;
}

/**
 * The socket as a TunnelLink. Call it just before handing the socket to node:http2, with any bytes read past the
 * handshake already unshifted: Node's session reads them from the socket's buffer first (it does, since 20.x).
 * Node calls setNoDelay on a socket it takes for HTTP/2 itself.
 *
 * Liveness comes from libuv's counters, since no JS sees the bytes any more: the TCP handle's bytesRead moved
 * (something arrived), or, while a write is queued in libuv (writeQueueSize > 0, the kernel buffer is full), its
 * bytesWritten moved (the kernel took more, so the peer's TCP is acknowledging). Node's HTTP/2 keeps one write in
 * flight and stops reading meanwhile, so on a slow link the PING ACK can sit unread behind it. Where the handle
 * shows no counters (a future Node), bytes read through the socket are the only sign.
 */
export function openRawLink(socket: Socket): TunnelLink {
  const watch = () => {
    const handle = tcpHandle(socket);
    if (!handle) {
      const read = socket.bytesRead;
      return () => socket.bytesRead > read;
    }
    const read = handle.bytesRead;
    const written = handle.bytesWritten;
    return () => handle.bytesRead > read || (handle.writeQueueSize > 0 && handle.bytesWritten > written);
  };
  return { stream: socket, watch, terminate: () => socket.destroy() };
}
