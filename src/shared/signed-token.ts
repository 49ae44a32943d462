// The one format of the platform's HMAC-signed tokens (login sessions, registration forms, visitor identity
// assertions, health probes): `<field>.<field>….<mac>`, the MAC an HMAC-SHA256 as base64url text.
//
// The MAC covers the token's purpose, its fields and, when given, `bound` values the token is only good with but
// does not carry (the endpoint, a request's method and target, an invite): `<purpose>.<field>.<field>` then, with
// bound values, a newline and their JSON array. Fields are base64url or digits (no dot, no newline), so the text
// the MAC covers names one purpose, one list of fields and one list of bound values. A token with no bound values
// is exactly the format login-session cookies have always had (`session.<kid>.<payload>` under the key), so cookies
// issued before this module verify after it. Expiry and key choice stay the caller's: they differ per token.
import { createHmac, timingSafeEqual } from 'node:crypto';

/** An HMAC-SHA256 as base64url text: 32 bytes, 43 characters. */
export const MAC_TEXT_LENGTH = 43;

const FIELD = /^[A-Za-z0-9_-]*$/;

/** The MAC of a token, as base64url text. */
function mac(key: Buffer, purpose: string, fields: readonly string[], bound: readonly string[] | undefined): string {
  // Purpose and fields are ASCII: latin1 gives the same bytes as UTF-8 without the encoder's pass. The digest is
  // asked for as text: a Buffer digest turned into text costs about twice as much (a new backing store).
  const h = createHmac('sha256', key).update(fields.length === 0 ? purpose : `${purpose}.${fields.join('.')}`, 'latin1');
  if (bound !== undefined) h.update(`\n${JSON.stringify(bound)}`, 'utf8');
  return h.digest('base64url');
}

/**
 * A token carrying `fields` (each base64url or digits) for `purpose` under `key`, good only with the same `bound`
 * values. Throws on a field that would make the format ambiguous: a bug, never a visitor's doing.
 */
export function signToken(key: Buffer, purpose: string, fields: readonly string[], bound?: readonly string[]): string {
  for (const f of fields) if (!FIELD.test(f)) throw new Error(`a signed token's field must be base64url: ${JSON.stringify(f.slice(0, 40))}`);
  return `${fields.join('.')}.${mac(key, purpose, fields, bound)}`;
}

// Compared as base64url text, in constant time, with no decoding of the visitor's bytes first. Both go into two
// fixed buffers (openToken runs to its end before anything else can use them), not two new ones per check.
const givenMac = Buffer.alloc(MAC_TEXT_LENGTH);
const expectedMac = Buffer.alloc(MAC_TEXT_LENGTH);

/**
 * The fields of `token` when it is `fieldCount` fields and a MAC made for `purpose` and `bound` under `key` (or the
 * key `key(fields)` picks, e.g. by a key id field); null otherwise: malformed, unknown key, tampered, or made for
 * another purpose or other bound values. One answer for every failure.
 */
export function openToken(
  key: Buffer | ((fields: readonly string[]) => Buffer | undefined),
  purpose: string,
  token: string,
  fieldCount: number,
  bound?: readonly string[],
): string[] | null {
  if (typeof token !== 'string') return null;
  const parts = token.split('.', fieldCount + 2);
  if (parts.length !== fieldCount + 1) return null;
  const given = parts.pop()!;
  if (given.length !== MAC_TEXT_LENGTH) return null;
  // A newline in a field could pass for the start of the bound values: refused (a field never has one).
  if (bound !== undefined && token.includes('\n')) return null;
  const k = typeof key === 'function' ? key(parts) : key;
  if (k === undefined) return null;
  givenMac.write(given, 0, 'latin1');
  expectedMac.write(mac(k, purpose, parts, bound), 0, 'latin1');
  return timingSafeEqual(givenMac, expectedMac) ? parts : null;
}
