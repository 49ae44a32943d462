// Loads the node's configuration: defaults from config/, an optional JSON file, then environment variables.
// Validated once at start and deep-frozen, so every later reader can trust it without re-checking.
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { compileCidrList, parseIp } from './match/cidr.ts';
import { PlanSchema, type Plan } from './plans.ts';
import { parseRedisNodes, parseRedisTarget } from './redis-connect.ts';

const Port = Type.Integer({ minimum: 0, maximum: 65535 });
const Role = Type.Union([Type.Literal('all'), Type.Literal('control'), Type.Literal('edge'), Type.Literal('worker')]);

export const ConfigSchema = Type.Object(
  {
    role: Role,
    bindHost: Type.String({ minLength: 1 }),
    controlPort: Port,
    httpPort: Port,
    httpsPort: Port,
    // The HTTPS port visitors use (HTTPS redirects name it), when a load balancer or port mapping puts the edge's
    // listener behind another one, typically 443; 0 = the HTTPS listener's own port.
    publicHttpsPort: Port,
    // The edge's internal operations port (/healthz, /readyz, /metrics), apart from the public listeners so
    // visitors never reach it; bound to loopback by default, since metrics name endpoints and tunnel counts.
    opsPort: Port,
    opsBindHost: Type.String({ minLength: 1 }),
    // The worker's internal operations port (/healthz, /readyz, /metrics; docs/operations.md) on nodes whose role
    // includes the worker: null (unset) = none, 0 = a port the system chooses. Loopback by default, as the edge's.
    worker: Type.Object(
      {
        opsPort: Type.Union([Port, Type.Null()]),
        opsBindHost: Type.String({ minLength: 1 }),
      },
      { additionalProperties: false },
    ),
    dataDir: Type.String({ minLength: 1 }),
    baseDomain: Type.String({ pattern: '^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$' }),
    region: Type.String({ pattern: '^[a-z0-9][a-z0-9-]{0,31}$' }),
    nodeId: Type.String({ pattern: '^[A-Za-z0-9._-]{1,64}$' }),
    adminApiKey: Type.String(),
    // Seals certificate private keys at rest; every node of a cluster needs the same value.
    secretKey: Type.String(),
    // ip[:port] list for domain-verification TXT lookups; empty uses the system resolver.
    dnsResolvers: Type.String(),
    // The platform certificate for the HTTPS listener; both empty = a self-signed development certificate.
    tlsCertFile: Type.String(),
    tlsKeyFile: Type.String(),
    // Where an edge reaches the control API (the one-shot flow creates ephemeral endpoints there); empty = this node's.
    controlUrl: Type.String({ pattern: '^(https?://.+)?$' }),
    // The control API's public base URL (http(s)://host[:port], no path), as git providers reach it: webhook URLs
    // (GET /v1/applications/{uuid}/webhook) are made from it. Empty = http://<the control listener's address>.
    publicControlUrl: Type.String({ pattern: '^(https?://[^/?#\\s]+/?)?$' }),
    // Git push-to-deploy (docs/api.md "Applications and deployments").
    deploy: Type.Object(
      {
        // Whether applications may name file:// repositories. For tests and local development only: a file URL reads
        // the deploying agent's own disk.
        allowFileUrls: Type.Boolean(),
        // Largest webhook delivery body accepted (413 beyond it, before reading the rest).
        webhookMaxBytes: Type.Integer({ minimum: 1024, maximum: 32 * 1024 * 1024 }),
        // Authenticated deliveries taken per application per minute, per control node (429 beyond it).
        webhookRatePerMinute: Type.Integer({ minimum: 1, maximum: 100000 }),
      },
      { additionalProperties: false },
    ),
    // Where the control API sends traffic replays (POST /v1/traffic/logs/{id}/replay): the base URL of an edge's public
    // listener (http:// or https://, no path). Empty = this node's own edge when it runs one; a control-only node
    // without it answers replays 503 (docs/traffic.md "API").
    replayEdgeUrl: Type.String({ pattern: '^(https?://[^/?#\\s]+/?)?$' }),
    // Whether endpoints may name origins on loopback, private or link-local addresses. Off by default: an origin
    // is fetched from inside the edge's network, so allowing them would let users reach internal services (SSRF).
    originAllowPrivate: Type.Boolean(),
    // Edge-to-edge relay (docs/cluster.md "Relay between edges"): an edge that holds no agent of an endpoint forwards
    // the judged request to an edge that does, over HTTP/2 with mutual TLS on this port. The listener runs only where
    // presence is shared (REDIS_URL): a single node has no other edge.
    relay: Type.Object(
      {
        // 0 = a port the system chooses (advertised in presence as bound).
        port: Port,
        // Empty = the edge's bind host.
        bindHost: Type.String(),
        // The address other edges dial, advertised in presence. Empty = the bind host when it names one address,
        // else 127.0.0.1 (several edges on one machine need no setting).
        advertiseHost: Type.String(),
        // Longest wait for a peer's answer to begin (headers); then the visitor gets 504 agent_timeout.
        timeoutMs: Type.Integer({ minimum: 100 }),
        // Longest wait for the TLS connection to a peer; a peer that fails is avoided for a while (failureHoldMs).
        connectTimeoutMs: Type.Integer({ minimum: 50 }),
        failureHoldMs: Type.Integer({ minimum: 0 }),
        // An operator's CA instead of the key derived from EDGE_SECRET_KEY: all three PEM files, or none.
        caFile: Type.String(),
        certFile: Type.String(),
        keyFile: Type.String(),
        // Regions nearest first (comma-separated); peers are chosen in this order, then by load. Empty = this
        // edge's own region first, then the others.
        regionOrder: Type.String({ pattern: '^([a-z0-9][a-z0-9-]{0,31}(,[a-z0-9][a-z0-9-]{0,31})*)?$' }),
      },
      { additionalProperties: false },
    ),
    // The DNS role (docs/dedicated-ips.md): an authoritative server for the base domain and the GeoDNS zone, answering
    // from the change feed and presence; part of `edge serve` and of EDGE_ROLE=dns.
    dns: Type.Object(
      {
        // Runs beside every edge (EDGE_ROLE=all or edge); false leaves DNS to other nodes or to the operator.
        enabled: Type.Boolean(),
        // UDP and TCP on one port; 0 = a port the system chooses.
        port: Port,
        bindHost: Type.String({ minLength: 1 }),
        // The zone of per-region group names (grp-<id>.<zone>). Absent (null in config/default.json) = geo.<baseDomain>;
        // EDGE_GEODNS_ZONE set to an empty value turns GeoDNS off (binding a group answers 503).
        geoZone: Type.String({ pattern: '^((?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)?$' }),
        // TTL of group answers (short, so a region that goes away leaves caches soon) and of every other record.
        geoTtlSeconds: Type.Integer({ minimum: 1, maximum: 86400 }),
        ttlSeconds: Type.Integer({ minimum: 1, maximum: 86400 }),
        // Name servers of both zones (NS records, comma-separated host names); empty = ns1.<baseDomain>.
        nameservers: Type.String({ pattern: '^([a-z0-9.-]+(,[a-z0-9.-]+)*)?$' }),
        // The country -> region map and fallback order; empty = config/regions.json.
        regionsFile: Type.String(),
        // Answers per second to one client network (IPv4 /24, IPv6 /56) over UDP; beyond it answers are dropped,
        // every `rateLimitSlip`-th sent truncated so real resolvers retry over TCP. 0 = no limit.
        rateLimit: Type.Integer({ minimum: 0, maximum: 1000000 }),
        rateLimitSlip: Type.Integer({ minimum: 0, maximum: 10 }),
        // RFC 2136 publishing to an operator's primary (host:port), for names inside updateZone, signed with the
        // TSIG key (name:algorithm:base64secret). All three, or none: the embedded server is then the authority.
        updateServer: Type.String(),
        updateZone: Type.String({ pattern: '^((?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)?$' }),
        tsigKey: Type.String(),
        updateTimeoutMs: Type.Integer({ minimum: 100, maximum: 60000 }),
      },
      { additionalProperties: false },
    ),
    presence: Type.Object(
      {
        // Edges report their agents and config version this often (and at once on connect/disconnect).
        intervalMs: Type.Integer({ minimum: 50 }),
        // A report older than this means the edge is gone.
        staleMs: Type.Integer({ minimum: 100 }),
      },
      { additionalProperties: false },
    ),
    janitor: Type.Object(
      {
        intervalMs: Type.Integer({ minimum: 50 }),
        // How often the worker reads presence for newly bound dedicated ports, to turn their endpoints active soon
        // after the edge's heartbeat lists them (docs/dedicated-ports.md "Presence and status"); cheap: no query
        // reaches the database unless a heartbeat shows something new.
        portActivationIntervalMs: Type.Integer({ minimum: 50 }),
        // An ephemeral endpoint whose agents have been gone this long is removed.
        ephemeralIdleSeconds: Type.Integer({ minimum: 1 }),
      },
      { additionalProperties: false },
    ),
    // Health checks (docs/health-checks.md): the worker's prober and the control API's uptime cache.
    health: Type.Object(
      {
        // Where the prober sends probes: an edge's public HTTP listener (http:// or https://, no path), reached as
        // visitors reach it. Empty = this node's own edge; a worker-only node without it does not probe.
        probeEdgeUrl: Type.String({ pattern: '^(https?://[^/?#\\s]+/?)?$' }),
        // A probe with no complete response head by then is a `timeout` verdict.
        probeTimeoutMs: Type.Integer({ minimum: 100, maximum: 60000 }),
        // For tests: the prober's effective interval for the API's minimum (60 s); every configured interval is
        // scaled by minIntervalSeconds / 60 (60 = no scaling). The API's accepted range stays 60 to 86400.
        minIntervalSeconds: Type.Integer({ minimum: 1, maximum: 60 }),
        // How long GET health's uptime aggregates are kept per endpoint in a control process (docs/api.md: about 5 min).
        uptimeCacheSeconds: Type.Integer({ minimum: 0, maximum: 3600 }),
        // Checks probed at once by one worker, at most.
        concurrency: Type.Integer({ minimum: 1, maximum: 1000 }),
      },
      { additionalProperties: false },
    ),
    edge: Type.Object(
      {
        maxHeaderBytes: Type.Integer({ minimum: 1024, maximum: 1048576 }),
        headersTimeoutMs: Type.Integer({ minimum: 1000 }),
        keepAliveTimeoutMs: Type.Integer({ minimum: 100 }),
        // A request body that delivers no byte for this long closes its connection (408 when no response started).
        requestBodyIdleTimeoutMs: Type.Integer({ minimum: 1000 }),
        cacheSize: Type.Integer({ minimum: 10 }),
        // Per-endpoint series on the ops port's /metrics: only the most recently active endpoints get them, so a
        // scrape stays bounded however many endpoints an edge serves (node-wide totals count every request).
        metricsEndpointLimit: Type.Integer({ minimum: 0, maximum: 10000 }),
        // The JWT layer's key fetching (src/edge/stages/jwt.ts): how long a JWKS fetch may take, how soon a token
        // with an unknown kid may make the edge fetch again (the flood bound), and how long a fetched key set lasts.
        jwksTimeoutMs: Type.Integer({ minimum: 100, maximum: 60000 }),
        jwksCooldownMs: Type.Integer({ minimum: 0 }),
        jwksCacheMaxAgeMs: Type.Integer({ minimum: 1000 }),
        // OAuth/OIDC login sessions (src/edge/auth/session.ts): comma-separated HMAC secrets of 32 characters or
        // more, the first signing and all verifying (rotation: put the new one first, drop the old one once its
        // sessions have expired); empty = one key derived from secretKey. Every edge of a cluster needs the same.
        sessionKeys: Type.String({ pattern: '^(\\s*[^,\\s]{32,}\\s*(,\\s*[^,\\s]{32,}\\s*)*)?$' }),
        // The session lifetime for endpoints whose settings leave session_ttl_seconds unset.
        sessionTtlSeconds: Type.Integer({ minimum: 60, maximum: 31622400 }),
        // Addresses and CIDRs (comma-separated) of proxies in front of the edge: only a request from one of them names
        // its visitor in X-Forwarded-For (src/edge/rate-limit/visitor-address.ts); empty = the socket's peer always.
        trustedProxies: Type.String(),
        // The access log (src/edge/access-log.ts): one JSON line per visitor request to a known endpoint. Empty = off,
        // `stdout`, or a file path (appended to, created with its directory).
        accessLog: Type.String(),
        // MaxMind-format databases for rate-limit country and ASN conditions; empty = the ones shipped by npm packages.
        geoipCountryDb: Type.String(),
        geoipAsnDb: Type.String(),
        // Cluster-scope rate limits: how long a decision may wait for Redis before the rule's fail_mode applies.
        rateLimitRedisTimeoutMs: Type.Integer({ minimum: 5, maximum: 10000 }),
        // Visitors counted per rate-limit rule in memory (least recently seen forgotten first): the memory bound.
        rateLimitMaxKeys: Type.Integer({ minimum: 100, maximum: 10000000 }),
        // Header names (comma-separated, any case) whose values full traffic capture stores as [redacted], beyond
        // Authorization, Proxy-Authorization, Cookie and Set-Cookie (docs/traffic.md "Storage").
        captureRedactHeaders: Type.String({ pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~,\\s-]*$" }),
        // The public addresses visitors reach this edge on (comma-separated IPv4/IPv6), announced in its heartbeat: the
        // DNS role answers endpoint names without a dedicated IP with the live edges' addresses. Empty = none announced.
        publicAddresses: Type.String(),
        // Data connections granted to each raw-transport http agent (docs/tunnels.md "Data connections"); 0: none.
        tunnelDataConnections: Type.Integer({ minimum: 0, maximum: 1024 }),
      },
      { additionalProperties: false },
    ),
    // Traffic alerts (docs/traffic.md "Alerts"): how often the worker evaluates every rule, and how e-mail leaves.
    alerts: Type.Object(
      {
        evaluationIntervalMs: Type.Integer({ minimum: 50, maximum: 3600000 }),
        // smtp:// or smtps:// URL with any credentials (nodemailer's form); empty = e-mail channels are not notified.
        smtpUrl: Type.String({ pattern: '^(smtps?://.+)?$' }),
        // The From of alert e-mail; empty = "Edge alerts <alerts@{baseDomain}>".
        smtpFrom: Type.String({ maxLength: 320 }),
        // One webhook delivery attempt may take this long; three attempts are made with backoff.
        webhookTimeoutMs: Type.Integer({ minimum: 100, maximum: 60000 }),
      },
      { additionalProperties: false },
    ),
    databaseUrl: Type.String(),
    databaseSchema: Type.String({ pattern: '^[a-z_][a-z0-9_]{0,62}$' }),
    // Longest a PostgreSQL statement may run before the server cancels it (the control API then answers 503).
    databaseStatementTimeoutMs: Type.Integer({ minimum: 100, maximum: 600000 }),
    // `edge serve`'s store thread (embedded PGlite, the record writer) runs at this nice value: 19, the lowest
    // priority, lets the edge keep a core it shares with it (docs/architecture.md "What runs where"); 0 stores
    // captured traffic at the edge's priority. A test suite that saturates its machine sets 0.
    storeThreadNice: Type.Integer({ minimum: 0, maximum: 19 }),
    redisUrl: Type.String(),
    redisPrefix: Type.String({ pattern: '^[A-Za-z0-9:_.-]{1,64}$' }),
    logLevel: Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l))),
    bodyLimitBytes: Type.Integer({ minimum: 1024, maximum: 64 * 1024 * 1024 }),
    listMaxOffset: Type.Integer({ minimum: 100 }),
    // Legacy integer ids in rate-limit paths are accepted until this instant (RFC 3339), with Deprecation and Sunset
    // headers; after it they are 400 integer_id_unsupported (docs/api.md "Versioning and deprecations" 2, docs/rate-limits.md).
    rateLimitIdSunset: Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}(T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?(Z|[+-]\\d{2}:\\d{2}))?$' }),
    feed: Type.Object(
      {
        checkIntervalMs: Type.Integer({ minimum: 100 }),
        streamMaxLen: Type.Integer({ minimum: 100 }),
        outboxRetention: Type.Integer({ minimum: 100 }),
        publishPollMs: Type.Integer({ minimum: 10 }),
      },
      { additionalProperties: false },
    ),
    plans: Type.Record(Type.String({ pattern: '^[a-z][a-z0-9_-]{0,31}$' }), PlanSchema),
  },
  { additionalProperties: false },
);

