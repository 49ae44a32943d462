// Fingerprints of the secrets the API never returns (docs/api.md "Secret fingerprints"): salted and slow, so a view can
// tell a client whether the secret it holds is the stored one without revealing the secret or a fast hash of it.
import { createHash } from 'node:crypto';
import bcrypt from 'bcrypt';

/**
 * bcrypt's cost for fingerprints. A low-entropy secret (a short webhook key) must not be brute-forceable from a view:
 * each guess costs what a visitor's basic-auth check costs, and the salt makes every fingerprint its own problem.
 */
export const FINGERPRINT_COST = 10;

/** The lower-case hex SHA-256 of the secret's UTF-8 bytes: what is fingerprinted (64 bytes, within bcrypt's 72). */
export function secretDigestHex(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/**
 * bcrypt (cost 10) of secretDigestHex(secret); a client checks one with bcrypt.compare(sha256hex(value), fingerprint).
 * On libuv's pool, so callers compute it before their transaction, as basic users' hashes are.
 */
export function secretFingerprint(secret: string): Promise<string> {
  return bcrypt.hash(secretDigestHex(secret), FINGERPRINT_COST);
}
