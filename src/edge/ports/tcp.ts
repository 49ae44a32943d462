// A dedicated TCP port: each visitor connection becomes one CONNECT stream to a tcp agent of the endpoint, raw bytes
// both ways with each side's backpressure and half-close carried through (RFC 9113 §8.5; docs/tunnels.md).
import net from 'node:net';
import http2, { type IncomingHttpHeaders } from 'node:http2';
import { resetSocket } from '../../shared/tunnel/reset.ts';
import { openStream, PortListener, serving } from './listener.ts';

const { NGHTTP2_CANCEL, NGHTTP2_CONNECT_ERROR, NGHTTP2_NO_ERROR } = http2.constants;

export class TcpListener extends PortListener {
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  private drained: (() => void) | null = null;

  protected bind(done: (err: NodeJS.ErrnoException | null) => void): void {
    // allowHalfOpen: a visitor's FIN becomes END_STREAM while bytes still flow back (RFC 9113 §8.5); keepAlive
    // finds visitors that vanished without a FIN, which would otherwise hold a stream open for good.
    const server = net.createServer({ allowHalfOpen: true, noDelay: true, keepAlive: true, keepAliveInitialDelay: 60_000 }, (socket) => this.accept(socket));
    const onError = (err: NodeJS.ErrnoException) => {
      server.close();
      done(err);
    };
    server.once('error', onError);
    server.listen({ port: this.port, host: this.settings.host }, () => {
      server.off('error', onError);
      if (this.closed) return void server.close();
      server.on('error', (err) => this.log.warn({ err, port: this.port }, 'dedicated tcp listener error'));
      this.server = server;
      done(null);
    });
  }

  protected unbind(): void {
    this.server?.close();
    this.server = null;
  }

  cut(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  idle(): Promise<void> {
    if (this.sockets.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const previous = this.drained;
      this.drained = () => {
        previous?.();
        resolve();
      };
    });
  }

  private forget(socket: net.Socket): void {
    if (this.sockets.delete(socket) && this.sockets.size === 0 && this.drained) {
      const drained = this.drained;
      this.drained = null;
      drained();
    }
  }

  private accept(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.once('close', () => this.forget(socket));
    socket.on('error', () => {}); // handled through 'close' below; an unhandled 'error' would crash the edge
    const endpoint = this.settings.config.endpoint(this.endpoint);
    // No agent (or a disabled endpoint): close at once, so the visitor's client fails fast instead of hanging.
    const opened = serving(endpoint) ? openStream(this.settings, endpoint, 'tcp', this.port) : null;
    if (!opened) return void socket.destroy();
    const { stream } = opened;

    // The socket is not read until the tunnel is up: early bytes wait in its buffer, then TCP backpressure holds
    // the visitor, so nothing is lost and nothing piles up.
    let established = false;
    const timer = setTimeout(() => {
      if (!stream.closed) stream.close(NGHTTP2_CANCEL);
      socket.destroy();
    }, this.settings.connectTimeoutMs);
    timer.unref();

    stream.on('error', () => {}); // reported by 'close' with its rstCode
    stream.once('response', (headers: IncomingHttpHeaders) => {
      clearTimeout(timer);
      if (Number(headers[':status']) !== 200) {
        // The agent could not reach its target (502 with a reason, docs/tunnels.md): the visitor sees a close.
        this.log.debug({ endpoint: this.endpoint, status: headers[':status'] }, 'agent refused a dedicated-port connection');
        stream.close(NGHTTP2_CANCEL);
        return void socket.destroy();
      }
      if (socket.destroyed) return void stream.close(NGHTTP2_CANCEL);
      established = true;
      // pipe() both ways: each side's backpressure stops the other reading; HTTP/2 flow control carries it to the
      // agent's local socket. Each end() is a FIN one way only.
      socket.pipe(stream);
      stream.pipe(socket);
    });
    socket.once('close', (hadError) => {
      clearTimeout(timer);
      if (stream.closed || stream.destroyed) return;
      // RFC 9113 §8.5: a TCP error is RST_STREAM CONNECT_ERROR; a visitor gone before the tunnel was up cancels.
      stream.close(hadError && established ? NGHTTP2_CONNECT_ERROR : NGHTTP2_CANCEL);
    });
    stream.once('close', () => {
      clearTimeout(timer);
      if (socket.destroyed) return;
      // RFC 9113 §8.5: a reset stream is answered with a TCP RST, so the visitor sees an abort, not a clean end.
      if (!established || stream.rstCode !== NGHTTP2_NO_ERROR) resetSocket(socket);
      else socket.destroySoon(); // flush what the agent sent, then close
    });
  }
}
