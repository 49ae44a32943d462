// Endpoints: the persistent routing entries connecting a public hostname to a user's agents.
// Quotas and port uniqueness are enforced by locks and constraints inside the writing transaction.
import type { Queryable } from './db.ts';
import { touch } from './feed-changes.ts';
import { applicationUuidsOfEndpoint, touchApplication } from './applications.ts';

export interface EndpointRow {
  id: number;
  uuid: string;
  user_id: number;
  account_id: number;
  domain_id: number | null;
  subdomain: string;
  hostname: string;
  protocol: 'unified' | 'http' | 'tcp' | 'udp';
  is_custom: boolean;
  status: EndpointStatus;
  mtls_mode: 'disabled' | 'optional' | 'required';
  mtls_ca_pem: string | null;
  ephemeral: boolean;
  device_fingerprint: string | null;
  last_active_at: Date | null;
  dedicated_tcp_port: number | null;
  dedicated_udp_port: number | null;
  certificate_id: number | null;
  capture_enabled: boolean;
  capture_level: CaptureLevel | null;
  paused_at: Date | null;
  /** When set, requests go to this origin instead of agents (unless a routing rule picks agents). */
  origin_url: string | null;
  /** The single dedicated IP serving this endpoint, or null (docs/dedicated-ips.md); never set with a group. */
  dedicated_ip_id: number | null;
  /** The per-region dedicated IP group serving this endpoint, or null; never set with a single IP. */
  dedicated_ip_group_id: number | null;
  /** Labels for the owner's own use (docs/api.md "Tags"); never in the feed. */
  tags: string[];
  created_at: Date;
  updated_at: Date;
}

export const ENDPOINT_STATUSES = ['active', 'provisioning', 'error', 'disabled'] as const;
export type EndpointStatus = (typeof ENDPOINT_STATUSES)[number];

export const CAPTURE_LEVELS = ['full', 'metadata', 'off'] as const;
export type CaptureLevel = (typeof CAPTURE_LEVELS)[number];

/** Columns with the uuid as text, so both drivers hand back the same string. */
export const ENDPOINT_COLUMNS = `id, uuid::text AS uuid, user_id, account_id, domain_id, subdomain, hostname, protocol, is_custom, status,
  mtls_mode, mtls_ca_pem, ephemeral, device_fingerprint, last_active_at, dedicated_tcp_port, dedicated_udp_port, certificate_id,
  capture_enabled, capture_level, paused_at, origin_url, dedicated_ip_id, dedicated_ip_group_id, tags, created_at, updated_at`;

export async function findEndpointByUuid(db: Queryable, uuid: string, opts: { forUpdate?: boolean } = {}): Promise<EndpointRow | null> {
  const { rows } = await db.query<EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM endpoints WHERE uuid = $1${opts.forUpdate ? ' FOR UPDATE' : ''}`, [uuid]);
  return rows[0] ?? null;
}

// ---------------------------------------------------------------------------------------------------------------
// Quota bookkeeping. Quotas are read-then-write, so they are only safe under a lock every competing writer takes:
// the owner's users row (per-user permanent quota, dedicated-port count) and, for organizations, the accounts row
// (organization endpoint limit). Writers take them in that order, user then account then endpoint, so they never
// deadlock one another. Under READ COMMITTED each later statement sees what the previous lock holder committed.
// The locks are FOR NO KEY UPDATE, not FOR UPDATE: they serialise the quota writers among themselves but leave the
// KEY SHARE locks of foreign-key inserts alone. With FOR UPDATE, an endpoint create (user, then the account's key
// share for its row) and an alert-rule create (account, then the user's key share) deadlocked on PostgreSQL.
// ---------------------------------------------------------------------------------------------------------------

/** Locks the user row that serialises one user's quota-checked writes; false when the user does not exist. */
export async function lockUserForQuota(tx: Queryable, userId: number): Promise<boolean> {
  const { rows } = await tx.query('SELECT id FROM users WHERE id = $1 FOR NO KEY UPDATE', [userId]);
  return rows.length > 0;
}

/** Locks an organization's account row, so members creating at once cannot overrun the organization limit. */
export async function lockAccountForQuota(tx: Queryable, accountId: number): Promise<void> {
  await tx.query('SELECT id FROM accounts WHERE id = $1 FOR NO KEY UPDATE', [accountId]);
}

/** Permanent endpoints a user owns, in every account: what the per-user permanent quota counts. */
export async function countPermanentEndpoints(db: Queryable, userId: number): Promise<number> {
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM endpoints WHERE user_id = $1 AND NOT ephemeral', [userId]);
  return rows[0].n;
}

/** Permanent endpoints in one account: what the organization endpoint limit counts (ephemerals come and go). */
export async function countPermanentAccountEndpoints(db: Queryable, accountId: number): Promise<number> {
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM endpoints WHERE account_id = $1 AND NOT ephemeral', [accountId]);
  return rows[0].n;
}

/** Dedicated ports (TCP and UDP each count one) on a user's endpoints, leaving out one endpoint being rewritten. */
export async function countDedicatedPorts(db: Queryable, userId: number, exceptEndpointId: number): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT (count(dedicated_tcp_port) + count(dedicated_udp_port))::int AS n FROM endpoints WHERE user_id = $1 AND id <> $2`,
    [userId, exceptEndpointId],
  );
  return rows[0].n;
}

