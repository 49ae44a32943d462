// Where a visitor may be sent after logging in or out: a path on the endpoint's own host, or one of the endpoint's
// allowed_redirects. Anything else becomes "/", so the login paths are never an open redirector (RFC 9700 §4.11).

/**
 * Whether `raw` is a path-absolute reference that every browser resolves on the current host: it starts with one
 * `/` (`//host` is a network-path reference, RFC 3986 §4.2), holds no `\` (browsers read `/\host` as `//host`), and
 * only visible ASCII (browsers drop tabs and newlines from URLs, so `/\t/host` would become `//host`; a control
 * character could also split the Location field).
 */
export function isLocalPath(raw: string): boolean {
  if (raw.length === 0 || raw.charCodeAt(0) !== 47 /* / */) return false;
  if (raw.length > 1 && raw.charCodeAt(1) === 47) return false;
  for (let i = 1; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c < 0x21 || c > 0x7e || c === 92 /* \ */) return false;
  }
  return true;
}

/** The most a return target may be (the API's limit for allowed_redirects too). */
export const MAX_RETURN_TO = 2048;

/**
 * The target to send the visitor to: `raw` when it is a local path or exactly one of `allowed` (the settings'
 * allowed_redirects, stored canonical: absolute ones as URL.href), else "/".
 */
export function safeReturnTo(raw: string | null | undefined, allowed: ReadonlySet<string>): string {
  if (raw === null || raw === undefined || raw.length === 0 || raw.length > MAX_RETURN_TO) return '/';
  if (isLocalPath(raw)) return raw;
  if (allowed.has(raw)) return raw;
  // An absolute target is compared in its canonical form (host lower-cased, default port dropped).
  if (/^https:\/\//i.test(raw)) {
    try {
      const href = new URL(raw).href;
      if (allowed.has(href)) return href;
    } catch {
      // not a URL: refused below
    }
  }
  return '/';
}
