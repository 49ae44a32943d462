// The agent's CONNECT streams (RFC 9113 §8.5): raw bytes to the local target for TCP tunnels and WebSocket
// upgrades, or length-prefixed datagrams to a local UDP socket for udp agents (framing in shared/tunnel/datagram.ts).
import dgram from 'node:dgram';
import net from 'node:net';
import tls from 'node:tls';
import http2, { type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { Logger } from '../shared/log.ts';
import { DatagramDecoder, encodeDatagram } from '../shared/tunnel/datagram.ts';
import { resetSocket } from '../shared/tunnel/reset.ts';
import { AGENT_ERROR_HEADER } from './forward-http.ts';
import type { Target } from './target.ts';

const { NGHTTP2_CONNECT_ERROR, NGHTTP2_NO_ERROR } = http2.constants;

export interface StreamForwarderOptions {
  target: Target;
  logger: Logger;
  /** For an https:// http target (WebSocket upgrades go over TLS too): verify its certificate (default true). */
  verifyTls?: boolean;
  /** A UDP flow with no datagram either way for this long is closed. */
  udpIdleMs?: number;
  /**
   * Bytes of replies from the local UDP service that may queue on a stream the edge reads slowly; beyond it
   * replies are dropped, as a congested network drops datagrams, instead of buffering without bound.
   */
  udpQueueBytes?: number;
}

export const DEFAULT_UDP_IDLE_MS = 120_000;
const DEFAULT_UDP_QUEUE_BYTES = 1024 * 1024;

/** Handles one CONNECT stream. The :authority it names is only logged: the agent dials its own target. */
export function createStreamForwarder(options: StreamForwarderOptions): (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void {
  return options.target.protocol === 'udp' ? (stream) => forwardDatagrams(stream, options) : (stream) => forwardBytes(stream, options);
}

function refuse(stream: ServerHttp2Stream, message: string): void {
  if (stream.destroyed || stream.closed) return;
  if (stream.headersSent) return void stream.close(NGHTTP2_CONNECT_ERROR);
  // A non-2xx answer to CONNECT refuses the tunnel (RFC 9110 §9.3.6); the text says why.
  stream.respond({ ':status': 502, 'content-type': 'text/plain; charset=utf-8', [AGENT_ERROR_HEADER]: 'local_unreachable' });
  stream.end(message);
}

function forwardBytes(stream: ServerHttp2Stream, { target, logger, verifyTls }: StreamForwarderOptions): void {
  // allowHalfOpen: each direction ends on its own. A TCP client's shutdown(SHUT_WR) becomes END_STREAM one way
  // while bytes still flow the other (RFC 9113 §8.5: END_STREAM is the TCP FIN). TLS targets close both ways at
  // once (a close_notify ends the TLS session), which is what their peers expect anyway.
  const socket = target.tls
    ? tls.connect({
        host: target.host,
        port: target.port,
        servername: net.isIP(target.host) ? undefined : target.host,
        rejectUnauthorized: verifyTls ?? true,
      })
    : net.connect({ host: target.host, port: target.port, allowHalfOpen: true });
  let connected = false;

  socket.once(target.tls ? 'secureConnect' : 'connect', () => {
    connected = true;
    if (stream.destroyed || stream.closed) return void socket.destroy();
    socket.setNoDelay(true);
    stream.respond({ ':status': 200 });
    stream.pipe(socket);
    socket.pipe(stream);
  });
  socket.on('error', (err) => {
    if (!connected) {
      logger.warn({ err: err.message }, 'local target unreachable');
      return refuse(stream, `The agent could not reach ${target.display}: ${err.message}\n`);
    }
    // RFC 9113 §8.5: an error on the TCP connection is signaled with RST_STREAM CONNECT_ERROR.
    if (!stream.destroyed) stream.close(NGHTTP2_CONNECT_ERROR);
  });
  stream.on('error', () => {}); // reported by 'close' and its rstCode
  stream.once('close', () => {
    if (socket.destroyed) return;
    // RFC 9113 §8.5: a reset stream is answered with a TCP RST, so the local peer sees an abort, not a clean end.
    if (stream.rstCode !== NGHTTP2_NO_ERROR) resetSocket(socket);
    else socket.destroy();
  });
}

function forwardDatagrams(stream: ServerHttp2Stream, options: StreamForwarderOptions): void {
  const { target, logger } = options;
  const queueLimit = options.udpQueueBytes ?? DEFAULT_UDP_QUEUE_BYTES;
  const socket = dgram.createSocket(net.isIP(target.host) === 6 ? 'udp6' : 'udp4');
  let open = true;
  let connected = false;
  let dropped = 0;
  const close = () => {
    if (!open) return;
    open = false;
    socket.close();
  };

  socket.once('connect', () => {
    connected = true;
    if (stream.destroyed || stream.closed) return close();
    stream.respond({ ':status': 200 });
    // One socket per flow, connected to the target: replies come from it alone and map to this stream alone.
    const decoder = new DatagramDecoder((payload) => {
      if (open) socket.send(payload);
    });
    stream.on('data', (chunk: Buffer) => decoder.push(chunk));
    stream.once('end', () => {
      if (decoder.pendingBytes > 0) logger.debug({ bytes: decoder.pendingBytes }, 'udp stream ended inside a datagram frame');
      stream.end();
      close();
    });
    stream.setTimeout(options.udpIdleMs ?? DEFAULT_UDP_IDLE_MS, () => stream.close(NGHTTP2_NO_ERROR));
  });
  socket.on('message', (message) => {
    if (stream.destroyed || !stream.writable) return;
    if (stream.writableLength > queueLimit) {
      dropped++;
      return;
    }
    stream.write(encodeDatagram(message));
  });
  socket.on('error', (err: NodeJS.ErrnoException) => {
    // On a connected UDP socket, an ICMP port-unreachable for an earlier datagram surfaces as ECONNREFUSED on a
    // later call. UDP promises no delivery, so the flow stays; the local service may start listening later.
    if (err.code === 'ECONNREFUSED') return void logger.debug({ err: err.message }, 'local udp target refused a datagram');
    logger.warn({ err: err.message }, 'local udp socket error');
    if (!connected) refuse(stream, `The agent could not reach ${target.display}: ${err.message}\n`);
    else if (!stream.destroyed) stream.close(NGHTTP2_CONNECT_ERROR);
    close();
  });
  stream.on('error', () => {});
  stream.once('close', () => {
    if (dropped > 0) logger.debug({ dropped }, 'udp replies dropped on a slow stream');
    close();
  });
  socket.connect(target.port, target.host);
}
