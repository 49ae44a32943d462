// The health operations over real HTTP (docs/api.md "Health checks"): the check's effective configuration with defaults, partial
// updates, every 400 as an object with one error string, TCP/UDP endpoints refused, 403 for another user's endpoint and
// 404 for a missing one, permissions, and the health status with checks disabled and with stored probes.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import { recordProbe } from '../../src/store/health.ts';
import { createEndpoint, edgeCaughtUp, expectBody, orgWithMember, storeRows, type User } from '../helpers/endpoint-api.ts';
import { eventually } from '../helpers/eventually.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

const DEFAULTS = { enabled: false, path: '/', interval_seconds: 60, min_interval_seconds: 60, max_interval_seconds: 86400 };

describe(`health-check configuration and health status (${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite'})`, () => {
  let t: TestNode;
  let service: http.Server;
  const agents: Agent[] = [];
  before(async () => {
    // The uptime cache is off here so each read shows what is stored; its 5-minute default is tested apart below.
    t = await startTestNode({ EDGE_PRESENCE_INTERVAL_MS: '200', EDGE_HEALTH_UPTIME_CACHE_SECONDS: '0' });
    // Probe rows are written by the tests themselves here; the prober is tested in test/worker and end to end.
    await t.node.healthProber!.stop();
    service = http.createServer((_req, res) => res.end('ok'));
    await new Promise<void>((r) => service.listen(0, '127.0.0.1', r));
  });
  after(async () => {
    for (const a of agents) await a.stop();
    service.close();
    await t.close();
  });

  const sql = storeRows(() => t);
  const path = (uuid: string) => `/v1/endpoints/${uuid}/health-check`;
  const get = (user: Pick<User, 'api_key'>, uuid: string, headers?: Record<string, string>) => t.api('GET', path(uuid), { key: user.api_key, headers });
  const put = (user: Pick<User, 'api_key'>, uuid: string, body: unknown, headers?: Record<string, string>) => t.api('PUT', path(uuid), { key: user.api_key, body, headers });
  const health = (user: Pick<User, 'api_key'>, uuid: string) => t.api('GET', `/v1/endpoints/${uuid}/health`, { key: user.api_key });
  const endpointId = async (uuid: string) => (await sql<{ id: number }>('SELECT id FROM endpoints WHERE uuid = $1', [uuid]))[0].id;

  /** A 400 whose body is exactly an object with one error string (docs/api.md), mentioning `about`. */
  async function refused(pending: ReturnType<typeof put>, about: RegExp): Promise<void> {
    const res = await pending;
    assert.equal(res.status, 400, res.text);
    assert.deepEqual(Object.keys(res.body), ['error'], res.text);
    assert.equal(typeof res.body.error, 'string');
    assert.match(res.body.error, about);
  }

  it('GET answers the defaults for an endpoint never configured', async () => {
    const user = await t.createUser('free');
    const e = await createEndpoint(t, user);
    const body = await expectBody(200, get(user, e.uuid));
    assert.deepEqual(body, { endpoint_id: await endpointId(e.uuid), protocol: 'unified', supported: true, ...DEFAULTS });
  });

  it('PUT is a partial update of the fields present, answering the effective configuration', async () => {
    const user = await t.createUser('free');
    const e = await createEndpoint(t, user);
    const enabled = await expectBody(200, put(user, e.uuid, { enabled: true }));
    assert.deepEqual(enabled, { endpoint_id: await endpointId(e.uuid), protocol: 'unified', supported: true, ...DEFAULTS, enabled: true });
    const withPath = await expectBody(200, put(user, e.uuid, { path: '/healthz?deep=1' }));
    assert.deepEqual([withPath.enabled, withPath.path, withPath.interval_seconds], [true, '/healthz?deep=1', 60]);
    const withInterval = await expectBody(200, put(user, e.uuid, { interval_seconds: 300 }));
    assert.deepEqual([withInterval.enabled, withInterval.path, withInterval.interval_seconds], [true, '/healthz?deep=1', 300]);
    assert.deepEqual(await expectBody(200, get(user, e.uuid)), withInterval);
    // Limits are inclusive.
    assert.equal((await expectBody(200, put(user, e.uuid, { interval_seconds: 60 }))).interval_seconds, 60);
    assert.equal((await expectBody(200, put(user, e.uuid, { interval_seconds: 86400 }))).interval_seconds, 86400);
    assert.equal((await expectBody(200, put(user, e.uuid, { path: '/' + 'a'.repeat(254) }))).path.length, 255);
    // null or "" clears the path: `/` is probed.
    assert.equal((await expectBody(200, put(user, e.uuid, { path: null }))).path, '/');
    await expectBody(200, put(user, e.uuid, { path: '/x' }));
    assert.equal((await expectBody(200, put(user, e.uuid, { path: '' }))).path, '/');
    const [stored] = await sql('SELECT path, interval_seconds, enabled FROM health_checks WHERE endpoint_id = $1', [await endpointId(e.uuid)]);
    assert.deepEqual(stored, { path: null, interval_seconds: 86400, enabled: true });
    const disabled = await expectBody(200, put(user, e.uuid, { enabled: false }));
    assert.deepEqual([disabled.enabled, disabled.interval_seconds], [false, 86400]);
  });

  it('400 with one error string for each bad input, and nothing changes', async () => {
    const user = await t.createUser('free');
    const e = await createEndpoint(t, user);
    const before = await expectBody(200, put(user, e.uuid, { enabled: true, path: '/ok', interval_seconds: 120 }));
    await refused(put(user, e.uuid, {}), /no fields/i);
    await refused(t.api('PUT', path(e.uuid), { key: user.api_key, headers: { 'content-type': 'application/json' } }), /no fields/i);
    await refused(put(user, e.uuid, { interval_seconds: 59 }), /interval_seconds must be between 60 and 86400/);
    await refused(put(user, e.uuid, { interval_seconds: 86401 }), /interval_seconds must be between 60 and 86400/);
    await refused(put(user, e.uuid, { interval_seconds: 0 }), /interval_seconds/);
    await refused(put(user, e.uuid, { interval_seconds: -60 }), /interval_seconds/);
    await refused(put(user, e.uuid, { interval_seconds: 90.5 }), /interval_seconds/);
    await refused(put(user, e.uuid, { interval_seconds: '120' }), /interval_seconds/);
    await refused(put(user, e.uuid, { interval_seconds: null }), /interval_seconds/);
    await refused(put(user, e.uuid, { path: 'healthz' }), /path must start with "\/"/);
    await refused(put(user, e.uuid, { path: '/' + 'a'.repeat(255) }), /path must be at most 255 characters/);
    await refused(put(user, e.uuid, { path: '/a b' }), /path/);
    await refused(put(user, e.uuid, { path: '/a#b' }), /path/);
    // What a request line cannot carry as is (the prober used to throw on these): percent-encoded, they are fine.
    await refused(put(user, e.uuid, { path: '/\u20ac' }), /path.*percent-encode/);
    await refused(put(user, e.uuid, { path: '/caf\u00e9' }), /path.*percent-encode/);
    await refused(put(user, e.uuid, { path: '/a\u2028b' }), /path/);
    await refused(put(user, e.uuid, { path: 42 }), /path/);
    await refused(put(user, e.uuid, { enabled: 'yes' }), /enabled/);
    await refused(put(user, e.uuid, { enabled: null }), /enabled/);
    await refused(put(user, e.uuid, { enabled: true, surprise: 1 }), /surprise/);
    await refused(put(user, e.uuid, [true]), /./);
    await refused(put(user, e.uuid, 'enabled'), /./);
    await refused(t.api('PUT', path(e.uuid), { key: user.api_key, raw: '{"enabled": tru', headers: { 'content-type': 'application/json' } }), /JSON/);
    // A bad value beside a good one: the whole write is refused.
    await refused(put(user, e.uuid, { enabled: false, interval_seconds: 30 }), /interval_seconds/);
    assert.deepEqual(await expectBody(200, get(user, e.uuid)), before);
    // A malformed id is a 400 too, with the same body shape.
    await refused(put(user, 'not-a-uuid', { enabled: true }), /UUID/i);
  });

  it('refuses enabling on TCP/UDP endpoints (legacy rows, dedicated ports, tcp agents) and reports them unsupported', async () => {
    const user = await t.createUser('pro');
    // A legacy tcp row.
    const legacy = await createEndpoint(t, user);
    await sql("UPDATE endpoints SET protocol = 'udp' WHERE uuid = $1", [legacy.uuid]);
    await refused(put(user, legacy.uuid, { enabled: true }), /supported for HTTP endpoints only.*udp/);
    const view = await expectBody(200, get(user, legacy.uuid));
    assert.deepEqual([view.protocol, view.supported, view.enabled], ['udp', false, false]);
    // Other fields may still be written while disabled; enabled false is not refused.
    assert.equal((await expectBody(200, put(user, legacy.uuid, { enabled: false, interval_seconds: 600 }))).interval_seconds, 600);

    // A unified endpoint with only a dedicated TCP port and nothing connected.
    const ported = await createEndpoint(t, user);
    // Written directly: the ports API's plan gates (verification) are not what this test is about.
    await sql('UPDATE endpoints SET dedicated_tcp_port = $2 WHERE uuid = $1', [ported.uuid, 20000 + Math.floor(Math.random() * 20000)]);
    await refused(put(user, ported.uuid, { enabled: true }), /HTTP endpoints only.*tcp/);
    assert.equal((await expectBody(200, get(user, ported.uuid))).supported, false);
    // An origin makes it an HTTP endpoint again.
    await sql("UPDATE endpoints SET origin_url = 'http://127.0.0.1:9' WHERE uuid = $1", [ported.uuid]);
    assert.equal((await expectBody(200, put(user, ported.uuid, { enabled: true }))).supported, true);

    // A unified endpoint whose only agent is a tcp agent.
    const tcp = await createEndpoint(t, user);
    await edgeCaughtUp(t);
    const port = (service.address() as AddressInfo).port;
    agents.push(await startAgent({ edgeUrl: `http://127.0.0.1:${t.node.edge!.httpPort}`, apiKey: user.api_key, endpoint: tcp.uuid, protocol: 'tcp', target: port, agentId: 'tcp-agent' }));
    await eventually(async () => ((await expectBody(200, get(user, tcp.uuid))).supported === false ? true : undefined));
    await refused(put(user, tcp.uuid, { enabled: true }), /HTTP endpoints only.*tcp/);
    // An http agent beside it makes it probe-able.
    agents.push(await startAgent({ edgeUrl: `http://127.0.0.1:${t.node.edge!.httpPort}`, apiKey: user.api_key, endpoint: tcp.uuid, protocol: 'http', target: port, agentId: 'http-agent' }));
    await eventually(async () => ((await expectBody(200, get(user, tcp.uuid))).supported === true ? true : undefined));
    assert.equal((await expectBody(200, put(user, tcp.uuid, { enabled: true }))).enabled, true);
  });

  it('403 for another user’s endpoint, 404 for a missing one, 401 without a key, on all three operations', async () => {
    const owner = await t.createUser('free');
    const stranger = await t.createUser('free');
    const e = await createEndpoint(t, owner);
    for (const res of [await get(stranger, e.uuid), await put(stranger, e.uuid, { enabled: true }), await health(stranger, e.uuid)]) {
      assert.equal(res.status, 403, res.text);
    }
    const missing = randomUUID();
    for (const res of [await get(owner, missing), await put(owner, missing, { enabled: true }), await health(owner, missing)]) {
      assert.equal(res.status, 404, res.text);
    }
    for (const res of [await t.api('GET', path(e.uuid), { key: null }), await t.api('PUT', path(e.uuid), { key: null, body: { enabled: true } }), await t.api('GET', `/v1/endpoints/${e.uuid}/health`, { key: null })]) {
      assert.equal(res.status, 401, res.text);
    }
    // The stranger's attempt changed nothing.
    assert.equal((await expectBody(200, get(owner, e.uuid))).enabled, false);
    // Admins act on any endpoint.
    assert.equal((await expectBody(200, t.api('PUT', path(e.uuid), { body: { interval_seconds: 120 } }))).interval_seconds, 120);
  });

  it('GETs need endpoints:read and PUT endpoints:update in the active account', async () => {
    const owner = await t.createUser('pro');
    const reader = await t.createUser('free');
    const org = await orgWithMember(t, owner, reader, ['endpoints:read']);
    const e = await createEndpoint(t, owner, org.headers);
    assert.equal((await get(reader, e.uuid, org.headers)).status, 200);
    assert.equal((await t.api('GET', `/v1/endpoints/${e.uuid}/health`, { key: reader.api_key, headers: org.headers })).status, 200);
    const denied = await put(reader, e.uuid, { enabled: true }, org.headers);
    assert.equal(denied.status, 403);
    assert.equal(denied.body.code, 'permission_denied');
    const writer = await t.createUser('free');
    await expectBody(201, t.api('POST', `/v1/organizations/${org.id}/members`, { key: owner.api_key, body: { email: writer.email, permissions: ['endpoints:update'] } }));
    assert.equal((await put(writer, e.uuid, { enabled: true }, org.headers)).status, 200);
    const blind = await get(writer, e.uuid, org.headers);
    assert.equal(blind.status, 403);
    assert.equal(blind.body.code, 'permission_denied');
  });

  it('GET health with checks disabled: 200, uptimes 0, last_check null, has_active_agent false', async () => {
    const user = await t.createUser('free');
    const e = await createEndpoint(t, user);
    const body = await expectBody(200, health(user, e.uuid));
    assert.deepEqual(body, { endpoint_id: await endpointId(e.uuid), has_active_agent: false, uptime_24h: 0, uptime_7d: 0, uptime_30d: 0, avg_latency_ms: 0, last_check: null, recent_checks: [] });
  });

  it('GET health reports stored probes: uptimes, healthy latency, the last check and at most 50 recent ones newest first', async () => {
    const user = await t.createUser('free');
    const e = await createEndpoint(t, user);
    await expectBody(200, put(user, e.uuid, { enabled: true }));
    const id = await endpointId(e.uuid);
    const db = t.node.db!;
    const ago = (s: number) => new Date(Date.now() - s * 1000);
    await recordProbe(db, id, 'test', { status: 'healthy', status_code: 200, latency_ms: 40, error_message: null, checked_at: ago(10 * 86400) });
    await recordProbe(db, id, 'test', { status: 'timeout', status_code: null, latency_ms: 10000, error_message: 'no response within 10000 ms', checked_at: ago(3 * 86400) });
    for (let i = 60; i > 0; i--) await recordProbe(db, id, 'test', { status: i % 4 === 0 ? 'unhealthy' : 'healthy', status_code: i % 4 === 0 ? 502 : 200, latency_ms: i % 2 === 0 ? 10 : 20, error_message: i % 4 === 0 ? 'HTTP 502 no_agent' : null, checked_at: ago(i * 60) });
    const body = await expectBody(200, health(user, e.uuid));
    assert.equal(body.uptime_24h, 75);
    assert.equal(body.uptime_7d, Math.round((45 / 61) * 10000) / 100);
    assert.equal(body.uptime_30d, Math.round((46 / 62) * 10000) / 100);
    // Healthy probes in 24 h: 15 at 10 ms (even i, not multiples of 4) and 30 at 20 ms.
    assert.equal(body.avg_latency_ms, Math.round(((15 * 10 + 30 * 20) / 45) * 100) / 100);
    assert.equal(body.recent_checks.length, 50);
    const times = body.recent_checks.map((c: { checked_at: string }) => Date.parse(c.checked_at));
    assert.deepEqual(times, [...times].sort((a, b) => b - a), 'newest first');
    assert.deepEqual(body.last_check, body.recent_checks[0]);
    assert.deepEqual(Object.keys(body.last_check).sort(), ['checked_at', 'error_message', 'id', 'latency_ms', 'status', 'status_code']);
    const unhealthy = body.recent_checks.find((c: { status: string }) => c.status === 'unhealthy');
    assert.deepEqual([unhealthy.status_code, unhealthy.error_message], [502, 'HTTP 502 no_agent']);
    // Disabled: the status answers as for a check never enabled, but the stored history stays listed.
    await expectBody(200, put(user, e.uuid, { enabled: false }));
    const off = await expectBody(200, health(user, e.uuid));
    assert.deepEqual([off.uptime_24h, off.uptime_7d, off.uptime_30d, off.avg_latency_ms, off.last_check], [0, 0, 0, 0, null]);
    assert.equal(off.recent_checks.length, 50);
  });

  it('has_active_agent follows presence', async () => {
    const user = await t.createUser('free');
    const e = await createEndpoint(t, user);
    await edgeCaughtUp(t);
    const agent = await startAgent({ edgeUrl: `http://127.0.0.1:${t.node.edge!.httpPort}`, apiKey: user.api_key, endpoint: e.uuid, protocol: 'http', target: (service.address() as AddressInfo).port, agentId: 'presence-agent' });
    agents.push(agent);
    await eventually(async () => ((await expectBody(200, health(user, e.uuid))).has_active_agent ? true : undefined));
    await agent.stop();
    await eventually(async () => ((await expectBody(200, health(user, e.uuid))).has_active_agent ? undefined : true));
  });

  it('OpenAPI lists both operations, with the health-check 400 as one error string', async () => {
    const doc = await expectBody(200, t.api('GET', '/v1/openapi.json', { key: null }));
    const check = doc.paths['/v1/endpoints/{id}/health-check'];
    assert.ok(check?.get && check?.put, 'health-check GET and PUT');
    assert.ok(doc.paths['/v1/endpoints/{id}/health']?.get, 'health GET');
    const schema = check.put.responses['400'].content['application/json'].schema;
    assert.deepEqual(Object.keys(schema.properties), ['error']);
  });
});

