// What the DNS role answers for its zones (docs/dedicated-ips.md): the base domain's endpoint names and the GeoDNS
// zone's group names, from an in-memory copy of the change feed and of presence; no store query per question.
import type { Answer } from 'dns-packet';
import { FeedMirror } from '../shared/feed/subscriber.ts';
import type { FeedChange, FeedEntry } from '../shared/feed/types.ts';
import type { EdgeHeartbeat } from '../shared/presence.ts';
import { TOPICS, type DedicatedAddressConfig, type DedicatedIpGroupConfig, type EndpointConfig } from '../shared/snapshot.ts';
import { regionOrder, type RegionMap } from './regions.ts';
import type { DnsAuthority, DnsClient, DnsQuestion, DnsResponse } from './types.ts';

export interface ZoneOptions {
  baseDomain: string;
  /** '' = GeoDNS off: no geo zone is served. */
  geoZone: string;
  /** NS names of both zones; the first is the SOA's MNAME. */
  nameservers: string[];
  ttlSeconds: number;
  geoTtlSeconds: number;
  regions: RegionMap;
  /** ISO country of an address, or null (src/shared/geo.ts). */
  country(address: string): string | null;
}

/** What an endpoint name resolves to, indexed from its feed entry. */
type NameTarget = { kind: 'shared' } | { kind: 'address'; address: DedicatedAddressConfig } | { kind: 'group'; id: number };

/** An address of the shared pool: one announced by a live edge (EDGE_PUBLIC_ADDRESSES in its heartbeat). */
type SharedAddress = DedicatedAddressConfig;

const SOA_REFRESH = 3600;
const SOA_RETRY = 600;
const SOA_EXPIRE = 604800;

function family(address: string): 4 | 6 {
  return address.includes(':') ? 6 : 4;
}

function under(name: string, apex: string): boolean {
  return name === apex || name.endsWith(`.${apex}`);
}

export class DnsZones implements DnsAuthority {
  /** The feed as the DNS role holds it; its onChange keeps the name index below. */
  readonly mirror: FeedMirror;
  private readonly names = new Map<string, NameTarget>();
  /** Every name at or above an endpoint name inside the base zone, counted, so an empty non-terminal is NODATA. */
  private readonly nonTerminals = new Map<string, number>();
  private aliveRegions = new Set<string>();
  private shared: SharedAddress[] = [];
  private readonly zones: string[];
  /** Region → the regions tried for its askers, in order: computed once per region, not per question. */
  private readonly orders = new Map<string, string[]>();

  constructor(private readonly options: ZoneOptions) {
    // Longest apex first: a geo zone under the base domain is its own zone.
    this.zones = [options.geoZone, options.baseDomain].filter((z) => z !== '').sort((a, b) => b.length - a.length);
    this.mirror = new FeedMirror({ onChange: (change, previous) => this.indexChange(change, previous) });
  }

  /** The zones' serial: the feed version in force, which grows with every config change. */
  get serial(): number {
    return this.mirror.version;
  }

  /** Presence, read on the role's timer: which regions have a live edge, and the shared addresses they announce. */
  setEdges(edges: readonly EdgeHeartbeat[]): void {
    this.aliveRegions = new Set(edges.map((e) => e.region));
    const seen = new Set<string>();
    const shared: SharedAddress[] = [];
    for (const edge of edges) {
      for (const address of edge.addresses ?? []) {
        if (seen.has(address)) continue;
        seen.add(address);
        shared.push({ address, family: family(address), region: edge.region });
      }
    }
    this.shared = shared;
  }

  answer(question: DnsQuestion, client: DnsClient): DnsResponse {
    const zone = this.zones.find((z) => under(question.name, z));
    if (zone === undefined) return { rcode: 'REFUSED', authoritative: false, answers: [], authorities: [] };
    const geo = zone === this.options.geoZone;
    if (question.name === zone) return this.apex(zone, question.type, geo);
    return geo ? this.geoName(zone, question, client) : this.baseName(zone, question, client);
  }

  // ---- records ---------------------------------------------------------------------------------------------------

  private soa(zone: string, geo: boolean): Answer {
    const minimum = geo ? this.options.geoTtlSeconds : this.options.ttlSeconds;
    return {
      name: zone,
      type: 'SOA',
      ttl: minimum,
      class: 'IN',
      data: {
        mname: this.options.nameservers[0],
        rname: `hostmaster.${this.options.baseDomain}`,
        serial: this.serial % 2 ** 32,
        refresh: SOA_REFRESH,
        retry: SOA_RETRY,
        expire: SOA_EXPIRE,
        minimum,
      },
    };
  }

  private apex(zone: string, type: string, geo: boolean): DnsResponse {
    const ttl = this.options.ttlSeconds;
    if (type === 'SOA') return this.ok([this.soa(zone, geo)]);
    if (type === 'NS') return this.ok(this.options.nameservers.map((ns) => ({ name: zone, type: 'NS', ttl, class: 'IN', data: ns }) as Answer));
    return this.noData(zone, geo);
  }

  private baseName(zone: string, question: DnsQuestion, client: DnsClient): DnsResponse {
    const { name, type } = question;
    const target = this.names.get(name);
    if (target === undefined) {
      // Name servers inside the zone answer with the shared pool, so a delegation to them resolves.
      if (this.options.nameservers.includes(name)) return this.addresses(name, type, this.shared, client, zone, false);
      return this.nonTerminals.has(name) ? this.noData(zone, false) : this.nxDomain(zone, false);
    }
    if (target.kind === 'address') return this.addresses(name, type, [target.address], client, zone, false);
    if (target.kind === 'group' && this.options.geoZone !== '') {
      const geoName = `grp-${target.id}.${this.options.geoZone}`;
      const cname: Answer = { name, type: 'CNAME', ttl: this.options.ttlSeconds, class: 'IN', data: geoName };
      if (type === 'CNAME') return this.ok([cname]);
      // RFC 1034 4.3.2: an authoritative server that also holds the CNAME's target restarts the lookup there.
      const chased = this.geoName(this.options.geoZone, { name: geoName, type }, client);
      return { ...chased, answers: [cname, ...chased.answers], authorities: chased.answers.length > 0 ? [] : chased.authorities, rcode: chased.rcode === 'NXDOMAIN' ? 'NOERROR' : chased.rcode };
    }
    return this.addresses(name, type, this.shared, client, zone, false);
  }

