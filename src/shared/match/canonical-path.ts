// Paths as servers read them, shared by both planes: the one normalised form every edge stage judges and the agent
// receives, and the canonical readings RBAC denies and rate-limit `path` conditions match (docs/rbac.md "Paths").
//
// Normalisation (normalizePath) is what the edge forwards: `/admin/../public`, `//admin`, `/%61dmin`, `/p/..\admin`
// and `/p/..;/admin` cannot slip past a rule for `/admin`. The canonical readings go further, for matching only: the
// other paths a service may route the same request to (`;` parameters stripped, `%2F` read as `/`), case-folded and
// without a final `/`, since Express, Rails, Tomcat, ASP.NET and WSGI servers serve `/LOGIN`, `/login/`,
// `/login;jsessionid=1` and `/login%2F` as `/login`.

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

/**
 * The path as a case-insensitive, non-strict router reads it: lower case, a final `/` dropped (not from `/` itself).
 * RBAC's denied patterns and rate-limit path conditions compare in this form (patterns folded the same way).
 */
export function looseForm(path: string): string {
  const l = path.toLowerCase();
  return l.length > 1 && l.charCodeAt(l.length - 1) === 47 /* / */ ? l.slice(0, -1) : l;
}

/**
 * The path a server that strips path parameters reads (Tomcat, Jetty, Spring read `/admin;x/y` as `/admin/y`):
 * every segment's `;…` removed, then normalised again (a segment that was only parameters leaves `//`). Null when
 * the path has no `;`. `%3B` is data, not a separator, to those servers as to the edge.
 */
export function withoutPathParameters(path: string): string | null {
  let semi = path.indexOf(';');
  if (semi === -1) return null;
  let out = '';
  let from = 0;
  while (semi !== -1) {
    out += path.slice(from, semi);
    const slash = path.indexOf('/', semi);
    if (slash === -1) {
      from = path.length;
      break;
    }
    from = slash;
    semi = path.indexOf(';', slash);
  }
  out += path.slice(from);
  return normalizePath(out) ?? '/';
}

const NO_READINGS: readonly string[] = [];

/**
 * The other paths a server may read a normalised path as (docs/rbac.md "Paths"): without `;` parameters (Tomcat,
 * Jetty, Spring: `/admin;x/users` is `/admin/users`), with `%2F` read as `/` (Go's net/http, WSGI and CGI servers
 * decode it before routing: `/admin%2Fusers` is `/admin/users`), and both. Empty for a path with neither (the common
 * case: two scans); null stands for a reading that does not normalise (RBAC refuses it).
 */
export function otherReadings(path: string): readonly (string | null)[] {
  const semi = path.indexOf(';') !== -1;
  const slash = path.indexOf('%2F') !== -1;
  if (!semi && !slash) return NO_READINGS;
  const out: (string | null)[] = [];
  const decoded = slash ? normalizePath(path.replaceAll('%2F', '/')) : path;
  if (slash) out.push(decoded);
  if (semi) out.push(withoutPathParameters(path));
  if (slash && decoded !== null && decoded.indexOf(';') !== -1) out.push(withoutPathParameters(decoded));
  return out;
}

/**
 * Every canonical reading of a normalised path: the path and its otherReadings, each in looseForm, without
 * duplicates (readings that do not normalise are left out). A rate-limit `path` condition matches when any reading
 * does: a limit that matches more widely can only limit more. One item, allocation-free but for the case fold, for
 * a path without `;` or `%2F`.
 */
export function canonicalReadings(path: string): readonly string[] {
  const loose = looseForm(path);
  const others = otherReadings(path);
  if (others.length === 0) return [loose];
  const out = [loose];
  for (const r of others) {
    if (r === null) continue;
    const l = looseForm(r);
    if (!out.includes(l)) out.push(l);
  }
  return out;
}
