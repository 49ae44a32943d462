// The composition root: starts the roles this node runs (control, edge, worker, or all of them) and wires
// them together through the store and the change feed. The only module that may import more than one role.
import { startDnsRole, type DnsRole } from './dns/index.ts';
import { dnsPublisherFrom } from './dns/publisher.ts';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { SecretBox } from './shared/secrets.ts';
import type { AgentEventsAnswer, AgentEventsBody } from './shared/deploy.ts';
import { REGISTRATION_PATH, type RegistrationRequest } from './shared/registration.ts';
import { apiCall } from './shared/api/client.ts';
import { MemoryPresence, RedisPresence, type PresenceStore } from './shared/presence.ts';
import type { Clock } from './shared/clock.ts';
import type { Config } from './shared/config.ts';
import type { Logger } from './shared/log.ts';
import type { FeedMirror, FeedSubscriber } from './shared/feed/subscriber.ts';
import { MemoryFeed } from './shared/feed/memory.ts';
import { RedisFeed } from './shared/feed/redis.ts';
import type { FeedSink, FeedSource } from './shared/feed/transport.ts';
import { MemoryRecords } from './shared/records/memory.ts';
import { RedisRecords } from './shared/records/redis.ts';
import type { RecordSink, RecordSource } from './shared/records/types.ts';
import { openDatabase, type Database } from './store/db.ts';
import { bootstrapAdmin } from './control/bootstrap.ts';
import { reconcileApiKeyFeed } from './store/accounts.ts';
import { FeedPublisher } from './control/feed-publisher.ts';
import { startControl, type ControlServer } from './control/index.ts';
import { startEdge, type EdgeNode } from './edge/index.ts';
import { credentialUseJob } from './worker/credential-use.ts';
import { ephemeralJanitor } from './worker/janitor.ts';
import type { PeriodicJob } from './worker/periodic.ts';
import { startTracing, type OtelEnv, type Tracing } from './shared/tracing.ts';
import { portActivator } from './worker/ports.ts';
import { ruleHitPruner, writeRuleHits } from './worker/rate-limit-hits.ts';
import { trafficRetention, writeTrafficExchanges, writeTrafficUsage } from './worker/traffic.ts';
import { alertEvaluator, alertLeaseMs } from './worker/alerts.ts';
import { createNotifier, type Notifier } from './worker/notify.ts';
import { HealthProber } from './worker/health-prober.ts';
import { PROBE_KEY_PURPOSE } from './shared/health-probe.ts';
import { RecordWorker } from './worker/records.ts';
import { startStoreThread, type StoreThread } from './worker/store-thread/host.ts';
import { connectRedis } from './shared/redis-connect.ts';
import { OpsServer, type ReadinessCheck } from './shared/ops-server.ts';
import { WorkerMetrics, readRecords, type RecordReading } from './worker/metrics.ts';

export interface NodeHandle {
  config: Config;
  db?: Database;
  control?: ControlServer;
  edge?: EdgeNode;
  janitor?: PeriodicJob;
  /** The node's tracer provider when OTEL_EXPORTER_OTLP_ENDPOINT is set (tests flush it); absent: tracing is off. */
  tracing?: Tracing;
  /** The worker's periodic jobs by label (`janitor_sweep`, `alert_evaluation`, …), for tests to run a pass now. */
  workerJobs?: Record<string, PeriodicJob>;
  /** The worker's health prober, when this node probes (docs/health-checks.md). */
  healthProber?: HealthProber;
  /** The edge role's copy of the config feed. */
  edgeFeed?: { subscriber: FeedSubscriber; mirror: FeedMirror };
  /** Where edges report themselves (Redis between nodes, in memory in one process). */
  presence?: PresenceStore;
  /** The DNS role beside this node's edge (docs/dedicated-ips.md), when EDGE_DNS_ENABLED. */
  dns?: DnsRole;
  publisher?: FeedPublisher;
  /** The worker's ops port as bound (WORKER_OPS_PORT; docs/operations.md), when this node runs the worker with one. */
  workerOpsPort?: number;
  /** Set when this start generated the first admin key; it is shown once and never stored in clear. */
  generatedAdminKey?: string;
  close(): Promise<void>;
}

