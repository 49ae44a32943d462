// The certificate library (per account: PEM chain, sealed private key, parsed facts) and the endpoint TLS columns it
// feeds: certificate_id and mTLS. Edges get a certificate through the feed only while some endpoint serves it.
import type { Queryable } from './db.ts';
import { recordChange } from './feed.ts';
import { TOPICS, type CertificateConfig } from '../shared/snapshot.ts';

export const CERTIFICATE_TOPIC = TOPICS.certificate;

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

/** Deletes a certificate; the endpoints.certificate_id reference (ON DELETE RESTRICT) refuses it while assigned. */
export async function deleteCertificate(tx: Queryable, id: number): Promise<boolean> {
  const res = await tx.query('DELETE FROM certificates WHERE id = $1', [id]);
  return res.rowCount > 0;
}

export async function setEndpointCertificate(tx: Queryable, endpointId: number, certificateId: number | null): Promise<void> {
  await tx.query('UPDATE endpoints SET certificate_id = $2, updated_at = now() WHERE id = $1', [endpointId, certificateId]);
}

export async function setEndpointMtls(tx: Queryable, endpointId: number, mode: 'disabled' | 'optional' | 'required', caPem: string | null): Promise<void> {
  await tx.query('UPDATE endpoints SET mtls_mode = $2, mtls_ca_pem = $3, updated_at = now() WHERE id = $1', [endpointId, mode, caPem]);
}

/** Publishes a certificate's edge record. Call before publishing an endpoint that refers to it (same transaction). */
export async function publishCertificate(tx: Queryable, id: number): Promise<void> {
  const { rows } = await tx.query<CertificateRow>('SELECT * FROM certificates WHERE id = $1', [id]);
  const c = rows[0];
  if (!c) return;
  // The key stays sealed: edges open it with EDGE_SECRET_KEY.
  const record: CertificateConfig = {
    id: c.id,
    account_id: c.account_id,
    certificate_pem: c.certificate_pem,
    private_key_sealed: c.private_key_sealed,
    not_after: c.not_after.toISOString(),
    sans: c.sans,
  };
  await recordChange(tx, CERTIFICATE_TOPIC, String(c.id), record);
}

export async function publishCertificateDeleted(tx: Queryable, id: number): Promise<void> {
  await recordChange(tx, CERTIFICATE_TOPIC, String(id), null);
}

/**
 * Withdraws a certificate from the edges once no endpoint serves it, so key material lives only where it is used.
 * Call after the endpoint that let go of it has been published (and from endpoint deletion, with its old value).
 */
export async function unpublishCertificateIfUnused(tx: Queryable, id: number): Promise<void> {
  const { rows } = await tx.query<{ used: boolean }>('SELECT EXISTS (SELECT 1 FROM endpoints WHERE certificate_id = $1) AS used', [id]);
  if (!rows[0].used) await publishCertificateDeleted(tx, id);
}
