// Request targets taken apart and their paths normalised once, before any stage judges them: the agent receives
// exactly the path that RBAC and routing saw. Normalisation itself lives in src/shared/match/canonical-path.ts.
export { normalizePath } from '../../shared/match/canonical-path.ts';

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
