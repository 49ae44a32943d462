// An endpoint's RBAC policy compiled for the edge (docs/rbac.md "Enforcement at the edge"): roles into method sets and
// path matchers once, clients into their roles by priority, so a decision is a few Set lookups and string compares.
//
// The decision for one client, method and path: walk the client's roles by priority (higher first, ties by role id
// ascending); a role has a *deny* opinion when the method is one it denies or the path matches one of its denied
// patterns, an *allow* opinion when both its method list and its path list admit the request (an empty list admits
// whatever the other one names; a role with both lists empty grants nothing); the first role with an opinion decides,
// and within that role a deny beats an allow. No role with an opinion: denied.
import { headerKey } from '../../shared/edge-headers.ts';
import { claimHeaderRefusal } from '../../shared/visitor-credentials.ts';
import { canonicalPathPattern } from '../../shared/match/condition.ts';
import { compileRbacPath } from '../../shared/rbac-permissions.ts';
export { otherReadings, withoutPathParameters } from '../../shared/match/canonical-path.ts';
import type { RbacClientConfig, RbacConfig, RbacRoleConfig } from '../../shared/snapshot.ts';
import { looseForm, otherReadings } from '../../shared/match/canonical-path.ts';

/** A path under judgement, split into segments on first use and shared by every pattern of every role. */
export class JudgedPath {
  private split?: string[];
  private folded?: JudgedPath;
  constructor(readonly path: string) {}
  segments(): string[] {
    return (this.split ??= this.path.split('/'));
  }
  /**
   * The path as denied patterns (compiled loose too) see it: lower case, without a final `/` (but `/` itself); made on
   * first use.
   */
  loose(): JudgedPath {
    if (this.folded === undefined) {
      const l = looseForm(this.path);
      this.folded = l === this.path ? this : new JudgedPath(l);
    }
    return this.folded;
  }
}

type PathTest = (p: JudgedPath) => boolean;

/**
 * One permission path pattern, compiled by the matcher the control API validated it with (src/shared/rbac-permissions.ts):
 * `/admin` exact, `/api/*` (a single trailing `*` after `/`) the prefix `/api` on segment boundaries (`/api`, `/api/`,
 * `/api/x/y`; not `/apix`), anything else with `*` a segment glob (`*` within one segment, `**` as a segment for any
 * depth). Paths are compared case-sensitively, as the normalised path the agent receives. The pattern is put in
 * canonical form first (a no-op for what the API stored); `loose`: then lower-cased and without a final `/`, for a
 * path in the same form (JudgedPath.loose).
 * Throws on a pattern that is not a path.
 */
export function compileRbacPathPattern(pattern: string, loose = false): PathTest {
  const canonical = loose ? looseForm(canonicalPathPattern(pattern)) : canonicalPathPattern(pattern);
  const compiled = compileRbacPath(canonical);
  if (compiled.needsSegments) {
    const match = compiled.match;
    // Every path a glob matches starts with its literal text before the first `*`, less a final `/` (a `**` segment
    // may match no segment: `/a/**/b` matches `/a/b`): one startsWith rejects most paths before the segment walk.
    let literal = canonical.slice(0, canonical.indexOf('*'));
    if (literal.endsWith('/')) literal = literal.slice(0, -1);
    if (literal === '') return (p) => match(p.segments());
    return (p) => p.path.startsWith(literal) && match(p.segments());
  }
  const match = compiled.match;
  return (p) => match(p.path);
}

/**
 * Any of the patterns. `fold`: matched loosely (the patterns and the path lower-cased, a final `/` dropped), as denied
 * patterns are: a service that routes case-insensitively or non-strictly (Express's defaults, ASP.NET, IIS) serves
 * `/ADMIN` and `/admin/` as `/admin`, so a deny on `/admin` must refuse them. Allowed patterns stay exact: a miss there
 * never lets through what a match would refuse (the next role decides, as it would have had no role allowed it).
 */
function anyPath(patterns: readonly string[], fold = false): PathTest | null {
  if (patterns.length === 0) return null;
  if (fold) {
    const folded = any(patterns.map((pattern) => compileRbacPathPattern(pattern, true)));
    return (p) => folded(p.loose());
  }
  return any(patterns.map((pattern) => compileRbacPathPattern(pattern)));
}

