// What presence says, for the control API: the agents serving an endpoint now, and every live edge with the config
// version it applied next to the latest committed one (is a change everywhere yet?).
import { tunnelsOf, type EdgeHeartbeat } from '../../shared/presence.ts';
import { currentVersion } from '../../store/feed.ts';
import type { Caller } from '../caller.ts';
import { endpointForCaller } from '../endpoint-access.ts';
import type { ControlDeps } from '../http.ts';

export function presenceService({ db, presence }: Pick<ControlDeps, 'db' | 'presence'>) {
  return {
    /** The endpoint's live agents on every edge; the route has checked endpoints:read. */
    async tunnels(caller: Caller, endpointUuid: string): ReturnType<typeof tunnelsOf> {
      const endpoint = await endpointForCaller(db, caller, endpointUuid);
      return tunnelsOf(presence, endpoint.uuid);
    },

    /** Every live edge by node id, with the latest committed config version (admins only). */
    async edges(caller: Caller): Promise<{ version: number; edges: EdgeHeartbeat[] }> {
      caller.requireAdmin();
      const [version, edges] = await Promise.all([currentVersion(db), presence.edges()]);
      return { version, edges: edges.sort((a, b) => a.node.localeCompare(b.node)) };
    },
  };
}
