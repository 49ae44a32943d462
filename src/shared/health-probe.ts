// How a health probe proves itself to the edge: the worker signs each probe with a key derived from EDGE_SECRET_KEY,
// the edge verifies it and then neither rate-limits, authenticates nor captures it (docs/health-checks.md).
import { openToken, signToken } from './signed-token.ts';

/** What a probe names itself as, so an agent's or origin's logs can tell probes from visitors. */
export const PROBE_USER_AGENT = 'edge-health-probe/1';

/** The signed header. In the X-Edge-* namespace the edge owns: a visitor's copy never reaches an agent or origin. */
export const PROBE_HEADER = 'x-edge-health-probe';

/** The SecretBox.derive purpose of the signing key: every node sharing EDGE_SECRET_KEY derives the same key. */
export const PROBE_KEY_PURPOSE = 'health-probe-signature';

/** A signature is accepted this long either side of its timestamp (clock skew between worker and edge included). */
export const PROBE_VALIDITY_SECONDS = 30;

/** Only these methods are ever signed or accepted: a probe reads, it never changes anything behind the edge. */
const PROBE_METHODS = new Set(['GET', 'HEAD']);

/**
 * The header value for a probe of `endpoint` (its uuid) with `method` on `target` (the request target as sent):
 * `<timestamp>.<mac>` (src/shared/signed-token.ts), bound to the endpoint, method and target as well, so a captured
 * header opens no other request. (Until issue 20 the MAC covered a newline-joined text of its own: during an
 * upgrade, probes signed by a worker of the other release are taken for visitors for at most PROBE_VALIDITY_SECONDS.)
 */
export function signProbe(key: Buffer, endpoint: string, method: string, target: string, nowMs = Date.now()): string {
  if (!PROBE_METHODS.has(method)) throw new Error(`a health probe is a GET or HEAD, not ${method}`);
  return signToken(key, PROBE_USER_AGENT, [String(Math.floor(nowMs / 1000))], [endpoint, method, target]);
}

/**
 * True when `value` is a current signature for exactly this endpoint, method and request target. Constant-time
 * comparison; anything malformed, stale, from the future or for another request is false.
 */
export function verifyProbe(key: Buffer, value: string | string[] | undefined, endpoint: string, method: string, target: string, nowMs = Date.now()): boolean {
  if (typeof value !== 'string' || value.length > 64 || !PROBE_METHODS.has(method)) return false;
  const fields = openToken(key, PROBE_USER_AGENT, value, 1, [endpoint, method, target]);
  if (fields === null || !/^[0-9]{1,12}$/.test(fields[0])) return false;
  return Math.abs(nowMs / 1000 - Number(fields[0])) <= PROBE_VALIDITY_SECONDS;
}