function any(tests: readonly PathTest[]): PathTest {
  if (tests.length === 1) return tests[0];
  return (p) => {
    for (const t of tests) if (t(p)) return true;
    return false;
  };
}

/** A method list: null when empty, 'any' when it holds `*`, else the upper-case names. */
function methodSet(methods: readonly string[]): ReadonlySet<string> | 'any' | null {
  if (methods.length === 0) return null;
  if (methods.includes('*')) return 'any';
  return new Set(methods.map((m) => m.toUpperCase()));
}

const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** A role ready to judge: its lists compiled, its headers checked once. */
export interface CompiledRole {
  readonly id: number;
  readonly name: string;
  readonly priority: number;
  /** Requests per second for a client whose request this role decides; 0: no limit. */
  readonly rps: number;
  /** Set on the forwarded request when this role decides: the role's `headers` an upstream may receive. */
  readonly headers: readonly (readonly [string, string])[];
  /** 'deny', 'allow', or null (no opinion) for a method and path. */
  opinion(method: string, path: JudgedPath): 'allow' | 'deny' | null;
}

export function compileRole(role: RbacRoleConfig): CompiledRole {
  const p = role.permissions;
  let deniedMethods = methodSet(p.denied_methods);
  // RFC 9110 §9.3.2: a server answers HEAD as it would GET (Express, Flask and most frameworks run the GET handler), so
  // a role that denies GET denies HEAD too; otherwise HEAD would run what GET may not, and leak its headers.
  if (deniedMethods instanceof Set && deniedMethods.has('GET')) deniedMethods = new Set([...deniedMethods, 'HEAD']);
  const deniedPath = anyPath(p.denied_paths, true);
  const allowedMethods = methodSet(p.allowed_methods);
  const allowedPath = anyPath(p.allowed_paths);
  // Headers an upstream must not receive from a role (hop-by-hop, framing, credentials, the edge's own X-Edge-*,
  // including X-Edge-Rbac-Client/-Roles) are refused by the control API with the same check; one that slipped in
  // (an older control plane) is left out here rather than let it override what the edge vouches for.
  const headers = Object.entries(p.headers ?? {})
    .filter(([name, value]) => claimHeaderRefusal(name) === null && typeof value === 'string' && FIELD_VALUE.test(value))
    .map(([name, value]) => [name.toLowerCase(), value] as const);
  const deniesMethod = deniedMethods === null ? () => false : deniedMethods === 'any' ? () => true : (m: string) => deniedMethods.has(m);
  // Empty method list: the path list alone decides; empty path list: the method list alone; both empty: nothing.
  const allowsMethod = allowedMethods === null ? () => allowedPath !== null : allowedMethods === 'any' ? () => true : (m: string) => allowedMethods.has(m);
  const allowsPath: PathTest = allowedPath ?? (() => allowedMethods !== null);
  return Object.freeze({
    id: role.id,
    name: role.name,
    priority: role.priority,
    rps: p.rate_limit_rps > 0 ? p.rate_limit_rps : 0,
    headers,
    opinion(method: string, path: JudgedPath) {
      if (deniesMethod(method) || (deniedPath !== null && deniedPath(path))) return 'deny';
      if (allowsMethod(method) && allowsPath(path)) return 'allow';
      return null;
    },
  });
}

/** Higher priority first; equal priorities by role id ascending, so the order never depends on the snapshot's. */
export function byPriority(a: { priority: number; id: number }, b: { priority: number; id: number }): number {
  return b.priority - a.priority || a.id - b.id;
}

export type Decision = { allowed: true; role: CompiledRole } | { allowed: false; role: CompiledRole | null };

/** A client ready to be judged: who it is, its roles by priority. */
export interface CompiledClient {
  readonly id: number;
  readonly identifier: string;
  readonly active: boolean;
  readonly roles: readonly CompiledRole[];
  /** The role names, by priority, comma-separated: X-Edge-Rbac-Roles. */
  readonly roleNames: string;
  /** What the client's rate limits derive from (its roles' ids and rates): a change resets its buckets. */
  readonly rateVersion: string;
}

/** The first role with an opinion on one path; a deny in it beats an allow in it. */
function decideOne(roles: readonly CompiledRole[], method: string, path: JudgedPath): Decision {
  for (const role of roles) {
    const o = role.opinion(method, path);
    if (o === 'allow') return { allowed: true, role };
    if (o === 'deny') return { allowed: false, role };
  }
  return { allowed: false, role: null };
}

