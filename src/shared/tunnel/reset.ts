// Resetting a tunnel stream so the peer cannot take what it received for a whole message: the edge cancels the
// stream of a visitor who left, the agent fails the stream of a local response that broke off.
import type { Http2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import { addAbortSignal } from 'node:stream';

/*
 * Not stream.close(code). While the writable side is still open, close() ends it first, and the END_STREAM that
 * queues reaches the peer before the RST_STREAM: a local response cut short arrived at the edge as complete, and a
 * visitor's abandoned chunked upload reached the local service with its terminating chunk. destroy() drops the
 * stream's native handle, and with it anything queued, so only the RST_STREAM goes out.
 */

/** RST_STREAM CANCEL (RFC 9113 §7: the stream is no longer needed). Node maps an AbortError to CANCEL. */
export function cancelStream(stream: Http2Stream): void {
  if (!stream.destroyed) addAbortSignal(AbortSignal.abort(), stream);
}

/** RST_STREAM INTERNAL_ERROR: the message broke off; `reason` is the error the stream emits locally. */
export function failStream(stream: Http2Stream, reason: string): void {
  if (!stream.destroyed) stream.destroy(new Error(reason));
}

/**
 * TCP RST for a socket whose tunnel stream was reset (RFC 9113 §8.5), so its peer sees an abort, not a clean end.
 * Except while the FIN of an END_STREAM that came just before is still queued: libuv refuses to reset a socket with
 * a shutdown pending (uv_tcp_close_reset: EINVAL), Node has already let go of the handle by then, and the socket
 * never closed (the process spun at exit). The other side had ended cleanly, so a plain close is what it gets.
 */
export function resetSocket(socket: Socket): void {
  if (socket.writableEnded && !socket.writableFinished) socket.destroy();
  else socket.resetAndDestroy();
}