// ---------------------------------------------------------------------------------------------------------------
// Writes. Each one touches what it changed (feed-changes.ts), published at the caller's commit, so no writer can forget to tell edges.
// ---------------------------------------------------------------------------------------------------------------

export interface NewEndpoint {
  userId: number;
  accountId: number;
  domainId: number | null;
  subdomain: string;
  hostname: string;
  isCustom: boolean;
  ephemeral?: boolean;
  deviceFingerprint?: string | null;
  /** Validated by the API; none when omitted. */
  tags?: readonly string[];
}

/**
 * Inserts an endpoint, or returns null when its hostname is taken. ON CONFLICT keeps the transaction usable
 * (a unique violation would abort it), so a caller can retry another generated name inside the same transaction.
 * Ephemerals start with last_active_at set: the janitor measures idleness from it (docs/api.md: tracked only for them).
 */
export async function insertEndpoint(tx: Queryable, e: NewEndpoint): Promise<EndpointRow | null> {
  const ephemeral = e.ephemeral ?? false;
  const { rows } = await tx.query<EndpointRow>(
    `INSERT INTO endpoints (user_id, account_id, domain_id, subdomain, hostname, is_custom, ephemeral, device_fingerprint, last_active_at, tags)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, CASE WHEN $7 THEN now() END, $9::text[])
     ON CONFLICT (hostname) DO NOTHING
     RETURNING ${ENDPOINT_COLUMNS}`,
    [e.userId, e.accountId, e.domainId, e.subdomain, e.hostname, e.isCustom, ephemeral, ephemeral ? (e.deviceFingerprint ?? null) : null, e.tags ?? []],
  );
  const row = rows[0];
  if (row) touch(tx, { endpoint: row.id });
  return row ?? null;
}

/** How many generated names to try before giving up; with 8e9 names even a crowded platform needs one or two. */
export const NAME_ATTEMPTS = 8;

/**
 * Inserts an endpoint under a generated name, retrying on a hostname collision. `name()` yields a fresh subdomain,
 * `hostname(sub)` the FQDN it makes. Throws after NAME_ATTEMPTS collisions (the transaction is then rolled back).
 */
export async function insertWithGeneratedName(
  tx: Queryable,
  e: Omit<NewEndpoint, 'subdomain' | 'hostname' | 'isCustom'>,
  name: () => string,
  hostname: (subdomain: string) => string,
): Promise<EndpointRow> {
  for (let attempt = 0; attempt < NAME_ATTEMPTS; attempt++) {
    const subdomain = name();
    const row = await insertEndpoint(tx, { ...e, subdomain, hostname: hostname(subdomain), isCustom: false });
    if (row) return row;
  }
  throw new Error(`no free generated subdomain after ${NAME_ATTEMPTS} attempts`);
}

/**
 * An ephemeral endpoint on the platform domain, as an agent's one-shot flow creates it: no quota applies (the
 * janitor reaps it when idle), and promoting it later is what charges it to the permanent quota.
 * Subdomain generation lives with the control API's word list, so the caller passes its generator.
 */
export async function createEphemeralEndpoint(
  tx: Queryable,
  input: { userId: number; accountId: number; deviceFingerprint?: string | null; tags?: readonly string[]; baseDomain: string; generateSubdomain: () => string },
): Promise<EndpointRow> {
  return insertWithGeneratedName(
    tx,
    { userId: input.userId, accountId: input.accountId, domainId: null, ephemeral: true, deviceFingerprint: input.deviceFingerprint, tags: input.tags },
    input.generateSubdomain,
    (subdomain) => `${subdomain}.${input.baseDomain}`,
  );
}

