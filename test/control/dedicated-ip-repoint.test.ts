// The DNS repoint against a real Knot DNS primary: a group binding becomes a TSIG-signed RFC 2136 CNAME in the
// operator's zone; a refused or unreachable update is a 502 that leaves the binding exactly as it was; a retry works.
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { createEndpoint, expectBody, feedVersion, storeRows, type User } from '../helpers/endpoint-api.ts';
import { knotAvailable, startKnot, type KnotServer } from '../helpers/knot.ts';
import { skipSlowSuite } from '../helpers/slow-suites.ts';

const BASE = 'edge.test';
const KEY = { name: 'edge-update', algorithm: 'hmac-sha256' as const, secret: randomBytes(32).toString('base64') };

const skip = skipSlowSuite() || (knotAvailable() ? false : 'knotd is not installed (Debian package knot)');

describe('dedicated IP group binding published by RFC 2136 to a real Knot primary', { skip }, () => {
  let knot: KnotServer;
  let t: TestNode;
  let owner: User;
  let group: number;
  let ip: number;
  before(async () => {
    knot = await startKnot({ zone: BASE, key: KEY, allowUpdate: true });
    t = await startTestNode({
      EDGE_BASE_DOMAIN: BASE,
      EDGE_DNS_UPDATE_SERVER: `127.0.0.1:${knot.port}`,
      EDGE_DNS_UPDATE_ZONE: BASE,
      EDGE_DNS_TSIG_KEY: `${KEY.name}:${KEY.algorithm}:${KEY.secret}`,
      EDGE_DNS_UPDATE_TIMEOUT_MS: '1500',
    });
    owner = await t.createUser('business');
    const a = await expectBody(201, t.api('POST', '/v1/admin/dedicated-ips', { body: { address: '192.0.2.10', region: 'eu', account_id: owner.account_id } }));
    const b = await expectBody(201, t.api('POST', '/v1/admin/dedicated-ips', { body: { address: '192.0.2.11', region: 'eu', account_id: owner.account_id } }));
    ip = b.id;
    group = (await expectBody(201, t.api('POST', '/v1/admin/dedicated-ip-groups', { body: { account_id: owner.account_id, name: 'g', status: 'active', addresses: [a.address] } }))).id;
  });
  after(async () => {
    await t?.close();
    await knot?.stop();
  });

  const sql = storeRows(() => t);
  const bind = (uuid: string) => t.api('POST', `/v1/endpoints/${uuid}/dedicated-ip-group`, { key: owner.api_key, body: { group_id: group } });
  const binding = async (uuid: string) => (await sql('SELECT dedicated_ip_id AS ip, dedicated_ip_group_id AS grp FROM endpoints WHERE uuid = $1', [uuid]))[0];
  const cnameAt = async (server: KnotServer, name: string) => {
    const answer = await server.query(name, 'CNAME');
    return (answer.answers?.find((a) => a.type === 'CNAME') as { data?: string } | undefined)?.data;
  };

  it('writes the CNAME to geo_fqdn on bind and removes it on unbind', async () => {
    const ep = await createEndpoint(t, owner);
    const bound = await expectBody(200, bind(ep.uuid));
    assert.equal(bound.geo_fqdn, `grp-${group}.geo.${BASE}`);
    assert.equal(await cnameAt(knot, ep.hostname), bound.geo_fqdn);
    assert.equal((await t.api('DELETE', `/v1/endpoints/${ep.uuid}/dedicated-ip-group`, { key: owner.api_key })).status, 204);
    assert.equal(await cnameAt(knot, ep.hostname), undefined);
  });

  it('answers 502 when the primary refuses, reverting to exactly the previous binding, and a retry succeeds once DNS is back', async () => {
    const ep = await createEndpoint(t, owner);
    // The binding a failed group bind must restore: a single IP, which binding a group would have cleared.
    await expectBody(200, t.api('POST', `/v1/endpoints/${ep.uuid}/dedicated-ip`, { key: owner.api_key, body: { dedicated_ip_id: ip } }));
    const before = await binding(ep.uuid);
    const version = await feedVersion(t);
    // The same port, now served by a primary whose ACL denies the key: the update is refused (NOTAUTH).
    const port = knot.port;
    await knot.stop();
    knot = await startKnot({ zone: BASE, key: KEY, allowUpdate: false, port });
    const refused = await bind(ep.uuid);
    assert.equal(refused.status, 502, refused.text);
    assert.equal(refused.body.code, 'dns_repoint_failed');
    assert.deepEqual(await binding(ep.uuid), before);
    assert.equal(await feedVersion(t), version, 'nothing was published');
    assert.equal(await cnameAt(knot, ep.hostname), undefined);
    // Nobody listening at all: the same 502 and the same revert.
    await knot.stop();
    const unreachable = await bind(ep.uuid);
    assert.equal(unreachable.status, 502, unreachable.text);
    assert.deepEqual(await binding(ep.uuid), before);
    // DNS back: the retry binds and publishes.
    knot = await startKnot({ zone: BASE, key: KEY, allowUpdate: true, port });
    const retried = await expectBody(200, bind(ep.uuid));
    assert.deepEqual(await binding(ep.uuid), { ip: null, grp: group });
    assert.equal(await cnameAt(knot, ep.hostname), retried.geo_fqdn);
  });

  it('refuses to start with a TSIG key it cannot use', async () => {
    await assert.rejects(
      startTestNode({ EDGE_BASE_DOMAIN: BASE, EDGE_DNS_UPDATE_SERVER: '127.0.0.1:53', EDGE_DNS_UPDATE_ZONE: BASE, EDGE_DNS_TSIG_KEY: 'k:hmac-md5:c2VjcmV0c2VjcmV0c2VjcmV0' }),
      /EDGE_DNS_TSIG_KEY/,
    );
  });
});
