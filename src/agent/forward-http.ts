// The agent's HTTP forwarding: each HTTP/2 request stream from the edge becomes one HTTP/1.1 request to the local
// service, both bodies streamed under backpressure (never buffered whole), the response mapped back to HTTP/2.
import { isIP } from 'node:net';
import http2, { type IncomingHttpHeaders, type OutgoingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { Pool, type Dispatcher } from 'undici';
import { SpanStatusCode, type Tracer } from '@opentelemetry/api';
import type { Logger } from '../shared/log.ts';
import { injectSpan, parentFrom, SpanKind, type Span } from '../shared/tracing.ts';
import { addEndToEndFields, isConnectionSpecific } from '../shared/tunnel/headers.ts';
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
  /** A span per forwarded request when set (the agent's tracing, src/shared/tracing.ts); absent: off. */
  tracer?: Tracer | null;
}

export interface HttpForwarder {
  handle(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void;
  /** Closes the keep-alive connections to the local service. */
  close(): void;
}

const { NGHTTP2_NO_ERROR } = http2.constants;

/** Response bytes queued on a stream the edge reads slowly before the local response is paused (see onResponseData). */
const PAUSE_BYTES = 128 * 1024;

/** Methods a client may retry on its own (RFC 9110 §9.2.2). */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

interface Forwarding {
  target: Target;
  logger: Logger;
  pool: Pool;
  hostHeader: string | undefined;
  servername: string | undefined;
  tracer: Tracer | null;
}

export function createHttpForwarder(options: HttpForwarderOptions): HttpForwarder {
  const { target } = options;
  const host = isIP(target.host) === 6 ? `[${target.host}]` : target.host;
  // undici rather than node:http: its dispatch API hands over the raw response without an IncomingMessage, a
  // ClientRequest, an http.Agent lookup and two pipes per request. On loopback its client side costs ~24 µs per
  // request against ~38 µs for node:http with a keep-alive Agent; the agent's CPU per 100 B request fell by 28%.
  const pool = new Pool(`${target.tls ? 'https' : 'http'}://${host}:${target.port}`, {
    pipelining: 1,
    // node:http had no timeouts here, and long polls or event streams may idle for minutes: the visitor and the
    // edge decide when to give up, and a dead connection surfaces as an error anyway.
    headersTimeout: 0,
    bodyTimeout: 0,
    ...(target.tls ? { connect: { rejectUnauthorized: options.verifyTls ?? true } } : {}),
  });
  const f: Forwarding = {
    target,
    logger: options.logger,
    pool,
    hostHeader: options.hostHeader,
    // A name target keeps its own SNI whatever Host the visitor sent; for an IP, undici derives it from Host,
    // as node:http did (and no SNI when Host is an IP too).
    servername: target.tls && isIP(target.host) === 0 ? target.host : undefined,
    tracer: options.tracer ?? null,
  };
  return {
    handle: (stream, headers) => new Exchange(f, stream, headers).send(),
    close: () => void pool.destroy(),
  };
}

/** One request stream from the edge and its local HTTP/1.1 exchange: the undici dispatch handler. */
class Exchange implements Dispatcher.DispatchHandler {
  private readonly method: string;
  private readonly path: string;
  private readonly headers: string[];
  private controller: Dispatcher.DispatchController | null = null;
  private responded = false;
  private completed = false;
  private trailers = false;
  private retried = false;
  /** The request's span when tracing is on, until it ends. */
  private span: Span | undefined;
  /** The span's trace id, for the agent's log lines about this request (absent: tracing off). */
  private traceId: string | undefined;

  constructor(
    private readonly f: Forwarding,
    private readonly stream: ServerHttp2Stream,
    h2headers: IncomingHttpHeaders,
  ) {
    this.method = h2headers[':method'] ?? 'GET';
    this.path = h2headers[':path'] ?? '/';
    let trace: Record<string, string> | undefined;
    if (f.tracer !== null) {
      // A child of the edge's span (its traceparent came in the request), and the parent the local service sees.
      const q = this.path.indexOf('?');
      this.span = f.tracer.startSpan(
        `${this.method} agent`,
        { kind: SpanKind.SERVER, attributes: { 'http.request.method': this.method, 'url.path': q === -1 ? this.path : this.path.slice(0, q), 'server.address': h2headers[':authority'] ?? '' } },
        parentFrom(h2headers),
      );
      injectSpan(this.span, (trace = {}));
      this.traceId = this.span.spanContext().traceId;
    }
    this.headers = http1RequestFields(h2headers, f.hostHeader, trace);
    stream.once('close', () => {
      // The edge reset the stream (visitor gone) or the tunnel dropped: stop the local request too.
      if (!this.completed) {
        this.controller?.abort(new Error('the request stream closed'));
        this.endSpan('the request stream closed');
      }
    });
  }

