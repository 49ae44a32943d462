// The DNS role inside a running node, end to end: an operator's group and a user's binding made through the control
// API come back as real DNS answers over UDP and TCP, per region by ECS, and follow presence when a region goes away.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import dnsPacket, { type DecodedPacket } from 'dns-packet';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { createEndpoint, expectBody, type User } from '../helpers/endpoint-api.ts';
import { query, TcpClient, UdpClient } from '../helpers/dns-clients.ts';
import { readUntil } from '../helpers/eventually.ts';
import type { EdgeHeartbeat } from '../../src/shared/presence.ts';

const run = promisify(execFile);

/** Public addresses whose country the shipped database knows, one per region of config/regions.json. */
const ASKERS = { eu: '81.2.69.0', us: '8.8.8.0', ap: '1.0.16.0' } as const;
const GROUP_ADDRESSES = { eu: '192.0.2.10', us: '198.51.100.20', ap: '203.0.113.30' } as const;

const withSubnet = (name: string, type: string, address: string) =>
  query(name, type, { additionals: [{ type: 'OPT', name: '.', udpPayloadSize: 1232, options: [{ code: 'CLIENT_SUBNET', family: 1, sourcePrefixLength: 24, scopePrefixLength: 0, ip: address }] }] } as never);
/** dns-packet sets rcode when decoding; its types leave it out. */
const rcodeOf = (p: DecodedPacket) => (p as { rcode?: string }).rcode;
const dataOf = (p: DecodedPacket) => p.answers?.map((a) => `${a.type} ${(a as { data: unknown }).data}`) ?? [];

describe('DNS role in a node', () => {
  let t: TestNode;
  let owner: User;
  let udp: UdpClient;
  let groupId: number;
  let base: string;
  before(async () => {
    t = await startTestNode({ EDGE_REGION: 'eu', EDGE_PUBLIC_ADDRESSES: '127.0.0.1', EDGE_DNS_RATE_LIMIT: '0', EDGE_PRESENCE_INTERVAL_MS: '200', EDGE_PRESENCE_STALE_MS: '1500' });
    owner = await t.createUser('business');
    base = t.node.config.baseDomain;
    udp = new UdpClient(t.node.dns!.server.port);
    const addresses: string[] = [];
    for (const [region, address] of Object.entries(GROUP_ADDRESSES)) {
      await expectBody(201, t.api('POST', '/v1/admin/dedicated-ips', { body: { address, region, account_id: owner.account_id } }));
      addresses.push(address);
    }
    groupId = (await expectBody(201, t.api('POST', '/v1/admin/dedicated-ip-groups', { body: { account_id: owner.account_id, name: 'web', status: 'active', addresses } }))).id;
  });
  after(async () => {
    await udp?.close();
    await t?.close();
  });

  /** Reports a heartbeat as an edge of `region` would; it ages out of presence once the beats stop. */
  const beatAs = (node: string, region: string) =>
    t.node.presence!.report({ node, region, version: 0, heartbeat_at: new Date().toISOString(), agents: [] } satisfies EdgeHeartbeat);

  it('answers a bound endpoint name after the bind, with a CNAME to the group and the asker region’s address', async () => {
    const ep = await createEndpoint(t, owner);
    // Before the bind: the shared pool, here the edge's own EDGE_PUBLIC_ADDRESSES.
    const shared = await readUntil(() => udp.ask(query(ep.hostname, 'A')), (p) => rcodeOf(p) === 'NOERROR' && (p.answers?.length ?? 0) > 0);
    assert.deepEqual(dataOf(shared), ['A 127.0.0.1']);
    const bound = await expectBody(200, t.api('POST', `/v1/endpoints/${ep.uuid}/dedicated-ip-group`, { key: owner.api_key, body: { group_id: groupId } }));
    assert.equal(bound.geo_fqdn, `grp-${groupId}.geo.${base}`);
    const answer = await readUntil(() => udp.ask(query(ep.hostname, 'A')), (p) => p.answers?.[0]?.type === 'CNAME');
    assert.ok(answer.flags! & dnsPacket.AUTHORITATIVE_ANSWER);
    assert.deepEqual(dataOf(answer), [`CNAME ${bound.geo_fqdn}`, 'A 192.0.2.10'], 'only eu has a live edge: every asker gets eu');
    // Unbinding puts the shared pool back.
    assert.equal((await t.api('DELETE', `/v1/endpoints/${ep.uuid}/dedicated-ip-group`, { key: owner.api_key })).status, 204);
    await readUntil(() => udp.ask(query(ep.hostname, 'A')), (p) => dataOf(p).join() === 'A 127.0.0.1');
  });

  it('answers each region’s address to an ECS subnet in that region, and echoes the scope', async () => {
    await beatAs('edge-us', 'us');
    await beatAs('edge-ap', 'ap');
    await t.node.dns!.refreshPresence();
    const name = `grp-${groupId}.geo.${base}`;
    for (const [region, asker] of Object.entries(ASKERS)) {
      const reply = await udp.ask(withSubnet(name, 'A', asker));
      assert.deepEqual(dataOf(reply), [`A ${GROUP_ADDRESSES[region as keyof typeof GROUP_ADDRESSES]}`], region);
      const opt = reply.additionals?.find((a) => a.type === 'OPT') as { options?: Array<{ code: number; scopePrefixLength?: number }> } | undefined;
      const ecs = opt?.options?.find((o) => o.code === 8);
      assert.equal(ecs?.scopePrefixLength, 24, `${region}: the answer holds for the asker's /24`);
    }
    // The same over TCP, and through the real dig.
    const tcp = await TcpClient.open(t.node.dns!.server.port);
    try {
      assert.deepEqual(dataOf(await tcp.ask(withSubnet(name, 'A', ASKERS.ap))), [`A ${GROUP_ADDRESSES.ap}`]);
    } finally {
      await tcp.close();
    }
    const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(t.node.dns!.server.port), '+short', '+norec', `+subnet=${ASKERS.us}/24`, name, 'A']);
    assert.equal(stdout.trim(), GROUP_ADDRESSES.us);
  });

  it('drops a region whose edges stop beating within the presence window, and answers its fallback', async () => {
    await beatAs('edge-us', 'us');
    await t.node.dns!.refreshPresence();
    const name = `grp-${groupId}.geo.${base}`;
    assert.deepEqual(dataOf(await udp.ask(withSubnet(name, 'A', ASKERS.us))), [`A ${GROUP_ADDRESSES.us}`]);
    // No more beats from us: once presence calls the edge stale, us askers get the next region in us's fallback
    // order with a live edge (sa has no address; eu is this node).
    await readUntil(() => udp.ask(withSubnet(name, 'A', ASKERS.us)), (p) => dataOf(p).join() === `A ${GROUP_ADDRESSES.eu}`);
  });

  it('answers SOA, NS, NXDOMAIN and REFUSED as an authority, and counts on the ops port', async () => {
    const soa = await udp.ask(query(base, 'SOA'));
    assert.equal(soa.answers?.[0]?.type, 'SOA');
    const nx = await udp.ask(query(`missing.${base}`, 'A'));
    assert.equal(rcodeOf(nx), 'NXDOMAIN');
    assert.equal(nx.authorities?.[0]?.type, 'SOA');
    const refused = await udp.ask(query('example.com', 'A'));
    assert.equal(rcodeOf(refused), 'REFUSED');
    const metrics = await (await fetch(`http://127.0.0.1:${t.node.edge!.opsPort}/metrics`)).text();
    assert.match(metrics, /dns_queries_total\{transport="udp",rcode="NXDOMAIN"\} [1-9]/);
  });
});
