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

export interface ActivationPass {
  /** Uuids turned active. */
  activated: string[];
  /** Provisioning endpoints whose ports these heartbeats did not show open (or whose write lost a race). */
  waiting: ProvisioningEndpoint[];
}

/** One pass over the store's provisioning endpoints, judged against `edges` (fresh heartbeats). */
export async function activateDedicatedPorts(db: Database, edges: readonly EdgeHeartbeat[]): Promise<ActivationPass> {
  const pass: ActivationPass = { activated: [], waiting: [] };
  for (const candidate of await findProvisioningEndpoints(db)) {
    if (portsOpen(candidate, edges) && (await db.transaction((tx) => activateProvisioned(tx, candidate)))) pass.activated.push(candidate.uuid);
    else pass.waiting.push(candidate);
  }
  return pass;
}

/** Every (endpoint, protocol, port) some fresh heartbeat lists as bound. */
function listedPorts(edges: readonly EdgeHeartbeat[]): Set<string> {
  return new Set(edges.flatMap((e) => (e.ports ?? []).map((p) => `${p.endpoint} ${p.protocol} ${p.port}`)));
}

export interface PortActivatorOptions {
  /** How often presence is read for newly bound ports (EDGE_PORT_ACTIVATION_INTERVAL_MS). */
  intervalMs: number;
  /** The longest time between two full passes whatever the heartbeats show (EDGE_JANITOR_INTERVAL_MS). */
  sweepMs: number;
  logger: Logger;
  now?: () => number;
}

/**
 * The activator as a worker job. It follows the heartbeats: every `intervalMs` it reads presence (one read, no
 * database) and runs a pass when a heartbeat lists a port no heartbeat listed at its previous read, or shows open
 * the ports of an endpoint the last pass left waiting (an edge that caught up with the assignment's version). An
 * edge reports at the moment it binds, so an endpoint turns active about one interval after its port is bound.
 * A full pass still runs every `sweepMs`, for what no heartbeat change reveals (a port cleared and assigned again
 * between two reads, a write that lost a race to a concurrent change).
 */
export function portActivator(db: Database, presence: PresenceStore, options: PortActivatorOptions): PeriodicJob {
  const now = options.now ?? Date.now;
  let listed = new Set<string>();
  let waiting: ProvisioningEndpoint[] = [];
  let lastPass = -Infinity;
  return new PeriodicJob('dedicated port activation', options.intervalMs, options.logger, async () => {
    // Presence unreadable (Redis down) throws: "unknown" must not read as "no port open", nor as "all open".
    const edges = await presence.edges();
    const seen = listedPorts(edges);
    const newlyBound = [...seen].some((entry) => !listed.has(entry));
    const due =
      newlyBound || waiting.some((candidate) => portsOpen(candidate, edges)) || now() - lastPass >= options.sweepMs;
    if (!due) {
      listed = seen;
      return null;
    }
    const startedAt = now();
    const pass = await activateDedicatedPorts(db, edges);
    // Remembered only after a pass that went through: a failed one is retried at the next read.
    listed = seen;
    waiting = pass.waiting;
    lastPass = startedAt;
    return pass.activated.length > 0 ? { msg: 'dedicated ports open: endpoints active', fields: { endpoints: pass.activated } } : null;
  });
}