  send(): void {
    const { stream } = this;
    const options = {
      path: this.path,
      method: this.method,
      headers: this.headers,
      // No body when END_STREAM came with the HEADERS; the request stream then stays unread, which also makes
      // Node wait for the response's last write before destroying it (one read to its end is destroyed as soon
      // as nghttp2 closes it, and the late write completion built an ERR_STREAM_DESTROYED nobody saw).
      body: stream.endAfterHeaders ? null : requestBody(stream),
      // Not in undici's types, but read by it: the TLS name, fixed (see Forwarding.servername).
      servername: this.f.servername,
    };
    this.f.pool.dispatch(options as Dispatcher.DispatchOptions, this);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.stream.destroyed || this.stream.closed) controller.abort(new Error('the request stream closed'));
  }

  onResponseStart(controller: Dispatcher.DispatchController, status: number): void {
    const { stream } = this;
    const raw = latin1(controller.rawHeaders);
    if (status < 200) {
      // 103 Early Hints are worth passing on (RFC 8297); other 1xx belong to the local hop only.
      if (status === 103 && !stream.headersSent && !stream.destroyed) {
        try {
          const hints: OutgoingHttpHeaders = { ':status': 103 };
          addEndToEndFields(raw, hints);
          stream.additionalHeaders(hints);
        } catch {
          // hints HTTP/2 cannot carry are only hints: drop them
        }
      }
      return;
    }
    this.responded = true;
    this.span?.setAttribute('http.response.status_code', status);
    if (stream.destroyed || stream.closed) return controller.abort(new Error('the request stream closed'));
    // RFC 9110 §6.4.1: no content after HEAD, 204 or 304; END_STREAM goes with the headers.
    const noBody = this.method === 'HEAD' || status === 204 || status === 304;
    const fields: OutgoingHttpHeaders = { ':status': status };
    addEndToEndFields(raw, fields);
    this.trailers = !noBody && fields.trailer !== undefined;
    try {
      stream.respond(fields, { endStream: noBody, waitForTrailers: this.trailers });
    } catch (err) {
      // A field HTTP/2 cannot carry (Node validates names and values): fail this request, not the agent.
      controller.abort(err as Error);
      this.completed = true; // nothing more from the local service belongs on this stream
      answerError(stream, 502, 'invalid_response', `The local service sent a response the tunnel cannot carry: ${(err as Error).message}\n`);
    }
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    const { stream } = this;
    if (this.completed || stream.destroyed) return;
    // HTTP/2 flow control is the backpressure: stop reading the local response while the edge is not reading.
    // Not at the stream's 16 KiB mark, though: a paused undici hands the rest of what it read back to the socket
    // and parses it again on resume, so pausing inside every 64 KiB body tripled the agent's CPU for it.
    if (!stream.write(chunk) && stream.writableLength >= PAUSE_BYTES) {
      controller.pause();
      stream.once('drain', () => controller.resume());
    }
  }

