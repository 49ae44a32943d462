// The edge's own home for rate-limit state (src/edge/rate-limit/visitors.ts): visitors bounded per rule and across
// rules (a flood through one rule takes from itself, not from a quiet rule), memory taken per visitor, rule state kept
// by rule uuid and counted version, the least used rule's state dropped first.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RateLimitCounters, VisitorBudget, VisitorMap, type KeptRuleState } from '../../../src/edge/rate-limit/visitors.ts';
import { SlidingWindowCounter } from '../../../src/edge/rate-limit/window.ts';

class State implements KeptRuleState {
  released = false;
  constructor(public used: number) {}
  lastUse(): number {
    return this.used;
  }
  release(): void {
    this.released = true;
  }
}

describe('rate-limit visitor state', () => {
  it('forgets the least recently seen visitor of a rule beyond its bound', () => {
    const m = new VisitorMap<number>(2);
    m.add('a', 1);
    m.add('b', 2);
    assert.equal(m.get('a'), 1); // a is now the most recent
    m.add('c', 3);
    assert.equal(m.get('b'), undefined);
    assert.equal(m.get('a'), 1);
    assert.equal(m.size, 2);
    assert.throws(() => new VisitorMap(0), RangeError);
  });

  it('keeps the order of use when the newest visitor is read again, or was evicted and comes back', () => {
    // get() skips re-inserting the visitor seen last; the order must be what re-inserting every time gives.
    const m = new VisitorMap<number>(3);
    m.add('a', 1);
    m.add('b', 2);
    m.add('c', 3);
    assert.equal(m.get('c'), 3);
    assert.equal(m.get('a'), 1);
    assert.equal(m.get('a'), 1); // a newest twice: order b, c, a
    m.add('d', 4); // evicts b
    assert.equal(m.get('b'), undefined);
    m.delete('d'); // the newest goes: reading c must move it after a
    assert.equal(m.get('c'), 3);
    m.add('e', 5);
    m.add('f', 6); // evicts a, the least recently seen
    assert.equal(m.get('a'), undefined);
    assert.equal(m.get('c'), 3);
    m.release();
    m.add('c', 7);
    assert.equal(m.get('c'), 7);
    assert.equal(m.size, 1);
  });

  it('keeps the edge-wide total: a flooded rule gives up its own visitors, never a quiet rule’s', () => {
    const budget = new VisitorBudget(100);
    const quiet = new VisitorMap<number>(1000, budget);
    const flooded = new VisitorMap<number>(1000, budget);
    for (let i = 0; i < 5; i++) quiet.add(`q${i}`, i);
    for (let i = 0; i < 10_000; i++) flooded.add(`f${i}`, i);
    assert.equal(budget.used, 100);
    assert.equal(quiet.size, 5);
    for (let i = 0; i < 5; i++) assert.equal(quiet.get(`q${i}`), i);
    // The quiet rule may still grow (up to its fair share), taking from the flooded one.
    quiet.add('q5', 5);
    assert.equal(quiet.size, 6);
    assert.equal(budget.used, 100);
    // A released map returns its visitors to the budget.
    flooded.release();
    assert.equal(budget.used, 6);
  });

  it('takes memory per visitor seen, not per bound: an idle rule costs next to nothing', () => {
    const before = process.memoryUsage().heapUsed;
    const counters = Array.from({ length: 200 }, () => new SlidingWindowCounter(10, 60_000, 50_000));
    const grown = process.memoryUsage().heapUsed - before;
    // A preallocated 50 000-entry LRU costs about a megabyte each: 200 of them would be 200 MB.
    assert.ok(grown < 20 * 1024 * 1024, `200 idle rule counters took ${grown} bytes`);
    assert.equal(counters[0].size, 0);
  });

  it('joins the budget on its first visitor: rules no visitor reached neither hold a map nor shrink the fair share', () => {
    const budget = new VisitorBudget(10);
    const idle = Array.from({ length: 4 }, () => new VisitorMap<number>(1000, budget));
    const busy = new VisitorMap<number>(1000, budget);
    assert.equal(budget.fairShare, 10);
    busy.add('a', 1);
    assert.equal(budget.fairShare, 10); // one member, not five
    idle[0].add('b', 2);
    assert.equal(budget.fairShare, 5);
    // Released before any visitor: nothing to give back, no member to remove; the budget's count is untouched.
    idle[1].release();
    assert.equal(budget.used, 2);
    assert.equal(idle[1].get('a'), undefined);
    idle[0].release();
    assert.equal(budget.used, 1);
    assert.equal(budget.fairShare, 10);
    // A released map may still be used by a stage compiled before (bounded by its own max, outside the budget).
    idle[0].add('c', 3);
    assert.equal(idle[0].get('c'), 3);
    assert.equal(budget.used, 1);
  });

  it('keeps one state per rule while its version holds, replacing (and freeing) it when the version changes', () => {
    const counters = new RateLimitCounters({ maxKeysPerRule: 10, maxRules: 2 });
    const a1 = counters.keep('a', 'v1', () => new State(1));
    assert.equal(counters.keep('a', 'v1', () => new State(2)), a1);
    const a2 = counters.keep('a', 'v2', () => new State(3));
    assert.notEqual(a2, a1);
    assert.equal(a1.released, true);
    // Beyond maxRules the least recently used rule's state goes.
    const b = counters.keep('b', 'v1', () => new State(10));
    a2.used = 20;
    counters.keep('c', 'v1', () => new State(5));
    assert.equal(b.released, true);
    assert.equal(a2.released, false);
    assert.equal(counters.size, 2);
  });

  it('reclaims from the largest of a round-robin sample of rules, reaching a flooded rule among hundreds of quiet ones', () => {
    const budget = new VisitorBudget(1_000);
    const quiet = Array.from({ length: 300 }, () => new VisitorMap<number>(100, budget));
    const flooded = new VisitorMap<number>(10_000, budget);
    quiet.forEach((m, i) => m.add(`q${i}`, i));
    for (let i = 0; budget.used < budget.max; i++) flooded.add(`f${i}`, i);
    const before = flooded.size;
    // Each quiet rule gains a second visitor: the budget is full, so each takes one from the largest rule its sample
    // (64 rules, round-robin) or an earlier reclaim found. Until the round reaches the flooded rule (at most
    // ceil(301 / 64) reclaims), a quiet rule may give up its own; from then on the flooded rule gives.
    quiet.forEach((m, i) => m.add(`q${i}-2`, i));
    assert.equal(budget.used, budget.max);
    const gaveOwn = quiet.filter((m) => m.size === 1).length;
    assert.ok(gaveOwn <= Math.ceil(301 / 64), `${gaveOwn} quiet rules gave up their own visitor`);
    assert.equal(flooded.size, before - (300 - gaveOwn));
  });

  it('drops by second chance, so a compile past the bound costs the same however many rules are kept', () => {
    let asked = 0;
    const states: State[] = [];
    const counting = (used: number) => {
      const state = new State(used);
      state.lastUse = () => (asked++, state.used);
      states.push(state);
      return state;
    };
    const counters = new RateLimitCounters({ maxKeysPerRule: 10, maxRules: 10_000 });
    for (let i = 0; i < 10_000; i++) counters.keep(`r${i}`, 'v1', () => counting(i));
    // r0 and r1 were used since they were kept: they are spared once, the idle rules after them go.
    states[0].used = 20_000;
    states[1].used = 20_001;
    asked = 0;
    for (let i = 0; i < 100; i++) counters.keep(`new${i}`, 'v1', () => counting(30_000 + i));
    assert.ok(asked <= 100 * 2 + 2 * 2, `${asked} states looked at for 100 drops`);
    assert.equal(counters.size, 10_000);
    const released = states.flatMap((s, i) => (s.released ? [i] : []));
    assert.deepEqual(released, Array.from({ length: 100 }, (_, i) => i + 2), 'the oldest idle rules went, the used ones stayed');
  });
});
