// Reads the request's Cookie header into name → values, for `cookie` routing conditions. Parsed at most once per
// request, and only for endpoints whose rules look at cookies. Pure; no imports.

/**
 * Splits a Cookie header (RFC 6265 §4.2.1: `name=value` pairs joined by `; `). Node joins repeated Cookie
 * headers with `; ` too. Values are kept as sent (cookies are opaque; no percent-decoding) except that one pair of
 * surrounding double quotes is removed (RFC 6265 cookie-value). A name may occur more than once (same name, other
 * path or domain): every value is kept, in order. Pairs without `=` are ignored, as browsers never send them.
 */
export function parseCookies(header: string | string[] | undefined): Map<string, string[]> {
  const out = new Map<string, string[]>();
  if (header === undefined) return out;
  const text = Array.isArray(header) ? header.join('; ') : header;
  for (const pair of text.split(';')) {
    const eq = pair.indexOf('=');
    if (eq === -1) continue;
    const name = pair.slice(0, eq).trim();
    if (name === '') continue;
    let value = pair.slice(eq + 1).trim();
    if (value.length >= 2 && value.charCodeAt(0) === 34 && value.charCodeAt(value.length - 1) === 34) value = value.slice(1, -1);
    const values = out.get(name);
    if (values) values.push(value);
    else out.set(name, [value]);
  }
  return out;
}
