// Configuration: defaults, environment overrides, and a clear refusal naming the bad setting.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../../src/shared/config.ts';

describe('loadConfig', () => {
  it('has the documented defaults', () => {
    const c = loadConfig({});
    assert.equal(c.role, 'all');
    assert.equal(c.controlPort, 8081);
    assert.equal(c.httpPort, 8080);
    assert.equal(c.httpsPort, 8443);
    // The edge's ops port is internal: loopback unless an operator says otherwise.
    assert.equal(c.opsPort, 9090);
    assert.equal(c.opsBindHost, '127.0.0.1');
    assert.equal(c.edge.metricsEndpointLimit, 1000);
    assert.equal(c.dataDir, './data');
    assert.equal(c.baseDomain, 'edge.localhost');
    assert.equal(c.region, 'local');
    assert.deepEqual(Object.keys(c.plans).sort(), ['business', 'free', 'pro']);
  });

  it('grants 128 data connections per tunnel by default; EDGE_TUNNEL_DATA_CONNECTIONS sets it, 0 grants none', () => {
    assert.equal(loadConfig({}).edge.tunnelDataConnections, 128);
    assert.equal(loadConfig({ EDGE_TUNNEL_DATA_CONNECTIONS: '0' }).edge.tunnelDataConnections, 0);
    assert.equal(loadConfig({ EDGE_TUNNEL_DATA_CONNECTIONS: '16' }).edge.tunnelDataConnections, 16);
  });

  it('follows heartbeats for dedicated-port activation every second by default; EDGE_PORT_ACTIVATION_INTERVAL_MS sets it', () => {
    assert.equal(loadConfig({}).janitor.portActivationIntervalMs, 1000);
    assert.equal(loadConfig({ EDGE_PORT_ACTIVATION_INTERVAL_MS: '250' }).janitor.portActivationIntervalMs, 250);
  });

  it('runs the store thread at nice 19 by default; EDGE_STORE_THREAD_NICE sets it from 0 to 19', () => {
    assert.equal(loadConfig({}).storeThreadNice, 19);
    assert.equal(loadConfig({ EDGE_STORE_THREAD_NICE: '0' }).storeThreadNice, 0);
  });

  it('reads the JWT layer fetch settings from the environment, defaulting to 5 s, 30 s and 10 min', () => {
    const d = loadConfig({}).edge;
    assert.deepEqual([d.jwksTimeoutMs, d.jwksCooldownMs, d.jwksCacheMaxAgeMs], [5000, 30000, 600000]);
    const c = loadConfig({ EDGE_JWKS_TIMEOUT_MS: '2000', EDGE_JWKS_COOLDOWN_MS: '0', EDGE_JWKS_CACHE_MAX_AGE_MS: '60000' }).edge;
    assert.deepEqual([c.jwksTimeoutMs, c.jwksCooldownMs, c.jwksCacheMaxAgeMs], [2000, 0, 60000]);
  });

  it('lets environment variables override, including port 0', () => {
    const c = loadConfig({ EDGE_ROLE: 'edge', EDGE_CONTROL_PORT: '0', EDGE_REGION: 'eu-west', DATABASE_URL: 'postgres://x/y', REDIS_URL: 'redis://r:6379' });
    assert.equal(c.role, 'edge');
    assert.equal(c.controlPort, 0);
    assert.equal(c.region, 'eu-west');
    assert.equal(c.databaseUrl, 'postgres://x/y');
    assert.equal(c.redisUrl, 'redis://r:6379');
  });

  it('is frozen, plans included', () => {
    const c = loadConfig({});
    assert.throws(() => {
      (c as { controlPort: number }).controlPort = 1;
    }, TypeError);
    assert.throws(() => {
      (c.plans.free.entitlements as { rbac: boolean }).rbac = true;
    }, TypeError);
  });

  it('puts the GeoDNS zone under the base domain unless it is set, and turns it off when set to an empty value', () => {
    assert.equal(loadConfig({}).dns.geoZone, 'geo.edge.localhost');
    assert.equal(loadConfig({ EDGE_BASE_DOMAIN: 'edge.example.com' }).dns.geoZone, 'geo.edge.example.com');
    assert.equal(loadConfig({ EDGE_GEODNS_ZONE: 'g.example.net' }).dns.geoZone, 'g.example.net');
    assert.equal(loadConfig({ EDGE_GEODNS_ZONE: '' }).dns.geoZone, '');
    const dns = loadConfig({}).dns;
    assert.deepEqual([dns.enabled, dns.port, dns.bindHost, dns.geoTtlSeconds, dns.ttlSeconds, dns.rateLimit], [true, 8053, '127.0.0.1', 30, 300, 20]);
    const secret = loadConfig({ EDGE_DNS_UPDATE_SERVER: '[::1]:53', EDGE_DNS_UPDATE_ZONE: 'example.com', EDGE_DNS_TSIG_KEY: 'k:hmac-sha256:c2VjcmV0c2VjcmV0c2VjcmV0' });
    assert.equal(secret.dns.updateServer, '[::1]:53');
  });

  it('has the deploy defaults and takes the deploy settings', () => {
    const c = loadConfig({});
    assert.deepEqual(c.deploy, { allowFileUrls: false, webhookMaxBytes: 1048576, webhookRatePerMinute: 60 });
    assert.equal(c.publicControlUrl, '');
    const set = loadConfig({ EDGE_DEPLOY_ALLOW_FILE_URLS: 'true', EDGE_DEPLOY_WEBHOOK_MAX_BYTES: '65536', EDGE_DEPLOY_WEBHOOK_RATE: '5', EDGE_PUBLIC_CONTROL_URL: 'https://control.example.com' });
    assert.deepEqual(set.deploy, { allowFileUrls: true, webhookMaxBytes: 65536, webhookRatePerMinute: 5 });
    assert.equal(set.publicControlUrl, 'https://control.example.com');
  });

  it('names the bad setting and the variable that set it', () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ EDGE_ROLE: 'proxy' }, /"role" \(from EDGE_ROLE\)/],
      [{ EDGE_HTTP_PORT: '70000' }, /"httpPort" \(from EDGE_HTTP_PORT\)/],
      [{ EDGE_PUBLIC_HTTPS_PORT: '-1' }, /"publicHttpsPort" \(from EDGE_PUBLIC_HTTPS_PORT\)/],
      [{ EDGE_OPS_PORT: '65536' }, /"opsPort" \(from EDGE_OPS_PORT\)/],
      [{ EDGE_OPS_PORT: '9090x' }, /EDGE_OPS_PORT must be an integer/],
      [{ EDGE_METRICS_ENDPOINT_LIMIT: '-1' }, /"edge.metricsEndpointLimit" \(from EDGE_METRICS_ENDPOINT_LIMIT\)/],
      [{ EDGE_METRICS_ENDPOINT_LIMIT: '10001' }, /"edge.metricsEndpointLimit" \(from EDGE_METRICS_ENDPOINT_LIMIT\)/],
      [{ EDGE_CONTROL_PORT: 'eighty' }, /EDGE_CONTROL_PORT must be an integer/],
      [{ EDGE_BASE_DOMAIN: 'Bad_Domain!' }, /"baseDomain" \(from EDGE_BASE_DOMAIN\)/],
      [{ EDGE_REGION: 'EU WEST' }, /"region" \(from EDGE_REGION\)/],
      [{ EDGE_DATABASE_SCHEMA: 'x; drop' }, /"databaseSchema"/],
      [{ EDGE_JWKS_TIMEOUT_MS: '0' }, /"edge.jwksTimeoutMs" \(from EDGE_JWKS_TIMEOUT_MS\)/],
      [{ EDGE_PORT_ACTIVATION_INTERVAL_MS: '10' }, /"janitor.portActivationIntervalMs" \(from EDGE_PORT_ACTIVATION_INTERVAL_MS\)/],
      [{ EDGE_PORT_ACTIVATION_INTERVAL_MS: 'soon' }, /EDGE_PORT_ACTIVATION_INTERVAL_MS must be an integer/],
      [{ EDGE_STORE_THREAD_NICE: '20' }, /"storeThreadNice" \(from EDGE_STORE_THREAD_NICE\)/],
      [{ EDGE_STORE_THREAD_NICE: '-5' }, /"storeThreadNice" \(from EDGE_STORE_THREAD_NICE\)/],
      [{ EDGE_STORE_THREAD_NICE: 'low' }, /EDGE_STORE_THREAD_NICE must be an integer/],
      [{ EDGE_JWKS_COOLDOWN_MS: '-1' }, /"edge.jwksCooldownMs" \(from EDGE_JWKS_COOLDOWN_MS\)/],
      [{ EDGE_JWKS_CACHE_MAX_AGE_MS: '10' }, /"edge.jwksCacheMaxAgeMs" \(from EDGE_JWKS_CACHE_MAX_AGE_MS\)/],
      [{ EDGE_TUNNEL_DATA_CONNECTIONS: '-1' }, /"edge.tunnelDataConnections" \(from EDGE_TUNNEL_DATA_CONNECTIONS\)/],
      [{ EDGE_TUNNEL_DATA_CONNECTIONS: '1025' }, /"edge.tunnelDataConnections" \(from EDGE_TUNNEL_DATA_CONNECTIONS\)/],
      // Health probes and replays: a base URL of an edge's public listener, checked whole (the pattern alone let
      // "http://[::1:8080" through, and every probe round then failed).
      [{ EDGE_PROBE_EDGE_URL: 'http://edge:8080/probe' }, /"health.probeEdgeUrl" \(from EDGE_PROBE_EDGE_URL\)/],
      [{ EDGE_PROBE_EDGE_URL: 'http://[::1:8080' }, /"health.probeEdgeUrl" \(from EDGE_PROBE_EDGE_URL\): not a valid URL/],
      [{ EDGE_REPLAY_EDGE_URL: 'http://[::1:8080' }, /"replayEdgeUrl" \(from EDGE_REPLAY_EDGE_URL\): not a valid URL/],
      [{ EDGE_HEALTH_MIN_INTERVAL_SECONDS: '0' }, /"health.minIntervalSeconds" \(from EDGE_HEALTH_MIN_INTERVAL_SECONDS\)/],
      [{ EDGE_HEALTH_CONCURRENCY: '0' }, /"health.concurrency" \(from EDGE_HEALTH_CONCURRENCY\)/],
      [{ EDGE_SMTP_URL: 'mail.example.com:25' }, /"alerts.smtpUrl" \(from EDGE_SMTP_URL\).*not shown/],
      [{ EDGE_ALERT_EVALUATION_INTERVAL_MS: '10' }, /"alerts.evaluationIntervalMs" \(from EDGE_ALERT_EVALUATION_INTERVAL_MS\)/],
      // The relay between edges (docs/cluster.md).
      [{ EDGE_RELAY_PORT: '70000' }, /"relay.port" \(from EDGE_RELAY_PORT\)/],
      [{ EDGE_REGION_ORDER: 'eu,,us' }, /"relay.regionOrder" \(from EDGE_REGION_ORDER\)/],
      [{ EDGE_RELAY_CA_FILE: '/etc/edge/ca.pem' }, /EDGE_RELAY_CA_FILE, EDGE_RELAY_CERT_FILE and EDGE_RELAY_KEY_FILE go together/],
      [{ EDGE_DATABASE_STATEMENT_TIMEOUT_MS: '50' }, /"databaseStatementTimeoutMs" \(from EDGE_DATABASE_STATEMENT_TIMEOUT_MS\)/],
      // The DNS role (docs/dedicated-ips.md).
      [{ EDGE_DNS_PORT: '70000' }, /"dns.port" \(from EDGE_DNS_PORT\)/],
      [{ EDGE_DNS_ENABLED: 'maybe' }, /EDGE_DNS_ENABLED must be true or false/],
      [{ EDGE_GEODNS_ZONE: 'Geo Zone' }, /"dns.geoZone" \(from EDGE_GEODNS_ZONE\)/],
      [{ EDGE_GEODNS_TTL_SECONDS: '0' }, /"dns.geoTtlSeconds" \(from EDGE_GEODNS_TTL_SECONDS\)/],
      [{ EDGE_DNS_RATE_LIMIT_SLIP: '11' }, /"dns.rateLimitSlip" \(from EDGE_DNS_RATE_LIMIT_SLIP\)/],
      [{ EDGE_DNS_NAMESERVERS: 'ns1.example.com, ns2' }, /"dns.nameservers" \(from EDGE_DNS_NAMESERVERS\)/],
      [{ EDGE_DNS_UPDATE_SERVER: '127.0.0.1:53' }, /EDGE_DNS_UPDATE_SERVER, EDGE_DNS_UPDATE_ZONE and EDGE_DNS_TSIG_KEY go together/],
      [{ EDGE_DNS_UPDATE_SERVER: 'primary.example.com', EDGE_DNS_UPDATE_ZONE: 'example.com', EDGE_DNS_TSIG_KEY: 'k:hmac-sha256:c2VjcmV0' }, /"dns.updateServer".*host:port/],
      [{ EDGE_DNS_UPDATE_SERVER: '[::1]:70000', EDGE_DNS_UPDATE_ZONE: 'example.com', EDGE_DNS_TSIG_KEY: 'k:hmac-sha256:c2VjcmV0' }, /"dns.updateServer"/],
      [{ EDGE_PUBLIC_ADDRESSES: '127.0.0.1, edge.example.com' }, /"edge.publicAddresses" \(from EDGE_PUBLIC_ADDRESSES\): "edge.example.com"/],
      [{ EDGE_PUBLIC_ADDRESSES: '10.0.0.0/8' }, /"edge.publicAddresses"/],
      // Git push-to-deploy (docs/api.md "Applications and deployments").
      [{ EDGE_PUBLIC_CONTROL_URL: 'control.example.com' }, /"publicControlUrl" \(from EDGE_PUBLIC_CONTROL_URL\)/],
      [{ EDGE_PUBLIC_CONTROL_URL: 'https://control.example.com/api' }, /"publicControlUrl" \(from EDGE_PUBLIC_CONTROL_URL\)/],
      [{ EDGE_PUBLIC_CONTROL_URL: 'http://[::1:8081' }, /"publicControlUrl" \(from EDGE_PUBLIC_CONTROL_URL\): not a valid URL/],
      [{ EDGE_DEPLOY_ALLOW_FILE_URLS: 'yes' }, /EDGE_DEPLOY_ALLOW_FILE_URLS must be true or false/],
      [{ EDGE_DEPLOY_WEBHOOK_MAX_BYTES: '100' }, /"deploy.webhookMaxBytes" \(from EDGE_DEPLOY_WEBHOOK_MAX_BYTES\)/],
      [{ EDGE_DEPLOY_WEBHOOK_MAX_BYTES: '1MiB' }, /EDGE_DEPLOY_WEBHOOK_MAX_BYTES must be an integer/],
      [{ EDGE_DEPLOY_WEBHOOK_RATE: '0' }, /"deploy.webhookRatePerMinute" \(from EDGE_DEPLOY_WEBHOOK_RATE\)/],
      [{ EDGE_DEPLOY_WEBHOOK_RATE: '60/minute' }, /EDGE_DEPLOY_WEBHOOK_RATE must be an integer/],
    ];
    for (const [env, message] of cases) {
      assert.throws(() => loadConfig(env), (err: Error) => err instanceof ConfigError && message.test(err.message), JSON.stringify(env));
    }
  });
});
