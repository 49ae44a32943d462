// Glob matchers for routing conditions, compiled once into closures: `*` within one segment (or a whole value),
// `**` as a whole segment for any depth. Shared: the control API compiles a pattern with them to validate it.
//
// Why not `new RegExp(...)`: a glob such as `/**/a/**/a/**/b` becomes `^/.*/a/.*/a/.*/b$`, which backtracks
// polynomially on a crafted path, and visitors choose the path. The matchers below are the classic wildcard
// algorithm (backtrack only to the last star), worst case O(pattern × input) and usually a few string compares.

export type StringMatcher = (value: string) => boolean;

const always: StringMatcher = () => true;

/**
 * `*` (and `**`, the same here) matches any run of characters, everything else is literal. For header, query and
 * cookie values, where there is no separator. Case-sensitive.
 */
export function compileValueGlob(pattern: string): StringMatcher {
  const chunks = pattern.split(/\*+/);
  if (chunks.length === 1) return (v) => v === pattern;
  const first = chunks[0];
  const last = chunks[chunks.length - 1];
  if (chunks.length === 2) {
    if (first === '' && last === '') return always;
    if (last === '') return (v) => v.startsWith(first);
    if (first === '') return (v) => v.endsWith(last);
  }
  const middle = chunks.slice(1, -1).filter((c) => c !== '');
  const minLength = chunks.reduce((n, c) => n + c.length, 0);
  return (v) => v.length >= minLength && v.startsWith(first) && v.endsWith(last) && middleChunksFit(v, first.length, v.length - last.length, middle);
}

/**
 * Whether the chunks occur in order, without overlap, in v[from, to). Taking each chunk's leftmost occurrence is
 * optimal when stars separate them (any later choice leaves less room for the rest), so no backtracking is needed.
 */
function middleChunksFit(v: string, from: number, to: number, chunks: readonly string[]): boolean {
  let pos = from;
  for (const chunk of chunks) {
    const at = v.indexOf(chunk, pos);
    if (at === -1 || at + chunk.length > to) return false;
    pos = at + chunk.length;
  }
  return true;
}

/** One segment's matcher, or null for a `**` segment (zero or more whole segments). */
type SegmentMatcher = StringMatcher | null;

/**
 * A glob over `sep`-separated segments (paths with `/`, host names with `.`): `*` matches any characters of one
 * segment, a segment that is exactly `**` matches zero or more whole segments, `**` inside a segment is `*`.
 * So `/api/*` matches `/api/v1` but not `/api/v1/x`; `/api/**` matches `/api`, `/api/` and everything below;
 * `*.example.com` matches `a.example.com`; `**.example.com` also matches `example.com` and `a.b.example.com`.
 * Returns a matcher over the input already split on `sep` (the caller splits once per request and shares it).
 */
export function compileSegmentGlob(pattern: string, sep: string): (segments: readonly string[]) => boolean {
  const parts: SegmentMatcher[] = [];
  for (const part of pattern.split(sep)) {
    // Consecutive `**` segments mean the same as one; keeping one bounds the backtracking below.
    if (part === '**') {
      if (parts[parts.length - 1] !== null) parts.push(null);
    } else {
      parts.push(compileValueGlob(part));
    }
  }
  return (segments) => matchSegments(parts, segments);
}

/**
 * Wildcard matching at segment granularity: each non-null matcher consumes exactly one segment, null consumes any
 * number. On a mismatch it retries from the most recent `**` with one more segment absorbed — the standard
 * linear-backtracking algorithm, correct because a later `**` can absorb anything an earlier one could.
 */
function matchSegments(parts: readonly SegmentMatcher[], segments: readonly string[]): boolean {
  let p = 0;
  let s = 0;
  let starP = -1;
  let starS = 0;
  while (s < segments.length) {
    const part = p < parts.length ? parts[p] : undefined;
    if (part === null) {
      starP = p++;
      starS = s;
    } else if (part !== undefined && part(segments[s])) {
      p++;
      s++;
    } else if (starP !== -1) {
      p = starP + 1;
      s = ++starS;
    } else {
      return false;
    }
  }
  while (p < parts.length && parts[p] === null) p++;
  return p === parts.length;
}

/**
 * Compiles a path glob into a matcher over the whole path, with fast paths for the shapes most rules use:
 * no wildcard (equality) and a literal prefix ending in `/**` (a segment-boundary prefix).
 */
export function compilePathGlob(pattern: string): { needsSegments: false; match: StringMatcher } | { needsSegments: true; match: (segments: readonly string[]) => boolean } {
  if (!pattern.includes('*')) return { needsSegments: false, match: (p) => p === pattern };
  if (pattern.endsWith('/**') && !pattern.slice(0, -3).includes('*')) {
    return { needsSegments: false, match: compilePathPrefix(pattern.slice(0, -3) || '/') };
  }
  return { needsSegments: true, match: compileSegmentGlob(pattern, '/') };
}

/**
 * A prefix on segment boundaries: `/api` matches `/api` and `/api/...` but not `/apix`; `/api/` matches `/api/`
 * and below but not `/api`; `/` matches everything. A bare string prefix would let `/api` capture `/api-internal`.
 */
export function compilePathPrefix(prefix: string): StringMatcher {
  if (prefix === '/') return always;
  if (prefix.endsWith('/')) return (p) => p.startsWith(prefix);
  const withSlash = prefix + '/';
  return (p) => p === prefix || p.startsWith(withSlash);
}
