// Shadowed rate-limit rules: a rule that can never be the one acting, because an active rule evaluated before it
// covers every request it matches and always reaches its limit first. Pure; the control API recomputes it for the
// whole endpoint on every rule write and stores `shadowed` / `shadow_reason` (docs/rate-limits.md "Shadowed rules").
//
// Rule A shadows rule B when all of these hold:
// - A is `active` and evaluated before B (lower priority number, or the same priority and a lower id);
// - A's match set ⊇ B's, proven from the parsed conditions (below); what cannot be proven is not claimed;
// - A.requests_per_window ≤ B.requests_per_window and A.window_size_seconds ≥ B.window_size_seconds: when B is over
//   its limit (more than B's count within B's window ending now), the A window ending now contains B's window, so
//   it holds more than B's count ≥ A's count, and A is over its limit too. A lower rate alone is NOT enough
//   (100 per minute does not cover 10 per second: 11 requests in one second trip only the second rule);
// - A counts at least the requests B counts: not A `edge` with B `cluster` (one edge's count is below the cluster's).
// Every matching rule counts the request and the first rule over its limit acts, so B never acts. B's own status
// does not matter (an inactive rule is reported as shadowed so turning it on is known to be useless).
//
// Match-set containment, conservatively: conditions are a disjunction of conjunctions (conditionGroups). A ⊇ B when
// every group of B is contained in some group of A; a group G ⊇ H when each condition of G is implied by some
// condition of H (G with no conditions ⊇ everything). A condition b implies a when, for the same type (and the same
// header / cookie name): they are equal; `in` lists nest (b ⊆ a; for not_in a ⊆ b); CIDRs nest; b `in` is disjoint
// from a `not_in` (not for `endpoint`, which matches host or uuid); a `exists` and b any positive test of that field;
// a `prefix`/`contains`/`matches` holds for every value b admits (b `equals`/`in` literals, b `prefix` extending a's
// prefix, b `contains`/`prefix`/`equals` whose text contains a's). Not proven: glob inside glob, unions of several
// conditions covering one (`in US` OR `in DE` vs `in US,DE`), facts that imply each other (a country vs a CIDR).
import type { RateLimitConditionConfig } from '../snapshot.ts';
import { conditionGroups, parseRateLimitCondition, type ParsedRateLimitCondition } from './conditions.ts';
import { compilePathGlob, compilePathPrefix, compileValueGlob } from '../match/glob.ts';

export interface ShadowRule {
  id: number;
  uuid: string;
  name: string;
  status: string;
  priority: number;
  requests_per_window: number;
  window_size_seconds: number;
  scope: 'edge' | 'cluster';
  conditions: ReadonlyArray<Pick<RateLimitConditionConfig, 'type' | 'operator' | 'value' | 'logical_operator'>>;
}

export interface ShadowVerdict {
  shadowed: boolean;
  /** Names the covering rule; null when not shadowed. */
  reason: string | null;
}

type Cidr = Extract<ParsedRateLimitCondition, { base: 'cidrs' }>['cidrs'][number];

/** d ⊇ c: d's prefix is no longer than c's and c's network lies in d. */
function cidrContains(d: Cidr, c: Cidr): boolean {
  for (let i = 0; i < 4; i++) {
    if ((d.mask[i] & c.mask[i]) >>> 0 !== d.mask[i]) return false;
    if ((c.network[i] & d.mask[i]) >>> 0 !== d.network[i]) return false;
  }
  return true;
}

const cidrsOverlap = (x: Cidr, y: Cidr): boolean => cidrContains(x, y) || cidrContains(y, x);

const subset = <T>(small: readonly T[], big: readonly T[]): boolean => small.every((v) => big.includes(v));

/** Every value `b` admits (a literal list, or a text test) satisfies the text test `a`. */
function textCovers(a: Extract<ParsedRateLimitCondition, { base: 'text' }>, b: ParsedRateLimitCondition): boolean {
  const literals = b.base === 'in' && !b.negated ? b.items : b.base === 'text' && b.op === 'equals' ? [b.text] : null;
  const path = a.type === 'path';
  if (literals !== null) {
    let test: (s: string) => boolean;
    switch (a.op) {
      case 'equals':
        test = (s) => s === a.text;
        break;
      case 'contains':
        test = (s) => s.includes(a.text);
        break;
      case 'prefix':
        test = path ? compilePathPrefix(a.text) : (s) => s.startsWith(a.text);
        break;
      case 'matches': {
        if (!path) {
          test = compileValueGlob(a.text);
        } else {
          const glob = compilePathGlob(a.text);
          test = glob.needsSegments ? (s) => glob.match(s.split('/')) : glob.match;
        }
        break;
      }
    }
    return literals.every(test);
  }
  if (b.base !== 'text') return false;
  // b admits every value with b.text as prefix / as substring.
  if (b.op === 'prefix') {
    if (a.op === 'prefix') return path ? compilePathPrefix(a.text)(b.text) : b.text.startsWith(a.text);
    if (a.op === 'contains') return b.text.includes(a.text);
  }
  if (b.op === 'contains' && a.op === 'contains') return b.text.includes(a.text);
  return false;
}

