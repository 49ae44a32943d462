// The sliding-window counter of firewall rate limits (docs/rate-limits.md "Enforcement at the edge"): Cloudflare's
// approximation, the previous fixed window's count weighted by how much of it the sliding window still covers, plus the current one's.
import type { Clock } from '../../shared/clock.ts';
import { VisitorMap, type VisitorBudget } from './visitors.ts';

/**
 * Where time comes from: the wall clock at the edge, a hand-driven one in tests and the accuracy bench (so no result
 * depends on the machine's speed). `setTimeout` is what throttled requests wait on.
 */
export interface RateLimitClock extends Clock {
  setTimeout(fn: () => void, ms: number): { unref?(): unknown };
}

export const SYSTEM_CLOCK: RateLimitClock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
};

/**
 * The estimate of requests in the sliding window ending `elapsedMs` into the current fixed window:
 * previous × (window − elapsed) / window + current (blog.cloudflare.com "counting things, a lot of different things").
 */
export function slidingEstimate(previous: number, current: number, elapsedMs: number, windowMs: number): number {
  return (previous * (windowMs - elapsedMs)) / windowMs + current;
}

/**
 * How long until a request fits (the estimate falls below `limit`), in ms, from `elapsedMs` into the current window;
 * 0 when it fits now. A request fits while the estimate before it is below the limit, so a fixed window admits
 * exactly `limit` and the sliding one at most one more than the exact count (the estimate is fractional).
 */
export function waitMs(previous: number, current: number, elapsedMs: number, windowMs: number, limit: number): number {
  if (slidingEstimate(previous, current, elapsedMs, windowMs) < limit) return 0;
  if (current < limit) {
    // Within this window: previous × (W − e) / W < limit − current  ⇔  e > W − W × (limit − current) / previous.
    const at = Math.floor(windowMs - (windowMs * (limit - current)) / previous) + 1;
    if (at < windowMs) return Math.max(1, at - elapsedMs);
  }
  // In the next window the current count becomes the previous one: current × (W − e) / W < limit.
  const next = current <= limit ? Math.floor(windowMs - (windowMs * limit) / current) + 1 : windowMs;
  return windowMs - elapsedMs + Math.max(0, next);
}

/** The counts of one (rule, visitor) pair: fixed window `window` (its index since the epoch) and the one before. */
export interface WindowCounts {
  window: number;
  current: number;
  previous: number;
}

/** What a rule's counter said of one request. */
export interface WindowDecision {
  /** Counted: the request fits. */
  allowed: boolean;
  /** Requests still allowed now (the limit less the estimate, rounded down, never negative). */
  remaining: number;
  /** Ms until a refused request would fit; 0 when allowed. */
  retryAfterMs: number;
}

/**
 * Counts of one rule across visitors, in memory. Bounded: at most `maxKeys` visitors per rule, the least recently
 * seen forgotten first (an address forgotten starts from zero: under a flood of distinct addresses the limiter
 * forgets the quietest, never the memory bound), and within the edge's `budget` across rules (./visitors.ts). An
 * entry is three numbers and a key string, about 150 bytes with the map's bookkeeping; memory is taken per visitor
 * seen, so an idle rule costs next to nothing.
 */
export class SlidingWindowCounter {
  private readonly counts: VisitorMap<WindowCounts>;
  /** When the rule last counted or judged a request (ms; 0: never): which rule's state an edge drops first. */
  lastUse = 0;

  constructor(
    readonly limit: number,
    readonly windowMs: number,
    maxKeys = DEFAULT_MAX_KEYS,
    budget?: VisitorBudget,
  ) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`a rate limit must be a positive integer, got ${limit}`);
    if (!Number.isInteger(windowMs) || windowMs < 1) throw new RangeError(`a window must be a positive number of ms, got ${windowMs}`);
    this.counts = new VisitorMap(maxKeys, budget);
  }

  /**
   * The counts of `key` rolled forward to the window holding `now` (created at zero). A clock that stepped back
   * (NTP) is read as still in the counts' window: going back must not hand the visitor an empty window.
   */
  private rolled(key: string, now: number): WindowCounts {
    this.lastUse = now;
    let window = Math.floor(now / this.windowMs);
    let counts = this.counts.get(key);
    if (counts === undefined) {
      counts = { window, current: 0, previous: 0 };
      this.counts.add(key, counts);
    } else if (counts.window > window) {
      window = counts.window;
    } else if (counts.window !== window) {
      counts.previous = counts.window === window - 1 ? counts.current : 0;
      counts.current = 0;
      counts.window = window;
    }
    return counts;
  }

  /** Ms into the counts' window (0 when the clock stepped back before it). */
  private elapsed(c: WindowCounts, now: number): number {
    return Math.max(0, now - c.window * this.windowMs);
  }

  /** Forgets every visitor (the rule's state was dropped or replaced; ./visitors.ts). */
  release(): void {
    this.counts.release();
  }

  /** Counts a request of `key` at `now` if it fits; says how it stands either way. */
  take(key: string, now: number): WindowDecision {
    const c = this.rolled(key, now);
    return decide(c.previous, c.current, this.elapsed(c, now), this.windowMs, this.limit, () => c.current++);
  }

  /**
   * take() without the description: counts the request and returns 0 when it fits, else the ms until it would
   * (nothing counted). The stage's hot path: no allocation when the request fits.
   */
  admit(key: string, now: number): number {
    const c = this.rolled(key, now);
    const elapsed = this.elapsed(c, now);
    if (slidingEstimate(c.previous, c.current, elapsed, this.windowMs) < this.limit) {
      c.current++;
      return 0;
    }
    return waitMs(c.previous, c.current, elapsed, this.windowMs, this.limit);
  }

  /** Whether a request of `key` would fit at `now`, without counting it: ms to wait (0: it fits). */
  wait(key: string, now: number): number {
    const c = this.rolled(key, now);
    return waitMs(c.previous, c.current, this.elapsed(c, now), this.windowMs, this.limit);
  }

  get size(): number {
    return this.counts.size;
  }
}

/** Default bound of visitors tracked per rule (SlidingWindowCounter). */
export const DEFAULT_MAX_KEYS = 50_000;

/**
 * The decision from one pair of counts, shared by the in-memory counter and the Redis script's answer (cluster.ts),
 * so both scopes judge alike. `count` is called when the request fits.
 */
export function decide(previous: number, current: number, elapsedMs: number, windowMs: number, limit: number, count?: () => void): WindowDecision {
  const wait = waitMs(previous, current, elapsedMs, windowMs, limit);
  const allowed = wait === 0;
  if (allowed) {
    count?.();
    current++;
  }
  const estimate = slidingEstimate(previous, current, elapsedMs, windowMs);
  return {
    allowed,
    remaining: Math.max(0, Math.floor(limit - estimate)),
    retryAfterMs: wait,
  };
}
