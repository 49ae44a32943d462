// Who is calling the /v1 API: the API key resolves to a user and an active account, with permissions and plan.
// Route handlers ask `caller.require(...)` for what they need; every refusal is an EdgeError with its own code.
import type { FastifyRequest } from 'fastify';
import { apiKeyId, apiKeyMatches, MAX_API_KEY_LENGTH } from '../shared/api-keys.ts';
import { fail } from '../shared/errors.ts';
import type { Config } from '../shared/config.ts';
import type { Entitlement, Plan } from '../shared/plans.ts';
import type { Permission } from '../shared/permissions.ts';
import { parseInt64 } from '../shared/schema.ts';
import type { Database } from '../store/db.ts';
import { findAccountById, findApiKey, findMembership, findUserById, touchApiKey, type AccountRow, type UserRow } from '../store/accounts.ts';

export class Caller {
  constructor(
    readonly user: UserRow,
    readonly account: AccountRow,
    readonly plan: Plan,
    readonly isOwner: boolean,
    private readonly permissions: ReadonlySet<string>,
    readonly apiKeyId: number,
  ) {}

  get isAdmin(): boolean {
    return this.user.is_admin;
  }

  get suspended(): boolean {
    return this.account.suspended_at !== null;
  }

  has(permission: Permission): boolean {
    return this.isAdmin || this.isOwner || this.permissions.has(permission);
  }

  /** Permission in the active account; a suspended account is refused first, whatever the permission. */
  requirePermission(permission: Permission): void {
    if (this.suspended && !this.isAdmin) throw fail.account_suspended();
    if (!this.has(permission)) throw fail.permission_denied(`Missing permission ${permission} in the active account`, { permission });
  }

  /** Any write by a suspended account is refused, even one that needs no named permission. */
  requireActive(): void {
    if (this.suspended && !this.isAdmin) throw fail.account_suspended();
  }

  requireAdmin(): void {
    if (!this.isAdmin) throw fail.admin_required();
  }

  entitled(feature: Entitlement): boolean {
    return this.plan.entitlements[feature];
  }

  requireEntitlement(feature: Entitlement): void {
    if (!this.entitled(feature)) throw fail.entitlement_required(`Plan "${this.account.plan}" does not include ${feature}`, { feature });
  }

  get permissionList(): string[] {
    return [...this.permissions];
  }
}

/** The header that switches the active account away from the one the key is bound to. */
export const ACCOUNT_HEADER = 'x-account-id';

export async function resolveCaller(req: FastifyRequest, db: Database, config: Config): Promise<Caller> {
  const raw = req.headers['x-api-key'];
  const key = Array.isArray(raw) ? undefined : raw;
  if (!key || key.length > MAX_API_KEY_LENGTH) throw fail.unauthorized();
  const row = await findApiKey(db, apiKeyId(key));
  if (!row || row.revoked_at || !apiKeyMatches(key, row.secret_hash)) throw fail.unauthorized();
  const user = await findUserById(db, row.user_id);
  if (!user) throw fail.unauthorized();

  let accountId = row.account_id;
  const requested = req.headers[ACCOUNT_HEADER];
  if (typeof requested === 'string' && requested !== '') {
    const id = parseInt64(requested);
    if (id === null) throw fail.invalid_id(`${ACCOUNT_HEADER} must be a positive integer account id`, { field: ACCOUNT_HEADER, reason: 'must be a positive integer account id' });
    accountId = id;
  }
  const [account, membership] = await Promise.all([findAccountById(db, accountId), findMembership(db, accountId, user.id)]);
  if (!account || (!membership && !user.is_admin)) throw fail.not_a_member();
  const plan = config.plans[account.plan];
  if (!plan) throw fail.internal(`Plan "${account.plan}" is not configured`);
  touchApiKey(db, row.id).catch((err) => req.log.warn({ err }, 'could not record API key use'));
  return new Caller(user, account, plan, membership?.is_owner ?? false, new Set(membership?.permissions ?? []), row.id);
}
