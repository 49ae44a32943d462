// The certificate library (per account: PEM chain, sealed private key, parsed facts) and the endpoint TLS columns it
// feeds: certificate_id and mTLS. Edges get a certificate through the feed only while some endpoint serves it.
import type { Queryable } from './db.ts';
import { touch } from './feed-changes.ts';

export interface CertificateRow {
  id: number;
  account_id: number;
  user_id: number;
  name: string;
  certificate_pem: string;
  private_key_sealed: string;
  subject: string;
  issuer: string;
  sans: string[];
  fingerprint_sha256: string;
  not_before: Date;
  not_after: Date;
  status: 'active' | 'revoked';
  created_at: Date;
  updated_at: Date;
}


export interface NewCertificate {
  accountId: number;
  userId: number;
  name: string;
  certificatePem: string;
  privateKeySealed: string;
  subject: string;
  issuer: string;
  sans: string[];
  fingerprintSha256: string;
  notBefore: Date;
  notAfter: Date;
}

export async function insertCertificate(tx: Queryable, c: NewCertificate): Promise<CertificateRow> {
  const { rows } = await tx.query<CertificateRow>(
    `INSERT INTO certificates (account_id, user_id, name, certificate_pem, private_key_sealed, subject, issuer, sans,
                               fingerprint_sha256, not_before, not_after)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8::text[], $9, $10, $11) RETURNING *`,
    [c.accountId, c.userId, c.name, c.certificatePem, c.privateKeySealed, c.subject, c.issuer, c.sans, c.fingerprintSha256, c.notBefore, c.notAfter],
  );
  return rows[0];
}

export async function listCertificates(db: Queryable, accountId: number): Promise<CertificateRow[]> {
  const { rows } = await db.query<CertificateRow>('SELECT * FROM certificates WHERE account_id = $1 ORDER BY id', [accountId]);
  return rows;
}

/**
 * A certificate of the account, or null. `share` holds deletion off until the caller's transaction ends (an
 * assignment in progress); `update` is for the deleter itself.
 */
export async function findCertificate(db: Queryable, accountId: number, id: number, opts: { lock?: 'share' | 'update' } = {}): Promise<CertificateRow | null> {
  const lock = opts.lock === 'share' ? ' FOR SHARE' : opts.lock === 'update' ? ' FOR UPDATE' : '';
  const { rows } = await db.query<CertificateRow>(`SELECT * FROM certificates WHERE id = $1 AND account_id = $2${lock}`, [id, accountId]);
  return rows[0] ?? null;
}

/** Uuids of the endpoints serving a certificate (for the 409 that names them). */
export async function endpointsUsingCertificate(db: Queryable, certificateId: number): Promise<string[]> {
  const { rows } = await db.query<{ uuid: string }>('SELECT uuid::text AS uuid FROM endpoints WHERE certificate_id = $1 ORDER BY id', [certificateId]);
  return rows.map((r) => r.uuid);
}

/**
 * Deletes a certificate; the endpoints.certificate_id reference (ON DELETE RESTRICT) refuses it while assigned.
 * Edges should hold no copy already (it was withdrawn when last released); touching it makes sure of it.
 */
export async function deleteCertificate(tx: Queryable, id: number): Promise<boolean> {
  const res = await tx.query('DELETE FROM certificates WHERE id = $1', [id]);
  touch(tx, { certificate: id });
  return res.rowCount > 0;
}

/**
 * Serves `certificateId` on the endpoint (null: the platform certificate). The new certificate reaches edges
 * before the endpoint naming it, the one let go of is withdrawn after it if no other endpoint serves it.
 */
export async function setEndpointCertificate(tx: Queryable, endpointId: number, certificateId: number | null): Promise<void> {
  const { rows } = await tx.query<{ previous: number | null }>(
    `UPDATE endpoints e SET certificate_id = $2, updated_at = now() FROM (SELECT certificate_id FROM endpoints WHERE id = $1) old
     WHERE e.id = $1 RETURNING old.certificate_id AS previous`,
    [endpointId, certificateId],
  );
  if (certificateId !== null) touch(tx, { certificate: certificateId });
  touch(tx, { endpoint: endpointId });
  const previous = rows[0]?.previous ?? null;
  if (previous !== null && previous !== certificateId) touch(tx, { certificate: previous });
}

export async function setEndpointMtls(tx: Queryable, endpointId: number, mode: 'disabled' | 'optional' | 'required', caPem: string | null): Promise<void> {
  await tx.query('UPDATE endpoints SET mtls_mode = $2, mtls_ca_pem = $3, updated_at = now() WHERE id = $1', [endpointId, mode, caPem]);
  touch(tx, { endpoint: endpointId });
}
