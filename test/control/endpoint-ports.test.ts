// Dedicated TCP/UDP ports over real HTTP: exact storage, clearing, the entitlement, the per-plan count, the
// verification gate, and port uniqueness held by the database. Every refused write leaves the ports as they were.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { storeRows } from '../helpers/endpoint-api.ts';

type User = Awaited<ReturnType<TestNode['createUser']>>;

describe('PUT /v1/endpoints/{id}/ports', () => {
  let t: TestNode;
  before(async () => {
    // The worker's port activator would turn these endpoints active once the in-process edge binds the ports;
    // this file specifies what the API writes, so the activator's reads and sweeps are pushed beyond its run time.
    t = await startTestNode({ EDGE_JANITOR_INTERVAL_MS: '3600000', EDGE_PORT_ACTIVATION_INTERVAL_MS: '3600000' });
  });
  after(() => t.close());

  // Each test takes its own ports so tests never collide on the global unique indexes.
  let nextPort = 30000;
  const freshPort = () => nextPort++;

  const sql = storeRows(() => t);
  const newEndpoint = async (user: User) => {
    const res = await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} });
    assert.equal(res.status, 201, res.text);
    return res.body.uuid as string;
  };
  const put = (user: Pick<User, 'api_key'>, uuid: string, body: unknown, headers?: Record<string, string>) =>
    t.api('PUT', `/v1/endpoints/${uuid}/ports`, { key: user.api_key, body, headers });
  const stored = async (uuid: string) => {
    const [row] = await sql('SELECT dedicated_tcp_port AS tcp, dedicated_udp_port AS udp, status FROM endpoints WHERE uuid = $1', [uuid]);
    return row as { tcp: number | null; udp: number | null; status: string };
  };
  const verify = (user: User, flags: Record<string, boolean>) => t.api('PUT', `/v1/admin/users/${user.id}/verification`, { body: flags });

  it('stores the requested ports exactly, turns the endpoint provisioning and publishes it', async () => {
    const user = await t.createUser('business');
    const uuid = await newEndpoint(user);
    const [tcp, udp] = [freshPort(), freshPort()];
    const res = await put(user, uuid, { dedicated_tcp_port: tcp, dedicated_udp_port: udp });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { ok: true, dedicated_tcp_port: tcp, dedicated_udp_port: udp });
    assert.deepEqual(await stored(uuid), { tcp, udp, status: 'provisioning' });

    const get = await t.api('GET', `/v1/endpoints/${uuid}`, { key: user.api_key });
    assert.equal(get.body.dedicated_tcp_port, tcp);
    assert.equal(get.body.dedicated_udp_port, udp);
    assert.equal(get.body.status, 'provisioning');
    const [feed] = await sql("SELECT data FROM feed_entries WHERE topic = 'endpoint' AND key = $1", [uuid]);
    assert.equal(feed.data.dedicated_tcp_port, tcp);
    assert.equal(feed.data.dedicated_udp_port, udp);
    assert.equal(feed.data.status, 'provisioning');
  });

  it('keeps an omitted port, clears a null one, and returns to active once no port is left', async () => {
    const user = await t.createUser('business');
    const uuid = await newEndpoint(user);
    const [tcp, udp] = [freshPort(), freshPort()];
    await put(user, uuid, { dedicated_tcp_port: tcp });
    const both = await put(user, uuid, { dedicated_udp_port: udp });
    assert.deepEqual(both.body, { ok: true, dedicated_tcp_port: tcp, dedicated_udp_port: udp });
    const cleared = await put(user, uuid, { dedicated_tcp_port: null });
    assert.deepEqual(cleared.body, { ok: true, dedicated_tcp_port: null, dedicated_udp_port: udp });
    assert.equal((await stored(uuid)).status, 'provisioning');
    const none = await put(user, uuid, { dedicated_udp_port: null });
    assert.deepEqual(none.body, { ok: true, dedicated_tcp_port: null, dedicated_udp_port: null });
    assert.deepEqual(await stored(uuid), { tcp: null, udp: null, status: 'active' });
    // An empty body changes nothing and echoes the current state.
    assert.deepEqual((await put(user, uuid, {})).body, { ok: true, dedicated_tcp_port: null, dedicated_udp_port: null });
  });

  it('lets the same number be a TCP port on one endpoint and a UDP port on another', async () => {
    const user = await t.createUser('business');
    const [a, b] = [await newEndpoint(user), await newEndpoint(user)];
    const port = freshPort();
    assert.equal((await put(user, a, { dedicated_tcp_port: port })).status, 200);
    assert.equal((await put(user, b, { dedicated_udp_port: port })).status, 200);
    // Re-sending an endpoint's own port is not a conflict.
    assert.equal((await put(user, a, { dedicated_tcp_port: port })).status, 200);
  });

  it('answers 409 when another endpoint holds the port, and changes nothing', async () => {
    const a = await t.createUser('business');
    const b = await t.createUser('business');
    const [ea, eb] = [await newEndpoint(a), await newEndpoint(b)];
    const [tcp, udp, mine] = [freshPort(), freshPort(), freshPort()];
    await put(a, ea, { dedicated_tcp_port: tcp, dedicated_udp_port: udp });
    await put(b, eb, { dedicated_tcp_port: mine });

    const tcpClash = await put(b, eb, { dedicated_tcp_port: tcp });
    assert.equal(tcpClash.status, 409);
    assert.equal(tcpClash.body.code, 'conflict');
    assert.match(tcpClash.body.error, new RegExp(`TCP port ${tcp}`));
    const udpClash = await put(b, eb, { dedicated_tcp_port: null, dedicated_udp_port: udp });
    assert.equal(udpClash.status, 409);
    assert.match(udpClash.body.error, new RegExp(`UDP port ${udp}`));
    // The whole write was refused: the TCP port it would have cleared is still there.
    assert.deepEqual(await stored(eb), { tcp: mine, udp: null, status: 'provisioning' });
    assert.deepEqual(await stored(ea), { tcp, udp, status: 'provisioning' });
  });

  it('gives a port to exactly one of many endpoints claiming it at once', async () => {
    const user = await t.createUser('business');
    const uuids: string[] = [];
    for (let i = 0; i < 10; i++) uuids.push(await newEndpoint(user));
    const port = freshPort();
    const results = await Promise.all(uuids.map((u) => put(user, u, { dedicated_tcp_port: port })));
    const statuses = results.map((r) => r.status).sort();
    assert.deepEqual(statuses, [200, ...Array(9).fill(409)]);
    const [{ n }] = await sql<{ n: number }>('SELECT count(*)::int AS n FROM endpoints WHERE dedicated_tcp_port = $1', [port]);
    assert.equal(n, 1);
  });

  it('answers 400 for ports outside 1024-65535, wrong types and unknown fields, and changes nothing', async () => {
    const user = await t.createUser('business');
    const uuid = await newEndpoint(user);
    const port = freshPort();
    await put(user, uuid, { dedicated_tcp_port: port });
    for (const body of [
      { dedicated_tcp_port: 1023 },
      { dedicated_tcp_port: 65536 },
      { dedicated_udp_port: 80 },
      { dedicated_udp_port: 0 },
      { dedicated_tcp_port: '5000' },
      { dedicated_tcp_port: 5000.5 },
      { dedicated_tcp_port: null, extra: 1 },
    ]) {
      const res = await put(user, uuid, body);
      assert.equal(res.status, 400, JSON.stringify(body));
    }
    const unknown = await put(user, uuid, { dedicated_tcp_port: null, extra: 1 });
    assert.equal(unknown.body.code, 'unknown_field');
    const json = await t.api('PUT', `/v1/endpoints/${uuid}/ports`, { key: user.api_key, raw: '{"dedicated_tcp_port": nul', headers: { 'content-type': 'application/json' } });
    assert.equal(json.status, 400);
    assert.equal(json.body.code, 'invalid_json');
    assert.deepEqual(await stored(uuid), { tcp: port, udp: null, status: 'provisioning' });
  });

  it('answers 403 entitlement_required on a plan without dedicated_ports, and changes nothing', async () => {
    const user = await t.createUser('free');
    const uuid = await newEndpoint(user);
    const res = await put(user, uuid, { dedicated_tcp_port: freshPort() });
    assert.equal(res.status, 403);
    assert.equal(res.body.code, 'entitlement_required');
    assert.equal(res.body.detail.feature, 'dedicated_ports');
    assert.deepEqual(await stored(uuid), { tcp: null, udp: null, status: 'active' });
  });

  it('answers 403 verification_required, naming the first unmet gate, until the user is verified', async () => {
    const user = await t.createUser('pro'); // gate: email_verified, payment_method
    const uuid = await newEndpoint(user);
    const port = freshPort();
    const first = await put(user, uuid, { dedicated_tcp_port: port });
    assert.equal(first.status, 403);
    assert.equal(first.body.error, 'verification_required');
    assert.equal(first.body.code, 'verification_required');
    assert.equal(first.body.gate_type, 'email_verified');
    assert.equal(first.body.feature, 'dedicated_ports');
    assert.equal(typeof first.body.message, 'string');

    await verify(user, { email_verified: true });
    const second = await put(user, uuid, { dedicated_tcp_port: port });
    assert.equal(second.status, 403);
    assert.equal(second.body.gate_type, 'payment_method');
    assert.deepEqual(await stored(uuid), { tcp: null, udp: null, status: 'active' });

    await verify(user, { payment_method: true });
    assert.equal((await put(user, uuid, { dedicated_tcp_port: port })).status, 200);
  });

  it('answers 403 quota_exceeded past the plan’s port count across the owner’s endpoints, and changes nothing', async () => {
    const user = await t.createUser('pro'); // dedicated_ports_max: 2
    await verify(user, { email_verified: true, payment_method: true });
    const [a, b] = [await newEndpoint(user), await newEndpoint(user)];
    const [tcp, udp, third] = [freshPort(), freshPort(), freshPort()];
    assert.equal((await put(user, a, { dedicated_tcp_port: tcp, dedicated_udp_port: udp })).status, 200);
    const res = await put(user, b, { dedicated_tcp_port: third });
    assert.equal(res.status, 403);
    assert.equal(res.body.code, 'quota_exceeded');
    assert.equal(res.body.detail.limit, 2);
    assert.deepEqual(await stored(b), { tcp: null, udp: null, status: 'active' });
    // Moving a port between protocols on the same endpoint stays within the count.
    assert.equal((await put(user, a, { dedicated_tcp_port: third })).status, 200);
    // Releasing one makes room for another.
    assert.equal((await put(user, a, { dedicated_udp_port: null })).status, 200);
    assert.equal((await put(user, b, { dedicated_udp_port: udp })).status, 200);
  });

  it('counts a plan’s 0 as unlimited', async () => {
    const user = await t.createUser('business'); // dedicated_ports_max: 0
    for (let i = 0; i < 3; i++) {
      const uuid = await newEndpoint(user);
      assert.equal((await put(user, uuid, { dedicated_tcp_port: freshPort(), dedicated_udp_port: freshPort() })).status, 200);
    }
  });

  it('still lets an account that lost the entitlement release its ports', async () => {
    const user = await t.createUser('business');
    const uuid = await newEndpoint(user);
    const port = freshPort();
    await put(user, uuid, { dedicated_tcp_port: port });
    await t.api('PUT', `/v1/admin/users/${user.id}/plan`, { body: { plan: 'free' } });
    assert.equal((await put(user, uuid, { dedicated_udp_port: freshPort() })).status, 403);
    const res = await put(user, uuid, { dedicated_tcp_port: null });
    assert.equal(res.status, 200);
    assert.deepEqual(await stored(uuid), { tcp: null, udp: null, status: 'active' });
  });

  it('answers 404 for another user’s endpoint, 403 without endpoints:update, 401 without a key', async () => {
    const owner = await t.createUser('business');
    const stranger = await t.createUser('business');
    const uuid = await newEndpoint(owner);
    assert.equal((await put(stranger, uuid, { dedicated_tcp_port: freshPort() })).status, 404);
    assert.equal((await t.api('PUT', `/v1/endpoints/${uuid}/ports`, { key: null, body: { dedicated_tcp_port: freshPort() } })).status, 401);
    assert.equal((await put(owner, 'not-a-uuid', {})).status, 400);

    const member = await t.createUser('business');
    const org = await t.api('POST', '/v1/organizations', { key: owner.api_key, body: { name: 'Ports' } });
    await t.api('POST', `/v1/organizations/${org.body.id}/members`, { key: owner.api_key, body: { email: member.email, permissions: ['endpoints:read'] } });
    const headers = { 'x-account-id': String(org.body.id) };
    const orgEndpoint = await t.api('POST', '/v1/endpoints', { key: owner.api_key, body: {}, headers });
    const denied = await put(member, orgEndpoint.body.uuid, { dedicated_tcp_port: freshPort() }, headers);
    assert.equal(denied.status, 403);
    assert.equal(denied.body.code, 'permission_denied');
    assert.deepEqual(await stored(uuid), { tcp: null, udp: null, status: 'active' });
    assert.deepEqual(await stored(orgEndpoint.body.uuid), { tcp: null, udp: null, status: 'active' });
  });

  it('lets an admin assign ports on any endpoint, free of verification gates', async () => {
    const user = await t.createUser('pro');
    const uuid = await newEndpoint(user);
    const port = freshPort();
    const res = await t.api('PUT', `/v1/endpoints/${uuid}/ports`, { body: { dedicated_tcp_port: port } });
    assert.equal(res.status, 200, res.text);
    assert.equal((await stored(uuid)).tcp, port);
  });
});
