// Endpoint status written by the worker: `provisioning` endpoints whose dedicated ports edges report open become
// `active`. The read and the conditional write are separate so the worker compares them against presence in between.
import type { Queryable } from './db.ts';
import { ENDPOINT_TOPIC } from './endpoint-feed.ts';
import { touch } from './feed-changes.ts';

export interface ProvisioningEndpoint {
  id: number;
  uuid: string;
  dedicated_tcp_port: number | null;
  dedicated_udp_port: number | null;
  /**
   * The feed version of the endpoint's current config. An edge whose heartbeat carries this version or a later one
   * has applied the assignment, so its port list speaks about these ports and not about an older assignment.
   * It doubles as an optimistic-concurrency token for activateProvisioned().
   */
  feed_version: number;
}

/** `provisioning` endpoints that hold at least one dedicated port, oldest first, at most `limit` per call. */
export async function findProvisioningEndpoints(db: Queryable, limit = 1_000): Promise<ProvisioningEndpoint[]> {
  const { rows } = await db.query<ProvisioningEndpoint>(
    `SELECT e.id, e.uuid::text AS uuid, e.dedicated_tcp_port, e.dedicated_udp_port, f.version AS feed_version
     FROM endpoints e
     JOIN feed_entries f ON f.topic = $1 AND f.key = e.uuid::text
     WHERE e.status = 'provisioning' AND (e.dedicated_tcp_port IS NOT NULL OR e.dedicated_udp_port IS NOT NULL)
     ORDER BY e.id LIMIT $2`,
    [ENDPOINT_TOPIC, limit],
  );
  return rows;
}

/**
 * Turns one endpoint `active` and touches it (published at the caller's commit) only if nothing about it changed since
 * findProvisioningEndpoints() read it: any config write republishes the endpoint under a new feed version, so a
 * port reassigned (or the endpoint disabled) in between makes this a no-op, and the next sweep judges afresh.
 * Returns whether it changed the endpoint.
 */
export async function activateProvisioned(tx: Queryable, endpoint: Pick<ProvisioningEndpoint, 'id' | 'feed_version'>): Promise<boolean> {
  const { rows } = await tx.query<{ id: number }>(
    `UPDATE endpoints e SET status = 'active', updated_at = now()
     WHERE e.id = $1 AND e.status = 'provisioning'
       AND EXISTS (SELECT 1 FROM feed_entries f WHERE f.topic = $2 AND f.key = e.uuid::text AND f.version = $3)
     RETURNING e.id`,
    [endpoint.id, ENDPOINT_TOPIC, endpoint.feed_version],
  );
  if (rows.length === 0) return false;
  touch(tx, { endpoint: endpoint.id });
  return true;
}
