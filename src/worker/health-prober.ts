// The health prober: probes each enabled check through an edge's public listener with the endpoint's hostname, as a
// visitor would, and records the verdict. Claims with leases keep several workers from probing one endpoint twice.
import http from 'node:http';
import https from 'node:https';
import { randomBytes } from 'node:crypto';
import { PROBE_HEADER, PROBE_USER_AGENT, signProbe } from '../shared/health-probe.ts';
import type { Logger } from '../shared/log.ts';
import type { Database } from '../store/db.ts';
import { claimDueChecks, pruneHealth, recordProbe, scheduleNewChecks, type ClaimedCheck, type ProbeResult } from '../store/health.ts';
import type { WorkerObserver } from './metrics.ts';
import { staleAfterMs } from './periodic.ts';

export interface HealthProberOptions {
  /**
   * The base URL of an edge's public listener (EDGE_PROBE_EDGE_URL, or this node's edge once bound), read before
   * every pass; null: nothing to probe through yet, the pass is skipped.
   */
  edgeUrl: () => string | null;
  /** SecretBox.derive(PROBE_KEY_PURPOSE): what the edge verifies each probe's signature with. */
  probeKey: Buffer;
  /** A probe without a response head by then is a `timeout`. */
  timeoutMs: number;
  /** EDGE_HEALTH_MIN_INTERVAL_SECONDS: intervals are scaled by it / 60 (tests); 60 in production. */
  minIntervalSeconds: number;
  /** Probes in flight from this worker, at most. */
  concurrency: number;
  /** Names this worker in leases (the node id); a random suffix keeps two processes of one node apart. */
  node: string;
  logger: Logger;
  /** How often due checks are claimed; by default a quarter of the shortest effective interval, within 0.25 to 5 s. */
  pollMs?: number;
  /** How often old probe rows and verdicts are pruned (10 minutes). */
  pruneMs?: number;
  /** Counts verdicts recorded and probe rows pruned (the worker's metrics). */
  metrics?: Pick<WorkerObserver, 'probed' | 'retentionDeleted'>;
  now?: () => number;
}

/** How an answer becomes a verdict (docs/api.md via docs/health-checks.md): 2xx and 3xx are healthy, anything else not. */
export function verdictOf(status: number): 'healthy' | 'unhealthy' {
  return status >= 200 && status < 400 ? 'healthy' : 'unhealthy';
}

/** Error text as stored: short, one line. */
function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim().slice(0, 500);
}

/**
 * One probe: GET `check.path` on the edge at `base` with Host set to the endpoint's hostname, signed, the
 * User-Agent naming the prober. Resolves with the verdict; never rejects.
 */
export function probeOnce(base: URL, check: Pick<ClaimedCheck, 'uuid' | 'hostname' | 'path'>, key: Buffer, timeoutMs: number): Promise<ProbeResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const secure = base.protocol === 'https:';
  const target = check.path;
  return new Promise<ProbeResult>((resolve) => {
    let settled = false;
    const settle = (result: ProbeResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    let req: http.ClientRequest;
    try {
      req = (secure ? https : http).request({
        protocol: base.protocol,
        hostname: base.hostname.replace(/^\[|\]$/g, ''),
        port: base.port || (secure ? 443 : 80),
        method: 'GET',
        path: target,
        // A fresh connection per probe: a probe measures what a visitor's first request meets, and nothing lingers.
        agent: false,
        servername: secure ? check.hostname : undefined,
        headers: {
          host: check.hostname,
          'user-agent': PROBE_USER_AGENT,
          accept: '*/*',
          [PROBE_HEADER]: signProbe(key, check.uuid, 'GET', target),
          connection: 'close',
        },
      });
    } catch (err) {
      // Node refuses some targets synchronously (a character a request line cannot carry, in a row stored before the
      // API refused it): the check cannot be probed as configured, which is an `error` verdict, not a failed worker.
      const e = err as NodeJS.ErrnoException;
      return resolve({ status: 'error', status_code: null, latency_ms: elapsed(), error_message: oneLine(e.code ? `${e.code}: ${e.message}` : e.message) });
    }
    const timer = setTimeout(() => {
      settle({ status: 'timeout', status_code: null, latency_ms: elapsed(), error_message: `no response within ${timeoutMs} ms` });
      req.destroy();
    }, timeoutMs);
    req.on('response', (res) => {
      const code = res.statusCode ?? 0;
      const status = verdictOf(code);
      // The edge names its own refusals (no agent, disabled endpoint...) in X-Edge-Error: worth keeping with the verdict.
      const edgeError = res.headers['x-edge-error'];
      const message = status === 'healthy' ? null : oneLine(`HTTP ${code}${typeof edgeError === 'string' ? ` ${edgeError}` : ''}${res.statusMessage ? ` (${res.statusMessage})` : ''}`);
      settle({ status, status_code: code, latency_ms: elapsed(), error_message: message });
      // The body is not judged; dropping the connection is cheaper than reading it.
      res.destroy();
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      settle({ status: 'error', status_code: null, latency_ms: elapsed(), error_message: oneLine(err.code ? `${err.code}: ${err.message}` : err.message) });
    });
    req.end();
  });
}

