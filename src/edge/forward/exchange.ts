// One HTTP/1.1 exchange with an upstream (an origin URL, or an agent's data connection) as undici's dispatch handler:
// the answer goes straight onto the visitor's response, chunk by chunk, with the visitor's backpressure pausing it.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isConnectionSpecific } from '../../shared/tunnel/headers.ts';
import { sendEdgeError } from '../http/pages.ts';
import type { ForwardRequest } from '../http/proxy-headers.ts';
import { finalStatus } from './status.ts';

/** Methods without a body unless the request frames one. */
const BODYLESS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'DELETE']);

/**
 * The body to send upstream: one a stage read whole (webhook verification), else the visitor's request stream when
 * the request has or may have one, else none (undici then sends no framing fields for it).
 */
export function upstreamBody(f: ForwardRequest): Buffer | IncomingMessage | null {
  if (f.body !== undefined) return f.body;
  const { req } = f;
  const hasBody = !BODYLESS.has(f.method) || req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
  return hasBody ? req : null;
}

export interface ExchangeHooks {
  /** The upstream failed (refused, reset, an answer the edge cannot relay); called before the visitor is answered. */
  onError?(err: Error): void;
  /**
   * The exchange failed before any byte of an answer reached the visitor: return true to take the request over
   * (another path serves it) instead of the visitor getting the failure page.
   */
  recover?(err: Error): boolean;
  /** The exchange is over, answered or failed (for the caller's count of exchanges in flight). */
  settled?(): void;
}

/**
 * The callback form of undici's handler, which the client calls directly, so no adapter or parsed header object is
 * made per response: the status line and fields go to the visitor in one writeHead from the raw field list, each body
 * chunk is written to the visitor as undici hands it over (a view of the socket's read buffer, never copied), and
 * trailers follow the last chunk. Pool.stream, used before, added a Writable adapter, a finished() hook and a
 * parsed-then-copied header object to every response.
 */
export class UpstreamExchange {
  private abort: ((err?: Error) => void) | null = null;
  /** The visitor left before the exchange ended: the upstream request is aborted as soon as undici allows it. */
  private gone = false;
  private paused: (() => void) | null = null;
  private readonly res: ServerResponse;

  constructor(
    private readonly f: ForwardRequest,
    private readonly failure: 'origin_error' | 'agent_error',
    private readonly hooks: ExchangeHooks = {},
  ) {
    this.res = f.res;
    // `on`, not `once` (a response closes once; `once` made a wrapper and a bound function per request): a second
    // 'close' would find `gone` set.
    this.res.on('close', () => this.visitorClosed());
  }

  private visitorClosed(): void {
    if (this.res.writableFinished || this.gone) return;
    this.gone = true;
    this.abort?.(new Error('the visitor closed the connection'));
  }

  onConnect(abort: (err?: Error) => void): void {
    this.abort = abort;
    if (this.gone) abort(new Error('the visitor closed the connection'));
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    // 1xx answers are interim (undici reports 100-continue and 103 here too): they are not relayed.
    if (statusCode < 200) return true;
    // A status writeHead would throw on (or relay meaninglessly, 6xx-9xx): the exchange is aborted and answered 502.
    const status = finalStatus(statusCode);
    if (status === null) {
      this.abort?.(new Error(`the upstream answered status ${statusCode}, not a final status (200-599)`));
      return false;
    }
    try {
      const fields = responseFields(rawHeaders);
      const res = this.res;
      if (res.getHeaderNames().length === 0) res.writeHead(status, fields);
      else {
        // A stage set fields on this response already (a refreshed session cookie): the upstream's fields replace
        // those of the same name, repeats of its own kept (the flat form of writeHead would keep only the last).
        for (let i = 0; i < fields.length; i += 2) res.removeHeader(fields[i]);
        for (let i = 0; i < fields.length; i += 2) res.appendHeader(fields[i], fields[i + 1]);
        res.writeHead(status);
      }
    } catch (err) {
      // A field Node refuses to send (writeHead throws before writing anything): 502, and the upstream is cut off.
      this.abort?.(err as Error);
      return false;
    }
    this.paused = resume;
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.res.write(chunk)) return true;
    // The visitor reads slower than the upstream sends: undici stops reading its socket until 'drain'.
    this.res.once('drain', this.paused ?? noop);
    return false;
  }

  onComplete(trailers: Array<Buffer | string> | null): void {
    if (trailers !== null && trailers.length > 0) {
      try {
        const fields = responseFields(trailers);
        const pairs: [string, string][] = [];
        for (let i = 0; i < fields.length; i += 2) pairs.push([fields[i], fields[i + 1]]);
        this.res.addTrailers(pairs);
      } catch {
        // a trailer field Node refuses to send is dropped; the body itself is complete
      }
    }
    this.res.end();
    this.hooks.settled?.();
  }

  onError(err: Error): void {
    this.hooks.settled?.();
    this.hooks.onError?.(err);
    const { res, req } = this.f;
    if (res.headersSent) return void res.destroy();
    if (!this.gone && this.hooks.recover?.(err) === true) return;
    sendEdgeError(res, this.failure, req.headers.accept);
  }
}

function noop(): void {}

/** undici hands field lines over as Buffers (its types say strings for trailers). */
function latin1(item: Buffer | string): string {
  return typeof item === 'string' ? item : item.toString('latin1');
}

/**
 * An upstream's raw field lines (name, value, … as undici's parser hands them, latin1 bytes) as the flat array form
 * of res.writeHead: connection-specific fields, the ones the upstream's Connection field names, and pseudo-header
 * names are left out (what endToEndHeaders does for parsed headers), `te` passes only as "trailers"; repeats stay
 * separate lines, in their order, as the upstream sent them.
 */
export function responseFields(raw: ReadonlyArray<Buffer | string>): string[] {
  const out: string[] = [];
  let nominated: string[] | null = null;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = latin1(raw[i]);
    const lower = name.toLowerCase();
    const value = latin1(raw[i + 1]);
    if (isConnectionSpecific(lower)) {
      // "keep-alive" and "close", what upstreams send, name no other field.
      if (lower === 'connection' && !/^\s*(keep-alive|close)\s*$/i.test(value)) (nominated ??= []).push(value);
      continue;
    }
    if (lower.charCodeAt(0) === 58 /* ':' */) continue;
    if (lower === 'te') {
      if (value.split(',').some((v) => v.split(';')[0].trim().toLowerCase() === 'trailers')) out.push('te', 'trailers');
      continue;
    }
    out.push(name, value);
  }
  if (nominated === null) return out;
  // The Connection field may come after the fields it names, so they go once the pass is over (rare: upstreams send
  // "keep-alive" or "close", which name nothing else).
  const names = new Set(nominated.join(',').split(',').map((v) => v.trim().toLowerCase()));
  const kept: string[] = [];
  for (let i = 0; i < out.length; i += 2) if (!names.has(out[i].toLowerCase())) kept.push(out[i], out[i + 1]);
  return kept;
}
