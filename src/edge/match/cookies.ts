// Reads one cookie's values from the request's Cookie header, for `cookie` routing conditions. Scans the header
// for the one name instead of building a map of every cookie: a condition looks at one name. Pure; no imports.

/**
 * The values of cookie `name` in a Cookie header (RFC 6265 §4.2.1: `name=value` pairs joined by `; `; node joins
 * repeated Cookie headers with `; ` too), in order, or undefined when absent. A name may occur more than once (same
 * name, other path or domain). Values are kept as sent — cookies are opaque, so no percent-decoding — except that
 * one pair of surrounding double quotes is removed (RFC 6265 cookie-value). Pairs without `=` are ignored.
 */
export function cookieValues(header: string | string[] | undefined, name: string): string[] | undefined {
  if (header === undefined) return undefined;
  const text = Array.isArray(header) ? header.join('; ') : header;
  let out: string[] | undefined;
  let start = 0;
  while (start <= text.length) {
    let end = text.indexOf(';', start);
    if (end === -1) end = text.length;
    const eq = text.indexOf('=', start);
    if (eq !== -1 && eq < end && text.slice(start, eq).trim() === name) {
      let value = text.slice(eq + 1, end).trim();
      if (value.length >= 2 && value.charCodeAt(0) === 34 && value.charCodeAt(value.length - 1) === 34) value = value.slice(1, -1);
      (out ??= []).push(value);
    }
    start = end + 1;
  }
  return out;
}

/** Whether a Cookie header holds any cookie: a pair with a non-empty name before its `=` (RFC 6265 §4.2.1). */
export function hasCookies(header: string | string[] | undefined): boolean {
  if (header === undefined) return false;
  const text = Array.isArray(header) ? header.join('; ') : header;
  for (const pair of text.split(';')) {
    const eq = pair.indexOf('=');
    if (eq > 0 && pair.slice(0, eq).trim() !== '') return true;
  }
  return false;
}
