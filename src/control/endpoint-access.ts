// Finding an endpoint on behalf of a caller: admins see every endpoint, everyone else only those of the active
// account. Anything not visible is a 404, the same as a missing one (SPEC.md: same status on purpose).
import { fail } from '../shared/errors.ts';
import { isUuid } from '../shared/schema.ts';
import type { Queryable } from '../store/db.ts';
import { findEndpointByUuid, type EndpointRow } from '../store/endpoints.ts';
import type { Caller } from './caller.ts';

export function canSee(caller: Caller, endpoint: Pick<EndpointRow, 'account_id'>): boolean {
  return caller.isAdmin || endpoint.account_id === caller.account.id;
}

/** Loads the endpoint named by a path uuid; 400 for a malformed uuid, 404 when missing or not the caller's. */
export async function endpointForCaller(db: Queryable, caller: Caller, uuid: string, opts: { forUpdate?: boolean } = {}): Promise<EndpointRow> {
  if (!isUuid(uuid)) throw fail.invalid_id('Invalid endpoint id', 'the endpoint id must be a UUID');
  const endpoint = await findEndpointByUuid(db, uuid.toLowerCase(), opts);
  if (!endpoint || !canSee(caller, endpoint)) throw fail.not_found('Endpoint not found');
  return endpoint;
}
