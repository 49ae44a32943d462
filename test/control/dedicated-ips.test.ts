// Dedicated IPs and per-region groups over real HTTP: the operator's inventory, what an account lists, binding an
// endpoint to a group exactly as the contract says (every status), single-IP bindings, and refusals that change nothing.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { TestNode } from '../helpers/node.ts';
import { startTestNode } from '../helpers/node.ts';
import { createEndpoint, edgeCaughtUp, expectBody, feedVersion, nodeWithOwner, orgWithMember, storeRows, type User } from '../helpers/endpoint-api.ts';
import type { DedicatedIpGroupConfig, EndpointConfig } from '../../src/shared/snapshot.ts';

let addressCounter = 0;
/** A fresh documentation address per call (TEST-NET-3), so tests never collide on the unique live address. */
const nextAddress = () => `203.0.113.${++addressCounter}`;

describe('dedicated IPs API', () => {
  let t: TestNode;
  let owner: User;
  let other: User;
  before(async () => {
    ({ t, owner } = await nodeWithOwner());
    other = await t.createUser('business');
  });
  after(() => t.close());

  const sql = storeRows(() => t);
  const admin = (method: string, path: string, body?: unknown) => t.api(method, path, { body });
  const registerIp = async (account: number, region = 'eu', address = nextAddress()) =>
    expectBody(201, admin('POST', '/v1/admin/dedicated-ips', { address, region, account_id: account }));
  const newGroup = async (account: number, addresses: string[], status = 'active') =>
    expectBody(201, admin('POST', '/v1/admin/dedicated-ip-groups', { account_id: account, name: 'web', status, addresses }));
  const bindGroup = (user: Pick<User, 'api_key'>, uuid: string, body: unknown, headers?: Record<string, string>) =>
    t.api('POST', `/v1/endpoints/${uuid}/dedicated-ip-group`, { key: user.api_key, body, headers });
  const bindIp = (user: Pick<User, 'api_key'>, uuid: string, body: unknown) => t.api('POST', `/v1/endpoints/${uuid}/dedicated-ip`, { key: user.api_key, body });
  const binding = async (uuid: string) =>
    (await sql<{ ip: number | null; grp: number | null }>('SELECT dedicated_ip_id AS ip, dedicated_ip_group_id AS grp FROM endpoints WHERE uuid = $1', [uuid]))[0];
  const geoZone = () => t.node.config.dns.geoZone;

  async function edgeView(uuid: string): Promise<EndpointConfig | undefined> {
    await edgeCaughtUp(t);
    return t.node.edgeFeed!.mirror.get('endpoint', uuid)?.data as EndpointConfig | undefined;
  }
  async function edgeGroup(id: number): Promise<DedicatedIpGroupConfig | undefined> {
    await edgeCaughtUp(t);
    return t.node.edgeFeed!.mirror.get('dedicated_ip_group', String(id))?.data as DedicatedIpGroupConfig | undefined;
  }

  // ---- the operator's inventory -------------------------------------------------------------------------------

  describe('inventory (admin)', () => {
    it('registers IPv4 and IPv6 addresses in canonical form', async () => {
      const v4 = await registerIp(owner.account_id, 'eu', ' 198.51.100.7 ');
      assert.equal(v4.address, '198.51.100.7');
      assert.equal(v4.family, 4);
      assert.equal(v4.region, 'eu');
      assert.equal(v4.account_id, owner.account_id);
      assert.equal(v4.group_id, null);
      assert.equal(v4.endpoint_uuid, null);
      assert.equal(v4.status, 'active');
      const v6 = await registerIp(owner.account_id, 'US-East', '2001:DB8:0:0:0:0:0:A');
      assert.equal(v6.address, '2001:db8::a');
      assert.equal(v6.family, 6);
      assert.equal(v6.region, 'us-east');
      const mapped = await registerIp(owner.account_id, 'eu', '::ffff:198.51.100.8');
      assert.equal(mapped.address, '198.51.100.8');
      assert.equal(mapped.family, 4);
    });

    it('refuses a bad address, region or account and an address registered twice, changing nothing', async () => {
      const before = (await sql('SELECT count(*)::int AS n FROM dedicated_ips'))[0].n;
      const bad: Array<[unknown, number, string]> = [
        [{ address: 'not-an-ip', region: 'eu', account_id: owner.account_id }, 400, 'address'],
        [{ address: '198.51.100.0/24', region: 'eu', account_id: owner.account_id }, 400, 'address'],
        [{ address: '127.1', region: 'eu', account_id: owner.account_id }, 400, 'address'],
        [{ address: '224.0.0.1', region: 'eu', account_id: owner.account_id }, 400, 'address'],
        [{ address: '0.0.0.0', region: 'eu', account_id: owner.account_id }, 400, 'address'],
        [{ address: 'fe80::1%eth0', region: 'eu', account_id: owner.account_id }, 400, 'address'],
        [{ address: '198.51.100.9', region: 'EU West', account_id: owner.account_id }, 400, 'region'],
        [{ address: '198.51.100.9', region: 'eu', account_id: 0 }, 400, 'account_id'],
        [{ address: '198.51.100.9', region: 'eu' }, 400, 'account_id'],
        [{ address: '198.51.100.9', region: 'eu', account_id: owner.account_id, extra: 1 }, 400, 'extra'],
        [{ address: '198.51.100.9', region: 'eu', account_id: 987654321 }, 404, 'account_id'],
      ];
      for (const [body, status, field] of bad) {
        const res = await admin('POST', '/v1/admin/dedicated-ips', body);
        assert.equal(res.status, status, `${JSON.stringify(body)}: ${res.text}`);
        if (status === 400) assert.equal(res.body.detail.field, field, res.text);
      }
      const taken = await registerIp(owner.account_id);
      const again = await admin('POST', '/v1/admin/dedicated-ips', { address: taken.address, region: 'us', account_id: other.account_id });
      assert.equal(again.status, 409, again.text);
      assert.equal(again.body.code, 'dedicated_ip_in_use');
      assert.equal((await sql('SELECT count(*)::int AS n FROM dedicated_ips'))[0].n, before + 1);
    });

    it('is for admins only', async () => {
      const res = await t.api('POST', '/v1/admin/dedicated-ips', { key: owner.api_key, body: { address: nextAddress(), region: 'eu', account_id: owner.account_id } });
      assert.equal(res.status, 403);
      assert.equal(res.body.code, 'admin_required');
      assert.equal((await t.api('GET', '/v1/admin/dedicated-ip-groups', { key: owner.api_key })).status, 403);
      assert.equal((await t.api('GET', '/v1/admin/dedicated-ips', { key: null })).status, 401);
    });

    it('lists, filters, moves and retires addresses', async () => {
      const ip = await registerIp(other.account_id, 'ap');
      const listed = await expectBody(200, admin('GET', `/v1/admin/dedicated-ips?account_id=${other.account_id}`));
      assert.ok(listed.items.some((i: any) => i.id === ip.id));
      assert.ok(listed.items.every((i: any) => i.account_id === other.account_id));
      const moved = await expectBody(200, admin('PATCH', `/v1/admin/dedicated-ips/${ip.id}`, { region: 'eu' }));
      assert.equal(moved.region, 'eu');
      assert.equal((await admin('PATCH', `/v1/admin/dedicated-ips/${ip.id}`, { region: '-bad' })).status, 400);
      assert.equal((await admin('PATCH', `/v1/admin/dedicated-ips/${ip.id}`, { colour: 'red' })).status, 400);
      assert.equal((await admin('PATCH', '/v1/admin/dedicated-ips/999999', { region: 'eu' })).status, 404);
      assert.equal((await admin('PATCH', '/v1/admin/dedicated-ips/abc', { region: 'eu' })).status, 400);
      const retired = await expectBody(200, admin('DELETE', `/v1/admin/dedicated-ips/${ip.id}`));
      assert.equal(retired.status, 'retired');
      const live = await expectBody(200, admin('GET', `/v1/admin/dedicated-ips?account_id=${other.account_id}`));
      assert.ok(!live.items.some((i: any) => i.id === ip.id));
      const all = await expectBody(200, admin('GET', `/v1/admin/dedicated-ips?account_id=${other.account_id}&include_retired=true`));
      assert.ok(all.items.some((i: any) => i.id === ip.id));
      // A retired address may be registered again, as a new row.
      const again = await registerIp(other.account_id, 'eu', ip.address);
      assert.notEqual(again.id, ip.id);
    });

    it('refuses bad group updates with 400 or 404 and changes nothing', async () => {
      const ip = await registerIp(owner.account_id, 'eu');
      const g = await newGroup(owner.account_id, [ip.address], 'pending');
      const version = await feedVersion(t);
      const bad: Array<[unknown, number]> = [
        [{ status: 'retired' }, 400],
        [{ status: 'ACTIVE' }, 400],
        [{ name: '' }, 400],
        [{ name: 'x'.repeat(101) }, 400],
        [{ addresses: ['not-an-ip'] }, 400],
        [{ addresses: ['192.0.2.251'] }, 400],
        [{ addresses: 'a' }, 400],
        [{ colour: 'red' }, 400],
      ];
      for (const [body, status] of bad) {
        const res = await admin('PATCH', `/v1/admin/dedicated-ip-groups/${g.id}`, body);
        assert.equal(res.status, status, `${JSON.stringify(body)}: ${res.text}`);
      }
      assert.equal((await admin('PATCH', '/v1/admin/dedicated-ip-groups/987654321', { status: 'active' })).status, 404);
      assert.equal((await admin('PATCH', '/v1/admin/dedicated-ip-groups/x', { status: 'active' })).status, 400);
      const after = await expectBody(200, admin('GET', `/v1/admin/dedicated-ip-groups/${g.id}`));
      assert.equal(after.status, 'pending');
      assert.equal(after.name, 'web');
      assert.deepEqual(after.regions, { eu: [ip.address] });
      assert.equal(await feedVersion(t), version);
    });

    it('builds groups from registered addresses of the same account, one group per address', async () => {
      const eu = await registerIp(owner.account_id, 'eu');
      const us = await registerIp(owner.account_id, 'us');
      const g = await newGroup(owner.account_id, [eu.address, us.address], 'pending');
      assert.ok(g.id > 0);
      assert.equal(g.status, 'pending');
      assert.equal(g.geo_fqdn, `grp-${g.id}.${geoZone()}`);
      assert.deepEqual(g.regions, { eu: [eu.address], us: [us.address] });
      assert.equal(g.endpoint_count, 0);
      // In one group at most; another account's address never; unregistered ones are named.
      const second = await admin('POST', '/v1/admin/dedicated-ip-groups', { account_id: owner.account_id, name: 'b', addresses: [eu.address] });
      assert.equal(second.status, 409, second.text);
      assert.equal(second.body.code, 'dedicated_ip_in_use');
      const foreign = await registerIp(other.account_id, 'eu');
      const cross = await admin('POST', '/v1/admin/dedicated-ip-groups', { account_id: owner.account_id, name: 'c', addresses: [foreign.address] });
      assert.equal(cross.status, 409, cross.text);
      const unknown = await admin('POST', '/v1/admin/dedicated-ip-groups', { account_id: owner.account_id, name: 'd', addresses: ['192.0.2.250'] });
      assert.equal(unknown.status, 400, unknown.text);
      assert.equal(unknown.body.detail.field, 'addresses[0]');
      for (const body of [{ account_id: owner.account_id, name: '' }, { account_id: owner.account_id, name: 'x', status: 'retired' }, { name: 'x' }, { account_id: owner.account_id, name: 'x', addresses: 'a' }]) {
        assert.equal((await admin('POST', '/v1/admin/dedicated-ip-groups', body)).status, 400, JSON.stringify(body));
      }
      // The group reaches the edges' feed as it stands, and leaves it once retired.
      const activated = await expectBody(200, admin('PATCH', `/v1/admin/dedicated-ip-groups/${g.id}`, { status: 'active', addresses: [us.address] }));
      assert.deepEqual(activated.regions, { us: [us.address] });
      assert.deepEqual(await edgeGroup(g.id), { id: g.id, account_id: owner.account_id, status: 'active', addresses: [{ address: us.address, family: 4, region: 'us' }] });
      const freed = await expectBody(200, admin('GET', `/v1/admin/dedicated-ips/${eu.id}`));
      assert.equal(freed.group_id, null);
      const retired = await expectBody(200, admin('DELETE', `/v1/admin/dedicated-ip-groups/${g.id}`));
      assert.equal(retired.status, 'retired');
      assert.equal(retired.geo_fqdn, null);
      assert.equal(await edgeGroup(g.id), undefined);
      assert.equal((await admin('PATCH', `/v1/admin/dedicated-ip-groups/${g.id}`, { status: 'active' })).status, 409);
    });
  });

  // ---- what an account lists ------------------------------------------------------------------------------------

  it('lists only the active account’s groups and addresses, with endpoints:read', async () => {
    const mine = await registerIp(owner.account_id, 'eu');
    const theirs = await registerIp(other.account_id, 'eu');
    const g = await newGroup(other.account_id, [theirs.address]);
    const groups = await expectBody(200, t.api('GET', '/v1/dedicated-ips/groups', { key: owner.api_key }));
    assert.ok(groups.items.every((x: any) => x.account_id === owner.account_id));
    assert.ok(!groups.items.some((x: any) => x.id === g.id));
    const otherGroups = await expectBody(200, t.api('GET', '/v1/dedicated-ips/groups', { key: other.api_key }));
    assert.ok(otherGroups.items.some((x: any) => x.id === g.id && x.status === 'active'));
    const ips = await expectBody(200, t.api('GET', '/v1/dedicated-ips', { key: owner.api_key }));
    assert.ok(ips.items.some((x: any) => x.id === mine.id));
    assert.ok(!ips.items.some((x: any) => x.id === theirs.id));
    assert.equal((await t.api('GET', '/v1/dedicated-ips', { key: null })).status, 401);
    const member = await t.createUser('free');
    const org = await orgWithMember(t, owner, member, ['traffic:read']);
    const denied = await t.api('GET', '/v1/dedicated-ips/groups', { key: member.api_key, headers: org.headers });
    assert.equal(denied.status, 403, denied.text);
    assert.equal(denied.body.code, 'permission_denied');
  });

  // ---- POST /v1/endpoints/{uuid}/dedicated-ip-group, exactly as the contract -----------------------------------------

  describe('binding a group', () => {
    let group: any;
    before(async () => {
      group = await newGroup(owner.account_id, [(await registerIp(owner.account_id, 'eu')).address, (await registerIp(owner.account_id, 'us')).address]);
    });

    it('answers 200 {endpoint_id, group_id, geo_fqdn} and publishes the binding to the edges', async () => {
      const ep = await createEndpoint(t, owner);
      const res = await bindGroup(owner, ep.uuid, { group_id: group.id });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(Object.keys(res.body).sort(), ['endpoint_id', 'geo_fqdn', 'group_id']);
      assert.equal(res.body.endpoint_id, ep.id);
      assert.equal(res.body.group_id, group.id);
      assert.equal(res.body.geo_fqdn, `grp-${group.id}.${geoZone()}`);
      assert.equal((await edgeView(ep.uuid))?.dedicated_ip_group_id, group.id);
      const read = await expectBody(200, t.api('GET', `/v1/endpoints/${ep.uuid}/dedicated-ip-group`, { key: owner.api_key }));
      assert.equal(read.group_id, group.id);
      assert.equal(read.group.endpoint_count, 1);
      // Binding the same group again is the same answer.
      assert.equal((await bindGroup(owner, ep.uuid, { group_id: group.id })).status, 200);
    });

    it('refuses bad bodies with 400 and changes nothing', async () => {
      const ep = await createEndpoint(t, owner);
      const version = await feedVersion(t);
      const cases: Array<{ body?: unknown; raw?: string; field?: string; code: string }> = [
        { body: {}, field: 'group_id', code: 'invalid_request' },
        { body: { group_id: 0 }, field: 'group_id', code: 'invalid_request' },
        { body: { group_id: -4 }, field: 'group_id', code: 'invalid_request' },
        { body: { group_id: 1.5 }, field: 'group_id', code: 'invalid_request' },
        { body: { group_id: '7' }, field: 'group_id', code: 'invalid_request' },
        { body: { group_id: group.id, extra: true }, field: 'extra', code: 'unknown_field' },
        { raw: '{"group_id": ', code: 'invalid_json' },
      ];
      for (const c of cases) {
        const res = await t.api('POST', `/v1/endpoints/${ep.uuid}/dedicated-ip-group`, { key: owner.api_key, body: c.body, raw: c.raw, headers: c.raw ? { 'content-type': 'application/json' } : undefined });
        assert.equal(res.status, 400, `${JSON.stringify(c)}: ${res.text}`);
        assert.equal(res.body.code, c.code, res.text);
        if (c.field) assert.equal(res.body.detail.field, c.field, res.text);
      }
      assert.equal((await bindGroup({ api_key: 'nope' }, ep.uuid, { group_id: group.id })).status, 401);
      assert.deepEqual(await binding(ep.uuid), { ip: null, grp: null });
      assert.equal(await feedVersion(t), version);
    });

    it('answers 403 for a plan without dedicated_ips and for another tenant’s endpoint or group', async () => {
      const pro = await t.createUser('pro');
      const proEndpoint = await createEndpoint(t, pro);
      const noPlan = await bindGroup(pro, proEndpoint.uuid, { group_id: group.id });
      assert.equal(noPlan.status, 403, noPlan.text);
      assert.equal(noPlan.body.code, 'entitlement_required');
      const theirs = await createEndpoint(t, other);
      const foreignEndpoint = await bindGroup(owner, theirs.uuid, { group_id: group.id });
      assert.equal(foreignEndpoint.status, 403, foreignEndpoint.text);
      const theirGroup = await newGroup(other.account_id, [(await registerIp(other.account_id, 'eu')).address]);
      const mine = await createEndpoint(t, owner);
      const foreignGroup = await bindGroup(owner, mine.uuid, { group_id: theirGroup.id });
      assert.equal(foreignGroup.status, 403, foreignGroup.text);
      assert.deepEqual(await binding(mine.uuid), { ip: null, grp: null });
      assert.deepEqual(await binding(theirs.uuid), { ip: null, grp: null });
      // A member without endpoints:update is refused too.
      const member = await t.createUser('free');
      const org = await orgWithMember(t, owner, member, ['endpoints:read']);
      const denied = await bindGroup(member, mine.uuid, { group_id: group.id }, org.headers);
      assert.equal(denied.status, 403, denied.text);
    });

    it('answers 404 for a missing endpoint or group and 409 for a group that is not active', async () => {
      const ep = await createEndpoint(t, owner);
      assert.equal((await bindGroup(owner, '00000000-0000-4000-8000-000000000000', { group_id: group.id })).status, 404);
      assert.equal((await bindGroup(owner, 'not-a-uuid', { group_id: group.id })).status, 400);
      const missing = await bindGroup(owner, ep.uuid, { group_id: 987654321 });
      assert.equal(missing.status, 404, missing.text);
      assert.equal((await t.api('POST', `/v1/endpoints/${ep.uuid}/dedicated-ip-group`, { key: owner.api_key, raw: '{"group_id": 9223372036854775807}', headers: { 'content-type': 'application/json' } })).status, 404);
      const pending = await newGroup(owner.account_id, [], 'pending');
      const res = await bindGroup(owner, ep.uuid, { group_id: pending.id });
      assert.equal(res.status, 409, res.text);
      assert.equal(res.body.code, 'group_not_active');
      assert.deepEqual(await binding(ep.uuid), { ip: null, grp: null });
    });

    it('clears a single-IP binding, and a single IP clears the group', async () => {
      const ep = await createEndpoint(t, owner);
      const ip = await registerIp(owner.account_id, 'eu');
      const single = await expectBody(200, bindIp(owner, ep.uuid, { dedicated_ip_id: ip.id }));
      assert.deepEqual(single, { endpoint_id: ep.id, dedicated_ip_id: ip.id, address: ip.address, region: 'eu' });
      assert.deepEqual((await edgeView(ep.uuid))?.dedicated_ip, { address: ip.address, family: 4, region: 'eu' });
      await expectBody(200, bindGroup(owner, ep.uuid, { group_id: group.id }));
      assert.deepEqual(await binding(ep.uuid), { ip: null, grp: group.id });
      const view = await edgeView(ep.uuid);
      assert.equal(view?.dedicated_ip, undefined);
      assert.equal(view?.dedicated_ip_group_id, group.id);
      await expectBody(200, bindIp(owner, ep.uuid, { dedicated_ip_id: ip.id }));
      assert.deepEqual(await binding(ep.uuid), { ip: ip.id, grp: null });
      assert.equal((await t.api('GET', `/v1/endpoints/${ep.uuid}/dedicated-ip-group`, { key: owner.api_key })).status, 404);
      const read = await expectBody(200, t.api('GET', `/v1/endpoints/${ep.uuid}/dedicated-ip`, { key: owner.api_key }));
      assert.equal(read.address, ip.address);
      // The address serves this endpoint alone: another endpoint, a group or a retirement is refused.
      const second = await createEndpoint(t, owner);
      const taken = await bindIp(owner, second.uuid, { dedicated_ip_id: ip.id });
      assert.equal(taken.status, 409, taken.text);
      assert.equal(taken.body.code, 'dedicated_ip_in_use');
      assert.equal((await admin('DELETE', `/v1/admin/dedicated-ips/${ip.id}`)).status, 409);
      assert.equal((await admin('POST', '/v1/admin/dedicated-ip-groups', { account_id: owner.account_id, name: 'x', addresses: [ip.address] })).status, 409);
      const grouped = await bindIp(owner, second.uuid, { dedicated_ip_id: group.regions.eu ? (await expectBody(200, admin('GET', '/v1/admin/dedicated-ips'))).items.find((i: any) => i.group_id === group.id).id : 0 });
      assert.equal(grouped.status, 409, grouped.text);
      for (const body of [{}, { dedicated_ip_id: 0 }, { dedicated_ip_id: 'x' }, { dedicated_ip_id: ip.id, more: 1 }]) {
        assert.equal((await bindIp(owner, second.uuid, body)).status, 400, JSON.stringify(body));
      }
      assert.equal((await bindIp(owner, second.uuid, { dedicated_ip_id: 987654321 })).status, 404);
      const foreign = await registerIp(other.account_id, 'eu');
      assert.equal((await bindIp(owner, second.uuid, { dedicated_ip_id: foreign.id })).status, 403);
    });

    it('detaches: DELETE answers 204, then 404 when nothing is bound', async () => {
      const ep = await createEndpoint(t, owner);
      await expectBody(200, bindGroup(owner, ep.uuid, { group_id: group.id }));
      assert.equal((await admin('DELETE', `/v1/admin/dedicated-ip-groups/${group.id}`)).status, 409, 'a group serving endpoints is not retired');
      const res = await t.api('DELETE', `/v1/endpoints/${ep.uuid}/dedicated-ip-group`, { key: owner.api_key });
      assert.equal(res.status, 204, res.text);
      assert.deepEqual(await binding(ep.uuid), { ip: null, grp: null });
      assert.equal((await edgeView(ep.uuid))?.dedicated_ip_group_id, undefined);
      assert.equal((await t.api('DELETE', `/v1/endpoints/${ep.uuid}/dedicated-ip-group`, { key: owner.api_key })).status, 404);
      assert.equal((await t.api('DELETE', `/v1/endpoints/${ep.uuid}/dedicated-ip`, { key: owner.api_key })).status, 404);
    });

    it('ends concurrent attaches to one endpoint with one binding, never two', async () => {
      const ep = await createEndpoint(t, owner);
      const ips = await Promise.all([registerIp(owner.account_id, 'eu'), registerIp(owner.account_id, 'us')]);
      const other = await newGroup(owner.account_id, []);
      const attempts = Array.from({ length: 12 }, (_, i) =>
        i % 3 === 0 ? bindGroup(owner, ep.uuid, { group_id: group.id }) : i % 3 === 1 ? bindGroup(owner, ep.uuid, { group_id: other.id }) : bindIp(owner, ep.uuid, { dedicated_ip_id: ips[i % 2].id }),
      );
      const results = await Promise.all(attempts);
      for (const r of results) assert.equal(r.status, 200, r.text);
      const final = await binding(ep.uuid);
      assert.ok((final.ip === null) !== (final.grp === null), JSON.stringify(final));
      // Two endpoints racing for one address: exactly one holds it.
      const [a, b] = await Promise.all([createEndpoint(t, owner), createEndpoint(t, owner)]);
      const lone = await registerIp(owner.account_id, 'eu');
      const race = await Promise.all([bindIp(owner, a.uuid, { dedicated_ip_id: lone.id }), bindIp(owner, b.uuid, { dedicated_ip_id: lone.id })]);
      assert.deepEqual(race.map((r) => r.status).sort(), [200, 409]);
    });
  });

  it('answers 503 when GeoDNS is off on the server, for a binding that would otherwise succeed', async () => {
    const off = await startTestNode({ EDGE_GEODNS_ZONE: '' });
    try {
      const user = await off.createUser('business');
      const ip = await expectBody(201, off.api('POST', '/v1/admin/dedicated-ips', { body: { address: '198.51.100.200', region: 'eu', account_id: user.account_id } }));
      const g = await expectBody(201, off.api('POST', '/v1/admin/dedicated-ip-groups', { body: { account_id: user.account_id, name: 'g', status: 'active', addresses: [ip.address] } }));
      assert.equal(g.geo_fqdn, null);
      const ep = await createEndpoint(off, user);
      const res = await off.api('POST', `/v1/endpoints/${ep.uuid}/dedicated-ip-group`, { key: user.api_key, body: { group_id: g.id } });
      assert.equal(res.status, 503, res.text);
      assert.equal(res.body.code, 'geodns_not_configured');
      // A single IP needs no GeoDNS.
      assert.equal((await off.api('POST', `/v1/endpoints/${ep.uuid}/dedicated-ip`, { key: user.api_key, body: { dedicated_ip_id: ip.id } })).status, 409, 'the address is in the group');
    } finally {
      await off.close();
    }
  });
});
