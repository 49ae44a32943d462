// Shadowed rules: what the analysis proves (containment of match sets, a limit always reached first) and what it
// refuses to claim (shorter windows, edge vs cluster counts, inactive or later rules, unions it cannot see).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { computeShadows, conditionImplies, type ShadowRule } from '../../../src/shared/rate-limit/shadow.ts';
import { parseRateLimitCondition } from '../../../src/shared/rate-limit/conditions.ts';

type C = [type: string, operator: string, value: string, logical?: 'AND' | 'OR'];

let nextId = 0;
function rule(over: Partial<Omit<ShadowRule, 'conditions'>> & { conditions?: C[] } = {}): ShadowRule {
  const id = over.id ?? ++nextId;
  return {
    id,
    uuid: `00000000-0000-4000-8000-${String(id).padStart(12, '0')}`,
    name: `r${id}`,
    status: 'active',
    priority: 0,
    requests_per_window: 10,
    window_size_seconds: 60,
    scope: 'edge',
    ...over,
    conditions: (over.conditions ?? []).map(([type, operator, value, logical_operator = 'AND']) => ({ type: type as never, operator, value, logical_operator })),
  };
}

const implies = (b: C, a: C) => conditionImplies(parseRateLimitCondition(b[0], b[1], b[2]), parseRateLimitCondition(a[0], a[1], a[2]));

