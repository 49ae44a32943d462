// Publishes an endpoint's data-plane view to the change feed: everything an edge needs to serve it, nothing else.
// Every write that changes what an edge must do calls this inside its transaction (or publishes a deletion).
import type { Queryable } from './db.ts';
import { recordChange } from './feed.ts';

export const ENDPOINT_TOPIC = 'endpoint';

/** The edge-facing record of an endpoint, as carried by the feed (topic "endpoint", key = uuid). */
export interface EndpointFeedRecord {
  id: number;
  uuid: string;
  user_id: number;
  account_id: number;
  hostname: string;
  status: string;
  ephemeral: boolean;
  dedicated_tcp_port: number | null;
  dedicated_udp_port: number | null;
  certificate_id: number | null;
  mtls_mode: string;
  mtls_ca_pem: string | null;
  capture_enabled: boolean;
  capture_level: string | null;
  paused: boolean;
}

export async function publishEndpoint(tx: Queryable, endpointId: number): Promise<void> {
  const { rows } = await tx.query<EndpointFeedRecord & { paused_at: Date | null }>(
    `SELECT id, uuid::text AS uuid, user_id, account_id, hostname, status, ephemeral, dedicated_tcp_port, dedicated_udp_port,
            certificate_id, mtls_mode, mtls_ca_pem, capture_enabled, capture_level, paused_at
     FROM endpoints WHERE id = $1`,
    [endpointId],
  );
  const row = rows[0];
  if (!row) return;
  const { paused_at, ...record } = row;
  await recordChange(tx, ENDPOINT_TOPIC, row.uuid, { ...record, paused: paused_at !== null } satisfies EndpointFeedRecord);
}

export async function publishEndpointDeleted(tx: Queryable, uuid: string): Promise<void> {
  await recordChange(tx, ENDPOINT_TOPIC, uuid, null);
}
