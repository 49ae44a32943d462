// The capture hook: the pipeline's last step, run when a visitor's exchange ends. Every exchange counts toward the
// endpoint's traffic figures; the exchange's details are kept only where the endpoint has capture on (SPEC.md).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { edgeErrorOf } from './http/pages.ts';
import type { RequestContext } from './pipeline/stage.ts';

/** One finished exchange, as capture keeps it (metadata only: no headers or bodies). */
export interface CapturedExchange {
  endpoint: string;
  /** When the request arrived (ISO 8601). */
  at: string;
  method: string;
  host: string;
  /** The normalised path that was judged and forwarded, and the raw query. */
  path: string;
  query: string;
  /** 0 when the exchange ended before a response head was sent (visitor gone, connection cut). */
  status: number;
  duration_ms: number;
  client_ip: string;
  secure: boolean;
  /** The routing rule that chose the agents, if one did. */
  rule: string | null;
  /** The edge's own error code when the edge answered (X-Edge-Error), else null. */
  edge_error: string | null;
  /** False when the response did not finish (the visitor left or the upstream cut it mid-body). */
  completed: boolean;
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

/**
 * Watches one request's response and reports it to `sink` when the exchange ends. One 'close' listener and one
 * timestamp per request; the record is built only then.
 */
export function captureExchange(sink: CaptureSink, ctx: RequestContext): void {
  const started = performance.now();
  const at = Date.now();
  const { res } = ctx;
  lastArmed = res;
  // A verified health probe is the platform's own request, not visitor traffic: neither counted nor stored.
  if (ctx.probe === true) return;
  res.once('close', () => {
    sink.record(
      {
        endpoint: ctx.endpoint.uuid,
        at: new Date(at).toISOString(),
        method: ctx.method,
        host: ctx.host,
        path: ctx.path,
        query: ctx.query,
        status: res.headersSent ? res.statusCode : 0,
        duration_ms: Math.round((performance.now() - started) * 1000) / 1000,
        client_ip: ctx.clientIp,
        secure: ctx.secure,
        rule: ctx.selector?.rule ?? null,
        edge_error: edgeErrorOf(res) ?? null,
        completed: res.writableFinished,
      },
      ctx.endpoint.capture_enabled,
    );
  });
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

function classOf(status: number, completed: boolean): string {
  if (!completed || status === 0) return 'aborted';
  return `${Math.floor(status / 100)}xx`;
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
  /** Every answer of this edge, endpoint known or not; never evicted (the edge's metrics export it). */
  private readonly total = emptyCounters();

  constructor(private readonly options: { perEndpoint?: number; maxEndpoints?: number } = {}) {}

  record(exchange: CapturedExchange, detailed: boolean): void {
    let traffic = this.endpoints.get(exchange.endpoint);
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

    const cls = classOf(exchange.status, exchange.completed);
    count(traffic.counters, cls, exchange.edge_error);
    count(this.total, cls, exchange.edge_error);

    if (!detailed) return;
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
