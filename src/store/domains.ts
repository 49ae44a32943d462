// Custom domains an account has claimed. A domain counts as owned only once verified (DNS TXT or an admin);
// an endpoint on it is then served at <subdomain>.<domain>, or at the bare domain for "@".
import type { Queryable } from './db.ts';

export interface DomainRow {
  id: number;
  account_id: number;
  user_id: number;
  name: string;
  verification_token: string;
  verified_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export async function findDomainById(db: Queryable, id: number): Promise<DomainRow | null> {
  const { rows } = await db.query<DomainRow>('SELECT * FROM domains WHERE id = $1', [id]);
  return rows[0] ?? null;
}

/** A domain the account may put endpoints on: its own and verified. Anything else reads as missing. */
export async function findUsableDomain(db: Queryable, accountId: number, id: number): Promise<DomainRow | null> {
  const { rows } = await db.query<DomainRow>('SELECT * FROM domains WHERE id = $1 AND account_id = $2 AND verified_at IS NOT NULL', [id, accountId]);
  return rows[0] ?? null;
}

/** A domain as the account that claimed it sees it; another account's reads as missing. */
export async function findAccountDomain(db: Queryable, accountId: number, id: number, opts: { forUpdate?: boolean } = {}): Promise<DomainRow | null> {
  const { rows } = await db.query<DomainRow>(`SELECT * FROM domains WHERE id = $1 AND account_id = $2${opts.forUpdate ? ' FOR UPDATE' : ''}`, [id, accountId]);
  return rows[0] ?? null;
}

export async function listDomains(db: Queryable, accountId: number): Promise<DomainRow[]> {
  const { rows } = await db.query<DomainRow>('SELECT * FROM domains WHERE account_id = $1 ORDER BY id', [accountId]);
  return rows;
}

/** Claims a name for an account. A second claim by the same account violates `domains_account_name_key`. */
export async function insertDomain(tx: Queryable, d: { accountId: number; userId: number; name: string; token: string }): Promise<DomainRow> {
  const { rows } = await tx.query<DomainRow>(
    'INSERT INTO domains (account_id, user_id, name, verification_token) VALUES ($1, $2, $3, $4) RETURNING *',
    [d.accountId, d.userId, d.name, d.token],
  );
  return rows[0];
}

/**
 * Marks a claimed domain verified, once (an already verified row keeps its first verified_at). The partial unique
 * index `domains_verified_name_key` refuses it when another account holds the name verified: that constraint,
 * not a lookup before it, is what keeps two accounts from owning one name. Null when the domain is gone.
 */
export async function markDomainVerified(tx: Queryable, id: number): Promise<DomainRow | null> {
  const { rows } = await tx.query<DomainRow>(
    'UPDATE domains SET verified_at = COALESCE(verified_at, now()), updated_at = now() WHERE id = $1 RETURNING *',
    [id],
  );
  return rows[0] ?? null;
}

export async function countEndpointsOnDomain(db: Queryable, domainId: number): Promise<number> {
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM endpoints WHERE domain_id = $1', [domainId]);
  return rows[0].n;
}

/** Deletes a domain; endpoints.domain_id (ON DELETE RESTRICT) refuses it while any endpoint is on it. */
export async function deleteDomain(tx: Queryable, id: number): Promise<boolean> {
  const res = await tx.query('DELETE FROM domains WHERE id = $1', [id]);
  return res.rowCount > 0;
}
