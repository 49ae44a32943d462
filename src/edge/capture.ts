// The capture hook: the pipeline's last step, run when a visitor's exchange ends. Every exchange counts toward the
// endpoint's traffic figures; the exchange's details are kept only where the endpoint has capture on (SPEC.md).
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

/**
 * Watches one request's response and reports it to `sink` when the exchange ends. One 'close' listener and one
 * timestamp per request; the record is built only then.
 */
export function captureExchange(sink: CaptureSink, ctx: RequestContext): void {
  const started = performance.now();
  const at = Date.now();
  const { res } = ctx;
  res.once('close', () => {
    const edgeError = res.getHeader('x-edge-error');
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
        edge_error: typeof edgeError === 'string' ? edgeError : null,
        completed: res.writableFinished,
      },
      ctx.endpoint.capture_enabled,
    );
  });
}

function classOf(exchange: CapturedExchange): string {
  if (!exchange.completed || exchange.status === 0) return 'aborted';
  return `${Math.floor(exchange.status / 100)}xx`;
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

  constructor(private readonly options: { perEndpoint?: number; maxEndpoints?: number } = {}) {}

  record(exchange: CapturedExchange, detailed: boolean): void {
    let traffic = this.endpoints.get(exchange.endpoint);
    if (traffic) {
      // Re-inserting keeps the Map in least-recently-active order for eviction.
      this.endpoints.delete(exchange.endpoint);
    } else {
      traffic = { counters: { requests: 0, by_class: {}, edge_errors: {} }, recent: [], next: 0 };
      if (this.endpoints.size >= (this.options.maxEndpoints ?? 10_000)) {
        this.endpoints.delete(this.endpoints.keys().next().value!);
      }
    }
    this.endpoints.set(exchange.endpoint, traffic);

    const { counters } = traffic;
    counters.requests++;
    const cls = classOf(exchange);
    counters.by_class[cls] = (counters.by_class[cls] ?? 0) + 1;
    if (exchange.edge_error) counters.edge_errors[exchange.edge_error] = (counters.edge_errors[exchange.edge_error] ?? 0) + 1;

    if (!detailed) return;
    const size = this.options.perEndpoint ?? 100;
    if (traffic.recent.length < size) traffic.recent.push(exchange);
    else traffic.recent[traffic.next] = exchange;
    traffic.next = (traffic.next + 1) % size;
  }

  /** The endpoint's counters since this edge started (zeros for an endpoint it has not served). */
  counters(endpoint: string): TrafficCounters {
    const c = this.endpoints.get(endpoint)?.counters;
    return c ? structuredClone(c) : { requests: 0, by_class: {}, edge_errors: {} };
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
