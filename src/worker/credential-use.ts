// last_used_at of basic users, visitor tokens and RBAC clients, from the credential uses edges report in their heartbeats:
// edges never write the store, so this job gathers what every live edge saw and applies it in one batch per pass.
import type { Logger } from '../shared/log.ts';
import { MAX_CREDENTIAL_USE_ENTRIES, type EdgeHeartbeat, type PresenceStore } from '../shared/presence.ts';
import type { Database } from '../store/db.ts';
import { recordClientUse } from '../store/rbac-clients.ts';
import { recordCredentialUse } from '../store/visitor-auth.ts';
import { PeriodicJob } from './periodic.ts';

type Kind = 'basicUsers' | 'tokens' | 'rbacClients';
const KINDS: readonly Kind[] = ['basicUsers', 'tokens', 'rbacClients'];

/** A credential id as the snapshot writes it (the decimal row id); anything else is ignored. */
const ID = /^[1-9][0-9]{0,15}$/;
/** An RBAC client's password or token (docs/rbac.md): the use is the client's, whichever map reports it. */
const CLIENT_ID = /^rbac-client:([1-9][0-9]{0,15})$/;

/**
 * The latest use of each credential across edges. Maps are read only up to the bound an edge should keep, so one
 * misbehaving edge cannot make a pass unbounded; unparsable ids and times are skipped.
 */
export function latestUses(edges: readonly EdgeHeartbeat[]): Record<Kind, Map<number, number>> {
  const out: Record<Kind, Map<number, number>> = { basicUsers: new Map(), tokens: new Map(), rbacClients: new Map() };
  for (const edge of edges) {
    const use = edge.credential_use;
    if (!use) continue;
    for (const [kind, map] of [
      ['basicUsers', use.basic_users],
      ['tokens', use.tokens],
    ] as const) {
      if (!map || typeof map !== 'object') continue;
      let n = 0;
      for (const [id, at] of Object.entries(map)) {
        if (++n > MAX_CREDENTIAL_USE_ENTRIES) break;
        const time = typeof at === 'string' ? Date.parse(at) : NaN;
        if (Number.isNaN(time)) continue;
        const client = CLIENT_ID.exec(id);
        if (!client && !ID.test(id)) continue;
        const into = client ? out.rbacClients : out[kind];
        const key = Number(client ? client[1] : id);
        if ((into.get(key) ?? -Infinity) < time) into.set(key, time);
      }
    }
  }
  return out;
}

export interface CredentialUseRecorder {
  /** One pass: reads presence, writes what is newer than the last pass wrote; resolves with the rows updated. */
  pass(): Promise<number>;
}

/**
 * Edges repeat every use in each heartbeat until they restart; what this recorder already wrote is remembered, so a
 * pass sends only uses that moved forward (the store's GREATEST keeps a late or repeated one harmless anyway).
 */
export function credentialUseRecorder(db: Database, presence: PresenceStore): CredentialUseRecorder {
  const written: Record<Kind, Map<number, number>> = { basicUsers: new Map(), tokens: new Map(), rbacClients: new Map() };
  return {
    async pass() {
      // Presence unreadable (Redis down) throws: the pass is skipped and the next one catches up.
      const latest = latestUses(await presence.edges());
      const batch: Record<Kind, Array<readonly [number, Date]>> = { basicUsers: [], tokens: [], rbacClients: [] };
      for (const kind of KINDS) {
        for (const [id, at] of latest[kind]) if ((written[kind].get(id) ?? -Infinity) < at) batch[kind].push([id, new Date(at)]);
      }
      if (KINDS.every((kind) => batch[kind].length === 0)) return 0;
      const updated = (await recordCredentialUse(db, batch)) + (await recordClientUse(db, batch.rbacClients));
      for (const kind of KINDS) {
        // Ids of credentials that are gone stay out of memory: only what edges still report is kept.
        const next = new Map<number, number>();
        for (const [id, at] of latest[kind]) next.set(id, at);
        written[kind] = next;
      }
      return updated;
    },
  };
}

/** The recorder as a worker job: one pass every `intervalMs`. */
export function credentialUseJob(db: Database, presence: PresenceStore, options: { intervalMs: number; logger: Logger }): PeriodicJob {
  const recorder = credentialUseRecorder(db, presence);
  return new PeriodicJob('credential use', options.intervalMs, options.logger, async () => {
    const updated = await recorder.pass();
    return updated > 0 ? { msg: 'recorded visitor credential use', fields: { updated } } : null;
  });
}