describe('shadowed rules', () => {
  it('condition implication', () => {
    assert.ok(implies(['country', 'in', 'US'], ['country', 'in', 'US,DE']));
    assert.ok(!implies(['country', 'in', 'US,FR'], ['country', 'in', 'US,DE']));
    assert.ok(implies(['country', 'not_in', 'US,DE'], ['country', 'not_in', 'US']));
    assert.ok(implies(['country', 'in', 'FR'], ['country', 'not_in', 'US']));
    assert.ok(!implies(['country', 'in', 'US'], ['country', 'not_in', 'US']));
    assert.ok(implies(['source_ip', 'in', '10.1.0.0/16'], ['source_ip', 'in', '10.0.0.0/8']));
    assert.ok(!implies(['source_ip', 'in', '10.0.0.0/8'], ['source_ip', 'in', '10.1.0.0/16']));
    assert.ok(implies(['source_ip', 'not_in', '10.0.0.0/8'], ['source_ip', 'not_in', '10.1.0.0/16']));
    assert.ok(implies(['source_ip', 'in', '192.168.0.0/16'], ['source_ip', 'not_in', '10.0.0.0/8']));
    assert.ok(implies(['source_ip', 'in', '2001:db8:1::/48'], ['source_ip', 'in', '2001:db8::/32']));
    assert.ok(implies(['path', 'equals', '/api/login'], ['path', 'prefix', '/api']));
    assert.ok(implies(['path', 'prefix', '/api/v1'], ['path', 'prefix', '/api']));
    assert.ok(!implies(['path', 'prefix', '/apix'], ['path', 'prefix', '/api']));
    assert.ok(!implies(['path', 'exact_prefix', '/api'], ['path', 'exact_prefix', '/api/']));
    // Canonical path conditions compare without a final `/`: `/api/` is `/api`.
    assert.ok(implies(['path', 'prefix', '/api'], ['path', 'prefix', '/API/']));
    assert.ok(implies(['path', 'in', '/api/a,/api/b'], ['path', 'matches', '/api/*']));
    assert.ok(implies(['path', 'prefix', '/login'], ['path', 'contains', 'log']));
    assert.ok(implies(['user_agent', 'prefix', 'curl/8'], ['user_agent', 'prefix', 'curl/']));
    assert.ok(implies(['user_agent', 'contains', 'python-requests'], ['user_agent', 'contains', 'requests']));
    assert.ok(implies(['header', 'equals', 'x-key=abc'], ['header', 'exists', 'x-key']));
    assert.ok(!implies(['header', 'equals', 'x-key=abc'], ['header', 'exists', 'x-other']));
    assert.ok(!implies(['header', 'not_exists', 'x-key'], ['header', 'exists', 'x-key']));
    assert.ok(implies(['method', 'equals', 'POST'], ['method', 'in', 'POST,PUT']));
    assert.ok(implies(['port', 'equals', '443'], ['port', 'not_in', '80']));
    assert.ok(!implies(['endpoint', 'in', 'a.example.test'], ['endpoint', 'not_in', 'b.example.test']));
    assert.ok(!implies(['country', 'in', 'US'], ['asn', 'in', '1']));
    assert.ok(!implies(['path', 'matches', '/a/*'], ['path', 'matches', '/a/**']), 'glob inside glob is not proven');
  });

  it('a broader, earlier, stricter rule shadows; the reason names it', () => {
    const a = rule({ id: 1, name: 'all-posts', conditions: [['method', 'equals', 'POST']], requests_per_window: 5 });
    const b = rule({ id: 2, conditions: [['method', 'equals', 'POST'], ['path', 'equals', '/login']], requests_per_window: 10 });
    const out = computeShadows([b, a]);
    assert.equal(out.get(1)!.shadowed, false);
    assert.equal(out.get(2)!.shadowed, true);
    assert.match(out.get(2)!.reason!, /rule "all-posts" \(00000000-0000-4000-8000-000000000001\) is evaluated first/);
  });

  it('zero conditions cover everything, but are covered only by zero conditions', () => {
    const everything = rule({ id: 1 });
    const narrow = rule({ id: 2, conditions: [['country', 'in', 'US']] });
    assert.equal(computeShadows([everything, narrow]).get(2)!.shadowed, true);
    const narrowFirst = rule({ id: 1, conditions: [['country', 'in', 'US']] });
    const everythingLater = rule({ id: 2 });
    assert.equal(computeShadows([narrowFirst, everythingLater]).get(2)!.shadowed, false);
  });

  it('the limit: count no higher AND window no shorter; a lower rate alone does not shadow', () => {
    const check = (a: Partial<Omit<ShadowRule, 'conditions'>>, b: Partial<Omit<ShadowRule, 'conditions'>>) =>
      computeShadows([rule({ id: 1, ...a }), rule({ id: 2, ...b })]).get(2)!.shadowed;
    assert.equal(check({ requests_per_window: 10, window_size_seconds: 60 }, { requests_per_window: 10, window_size_seconds: 60 }), true);
    assert.equal(check({ requests_per_window: 10, window_size_seconds: 120 }, { requests_per_window: 20, window_size_seconds: 60 }), true);
    assert.equal(check({ requests_per_window: 11, window_size_seconds: 60 }, { requests_per_window: 10, window_size_seconds: 60 }), false);
    // 100/min is a lower rate than 10/s, but 11 requests in one second trip only the per-second rule.
    assert.equal(check({ requests_per_window: 100, window_size_seconds: 60 }, { requests_per_window: 10, window_size_seconds: 1 }), false);
    assert.equal(check({ requests_per_window: 5, window_size_seconds: 10 }, { requests_per_window: 10, window_size_seconds: 60 }), false);
  });

  it('order, status and scope', () => {
    const check = (a: Partial<Omit<ShadowRule, 'conditions'>>, b: Partial<Omit<ShadowRule, 'conditions'>>) =>
      computeShadows([rule({ id: 1, ...a }), rule({ id: 2, ...b })]).get(2)!.shadowed;
    assert.equal(check({ priority: 5 }, { priority: 1 }), false, 'b is evaluated first');
    assert.equal(check({ priority: 1 }, { priority: 5 }), true);
    assert.equal(check({ status: 'inactive' }, {}), false, 'only active rules shadow');
    assert.equal(check({}, { status: 'disabled' }), true, 'an inactive rule is reported shadowed too');
    assert.equal(check({ scope: 'edge' }, { scope: 'cluster' }), false, 'one edge counts less than the cluster');
    assert.equal(check({ scope: 'cluster' }, { scope: 'edge' }), true);
    // Same priority: the lower id is evaluated first, whatever order the rules are passed in.
    assert.equal(computeShadows([rule({ id: 9 }), rule({ id: 3 })]).get(9)!.shadowed, true);
  });

  it('OR groups: every group of the later rule needs a covering group of the earlier one', () => {
    const a = rule({ id: 1, conditions: [['path', 'prefix', '/api', 'OR'], ['path', 'equals', '/login']] });
    const covered = rule({ id: 2, conditions: [['path', 'equals', '/api/x', 'OR'], ['path', 'equals', '/login', 'AND'], ['method', 'equals', 'POST']] });
    const notCovered = rule({ id: 3, conditions: [['path', 'equals', '/api/x', 'OR'], ['path', 'equals', '/signup']] });
    const out = computeShadows([a, covered, notCovered]);
    assert.equal(out.get(2)!.shadowed, true);
    assert.equal(out.get(3)!.shadowed, false);
    // Unions of conditions are not seen: `in US` OR `in DE` does cover `in US,DE`, but it is not claimed.
    const union = rule({ id: 1, conditions: [['country', 'in', 'US', 'OR'], ['country', 'in', 'DE']] });
    const both = rule({ id: 2, conditions: [['country', 'in', 'US,DE']] });
    assert.equal(computeShadows([union, both]).get(2)!.shadowed, false);
  });
});
