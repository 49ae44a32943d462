// What the DNS role answers, from the feed and presence it holds: per-region group answers chosen by the asker's
// subnet or address, health-aware fallback, endpoint names (CNAME, single IP, shared pool), and the negative answers.
import { beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { GeoDatabases } from '../../src/shared/geo.ts';
import { parseIp } from '../../src/shared/match/cidr.ts';
import type { EdgeHeartbeat } from '../../src/shared/presence.ts';
import type { DedicatedIpGroupConfig } from '../../src/shared/snapshot.ts';
import { loadRegionMap, parseRegionMap } from '../../src/dns/regions.ts';
import type { DnsClient, DnsResponse } from '../../src/dns/types.ts';
import { DnsZones } from '../../src/dns/zones.ts';

const geo = new GeoDatabases();
geo.requireCountry();

/** Public addresses whose country the shipped database knows (checked in the first test): one per region. */
const ASKERS = { eu: '81.2.69.0', us: '8.8.8.0', ap: '1.0.16.0' } as const;

const GROUP: DedicatedIpGroupConfig = {
  id: 7,
  account_id: 1,
  status: 'active',
  addresses: [
    { address: '192.0.2.10', family: 4, region: 'eu' },
    { address: '192.0.2.11', family: 4, region: 'eu' },
    { address: '198.51.100.20', family: 4, region: 'us' },
    { address: '203.0.113.30', family: 4, region: 'ap' },
    { address: '2001:db8::30', family: 6, region: 'ap' },
  ],
};

function edge(node: string, region: string, addresses?: string[]): EdgeHeartbeat {
  return { node, region, version: 1, heartbeat_at: new Date().toISOString(), agents: [], ...(addresses ? { addresses } : {}) };
}

const ecs = (address: string, sourcePrefix = 24): DnsClient => ({ address: '127.0.0.1', subnet: { family: 4, address, sourcePrefix } });
/** A record's fields; dns-packet's Answer union includes OPT, which has neither. */
const rr = (a: unknown) => a as { name: string; type: string; ttl: number; data: unknown };
const addresses = (r: DnsResponse) => r.answers.map((a) => rr(a).data as string).sort();

describe('DNS zones', () => {
  let zones: DnsZones;
  let version: number;
  const put = (topic: string, key: string, data: unknown) => zones.mirror.apply({ version: ++version, topic, key, data });
  const endpoint = (hostname: string, extra: Record<string, unknown> = {}) => put('endpoint', `uuid-${hostname}`, { id: 1, uuid: `uuid-${hostname}`, hostname, ...extra });
  const ask = (name: string, type: string, client: DnsClient = { address: '127.0.0.1' }) => zones.answer({ name, type }, client);

  beforeEach(() => {
    version = 0;
    zones = new DnsZones({
      baseDomain: 'edge.test',
      geoZone: 'geo.edge.test',
      nameservers: ['ns1.edge.test'],
      ttlSeconds: 300,
      geoTtlSeconds: 30,
      regions: loadRegionMap(''),
      country: (address) => geo.country(address, parseIp(address)),
    });
    put('dedicated_ip_group', '7', GROUP);
    zones.setEdges([edge('e1', 'eu'), edge('e2', 'us'), edge('e3', 'ap')]);
  });

  it('maps the askers used here to three regions through the shipped database and config/regions.json', () => {
    for (const [region, address] of Object.entries(ASKERS)) assert.equal(zones.askerRegion({ address }), region, address);
    assert.equal(zones.askerRegion({ address: '10.1.2.3' }), 'us', 'an address without a country gets default_region');
  });

  it('answers a group name with the asker region’s addresses, by ECS subnet, with the subnet’s scope', () => {
    const eu = ask('grp-7.geo.edge.test', 'A', ecs(ASKERS.eu));
    assert.equal(eu.rcode, 'NOERROR');
    assert.equal(eu.authoritative, true);
    assert.deepEqual(addresses(eu), ['192.0.2.10', '192.0.2.11']);
    assert.equal(eu.ecsScope, 24);
    assert.ok(eu.answers.every((a) => rr(a).ttl === 30), 'geo answers carry the geo TTL');
    assert.deepEqual(addresses(ask('grp-7.geo.edge.test', 'A', ecs(ASKERS.us))), ['198.51.100.20']);
    assert.deepEqual(addresses(ask('grp-7.geo.edge.test', 'A', ecs(ASKERS.ap, 20))), ['203.0.113.30']);
    assert.equal(ask('grp-7.geo.edge.test', 'A', ecs(ASKERS.ap, 20)).ecsScope, 20);
    assert.deepEqual(addresses(ask('grp-7.geo.edge.test', 'AAAA', ecs(ASKERS.ap))), ['2001:db8::30']);
  });

  it('uses the query’s source address when there is no ECS option', () => {
    const r = ask('grp-7.geo.edge.test', 'A', { address: ASKERS.ap });
    assert.deepEqual(addresses(r), ['203.0.113.30']);
    assert.equal(r.ecsScope, 0);
  });

  it('leaves out regions without a live edge: fallback order, then any live region, then every address', () => {
    zones.setEdges([edge('e2', 'us'), edge('e3', 'ap')]);
    // eu's fallback in config/regions.json is af, us, ap: af has no addresses, so us answers.
    assert.deepEqual(addresses(ask('grp-7.geo.edge.test', 'A', ecs(ASKERS.eu))), ['198.51.100.20']);
    zones.setEdges([edge('e3', 'ap')]);
    assert.deepEqual(addresses(ask('grp-7.geo.edge.test', 'A', ecs(ASKERS.eu))), ['203.0.113.30']);
    zones.setEdges([edge('x', 'sa')]);
    assert.deepEqual(addresses(ask('grp-7.geo.edge.test', 'A', ecs(ASKERS.eu))), ['192.0.2.10', '192.0.2.11', '198.51.100.20', '203.0.113.30']);
    zones.setEdges([]);
    assert.equal(ask('grp-7.geo.edge.test', 'A', ecs(ASKERS.us)).answers.length, 4, 'never an empty answer');
  });

  it('answers NXDOMAIN for unknown and pending groups and NODATA for a family the group lacks', () => {
    for (const name of ['grp-8.geo.edge.test', 'grp-07.geo.edge.test', 'x.grp-7.geo.edge.test', 'other.geo.edge.test']) {
      const r = ask(name, 'A');
      assert.equal(r.rcode, 'NXDOMAIN', name);
      assert.equal(rr(r.authorities[0]).type, 'SOA');
      assert.equal(rr(r.authorities[0]).name, 'geo.edge.test');
    }
    put('dedicated_ip_group', '7', { ...GROUP, status: 'pending' });
    assert.equal(ask('grp-7.geo.edge.test', 'A').rcode, 'NXDOMAIN');
    put('dedicated_ip_group', '7', { ...GROUP, addresses: GROUP.addresses.filter((a) => a.family === 4) });
    const noData = ask('grp-7.geo.edge.test', 'AAAA');
    assert.equal(noData.rcode, 'NOERROR');
    assert.equal(noData.answers.length, 0);
    assert.equal(rr(noData.authorities[0]).type, 'SOA');
    assert.equal(ask('grp-7.geo.edge.test', 'TXT').answers.length, 0);
  });

  it('answers an endpoint bound to a group with a CNAME to its geo name, followed inside the server', () => {
    endpoint('shop.edge.test', { dedicated_ip_group_id: 7 });
    const r = ask('shop.edge.test', 'A', ecs(ASKERS.us));
    assert.equal(r.rcode, 'NOERROR');
    assert.deepEqual(r.answers[0], { name: 'shop.edge.test', type: 'CNAME', ttl: 300, class: 'IN', data: 'grp-7.geo.edge.test' });
    assert.deepEqual(r.answers.slice(1).map((a) => [rr(a).name, rr(a).data]), [['grp-7.geo.edge.test', '198.51.100.20']]);
    assert.equal(r.ecsScope, 24);
    const cname = ask('shop.edge.test', 'CNAME');
    assert.equal(cname.answers.length, 1);
    assert.equal(rr(cname.answers[0]).type, 'CNAME');
  });

  it('answers a single dedicated IP, and the shared pool of live edges otherwise', () => {
    endpoint('solo.edge.test', { dedicated_ip: { address: '192.0.2.99', family: 4, region: 'eu' } });
    assert.deepEqual(addresses(ask('solo.edge.test', 'A')), ['192.0.2.99']);
    assert.equal(ask('solo.edge.test', 'AAAA').answers.length, 0);
    endpoint('plain.edge.test');
    assert.equal(ask('plain.edge.test', 'A').answers.length, 0, 'no edge announces an address yet');
    zones.setEdges([edge('e1', 'eu', ['192.0.2.1']), edge('e2', 'us', ['198.51.100.1', '2001:db8::1'])]);
    assert.deepEqual(addresses(ask('plain.edge.test', 'A', ecs(ASKERS.eu))), ['192.0.2.1']);
    assert.deepEqual(addresses(ask('plain.edge.test', 'A', ecs(ASKERS.us))), ['198.51.100.1']);
    assert.deepEqual(addresses(ask('plain.edge.test', 'AAAA')), ['2001:db8::1']);
    assert.deepEqual(addresses(ask('ns1.edge.test', 'A', ecs(ASKERS.us))), ['198.51.100.1']);
  });

  it('follows the feed: a rebinding or a deletion changes the answer, and the serial grows', () => {
    const serial = (rr(ask('edge.test', 'SOA').answers[0]).data as { serial: number }).serial;
    endpoint('move.edge.test', { dedicated_ip_group_id: 7 });
    assert.equal(rr(ask('move.edge.test', 'A').answers[0]).type, 'CNAME');
    endpoint('move.edge.test', { dedicated_ip: { address: '192.0.2.50', family: 4, region: 'eu' } });
    assert.deepEqual(addresses(ask('move.edge.test', 'A')), ['192.0.2.50']);
    put('endpoint', 'uuid-move.edge.test', null);
    assert.equal(ask('move.edge.test', 'A').rcode, 'NXDOMAIN');
    assert.ok((rr(ask('edge.test', 'SOA').answers[0]).data as { serial: number }).serial > serial);
  });

  it('tells NXDOMAIN from NODATA, answers SOA and NS at each apex, and refuses names outside its zones', () => {
    endpoint('a.b.edge.test');
    const ent = ask('b.edge.test', 'A');
    assert.equal(ent.rcode, 'NOERROR', 'an empty non-terminal exists');
    assert.equal(ent.answers.length, 0);
    assert.equal(ask('c.edge.test', 'A').rcode, 'NXDOMAIN');
    for (const apex of ['edge.test', 'geo.edge.test']) {
      const soa = ask(apex, 'SOA');
      assert.equal(rr(soa.answers[0]).type, 'SOA');
      assert.deepEqual(
        ask(apex, 'NS').answers.map((a) => rr(a).data),
        ['ns1.edge.test'],
      );
      assert.equal(ask(apex, 'A').answers.length, 0);
    }
    assert.equal((rr(ask('geo.edge.test', 'SOA').answers[0]).data as { minimum: number }).minimum, 30);
    const outside = ask('example.com', 'A');
    assert.equal(outside.rcode, 'REFUSED');
    assert.equal(outside.authoritative, false);
    assert.equal(ask('notedge.test', 'A').rcode, 'REFUSED');
  });

  it('serves no geo zone when GeoDNS is off', () => {
    const off = new DnsZones({ baseDomain: 'edge.test', geoZone: '', nameservers: ['ns1.edge.test'], ttlSeconds: 300, geoTtlSeconds: 30, regions: loadRegionMap(''), country: () => null });
    off.mirror.apply({ version: 1, topic: 'dedicated_ip_group', key: '7', data: GROUP });
    assert.equal(off.answer({ name: 'grp-7.geo.edge.test', type: 'A' }, { address: '127.0.0.1' }).rcode, 'NXDOMAIN');
  });
});

describe('GeoDNS region map', () => {
  it('takes the shipped file', () => {
    const map = loadRegionMap('');
    assert.equal(map.countries.get('DE'), 'eu');
    assert.deepEqual(map.fallback.get('eu'), ['af', 'us', 'ap', 'sa']);
  });

  it('refuses every malformed part, naming it', () => {
    const bad: Array<[unknown, RegExp]> = [
      [[], /JSON object/],
      [{ default_region: 'EU' }, /default_region/],
      [{ default_region: 'eu', countries: { de: 'eu' } }, /"de"/],
      [{ default_region: 'eu', countries: { DE: 'Europe West' } }, /countries\.DE/],
      [{ default_region: 'eu', countries: [] }, /countries/],
      [{ default_region: 'eu', fallback: { eu: 'us' } }, /fallback\.eu/],
      [{ default_region: 'eu', fallback: { eu: ['us', 5] } }, /fallback\.eu\[1\]/],
      [{ default_region: 'eu', extra: 1 }, /unknown key "extra"/],
    ];
    for (const [doc, message] of bad) assert.throws(() => parseRegionMap(doc), message, JSON.stringify(doc));
    assert.throws(() => loadRegionMap('/nonexistent/regions.json'), /cannot read/);
  });
});
