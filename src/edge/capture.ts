// The capture hook: the pipeline's last step, run when a visitor's exchange ends. Every exchange counts toward the
// endpoint's traffic figures; the exchange's details are kept only where the endpoint has capture on (docs/api.md).
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { EndpointConfig } from '../shared/snapshot.ts';
import { TRAFFIC_BODY_LIMIT, type ExchangeFacts } from '../shared/records/types.ts';
import { edgeErrorOf } from './http/pages.ts';
import type { RequestContext } from './pipeline/stage.ts';

/** What capture keeps of an endpoint's exchanges: nothing (counters only), the metadata, or headers and bodies too. */
export type CaptureLevel = 'off' | 'metadata' | 'full';

/**
 * The endpoint's capture level. `capture_level` off forces capture off (docs/api.md "Request capture"); capture on with no level
 * stored (the default, capture_enabled true) keeps metadata: headers and bodies may carry personal data and cost
 * more to keep, so keeping them is the user's explicit choice (`full`).
 */
export function captureLevelOf(endpoint: Pick<EndpointConfig, 'capture_enabled' | 'capture_level'>): CaptureLevel {
  if (!endpoint.capture_enabled || endpoint.capture_level === 'off') return 'off';
  return endpoint.capture_level === 'full' ? 'full' : 'metadata';
}

/** The first TRAFFIC_BODY_LIMIT bytes of a body that passed through, copied as it passed. */
export interface CapturedBody {
  chunks: Buffer[];
  size: number;
  /** More bytes passed than were kept. */
  truncated: boolean;
}

/** What a full capture adds, raw: the shipper redacts and encodes it off the request's path (traffic-shipper.ts). */
export interface CapturedDetail {
  request_headers: IncomingHttpHeaders;
  /** The response head exactly as written (status line and fields), or null when none was sent. */
  response_head: string | null;
  request_body: CapturedBody;
  response_body: CapturedBody;
  /**
   * Request fields to store redacted beyond the shipper's list: the endpoint's token header (token mode reading a
   * header) and what the stages consumed or own on this request (RequestContext.dropHeaders), lower-case.
   */
  redact?: readonly string[];
}

/** One finished exchange, as capture keeps it: the facts a stored record has, and the raw detail of a full capture. */
export interface CapturedExchange extends ExchangeFacts {
  /** `at` in ms since the epoch. */
  time: number;
  level: CaptureLevel;
  /** Present at level full only. */
  detail?: CapturedDetail;
}

/** Per-endpoint counters, kept for every exchange whatever the capture setting. */
export interface TrafficCounters {
  requests: number;
  /** Responses by class: "2xx".."5xx", and "aborted" for exchanges that did not finish. */
  by_class: Record<string, number>;
  /** Answers the edge gave itself, by error code. */
  edge_errors: Record<string, number>;
}

/** Where finished exchanges go. The edge's own recorder below; a later shipper to the store plugs in here. */
export interface CaptureSink {
  record(exchange: CapturedExchange, detailed: boolean): void;
}

/** The response whose exchange was armed last; `countRefusals` reads it back synchronously (see there). */
let lastArmed: ServerResponse | null = null;

/** Edge answers that are visitor authentication refusing (auth, JWT, webhook, mTLS, login). */
const AUTH_REFUSALS = new Set([
  'auth_required', 'invalid_credentials', 'invalid_token', 'invalid_signature', 'too_many_auth_failures', 'auth_unavailable',
  'login_required', 'login_failed', 'login_forbidden', 'client_certificate_required', 'client_certificate_invalid',
]);

/**
 * What visitor authentication decided, from what the stages left: `authenticated` when a stage admitted the visitor,
 * `denied` when the edge refused them for authentication, `rbac_denied` for an RBAC refusal, null otherwise (no
 * authentication on the endpoint, or the exchange ended before it ran).
 */
export function authOutcomeOf(ctx: RequestContext, edgeError: string | null): string | null {
  if (edgeError !== null) {
    if (edgeError.startsWith('rbac_')) return 'rbac_denied';
    if (AUTH_REFUSALS.has(edgeError)) return 'denied';
  }
  return ctx.visitor !== undefined ? 'authenticated' : null;
}

function emptyBody(): CapturedBody {
  return { chunks: [], size: 0, truncated: false };
}