export type Config = Readonly<Static<typeof ConfigSchema>> & { readonly plans: Readonly<Record<string, Plan>> };

/** Environment variables and the setting each one overrides. This table is the documented contract. */
export const ENV_SETTINGS = {
  EDGE_ROLE: 'role',
  EDGE_BIND_HOST: 'bindHost',
  EDGE_CONTROL_PORT: 'controlPort',
  EDGE_HTTP_PORT: 'httpPort',
  EDGE_HTTPS_PORT: 'httpsPort',
  EDGE_DATA_DIR: 'dataDir',
  EDGE_BASE_DOMAIN: 'baseDomain',
  EDGE_REGION: 'region',
  EDGE_NODE_ID: 'nodeId',
  EDGE_ADMIN_API_KEY: 'adminApiKey',
  EDGE_SECRET_KEY: 'secretKey',
  EDGE_DNS_RESOLVERS: 'dnsResolvers',
  EDGE_TLS_CERT_FILE: 'tlsCertFile',
  EDGE_TLS_KEY_FILE: 'tlsKeyFile',
  EDGE_CONTROL_URL: 'controlUrl',
  EDGE_REPLAY_EDGE_URL: 'replayEdgeUrl',
  EDGE_PUBLIC_CONTROL_URL: 'publicControlUrl',
  EDGE_DEPLOY_ALLOW_FILE_URLS: 'deploy.allowFileUrls',
  EDGE_DEPLOY_WEBHOOK_MAX_BYTES: 'deploy.webhookMaxBytes',
  EDGE_DEPLOY_WEBHOOK_RATE: 'deploy.webhookRatePerMinute',
  EDGE_ORIGIN_ALLOW_PRIVATE: 'originAllowPrivate',
  EDGE_PUBLIC_HTTPS_PORT: 'publicHttpsPort',
  EDGE_OPS_PORT: 'opsPort',
  EDGE_OPS_BIND_HOST: 'opsBindHost',
  WORKER_OPS_PORT: 'worker.opsPort',
  WORKER_OPS_BIND_HOST: 'worker.opsBindHost',
  EDGE_METRICS_ENDPOINT_LIMIT: 'edge.metricsEndpointLimit',
  EDGE_MAX_HEADER_BYTES: 'edge.maxHeaderBytes',
  EDGE_JWKS_TIMEOUT_MS: 'edge.jwksTimeoutMs',
  EDGE_JWKS_COOLDOWN_MS: 'edge.jwksCooldownMs',
  EDGE_JWKS_CACHE_MAX_AGE_MS: 'edge.jwksCacheMaxAgeMs',
  EDGE_SESSION_KEYS: 'edge.sessionKeys',
  EDGE_SESSION_TTL_SECONDS: 'edge.sessionTtlSeconds',
  EDGE_TRUSTED_PROXIES: 'edge.trustedProxies',
  EDGE_ACCESS_LOG: 'edge.accessLog',
  EDGE_GEOIP_COUNTRY_DB: 'edge.geoipCountryDb',
  EDGE_GEOIP_ASN_DB: 'edge.geoipAsnDb',
  EDGE_RATE_LIMIT_REDIS_TIMEOUT_MS: 'edge.rateLimitRedisTimeoutMs',
  EDGE_RATE_LIMIT_MAX_KEYS: 'edge.rateLimitMaxKeys',
  EDGE_CAPTURE_REDACT_HEADERS: 'edge.captureRedactHeaders',
  EDGE_TUNNEL_DATA_CONNECTIONS: 'edge.tunnelDataConnections',
  EDGE_PUBLIC_ADDRESSES: 'edge.publicAddresses',
  EDGE_RELAY_PORT: 'relay.port',
  EDGE_RELAY_BIND_HOST: 'relay.bindHost',
  EDGE_RELAY_ADVERTISE_HOST: 'relay.advertiseHost',
  EDGE_RELAY_TIMEOUT_MS: 'relay.timeoutMs',
  EDGE_RELAY_CONNECT_TIMEOUT_MS: 'relay.connectTimeoutMs',
  EDGE_RELAY_FAILURE_HOLD_MS: 'relay.failureHoldMs',
  EDGE_RELAY_CA_FILE: 'relay.caFile',
  EDGE_RELAY_CERT_FILE: 'relay.certFile',
  EDGE_RELAY_KEY_FILE: 'relay.keyFile',
  EDGE_REGION_ORDER: 'relay.regionOrder',
  EDGE_DNS_ENABLED: 'dns.enabled',
  EDGE_DNS_PORT: 'dns.port',
  EDGE_DNS_BIND_HOST: 'dns.bindHost',
  EDGE_GEODNS_ZONE: 'dns.geoZone',
  EDGE_GEODNS_TTL_SECONDS: 'dns.geoTtlSeconds',
  EDGE_DNS_TTL_SECONDS: 'dns.ttlSeconds',
  EDGE_DNS_NAMESERVERS: 'dns.nameservers',
  EDGE_GEODNS_REGIONS_FILE: 'dns.regionsFile',
  EDGE_DNS_RATE_LIMIT: 'dns.rateLimit',
  EDGE_DNS_RATE_LIMIT_SLIP: 'dns.rateLimitSlip',
  EDGE_DNS_UPDATE_SERVER: 'dns.updateServer',
  EDGE_DNS_UPDATE_ZONE: 'dns.updateZone',
  EDGE_DNS_TSIG_KEY: 'dns.tsigKey',
  EDGE_DNS_UPDATE_TIMEOUT_MS: 'dns.updateTimeoutMs',
  EDGE_PRESENCE_INTERVAL_MS: 'presence.intervalMs',
  EDGE_PRESENCE_STALE_MS: 'presence.staleMs',
  EDGE_JANITOR_INTERVAL_MS: 'janitor.intervalMs',
  EDGE_PORT_ACTIVATION_INTERVAL_MS: 'janitor.portActivationIntervalMs',
  EDGE_EPHEMERAL_IDLE_SECONDS: 'janitor.ephemeralIdleSeconds',
  EDGE_PROBE_EDGE_URL: 'health.probeEdgeUrl',
  EDGE_HEALTH_PROBE_TIMEOUT_MS: 'health.probeTimeoutMs',
  EDGE_HEALTH_MIN_INTERVAL_SECONDS: 'health.minIntervalSeconds',
  EDGE_HEALTH_UPTIME_CACHE_SECONDS: 'health.uptimeCacheSeconds',
  EDGE_HEALTH_CONCURRENCY: 'health.concurrency',
  EDGE_HEADERS_TIMEOUT_MS: 'edge.headersTimeoutMs',
  EDGE_KEEPALIVE_TIMEOUT_MS: 'edge.keepAliveTimeoutMs',
  EDGE_REQUEST_BODY_IDLE_TIMEOUT_MS: 'edge.requestBodyIdleTimeoutMs',
  DATABASE_URL: 'databaseUrl',
  EDGE_DATABASE_SCHEMA: 'databaseSchema',
  EDGE_DATABASE_STATEMENT_TIMEOUT_MS: 'databaseStatementTimeoutMs',
  EDGE_STORE_THREAD_NICE: 'storeThreadNice',
  REDIS_URL: 'redisUrl',
  EDGE_REDIS_PREFIX: 'redisPrefix',
  EDGE_LOG_LEVEL: 'logLevel',
  EDGE_BODY_LIMIT_BYTES: 'bodyLimitBytes',
  EDGE_LIST_MAX_OFFSET: 'listMaxOffset',
  EDGE_RATE_LIMIT_ID_SUNSET: 'rateLimitIdSunset',
  EDGE_FEED_CHECK_INTERVAL_MS: 'feed.checkIntervalMs',
  EDGE_FEED_PUBLISH_POLL_MS: 'feed.publishPollMs',
  EDGE_ALERT_EVALUATION_INTERVAL_MS: 'alerts.evaluationIntervalMs',
  EDGE_SMTP_URL: 'alerts.smtpUrl',
  EDGE_SMTP_FROM: 'alerts.smtpFrom',
  EDGE_ALERT_WEBHOOK_TIMEOUT_MS: 'alerts.webhookTimeoutMs',
} as const;

