// Reading a visitor's credentials from a request (Authorization schemes, a named cookie) and removing a consumed
// cookie from the Cookie header that is forwarded. Pure string work, no allocation on the common paths.

/**
 * The credentials of an Authorization field when its scheme is `scheme` (lower-case), or undefined. RFC 9110 §11.1:
 * the scheme is case-insensitive; §11.4: one or more spaces, then the token68 (leading and trailing whitespace of
 * the field is already gone: Node trims it).
 */
export function credentialsOf(field: string | undefined, scheme: 'basic' | 'bearer'): string | undefined {
  if (field === undefined) return undefined;
  const n = scheme.length;
  if (field.length <= n + 1 || field.charCodeAt(n) !== 32 /* ' ' */) return undefined;
  if (field.slice(0, n).toLowerCase() !== scheme) return undefined;
  let i = n + 1;
  while (field.charCodeAt(i) === 32) i++;
  return i < field.length ? field.slice(i) : undefined;
}

/** RFC 7235 token68, the shape of Basic's base64 and of a Bearer token (RFC 6750 §2.1 b64token). */
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;

export function isToken68(value: string): boolean {
  return TOKEN68.test(value);
}

/**
 * RFC 7617 §2: the user-id and password of Basic credentials (base64 of `user-id ":" password`, UTF-8 per the
 * charset the challenge names), or undefined when they are not base64 or hold no colon. `raw` is the decoded bytes,
 * what a verdict is cached under.
 */
export function basicCredentials(token68: string): { username: string; password: string; raw: Buffer } | undefined {
  if (!TOKEN68.test(token68)) return undefined;
  const raw = Buffer.from(token68, 'base64');
  const colon = raw.indexOf(58 /* ':' */);
  if (colon === -1) return undefined;
  return { username: raw.toString('utf8', 0, colon), password: raw.toString('utf8', colon + 1), raw };
}

/**
 * The Cookie field without every pair named `name` (or any of the names; RFC 6265 §4.2.1: `name=value` pairs joined
 * by `; `), or undefined when nothing is left. Pairs are kept byte for byte, so the upstream reads the other cookies
 * as sent.
 */
export function withoutCookie(header: string | string[] | undefined, name: string | readonly string[]): string | undefined {
  if (header === undefined) return undefined;
  const text = Array.isArray(header) ? header.join('; ') : header;
  let out = '';
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf(';', start);
    if (end === -1) end = text.length;
    const pair = text.slice(start, end).trim();
    const eq = pair.indexOf('=');
    const pairName = (eq === -1 ? pair : pair.slice(0, eq)).trim();
    if (pair.length > 0 && (typeof name === 'string' ? pairName !== name : !name.includes(pairName))) out = out.length === 0 ? pair : `${out}; ${pair}`;
    start = end + 1;
  }
  return out.length > 0 ? out : undefined;
}

/** Printable ASCII and space: what every HTTP stack carries unchanged in a field value (RFC 9110 §5.5). */
const PLAIN_VALUE = /^[\x20-\x7e]*$/;
/** RFC 8259 §6: a JSON number, whole. */
const JSON_NUMBER = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/;

/**
 * Whether a printable string, sent as is, would read as JSON text (RFC 8259: a value starts with `"`, `[`, `{`, a
 * number, or is true, false or null) or lose a space at either end (RFC 9110 §5.5 strips them): then it is sent
 * JSON-encoded instead, so what goes as is never parses as JSON.
 */
function readsAsJson(value: string): boolean {
  const first = value.charCodeAt(0);
  if (first === 34 /* " */ || first === 91 /* [ */ || first === 123 /* { */ || first === 32 || value.charCodeAt(value.length - 1) === 32) return true;
  if (first === 45 /* - */ || (first >= 48 && first <= 57)) return JSON_NUMBER.test(value);
  return value === 'true' || value === 'false' || value === 'null';
}

/**
 * A value the edge vouches for (a username, a token's label, a claim) as a field value, one rule for all of them so
 * the service can always tell what it got: a string goes as is when it is printable ASCII and would not read as
 * JSON; anything else (other strings, and numbers, booleans, arrays, objects) goes as JSON text with every character
 * outside printable ASCII as a \u escape, so it stays lossless and ASCII (RFC 9110 §5.5 makes other octets obsolete,
 * and HTTP/2 stacks refuse control characters). Read back: JSON.parse the value; if that fails, it is the text
 * itself. So the string `["admin"]` (sent `"[\"admin\"]"`) never arrives as the array ["admin"] does, and a string
 * `"\u0061dmin"` never arrives as `admin` does (docs/visitor-auth.md).
 */
export function asHeaderValue(value: unknown): string {
  if (typeof value === 'string' && (value.length === 0 || (PLAIN_VALUE.test(value) && !readsAsJson(value)))) return value;
  return JSON.stringify(value).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
