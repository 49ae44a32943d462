// Dedicated IPs and per-region groups as domain operations (docs/dedicated-ips.md): the operator's inventory, what an
// account owns, and binding an endpoint to one address or to a group, with the DNS repoint that makes a binding real.
import ipaddr from 'ipaddr.js';
import { fail, invalid } from '../../shared/errors.ts';
import type { Plan } from '../../shared/plans.ts';
import { isUuid } from '../../shared/schema.ts';
import { findAccountById } from '../../store/accounts.ts';
import type { Queryable } from '../../store/db.ts';
import * as store from '../../store/dedicated-ips.ts';
import type { Binding, DedicatedIpGroupRow, DedicatedIpRow, GroupStatus } from '../../store/dedicated-ips.ts';
import { findEndpointByUuid, type EndpointRow } from '../../store/endpoints.ts';
import type { Caller } from '../caller.ts';
import { canSee, requireEndpointEntitlement } from '../endpoint-access.ts';
import { int64Param, type ControlDeps } from '../http.ts';

/** The entitlement every binding needs (SPEC: 403 when the plan lacks it). */
const FEATURE = 'dedicated_ips';

/**
 * Publishes endpoint names to an operator's primary by RFC 2136 (src/dns/update-client.ts), when one is configured.
 * Each call throws when the update was refused or timed out; the caller then reverts the binding (502).
 */
export interface DnsRepoint {
  /** True when `hostname` lies in the operator's zone: names outside it are published by the embedded server only. */
  covers(hostname: string): boolean;
  /** The hostname becomes a CNAME to `target`. */
  point(hostname: string, target: string): Promise<void>;
  /** The hostname's CNAME is removed. */
  clear(hostname: string): Promise<void>;
}

// ---------------------------------------------------------------------------------------------------------------
// Input checks
// ---------------------------------------------------------------------------------------------------------------

const REGION = /^[a-z0-9][a-z0-9-]{0,31}$/;

/** One unicast address in canonical text (IPv4 dotted, IPv6 RFC 5952 lower-case); IPv4-mapped IPv6 becomes IPv4. */
export function canonicalAddress(field: string, raw: string): { address: string; family: 4 | 6 } {
  const text = raw.trim();
  if (!ipaddr.isValid(text) || text.includes('/') || text.includes('%')) throw invalid(field, 'must be one IPv4 or IPv6 address (no prefix length, no zone)');
  // ipaddr.js also takes "1", "0x7f.1" and other classful IPv4 forms; an inventory wants the dotted quad written out.
  if (!text.includes(':') && !ipaddr.IPv4.isValidFourPartDecimal(text)) throw invalid(field, 'IPv4 addresses are written as four decimal parts (203.0.113.10)');
  let ip = ipaddr.parse(text);
  if (ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress()) ip = (ip as ipaddr.IPv6).toIPv4Address();
  const range = ip.range();
  if (['unspecified', 'multicast', 'broadcast'].includes(range)) throw invalid(field, `a ${range} address cannot be dedicated to an endpoint`);
  return { address: ip.kind() === 'ipv4' ? ip.toString() : (ip as ipaddr.IPv6).toRFC5952String(), family: ip.kind() === 'ipv4' ? 4 : 6 };
}

function region(raw: string): string {
  const value = raw.trim().toLowerCase();
  if (!REGION.test(value)) throw invalid('region', 'a region name: 1-32 of a-z 0-9 -, starting with a letter or digit (the EDGE_REGION of the edges that announce it)');
  return value;
}

function groupName(raw: string): string {
  const value = raw.trim();
  if (value === '' || value.length > 100 || /[\x00-\x1f\x7f]/.test(value)) throw invalid('name', '1-100 characters, no control characters');
  return value;
}

/**
 * A body's int64 id; ids beyond 2^53 lose precision in JSON and none exists, so they are replaced by 0, which no row
 * has, and the lookup answers 404 like any other missing row.
 */
function bodyId(value: number): number {
  return Number.isSafeInteger(value) ? value : 0;
}

function pathId(value: string, name: string): number {
  const id = int64Param(value, name);
  return Number.isSafeInteger(id) ? id : 0;
}

// ---------------------------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------------------------

