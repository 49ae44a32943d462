// Forwarding a visitor's request to one agent over its tunnel: an HTTP/2 stream per request, bodies streamed both
// ways with HTTP/2 flow control as the backpressure, so no body is ever held whole in memory.
import type { OutgoingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ClientHttp2Stream, IncomingHttpHeaders, IncomingHttpStatusHeader } from 'node:http2';
import { isConnectionSpecific, toHttp1ResponseHeaders } from '../../shared/tunnel/headers.ts';
import { cancelStream } from '../../shared/tunnel/reset.ts';
import type { AgentSession } from '../tunnels/registry.ts';
import { sendEdgeError } from '../http/pages.ts';
import { forwardedHeaders, tunnelRequestHeaders, type ForwardRequest } from '../http/proxy-headers.ts';


/** Resolves when the exchange is over (answered, failed or abandoned by the visitor). */
export function forwardToAgent(session: AgentSession, f: ForwardRequest): Promise<void> {
  const { req, res } = f;
  return new Promise((resolve) => {
    // RFC 9112 §6.3: a request with neither Content-Length nor Transfer-Encoding has no body. END_STREAM then goes
    // with the HEADERS frame, and the request side needs no pipe from the visitor.
    const length = req.headers['content-length'];
    // A body a stage read whole (webhook verification) goes from memory instead.
    const bodyless = f.body !== undefined ? f.body.length === 0 : req.headers['transfer-encoding'] === undefined && (length === undefined || length === '0');
    let stream: ClientHttp2Stream;
    try {
      stream = session.request(tunnelRequestHeaders(req, f, f.method, f.target), { endStream: bodyless });
    } catch {
      sendEdgeError(res, 'agent_error', req.headers.accept, 'the agent connection is closing');
      return resolve();
    }
    let gone = false;
    stream.on('response', (headers) => {
      res.writeHead(headers[':status'] as number, http1ResponseFields(headers));
      stream.pipe(res);
    });
    stream.on('trailers', (trailers) => res.addTrailers(toHttp1ResponseHeaders(trailers) as Record<string, string>));
    stream.on('error', () => {
      if (gone) return;
      if (!res.headersSent) sendEdgeError(res, 'agent_error', req.headers.accept);
      else res.destroy();
    });
    stream.on('close', () => {
      if (!gone && !res.headersSent) sendEdgeError(res, 'agent_error', req.headers.accept);
      resolve();
    });
    // The visitor went away: cancel the stream so the agent stops working for nobody, and so that a body cut short
    // never reaches the local service looking complete (see shared/tunnel/reset.ts).
    res.on('close', () => {
      if (res.writableFinished || stream.closed) return;
      gone = true;
      cancelStream(stream);
    });
    if (!bodyless) {
      if (f.body !== undefined) stream.end(f.body);
      else req.pipe(stream);
    }
  });
}

/**
 * The agent's response fields for res.writeHead, reusing the object Node built for the 'response' event instead of
 * copying it: `:status` goes, and so would connection-specific fields, which HTTP/2 forbids and nghttp2 already
 * refuses (RFC 9113 §8.2.2), so the loop finds none in practice.
 */
function http1ResponseFields(headers: IncomingHttpHeaders & IncomingHttpStatusHeader): OutgoingHttpHeaders {
  for (const name in headers) {
    if (name.charCodeAt(0) === 58 /* ':' */ || isConnectionSpecific(name)) delete headers[name];
    else if (name === 'te' && String(headers.te).toLowerCase() !== 'trailers') delete headers.te;
  }
  return headers as OutgoingHttpHeaders;
}

/**
 * A visitor's WebSocket (or other) upgrade, carried as raw bytes over a CONNECT stream: the HTTP/1.1 upgrade
 * request is replayed to the agent's local service, which answers the 101 itself, end to end.
 */
export function forwardUpgrade(session: AgentSession, f: Omit<ForwardRequest, 'res'>, socket: Duplex, head: Buffer): void {
  const { req } = f;
  let stream;
  try {
    stream = session.connect(req.headers.host ?? f.host);
  } catch {
    socket.end('HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
    return;
  }
  const headers = forwardedHeaders(req.headers, f);
  let head1 = `${f.method} ${f.target} HTTP/1.1\r\n`;
  for (const [name, value] of Object.entries(headers)) {
    for (const v of Array.isArray(value) ? value : [value]) if (v !== undefined) head1 += `${name}: ${v}\r\n`;
  }
  stream.on('response', (h) => {
    if (Number(h[':status']) !== 200) {
      socket.end('HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
      stream.close();
      return;
    }
    stream.write(head1 + '\r\n');
    if (head.length > 0) stream.write(head);
    stream.pipe(socket);
    socket.pipe(stream);
  });
  // A reset, not stream.close(CANCEL), whose END_STREAM would reach the agent first as a clean FIN.
  const end = () => {
    socket.destroy();
    if (!stream.closed) cancelStream(stream);
  };
  stream.on('error', end);
  stream.on('close', () => socket.end());
  socket.on('error', end);
  socket.on('close', () => {
    if (!stream.closed) cancelStream(stream);
  });
}