  private geoName(zone: string, question: DnsQuestion, client: DnsClient): DnsResponse {
    const match = /^grp-([1-9][0-9]{0,18})$/.exec(question.name.slice(0, -(zone.length + 1)));
    const group = match ? (this.mirror.get(TOPICS.dedicatedIpGroup, match[1])?.data as DedicatedIpGroupConfig | undefined) : undefined;
    // A pending group is published for the edges but not answered: to a resolver it does not exist yet.
    if (!group || group.status !== 'active') return this.nxDomain(zone, true);
    return this.addresses(question.name, question.type, group.addresses, client, zone, true);
  }

  /**
   * A/AAAA from `pool` for the asker's region: the asker's own region when it has a live edge, else its fallback
   * regions in order, else every region with a live edge, else the whole pool (never an empty answer for a name
   * that has addresses). The ECS scope says the answer holds for the asker's whole subnet (RFC 7871 7.2.1).
   */
  private addresses(name: string, type: string, pool: readonly DedicatedAddressConfig[], client: DnsClient, zone: string, geo: boolean): DnsResponse {
    const want = type === 'A' ? 4 : type === 'AAAA' ? 6 : null;
    if (want === null) return this.noData(zone, geo);
    const candidates = pool.filter((a) => a.family === want);
    if (candidates.length === 0) return this.noData(zone, geo);
    const regions = new Set(candidates.map((a) => a.region));
    const chosen = this.byRegion(candidates, client);
    const ttl = geo ? this.options.geoTtlSeconds : this.options.ttlSeconds;
    const answers = chosen.map((a) => ({ name, type, ttl, class: 'IN', data: a.address }) as Answer);
    // The answer depended on where the asker is only when the pool spans regions.
    const ecsScope = regions.size > 1 && client.subnet ? client.subnet.sourcePrefix : 0;
    return { rcode: 'NOERROR', authoritative: true, answers, authorities: [], ecsScope };
  }

  private byRegion(candidates: DedicatedAddressConfig[], client: DnsClient): DedicatedAddressConfig[] {
    const live = candidates.filter((a) => this.aliveRegions.has(a.region));
    if (live.length === 0) return candidates;
    const asker = this.askerRegion(client);
    let order = this.orders.get(asker);
    if (order === undefined) this.orders.set(asker, (order = regionOrder(this.options.regions, asker)));
    for (const region of order) {
      const here = live.filter((a) => a.region === region);
      if (here.length > 0) return here;
    }
    return live;
  }

  /** The asker's region: from the ECS subnet when the resolver sent one, else from the query's source address. */
  askerRegion(client: DnsClient): string {
    const { regions } = this.options;
    const country = this.options.country(client.subnet ? client.subnet.address : client.address);
    return (country && regions.countries.get(country)) || regions.defaultRegion;
  }

  private ok(answers: Answer[]): DnsResponse {
    return { rcode: 'NOERROR', authoritative: true, answers, authorities: [] };
  }

  /** RFC 2308: the zone's SOA in the authority section lets resolvers cache the negative answer for its MINIMUM. */
  private noData(zone: string, geo: boolean): DnsResponse {
    return { rcode: 'NOERROR', authoritative: true, answers: [], authorities: [this.soa(zone, geo)] };
  }

  private nxDomain(zone: string, geo: boolean): DnsResponse {
    return { rcode: 'NXDOMAIN', authoritative: true, answers: [], authorities: [this.soa(zone, geo)] };
  }

  // ---- the name index, kept by the mirror's changes -------------------------------------------------------------

  private indexChange(change: FeedChange, previous: FeedEntry | undefined): void {
    if (change.topic !== TOPICS.endpoint) return;
    const before = previous?.data as EndpointConfig | undefined;
    const after = change.data as EndpointConfig | null;
    if (before) this.unindex(before.hostname);
    if (after && under(after.hostname, this.options.baseDomain) && after.hostname !== this.options.baseDomain) this.indexName(after);
  }

  private indexName(endpoint: EndpointConfig): void {
    const target: NameTarget = endpoint.dedicated_ip
      ? { kind: 'address', address: endpoint.dedicated_ip }
      : endpoint.dedicated_ip_group_id
        ? { kind: 'group', id: endpoint.dedicated_ip_group_id }
        : { kind: 'shared' };
    if (!this.names.has(endpoint.hostname)) this.countParents(endpoint.hostname, +1);
    this.names.set(endpoint.hostname, target);
  }

  private unindex(hostname: string): void {
    if (!this.names.delete(hostname)) return;
    this.countParents(hostname, -1);
  }

  private countParents(hostname: string, delta: number): void {
    const apex = this.options.baseDomain;
    let name = hostname;
    for (let dot = name.indexOf('.'); dot !== -1 && name !== apex; dot = name.indexOf('.')) {
      name = name.slice(dot + 1);
      if (name === apex) break;
      const n = (this.nonTerminals.get(name) ?? 0) + delta;
      if (n > 0) this.nonTerminals.set(name, n);
      else this.nonTerminals.delete(name);
    }
  }
}
