// API key format and verification, shared by the control API and edges (which check agent keys).
// A key is `edge_<key id>_<secret>`: the id finds the row, the SHA-256 of the whole key is compared in constant time.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const GENERATED = /^edge_([0-9a-f]{16})_[A-Za-z0-9_-]{43}$/;

export interface NewApiKey {
  key: string;
  keyId: string;
  secretHash: Buffer;
}

export function generateApiKey(): NewApiKey {
  const keyId = randomBytes(8).toString('hex');
  const key = `edge_${keyId}_${randomBytes(32).toString('base64url')}`;
  return { key, keyId, secretHash: hashApiKey(key) };
}

/**
 * The lookup id of a key. Generated keys carry it; an operator-chosen key (EDGE_ADMIN_API_KEY) gets one derived
 * from its hash, so lookups never index the secret itself.
 */
export function apiKeyId(key: string): string {
  const m = GENERATED.exec(key);
  return m ? m[1] : `x${createHash('sha256').update('key-id:').update(key).digest('hex').slice(0, 16)}`;
}

export function hashApiKey(key: string): Buffer {
  // Keys are 256-bit random secrets, so a fast hash is enough (a slow KDF protects guessable passwords, not these).
  return createHash('sha256').update(key).digest();
}

export function apiKeyMatches(key: string, storedHash: Uint8Array): boolean {
  const actual = hashApiKey(key);
  return storedHash.length === actual.length && timingSafeEqual(actual, storedHash);
}

/** Header values longer than this are rejected before hashing: no real key is anywhere near it. */
export const MAX_API_KEY_LENGTH = 256;
