// Platform administration as domain operations: users with their first key, plans, verification flags and
// suspension. The routes (routes/admin.ts) have already required an admin caller; nothing here checks it again.
import { generateApiKey } from '../../shared/api-keys.ts';
import type { Config } from '../../shared/config.ts';
import { fail } from '../../shared/errors.ts';
import * as store from '../../store/accounts.ts';
import { isUniqueViolation, type Database } from '../../store/db.ts';

export const USERS_PAGE_SIZE_DEFAULT = 20;

export interface AdminUser {
  user: store.UserRow;
  account: store.AccountRow;
}

export function adminService({ db, config }: { db: Database; config: Config }) {
  async function user(userId: number): Promise<AdminUser> {
    const found = await store.findUserById(db, userId);
    if (!found) throw fail.not_found('User not found');
    const account = (await store.findAccountById(db, found.personal_account_id))!;
    return { user: found, account };
  }

  return {
    user,

    /** A new user on `plan`, with the one API key whose secret the response shows once. */
    async createUser(input: { email: string; plan: string; isAdmin?: boolean }): Promise<AdminUser & { apiKey: string }> {
      const key = generateApiKey();
      try {
        const { user: created } = await db.transaction((tx) => store.createUserWithKey(tx, { ...input, key }));
        return { ...(await user(created.id)), apiKey: key.key };
      } catch (err) {
        if (isUniqueViolation(err)) throw fail.already_exists('A user with that e-mail already exists');
        throw err;
      }
    },

    /** One page of users by id; `page × page_size` is capped by EDGE_LIST_MAX_OFFSET as in every listing (a deep OFFSET scans every row before it). */
    async listUsers(page = 1, pageSize = USERS_PAGE_SIZE_DEFAULT) {
      if (page * pageSize > config.listMaxOffset) {
        throw fail.pagination_too_deep(`page × page_size may not exceed ${config.listMaxOffset}`, { page, page_size: pageSize, max: config.listMaxOffset });
      }
      return store.listUsers(db, pageSize, (page - 1) * pageSize);
    },

    async setUserPlan(userId: number, plan: string): Promise<AdminUser> {
      const found = await store.findUserById(db, userId);
      if (!found) throw fail.not_found('User not found');
      await db.transaction((tx) => store.setAccountPlan(tx, found.personal_account_id, plan));
      return user(found.id);
    },

    async setVerification(userId: number, flags: { email_verified?: boolean; payment_method?: boolean; identity_verified?: boolean }): Promise<AdminUser> {
      const updated = await db.transaction((tx) => store.setVerification(tx, userId, flags));
      if (!updated) throw fail.not_found('User not found');
      return user(updated.id);
    },

    async setAccountPlan(accountId: number, plan: string): Promise<store.AccountRow> {
      const account = await db.transaction((tx) => store.setAccountPlan(tx, accountId, plan));
      if (!account) throw fail.not_found('Account not found');
      return account;
    },

    async setAccountSuspended(accountId: number, suspended: boolean): Promise<store.AccountRow> {
      const account = await db.transaction((tx) => store.setAccountSuspended(tx, accountId, suspended));
      if (!account) throw fail.not_found('Account not found');
      return account;
    },
  };
}