export class HealthProber {
  private readonly owner: string;
  private readonly scale: number;
  private readonly pollMs: number;
  private readonly pruneMs: number;
  private timer: NodeJS.Timeout | null = null;
  private pruneTimer: NodeJS.Timeout | null = null;
  private passing: Promise<unknown> = Promise.resolve();
  private readonly inFlight = new Set<Promise<void>>();
  private stopped = false;
  private warnedNoEdge = false;
  /** The last round filled every free slot (more may be due); a refill round is queued or running. */
  private backlog = false;
  private refilling = false;
  private readonly now: () => number;
  private startedAt: number | null = null;
  /** When a round last went through (claimed, or found nothing due, or no edge to probe through yet). */
  private lastRoundAt: number | null = null;

  constructor(
    private readonly db: Database,
    private readonly options: HealthProberOptions,
  ) {
    this.owner = `${options.node}:${randomBytes(4).toString('hex')}`;
    this.scale = options.minIntervalSeconds / 60;
    this.pollMs = options.pollMs ?? Math.min(5000, Math.max(250, (options.minIntervalSeconds * 1000) / 4));
    this.pruneMs = options.pruneMs ?? 10 * 60_000;
    this.now = options.now ?? Date.now;
  }

  start(): void {
    this.startedAt ??= this.now();
    this.timer = setInterval(() => void this.pass(), this.pollMs);
    this.timer.unref();
    this.pruneTimer = setInterval(() => void this.prune(), this.pruneMs);
    this.pruneTimer.unref();
    void this.prune();
    void this.pass();
  }

  /**
   * One round: schedule newly enabled checks, then claim due ones up to the free concurrency and start their probes
   * (not awaited: a slow probe must not hold back others that fall due). Serialised with the timer's rounds.
   * Resolves with how many probes it started.
   */
  pass(): Promise<number> {
    const run = this.passing.then(() => this.round());
    this.passing = run.catch(() => {});
    return run.catch((err) => {
      this.options.logger.warn({ err }, 'health probe round skipped');
      return 0;
    });
  }

  /**
   * Whether the prober keeps claiming: started, and a round went through (or it started) within staleAfterMs of its
   * poll interval (/readyz). Rounds that keep failing (the store refusing the claims) or hang make it stale.
   */
  current(): boolean {
    const since = this.lastRoundAt ?? this.startedAt;
    return since !== null && this.now() - since <= staleAfterMs(this.pollMs);
  }

  private async round(): Promise<number> {
    const claimed = await this.claimAndProbe();
    this.lastRoundAt = this.now();
    return claimed;
  }

  private async claimAndProbe(): Promise<number> {
    this.backlog = false;
    if (this.stopped) return 0;
    const edge = this.options.edgeUrl();
    if (edge === null) {
      if (!this.warnedNoEdge) this.options.logger.warn('no edge to probe through yet (EDGE_PROBE_EDGE_URL): health checks wait');
      this.warnedNoEdge = true;
      return 0;
    }
    const free = this.options.concurrency - this.inFlight.size;
    await scheduleNewChecks(this.db, this.scale);
    if (free <= 0) return 0;
    const leaseSeconds = this.options.timeoutMs / 1000 + 5;
    const claimed = await claimDueChecks(this.db, this.owner, { limit: free, leaseSeconds, scale: this.scale });
    // Every free slot taken: more checks may be due than this worker runs at once. Each finished probe then claims
    // again at once, so throughput follows how fast probes finish, not concurrency per poll.
    this.backlog = claimed.length >= free;
    const base = new URL(edge);
    for (const check of claimed) {
      const probe = this.probe(base, check).finally(() => {
        this.inFlight.delete(probe);
        this.refill();
      });
      this.inFlight.add(probe);
    }
    return claimed.length;
  }

  /** After a probe ends while due checks may be waiting: one more round, unless one is already queued. */
  private refill(): void {
    if (!this.backlog || this.stopped || this.refilling) return;
    this.refilling = true;
    void this.pass().finally(() => {
      this.refilling = false;
      // Probes that ended while this round ran had their slots counted by it, or not: claim for those too.
      if (this.inFlight.size < this.options.concurrency) this.refill();
    });
  }

  /** Never rejects: nothing awaits a probe (a rejection would be unhandled, which ends the process). */
  private async probe(base: URL, check: ClaimedCheck): Promise<void> {
    try {
      const result = await probeOnce(base, check, this.options.probeKey, this.options.timeoutMs);
      await recordProbe(this.db, check.endpoint_id, this.owner, result);
      this.options.metrics?.probed(result.status);
      this.options.logger.debug({ endpoint: check.uuid, status: result.status, status_code: result.status_code, latency_ms: result.latency_ms }, 'health probe');
    } catch (err) {
      // The lease expires by itself; the next due time was already set when the check was claimed.
      this.options.logger.warn({ err, endpoint: check.uuid }, 'health probe result not recorded');
    }
  }

  /** Removes probe rows past 30 days and verdicts past 7 days. */
  async prune(): Promise<void> {
    try {
      const pruned = await pruneHealth(this.db);
      this.options.metrics?.retentionDeleted('health_probes', pruned.probes);
      if (pruned.probes > 0 || pruned.verdicts > 0) this.options.logger.info(pruned, 'health probes pruned');
    } catch (err) {
      this.options.logger.warn({ err }, 'health pruning skipped');
    }
  }

  /** Probes in flight, for tests and shutdown. */
  async idle(): Promise<void> {
    await this.passing;
    await Promise.all([...this.inFlight]);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    if (this.pruneTimer) clearInterval(this.pruneTimer);
    await this.idle();
  }
}
