// The edge role: public HTTP and HTTPS listeners, the agent tunnel endpoint on the same HTTP listener, and the
// config mirror that feeds them. It reads config only from the feed (and its own saved copy), never the store.
import { join } from 'node:path';
import { publicAddressList, type Config } from '../shared/config.ts';
import { FeedSubscriber } from '../shared/feed/subscriber.ts';
import type { FeedSource } from '../shared/feed/transport.ts';
import type { Logger } from '../shared/log.ts';
import type { PresenceStore } from '../shared/presence.ts';
import type { RecordSink } from '../shared/records/types.ts';
import { PROBE_KEY_PURPOSE } from '../shared/health-probe.ts';
import type { SecretBox } from '../shared/secrets.ts';
import { TUNNEL_PATH } from '../shared/tunnel/protocol.ts';
import { agentAuthorizer, watchStanding } from './agent-auth.ts';
import { startDeployChannels, type DeployEventsClient } from './deploy-channel.ts';
import { SessionKeys } from './auth/session.ts';
import { OriginPools } from './forward/origin.ts';
import { DedicatedPorts } from './ports/manager.ts';
import { TrafficRecorder, countRefusals, type CaptureSink } from './capture.ts';
import { EndpointCache } from './endpoint-cache.ts';
import { CredentialUse } from './credential-use.ts';
import { EdgeMetrics, FeedProgress } from './metrics.ts';
import { OpsServer } from './ops.ts';
import { createListeners } from './http/listeners.ts';
import { listen } from './http/listen.ts';
import { DedicatedListeners } from './http/dedicated-listeners.ts';
import { DedicatedAddresses } from './dedicated-addresses.ts';
import type { Tracing } from '../shared/tracing.ts';
import { AccessLog } from './access-log.ts';
import { handleRequest, handleUpgrade } from './pipeline/pipeline.ts';
import type { StageDeps } from './pipeline/stage.ts';
import { StageMemory } from './pipeline/stage-memory.ts';
import { ClusterStore } from './rate-limit/cluster.ts';
import type { RateLimitDeps } from './rate-limit/deps.ts';
import { GeoDatabases } from '../shared/geo.ts';
import { RuleHits } from './rate-limit/hits.ts';
import { compileTrustedProxies } from './rate-limit/visitor-address.ts';
import { HeldRequests, RateLimitCounters } from './rate-limit/visitors.ts';
import type { RateLimitClock } from './rate-limit/window.ts';
import { CertificateSelector, platformCertificate } from './tls.ts';
import { TunnelRegistry } from './tunnels/registry.ts';
import { TunnelServer } from './tunnels/tunnel-server.ts';
import { derivedCredentials, operatorCredentials } from './relay/credentials.ts';
import { RelayPeers } from './relay/peers.ts';
import { RelayServer } from './relay/server.ts';
import { TrafficShipper } from './traffic-shipper.ts';

export interface EdgeDeps {
  settings: Config;
  source: FeedSource;
  secrets: SecretBox;
  presence: PresenceStore;
  logger: Logger;
  /** Creates an ephemeral endpoint through the control API with the agent's key; returns its uuid. */
  createEphemeral(apiKey: string): Promise<string>;
  /**
   * Where traffic records go (rate-limit hit statistics, captured exchanges, usage; src/shared/records); absent: rule
   * matches and traffic are not shipped (the edge's own counters still count).
   */
  records?: RecordSink;
  /** Drives rate-limit windows and throttle timers (tests and benches); absent: the wall clock. */
  rateLimitClock?: RateLimitClock;
  /** Told when a rate-limit rule blocks, throttles, cannot decide or falls back (tests); absent: nobody. */
  rateLimitObserve?: RateLimitDeps['observe'];
  /** Redeems an invite or self-registers a visitor through the control API (StageDeps.register); absent: registration answers 503. */
  register?: StageDeps['register'];
  /** Where stages read the time (StageDeps.clock); absent: the wall clock. */
  clock?: StageDeps['clock'];
  /** Carries deploying agents' events to the control API; absent (no EDGE_CONTROL_URL): they are logged and dropped. */
  deployEvents?: DeployEventsClient;
  /** OpenTelemetry (src/shared/tracing.ts): a span per visitor request when set; null or absent, tracing is off. */
  tracing?: Tracing | null;
}

