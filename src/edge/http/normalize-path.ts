// Request paths normalised once, before any stage judges them: the agent receives exactly the path that RBAC and
// routing saw, so `/admin/../public`, `//admin` and `/%61dmin` cannot slip past a rule written for `/admin`.

const UNRESERVED = /[A-Za-z0-9\-._~]/;
const HEX = /^[0-9A-Fa-f]{2}$/;

/**
 * Percent-decodes unreserved characters and upper-cases the hex of the rest (RFC 3986 §6.2.2.1-2), collapses
 * duplicate slashes, and removes dot segments (RFC 3986 §5.2.4). Returns null for a path that is not origin-form
 * or carries a malformed escape, which the edge answers with 400.
 */
export function normalizePath(path: string): string | null {
  if (path.length === 0 || path.charCodeAt(0) !== 47 /* / */) return null;
  // Fast path: nothing to decode, no dot segments, no doubled slashes — the common case costs one scan.
  if (!/%|\/\/|\/\.\.?(\/|$)/.test(path)) return path;
  let decoded = '';
  for (let i = 0; i < path.length; i++) {
    const c = path[i];
    if (c !== '%') {
      decoded += c;
      continue;
    }
    const hex = path.slice(i + 1, i + 3);
    if (!HEX.test(hex)) return null;
    const ch = String.fromCharCode(parseInt(hex, 16));
    decoded += UNRESERVED.test(ch) ? ch : `%${hex.toUpperCase()}`;
    i += 2;
  }
  const segments = decoded.split('/').slice(1);
  const out: string[] = [];
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i];
    const last = i === segments.length - 1;
    if (s === '..') {
      out.pop();
      if (last) out.push('');
    } else if (s === '.') {
      if (last) out.push('');
    } else if (s === '' && !last) {
      continue; // duplicate slash
    } else {
      out.push(s);
    }
  }
  return '/' + out.join('/');
}

/** Splits a request target into path and query; absolute-form targets (RFC 9112 §3.2.2) keep only their path. */
export function splitTarget(target: string): { path: string; query: string } {
  let t = target;
  if (!t.startsWith('/')) {
    const m = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i.exec(t);
    if (m) t = t.slice(m[0].length) || '/';
  }
  const q = t.indexOf('?');
  return q === -1 ? { path: t, query: '' } : { path: t.slice(0, q), query: t.slice(q + 1) };
}
