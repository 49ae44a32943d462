// Which endpoints a dedicated IP serves (docs/dedicated-ips.md "At the edge"): single bindings and group members, kept
// from the feed as it changes, so a connection's local address says in one lookup whether its Host may be served.
import { EventEmitter } from 'node:events';
import type { DedicatedIpGroupConfig, EndpointConfig } from '../shared/snapshot.ts';
import type { EndpointCache } from './endpoint-cache.ts';

interface Binding {
  hostname: string;
  address: string | null;
  groupId: number | null;
}

/** A socket's local address as the feed writes addresses: IPv4-mapped IPv6 (a dual-stack listener) as dotted IPv4. */
export function plainAddress(address: string | undefined): string {
  if (address === undefined) return '';
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}

export interface DedicatedAddressEvents {
  /** The set of dedicated addresses changed (listeners for them may need binding or closing). */
  changed: [];
}

export class DedicatedAddresses extends EventEmitter<DedicatedAddressEvents> {
  /** Endpoint uuid → what it is bound to, for bound endpoints only. */
  private readonly bindings = new Map<string, Binding>();
  private readonly groups = new Map<number, DedicatedIpGroupConfig>();
  /** address → the endpoints (uuid → hostname) it serves; rebuilt from the two maps above after each change. */
  private served = new Map<string, Map<string, string>>();

  constructor(private readonly config: EndpointCache) {
    super();
    for (const endpoint of config.endpoints()) this.setEndpoint(endpoint.uuid, endpoint);
    for (const group of config.dedicatedIpGroups()) this.groups.set(group.id, group);
    this.rebuild();
    config.on('endpoint', (uuid, next) => {
      if (this.setEndpoint(uuid, next)) this.rebuild();
    });
    config.on('dedicatedIpGroup', (id, group) => {
      if (group) this.groups.set(id, group);
      else this.groups.delete(id);
      this.rebuild();
    });
  }

  /** True when no endpoint is bound to a dedicated address: the pipeline then skips the check altogether. */
  get empty(): boolean {
    return this.served.size === 0;
  }

  /** The endpoints `localAddress` serves (uuid → hostname), or null when it is not a dedicated address (shared: all). */
  servedOn(localAddress: string | undefined): ReadonlyMap<string, string> | null {
    if (this.served.size === 0) return null;
    return this.served.get(plainAddress(localAddress)) ?? null;
  }

  /** Every dedicated address with the region whose edges announce it. */
  addresses(): Array<{ address: string; region: string }> {
    const out = new Map<string, string>();
    for (const group of this.groups.values()) for (const a of group.addresses) out.set(a.address, a.region);
    for (const uuid of this.bindings.keys()) {
      const ip = this.config.endpoint(uuid)?.dedicated_ip;
      if (ip) out.set(ip.address, ip.region);
    }
    return [...out].map(([address, region]) => ({ address, region }));
  }

  /** Records an endpoint's binding; true when it changed. */
  private setEndpoint(uuid: string, endpoint: EndpointConfig | null): boolean {
    const before = this.bindings.get(uuid);
    const address = endpoint?.dedicated_ip?.address ?? null;
    const groupId = endpoint?.dedicated_ip_group_id ?? null;
    if (endpoint === null || (address === null && groupId === null)) return this.bindings.delete(uuid);
    if (before && before.address === address && before.groupId === groupId && before.hostname === endpoint.hostname) return false;
    this.bindings.set(uuid, { hostname: endpoint.hostname, address, groupId });
    return true;
  }

  private rebuild(): void {
    const served = new Map<string, Map<string, string>>();
    const add = (address: string, uuid: string, hostname: string) => {
      let endpoints = served.get(address);
      if (!endpoints) served.set(address, (endpoints = new Map()));
      endpoints.set(uuid, hostname);
    };
    // A group address serves nobody until an endpoint binds the group, but it is still dedicated: other names get 421.
    for (const group of this.groups.values()) for (const a of group.addresses) if (!served.has(a.address)) served.set(a.address, new Map());
    for (const [uuid, b] of this.bindings) {
      if (b.address !== null) add(b.address, uuid, b.hostname);
      const group = b.groupId === null ? undefined : this.groups.get(b.groupId);
      for (const a of group?.addresses ?? []) add(a.address, uuid, b.hostname);
    }
    const before = [...this.served.keys()].sort().join();
    this.served = served;
    if ([...served.keys()].sort().join() !== before) this.emit('changed');
  }
}