/** Copies what fits of `chunk` into `body` (bounded by TRAFFIC_BODY_LIMIT); never changes what passes. */
function keep(body: CapturedBody, chunk: unknown, encoding?: unknown): void {
  let buf: Buffer;
  if (Buffer.isBuffer(chunk)) buf = chunk;
  else if (chunk instanceof Uint8Array) buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  else if (typeof chunk === 'string') buf = Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
  else return;
  if (buf.length === 0) return;
  const room = TRAFFIC_BODY_LIMIT - body.size;
  if (room <= 0) {
    body.truncated = true;
    return;
  }
  const part = buf.length > room ? buf.subarray(0, room) : buf;
  body.chunks.push(Buffer.from(part));
  body.size += part.length;
  if (buf.length > room) body.truncated = true;
}

/** Whether the request has a body (RFC 9112 §6.3: Content-Length other than 0, or Transfer-Encoding). */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return length !== undefined ? length !== '0' : req.headers['transfer-encoding'] !== undefined;
}

/** Counts (and, for a full capture, copies) the request body as the HTTP parser pushes it, leaving the flow alone. */
function watchRequestBody(req: IncomingMessage, counted: { bytes: number }, body: CapturedBody | null): void {
  const push = req.push;
  req.push = function (chunk: unknown, encoding?: BufferEncoding): boolean {
    if (chunk !== null && chunk !== undefined) {
      counted.bytes += (chunk as Buffer).length;
      if (body !== null) keep(body, chunk, encoding);
    }
    return push.call(this, chunk, encoding);
  };
}

