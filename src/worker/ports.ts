// The dedicated-port activator: a `provisioning` endpoint becomes `active` once fresh edge heartbeats show every
// port it was assigned bound on at least one edge that has applied the assignment. It never turns one back.
import type { Logger } from '../shared/log.ts';
import type { EdgeHeartbeat, PresenceStore } from '../shared/presence.ts';
import type { Database } from '../store/db.ts';
import { activateProvisioned, findProvisioningEndpoints, type ProvisioningEndpoint } from '../store/endpoint-status.ts';
import { PeriodicJob } from './periodic.ts';

/** True when each assigned port of `endpoint` is listed by an edge whose applied config includes the assignment. */
export function portsOpen(endpoint: ProvisioningEndpoint, edges: readonly EdgeHeartbeat[]): boolean {
  const wanted: Array<['tcp' | 'udp', number]> = [];
  if (endpoint.dedicated_tcp_port !== null) wanted.push(['tcp', endpoint.dedicated_tcp_port]);
  if (endpoint.dedicated_udp_port !== null) wanted.push(['udp', endpoint.dedicated_udp_port]);
  if (wanted.length === 0) return false;
  // An edge behind the endpoint's feed version may still list a port from an earlier assignment (cleared and
  // assigned again): only edges that applied this config count. Versions are the feed's, so no clocks are compared.
  const current = edges.filter((e) => e.version >= endpoint.feed_version);
  return wanted.every(([protocol, port]) =>
    current.some((e) => (e.ports ?? []).some((p) => p.endpoint === endpoint.uuid && p.protocol === protocol && p.port === port)),
  );
}

/** One pass: returns the uuids turned active. */
export async function activateDedicatedPorts(db: Database, presence: PresenceStore): Promise<string[]> {
  const candidates = await findProvisioningEndpoints(db);
  if (candidates.length === 0) return [];
  // Presence unreadable (Redis down) throws: "unknown" must not read as "no port open", nor as "all open".
  const edges = await presence.edges();
  const activated: string[] = [];
  for (const candidate of candidates) {
    if (!portsOpen(candidate, edges)) continue;
    if (await db.transaction((tx) => activateProvisioned(tx, candidate))) activated.push(candidate.uuid);
  }
  return activated;
}

/** The activator as a worker job: one pass every `intervalMs`. */
export function portActivator(db: Database, presence: PresenceStore, options: { intervalMs: number; logger: Logger }): PeriodicJob {
  return new PeriodicJob('dedicated port activation', options.intervalMs, options.logger, async () => {
    const activated = await activateDedicatedPorts(db, presence);
    return activated.length > 0 ? { msg: 'dedicated ports open: endpoints active', fields: { endpoints: activated } } : null;
  });
}
