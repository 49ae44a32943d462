// The ephemeral-endpoint janitor: stamps last_active_at for ephemerals whose agents are live (from presence), and
// removes those whose agents have been gone longer than the idle window. Promoted endpoints are never touched.
import type { Logger } from '../shared/log.ts';
import type { PresenceStore } from '../shared/presence.ts';
import type { Database } from '../store/db.ts';
import { findIdleEphemerals, reapIdleEphemeral, touchEphemerals } from '../store/endpoints.ts';
import { PeriodicJob } from './periodic.ts';

export interface SweepResult {
  touched: number;
  removed: string[];
}

export async function sweepEphemerals(db: Database, presence: PresenceStore, idleSeconds: number): Promise<SweepResult> {
  // Presence unreadable (Redis down) means "unknown", not "no agents": the sweep is skipped by the throw.
  const edges = await presence.edges();
  const live = [...new Set(edges.flatMap((e) => e.agents.map((a) => a.endpoint)))];
  const touched = await touchEphemerals(db, live);
  const removed: string[] = [];
  for (const candidate of await findIdleEphemerals(db, idleSeconds, live)) {
    if (await db.transaction((tx) => reapIdleEphemeral(tx, candidate, idleSeconds))) removed.push(candidate.uuid);
  }
  return { touched, removed };
}

/** The janitor as a worker job: one sweep every `intervalMs`. */
export function ephemeralJanitor(db: Database, presence: PresenceStore, options: { intervalMs: number; idleSeconds: number; logger: Logger }): PeriodicJob {
  return new PeriodicJob('janitor sweep', options.intervalMs, options.logger, async () => {
    const { removed } = await sweepEphemerals(db, presence, options.idleSeconds);
    return removed.length > 0 ? { msg: 'removed idle ephemeral endpoints', fields: { removed } } : null;
  });
}