/**
 * EDGE_SECRET_KEY, or in the single-node mode a key generated once and kept in the data directory, so that
 * `npm start` works with no setup. Clustered nodes must share one key, so they must be given it.
 */
function secretKey(config: Config, logger: Logger): string {
  if (config.secretKey) return config.secretKey;
  if (config.role !== 'all') throw new Error(`EDGE_ROLE=${config.role} needs EDGE_SECRET_KEY (the same value on every node)`);
  const file = `${config.dataDir}/secret.key`;
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    mkdirSync(config.dataDir, { recursive: true });
    const key = randomBytes(32).toString('base64url');
    writeFileSync(file, key + '\n', { mode: 0o600, flag: 'wx' });
    logger.warn({ file }, 'generated EDGE_SECRET_KEY for this single node; set it explicitly for clusters');
    return key;
  }
}

/** The one-shot flow's call from an edge to the control API, made with the agent's own key. */
async function createEphemeralEndpoint(controlUrl: string, apiKey: string): Promise<string> {
  if (!controlUrl) throw Object.assign(new Error('EDGE_CONTROL_URL is not set on this edge'), { code: 'unavailable' });
  const answer = await apiCall({ baseUrl: controlUrl, apiKey }, 'post', '/v1/endpoints/ephemeral', { body: {}, signal: AbortSignal.timeout(10_000) });
  if (answer.status === 201 && typeof answer.body?.uuid === 'string') return answer.body.uuid;
  const error = answer.status === 201 ? undefined : (answer.body as { code?: unknown; error?: unknown } | undefined);
  const message = typeof error?.error === 'string' ? error.error : `control API answered ${answer.status}`;
  throw Object.assign(new Error(message), { code: typeof error?.code === 'string' ? error.code : undefined });
}

/**
 * A deploying agent's events, carried by its edge to the control API with the agent's own key
 * (src/edge/deploy-channel.ts). Any answer is handed back; only an unreachable control plane rejects.
 */
async function reportDeployEvents(controlUrl: string, apiKey: string, application: string, body: AgentEventsBody): Promise<{ status: number; answer?: AgentEventsAnswer }> {
  const answer = await apiCall({ baseUrl: controlUrl, apiKey }, 'post', '/v1/applications/{uuid}/agent-events', {
    params: { uuid: application },
    body,
    signal: AbortSignal.timeout(10_000),
  });
  // The answer is checked before it is handed on: the types trust the server, the edge's agent should not have to.
  return answer.status === 200 && Array.isArray(answer.body?.results) ? { status: 200, answer: answer.body } : { status: answer.status };
}

/**
 * The registration pages' call from an edge to the control API's public registration route (no API key: the invite
 * token or the edge's signed identity assertion is the credential). Any answer is handed back; only an unreachable
 * control plane rejects.
 */
async function registerVisitor(controlUrl: string, request: RegistrationRequest): Promise<{ status: number; body: unknown }> {
  if (!controlUrl) throw Object.assign(new Error('EDGE_CONTROL_URL is not set on this edge'), { code: 'unavailable' });
  const answer = await apiCall({ baseUrl: controlUrl }, 'post', REGISTRATION_PATH, { body: request, signal: AbortSignal.timeout(10_000) });
  return { status: answer.status, body: answer.body };
}

function runs(config: Config, role: 'control' | 'edge' | 'worker'): boolean {
  return config.role === 'all' || config.role === role;
}

export interface NodeOptions {
  /** Where the edge's stages read the time (StageDeps.clock); absent: the wall clock. Tests move it by hand. */
  clock?: Clock;
  /** Where the OTEL_* variables are read (src/shared/tracing.ts); absent: process.env. */
  otelEnv?: OtelEnv;
}

