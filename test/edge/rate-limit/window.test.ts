// The sliding-window counter's math with a hand-driven clock: the estimate, when a refused request fits again, the
// accuracy under steady streams at 0.5x, 1x and 2x the limit and a burst, and the memory bound.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SlidingWindowCounter, decide, slidingEstimate, waitMs } from '../../../src/edge/rate-limit/window.ts';

/** Requests at a steady rate over `windows` windows (offset half a gap so none lands on a window edge); counts. */
function steady(limit: number, windowMs: number, rateFactor: number, windows: number) {
  const counter = new SlidingWindowCounter(limit, windowMs);
  const gap = windowMs / (limit * rateFactor);
  let allowed = 0;
  let refusedUnder = 0;
  let sent = 0;
  for (let t = gap / 2; t < windows * windowMs; t += gap) {
    sent++;
    const d = counter.take('v', t);
    if (d.allowed) allowed++;
    // The exact count of the last window: what a perfect limiter would judge by.
    else if (rateFactor <= 1) refusedUnder++;
  }
  return { allowed, refusedUnder, sent };
}

describe('sliding window', () => {
  it('estimates previous x overlap + current (Cloudflare: 42 x 45/60 + 18 = 49.5)', () => {
    assert.equal(slidingEstimate(42, 18, 15_000, 60_000), 49.5);
    assert.equal(slidingEstimate(0, 3, 59_999, 60_000), 3);
    assert.equal(slidingEstimate(10, 0, 0, 60_000), 10);
  });

  it('admits exactly the limit in a first window, then refuses with the wait until the estimate drops', () => {
    const c = new SlidingWindowCounter(5, 1000);
    for (let i = 0; i < 5; i++) assert.equal(c.take('a', 100 + i).allowed, true, `request ${i}`);
    const refused = c.take('a', 200);
    assert.equal(refused.allowed, false);
    assert.equal(refused.remaining, 0);
    // Next window: 5 x (1000 - e) / 1000 < 5 as soon as e > 0; so 800 ms from t=200 (the window starts at 1000).
    assert.equal(refused.retryAfterMs, 801);
    assert.equal(c.take('a', 200 + refused.retryAfterMs).allowed, true);
    // Another visitor has its own count.
    assert.equal(c.take('b', 200).allowed, true);
  });

  it('computes the wait inside the window when the previous window weighs', () => {
    // previous 10, current 4, limit 10, at 300 ms: 10 x 0.7 + 4 = 11 ≥ 10; fits when 10 x (1 - e) < 6, e > 400 ms.
    const w = waitMs(10, 4, 300, 1000, 10);
    assert.equal(w, 101);
    assert.ok(slidingEstimate(10, 4, 300 + w, 1000) < 10);
    assert.ok(slidingEstimate(10, 4, 300 + w - 2, 1000) >= 10);
    assert.equal(waitMs(10, 4, 500, 1000, 10), 0);
    const d = decide(10, 4, 500, 1000, 10);
    assert.deepEqual(d, { allowed: true, remaining: 0, retryAfterMs: 0 });
  });

  for (const [factor, windows] of [[0.5, 20], [1, 20], [2, 20]] as const) {
    it(`under a steady stream at ${factor}x the limit admits within 5 % of the ideal, refusing nothing below the limit`, () => {
      const limit = 100;
      const { allowed, refusedUnder, sent } = steady(limit, 60_000, factor, windows);
      const ideal = Math.min(sent, limit * windows);
      assert.equal(refusedUnder, 0);
      assert.ok(Math.abs(allowed - ideal) / ideal <= 0.05, `allowed ${allowed}, ideal ${ideal}`);
    });
  }

  it('admits exactly the limit of a burst of 200 at one instant', () => {
    const c = new SlidingWindowCounter(100, 60_000);
    let allowed = 0;
    for (let i = 0; i < 200; i++) if (c.take('v', 30_000).allowed) allowed++;
    assert.equal(allowed, 100);
  });

  it('keeps at most maxKeys visitors, forgetting the least recently seen', () => {
    const c = new SlidingWindowCounter(1, 1000, 100);
    for (let i = 0; i < 1000; i++) c.take(`10.0.${i >> 8}.${i & 255}`, 10);
    assert.equal(c.size, 100);
    // The most recent ones are still refused; the first ones were forgotten and count from zero.
    assert.equal(c.take('10.0.3.231', 10).allowed, false);
    assert.equal(c.take('10.0.0.0', 10).allowed, true);
  });

  it('keeps a visitor in their window when the clock steps back across a window boundary', () => {
    const c = new SlidingWindowCounter(2, 1000);
    assert.equal(c.take('v', 10_100).allowed, true);
    assert.equal(c.take('v', 10_200).allowed, true);
    assert.equal(c.take('v', 10_300).allowed, false);
    // NTP steps the clock back into the previous window: no empty window handed out.
    assert.equal(c.take('v', 9_900).allowed, false);
    assert.equal(c.admit('v', 9_950) > 0, true);
  });

  it('refuses a limit or window that is not a positive integer', () => {
    assert.throws(() => new SlidingWindowCounter(0, 1000), RangeError);
    assert.throws(() => new SlidingWindowCounter(1.5, 1000), RangeError);
    assert.throws(() => new SlidingWindowCounter(1, 0), RangeError);
  });
});