describe('health status uptime cache', () => {
  let t: TestNode;
  before(async () => {
    t = await startTestNode();
    await t.node.healthProber!.stop();
  });
  after(() => t.close());

  it('keeps uptime aggregates about 5 minutes while last_check and recent_checks are fresh', async () => {
    const user = await t.createUser('free');
    const e = await createEndpoint(t, user);
    await expectBody(200, t.api('PUT', `/v1/endpoints/${e.uuid}/health-check`, { key: user.api_key, body: { enabled: true } }));
    const [{ id }] = (await t.node.db!.query<{ id: number }>('SELECT id FROM endpoints WHERE uuid = $1', [e.uuid])).rows;
    await recordProbe(t.node.db!, id, 'test', { status: 'healthy', status_code: 200, latency_ms: 5, error_message: null });
    const first = await expectBody(200, t.api('GET', `/v1/endpoints/${e.uuid}/health`, { key: user.api_key }));
    assert.equal(first.uptime_24h, 100);
    await recordProbe(t.node.db!, id, 'test', { status: 'error', status_code: null, latency_ms: 1, error_message: 'ECONNREFUSED' });
    const second = await expectBody(200, t.api('GET', `/v1/endpoints/${e.uuid}/health`, { key: user.api_key }));
    assert.equal(second.uptime_24h, 100, 'cached');
    assert.equal(second.last_check.status, 'error', 'fresh');
    assert.equal(second.recent_checks.length, 2);
  });
});
