// Users, accounts (personal and organization), memberships and API keys: who a caller is and what they may do.
// Uniqueness (e-mail, membership pairs, key ids) is held by constraints; callers map violations to 409s.
import type { Database, Queryable } from './db.ts';
import { touch } from './feed-changes.ts';
import { recordChange } from './feed.ts';
import type { NewApiKey } from '../shared/api-keys.ts';
import { effectivePermissions } from '../shared/permissions.ts';
import { TOPICS, type AccountConfig, type ApiKeyConfig } from '../shared/snapshot.ts';

export interface UserRow {
  id: number;
  email: string;
  is_admin: boolean;
  personal_account_id: number;
  email_verified: boolean;
  payment_method: boolean;
  identity_verified: boolean;
  created_at: Date;
  updated_at: Date;
}

export interface AccountRow {
  id: number;
  kind: 'personal' | 'organization';
  name: string;
  plan: string;
  suspended_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface MembershipRow {
  account_id: number;
  user_id: number;
  is_owner: boolean;
  permissions: string[];
  created_at: Date;
}

export interface ApiKeyRow {
  id: number;
  key_id: string;
  secret_hash: Uint8Array;
  user_id: number;
  account_id: number;
  name: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

/** Edges mirror accounts through the feed: plan and suspension decide whether an agent may connect. */
function accountChanged(tx: Queryable, accountId: number): void {
  touch(tx, {
    topic: TOPICS.account,
    key: String(accountId),
    build: async (q): Promise<AccountConfig | null> => {
      const { rows } = await q.query<AccountRow>('SELECT * FROM accounts WHERE id = $1', [accountId]);
      const a = rows[0];
      return a ? { id: a.id, plan: a.plan, suspended: a.suspended_at !== null } : null;
    },
  });
}

/** What decides a key's permissions in its account: the user's admin flag and their membership there, if any. */
interface KeyHolder {
  is_admin: boolean;
  is_owner: boolean | null;
  permissions: string[] | null;
}

/** The feed entry of an unrevoked key: edges check the secret and, at admission, `tunnels:connect` in it. */
function apiKeyConfig(key: ApiKeyRow, holder: KeyHolder | undefined): ApiKeyConfig {
  return {
    key_id: key.key_id,
    secret_hash: Buffer.from(key.secret_hash).toString('base64'),
    user_id: key.user_id,
    account_id: key.account_id,
    permissions: effectivePermissions({ isAdmin: holder?.is_admin ?? false, isOwner: holder?.is_owner ?? false, permissions: holder?.permissions ?? [] }),
  };
}

const KEY_HOLDER_SQL = `SELECT u.is_admin, m.is_owner, m.permissions FROM users u
  LEFT JOIN memberships m ON m.account_id = $2 AND m.user_id = u.id WHERE u.id = $1`;

/**
 * Edges verify agent API keys locally from the feed, so a control-plane outage does not stop agents reconnecting.
 * Called again whenever what the entry holds changes: revocation, the holder's permissions, admin flag.
 */
function apiKeyChanged(tx: Queryable, keyId: string): void {
  touch(tx, {
    topic: TOPICS.apiKey,
    key: keyId,
    build: async (q): Promise<ApiKeyConfig | null> => {
      const { rows } = await q.query<ApiKeyRow>('SELECT * FROM api_keys WHERE key_id = $1', [keyId]);
      const key = rows[0];
      if (!key || key.revoked_at) return null;
      const holder = await q.query<KeyHolder>(KEY_HOLDER_SQL, [key.user_id, key.account_id]);
      return apiKeyConfig(key, holder.rows[0]);
    },
  });
}

/** Republishes a user's live keys (those bound to `accountId` only, when given) after their permissions changed. */
async function republishUserKeys(tx: Queryable, userId: number, accountId?: number): Promise<void> {
  const { rows } = await tx.query<ApiKeyRow>(
    accountId === undefined
      ? 'SELECT * FROM api_keys WHERE user_id = $1 AND revoked_at IS NULL ORDER BY id'
      : 'SELECT * FROM api_keys WHERE user_id = $1 AND account_id = $2 AND revoked_at IS NULL ORDER BY id',
    accountId === undefined ? [userId] : [userId, accountId],
  );
  for (const key of rows) apiKeyChanged(tx, key.key_id);
}

function sameApiKeyConfig(a: ApiKeyConfig, b: Partial<ApiKeyConfig> | null): boolean {
  return (
    b !== null &&
    a.key_id === b.key_id &&
    a.secret_hash === b.secret_hash &&
    a.user_id === Number(b.user_id) &&
    a.account_id === Number(b.account_id) &&
    Array.isArray(b.permissions) &&
    a.permissions!.length === b.permissions.length &&
    a.permissions!.every((p, i) => p === b.permissions![i])
  );
}

/**
 * Brings the feed's API key entries in line with the store: publishes every live key whose entry is missing or
 * differs (entries written before they carried `permissions`, or before a permission was added to the list
 * owners hold) and removes entries of keys that are revoked or gone. Run at each control-plane start; a no-op
 * when nothing drifted. Each page holds the feed's version lock while it reads, so a permission change committed
 * meanwhile is either read here or published after this page, never overwritten by an older view.
 */
export async function reconcileApiKeyFeed(db: Database, pageSize = 500): Promise<number> {
  let published = 0;
  for (let after = 0; ; ) {
    const page = await db.transaction(async (tx) => {
      await tx.query('SELECT version FROM feed_state FOR UPDATE');
      const { rows } = await tx.query<ApiKeyRow & KeyHolder & { published: Partial<ApiKeyConfig> | null }>(
        `SELECT k.*, u.is_admin, m.is_owner, m.permissions, f.data AS published
         FROM api_keys k JOIN users u ON u.id = k.user_id
         LEFT JOIN memberships m ON m.account_id = k.account_id AND m.user_id = k.user_id
         LEFT JOIN feed_entries f ON f.topic = $3 AND f.key = k.key_id
         WHERE k.id > $1 AND k.revoked_at IS NULL ORDER BY k.id LIMIT $2`,
        [after, pageSize, TOPICS.apiKey],
      );
      for (const row of rows) {
        const config = apiKeyConfig(row, row);
        if (sameApiKeyConfig(config, row.published)) continue;
        await recordChange(tx, TOPICS.apiKey, row.key_id, config);
        published++;
      }
      return rows;
    });
    if (page.length < pageSize) break;
    after = page[page.length - 1].id;
  }
  await db.transaction(async (tx) => {
    await tx.query('SELECT version FROM feed_state FOR UPDATE');
    const { rows } = await tx.query<{ key: string }>(
      `SELECT f.key FROM feed_entries f WHERE f.topic = $1
       AND NOT EXISTS (SELECT 1 FROM api_keys k WHERE k.key_id = f.key AND k.revoked_at IS NULL)`,
      [TOPICS.apiKey],
    );
    for (const { key } of rows) {
      await recordChange(tx, TOPICS.apiKey, key, null);
      published++;
    }
  });
  return published;
}

export async function createUser(
  tx: Queryable,
  input: { email: string; plan: string; isAdmin?: boolean },
): Promise<{ user: UserRow; account: AccountRow }> {
  const acc = await tx.query<AccountRow>("INSERT INTO accounts (kind, name, plan) VALUES ('personal', $1, $2) RETURNING *", [
    input.email,
    input.plan,
  ]);
  const account = acc.rows[0];
  const usr = await tx.query<UserRow>('INSERT INTO users (email, is_admin, personal_account_id) VALUES ($1, $2, $3) RETURNING *', [
    input.email,
    input.isAdmin ?? false,
    account.id,
  ]);
  const user = usr.rows[0];
  await tx.query('INSERT INTO memberships (account_id, user_id, is_owner) VALUES ($1, $2, true)', [account.id, user.id]);
  accountChanged(tx, account.id);
  return { user, account };
}

export async function findUserById(db: Queryable, id: number): Promise<UserRow | null> {
  const { rows } = await db.query<UserRow>('SELECT * FROM users WHERE id = $1', [id]);
  return rows[0] ?? null;
}

export async function findUserByEmail(db: Queryable, email: string): Promise<UserRow | null> {
  const { rows } = await db.query<UserRow>('SELECT * FROM users WHERE lower(email) = lower($1)', [email]);
  return rows[0] ?? null;
}

export async function countUsers(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM users');
  return rows[0].n;
}

export async function findAccountById(db: Queryable, id: number): Promise<AccountRow | null> {
  const { rows } = await db.query<AccountRow>('SELECT * FROM accounts WHERE id = $1', [id]);
  return rows[0] ?? null;
}

export async function setAccountPlan(tx: Queryable, accountId: number, plan: string): Promise<AccountRow | null> {
  const { rows } = await tx.query<AccountRow>('UPDATE accounts SET plan = $2, updated_at = now() WHERE id = $1 RETURNING *', [accountId, plan]);
  if (rows[0]) accountChanged(tx, accountId);
  return rows[0] ?? null;
}

export async function setAccountSuspended(tx: Queryable, accountId: number, suspended: boolean): Promise<AccountRow | null> {
  const { rows } = await tx.query<AccountRow>(
    `UPDATE accounts SET suspended_at = CASE WHEN $2 THEN coalesce(suspended_at, now()) ELSE NULL END, updated_at = now()
     WHERE id = $1 RETURNING *`,
    [accountId, suspended],
  );
  if (rows[0]) accountChanged(tx, accountId);
  return rows[0] ?? null;
}

export type VerificationFlags = Partial<Pick<UserRow, 'email_verified' | 'payment_method' | 'identity_verified'>>;

export async function setVerification(tx: Queryable, userId: number, flags: VerificationFlags): Promise<UserRow | null> {
  const { rows } = await tx.query<UserRow>(
    `UPDATE users SET email_verified = coalesce($2, email_verified), payment_method = coalesce($3, payment_method),
       identity_verified = coalesce($4, identity_verified), updated_at = now() WHERE id = $1 RETURNING *`,
    [userId, flags.email_verified ?? null, flags.payment_method ?? null, flags.identity_verified ?? null],
  );
  return rows[0] ?? null;
}

export async function setAdmin(tx: Queryable, userId: number, isAdmin: boolean): Promise<void> {
  await tx.query('UPDATE users SET is_admin = $2, updated_at = now() WHERE id = $1', [userId, isAdmin]);
  // Admins hold every permission in every account: the permissions edges see with each key change with the flag.
  await republishUserKeys(tx, userId);
}

export async function createOrganization(tx: Queryable, input: { name: string; plan: string; ownerId: number }): Promise<AccountRow> {
  const { rows } = await tx.query<AccountRow>("INSERT INTO accounts (kind, name, plan) VALUES ('organization', $1, $2) RETURNING *", [
    input.name,
    input.plan,
  ]);
  await tx.query('INSERT INTO memberships (account_id, user_id, is_owner) VALUES ($1, $2, true)', [rows[0].id, input.ownerId]);
  accountChanged(tx, rows[0].id);
  return rows[0];
}

export async function findMembership(db: Queryable, accountId: number, userId: number): Promise<MembershipRow | null> {
  const { rows } = await db.query<MembershipRow>('SELECT * FROM memberships WHERE account_id = $1 AND user_id = $2', [accountId, userId]);
  return rows[0] ?? null;
}

export interface MembershipWithAccount extends MembershipRow {
  account_kind: AccountRow['kind'];
  account_name: string;
  account_plan: string;
  account_suspended_at: Date | null;
}

export async function listMemberships(db: Queryable, userId: number): Promise<MembershipWithAccount[]> {
  const { rows } = await db.query<MembershipWithAccount>(
    `SELECT m.*, a.kind AS account_kind, a.name AS account_name, a.plan AS account_plan, a.suspended_at AS account_suspended_at
     FROM memberships m JOIN accounts a ON a.id = m.account_id WHERE m.user_id = $1 ORDER BY m.account_id`,
    [userId],
  );
  return rows;
}

export async function listMembers(db: Queryable, accountId: number): Promise<Array<MembershipRow & { email: string }>> {
  const { rows } = await db.query<MembershipRow & { email: string }>(
    'SELECT m.*, u.email FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.account_id = $1 ORDER BY m.user_id',
    [accountId],
  );
  return rows;
}

export async function addMember(tx: Queryable, accountId: number, userId: number, permissions: string[]): Promise<MembershipRow> {
  const { rows } = await tx.query<MembershipRow>(
    'INSERT INTO memberships (account_id, user_id, permissions) VALUES ($1, $2, $3) RETURNING *',
    [accountId, userId, permissions],
  );
  // An admin may hold keys bound to the account already; what they publish now follows the membership too.
  await republishUserKeys(tx, userId, accountId);
  return rows[0];
}

export async function setMemberPermissions(tx: Queryable, accountId: number, userId: number, permissions: string[]): Promise<MembershipRow | null> {
  const { rows } = await tx.query<MembershipRow>(
    'UPDATE memberships SET permissions = $3 WHERE account_id = $1 AND user_id = $2 RETURNING *',
    [accountId, userId, permissions],
  );
  // Edges admit agents on the permissions published with the key: losing tunnels:connect ends its live tunnels.
  if (rows[0]) await republishUserKeys(tx, userId, accountId);
  return rows[0] ?? null;
}

/** Removes a non-owner member and revokes the keys they had bound to that account. */
export async function removeMember(tx: Queryable, accountId: number, userId: number): Promise<boolean> {
  const res = await tx.query('DELETE FROM memberships WHERE account_id = $1 AND user_id = $2 AND NOT is_owner', [accountId, userId]);
  if (res.rowCount === 0) return false;
  const keys = await tx.query<ApiKeyRow>(
    'UPDATE api_keys SET revoked_at = now() WHERE account_id = $1 AND user_id = $2 AND revoked_at IS NULL RETURNING *',
    [accountId, userId],
  );
  for (const key of keys.rows) apiKeyChanged(tx, key.key_id);
  return true;
}

export async function insertApiKey(
  tx: Queryable,
  input: { userId: number; accountId: number; name: string; key: NewApiKey },
): Promise<ApiKeyRow> {
  const { rows } = await tx.query<ApiKeyRow>(
    'INSERT INTO api_keys (key_id, secret_hash, user_id, account_id, name) VALUES ($1, $2, $3, $4, $5) RETURNING *',
    [input.key.keyId, input.key.secretHash, input.userId, input.accountId, input.name],
  );
  apiKeyChanged(tx, rows[0].key_id);
  return rows[0];
}

export async function findApiKey(db: Queryable, keyId: string): Promise<ApiKeyRow | null> {
  const { rows } = await db.query<ApiKeyRow>('SELECT * FROM api_keys WHERE key_id = $1', [keyId]);
  return rows[0] ?? null;
}

export async function listApiKeys(db: Queryable, userId: number): Promise<ApiKeyRow[]> {
  const { rows } = await db.query<ApiKeyRow>('SELECT * FROM api_keys WHERE user_id = $1 ORDER BY id', [userId]);
  return rows;
}

export async function revokeApiKey(tx: Queryable, userId: number, id: number): Promise<ApiKeyRow | null> {
  const { rows } = await tx.query<ApiKeyRow>(
    'UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 AND user_id = $2 RETURNING *',
    [id, userId],
  );
  if (rows[0]) apiKeyChanged(tx, rows[0].key_id);
  return rows[0] ?? null;
}

/** Best-effort usage stamp; at most once a minute per key so busy keys do not write on every call. */
export async function touchApiKey(db: Queryable, id: number): Promise<void> {
  await db.query(
    "UPDATE api_keys SET last_used_at = now() WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')",
    [id],
  );
}

/** Creates a user (with personal account) and a first API key for it in one transaction. */
export async function createUserWithKey(
  tx: Queryable,
  input: { email: string; plan: string; isAdmin?: boolean; key: NewApiKey },
): Promise<{ user: UserRow; account: AccountRow; apiKey: ApiKeyRow }> {
  const { user, account } = await createUser(tx, input);
  const apiKey = await insertApiKey(tx, { userId: user.id, accountId: account.id, name: 'initial', key: input.key });
  return { user, account, apiKey };
}

export async function listUsers(db: Queryable, limit: number, offset: number): Promise<Array<UserRow & { plan: string }>> {
  const { rows } = await db.query<UserRow & { plan: string }>(
    'SELECT u.*, a.plan FROM users u JOIN accounts a ON a.id = u.personal_account_id ORDER BY u.id LIMIT $1 OFFSET $2',
    [limit, offset],
  );
  return rows;
}
