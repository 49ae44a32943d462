// Dedicated IPs, per-region groups and the endpoint bindings to them (docs/dedicated-ips.md). Group writes publish the
// group's feed entry; binding writes touch the endpoint, so edges and the DNS role learn both at the caller's commit.
import type { Queryable } from './db.ts';
import { touch } from './feed-changes.ts';
import { TOPICS, type DedicatedIpGroupConfig } from '../shared/snapshot.ts';

export const GROUP_STATUSES = ['pending', 'active', 'retired'] as const;
export type GroupStatus = (typeof GROUP_STATUSES)[number];

export interface DedicatedIpRow {
  id: number;
  address: string;
  family: 4 | 6;
  region: string;
  account_id: number;
  group_id: number | null;
  status: 'active' | 'retired';
  /** The endpoint this address serves alone (uuid), when bound singly. */
  endpoint_uuid: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface DedicatedIpGroupRow {
  id: number;
  account_id: number;
  name: string;
  status: GroupStatus;
  /** Live member addresses, ordered by region then address. */
  addresses: Array<{ id: number; address: string; family: 4 | 6; region: string }>;
  /** Endpoints bound to the group now. */
  endpoint_count: number;
  created_at: Date;
  updated_at: Date;
}

const IP_COLUMNS = `i.id, i.address, i.family, i.region, i.account_id, i.group_id, i.status, i.created_at, i.updated_at,
  (SELECT e.uuid::text FROM endpoints e WHERE e.dedicated_ip_id = i.id) AS endpoint_uuid`;

const GROUP_COLUMNS = `g.id, g.account_id, g.name, g.status, g.created_at, g.updated_at,
  COALESCE((SELECT json_agg(json_build_object('id', i.id, 'address', i.address, 'family', i.family, 'region', i.region) ORDER BY i.region, i.address)
    FROM dedicated_ips i WHERE i.group_id = g.id AND i.status = 'active'), '[]'::json) AS addresses,
  (SELECT count(*)::int FROM endpoints e WHERE e.dedicated_ip_group_id = g.id) AS endpoint_count`;

function groupRow(row: DedicatedIpGroupRow): DedicatedIpGroupRow {
  if (typeof row.addresses === 'string') row.addresses = JSON.parse(row.addresses) as DedicatedIpGroupRow['addresses'];
  return row;
}

// ---------------------------------------------------------------------------------------------------------------
// Dedicated IPs
// ---------------------------------------------------------------------------------------------------------------

export async function listDedicatedIps(db: Queryable, filter: { accountId?: number; includeRetired?: boolean } = {}): Promise<DedicatedIpRow[]> {
  const where: string[] = [];
  const params: unknown[] = [];
  if (filter.accountId !== undefined) where.push(`i.account_id = $${params.push(filter.accountId)}`);
  if (!filter.includeRetired) where.push("i.status = 'active'");
  const clause = where.length ? `WHERE ${where.join(' AND ')}` : '';
  const { rows } = await db.query<DedicatedIpRow>(`SELECT ${IP_COLUMNS} FROM dedicated_ips i ${clause} ORDER BY i.id`, params);
  return rows;
}

/**
 * One address. `forUpdate` locks the row first and reads it in a second statement: under READ COMMITTED a locking
 * read that waited sees the row's new version but its subqueries (which endpoint holds it) keep the old snapshot.
 */
export async function findDedicatedIp(db: Queryable, id: number, opts: { forUpdate?: boolean } = {}): Promise<DedicatedIpRow | null> {
  if (opts.forUpdate) await db.query('SELECT 1 FROM dedicated_ips WHERE id = $1 FOR UPDATE', [id]);
  const { rows } = await db.query<DedicatedIpRow>(`SELECT ${IP_COLUMNS} FROM dedicated_ips i WHERE i.id = $1`, [id]);
  return rows[0] ?? null;
}

/** The live row holding `address`, if any (retired rows free their address); `forUpdate` as findDedicatedIp. */
export async function findLiveAddress(db: Queryable, address: string, opts: { forUpdate?: boolean } = {}): Promise<DedicatedIpRow | null> {
  const { rows } = await db.query<{ id: number }>("SELECT id FROM dedicated_ips WHERE address = $1 AND status = 'active'", [address]);
  return rows[0] ? findDedicatedIp(db, rows[0].id, opts) : null;
}

export async function insertDedicatedIp(tx: Queryable, input: { address: string; family: 4 | 6; region: string; accountId: number }): Promise<DedicatedIpRow> {
  const { rows } = await tx.query<{ id: number }>('INSERT INTO dedicated_ips (address, family, region, account_id) VALUES ($1, $2, $3, $4) RETURNING id', [
    input.address,
    input.family,
    input.region,
    input.accountId,
  ]);
  return (await findDedicatedIp(tx, rows[0].id))!;
}

/**
 * Moves an address to another region or account. Its group (if any) is republished: the group's answers name regions.
 * The caller has checked that an address bound to an endpoint or in a group keeps its account.
 */
export async function updateDedicatedIp(tx: Queryable, ip: DedicatedIpRow, change: { region?: string; accountId?: number }): Promise<DedicatedIpRow> {
  await tx.query('UPDATE dedicated_ips SET region = COALESCE($2, region), account_id = COALESCE($3, account_id), updated_at = now() WHERE id = $1', [
    ip.id,
    change.region ?? null,
    change.accountId ?? null,
  ]);
  if (ip.group_id !== null) touchGroup(tx, ip.group_id);
  return (await findDedicatedIp(tx, ip.id))!;
}

/** Retires an address: out of its group, answered by nobody, the address free for a new row. Unbound by the caller. */
export async function retireDedicatedIp(tx: Queryable, ip: DedicatedIpRow): Promise<DedicatedIpRow> {
  await tx.query("UPDATE dedicated_ips SET status = 'retired', group_id = NULL, updated_at = now() WHERE id = $1", [ip.id]);
  if (ip.group_id !== null) touchGroup(tx, ip.group_id);
  return (await findDedicatedIp(tx, ip.id))!;
}

// ---------------------------------------------------------------------------------------------------------------
// Groups
// ---------------------------------------------------------------------------------------------------------------

export async function listGroups(db: Queryable, filter: { accountId?: number } = {}): Promise<DedicatedIpGroupRow[]> {
  const params: unknown[] = [];
  const clause = filter.accountId !== undefined ? `WHERE g.account_id = $${params.push(filter.accountId)}` : '';
  const { rows } = await db.query<DedicatedIpGroupRow>(`SELECT ${GROUP_COLUMNS} FROM dedicated_ip_groups g ${clause} ORDER BY g.id`, params);
  return rows.map(groupRow);
}

export async function findGroup(db: Queryable, id: number, opts: { forUpdate?: boolean } = {}): Promise<DedicatedIpGroupRow | null> {
  if (opts.forUpdate) await db.query('SELECT 1 FROM dedicated_ip_groups WHERE id = $1 FOR UPDATE', [id]);
  const { rows } = await db.query<DedicatedIpGroupRow>(`SELECT ${GROUP_COLUMNS} FROM dedicated_ip_groups g WHERE g.id = $1`, [id]);
  return rows[0] ? groupRow(rows[0]) : null;
}

export async function insertGroup(tx: Queryable, input: { accountId: number; name: string; status: GroupStatus }): Promise<number> {
  const { rows } = await tx.query<{ id: number }>('INSERT INTO dedicated_ip_groups (account_id, name, status) VALUES ($1, $2, $3) RETURNING id', [
    input.accountId,
    input.name,
    input.status,
  ]);
  touchGroup(tx, rows[0].id);
  return rows[0].id;
}

export async function updateGroup(tx: Queryable, id: number, change: { name?: string; status?: GroupStatus }): Promise<void> {
  await tx.query('UPDATE dedicated_ip_groups SET name = COALESCE($2, name), status = COALESCE($3, status), updated_at = now() WHERE id = $1', [
    id,
    change.name ?? null,
    change.status ?? null,
  ]);
  touchGroup(tx, id);
}

/** Makes `ipIds` the group's members exactly: others leave it, these join. The caller checked each is free and the group's. */
export async function setGroupMembers(tx: Queryable, groupId: number, ipIds: number[]): Promise<void> {
  await tx.query('UPDATE dedicated_ips SET group_id = NULL, updated_at = now() WHERE group_id = $1 AND NOT (id = ANY($2::bigint[]))', [groupId, ipIds]);
  await tx.query('UPDATE dedicated_ips SET group_id = $1, updated_at = now() WHERE id = ANY($2::bigint[]) AND group_id IS DISTINCT FROM $1', [groupId, ipIds]);
  touchGroup(tx, groupId);
}

/** A group's edge and DNS view: published while it is active or pending (a pending group answers nobody yet); null once retired. */
export async function groupRecord(tx: Queryable, id: number): Promise<DedicatedIpGroupConfig | null> {
  const group = await findGroup(tx, id);
  if (!group || group.status === 'retired') return null;
  return {
    id: group.id,
    account_id: group.account_id,
    status: group.status,
    addresses: group.addresses.map(({ address, family, region }) => ({ address, family, region })),
  };
}

function touchGroup(tx: Queryable, id: number): void {
  touch(tx, { topic: TOPICS.dedicatedIpGroup, key: String(id), build: (q) => groupRecord(q, id) });
}

// ---------------------------------------------------------------------------------------------------------------
// Bindings
// ---------------------------------------------------------------------------------------------------------------

/** What serves an endpoint's address: nothing dedicated, one address, or a group. Never both (the table's CHECK). */
export type Binding = { ipId: number | null; groupId: number | null };

/** Sets the endpoint's binding exactly (clearing the other kind) and republishes the endpoint. Caller holds its row lock. */
export async function setBinding(tx: Queryable, endpointId: number, binding: Binding): Promise<void> {
  await tx.query('UPDATE endpoints SET dedicated_ip_id = $2, dedicated_ip_group_id = $3, updated_at = now() WHERE id = $1', [endpointId, binding.ipId, binding.groupId]);
  touch(tx, { endpoint: endpointId });
}
