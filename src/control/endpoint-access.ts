// Finding an endpoint on behalf of a caller: admins see every endpoint, everyone else only those of the active
// account. Anything not visible is a 404, the same as a missing one (docs/api.md: same status on purpose).
import { fail } from '../shared/errors.ts';
import type { Entitlement, Plan } from '../shared/plans.ts';
import { isUuid } from '../shared/schema.ts';
import { findAccountById, type AccountRow } from '../store/accounts.ts';
import type { Queryable } from '../store/db.ts';
import { findEndpointByUuid, type EndpointRow } from '../store/endpoints.ts';
import type { Caller } from './caller.ts';

export function canSee(caller: Caller, endpoint: Pick<EndpointRow, 'account_id'>): boolean {
  return caller.isAdmin || endpoint.account_id === caller.account.id;
}

/**
 * Loads the endpoint named by a path uuid; 400 for a malformed uuid, 404 when missing or not the caller's.
 * `writable`: the endpoint is about to change its settings, so it is row-locked and a paused endpoint (over plan
 * limits, read-only) is 409 quota_paused.
 */
export async function endpointForCaller(db: Queryable, caller: Caller, uuid: string, opts: { forUpdate?: boolean; writable?: boolean } = {}): Promise<EndpointRow> {
  if (!isUuid(uuid)) throw fail.invalid_id('Invalid endpoint id', { field: 'id', reason: 'the endpoint id must be a UUID' });
  const endpoint = await findEndpointByUuid(db, uuid.toLowerCase(), { forUpdate: opts.forUpdate || opts.writable });
  if (!endpoint || !canSee(caller, endpoint)) throw fail.not_found('Endpoint not found');
  if (opts.writable && endpoint.paused_at) throw fail.quota_paused();
  return endpoint;
}

/** The endpoint a read names: endpoints:read is checked first (403), then the endpoint as endpointForCaller loads it. */
export async function readableEndpoint(db: Queryable, caller: Caller, uuid: string): Promise<EndpointRow> {
  caller.requirePermission('endpoints:read');
  return endpointForCaller(db, caller, uuid);
}

export type PlanAccount = Pick<AccountRow, 'id' | 'kind' | 'plan'>;

/**
 * The account an endpoint lives in and its plan, which decide entitlements and quotas for writes to the endpoint:
 * the caller's own, except for admins acting on another account, where that account's plan applies.
 */
export async function endpointAccountPlan(db: Queryable, caller: Caller, plans: Record<string, Plan>, accountId: number): Promise<{ account: PlanAccount; plan: Plan }> {
  if (accountId === caller.account.id) return { account: caller.account, plan: caller.plan };
  const account = await findAccountById(db, accountId);
  const plan = account ? plans[account.plan] : undefined;
  if (!account || !plan) throw fail.internal(`Plan of account ${accountId} is not configured`);
  return { account, plan };
}

/**
 * 403 entitlement_required unless the plan of the endpoint's account includes `feature`. Callers that are not
 * admins can be refused before any query with `caller.requireEntitlement` (their endpoints are in their account).
 */
export async function requireEndpointEntitlement(
  db: Queryable,
  caller: Caller,
  plans: Record<string, Plan>,
  endpoint: Pick<EndpointRow, 'account_id'>,
  feature: Entitlement,
): Promise<void> {
  const { account, plan } = await endpointAccountPlan(db, caller, plans, endpoint.account_id);
  if (plan.entitlements[feature]) return;
  const whose = account.id === caller.account.id ? '' : " of the endpoint's account";
  throw fail.entitlement_required(`Plan "${account.plan}"${whose} does not include ${feature}`, { feature });
}