/** The NS names of the platform's zones: EDGE_DNS_NAMESERVERS, else ns1.<base domain>. */
export function dnsNameservers(config: Pick<Config, 'dns' | 'baseDomain'>): string[] {
  const listed = config.dns.nameservers
    .split(',')
    .map((n) => n.trim().replace(/\.$/, ''))
    .filter((n) => n !== '');
  return listed.length > 0 ? listed : [`ns1.${config.baseDomain}`];
}

/**
 * Whether `hostname` is a name the platform's DNS keeps for itself (the GeoDNS zone and what lies under it, the name
 * servers): an endpoint there would be shadowed by the DNS role's own answers.
 */
export function reservedDnsName(config: Pick<Config, 'dns' | 'baseDomain'>, hostname: string): boolean {
  const zone = config.dns.geoZone;
  if (zone !== '' && (hostname === zone || hostname.endsWith(`.${zone}`))) return true;
  return dnsNameservers(config).includes(hostname);
}

/** EDGE_PUBLIC_ADDRESSES as a list: comma-separated, blanks ignored. */
export function publicAddressList(text: string): string[] {
  return text
    .split(',')
    .map((a) => a.trim())
    .filter((a) => a !== '');
}

/** RFC 2136 publishing needs its server, zone and key together; the server is host:port (IPv6 in brackets). */
function checkDnsUpdate(dns: Config['dns']): void {
  const set = [dns.updateServer, dns.updateZone, dns.tsigKey].filter((v) => v !== '').length;
  if (set === 0) return;
  if (set !== 3) {
    throw new ConfigError('invalid setting "dns": EDGE_DNS_UPDATE_SERVER, EDGE_DNS_UPDATE_ZONE and EDGE_DNS_TSIG_KEY go together (all three, or none for the embedded server alone)');
  }
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s]+)):(\d{1,5})$/.exec(dns.updateServer);
  if (!m || Number(m[3]) < 1 || Number(m[3]) > 65535) {
    throw new ConfigError(`invalid setting "dns.updateServer" (from EDGE_DNS_UPDATE_SERVER): host:port with a port 1-65535 (IPv6 as [::1]:53), got ${JSON.stringify(dns.updateServer)}`);
  }
}

