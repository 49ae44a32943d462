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
    ];
    for (const [env, message] of cases) {
      assert.throws(() => loadConfig(env), (err: Error) => err instanceof ConfigError && message.test(err.message), JSON.stringify(env));
    }
  });
});
