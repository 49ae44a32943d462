// Pointing an endpoint at an origin URL as a domain operation: the URL made canonical (private and loopback origins
// need operator consent), then stored under the endpoint's row lock; edges learn of it through the change feed.
import { setOrigin } from '../../store/endpoints.ts';
import type { EndpointRow } from '../../store/endpoints.ts';
import type { Caller } from '../caller.ts';
import { endpointForCaller } from '../endpoint-access.ts';
import type { ControlDeps } from '../http.ts';
import { parseOriginUrl } from '../validation.ts';

export function endpointOriginService({ db, config }: Pick<ControlDeps, 'db' | 'config'>) {
  return {
    /** Forwards the endpoint to `url` instead of agents; null clears it. */
    async set(caller: Caller, uuid: string, raw: string | null): Promise<EndpointRow> {
      const url = raw === null ? null : parseOriginUrl(raw, config.originAllowPrivate);
      return db.transaction(async (tx) => {
        const endpoint = await endpointForCaller(tx, caller, uuid, { forUpdate: true });
        return setOrigin(tx, endpoint.id, url);
      });
    },
  };
}