/** Settings whose values are secrets: a message about a bad one does not quote it. */
const SECRET_SETTINGS: ReadonlySet<string> = new Set(['adminApiKey', 'secretKey', 'edge.sessionKeys', 'alerts.smtpUrl', 'dns.tsigKey']);

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const CONFIG_DIR = fileURLToPath(new URL('../../config/', import.meta.url));

function readJson(path: string): Record<string, unknown> {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  } catch (err) {
    throw new ConfigError(`cannot read config file ${path}: ${(err as Error).message}`);
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function merge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    if (k === '__proto__' || k === 'constructor') throw new ConfigError(`config key "${k}" is not allowed`);
    out[k] = isObject(v) && isObject(out[k]) ? merge(out[k] as Record<string, unknown>, v) : v;
  }
  return out;
}

function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split('.');
  let node = target;
  for (const p of parts.slice(0, -1)) node = node[p] as Record<string, unknown>;
  node[parts[parts.length - 1]] = value;
}

function getPath(target: Record<string, unknown>, path: string): unknown {
  return path.split('.').reduce<unknown>((n, p) => (isObject(n) ? n[p] : undefined), target);
}

/** Integer settings whose default is null (absent): the environment sets them as integers all the same. */
const NULLABLE_INTEGERS: ReadonlySet<string> = new Set(['worker.opsPort']);

