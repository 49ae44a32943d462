// Reads one query parameter's values from the raw query string, for `query` routing conditions, decoded exactly as
// URLSearchParams decodes them (application/x-www-form-urlencoded) but without building the whole parameter list.

/** `+` is a space, then percent-decoding as UTF-8; malformed escapes are left as they are (as the WHATWG parser does). */
export function formDecode(raw: string): string {
  if (!raw.includes('%') && !raw.includes('+')) return raw;
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    // Invalid escapes or UTF-8: let the WHATWG parser apply its exact leniency to this one piece.
    return new URLSearchParams(`x=${raw}`).get('x') ?? raw;
  }
}

/** The decoded values of parameter `name` in `query` (without "?"), in order, or undefined when absent. */
export function queryValues(query: string, name: string): string[] | undefined {
  let out: string[] | undefined;
  let start = 0;
  while (start < query.length) {
    let end = query.indexOf('&', start);
    if (end === -1) end = query.length;
    if (end > start) {
      let eq = query.indexOf('=', start);
      if (eq === -1 || eq > end) eq = end;
      if (formDecode(query.slice(start, eq)) === name) (out ??= []).push(formDecode(query.slice(Math.min(eq + 1, end), end)));
    }
    start = end + 1;
  }
  return out;
}
