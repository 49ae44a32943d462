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