export interface EdgeNode {
  config: EndpointCache;
  subscriber: FeedSubscriber;
  registry: TunnelRegistry;
  /** What the capture hook recorded on this edge. */
  traffic: TrafficRecorder;
  /** The edge's Prometheus metrics, served on its ops port. */
  metrics: EdgeMetrics;
  /** The internal ops port (/healthz, /readyz, /metrics), apart from the public listeners. */
  opsPort: number;
  httpPort: number;
  httpsPort: number;
  /** The relay listener's port (docs/cluster.md "Relay between edges"); absent without shared presence (REDIS_URL). */
  relayPort?: number;
  close(): Promise<void>;
}

/** Where other edges dial this one's relay: the setting, else the bind host when it names one address, else loopback. */
function relayAdvertiseHost(settings: Config): string {
  if (settings.relay.advertiseHost) return settings.relay.advertiseHost;
  const bind = settings.relay.bindHost || settings.bindHost;
  return bind === '0.0.0.0' || bind === '::' ? '127.0.0.1' : bind;
}


export async function startEdge(deps: EdgeDeps): Promise<EdgeNode> {
  const { settings, logger } = deps;
  const log = logger.child({ component: 'edge' });
  // Set once the HTTPS listener is bound (port 0 picks one); compiled redirect stages read it per use.
  let httpsPortBound = 0;
  // Visitor-auth stages get the secret key (token digests, webhook secrets), state that outlives recompiles while
  // its config is unchanged, and where accepted credentials are noted for the heartbeat; outcomes are counted from
  // when the metrics exist (before any listener is bound, so before any request).
  const credentialUse = new CredentialUse();
  // Cluster-scope rate limits count in Redis on a connection of their own (fail fast, never queue); without
  // REDIS_URL they count on this edge alone (docs/rate-limits.md).
  const rateLimitStore = settings.redisUrl
    ? new ClusterStore({ url: settings.redisUrl, prefix: settings.redisPrefix, timeoutMs: settings.edge.rateLimitRedisTimeoutMs })
    : undefined;
  // Rule matches counted here and sent every ~2 s as one traffic record, which the worker rolls into the rules' stats.
  const ruleHits = deps.records ? new RuleHits({ sink: deps.records, edge: settings.nodeId }) : undefined;
  const stageDeps: StageDeps = {
    publicHttpsPort: () => settings.publicHttpsPort || httpsPortBound,
    secrets: deps.secrets,
    logger: log,
    credentialUse,
    memory: new StageMemory(settings.edge.cacheSize),
    allowPrivate: settings.originAllowPrivate,
    jwks: { timeoutMs: settings.edge.jwksTimeoutMs, cooldownMs: settings.edge.jwksCooldownMs, cacheMaxAgeMs: settings.edge.jwksCacheMaxAgeMs },
    // OAuth/OIDC login sessions: EDGE_SESSION_KEYS, else a key derived from EDGE_SECRET_KEY (every edge agrees).
    sessions: { keys: SessionKeys.fromSettings(settings.edge.sessionKeys, deps.secrets), ttlSeconds: settings.edge.sessionTtlSeconds },
    register: deps.register,
    clock: deps.clock,
    rateLimits: {
      clock: deps.rateLimitClock,
      // Wired to the metrics (and a test's observer) once they exist, before any listener is bound.
      observe: undefined,
      counters: new RateLimitCounters({ maxKeysPerRule: settings.edge.rateLimitMaxKeys }),
      held: new HeldRequests(),
      geo: new GeoDatabases({ countryDb: settings.edge.geoipCountryDb, asnDb: settings.edge.geoipAsnDb }),
      cluster: rateLimitStore,
      maxKeys: settings.edge.rateLimitMaxKeys,
      hits: ruleHits,
    },
  };
  const config = new EndpointCache({
    logger: log,
    cacheSize: settings.edge.cacheSize,
    stateFile: join(settings.dataDir, 'edge-config.json'),
    stageDeps,
  });
  const restored = await config.load();
  // Where the feed stands for this edge (head seen, version applied, lag), for metrics and readiness.
  const feed = new FeedProgress();
  const subscriber = new FeedSubscriber(feed.observe(deps.source), config.mirror, { checkIntervalMs: settings.feed.checkIntervalMs, logger: log, version: restored });
  feed.follow(subscriber);
  subscriber.on('applied', (version) => log.debug({ version }, 'config version applied'));
  // The registration pages wait (bounded) until the version carrying a new client is in force here before sending
  // the visitor on, so their next request is admitted. One listener for every waiter.
  const waiters = new Set<{ version: number; resolve: (ok: boolean) => void }>();
  subscriber.on('applied', () => {
    for (const w of waiters) if (config.version >= w.version) w.resolve(true);
  });
  stageDeps.applied = (version, timeoutMs) => {
    if (config.version >= version) return Promise.resolve(true);
    return new Promise((resolve) => {
      const waiter = {
        version,
        resolve: (ok: boolean) => {
          clearTimeout(timer);
          waiters.delete(waiter);
          resolve(ok);
        },
      };
      const timer = setTimeout(() => waiter.resolve(false), timeoutMs);
      waiters.add(waiter);
    });
  };

  const registry = new TunnelRegistry();
  registry.on('connect', (s) => log.info({ endpoint: s.endpoint.uuid, agent: s.agentId, tags: s.tags, protocol: s.protocol }, 'agent connected'));
  registry.on('disconnect', (s, reason) => log.info({ endpoint: s.endpoint.uuid, agent: s.agentId, reason: reason.code }, 'agent disconnected'));
  const tunnels = new TunnelServer({
    registry,
    region: settings.region,
    node: settings.nodeId,
    logger: log,
    maxDataConnections: settings.edge.tunnelDataConnections,
    // A plain WebSocket to /_edge/tunnel on an endpoint's host is the endpoint's (docs/tunnels.md "Where agents connect").
    servesEndpoint: (host) => config.lookup(host) !== null,
    authorize: agentAuthorizer({ config, plans: settings.plans, region: settings.region, createEphemeral: deps.createEphemeral }),
  });
  // Tunnels whose key is revoked, account suspended or permission removed end when the feed says so.
  const stopStandingWatch = watchStanding({ config, plans: settings.plans, region: settings.region }, registry, { logger: log });
  // Deploying agents get their application's orders from the feed; their events go to the control API (docs/deploy.md).
  const stopDeployChannels = startDeployChannels({ config, registry, client: deps.deployEvents, logger: log.child({ component: 'deploy-channel' }) });

  // Relay (docs/cluster.md): only where presence is shared between edges, i.e. with Redis; a single node has no peer.
  // Both ends authenticate with certificates from the cluster's CA, derived from EDGE_SECRET_KEY unless an operator's.
  let relayServer: RelayServer | undefined;
  let relay: RelayPeers | undefined;
  // Set once the listener is bound; heartbeats before that advertise no relay.
  const relayBound: { port?: number } = {};
  if (settings.redisUrl) {
    const credentials = settings.relay.caFile
      ? await operatorCredentials(settings.relay)
      : await derivedCredentials(deps.secrets.derive('edge-relay-ca'), settings.nodeId);
    relayServer = new RelayServer({ registry, credentials, logger: log });
    relay = new RelayPeers({
      presence: deps.presence,
      node: settings.nodeId,
      region: settings.region,
      regionOrder: settings.relay.regionOrder ? settings.relay.regionOrder.split(',') : [],
      credentials,
      timeoutMs: settings.relay.timeoutMs,
      connectTimeoutMs: settings.relay.connectTimeoutMs,
      failureHoldMs: settings.relay.failureHoldMs,
      // Fresh enough that an agent connected elsewhere is found within about one beat.
      refreshMs: Math.min(settings.presence.intervalMs, 1_000),
      logger: log,
    });
  }

  // Origin names are checked again when connecting: a name may resolve to a private address after the API accepted it.
  const origins = new OriginPools({ allowPrivate: settings.originAllowPrivate, logger: log });
  // Pools of origins no endpoint names any more are closed: each change moves its own URLs' counts (a reset of n
  // endpoints is n small steps, not n scans of every endpoint). The restored config is counted once, here.
  for (const endpoint of config.endpoints()) origins.track(null, endpoint);
  config.on('endpoint', (_uuid, next, previous) => origins.track(previous, next));
  // Finished exchanges: counters per endpoint and, where capture is on, the recent ones (src/edge/capture.ts).
  const traffic = new TrafficRecorder();
  // Usage of every exchange and the exchanges of endpoints with capture on, shipped to the worker in batches
  // (docs/traffic.md "Storage").
  const shipper = deps.records
    ? new TrafficShipper({
        sink: deps.records,
        edge: settings.nodeId,
        region: settings.region,
        redactHeaders: settings.edge.captureRedactHeaders.split(','),
      })
    : undefined;
  const capture: CaptureSink = shipper
    ? {
        record(exchange, detailed) {
          traffic.record(exchange, detailed);
          shipper.record(exchange, detailed);
        },
      }
    : traffic;
  // EDGE_TRUSTED_PROXIES was checked when the settings loaded; the visitor address is decided once per request.
  // Health probes are verified with a key derived from the shared secret (docs/health-checks.md).
  const probeKey = deps.secrets.derive(PROBE_KEY_PURPOSE);
  // Dedicated IPs serve only the endpoints bound to them (docs/dedicated-ips.md "At the edge"): 421 otherwise.
  const dedicated = new DedicatedAddresses(config);
  // EDGE_ACCESS_LOG: a line per visitor request (src/edge/access-log.ts); off when empty.
  const accessLog = settings.edge.accessLog.trim() === '' ? null : AccessLog.open(settings.edge.accessLog.trim());
  const pipeline = { config, registry, relay, origins, capture, logger: log, trustedProxies: compileTrustedProxies(settings.edge.trustedProxies), probeKey, dedicated, tracing: deps.tracing ?? null, accessLog };
  const metrics = new EdgeMetrics({
    traffic,
    tunnels: () => registry.size,
    feed,
    endpointLimit: settings.edge.metricsEndpointLimit,
    records: deps.records,
    capture: shipper,
    relay: relay && relayServer ? () => ({ ...relay.counts, accepted: relayServer.counts.accepted, refused: relayServer.counts.refused }) : undefined,
  });
  stageDeps.authOutcome = (endpoint, stage, outcome) => metrics.authOutcome(endpoint, stage, outcome);
  const observeRateLimit = deps.rateLimitObserve;
  stageDeps.rateLimits!.observe = (endpoint, rule, outcome) => {
    metrics.rateLimitOutcome(endpoint, outcome);
    observeRateLimit?.(endpoint, rule, outcome);
  };
  // Answers given before any endpoint is known (unknown host) have no exchange to capture; counted here instead.
  const serve = countRefusals(traffic, (req, res, secure) => handleRequest(pipeline, req, res, secure));
  const selector = new CertificateSelector(config, deps.secrets, await platformCertificate({ certFile: settings.tlsCertFile, keyFile: settings.tlsKeyFile }, settings.baseDomain), log);
  // The public listeners, with the checks that belong to a connection (src/edge/http/listeners.ts): refused
  // framing, oversized or slow heads, stalled bodies. Their own answers are counted like the pipeline's refusals.
  const { plain, secure, close: stopListenerChecks } = createListeners(
    settings.edge,
    {
      request: serve,
      upgrade: (req, socket, head, isSecure) => {
        if (req.url?.startsWith(TUNNEL_PATH) && tunnels.handleUpgrade(req, socket, head)) return;
        handleUpgrade(pipeline, req, socket, head, isSecure);
      },
      onRefusal: (status, code) => traffic.refused(status, code),
      onSlowClient: (kind) => metrics.slowClientClosed(kind),
    },
    { SNICallback: selector.sniCallback },
  );
  // Names of endpoints with mTLS on are handed to a TLS setup that asks for a client certificate (src/edge/tls.ts);
  // a client that has not sent its ClientHello within the headers timeout could not send its head in time either.
  selector.routeConnections(secure, { helloTimeoutMs: settings.edge.headersTimeoutMs });
  selector.dedicated = dedicated;
  // This region's dedicated addresses, listened on beside the bind host when it does not already cover them.
  const dedicatedListeners = new DedicatedListeners({ dedicated, region: settings.region, bindHost: settings.bindHost, plain, secure, logger: log, onChange: () => beat() });

  // Dedicated TCP/UDP ports follow the config; each bind or close is reported in the next heartbeat.
  const ports = new DedicatedPorts({ config, registry, relay, host: settings.bindHost, logger: log, onChange: () => beat() });

  const publicAddresses = publicAddressList(settings.edge.publicAddresses);
  // Presence: the whole state of this edge, at every change and on a timer (a missed beat only ages the entry).
  let beatQueued = false;
  const beat = () => {
    if (beatQueued) return;
    beatQueued = true;
    setImmediate(() => {
      beatQueued = false;
      deps.presence
        .report({
          node: settings.nodeId,
          region: settings.region,
          version: config.version,
          heartbeat_at: new Date().toISOString(),
          agents: registry.sessions().map((s) => ({
            endpoint: s.endpoint.uuid,
            agent_id: s.agentId,
            tags: [...s.tags],
            protocol: s.protocol,
            connected_at: s.connectedAt.toISOString(),
          })),
          ports: ports.open(),
          ...(relayBound.port === undefined ? {} : { relay: { host: relayAdvertiseHost(settings), port: relayBound.port } }),
          load: registry.sessions().reduce((n, s) => n + s.activeStreams, 0),
          ...(publicAddresses.length > 0 ? { addresses: publicAddresses } : {}),
          ...(dedicatedListeners.bound().length > 0 ? { dedicated_addresses: dedicatedListeners.bound() } : {}),
          // Endpoint configs this edge refused because they failed to compile (bounded), shown by GET /v1/edges.
          ...config.compileErrors(),
          // Visitor credentials accepted here (id → last use), which the worker writes as last_used_at.
          ...credentialUse.report(),
        })
        .catch((err) => log.warn({ err }, 'presence report failed'));
    });
  };
  registry.on('connect', beat);
  registry.on('disconnect', beat);
  subscriber.on('applied', beat);
  const heartbeat = setInterval(beat, settings.presence.intervalMs);
  heartbeat.unref();

  // Ready once a config is held (restored from disk or applied from the feed) and the public listeners are bound.
  const ops = new OpsServer({
    metrics,
    logger: log,
    readiness: { config: () => feed.appliedVersion > 0, listeners: () => plain.listening && secure.listening },
  });
  const opsPort = await ops.listen(settings.opsPort, settings.opsBindHost);
  log.info({ port: opsPort, host: settings.opsBindHost }, 'edge ops listening');

  // Serve from the saved config at once; the feed catches up in the background (control plane or Redis may be down).
  subscriber.start().catch((err) => log.warn({ err }, 'config feed not reachable yet; serving the saved config'));
  const httpPort = await listen(plain, settings.httpPort, settings.bindHost);
  const httpsPort = await listen(secure, settings.httpsPort, settings.bindHost);
  httpsPortBound = httpsPort;
  await dedicatedListeners.start({ http: httpPort, https: httpsPort });
  const relayPort = relayServer ? await relayServer.listen(settings.relay.port, settings.relay.bindHost || settings.bindHost) : undefined;
  relayBound.port = relayPort;
  await relay?.start();
  log.info({ http: httpPort, https: httpsPort, relay: relayPort, version: config.version }, 'edge listening');
  ports.start();
  beat();

  return {
    config,
    subscriber,
    registry,
    traffic,
    metrics,
    opsPort,
    httpPort,
    httpsPort,
    relayPort,
    async close() {
      // Stop accepting, let agents drain, then stop following the feed and save what was applied.
      clearInterval(heartbeat);
      plain.close();
      secure.close();
      dedicatedListeners.close();
      stopListenerChecks();
      // Dedicated ports stop accepting now; their connections drain alongside the tunnels that carry them.
      const portsClosed = ports.close(2_000);
      stopStandingWatch();
      stopDeployChannels();
      // Peers stop being sent new streams; streams relayed here drain alongside the tunnels that carry them.
      relay?.close();
      const relayClosed = relayServer?.close(2_000);
      await tunnels.close(2_000);
      await relayClosed;
      await registry.close(2_000);
      await portsClosed;
      plain.closeAllConnections();
      secure.closeAllConnections();
      await subscriber.stop();
      await origins.close();
      // The last interval's rule matches, sent while the transport is still open (main.ts closes it after the edge).
      ruleHits?.close();
      shipper?.close();
      await deps.records?.flush();
      await accessLog?.close();
      rateLimitStore?.close();
      await config.flush();
      await deps.presence.remove(settings.nodeId).catch(() => {});
      // Last, so probes see the edge not ready (listeners closed) while it drains.
      await ops.close();
    },
  };
}
