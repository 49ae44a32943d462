// Endpoints: the persistent routing entries connecting a public hostname to a user's agents.
// Quotas and port uniqueness are enforced by locks and constraints inside the writing transaction.
import type { Queryable } from './db.ts';

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
  status: 'active' | 'provisioning' | 'error' | 'disabled';
  mtls_mode: 'disabled' | 'optional' | 'required';
  mtls_ca_pem: string | null;
  ephemeral: boolean;
  device_fingerprint: string | null;
  last_active_at: Date | null;
  dedicated_tcp_port: number | null;
  dedicated_udp_port: number | null;
  certificate_id: number | null;
  capture_enabled: boolean;
  capture_level: 'full' | 'metadata' | 'off' | null;
  paused_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** Columns with the uuid as text, so both drivers hand back the same string. */
export const ENDPOINT_COLUMNS = `id, uuid::text AS uuid, user_id, account_id, domain_id, subdomain, hostname, protocol, is_custom, status,
  mtls_mode, mtls_ca_pem, ephemeral, device_fingerprint, last_active_at, dedicated_tcp_port, dedicated_udp_port, certificate_id,
  capture_enabled, capture_level, paused_at, created_at, updated_at`;

export async function findEndpointByUuid(db: Queryable, uuid: string, opts: { forUpdate?: boolean } = {}): Promise<EndpointRow | null> {
  const { rows } = await db.query<EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM endpoints WHERE uuid = $1${opts.forUpdate ? ' FOR UPDATE' : ''}`, [uuid]);
  return rows[0] ?? null;
}