/** Whether every request matching condition b also matches condition a. */
export function conditionImplies(b: ParsedRateLimitCondition, a: ParsedRateLimitCondition): boolean {
  if (a.type !== b.type) return false;
  // Canonical and exact path conditions read different strings of a request; proving across them is left out.
  if (a.exact !== b.exact) return false;
  const fieldOf = (c: ParsedRateLimitCondition) => (c.base === 'exists' || c.base === 'text' ? c.name : null);
  if (fieldOf(a) !== fieldOf(b)) return false;
  if (a.base === 'exists') {
    if (a.negated) return b.base === 'exists' && b.negated;
    return !b.negated; // any positive test of the field needs the field present
  }
  if (a.base === 'text') return !b.negated && textCovers(a, b);
  if (a.base === 'cidrs' && b.base === 'cidrs') {
    if (!a.negated && !b.negated) return b.cidrs.every((c) => a.cidrs.some((d) => cidrContains(d, c)));
    if (a.negated && b.negated) return a.cidrs.every((c) => b.cidrs.some((d) => cidrContains(d, c)));
    if (a.negated && !b.negated) return b.cidrs.every((c) => !a.cidrs.some((d) => cidrsOverlap(c, d)));
    return false;
  }
  const values = (c: ParsedRateLimitCondition): readonly (string | number)[] | null =>
    c.base === 'in' ? c.items : c.base === 'numbers' ? c.numbers : null;
  const av = values(a);
  const bv = values(b);
  if (av === null || bv === null) return false;
  if (!a.negated && !b.negated) return subset(bv, av);
  if (a.negated && b.negated) return subset(av, bv);
  // Disjoint lists: b's value is one of its items, none of a's. Not for endpoint (host OR uuid may differ), nor for a
  // canonical path (a request has several readings: `/x;y` may be in b's list while its reading `/x` is in a's).
  if (a.negated && !b.negated) return a.type !== 'endpoint' && !(a.type === 'path' && !a.exact) && !bv.some((v) => av.includes(v));
  return false;
}

function parseGroups(rule: ShadowRule): ParsedRateLimitCondition[][] | null {
  try {
    return conditionGroups(rule.conditions).map((g) => g.map((c) => parseRateLimitCondition(c.type, c.operator, c.value)));
  } catch {
    return null; // a stored row the current language refuses: prove nothing about it
  }
}

/** Whether rule a's match set ⊇ rule b's, from their conditions. */
export function coversRequests(a: ParsedRateLimitCondition[][], b: ParsedRateLimitCondition[][]): boolean {
  if (a.length === 0) return true;
  if (b.length === 0) return false; // b matches everything; a has conditions (tautologies are not recognised)
  return b.every((hGroup) => a.some((gGroup) => gGroup.every((ac) => hGroup.some((bc) => conditionImplies(bc, ac)))));
}

const evaluatedBefore = (a: ShadowRule, b: ShadowRule) => a.priority < b.priority || (a.priority === b.priority && a.id < b.id);

/** One verdict per rule id, for all the rules of one endpoint. */
export function computeShadows(rules: readonly ShadowRule[]): Map<number, ShadowVerdict> {
  const ordered = [...rules].sort((x, y) => x.priority - y.priority || x.id - y.id);
  const groups = new Map(ordered.map((r) => [r.id, parseGroups(r)]));
  const out = new Map<number, ShadowVerdict>();
  for (const b of ordered) {
    const bGroups = groups.get(b.id)!;
    let verdict: ShadowVerdict = { shadowed: false, reason: null };
    for (const a of ordered) {
      if (a === b || !evaluatedBefore(a, b) || a.status !== 'active') continue;
      const aGroups = groups.get(a.id)!;
      if (aGroups === null || bGroups === null) continue;
      if (a.requests_per_window > b.requests_per_window || a.window_size_seconds < b.window_size_seconds) continue;
      if (a.scope === 'edge' && b.scope === 'cluster') continue;
      if (!coversRequests(aGroups, bGroups)) continue;
      verdict = {
        shadowed: true,
        reason:
          `rule "${a.name}" (${a.uuid}) is evaluated first, matches every request this rule matches, and its limit ` +
          `(${a.requests_per_window} per ${a.window_size_seconds} s) is always reached before this rule's ` +
          `(${b.requests_per_window} per ${b.window_size_seconds} s)`,
      };
      break;
    }
    out.set(b.id, verdict);
  }
  return out;
}
