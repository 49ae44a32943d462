// How a health probe proves itself to the edge: the worker signs each probe with a key derived from EDGE_SECRET_KEY,
// the edge verifies it and then neither rate-limits, authenticates nor captures it (docs/health-checks.md).
import { createHmac, timingSafeEqual } from 'node:crypto';

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

function mac(key: Buffer, endpoint: string, timestamp: number, method: string, target: string): Buffer {
  // Binding method and target as well as the endpoint keeps a captured header from opening any other request.
  return createHmac('sha256', key).update(`${PROBE_USER_AGENT}\n${endpoint}\n${timestamp}\n${method}\n${target}`).digest();
}

/** The header value for a probe of `endpoint` (its uuid) with `method` on `target` (the request target as sent). */
export function signProbe(key: Buffer, endpoint: string, method: string, target: string, nowMs = Date.now()): string {
  if (!PROBE_METHODS.has(method)) throw new Error(`a health probe is a GET or HEAD, not ${method}`);
  const timestamp = Math.floor(nowMs / 1000);
  return `${timestamp}.${mac(key, endpoint, timestamp, method, target).toString('base64url')}`;
}

/**
 * True when `value` is a current signature for exactly this endpoint, method and request target. Constant-time
 * comparison; anything malformed, stale, from the future or for another request is false.
 */
export function verifyProbe(key: Buffer, value: string | string[] | undefined, endpoint: string, method: string, target: string, nowMs = Date.now()): boolean {
  if (typeof value !== 'string' || !PROBE_METHODS.has(method)) return false;
  const dot = value.indexOf('.');
  if (dot <= 0 || dot > 12) return false;
  const timestamp = Number(value.slice(0, dot));
  if (!Number.isSafeInteger(timestamp) || Math.abs(nowMs / 1000 - timestamp) > PROBE_VALIDITY_SECONDS) return false;
  const given = Buffer.from(value.slice(dot + 1), 'base64url');
  const expected = mac(key, endpoint, timestamp, method, target);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