/** Makes an ephemeral endpoint permanent: the flag, the device fingerprint and idle tracking all go (docs/api.md). */
export async function promoteEndpoint(tx: Queryable, id: number): Promise<EndpointRow> {
  const { rows } = await tx.query<EndpointRow>(
    `UPDATE endpoints SET ephemeral = false, device_fingerprint = NULL, last_active_at = NULL, updated_at = now()
     WHERE id = $1 RETURNING ${ENDPOINT_COLUMNS}`,
    [id],
  );
  touch(tx, { endpoint: id });
  return rows[0];
}

/**
 * Deletes an endpoint. Its ports and hostname are free once this commits (they live on the row); tables that hang
 * off endpoints reference it ON DELETE CASCADE, so they go with it. Edges drop it when the deletion reaches them.
 */
export async function deleteEndpoint(tx: Queryable, endpoint: Pick<EndpointRow, 'id' | 'uuid'>): Promise<boolean> {
  // Its applications go with it (ON DELETE CASCADE): their feed entries are withdrawn at commit.
  for (const uuid of await applicationUuidsOfEndpoint(tx, endpoint.id)) touchApplication(tx, uuid);
  const { rows } = await tx.query<{ certificate_id: number | null }>('DELETE FROM endpoints WHERE id = $1 RETURNING certificate_id', [endpoint.id]);
  if (rows.length === 0) return false;
  touch(tx, { endpointDeleted: endpoint.uuid });
  // Edges hold a certificate only while some endpoint serves it: touched, it is withdrawn if this was the last.
  if (rows[0].certificate_id !== null) touch(tx, { certificate: rows[0].certificate_id });
  return true;
}

/**
 * Writes both dedicated ports and the status. The unique indexes refuse a port another endpoint holds: the caller
 * maps that violation (which aborts the transaction) to a 409; a pre-check alone would race.
 */
export async function setDedicatedPorts(
  tx: Queryable,
  id: number,
  ports: { tcp: number | null; udp: number | null; status: EndpointStatus },
): Promise<EndpointRow> {
  const { rows } = await tx.query<EndpointRow>(
    `UPDATE endpoints SET dedicated_tcp_port = $2, dedicated_udp_port = $3, status = $4, updated_at = now()
     WHERE id = $1 RETURNING ${ENDPOINT_COLUMNS}`,
    [id, ports.tcp, ports.udp, ports.status],
  );
  touch(tx, { endpoint: id });
  return rows[0];
}

export async function setCapture(tx: Queryable, id: number, capture: { enabled: boolean; level: CaptureLevel | null }): Promise<void> {
  await tx.query('UPDATE endpoints SET capture_enabled = $2, capture_level = $3, updated_at = now() WHERE id = $1', [id, capture.enabled, capture.level]);
  touch(tx, { endpoint: id });
}

/**
 * Replaces the endpoint's tags. Not touched for the feed: tags are a label for the API's clients and edges never see
 * them (the endpoint's feed entry names its columns, and tags are not among them).
 */
export async function setTags(tx: Queryable, id: number, tags: readonly string[]): Promise<EndpointRow> {
  const { rows } = await tx.query<EndpointRow>(
    `UPDATE endpoints SET tags = $2::text[], updated_at = CASE WHEN tags = $2::text[] THEN updated_at ELSE now() END
     WHERE id = $1 RETURNING ${ENDPOINT_COLUMNS}`,
    [id, tags],
  );
  return rows[0];
}

/** Pauses (read-only, over plan limits) or resumes an endpoint; pausing twice keeps the first timestamp. */
export async function setPaused(tx: Queryable, id: number, paused: boolean): Promise<EndpointRow> {
  const { rows } = await tx.query<EndpointRow>(
    `UPDATE endpoints SET paused_at = CASE WHEN $2 THEN coalesce(paused_at, now()) END, updated_at = now()
     WHERE id = $1 RETURNING ${ENDPOINT_COLUMNS}`,
    [id, paused],
  );
  touch(tx, { endpoint: id });
  return rows[0];
}

// ---------------------------------------------------------------------------------------------------------------
// Listing.
// ---------------------------------------------------------------------------------------------------------------