const NO_READINGS: readonly string[] = [];

/**
 * The decision for a request: on the normalised path, and on every other reading of it a server may make
 * (otherReadings), for the method and every method an override header names (`also`, judged in the stage); all must
 * be allowed. The role deciding the normalised path and the request's method is the one whose headers and rate apply.
 */
export function decide(client: CompiledClient, method: string, path: string, also: readonly string[] = NO_READINGS): Decision {
  const judged = new JudgedPath(path);
  const d = decideOne(client.roles, method, judged);
  if (!d.allowed) return d;
  for (const m of also) {
    const o = decideOne(client.roles, m, judged);
    if (!o.allowed) return o;
  }
  const readings = otherReadings(path);
  for (const reading of readings) {
    if (reading === null) return { allowed: false, role: null };
    if (reading === path) continue;
    const other = new JudgedPath(reading);
    const o = decideOne(client.roles, method, other);
    if (!o.allowed) return o;
    for (const m of also) {
      const a = decideOne(client.roles, m, other);
      if (!a.allowed) return a;
    }
  }
  return d;
}

/** Whether RBAC is on: at least one role (docs/rbac.md). */
export function rbacEnabled(rbac: RbacConfig | null | undefined): rbac is RbacConfig {
  return rbac != null && rbac.roles.length > 0;
}

/** The clients of an endpoint, found by what the auth stage proved: a credential's client id, a login's identity or verified e-mail. */
export interface CompiledPolicy {
  byId: ReadonlyMap<number, CompiledClient>;
  /** `provider\0subject` → client. */
  byIdentity: ReadonlyMap<string, CompiledClient>;
  /** Lower-case e-mail → client (the lowest id when several share one). */
  byEmail: ReadonlyMap<string, CompiledClient>;
  /**
   * Every header name any role of the endpoint sets (headerKey form): the edge's on this endpoint, so visitor copies are
   * dropped on every request, whichever role decides (a service trusting `X-Admin` from one role must not get a forged
   * one on a request another role decided).
   */
  headerNames: readonly string[];
}

export function identityKey(provider: string, subject: string): string {
  return `${provider}\u0000${subject}`;
}

/**
 * Compiles every role once (shared by the clients holding it) and every client into its roles by priority. A role
 * id a client names that the snapshot lacks is left out (it grants nothing). Throws on a pattern that does not compile.
 */
export function compilePolicy(rbac: RbacConfig): CompiledPolicy {
  const roles = new Map(rbac.roles.map((r) => [r.id, compileRole(r)]));
  const byId = new Map<number, CompiledClient>();
  const byIdentity = new Map<string, CompiledClient>();
  const byEmail = new Map<string, CompiledClient>();
  for (const c of [...rbac.clients].sort((a, b) => a.id - b.id)) {
    const client = compileClient(c, roles);
    byId.set(c.id, client);
    for (const i of c.identities) if (!byIdentity.has(identityKey(i.provider, i.subject))) byIdentity.set(identityKey(i.provider, i.subject), client);
    if (c.email !== null && c.email !== '') {
      const email = c.email.toLowerCase();
      if (!byEmail.has(email)) byEmail.set(email, client);
    }
  }
  const headerNames = new Set<string>();
  for (const role of roles.values()) for (const [name] of role.headers) headerNames.add(headerKey(name));
  return { byId, byIdentity, byEmail, headerNames: Object.freeze([...headerNames]) };
}

/** A role name as one item of X-Edge-Rbac-Roles: as is when printable ASCII without a comma, else percent-encoded (UTF-8). */
export function headerSafeName(name: string): string {
  return /^[\x20-\x2b\x2d-\x7e]+$/.test(name) ? name.trim() : encodeURIComponent(name);
}

function compileClient(c: RbacClientConfig, roles: ReadonlyMap<number, CompiledRole>): CompiledClient {
  const held = [...new Set(c.role_ids)].map((id) => roles.get(id)).filter((r): r is CompiledRole => r !== undefined);
  held.sort(byPriority);
  return Object.freeze({
    id: c.id,
    identifier: c.identifier,
    active: c.status === 'active',
    roles: Object.freeze(held),
    roleNames: held.map((r) => headerSafeName(r.name)).join(','),
    rateVersion: held.map((r) => `${r.id}:${r.rps}`).join(','),
  });
}
