// The ephemeral-endpoint janitor: stamps last_active_at for ephemerals whose agents are live (from presence), and
// removes those whose agents have been gone longer than the idle window. Promoted endpoints are never touched.
import type { Logger } from '../shared/log.ts';
import type { PresenceStore } from '../shared/presence.ts';
import type { Database } from '../store/db.ts';
import { findIdleEphemerals, reapIdleEphemeral, touchEphemerals } from '../store/endpoints.ts';

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

export class Janitor {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Database,
    private readonly presence: PresenceStore,
    private readonly options: { intervalMs: number; idleSeconds: number; logger: Logger },
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.sweep(), this.options.intervalMs);
    this.timer.unref();
  }

  /** One sweep now (serialised with the timer's); resolves when it is done. */
  sweep(): Promise<void> {
    this.running = this.running.then(async () => {
      try {
        const r = await sweepEphemerals(this.db, this.presence, this.options.idleSeconds);
        if (r.removed.length > 0) this.options.logger.info({ removed: r.removed }, 'removed idle ephemeral endpoints');
      } catch (err) {
        this.options.logger.warn({ err }, 'janitor sweep skipped');
      }
    });
    return this.running;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }
}