/** Environment strings become the type the default has, so "8080" fills an integer setting. */
function coerce(variable: string, raw: string, current: unknown): unknown {
  if (typeof current === 'boolean') {
    if (!/^(true|false|1|0)$/.test(raw.trim())) throw new ConfigError(`${variable} must be true or false, got "${raw}"`);
    return raw.trim() === 'true' || raw.trim() === '1';
  }
  if (typeof current === 'number') {
    if (!/^-?\d+$/.test(raw.trim())) throw new ConfigError(`${variable} must be an integer, got "${raw}"`);
    return Number(raw);
  }
  return raw;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/**
 * Builds the configuration from defaults, `EDGE_CONFIG_FILE` (a JSON file merged over them) and the
 * environment. Throws ConfigError naming the bad setting and the variable that set it.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  let raw = readJson(CONFIG_DIR + 'default.json');
  raw.plans = readJson(CONFIG_DIR + 'plans.json');
  if (env.EDGE_CONFIG_FILE) raw = merge(raw, readJson(env.EDGE_CONFIG_FILE));
  const source: Record<string, string> = {};
  for (const [variable, path] of Object.entries(ENV_SETTINGS)) {
    const value = env[variable];
    if (value === undefined || value === '') continue;
    setPath(raw, path, coerce(variable, value, NULLABLE_INTEGERS.has(path) ? 0 : getPath(raw, path)));
    source[path] = variable;
  }
  // The one setting whose empty value means something: EDGE_GEODNS_ZONE="" turns GeoDNS off. Unset, it follows the base domain.
  const dnsRaw = raw.dns as Record<string, unknown> | undefined;
  if (dnsRaw) {
    if (env.EDGE_GEODNS_ZONE === '') {
      dnsRaw.geoZone = '';
      source['dns.geoZone'] = 'EDGE_GEODNS_ZONE';
    } else if (dnsRaw.geoZone === null && typeof raw.baseDomain === 'string') {
      dnsRaw.geoZone = `geo.${raw.baseDomain}`;
    }
  }
  if (!raw.nodeId) raw.nodeId = `${hostname().replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 40)}-${randomBytes(3).toString('hex')}`;
  const first = Value.Errors(ConfigSchema, raw).First();
  if (first) {
    const path = first.path.replace(/^\//, '').replace(/\//g, '.');
    const origin = source[path] ? ` (from ${source[path]})` : '';
    // A refused secret is not repeated into logs.
    const got = SECRET_SETTINGS.has(path) ? 'a value that is not shown (a secret)' : JSON.stringify(first.value);
    throw new ConfigError(`invalid setting "${path || '(root)'}"${origin}: ${first.message}, got ${got}`);
  }
  const config = raw as Config;
  try {
    if (config.edge.trustedProxies.trim() !== '') compileCidrList(config.edge.trustedProxies);
  } catch (err) {
    const origin = source['edge.trustedProxies'] ? ` (from ${source['edge.trustedProxies']})` : '';
    throw new ConfigError(`invalid setting "edge.trustedProxies"${origin}: ${(err as Error).message}`);
  }
  for (const address of publicAddressList(config.edge.publicAddresses)) {
    if (parseIp(address) === null || address.includes('/')) {
      const origin = source['edge.publicAddresses'] ? ` (from ${source['edge.publicAddresses']})` : '';
      throw new ConfigError(`invalid setting "edge.publicAddresses"${origin}: ${JSON.stringify(address)} is not an IPv4 or IPv6 address`);
    }
  }
  // Base URLs of an edge's public listener (probes, replays): the pattern lets through what no URL parser takes.
  for (const path of ['health.probeEdgeUrl', 'replayEdgeUrl', 'publicControlUrl'] as const) {
    const value = path === 'replayEdgeUrl' ? config.replayEdgeUrl : path === 'publicControlUrl' ? config.publicControlUrl : config.health.probeEdgeUrl;
    if (value !== '' && !URL.canParse(value)) {
      const origin = source[path] ? ` (from ${source[path]})` : '';
      throw new ConfigError(`invalid setting "${path}"${origin}: not a valid URL (http://host:port or https://host:port, no path), got ${JSON.stringify(value)}`);
    }
  }
  // Redis Sentinel and Cluster, named by their own variables, become the REDIS_URL forms connectRedis reads.
  const sentinels = env.REDIS_SENTINELS?.trim();
  const clusterNodes = env.REDIS_CLUSTER_NODES?.trim();
  if (sentinels && clusterNodes) throw new ConfigError('REDIS_SENTINELS and REDIS_CLUSTER_NODES name two different Redis deployments; set one');
  if ((sentinels || clusterNodes) && env.REDIS_URL) throw new ConfigError(`REDIS_URL and ${sentinels ? 'REDIS_SENTINELS' : 'REDIS_CLUSTER_NODES'} both name the Redis to use; set one`);
  try {
    if (sentinels) {
      parseRedisNodes(sentinels, 'REDIS_SENTINELS');
      const master = env.REDIS_SENTINEL_MASTER?.trim() || 'mymaster';
      if (!/^[A-Za-z0-9._-]{1,64}$/.test(master)) throw new TypeError(`REDIS_SENTINEL_MASTER: "${master}" is not a master name`);
      (config as { redisUrl: string }).redisUrl = `redis+sentinel://${sentinels}/${master}`;
    } else if (clusterNodes) {
      parseRedisNodes(clusterNodes, 'REDIS_CLUSTER_NODES');
      (config as { redisUrl: string }).redisUrl = `redis+cluster://${clusterNodes}`;
    }
    if (config.redisUrl) parseRedisTarget(config.redisUrl);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
  const relayFiles = [config.relay.caFile, config.relay.certFile, config.relay.keyFile].filter((f) => f !== '').length;
  if (relayFiles !== 0 && relayFiles !== 3) {
    throw new ConfigError('invalid setting "relay": EDGE_RELAY_CA_FILE, EDGE_RELAY_CERT_FILE and EDGE_RELAY_KEY_FILE go together (all three, or none for the key derived from EDGE_SECRET_KEY)');
  }
  checkDnsUpdate(config.dns);
  if (Number.isNaN(Date.parse(config.rateLimitIdSunset))) {
    const origin = source.rateLimitIdSunset ? ` (from ${source.rateLimitIdSunset})` : '';
    throw new ConfigError(`invalid setting "rateLimitIdSunset"${origin}: not a valid RFC 3339 date, got ${JSON.stringify(config.rateLimitIdSunset)}`);
  }
  for (const [name, plan] of Object.entries(config.plans)) {
    for (const feature of Object.keys(plan.verification_gates)) {
      if (!(feature in plan.entitlements)) throw new ConfigError(`plan "${name}": verification gate on unknown feature "${feature}"`);
    }
  }
  return deepFreeze(config);
}
