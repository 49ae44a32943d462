// Request paths normalised once, before any stage judges them: the agent receives exactly the path that RBAC and
// routing saw, so `/admin/../public`, `//admin`, `/%61dmin`, `/p/..\admin` and `/p/..;/admin` cannot slip past a
// rule for `/admin`.

const UNRESERVED = /[A-Za-z0-9\-._~]/;
const HEX = /^[0-9A-Fa-f]{2}$/;

/**
 * Whether a decoded segment is a dot segment with path parameters: `.` or `..` before a `;` (or `%3B`). RFC 3986
 * §5.2.4 sees `..;x` as an ordinary segment, but Tomcat, Jetty and Spring strip parameters before resolving dots,
 * so `/public/..;/admin` would be judged under /public and served as /admin. Such a path is refused, not rewritten:
 * stripping parameters from every segment would change what the service receives for matrix parameters that are
 * its business (`/cars;color=red`), and no client builds `..;` for a good reason.
 */
function isDotWithParameters(segment: string): boolean {
  let i = 1;
  if (segment.charCodeAt(1) === 46 /* . */) i = 2;
  return segment.charCodeAt(i) === 59 /* ; */ || (segment.charCodeAt(i) === 37 /* % */ && segment.slice(i + 1, i + 3).toUpperCase() === '3B');
}

/**
 * Percent-decodes unreserved characters and upper-cases the hex of the rest (RFC 3986 §6.2.2.1-2), reads `\` and
 * `%5C` as `/`, collapses duplicate slashes, and removes dot segments (RFC 3986 §5.2.4). Returns null for a path that
 * is not origin-form, carries a malformed escape, or has a dot segment with parameters (`..;`, `.;x`, `%2e%2e%3b`,
 * see isDotWithParameters), which the edge answers with 400.
 *
 * Backslashes: WHATWG URL parsers (browsers, Node's URL, many frameworks) read `\` as `/` in http(s) URLs, and
 * servers that decode before splitting (IIS, nginx and Tomcat on Windows) read `%5C` so too; leaving either in a
 * segment would let `/p/..\admin` be judged under /p and served as /admin. Turning both into `/` before dot
 * segments are removed gives every reader the same path; a browser already sends `/` for a typed `\`, so only
 * hand-built requests see the difference. `%2F` stays encoded (RFC 3986 §2.2: an encoded delimiter is data, as in
 * `/repos/group%2Fproject`), upper-cased, and never counts as a separator here.
 */
export function normalizePath(path: string): string | null {
  if (path.length === 0 || path.charCodeAt(0) !== 47 /* / */) return null;
  // Fast path: nothing to decode, no backslash, no dot segments (bare or with parameters), no doubled slashes — the
  // common case costs one scan.
  if (!/%|\\|\/\/|\/\.\.?(\/|;|$)/.test(path)) return path;
  let decoded = '';
  for (let i = 0; i < path.length; i++) {
    const c = path[i];
    if (c === '\\') {
      decoded += '/';
      continue;
    }
    if (c !== '%') {
      decoded += c;
      continue;
    }
    const hex = path.slice(i + 1, i + 3);
    if (!HEX.test(hex)) return null;
    const code = parseInt(hex, 16);
    const ch = String.fromCharCode(code);
    decoded += code === 0x5c ? '/' : UNRESERVED.test(ch) ? ch : `%${hex.toUpperCase()}`;
    i += 2;
  }
  const segments = decoded.split('/').slice(1);
  const out: string[] = [];
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i];
    const last = i === segments.length - 1;
    if (s.charCodeAt(0) === 46 /* . */ && isDotWithParameters(s)) return null;
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

/** A request target taken apart: the authority an absolute-form target names (else null), its path and query. */
export interface Target {
  authority: string | null;
  path: string;
  /** The raw query without "?", or "". */
  query: string;
}

const ABSOLUTE = /^https?:\/\/([^/?]*)/i;

/**
 * Splits a request target (RFC 9112 §3.2) into authority, path and query. Absolute-form targets (§3.2.2) give their
 * authority, which the resolver routes on instead of Host. Null for what the edge does not serve: a fragment (no
 * request-target has one; an upstream would cut the path at `#` after the edge judged it whole), a scheme other
 * than http or https, and the asterisk and authority forms (which normalizePath would refuse anyway).
 */
export function splitTarget(target: string): Target | null {
  if (target.indexOf('#') !== -1) return null;
  let authority: string | null = null;
  let t = target;
  if (t.charCodeAt(0) !== 47 /* / */) {
    const m = ABSOLUTE.exec(t);
    if (m === null) return null;
    authority = m[1];
    t = t.slice(m[0].length);
    // RFC 3986 §6.2.3: an empty path with an authority is "/".
    if (t.charCodeAt(0) !== 47) t = '/' + t;
  }
  const q = t.indexOf('?');
  return q === -1 ? { authority, path: t, query: '' } : { authority, path: t.slice(0, q), query: t.slice(q + 1) };
}
