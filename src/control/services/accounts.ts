// Self-service account operations: the caller's memberships, API keys, organizations and their members. Member
// management is authorised per organization (members:manage there), not by the active account's permissions.
import { generateApiKey } from '../../shared/api-keys.ts';
import { fail } from '../../shared/errors.ts';
import type { Permission } from '../../shared/permissions.ts';
import * as store from '../../store/accounts.ts';
import { isUniqueViolation } from '../../store/db.ts';
import type { Caller } from '../caller.ts';
import { int64Param, type ControlDeps } from '../http.ts';

export type Member = store.MembershipRow & { email: string };

export function accountService({ db }: Pick<ControlDeps, 'db'>) {
  /** An organization the caller may manage members of: 404 unless a member (or admin), then suspension, then members:manage. */
  async function managedOrganization(caller: Caller, rawId: string): Promise<store.AccountRow> {
    const id = int64Param(rawId);
    const account = await store.findAccountById(db, id);
    const membership = account ? await store.findMembership(db, id, caller.user.id) : null;
    if (!account || account.kind !== 'organization' || (!membership && !caller.isAdmin)) throw fail.not_found('Organization not found');
    if (!caller.isAdmin) {
      if (account.suspended_at) throw fail.account_suspended();
      if (!membership!.is_owner && !membership!.permissions.includes('members:manage')) {
        throw fail.permission_denied('Missing permission members:manage in this organization', { permission: 'members:manage' });
      }
    }
    return account;
  }

  return {
    memberships: (caller: Caller) => store.listMemberships(db, caller.user.id),

    apiKeys: (caller: Caller) => store.listApiKeys(db, caller.user.id),

    /** A key bound to one of the caller's accounts (default: the active one); the secret is returned this once. */
    async createApiKey(caller: Caller, input: { name?: string; accountId?: number }): Promise<{ row: store.ApiKeyRow; secret: string }> {
      const accountId = input.accountId ?? caller.account.id;
      if (!caller.isAdmin && !(await store.findMembership(db, accountId, caller.user.id))) throw fail.not_a_member();
      const key = generateApiKey();
      const row = await db.transaction((tx) => store.insertApiKey(tx, { userId: caller.user.id, accountId, name: input.name ?? '', key }));
      return { row, secret: key.key };
    },

    async revokeApiKey(caller: Caller, rawId: string): Promise<void> {
      const row = await db.transaction((tx) => store.revokeApiKey(tx, caller.user.id, int64Param(rawId)));
      if (!row) throw fail.not_found('API key not found');
    },

    /** An organization owned by the caller, on the plan of the caller's personal account. */
    async createOrganization(caller: Caller, name: string): Promise<store.AccountRow> {
      caller.requireActive();
      const personal = await store.findAccountById(db, caller.user.personal_account_id);
      return db.transaction((tx) => store.createOrganization(tx, { name, plan: personal?.plan ?? caller.account.plan, ownerId: caller.user.id }));
    },

    async members(caller: Caller, orgId: string): Promise<Member[]> {
      const org = await managedOrganization(caller, orgId);
      return store.listMembers(db, org.id);
    },

    async addMember(caller: Caller, orgId: string, email: string, permissions: Permission[]): Promise<Member> {
      const org = await managedOrganization(caller, orgId);
      const user = await store.findUserByEmail(db, email);
      if (!user) throw fail.not_found('No user with that e-mail');
      try {
        const m = await db.transaction((tx) => store.addMember(tx, org.id, user.id, permissions));
        return { ...m, email: user.email };
      } catch (err) {
        if (isUniqueViolation(err)) throw fail.already_exists('User is already a member of this organization');
        throw err;
      }
    },

    /** New permissions for a member; their keys bound to the organization are published again (store). */
    async setMemberPermissions(caller: Caller, orgId: string, rawUserId: string, permissions: Permission[]): Promise<Member> {
      const org = await managedOrganization(caller, orgId);
      const userId = int64Param(rawUserId, 'user_id');
      const m = await db.transaction((tx) => store.setMemberPermissions(tx, org.id, userId, permissions));
      if (!m) throw fail.not_found('Member not found');
      const user = await store.findUserById(db, userId);
      return { ...m, email: user?.email ?? '' };
    },

    async removeMember(caller: Caller, orgId: string, rawUserId: string): Promise<void> {
      const org = await managedOrganization(caller, orgId);
      const removed = await db.transaction((tx) => store.removeMember(tx, org.id, int64Param(rawUserId, 'user_id')));
      if (!removed) throw fail.not_found('Member not found (owners cannot be removed)');
    },
  };
}
