// The edge's internal operations port: liveness, readiness and Prometheus metrics for orchestrators and scrapers.
// A node:http listener of its own (EDGE_OPS_PORT, loopback by default), never the public listener visitors reach.
import http from 'node:http';
import { listen } from './http/listen.ts';
import { ERROR_CODES, type ErrorCode } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import type { EdgeMetrics } from './metrics.ts';

export interface OpsServerOptions {
  metrics: EdgeMetrics;
  /**
   * Readiness checks by name, each true while that part of the edge is ready; /readyz answers 200 only when all
   * hold. Synchronous: they read the edge's own state, so a probe never waits on Redis or the control plane.
   */
  readiness: Record<string, () => boolean>;
  logger: Logger;
}

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
  res.end(text);
}

function sendError(res: http.ServerResponse, code: ErrorCode, detail?: string): void {
  const [status, message] = ERROR_CODES[code];
  sendJson(res, status, detail === undefined ? { error: message, code } : { error: message, code, detail });
}

export class OpsServer {
  private readonly server: http.Server;
  private readonly log: Logger;

  constructor(private readonly options: OpsServerOptions) {
    this.log = options.logger.child({ component: 'edge-ops' });
    this.server = http.createServer((req, res) => this.handle(req, res));
  }

  /** Binds `port` (0 picks a free one) on `host` and resolves with the bound port. */
  listen(port: number, host: string): Promise<number> {
    return listen(this.server, port, host);
  }

  /** Stops listening and ends scraper connections: a probe or scrape cut at shutdown is simply retried elsewhere. */
  close(): Promise<void> {
    return new Promise((resolve) => {
      if (!this.server.listening) return resolve();
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const path = query === -1 ? url : url.slice(0, query);
    // HEAD is GET without the body (Node drops it); every other method is outside this port's routes.
    const route = req.method === 'GET' || req.method === 'HEAD' ? path : null;
    switch (route) {
      case '/healthz':
        return sendJson(res, 200, { status: 'ok' });
      case '/readyz':
        return this.readiness(res);
      case '/metrics':
        return this.metrics(res);
      default:
        return sendError(res, 'route_not_found', `No route ${req.method} ${path}`);
    }
  }

  private readiness(res: http.ServerResponse): void {
    const checks: Record<string, boolean> = {};
    for (const [name, check] of Object.entries(this.options.readiness)) {
      try {
        checks[name] = check();
      } catch (err) {
        this.log.warn({ err, check: name }, 'readiness check failed');
        checks[name] = false;
      }
    }
    const ready = Object.values(checks).every(Boolean);
    sendJson(res, ready ? 200 : 503, { status: ready ? 'ready' : 'not_ready', checks });
  }

  private metrics(res: http.ServerResponse): void {
    const { metrics } = this.options;
    metrics.text().then(
      (text) => {
        res.writeHead(200, { 'content-type': metrics.contentType, 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
        res.end(text);
      },
      (err) => {
        this.log.error({ err }, 'metrics collection failed');
        sendError(res, 'internal');
      },
    );
  }
}
