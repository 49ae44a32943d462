// An internal operations port: liveness, readiness and Prometheus metrics for orchestrators and scrapers, on a
// node:http listener of its own (loopback by default). The edge (EDGE_OPS_PORT) and the worker (WORKER_OPS_PORT) use it.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ERROR_CODES, type ErrorCode } from './errors.ts';
import type { Logger } from './log.ts';

/** What /metrics serves: a Prometheus text exposition and its content type (a prom-client registry's). */
export interface MetricsSource {
  text(): Promise<string>;
  readonly contentType: string;
}

/**
 * One readiness check: true while that part is ready. Synchronous checks read the node's own state; asynchronous
 * ones (a store or Redis round trip) are cut at the server's check timeout, so a probe never hangs on them.
 */
export type ReadinessCheck = () => boolean | Promise<boolean>;

export interface OpsServerOptions {
  metrics: MetricsSource;
  /** Readiness checks by name; /readyz answers 200 only when all hold, and lists each one's result. */
  readiness: Record<string, ReadinessCheck>;
  logger: Logger;
  /** Names the server in its logs (`edge-ops`, `worker-ops`). */
  component: string;
  /** How long an asynchronous check may take before it counts as failed (2 s). */
  checkTimeoutMs?: number;
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

/** Resolves with `check`'s answer, false when it throws, rejects or outlasts `timeoutMs`. */
async function judge(check: ReadinessCheck, timeoutMs: number, onError: (err: unknown) => void): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const answer = check();
    if (typeof answer === 'boolean') return answer;
    const late = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
      timer.unref();
    });
    return (await Promise.race([answer, late])) === true;
  } catch (err) {
    onError(err);
    return false;
  } finally {
    clearTimeout(timer);
  }
}

export class OpsServer {
  private readonly server: http.Server;
  private readonly log: Logger;
  private readonly checkTimeoutMs: number;

  constructor(private readonly options: OpsServerOptions) {
    this.log = options.logger.child({ component: options.component });
    this.checkTimeoutMs = options.checkTimeoutMs ?? 2_000;
    this.server = http.createServer((req, res) => this.handle(req, res));
  }

  /** Binds `port` (0 picks a free one) on `host` and resolves with the bound port; a bind error rejects. */
  listen(port: number, host: string): Promise<number> {
    const server = this.server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve((server.address() as AddressInfo).port);
      });
    });
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
        return void this.readiness(res);
      case '/metrics':
        return this.metrics(res);
      default:
        return sendError(res, 'route_not_found', `No route ${req.method} ${path}`);
    }
  }

  /** Every check at once, each within the timeout; a check that throws counts as failed and is logged. */
  private async readiness(res: http.ServerResponse): Promise<void> {
    const names = Object.keys(this.options.readiness);
    const results = await Promise.all(
      names.map((name) => judge(this.options.readiness[name], this.checkTimeoutMs, (err) => this.log.warn({ err, check: name }, 'readiness check failed'))),
    );
    const checks = Object.fromEntries(names.map((name, i) => [name, results[i]]));
    const ready = results.every(Boolean);
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
