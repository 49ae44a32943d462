// The agent's side of the relay: an HTTP/2 listener with mutual TLS that takes streams other edges judged already
// and hands each to a local agent session, byte for byte both ways. It never relays again (one hop at most).
import http2, { type Http2SecureServer, type IncomingHttpHeaders, type ServerHttp2Stream, type ClientHttp2Stream } from 'node:http2';
import type { TLSSocket } from 'node:tls';
import type { Logger } from '../../shared/log.ts';
import { cancelStream } from '../../shared/tunnel/reset.ts';
import type { TunnelRegistry } from '../tunnels/registry.ts';
import { listen } from '../http/listen.ts';
import type { RelayCredentials } from './credentials.ts';
import { readRelayFields, withoutRelayFields } from './headers.ts';

const { NGHTTP2_REFUSED_STREAM, NGHTTP2_INTERNAL_ERROR, NGHTTP2_FLAG_END_STREAM } = http2.constants;

export interface RelayServerOptions {
  registry: TunnelRegistry;
  credentials: RelayCredentials;
  logger: Logger;
}

/** What the listener has done since it started, for the ops port's metrics. */
export interface RelayServerCounts {
  /** Streams taken and handed to a local agent. */
  accepted: number;
  /** Streams refused: no local agent matches, fields malformed. */
  refused: number;
  /** Streams in flight now. */
  active: number;
}

export class RelayServer {
  readonly counts: RelayServerCounts = { accepted: 0, refused: 0, active: 0 };
  private readonly server: Http2SecureServer;
  private readonly log: Logger;
  private readonly sessions = new Set<http2.ServerHttp2Session>();

  constructor(private readonly options: RelayServerOptions) {
    this.log = options.logger.child({ component: 'relay' });
    const { ca, cert, key } = options.credentials;
    // Only a peer presenting a certificate from the cluster's CA gets past the handshake; nothing else is served.
    this.server = http2.createSecureServer({ ca, cert, key, requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.3', allowHTTP1: false });
    this.server.on('stream', (stream, headers, flags) => this.take(stream, headers, flags));
    this.server.on('tlsClientError', (err: Error & { code?: string }, socket: TLSSocket) =>
      this.log.warn({ remote: socket.remoteAddress, code: err.code, err: err.message }, 'relay connection refused at TLS'),
    );
    this.server.on('sessionError', () => {});
    this.server.on('session', (session) => {
      this.sessions.add(session);
      session.on('close', () => this.sessions.delete(session));
    });
  }

  listen(port: number, host: string): Promise<number> {
    return listen(this.server, port, host);
  }

  private take(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number): void {
    stream.on('error', () => {});
    const target = readRelayFields(headers);
    // REFUSED_STREAM: nothing was done with the stream, so the relaying edge answers as for a missing agent.
    const session = target && this.options.registry.pick(target.endpoint, target.pick);
    if (!target || !session) {
      this.counts.refused++;
      stream.close(NGHTTP2_REFUSED_STREAM);
      return;
    }
    const out = withoutRelayFields(headers);
    const endStream = (flags & NGHTTP2_FLAG_END_STREAM) !== 0;
    let upstream: ClientHttp2Stream;
    try {
      upstream = headers[':method'] === 'CONNECT' ? session.connect(String(headers[':authority'])) : session.request(out, { endStream });
    } catch {
      // The session began draining between pick and use.
      this.counts.refused++;
      stream.close(NGHTTP2_REFUSED_STREAM);
      return;
    }
    this.counts.accepted++;
    this.counts.active++;
    this.pipe(stream, upstream, endStream, headers.te === 'trailers');
  }

  /** Joins the relayed stream and the agent's: answer, bodies, trailers; a reset on either side resets the other. */
  private pipe(stream: ServerHttp2Stream, upstream: ClientHttp2Stream, endStream: boolean, wantsTrailers: boolean): void {
    let trailers: IncomingHttpHeaders | undefined;
    upstream.on('response', (h) => {
      try {
        stream.respond(h, { waitForTrailers: wantsTrailers });
      } catch {
        // An answer HTTP/2 cannot carry (a bad :status): the relaying edge sees a reset and answers agent_error.
        stream.close(NGHTTP2_INTERNAL_ERROR);
        cancelStream(upstream);
        return;
      }
      upstream.pipe(stream);
    });
    upstream.on('trailers', (t) => (trailers = t));
    stream.on('wantTrailers', () => stream.sendTrailers(trailers ?? {}));
    upstream.on('error', () => {});
    upstream.on('close', () => {
      // Ended without a clean finish (reset by the agent, tunnel lost): the relaying edge must see a cut, not an end.
      if (!stream.closed && (upstream.rstCode ?? 0) !== 0) stream.close(stream.headersSent ? upstream.rstCode : NGHTTP2_INTERNAL_ERROR);
      else if (!stream.headersSent && !stream.closed) stream.close(NGHTTP2_INTERNAL_ERROR);
    });
    stream.on('close', () => {
      this.counts.active--;
      if (!upstream.closed) cancelStream(upstream);
    });
    if (!endStream) stream.pipe(upstream);
  }

  /** Stops accepting; streams in flight get `graceMs` to finish, then every peer connection is cut. */
  close(graceMs = 2_000): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const session of this.sessions) session.close();
    const timer = setTimeout(() => {
      for (const session of this.sessions) session.destroy();
    }, graceMs);
    return closed.finally(() => clearTimeout(timer));
  }
}