export interface IpCreate {
  address: string;
  region: string;
  account_id: number;
}

export interface GroupCreate {
  account_id: number;
  name: string;
  status?: 'pending' | 'active';
  addresses?: string[];
}

export interface GroupUpdate {
  name?: string;
  status?: 'pending' | 'active';
  addresses?: string[];
}

/** What a group binding answers (SPEC: endpoint_id, group_id, geo_fqdn). */
export interface GroupBinding {
  endpoint: EndpointRow;
  groupId: number;
  geoFqdn: string;
}

export function dedicatedIpService({ db, config, dnsRepoint }: Pick<ControlDeps, 'db' | 'config' | 'dnsRepoint'>) {
  const plans: Record<string, Plan> = config.plans;
  const geoZone = config.dns.geoZone;

  /** The GeoDNS name of a group: grp-<id>.<geo zone>; null while GeoDNS is off. */
  const geoFqdn = (groupId: number): string | null => (geoZone ? `grp-${groupId}.${geoZone}` : null);

  async function accountExists(q: Queryable, id: number): Promise<void> {
    if (!(await findAccountById(q, bodyId(id)))) throw fail.not_found('Account not found', { field: 'account_id', reason: 'no such account' });
  }

  /** The live dedicated IPs `addresses` name, each free to join `groupId` of `accountId`. */
  async function membersFor(q: Queryable, groupId: number | null, accountId: number, addresses: string[]): Promise<number[]> {
    if (addresses.length > 256) throw invalid('addresses', 'at most 256 addresses per group', { limit: 256, count: addresses.length });
    const ids: number[] = [];
    for (const [i, raw] of addresses.entries()) {
      const { address } = canonicalAddress(`addresses[${i}]`, raw);
      const ip = await store.findLiveAddress(q, address, { forUpdate: true });
      if (!ip) throw invalid(`addresses[${i}]`, `${address} is not a registered dedicated IP (POST /v1/admin/dedicated-ips first)`);
      if (ip.account_id !== accountId) throw fail.dedicated_ip_in_use(`${address} belongs to another account`, { address, account_id: ip.account_id });
      if (ip.endpoint_uuid !== null) throw fail.dedicated_ip_in_use(`${address} is bound to endpoint ${ip.endpoint_uuid}`, { address, endpoint_id: ip.endpoint_uuid });
      if (ip.group_id !== null && ip.group_id !== groupId) throw fail.dedicated_ip_in_use(`${address} is in group ${ip.group_id}`, { address, group_id: ip.group_id });
      if (!ids.includes(ip.id)) ids.push(ip.id);
    }
    return ids;
  }

  /**
   * The endpoint a binding names, locked: 404 missing, 403 another tenant's (SPEC: this operation says 403, where
   * other endpoint operations hide it as 404), 409 paused, and the plan of the endpoint's account must be entitled.
   */
  async function bindableEndpoint(tx: Queryable, caller: Caller, uuid: string): Promise<EndpointRow> {
    if (!isUuid(uuid)) throw fail.invalid_id('Invalid endpoint id', { field: 'id', reason: 'the endpoint id must be a UUID' });
    const endpoint = await findEndpointByUuid(tx, uuid.toLowerCase(), { forUpdate: true });
    if (!endpoint) throw fail.not_found('Endpoint not found');
    if (!canSee(caller, endpoint)) throw fail.forbidden('The endpoint belongs to another account');
    if (endpoint.paused_at) throw fail.quota_paused();
    await requireEndpointEntitlement(tx, caller, plans, endpoint, FEATURE);
    return endpoint;
  }

  /** The endpoint a read names: 404 missing, 403 another tenant's, as the binding operations answer. */
  async function visibleEndpoint(caller: Caller, uuid: string): Promise<EndpointRow> {
    if (!isUuid(uuid)) throw fail.invalid_id('Invalid endpoint id', { field: 'id', reason: 'the endpoint id must be a UUID' });
    const endpoint = await findEndpointByUuid(db, uuid.toLowerCase());
    if (!endpoint) throw fail.not_found('Endpoint not found');
    if (!canSee(caller, endpoint)) throw fail.forbidden('The endpoint belongs to another account');
    return endpoint;
  }

  /**
   * Moves the operator's DNS for `endpoint` from what `before` published to what `after` does: a CNAME to the group's
   * name for a group, nothing otherwise (a single IP and the shared addresses are the embedded server's answers).
   */
  async function repoint(endpoint: EndpointRow, before: Binding, after: Binding): Promise<void> {
    if (!dnsRepoint || !dnsRepoint.covers(endpoint.hostname)) return;
    const target = after.groupId !== null ? geoFqdn(after.groupId) : null;
    if (target !== null) await dnsRepoint.point(endpoint.hostname, target);
    else if (before.groupId !== null) await dnsRepoint.clear(endpoint.hostname);
  }

  /**
   * Writes a binding and publishes it to the operator's DNS while the endpoint's row is locked. A refused or timed-out
   * update rolls the transaction back, so the binding stays exactly what it was (502, safe to retry); a commit that
   * fails after the update succeeded puts the DNS back to the previous binding, best effort.
   */
  async function rebind(caller: Caller, uuid: string, decide: (tx: Queryable, endpoint: EndpointRow) => Promise<Binding>): Promise<EndpointRow> {
    let published: { endpoint: EndpointRow; before: Binding; after: Binding } | null = null;
    try {
      return await db.transaction(async (tx) => {
        const endpoint = await bindableEndpoint(tx, caller, uuid);
        const before: Binding = { ipId: endpoint.dedicated_ip_id, groupId: endpoint.dedicated_ip_group_id };
        const after = await decide(tx, endpoint);
        await store.setBinding(tx, endpoint.id, after);
        try {
          await repoint(endpoint, before, after);
        } catch (err) {
          throw fail.dns_repoint_failed(undefined, { reason: err instanceof Error ? err.message : String(err) });
        }
        published = { endpoint, before, after };
        return { ...endpoint, dedicated_ip_id: after.ipId, dedicated_ip_group_id: after.groupId };
      });
    } catch (err) {
      const done = published as { endpoint: EndpointRow; before: Binding; after: Binding } | null;
      if (done) await repoint(done.endpoint, done.after, done.before).catch(() => {});
      throw err;
    }
  }

  return {
    geoFqdn,

    // --- the operator's inventory (admin) ---------------------------------------------------------------------

    async createIp(body: IpCreate): Promise<DedicatedIpRow> {
      const { address, family } = canonicalAddress('address', body.address);
      const where = region(body.region);
      return db.transaction(async (tx) => {
        await accountExists(tx, body.account_id);
        const held = await store.findLiveAddress(tx, address);
        if (held) throw fail.dedicated_ip_in_use(`${address} is already registered (id ${held.id})`, { address, id: held.id });
        return store.insertDedicatedIp(tx, { address, family, region: where, accountId: body.account_id });
      });
    },

    async listIps(filter: { account_id?: number; include_retired?: boolean }): Promise<DedicatedIpRow[]> {
      return store.listDedicatedIps(db, { accountId: filter.account_id, includeRetired: filter.include_retired });
    },

    async getIp(idText: string): Promise<DedicatedIpRow> {
      const ip = await store.findDedicatedIp(db, pathId(idText, 'id'));
      if (!ip) throw fail.not_found('Dedicated IP not found');
      return ip;
    },

    /** A new region or owner; an address that serves an endpoint or a group keeps its owner (409). */
    async updateIp(idText: string, body: { region?: string; account_id?: number }): Promise<DedicatedIpRow> {
      const id = pathId(idText, 'id');
      const where = body.region === undefined ? undefined : region(body.region);
      return db.transaction(async (tx) => {
        const ip = await store.findDedicatedIp(tx, id, { forUpdate: true });
        if (!ip) throw fail.not_found('Dedicated IP not found');
        if (ip.status === 'retired') throw fail.conflict('A retired dedicated IP cannot change; register the address again');
        if (body.account_id !== undefined && body.account_id !== ip.account_id) {
          await accountExists(tx, body.account_id);
          if (ip.endpoint_uuid !== null) throw fail.dedicated_ip_in_use(`${ip.address} is bound to endpoint ${ip.endpoint_uuid}`, { endpoint_id: ip.endpoint_uuid });
          if (ip.group_id !== null) throw fail.dedicated_ip_in_use(`${ip.address} is in group ${ip.group_id}`, { group_id: ip.group_id });
        }
        return store.updateDedicatedIp(tx, ip, { region: where, accountId: body.account_id });
      });
    },

    /** Retires an address (it leaves its group); one that serves an endpoint alone is detached first (409). */
    async retireIp(idText: string): Promise<DedicatedIpRow> {
      const id = pathId(idText, 'id');
      return db.transaction(async (tx) => {
        const ip = await store.findDedicatedIp(tx, id, { forUpdate: true });
        if (!ip) throw fail.not_found('Dedicated IP not found');
        if (ip.status === 'retired') return ip;
        if (ip.endpoint_uuid !== null) throw fail.dedicated_ip_in_use(`${ip.address} is bound to endpoint ${ip.endpoint_uuid}; detach it first`, { endpoint_id: ip.endpoint_uuid });
        return store.retireDedicatedIp(tx, ip);
      });
    },

    async createGroup(body: GroupCreate): Promise<DedicatedIpGroupRow> {
      const name = groupName(body.name);
      return db.transaction(async (tx) => {
        await accountExists(tx, body.account_id);
        const members = await membersFor(tx, null, body.account_id, body.addresses ?? []);
        const id = await store.insertGroup(tx, { accountId: body.account_id, name, status: body.status ?? 'pending' });
        if (members.length > 0) await store.setGroupMembers(tx, id, members);
        return (await store.findGroup(tx, id))!;
      });
    },

    async listGroups(filter: { account_id?: number }): Promise<DedicatedIpGroupRow[]> {
      return store.listGroups(db, { accountId: filter.account_id });
    },

    async getGroup(idText: string): Promise<DedicatedIpGroupRow> {
      const group = await store.findGroup(db, pathId(idText, 'id'));
      if (!group) throw fail.not_found('Dedicated IP group not found');
      return group;
    },

    /** Name, status (pending/active) and the exact member list; a group that serves endpoints stays active (409). */
    async updateGroup(idText: string, body: GroupUpdate): Promise<DedicatedIpGroupRow> {
      const id = pathId(idText, 'id');
      const name = body.name === undefined ? undefined : groupName(body.name);
      return db.transaction(async (tx) => {
        const group = await store.findGroup(tx, id, { forUpdate: true });
        if (!group) throw fail.not_found('Dedicated IP group not found');
        if (group.status === 'retired') throw fail.conflict('A retired group cannot change; create a new one');
        if (body.status === 'pending' && group.endpoint_count > 0) {
          throw fail.conflict(`Group ${id} serves ${group.endpoint_count} endpoint(s); detach them before setting it pending`, { endpoint_count: group.endpoint_count });
        }
        if (body.addresses !== undefined) await store.setGroupMembers(tx, id, await membersFor(tx, id, group.account_id, body.addresses));
        if (name !== undefined || body.status !== undefined) await store.updateGroup(tx, id, { name, status: body.status as GroupStatus | undefined });
        return (await store.findGroup(tx, id))!;
      });
    },

    /** Retires a group: its addresses are released and its name stops answering; one that serves endpoints is 409. */
    async retireGroup(idText: string): Promise<DedicatedIpGroupRow> {
      const id = pathId(idText, 'id');
      return db.transaction(async (tx) => {
        const group = await store.findGroup(tx, id, { forUpdate: true });
        if (!group) throw fail.not_found('Dedicated IP group not found');
        if (group.status === 'retired') return group;
        if (group.endpoint_count > 0) {
          throw fail.conflict(`Group ${id} serves ${group.endpoint_count} endpoint(s); detach them first`, { endpoint_count: group.endpoint_count });
        }
        await store.setGroupMembers(tx, id, []);
        await store.updateGroup(tx, id, { status: 'retired' });
        return (await store.findGroup(tx, id))!;
      });
    },

    // --- what an account owns ---------------------------------------------------------------------------------

    async ownIps(caller: Caller): Promise<DedicatedIpRow[]> {
      return store.listDedicatedIps(db, { accountId: caller.account.id });
    },

    async ownGroups(caller: Caller): Promise<DedicatedIpGroupRow[]> {
      return store.listGroups(db, { accountId: caller.account.id });
    },

    // --- endpoint bindings ------------------------------------------------------------------------------------

    /** SPEC "POST /v1/endpoints/{uuid}/dedicated-ip-group": clears a single-IP binding; the DNS repoint or a 502 revert. */
    async bindGroup(caller: Caller, uuid: string, body: { group_id: number }): Promise<GroupBinding> {
      if (!caller.isAdmin) caller.requireEntitlement(FEATURE);
      const zone = geoZone;
      if (!zone) throw fail.geodns_not_configured();
      const groupId = bodyId(body.group_id);
      const endpoint = await rebind(caller, uuid, async (tx, endpoint) => {
        const group = await store.findGroup(tx, groupId, { forUpdate: true });
        if (!group) throw fail.not_found('Dedicated IP group not found');
        if (group.account_id !== endpoint.account_id) throw fail.forbidden('The dedicated IP group belongs to another account');
        if (group.status !== 'active') throw fail.group_not_active(`Dedicated IP group ${group.id} is ${group.status}`, { status: group.status });
        return { ipId: null, groupId: group.id };
      });
      return { endpoint, groupId, geoFqdn: `grp-${groupId}.${zone}` };
    },

    async groupBinding(caller: Caller, uuid: string): Promise<{ endpoint: EndpointRow; group: DedicatedIpGroupRow }> {
      const endpoint = await visibleEndpoint(caller, uuid);
      const group = endpoint.dedicated_ip_group_id === null ? null : await store.findGroup(db, endpoint.dedicated_ip_group_id);
      if (!group) throw fail.not_found('No dedicated IP group is bound to this endpoint');
      return { endpoint, group };
    },

    /** Detaches the group: the endpoint goes back to the shared addresses; the CNAME leaves the operator's zone. */
    async unbindGroup(caller: Caller, uuid: string): Promise<void> {
      await rebind(caller, uuid, async (_tx, endpoint) => {
        if (endpoint.dedicated_ip_group_id === null) throw fail.not_found('No dedicated IP group is bound to this endpoint');
        return { ipId: null, groupId: null };
      });
    },

    /** One address for this endpoint alone; clears a group binding (and its CNAME). */
    async bindIp(caller: Caller, uuid: string, body: { dedicated_ip_id: number }): Promise<{ endpoint: EndpointRow; ip: DedicatedIpRow }> {
      if (!caller.isAdmin) caller.requireEntitlement(FEATURE);
      const bound: { ip?: DedicatedIpRow } = {};
      const endpoint = await rebind(caller, uuid, async (tx, endpoint) => {
        const ip = await store.findDedicatedIp(tx, bodyId(body.dedicated_ip_id), { forUpdate: true });
        if (!ip || ip.status === 'retired') throw fail.not_found('Dedicated IP not found');
        if (ip.account_id !== endpoint.account_id) throw fail.forbidden('The dedicated IP belongs to another account');
        if (ip.group_id !== null) throw fail.dedicated_ip_in_use(`${ip.address} is in group ${ip.group_id}`, { group_id: ip.group_id });
        if (ip.endpoint_uuid !== null && ip.endpoint_uuid !== endpoint.uuid) {
          throw fail.dedicated_ip_in_use(`${ip.address} is bound to endpoint ${ip.endpoint_uuid}`, { endpoint_id: ip.endpoint_uuid });
        }
        bound.ip = ip;
        return { ipId: ip.id, groupId: null };
      });
      return { endpoint, ip: bound.ip! };
    },

    async ipBinding(caller: Caller, uuid: string): Promise<{ endpoint: EndpointRow; ip: DedicatedIpRow }> {
      const endpoint = await visibleEndpoint(caller, uuid);
      const ip = endpoint.dedicated_ip_id === null ? null : await store.findDedicatedIp(db, endpoint.dedicated_ip_id);
      if (!ip) throw fail.not_found('No dedicated IP is bound to this endpoint');
      return { endpoint, ip };
    },

    async unbindIp(caller: Caller, uuid: string): Promise<void> {
      await rebind(caller, uuid, async (_tx, endpoint) => {
        if (endpoint.dedicated_ip_id === null) throw fail.not_found('No dedicated IP is bound to this endpoint');
        return { ipId: null, groupId: null };
      });
    },
  };
}
