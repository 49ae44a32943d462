// Health checks end to end: the real program (control, edge, worker in one node) with the test interval scale, a real
// agent and service. Healthy probes, then the service failing turns verdicts unhealthy and uptime drops; with no agent
// has_active_agent is false and probes are unhealthy 502 no_agent. Probes pass visitor auth, are not counted by a
// rate-limit rule, are not captured, carry their User-Agent and never forward their signature.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startAgent, type Agent } from '../src/agent/agent.ts';
import { PROBE_HEADER, PROBE_USER_AGENT } from '../src/shared/health-probe.ts';
import { createEndpoint, edgeCaughtUp, expectBody, type User } from './helpers/endpoint-api.ts';
import { eventually } from './helpers/eventually.ts';
import { visit } from './helpers/http.ts';
import { startLocalService, type LocalService } from './helpers/local-service.ts';
import { startTestNode, type TestNode } from './helpers/node.ts';

interface Seen {
  path: string;
  userAgent: string;
  signature: string | undefined;
  authorization: string | undefined;
}

describe(`health checks end to end (${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite'})`, () => {
  let t: TestNode;
  let service: LocalService<Seen>;
  let failing = false;
  let user: User;
  let agent: Agent | undefined;

  before(async () => {
    // Every 60 s check probes every second; uptimes are read uncached so a drop shows at once.
    t = await startTestNode({ EDGE_HEALTH_MIN_INTERVAL_SECONDS: '1', EDGE_HEALTH_UPTIME_CACHE_SECONDS: '0', EDGE_PRESENCE_INTERVAL_MS: '200' });
    service = await startLocalService<Seen>(
      (req, res, record) => {
        record({ path: req.url ?? '', userAgent: req.headers['user-agent'] ?? '', signature: req.headers[PROBE_HEADER] as string | undefined, authorization: req.headers.authorization });
        res.statusCode = failing ? 500 : 200;
        res.end(failing ? 'broken' : 'ok');
      },
      (ws) => ws.close(),
    );
    user = await t.createUser('business');
  });
  after(async () => {
    await agent?.stop();
    await service.close();
    await t.close();
  });

  const health = (uuid: string) => expectBody(200, t.api('GET', `/v1/endpoints/${uuid}/health`, { key: user.api_key }));

  it('healthy, then unhealthy when the service fails (uptime drops); probes pass auth, skip rate limits and capture', async () => {
    const e = await createEndpoint(t, user);
    await edgeCaughtUp(t);
    agent = await startAgent({ edgeUrl: `http://127.0.0.1:${t.node.edge!.httpPort}`, apiKey: user.api_key, endpoint: e.uuid, protocol: 'http', target: service.port, agentId: 'health-agent' });
    // Visitors must sign in, and /health admits one request an hour.
    await expectBody(200, t.api('PUT', `/v1/endpoints/${e.uuid}/settings`, { key: user.api_key, body: { mode: 'basic', basic_users: [{ username: 'visitor', password: 'password-123' }] } }));
    await expectBody(201, t.api('POST', '/v1/firewall/rate-limits', {
      key: user.api_key,
      body: { endpoint_id: e.uuid, name: 'health', requests_per_window: 1, window_size_seconds: 3600, action: 'block', conditions: [{ type: 'path', operator: 'equals', value: '/health' }] },
    }));
    await edgeCaughtUp(t);
    await expectBody(200, t.api('PUT', `/v1/endpoints/${e.uuid}/health-check`, { key: user.api_key, body: { enabled: true, path: '/health' } }));

    const healthy = await eventually(async () => {
      const h = await health(e.uuid);
      return h.recent_checks.filter((c: { status: string }) => c.status === 'healthy').length >= 3 ? h : undefined;
    }, 60_000);
    assert.equal(healthy.has_active_agent, true);
    assert.equal(healthy.uptime_24h, 100);
    assert.equal(healthy.last_check.status, 'healthy');
    assert.equal(healthy.last_check.status_code, 200);
    assert.ok(healthy.avg_latency_ms > 0);

    // What reached the service: the probe's User-Agent, neither its signature nor any visitor credential.
    const probes = service.seen.filter((s) => s.path === '/health');
    assert.ok(probes.length >= 3);
    for (const p of probes) assert.deepEqual([p.userAgent, p.signature, p.authorization], [PROBE_USER_AGENT, undefined, undefined]);

    // The rate-limit rule counted none of them: a visitor's first request is admitted, the second refused.
    const auth = { authorization: `Basic ${Buffer.from('visitor:password-123').toString('base64')}` };
    const edgePort = t.node.edge!.httpPort;
    assert.equal((await visit(edgePort, e.hostname, '/health', { headers: auth })).status, 200);
    assert.equal((await visit(edgePort, e.hostname, '/health', { headers: auth })).status, 429);
    // A visitor forging the probe header is a visitor: refused without credentials.
    assert.equal((await visit(edgePort, e.hostname, '/other', { headers: { [PROBE_HEADER]: `${Math.floor(Date.now() / 1000)}.AAAA`, 'user-agent': PROBE_USER_AGENT } })).status, 401);

    // Capture saw the visitors only.
    const traffic = t.node.edge!.traffic;
    assert.equal(traffic.counters(e.uuid).requests, 3);
    assert.deepEqual(traffic.recent(e.uuid).map((x) => [x.path, x.status]).reverse(), [['/health', 200], ['/health', 429], ['/other', 401]]);
    const stored = await t.node.db!.query<{ n: number }>('SELECT count(*)::int AS n FROM traffic_logs WHERE user_agent = $1', [PROBE_USER_AGENT]).catch(() => ({ rows: [{ n: 0 }] }));
    assert.equal(stored.rows[0].n, 0);

    // The service starts failing: verdicts turn unhealthy and uptime drops.
    failing = true;
    const unhealthy = await eventually(async () => {
      const h = await health(e.uuid);
      return h.last_check?.status === 'unhealthy' ? h : undefined;
    }, 30_000);
    assert.equal(unhealthy.last_check.status_code, 500);
    assert.match(unhealthy.last_check.error_message, /^HTTP 500/);
    assert.ok(unhealthy.uptime_24h < 100 && unhealthy.uptime_24h > 0, `uptime ${unhealthy.uptime_24h}`);
    assert.equal(unhealthy.recent_checks[0].status, 'unhealthy');

    // The agent goes: no active agent, and probes meet what visitors meet, the edge's 502.
    await agent.stop();
    agent = undefined;
    const gone = await eventually(async () => {
      const h = await health(e.uuid);
      return !h.has_active_agent && h.last_check?.status_code === 502 ? h : undefined;
    }, 30_000);
    assert.equal(gone.last_check.status, 'unhealthy');
    assert.match(gone.last_check.error_message, /no_agent/);

    // Disabled: the status reads as for a check never enabled.
    await expectBody(200, t.api('PUT', `/v1/endpoints/${e.uuid}/health-check`, { key: user.api_key, body: { enabled: false } }));
    const off = await health(e.uuid);
    assert.deepEqual([off.uptime_24h, off.last_check], [0, null]);
  });

  it('an endpoint that never had an agent: has_active_agent false and unhealthy 502 probes', async () => {
    const e = await createEndpoint(t, user);
    await edgeCaughtUp(t);
    await expectBody(200, t.api('PUT', `/v1/endpoints/${e.uuid}/health-check`, { key: user.api_key, body: { enabled: true } }));
    const h = await eventually(async () => {
      const body = await health(e.uuid);
      return body.last_check ? body : undefined;
    }, 30_000);
    assert.equal(h.has_active_agent, false);
    assert.deepEqual([h.last_check.status, h.last_check.status_code], ['unhealthy', 502]);
    assert.equal(h.uptime_24h, 0);
    assert.equal(h.avg_latency_ms, 0);
  });
});
