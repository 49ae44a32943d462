// First-start bootstrap of the platform administrator, shared by `edge serve` and `edge admin`.
// With EDGE_ADMIN_API_KEY set, that key is an admin's from the first start on; without it, an empty store gets a
// generated admin key, printed once.
import { apiKeyId, generateApiKey, hashApiKey } from '../shared/api-keys.ts';
import type { Config } from '../shared/config.ts';
import type { Database } from '../store/db.ts';
import * as store from '../store/accounts.ts';

export const ADMIN_EMAIL_LOCAL = 'admin';

export interface BootstrapResult {
  /** The generated key, when one was made; it is not stored anywhere in clear and must be shown now. */
  generatedKey?: string;
  adminUserId: number;
}

function adminPlan(config: Config): string {
  return config.plans.business ? 'business' : Object.keys(config.plans)[0];
}

export async function bootstrapAdmin(db: Database, config: Config): Promise<BootstrapResult | null> {
  return db.transaction(async (tx) => {
    // Serialise concurrent first starts of several control nodes against one database.
    await tx.query('SELECT pg_advisory_xact_lock(7200418002)');
    const email = `${ADMIN_EMAIL_LOCAL}@${config.baseDomain}`;
    if (config.adminApiKey) {
      const keyId = apiKeyId(config.adminApiKey);
      const existing = await store.findApiKey(tx, keyId);
      if (existing && !existing.revoked_at) return { adminUserId: existing.user_id };
      let user = await store.findUserByEmail(tx, email);
      if (!user) user = (await store.createUser(tx, { email, plan: adminPlan(config), isAdmin: true })).user;
      else if (!user.is_admin) await store.setAdmin(tx, user.id, true);
      // A revoked env key stays revoked: re-adding it would silently undo the revocation.
      if (!existing) {
        await store.insertApiKey(tx, {
          userId: user.id,
          accountId: user.personal_account_id,
          name: 'EDGE_ADMIN_API_KEY',
          key: { key: config.adminApiKey, keyId, secretHash: hashApiKey(config.adminApiKey) },
        });
      }
      return { adminUserId: user.id };
    }
    if ((await store.countUsers(tx)) > 0) return null;
    const key = generateApiKey();
    const { user } = await store.createUserWithKey(tx, { email, plan: adminPlan(config), isAdmin: true, key });
    return { adminUserId: user.id, generatedKey: key.key };
  });
}
