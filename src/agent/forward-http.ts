// The agent's HTTP forwarding: each HTTP/2 request stream from the edge becomes one HTTP/1.1 request to the local
// service, both bodies streamed under backpressure (never buffered whole), the response mapped back to HTTP/2.
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import http2, { type IncomingHttpHeaders, type OutgoingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { Logger } from '../shared/log.ts';
import { addEndToEndFields, toHttp1RequestHeaders } from '../shared/tunnel/headers.ts';
import { failStream } from '../shared/tunnel/reset.ts';
import type { Target } from './target.ts';

/** Header set on answers the agent makes itself, so the edge can tell them from the local service's own. */
export const AGENT_ERROR_HEADER = 'x-edge-agent-error';

export interface HttpForwarderOptions {
  target: Target;
  logger: Logger;
  /** Host header sent to the local service; default: the visitor's host (`:authority`), as ngrok does. */
  hostHeader?: string;
  /** For an https:// target: verify its certificate (default true). */
  verifyTls?: boolean;
}

export interface HttpForwarder {
  handle(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void;
  /** Closes idle keep-alive connections to the local service. */
  close(): void;
}

const { NGHTTP2_NO_ERROR } = http2.constants;

export function createHttpForwarder(options: HttpForwarderOptions): HttpForwarder {
  const { target, logger } = options;
  const lib = target.tls ? https : http;
  const agent = new lib.Agent({ keepAlive: true, maxFreeSockets: 64 });
  const base: https.RequestOptions = {
    host: target.host,
    port: target.port,
    agent,
    setHost: false,
    // Plain HTTP has no SNI; an explicit '' spares http.Agent deriving one from the Host header on every request.
    ...(target.tls
      ? { servername: isIP(target.host) ? undefined : target.host, rejectUnauthorized: options.verifyTls ?? true }
      : { servername: '' }),
  };

  function handle(stream: ServerHttp2Stream, h2headers: IncomingHttpHeaders): void {
    const method = h2headers[':method'] ?? 'GET';
    const path = h2headers[':path'] ?? '/';
    const headers = toHttp1RequestHeaders(h2headers, options.hostHeader);
    let responded = false;
    let completed = false;
    const send = (retry: boolean): http.ClientRequest | null => {
      let req: http.ClientRequest;
      try {
        req = lib.request({ ...base, method, path, headers });
      } catch (err) {
        // HTTP/2 allows a few field bytes HTTP/1.1 does not (Node throws ERR_INVALID_CHAR): refuse this request.
        answerError(stream, 400, 'invalid_request', `The request cannot be sent to the local service over HTTP/1.1: ${(err as Error).message}\n`);
        return null;
      }
      current = req;
      req.on('information', (info) => {
        // 103 Early Hints are worth passing on (RFC 8297); 100 Continue belongs to the local hop only.
        if (info.statusCode === 103 && !stream.headersSent && !stream.destroyed) {
          try {
            const hints: OutgoingHttpHeaders = { ':status': 103 };
            addEndToEndFields(info.rawHeaders, hints);
            stream.additionalHeaders(hints);
          } catch {
            // hints HTTP/2 cannot carry are only hints: drop them
          }
        }
      });
      req.on('response', (res) => onResponse(req, res));
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (responded) return; // the response pipeline reports its own failure
        // A kept-alive socket the local server closed just as it was reused: safe to resend a request that has
        // no body (END_STREAM on its HEADERS), Node's documented pattern for req.reusedSocket.
        if (retry && req.reusedSocket && err.code === 'ECONNRESET' && stream.endAfterHeaders) {
          send(false)?.end();
          return;
        }
        stream.unpipe(req);
        answerError(stream, 502, 'local_unreachable', `The agent could not reach ${target.display}: ${err.message}\n`);
        logger.warn({ err: err.message, method, path }, 'local service unreachable');
      });
      return req;
    };

    const onResponse = (req: http.ClientRequest, res: http.IncomingMessage) => {
      responded = true;
      if (stream.destroyed || stream.closed) {
        res.destroy();
        req.destroy();
        return;
      }
      const status = res.statusCode ?? 502;
      // RFC 9110 §6.4.1: no content after HEAD, 204 or 304; END_STREAM goes with the headers.
      const noBody = method === 'HEAD' || status === 204 || status === 304;
      // One pass over the raw field lines: res.headers is built lazily, so reading it would cost a second copy.
      const fields: OutgoingHttpHeaders = { ':status': status };
      addEndToEndFields(res.rawHeaders, fields);
      const trailers = !noBody && fields.trailer !== undefined;
      try {
        stream.respond(fields, { endStream: noBody, waitForTrailers: trailers });
      } catch (err) {
        // A field HTTP/2 cannot carry (Node validates names and values): fail this request, not the agent.
        res.destroy();
        req.destroy();
        answerError(stream, 502, 'invalid_response', `The local service sent a response the tunnel cannot carry: ${(err as Error).message}\n`);
        return;
      }
      if (trailers) {
        stream.once('wantTrailers', () => {
          try {
            const out: OutgoingHttpHeaders = {};
            addEndToEndFields(res.rawTrailers, out);
            stream.sendTrailers(out);
          } catch {
            failStream(stream, 'the local response trailers cannot be carried over HTTP/2');
          }
        });
      }
      if (noBody) {
        res.resume();
        completed = true;
        closeRequestSide(stream);
        return;
      }
      // pipe, not pipeline: pipeline waits for the HTTP/2 stream's 'finish', which Node never emits when both
      // sides end together (it destroys the stream once nghttp2 closes it, before the shutdown write completes).
      // So pipeline reported ERR_STREAM_PREMATURE_CLOSE for every complete response and ran the failure branch
      // each time (errors built, signals aborted: a quarter of the agent's CPU). Success is the local response's
      // own 'end'; its 'close' without 'end' is a failure.
      res.pipe(stream);
      res.once('end', () => {
        completed = true;
        closeRequestSide(stream);
      });
      res.once('close', () => {
        if (completed) return;
        // Closed first: the edge reset the stream (visitor gone) or the tunnel dropped, and the handler below
        // destroyed this request. Otherwise the local service cut its response short.
        if (stream.destroyed || stream.closed) return void req.destroy();
        // A truncated response must not look complete: reset the stream so the edge aborts the visitor's.
        failStream(stream, 'the local response ended before its body was complete');
        req.destroy();
        logger.warn({ method, path, status }, 'local service ended its response before the body was complete');
      });
    };

    let current: http.ClientRequest | null = null;
    const first = send(true);
    if (!first) return;
    if (stream.endAfterHeaders) {
      // No body (END_STREAM came with the HEADERS). The request stream stays unread, which also makes Node wait
      // for our response's last write before destroying the stream: one read to its end is destroyed as soon as
      // nghttp2 closes it, and the write completing after that built an ERR_STREAM_DESTROYED that nobody saw
      // (Writable's errorBuffer makes one eagerly): 6% of the agent's CPU.
      first.end();
    } else {
      // pipe, not pipeline: a failed local request must leave the stream alive to carry the 502. Not ended by the
      // pipe: a stream reset by the edge (visitor gone) or cut with the tunnel also emits 'end' (Node destroys it,
      // then ends its readable side), and that must not end the local request, or a chunked upload cut short would
      // reach the local service with its terminating chunk, whole-looking. A real END_STREAM leaves it undestroyed.
      stream.pipe(first, { end: false });
      stream.once('end', () => {
        if (!stream.destroyed) first.end();
      });
    }
    stream.once('close', () => {
      // The edge reset the stream (visitor gone) or the tunnel dropped: stop the local request too.
      if (!completed) current?.destroy();
    });
  }

  return {
    handle,
    close: () => agent.destroy(),
  };
}

/**
 * After a complete response, a request body still arriving is not needed: RFC 9113 §8.1 lets the server ask the
 * client to stop with RST_STREAM NO_ERROR (Node sends it after the response's last frame).
 */
function closeRequestSide(stream: ServerHttp2Stream): void {
  if (!stream.endAfterHeaders && !stream.readableEnded && !stream.destroyed) stream.close(NGHTTP2_NO_ERROR);
}

function answerError(stream: ServerHttp2Stream, status: number, code: string, text: string): void {
  if (stream.destroyed || stream.closed) return;
  if (stream.headersSent) return failStream(stream, text.trim());
  stream.respond({
    ':status': status,
    'content-type': 'text/plain; charset=utf-8',
    'cache-control': 'no-store',
    [AGENT_ERROR_HEADER]: code,
  });
  stream.end(text, () => closeRequestSide(stream));
}