export interface EndpointFilter {
  /** Only this account's endpoints (non-admin callers); undefined = every account (admins). */
  accountId?: number;
  userId?: number;
  domainId?: number;
  status?: EndpointStatus;
  /** Substring of the subdomain, matched literally: LIKE wildcards in it are escaped. */
  q?: string;
  ephemeralOnly?: boolean;
  /** Only endpoints carrying this tag. */
  tag?: string;
}

/** `%`, `_` and the escape character itself match only themselves once escaped (ESCAPE '\' below). */
export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** One page, newest first (id descending is stable under inserts at the head), and the total over all pages. */
export async function listEndpoints(db: Queryable, filter: EndpointFilter, limit: number, offset: number): Promise<{ rows: EndpointRow[]; total: number }> {
  const where: string[] = [];
  const params: unknown[] = [];
  const add = (sql: (p: string) => string, value: unknown) => {
    params.push(value);
    where.push(sql(`$${params.length}`));
  };
  if (filter.accountId !== undefined) add((p) => `account_id = ${p}`, filter.accountId);
  if (filter.userId !== undefined) add((p) => `user_id = ${p}`, filter.userId);
  if (filter.domainId !== undefined) add((p) => `domain_id = ${p}`, filter.domainId);
  if (filter.status !== undefined) add((p) => `status = ${p}`, filter.status);
  if (filter.q) add((p) => `subdomain LIKE ${p} ESCAPE '\\'`, `%${escapeLike(filter.q)}%`);
  if (filter.ephemeralOnly) where.push('ephemeral');
  if (filter.tag !== undefined) add((p) => `tags @> ARRAY[${p}::text]`, filter.tag);
  const clause = where.length ? `WHERE ${where.join(' AND ')}` : '';
  const total = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM endpoints ${clause}`, params);
  const page = await db.query<EndpointRow>(
    `SELECT ${ENDPOINT_COLUMNS} FROM endpoints ${clause} ORDER BY id DESC LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
    [...params, limit, offset],
  );
  return { rows: page.rows, total: total.rows[0].n };
}

/** Records that agents of these ephemeral endpoints were seen connected (idle tracking is for ephemerals only). */
export async function touchEphemerals(db: Queryable, uuids: readonly string[]): Promise<number> {
  if (uuids.length === 0) return 0;
  const res = await db.query('UPDATE endpoints SET last_active_at = now() WHERE ephemeral AND uuid::text = ANY($1::text[])', [uuids]);
  return res.rowCount;
}

/** Ephemeral endpoints with no agent seen since `idleSeconds` ago (or since creation, if never): janitor candidates. */
export async function findIdleEphemerals(db: Queryable, idleSeconds: number, live: readonly string[]): Promise<Array<Pick<EndpointRow, 'id' | 'uuid'>>> {
  const { rows } = await db.query<Pick<EndpointRow, 'id' | 'uuid'>>(
    `SELECT id, uuid::text AS uuid FROM endpoints
     WHERE ephemeral AND NOT (uuid::text = ANY($2::text[]))
       AND coalesce(last_active_at, created_at) < now() - make_interval(secs => $1)
     ORDER BY id LIMIT 500`,
    [idleSeconds, live],
  );
  return rows;
}

/**
 * Removes an idle ephemeral endpoint, re-checking under the row lock that it is still ephemeral and idle: a promote
 * or an agent seen since the candidate list was read wins over the janitor.
 */
export async function reapIdleEphemeral(tx: Queryable, endpoint: Pick<EndpointRow, 'id' | 'uuid'>, idleSeconds: number): Promise<boolean> {
  const { rows } = await tx.query(
    `SELECT 1 FROM endpoints WHERE id = $1 AND ephemeral AND coalesce(last_active_at, created_at) < now() - make_interval(secs => $2) FOR UPDATE`,
    [endpoint.id, idleSeconds],
  );
  if (rows.length === 0) return false;
  return deleteEndpoint(tx, endpoint);
}

/** Sets or clears the endpoint's origin URL and tells edges. */
export async function setOrigin(tx: Queryable, id: number, originUrl: string | null): Promise<EndpointRow> {
  const { rows } = await tx.query<EndpointRow>(`UPDATE endpoints SET origin_url = $2, updated_at = now() WHERE id = $1 RETURNING ${ENDPOINT_COLUMNS}`, [id, originUrl]);
  touch(tx, { endpoint: id });
  return rows[0];
}
