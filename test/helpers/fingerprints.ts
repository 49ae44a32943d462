// Secret fingerprints (docs/api.md "Secret fingerprints") checked the way a client checks them: bcrypt.compare of the
// lower-case hex SHA-256 of the secret, computed here independently of the API's own helper.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import bcrypt from 'bcrypt';

export const sha256hex = (secret: string) => createHash('sha256').update(secret, 'utf8').digest('hex');

/**
 * Asserts `fingerprint` is a cost-10 bcrypt of sha256hex(secret): it verifies, it is neither the secret nor its plain
 * digest nor contains either, and it does not verify another secret.
 */
export async function assertFingerprintOf(fingerprint: unknown, secret: string, what = 'fingerprint'): Promise<void> {
  assert.equal(typeof fingerprint, 'string', `${what}: a string`);
  const f = fingerprint as string;
  assert.match(f, /^\$2b\$10\$[./A-Za-z0-9]{53}$/, `${what}: bcrypt, cost 10`);
  assert.ok(await bcrypt.compare(sha256hex(secret), f), `${what}: verifies the secret's digest`);
  assert.ok(!f.includes(secret) && !f.includes(sha256hex(secret)), `${what}: reveals neither the secret nor its plain hash`);
  assert.ok(!(await bcrypt.compare(secret, f)), `${what}: made from the digest, not from the secret itself`);
  assert.ok(!(await bcrypt.compare(sha256hex(`${secret}x`), f)), `${what}: another secret does not verify`);
}