  onResponseEnd(controller: Dispatcher.DispatchController): void {
    const { stream } = this;
    if (this.completed) return;
    this.completed = true;
    this.endSpan();
    if (stream.destroyed) return;
    if (this.trailers) {
      stream.once('wantTrailers', () => {
        try {
          const fields: OutgoingHttpHeaders = {};
          addEndToEndFields(latin1(controller.rawTrailers), fields);
          stream.sendTrailers(fields);
        } catch {
          failStream(stream, 'the local response trailers cannot be carried over HTTP/2');
        }
      });
    }
    if (!stream.writableEnded) stream.end();
    closeRequestSide(stream);
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, err: Error & { code?: string }): void {
    const { stream, f } = this;
    if (this.completed) return;
    if (this.responded) {
      this.completed = true;
      this.endSpan(err.message);
      // Closed first: the edge reset the stream (visitor gone) or the tunnel dropped, and the abort above
      // ended this request. Otherwise the local service cut its response short.
      if (stream.destroyed || stream.closed) return;
      // A truncated response must not look complete: reset the stream so the edge aborts the visitor's.
      failStream(stream, 'the local response ended before its body was complete');
      f.logger.warn({ method: this.method, path: this.path, err: err.message, trace_id: this.traceId }, 'local service ended its response before the body was complete');
      return;
    }
    if (stream.destroyed || stream.closed) return;
    if (!this.retried && this.retryable(err)) {
      this.retried = true;
      return this.send();
    }
    this.completed = true;
    this.endSpan(err.message);
    if (err.code === 'UND_ERR_INVALID_ARG' || err.code === 'UND_ERR_NOT_SUPPORTED') {
      // HTTP/2 allows a few field bytes HTTP/1.1 does not (undici refuses them): refuse this request.
      return answerError(stream, 400, 'invalid_request', `The request cannot be sent to the local service over HTTP/1.1: ${err.message}\n`);
    }
    answerError(stream, 502, 'local_unreachable', `The agent could not reach ${f.target.display}: ${err.message}\n`);
    f.logger.warn({ err: err.message, method: this.method, path: this.path, trace_id: this.traceId }, 'local service unreachable');
  }

  /** Ends the span (once), as failed when `error` says why. */
  private endSpan(error?: string): void {
    const span = this.span;
    if (span === undefined) return;
    this.span = undefined;
    if (error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: error });
    span.end();
  }

  /**
   * A kept-alive connection the local service closed just as it was reused fails before any byte of the answer.
   * Resent once, and only a request without a body whose method a client may retry on its own (RFC 9110 §9.2.2).
   */
  private retryable(err: Error & { code?: string }): boolean {
    return this.stream.endAfterHeaders && IDEMPOTENT.has(this.method) && (err.code === 'UND_ERR_SOCKET' || err.code === 'ECONNRESET');
  }
}

/**
 * The HTTP/2 request fields as undici's flat header list: Host first (from `:authority` unless fixed; RFC 9113
 * §8.3.1), then the end-to-end fields. Expect goes: 100-continue is a per-hop exchange the edge already had with
 * the visitor, and undici refuses the field.
 */
function http1RequestFields(h2headers: IncomingHttpHeaders, hostHeader: string | undefined, trace: Record<string, string> | undefined): string[] {
  const out: string[] = [];
  const host = hostHeader ?? h2headers[':authority'] ?? h2headers.host;
  if (host) out.push('host', host);
  for (const name in h2headers) {
    if (name.charCodeAt(0) === 58 /* ':' */ || isConnectionSpecific(name) || name === 'expect') continue;
    if (trace !== undefined && (name === 'traceparent' || name === 'tracestate')) continue;
    const value = h2headers[name];
    if (value === undefined) continue;
    if (typeof value === 'string') out.push(name, value);
    else for (const v of value) out.push(name, v);
  }
  // The agent's span as the service's parent; without tracing the edge's traceparent went through above unchanged.
  if (trace !== undefined) for (const name in trace) out.push(name, trace[name]);
  return out;
}

/**
 * The request body for undici. Not the stream itself: a stream reset by the edge (visitor gone) or cut with the
 * tunnel also emits 'end' (Node destroys it, then ends its readable side), and undici would take that for the
 * end of the body: a chunked upload cut short would reach the local service with its terminating chunk,
 * whole-looking. A real END_STREAM leaves the stream undestroyed; anything else fails the local request.
 * destroyOnReturn: false, so a failed local request leaves the stream alive to carry the 502.
 */
async function* requestBody(stream: ServerHttp2Stream): AsyncGenerator<Buffer> {
  for await (const chunk of stream.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) yield chunk;
  if (stream.destroyed) throw new Error('the request stream was reset');
}

/** undici's raw field lines (Buffers from its parser) as strings, byte for byte as node:http gave them. */
function latin1(raw: Dispatcher.DispatchController['rawHeaders']): string[] {
  if (!Array.isArray(raw)) return [];
  const out = new Array<string>(raw.length);
  for (let i = 0; i < raw.length; i++) {
    const item = raw[i];
    out[i] = typeof item === 'string' ? item : item.toString('latin1');
  }
  return out;
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