export async function startNode(config: Config, logger: Logger, options: NodeOptions = {}): Promise<NodeHandle> {
  const closers: Array<() => Promise<void>> = [];
  const handle: NodeHandle = {
    config,
    async close() {
      // Reverse start order: stop taking requests before closing what they use.
      for (const close of closers.reverse()) await close().catch((err) => logger.error({ err }, 'shutdown step failed'));
    },
  };
  try {
    if (!config.redisUrl && config.role !== 'all') {
      throw new Error(`EDGE_ROLE=${config.role} needs REDIS_URL: separate roles meet only through Redis and the database`);
    }
    // One tracer provider for every role this process runs, closed last (closers run in reverse) so it flushes all.
    const tracing = startTracing(config.role === 'all' ? 'node' : config.role, options.otelEnv ?? process.env, { 'edge.node_id': config.nodeId, 'edge.region': config.region });
    if (tracing !== null) {
      handle.tracing = tracing;
      closers.push(() => tracing.shutdown());
      logger.info({ url: tracing.url }, 'tracing on: exporting spans over OTLP/HTTP');
    }
    const secrets = new SecretBox(secretKey(config, logger));
    const needsDb = runs(config, 'control') || runs(config, 'worker');
    const dbOptions = { url: config.databaseUrl, dataDir: `${config.dataDir}/pglite`, schema: config.databaseSchema, statementTimeoutMs: config.databaseStatementTimeoutMs };
    // One process with every role: the worker's record writer gets a thread of its own, and with embedded PGlite that
    // thread owns the store too, so no SQL runs on the edge's event loop (docs/architecture.md "What runs where").
    let storeThread: StoreThread | undefined;
    if (config.role === 'all') {
      if (dbOptions.url) {
        const db = await openDatabase(dbOptions);
        handle.db = db;
        closers.push(() => db.close());
      }
      const thread = await startStoreThread({
        // With PostgreSQL the thread only writes records (one transaction at a time, plus the liveness check).
        database: dbOptions.url ? { ...dbOptions, maxConnections: 2 } : dbOptions,
        ownsDatabase: !dbOptions.url,
        records: config.redisUrl ? { kind: 'redis', url: config.redisUrl, prefix: config.redisPrefix, consumer: config.nodeId } : { kind: 'port' },
        nice: config.storeThreadNice,
        logger,
        logLevel: config.logLevel,
        logBindings: { role: config.role, node: config.nodeId, region: config.region },
      });
      storeThread = thread;
      handle.db ??= thread.db;
      closers.push(() => thread.close());
    } else if (needsDb) {
      const db = await openDatabase(dbOptions);
      handle.db = db;
      closers.push(() => db.close());
    }
    if (handle.db) logger.info({ engine: handle.db.engine, schema: handle.db.schema, thread: storeThread?.db !== undefined }, 'store ready');

    // The feed: Redis between nodes, or one in-process map shared by the roles of this process.
    let sink: FeedSink & FeedSource;
    let redis: Redis | undefined;
    if (config.redisUrl) {
      sink = new RedisFeed({ url: config.redisUrl, prefix: config.redisPrefix, maxLen: config.feed.streamMaxLen, logger });
      redis = connectRedis(config.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1, enableOfflineQueue: false });
      redis.on('error', () => {});
      await redis.connect().catch((err) => logger.warn({ err }, 'redis not reachable yet; readiness will say so'));
      closers.push(async () => {
        redis?.disconnect();
      });
    } else {
      sink = new MemoryFeed({ maxLen: config.feed.streamMaxLen });
    }
    closers.push(() => sink.close());
    const presence: PresenceStore = config.redisUrl
      ? new RedisPresence(config.redisUrl, config.redisPrefix, config.presence.staleMs)
      : new MemoryPresence(config.presence.staleMs);
    closers.push(() => presence.close());
    handle.presence = presence;

    // Traffic records (rate-limit hit statistics) from edges to the worker: a Redis Stream between nodes, or one
    // in-process stream shared by the roles of this process (docs/traffic-records.md).
    // With every role in one process the store thread reads them (above): the edge posts to it, or appends to Redis.
    let records: RecordSink | undefined;
    // The record worker's counts and backlog for the worker's metrics: from the store thread, or this thread's worker.
    let recordReading: (() => Promise<RecordReading>) | undefined;
    if (storeThread) {
      recordReading = () => storeThread.stats();
      const sink = storeThread.records ?? new RedisRecords({ url: config.redisUrl, prefix: config.redisPrefix, consumer: config.nodeId, logger });
      records = sink;
      // Closed after the edge's shutdown flush and before the thread's last drain.
      closers.push(() => sink.close());
    } else if (runs(config, 'edge') || runs(config, 'worker')) {
      const transport: RecordSink & RecordSource = config.redisUrl
        ? new RedisRecords({ url: config.redisUrl, prefix: config.redisPrefix, consumer: config.nodeId, logger })
        : new MemoryRecords();
      records = transport;
      closers.push(() => transport.close());
      if (runs(config, 'worker')) {
        // Started before the edge so that it stops after it: what the edge flushes at shutdown is still written.
        const recordWorker = new RecordWorker(handle.db!, transport, { rate_limit_hits: writeRuleHits, traffic_exchange: writeTrafficExchanges, traffic_usage: writeTrafficUsage }, { logger: logger.child({ component: 'traffic-records' }) });
        recordWorker.start();
        closers.push(() => recordWorker.stop());
        recordReading = () => readRecords(recordWorker.stats(), transport);
      }
    }

    // Alert notifications (docs/traffic.md "Alerts"): the worker's evaluator and the control API's test operation send
    // through one notifier, so a test reaches a channel exactly as a real alert would.
    let notifier: Notifier | undefined;
    if (needsDb) {
      const built = createNotifier({
        allowPrivate: config.originAllowPrivate,
        smtpUrl: config.alerts.smtpUrl,
        smtpFrom: config.alerts.smtpFrom,
        baseDomain: config.baseDomain,
        webhookTimeoutMs: config.alerts.webhookTimeoutMs,
        logger: logger.child({ component: 'alerts' }),
      });
      notifier = built;
      closers.push(() => built.close());
    }

    if (runs(config, 'control')) {
      const db = handle.db!;
      const boot = await bootstrapAdmin(db, config);
      if (boot?.generatedKey) {
        handle.generatedAdminKey = boot.generatedKey;
        logger.warn({ admin_user_id: boot.adminUserId }, 'generated the first admin API key; it is printed once on stdout');
      }
      // Key entries written by an older release (without permissions) or left behind are made current before edges
      // rely on them (docs/tunnels.md "Admission and standing").
      const reconciled = await reconcileApiKeyFeed(db);
      if (reconciled > 0) logger.info({ api_keys: reconciled }, 'republished API key entries that differed from the store');
      const publisher = new FeedPublisher({ db, sink, logger, pollMs: config.feed.publishPollMs, retain: config.feed.outboxRetention });
      await publisher.start();
      handle.publisher = publisher;
      closers.push(() => publisher.stop());
      const readiness: Record<string, () => Promise<boolean>> = {};
      if (redis) readiness.redis = async () => (await redis!.ping()) === 'PONG';
      // Redirect URIs name the port the edge sends visitors to: the configured public one, or this node's bound listener.
      const publicHttpsPort = () => config.publicHttpsPort || handle.edge?.httpsPort || config.httpsPort;
      // Traffic replays go to an edge's public listener as a visitor's request would (docs/traffic.md "API"): the
      // configured one, else this process's own edge over loopback (bound after the control API, so read per replay).
      const replayEdge = (secure: boolean) => {
        if (config.replayEdgeUrl) return { origin: config.replayEdgeUrl.replace(/\/$/, ''), verifyTls: true };
        const edge = handle.edge;
        if (!edge) return null;
        const host = config.bindHost === '0.0.0.0' || config.bindHost === '::' ? '127.0.0.1' : config.bindHost;
        const hostPart = host.includes(':') ? `[${host}]` : host;
        return secure ? { origin: `https://${hostPart}:${edge.httpsPort}`, verifyTls: false } : { origin: `http://${hostPart}:${edge.httpPort}`, verifyTls: true };
      };
      if (!config.replayEdgeUrl && !runs(config, 'edge')) logger.warn('EDGE_REPLAY_EDGE_URL is not set: traffic replays will answer 503 on this control node');
      // Group bindings are published to the operator's primary by RFC 2136 when EDGE_DNS_UPDATE_SERVER is set.
      const dnsRepoint = dnsPublisherFrom(config) ?? undefined;
      const control = await startControl({ config, db, logger, secrets, presence, readiness, publicHttpsPort, replayEdge, alertNotifier: notifier?.notify, dnsRepoint });
      handle.control = control;
      closers.push(() => control.close());
      logger.info({ port: control.port, host: config.bindHost }, 'control API listening');
    }

    if (runs(config, 'edge')) {
      const controlUrl = config.controlUrl || (handle.control ? `http://127.0.0.1:${handle.control.port}` : '');
      const edge = await startEdge({
        settings: config,
        source: sink,
        secrets,
        presence,
        logger,
        createEphemeral: (apiKey) => createEphemeralEndpoint(controlUrl, apiKey),
        records,
        register: (request) => registerVisitor(controlUrl, request),
        deployEvents: controlUrl ? { report: (apiKey, application, body) => reportDeployEvents(controlUrl, apiKey, application, body) } : undefined,
        clock: options.clock,
        tracing,
      });
      handle.edge = edge;
      handle.edgeFeed = { subscriber: edge.subscriber, mirror: edge.config.mirror };
      closers.push(() => edge.close());
      // The DNS role answers beside every edge, from its own copy of the feed; its counters join the edge's ops port.
      if (config.dns.enabled) {
        const dns = await startDnsRole({ settings: config, source: sink, presence, logger, metrics: edge.metrics.registry });
        handle.dns = dns;
        closers.push(() => dns.close());
      }
    }

    if (config.worker.opsPort !== null && !runs(config, 'worker')) {
      logger.warn({ role: config.role }, 'WORKER_OPS_PORT is set but this node runs no worker: no worker ops port');
    }
    if (runs(config, 'worker')) {
      const metrics = new WorkerMetrics({ records: recordReading });
      /** Every periodic job reports its passes to the worker's metrics, under its name as a label. */
      const jobs: Record<string, PeriodicJob> = {};
      handle.workerJobs = jobs;
      const watched = <J extends PeriodicJob>(job: J): J => {
        metrics.jobWatched(job.label);
        jobs[job.label] = job;
        if (tracing !== null) job.trace(tracing.tracer);
        return job.observe(metrics);
      };
      const janitor = ephemeralJanitor(handle.db!, presence, {
        intervalMs: config.janitor.intervalMs,
        idleSeconds: config.janitor.ephemeralIdleSeconds,
        logger: logger.child({ component: 'janitor' }),
      });
      watched(janitor).start();
      handle.janitor = janitor;
      closers.push(() => janitor.stop());
      // Turns endpoints with dedicated ports active once edges report the ports bound: it follows the heartbeats
      // (a read of presence every EDGE_PORT_ACTIVATION_INTERVAL_MS, or every janitor interval if that is shorter),
      // with a full pass on the janitor's cadence.
      const activator = portActivator(handle.db!, presence, {
        intervalMs: Math.min(config.janitor.portActivationIntervalMs, config.janitor.intervalMs),
        sweepMs: config.janitor.intervalMs,
        logger: logger.child({ component: 'port-activator' }),
      });
      watched(activator).start();
      closers.push(() => activator.stop());
      // Writes last_used_at of visitor credentials from what edges report in their heartbeats; same cadence.
      const credentialUse = credentialUseJob(handle.db!, presence, { intervalMs: config.janitor.intervalMs, logger: logger.child({ component: 'credential-use' }) });
      watched(credentialUse).start();
      closers.push(() => credentialUse.stop());
      // Daily rate-limit hit buckets past the 7-day window; same cadence.
      const hitPruner = ruleHitPruner(handle.db!, { intervalMs: config.janitor.intervalMs, logger: logger.child({ component: 'rate-limit-hits' }), metrics });
      watched(hitPruner).start();
      closers.push(() => hitPruner.stop());
      // Captured traffic and its per-minute rollup past each plan's traffic_retention_days (docs/traffic.md); same cadence.
      const retention = trafficRetention(handle.db!, { plans: config.plans, intervalMs: config.janitor.intervalMs, logger: logger.child({ component: 'traffic-retention' }), metrics });
      watched(retention).start();
      closers.push(() => retention.stop());
      // Alert rules, judged every EDGE_ALERT_EVALUATION_INTERVAL_MS under a lease long enough for three webhook attempts.
      const evaluator = alertEvaluator(handle.db!, {
        intervalMs: config.alerts.evaluationIntervalMs,
        owner: `${config.nodeId}-${randomBytes(3).toString('hex')}`,
        leaseMs: alertLeaseMs(config.alerts),
        notifier: notifier!.notify,
        secrets,
        logger: logger.child({ component: 'alert-evaluator' }),
        metrics,
      });
      watched(evaluator).start();
      closers.push(() => evaluator.stop());
      // Health checks probe through an edge's public listener as visitors do: EDGE_PROBE_EDGE_URL, else this process's
      // own edge over loopback (docs/health-checks.md). A worker-only node without the setting does not probe.
      const probeEdge = (): string | null => {
        if (config.health.probeEdgeUrl) return config.health.probeEdgeUrl;
        const edge = handle.edge;
        if (!edge) return null;
        const host = config.bindHost === '0.0.0.0' || config.bindHost === '::' ? '127.0.0.1' : config.bindHost;
        return `http://${host.includes(':') ? `[${host}]` : host}:${edge.httpPort}`;
      };
      if (config.health.probeEdgeUrl || runs(config, 'edge')) {
        const prober = new HealthProber(handle.db!, {
          edgeUrl: probeEdge,
          probeKey: secrets.derive(PROBE_KEY_PURPOSE),
          timeoutMs: config.health.probeTimeoutMs,
          minIntervalSeconds: config.health.minIntervalSeconds,
          concurrency: config.health.concurrency,
          node: config.nodeId,
          logger: logger.child({ component: 'health-prober' }),
          metrics,
        });
        prober.start();
        handle.healthProber = prober;
        closers.push(() => prober.stop());
      } else {
        logger.warn('EDGE_PROBE_EDGE_URL is not set: this worker does not run health checks');
      }
      if (config.worker.opsPort !== null) {
        // Ready while the store and Redis answer and the jobs that hold leases (alert rules, health checks) keep
        // passing (docs/operations.md "Readiness"); each round trip is cut at the ops server's check timeout.
        const db = handle.db!;
        const readiness: Record<string, ReadinessCheck> = {
          store: async () => {
            await db.query('SELECT 1');
            return true;
          },
        };
        if (redis) {
          const client = redis;
          readiness.redis = async () => (await client.ping()) === 'PONG';
        }
        readiness.alert_evaluator = () => evaluator.current();
        const prober = handle.healthProber;
        if (prober) readiness.health_prober = () => prober.current();
        const ops = new OpsServer({ metrics, readiness, logger, component: 'worker-ops' });
        const port = await ops.listen(config.worker.opsPort, config.worker.opsBindHost);
        handle.workerOpsPort = port;
        closers.push(() => ops.close());
        logger.info({ port, host: config.worker.opsBindHost }, 'worker ops listening');
      }
      logger.info({ idle_seconds: config.janitor.ephemeralIdleSeconds }, 'worker started: ephemeral janitor');
    }
    return handle;
  } catch (err) {
    await handle.close();
    throw err;
  }
}