/** Copies the response body's first bytes as they are written (res.write and res.end), for a full capture. */
function watchResponseBody(res: ServerResponse, body: CapturedBody): void {
  const write = res.write;
  const end = res.end;
  res.write = function (this: ServerResponse, chunk: unknown, ...rest: unknown[]): boolean {
    keep(body, chunk, rest[0]);
    return (write as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
  } as ServerResponse['write'];
  res.end = function (this: ServerResponse, chunk?: unknown, ...rest: unknown[]): ServerResponse {
    if (typeof chunk !== 'function') keep(body, chunk, rest[0]);
    return (end as (...args: unknown[]) => ServerResponse).call(this, chunk, ...rest);
  } as ServerResponse['end'];
}

/**
 * The request fields of a full capture that carry a credential on this endpoint besides the ones always redacted: the
 * token header token mode reads (whether or not the visitor's token was accepted: a near miss is still a secret) and
 * the fields the stages consumed. Undefined when there are none (the usual case).
 */
function credentialFields(ctx: RequestContext): readonly string[] | undefined {
  const source = ctx.endpoint.auth?.mode === 'token' ? ctx.endpoint.auth.token_source : undefined;
  const tokenHeader = source?.kind === 'header' ? source.name.toLowerCase() : undefined;
  const consumed = ctx.dropHeaders;
  if (tokenHeader === undefined) return consumed;
  return consumed === undefined ? [tokenHeader] : [...consumed, tokenHeader];
}

/**
 * Watches one request's response and reports it to `sink` when the exchange ends. Per request: one 'close'
 * listener, two clock readings and the socket's write count; a request with a body also gets a counting wrapper on
 * its `push` (what the parser received, whether or not anything read it), and a full capture wrappers that copy the first bytes of each body (bounded,
 * copied as they pass, so forwarding is neither slowed by waiting nor changed). The record is built only at the end.
 */
export function captureExchange(sink: CaptureSink, ctx: RequestContext): void {
  const started = performance.now();
  const at = Date.now();
  const { req, res } = ctx;
  lastArmed = res;
  const level = captureLevelOf(ctx.endpoint);
  const socket: Socket = req.socket;
  const writtenBefore = socket.bytesWritten;
  // Only a request with a body has bytes to count (most have none, and then no counter is made).
  const counted = hasBody(req) ? { bytes: 0 } : null;
  let detail: CapturedDetail | undefined;
  if (level === 'full') {
    detail = { request_headers: req.headers, response_head: null, request_body: emptyBody(), response_body: emptyBody() };
    if (counted !== null) watchRequestBody(req, counted, detail.request_body);
    watchResponseBody(res, detail.response_body);
  } else if (counted !== null) {
    watchRequestBody(req, counted, null);
  }
  // `on`, not `once`: a response closes once, and `once` made a wrapper, a bound function and a listener removal per
  // request. The flag keeps the exchange counted once should a 'close' ever come twice.
  let ended = false;
  res.on('close', () => {
    if (ended) return;
    ended = true;
    // Health probes (the prober's own requests) are neither counted nor captured.
    if (ctx.probe === true) return;
    const edgeError = edgeErrorOf(res) ?? null;
    const visitor = ctx.visitor;
    const clientId = visitor !== undefined && visitor.kind !== 'session' && visitor.clientId !== undefined ? visitor.clientId : ctx.rbacClientId;
    if (detail !== undefined) {
      if (res.headersSent) detail.response_head = (res as unknown as { _header?: string | null })._header ?? null;
      const redact = credentialFields(ctx);
      if (redact !== undefined) detail.redact = redact;
    }
    const exchange: CapturedExchange = {
      endpoint: ctx.endpoint.uuid,
      account: ctx.endpoint.account_id,
      hostname: ctx.endpoint.hostname,
      at: isoTime(at),
      time: at,
      method: ctx.method,
      host: ctx.host,
      path: ctx.path,
      query: ctx.query,
      status: res.headersSent ? res.statusCode : 0,
      duration_ms: Math.round((performance.now() - started) * 1000) / 1000,
      bytes_in: counted === null ? 0 : counted.bytes,
      bytes_out: Math.max(0, socket.bytesWritten - writtenBefore),
      client_ip: ctx.clientIp,
      country: ctx.country ?? null,
      user_agent: req.headers['user-agent'] ?? '',
      secure: ctx.secure,
      rule: ctx.selector?.rule ?? null,
      edge_error: edgeError,
      auth_outcome: authOutcomeOf(ctx, edgeError),
      client_id: clientId === undefined ? null : String(clientId),
      completed: res.writableFinished,
      level,
    };
    // Added after, not spread into the literal: a spread there built and copied an object on every exchange.
    if (detail !== undefined) exchange.detail = detail;
    sink.record(exchange, level !== 'off');
  });
}

/** The last time turned into ISO 8601 text, and that text: exchanges that end in the same millisecond share it. */
let lastIsoMs = Number.NaN;
let lastIso = '';

/** `new Date(ms).toISOString()`, remembered for the millisecond (under load, many exchanges end in each one). */
function isoTime(ms: number): string {
  if (ms !== lastIsoMs) {
    lastIso = new Date(ms).toISOString();
    lastIsoMs = ms;
  }
  return lastIso;
}

/**
 * Wraps the edge's request handler so that answers given before any endpoint is known (unknown or malformed host,
 * disabled endpoint), which have no exchange to capture, are still counted by `recorder.refused`. The pipeline
 * gives those answers synchronously, before it arms capture, and JavaScript runs the handler to its end before
 * anything else: so "ended on return, and not the exchange armed last" identifies them with no per-request
 * allocation. An upgrade refused that way is not counted (upgrades are not captured either).
 */
export function countRefusals(
  recorder: TrafficRecorder,
  handle: (req: IncomingMessage, res: ServerResponse, secure: boolean) => void,
): (req: IncomingMessage, res: ServerResponse, secure: boolean) => void {
  return (req, res, secure) => {
    lastArmed = null;
    handle(req, res, secure);
    if (lastArmed === res) {
      lastArmed = null;
      return;
    }
    const code = res.writableEnded ? edgeErrorOf(res) : undefined;
    if (code !== undefined) recorder.refused(res.statusCode, code);
  };
}

/** Class names by the status's first digit, made once rather than as a new string per exchange. */
const CLASS_NAMES = ['0xx', '1xx', '2xx', '3xx', '4xx', '5xx', '6xx', '7xx', '8xx', '9xx'];

function classOf(status: number, completed: boolean): string {
  if (!completed || status === 0) return 'aborted';
  return CLASS_NAMES[Math.floor(status / 100)] ?? `${Math.floor(status / 100)}xx`;
}

function emptyCounters(): TrafficCounters {
  return { requests: 0, by_class: {}, edge_errors: {} };
}

function count(counters: TrafficCounters, cls: string, edgeError: string | null): void {
  counters.requests++;
  counters.by_class[cls] = (counters.by_class[cls] ?? 0) + 1;
  if (edgeError !== null) counters.edge_errors[edgeError] = (counters.edge_errors[edgeError] ?? 0) + 1;
}

interface EndpointTraffic {
  counters: TrafficCounters;
  /** Ring buffer of captured exchanges, oldest overwritten first. */
  recent: CapturedExchange[];
  next: number;
}

/**
 * The edge's in-memory recorder: counters for every endpoint, and the last `perEndpoint` captured exchanges of
 * each endpoint with capture on. Bounded twice over: per endpoint by the ring, overall by `maxEndpoints`
 * (the least recently active endpoint's figures go first), so a flood of hostnames cannot grow it.
 */
export class TrafficRecorder implements CaptureSink {
  private readonly endpoints = new Map<string, EndpointTraffic>();
  /**
   * The endpoint whose exchange was recorded last: always the Map's last key, so its next exchange needs no
   * re-insertion (a delete and a set per request, when one endpoint takes most of the traffic).
   */
  private latest: string | undefined;
  /** Every answer of this edge, endpoint known or not; never evicted (the edge's metrics export it). */
  private readonly total = emptyCounters();

  constructor(private readonly options: { perEndpoint?: number; maxEndpoints?: number } = {}) {}

  record(exchange: CapturedExchange, detailed: boolean): void {
    let traffic = this.endpoints.get(exchange.endpoint);
    if (traffic === undefined || exchange.endpoint !== this.latest) {
      if (traffic) {
        // Re-inserting keeps the Map in least-recently-active order for eviction.
        this.endpoints.delete(exchange.endpoint);
      } else {
        traffic = { counters: emptyCounters(), recent: [], next: 0 };
        if (this.endpoints.size >= (this.options.maxEndpoints ?? 10_000)) {
          this.endpoints.delete(this.endpoints.keys().next().value!);
        }
      }
      this.endpoints.set(exchange.endpoint, traffic);
      this.latest = exchange.endpoint;
    }

    const cls = classOf(exchange.status, exchange.completed);
    count(traffic.counters, cls, exchange.edge_error);
    count(this.total, cls, exchange.edge_error);

    if (!detailed) return;
    // The ring is for a look at recent traffic on this edge: bodies would make it megabytes per endpoint.
    if (exchange.detail !== undefined) exchange = { ...exchange, detail: undefined };
    const size = this.options.perEndpoint ?? 100;
    if (traffic.recent.length < size) traffic.recent.push(exchange);
    else traffic.recent[traffic.next] = exchange;
    traffic.next = (traffic.next + 1) % size;
  }

  /** An answer the edge gave before any endpoint was known: it counts for the edge, not for an endpoint. */
  refused(status: number, code: string): void {
    count(this.total, classOf(status, true), code);
  }

  /** The endpoint's counters since this edge started (zeros for an endpoint it has not served). */
  counters(endpoint: string): TrafficCounters {
    const c = this.endpoints.get(endpoint)?.counters;
    return c ? structuredClone(c) : emptyCounters();
  }

  /** Every answer of this edge since it started: captured exchanges and refusals before an endpoint was known. */
  totals(): TrafficCounters {
    return structuredClone(this.total);
  }

  /**
   * The counters of the `limit` most recently active endpoints, most recent first, as live read-only views (a
   * scrape reads them at once; copying thousands per scrape would be waste).
   */
  *recentlyActive(limit: number): Generator<[endpoint: string, counters: Readonly<TrafficCounters>]> {
    if (limit <= 0) return;
    // The Map is in least-recently-active order; walk it from the end.
    const keys = [...this.endpoints.keys()];
    for (let i = keys.length - 1, n = 0; i >= 0 && n < limit; i--, n++) yield [keys[i], this.endpoints.get(keys[i])!.counters];
  }

  /** The endpoint's captured exchanges, newest first. */
  recent(endpoint: string, limit = Infinity): CapturedExchange[] {
    const traffic = this.endpoints.get(endpoint);
    if (!traffic) return [];
    const { recent, next } = traffic;
    const ordered = recent.length < (this.options.perEndpoint ?? 100) ? recent.slice() : [...recent.slice(next), ...recent.slice(0, next)];
    return ordered.reverse().slice(0, limit);
  }
}
