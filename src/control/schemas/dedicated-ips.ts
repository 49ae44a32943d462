// Request and response shapes of the dedicated IP API (routes/dedicated-ips.ts): the operator's inventory, what an
// account owns, and the endpoint bindings; the row → JSON views behind them. services/dedicated-ips.ts checks the rest.
import { Type } from '@sinclair/typebox';
import { Nullable, Strict, Timestamp } from '../../shared/schema.ts';
import type { DedicatedIpGroupRow, DedicatedIpRow } from '../../store/dedicated-ips.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';

const Int64Id = (description: string) => Type.Integer({ minimum: 1, description });
const Address = Type.String({ minLength: 2, maxLength: 64, description: 'One IPv4 or IPv6 address, no prefix length' });
const Region = Type.String({ minLength: 1, maxLength: 32, description: 'The EDGE_REGION of the edges that announce the address' });
const GroupStatusInput = Type.Union([Type.Literal('pending'), Type.Literal('active')], { description: 'pending: not bindable and not answered yet; active: bindable and answered' });

export const IdParams = Type.Object({ id: Type.String() });
export const EndpointParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }) });

export const DedicatedIpView = Type.Object(
  {
    id: Type.Integer(),
    address: Type.String(),
    family: Type.Union([Type.Literal(4), Type.Literal(6)]),
    region: Type.String(),
    account_id: Type.Integer(),
    group_id: Nullable(Type.Integer({ description: 'The group the address serves in' })),
    endpoint_uuid: Nullable(Type.String({ description: 'The endpoint the address serves alone' })),
    status: Type.Union([Type.Literal('active'), Type.Literal('retired')]),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { description: 'A dedicated IP' },
);

export const GroupView = Type.Object(
  {
    id: Type.Integer(),
    account_id: Type.Integer(),
    name: Type.String(),
    status: Type.Union([Type.Literal('pending'), Type.Literal('active'), Type.Literal('retired')]),
    geo_fqdn: Nullable(Type.String({ description: 'grp-<id>.<geo zone>; null while GeoDNS is off on this server' })),
    regions: Type.Record(Type.String(), Type.Array(Type.String()), { description: 'Per region, the addresses answered to visitors there' }),
    endpoint_count: Type.Integer({ description: 'Endpoints bound to the group now' }),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { description: 'A per-region dedicated IP group' },
);

export const IpCreateBody = Strict({ address: Address, region: Region, account_id: Int64Id('The owning account') });
export const IpUpdateBody = Strict({ region: Type.Optional(Region), account_id: Type.Optional(Int64Id('The new owning account')) });
export const IpListQuery = Type.Object({
  account_id: Type.Optional(Type.Integer({ minimum: 1 })),
  include_retired: Type.Optional(Type.Boolean({ description: 'Retired rows too (default false)' })),
});

const Addresses = Type.Array(Address, { maxItems: 256, description: 'The member addresses, each a registered dedicated IP of the account' });
export const GroupCreateBody = Strict({
  account_id: Int64Id('The owning account'),
  name: Type.String({ minLength: 1, maxLength: 100 }),
  status: Type.Optional(GroupStatusInput),
  addresses: Type.Optional(Addresses),
});
export const GroupUpdateBody = Strict({ name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })), status: Type.Optional(GroupStatusInput), addresses: Type.Optional(Addresses) });
export const GroupListQuery = Type.Object({ account_id: Type.Optional(Type.Integer({ minimum: 1 })) });

export const GroupBindBody = Strict({ group_id: Type.Integer({ minimum: 1, description: 'An active group owned by the endpoint’s account (int64, > 0)' }) });
export const GroupBindingView = Type.Object({ endpoint_id: Type.Integer(), group_id: Type.Integer(), geo_fqdn: Type.String() }, { description: 'SPEC: endpoint_id, group_id, geo_fqdn' });
export const GroupBindingDetail = Type.Object({ ...GroupBindingView.properties, group: GroupView });

export const IpBindBody = Strict({ dedicated_ip_id: Type.Integer({ minimum: 1, description: 'A live dedicated IP owned by the endpoint’s account, in no group' }) });
export const IpBindingView = Type.Object({ endpoint_id: Type.Integer(), dedicated_ip_id: Type.Integer(), address: Type.String(), region: Type.String() });

export const BindErrors = { ...ErrorResponses, 409: ErrorBody, 502: ErrorBody };
export const AdminErrors = { ...ErrorResponses, 409: ErrorBody };

export function dedicatedIpView(ip: DedicatedIpRow) {
  return {
    id: ip.id,
    address: ip.address,
    family: ip.family,
    region: ip.region,
    account_id: ip.account_id,
    group_id: ip.group_id,
    endpoint_uuid: ip.endpoint_uuid,
    status: ip.status,
    created_at: iso(ip.created_at),
    updated_at: iso(ip.updated_at),
  };
}

export function groupView(group: DedicatedIpGroupRow, geoFqdn: string | null) {
  const regions: Record<string, string[]> = {};
  for (const a of group.addresses) (regions[a.region] ??= []).push(a.address);
  return {
    id: group.id,
    account_id: group.account_id,
    name: group.name,
    status: group.status,
    geo_fqdn: geoFqdn,
    regions,
    endpoint_count: group.endpoint_count,
    created_at: iso(group.created_at),
    updated_at: iso(group.updated_at),
  };
}
