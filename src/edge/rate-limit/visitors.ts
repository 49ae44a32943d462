// Where an edge keeps per-visitor rate-limit state (window counts, cluster "blocked until" flags): bounded per rule
// and across all rules, apart from the stage cache, so nothing but rate-limit traffic can make a rule forget a visitor.
//
// docs/rate-limits.md "The window" gives the bounds to operators. Three of them:
// - per rule: at most EDGE_RATE_LIMIT_MAX_KEYS visitors, the least recently seen forgotten first;
// - per edge: at most `totalKeys` visitors over every rule; when full, the rule holding the most gives one up, so a
//   flood through one rule (or many rules matching one flood) cannot push a quiet rule's visitors out;
// - per edge: at most `maxRules` rules' state, the least recently used rule's dropped first (RateLimitCounters).
// Memory is taken as visitors arrive: a rule no visitor has reached holds no map and is no member of the budget (at
// 100k rules, the empty maps and the budget's set of them were ~1.4 KiB a rule, docs/performance.md "Memory at scale").

/** Rules' maps looked at per reclaim (VisitorBudget.reclaimFor). */
const RECLAIM_SAMPLE = 64;

/** The visitors held across every VisitorMap of one edge, and the most it may hold. */
export class VisitorBudget {
  used = 0;
  private readonly members = new Set<VisitorMap<unknown>>();
  /** Where the next reclaim goes on reading members (a Set's iterator skips deleted and reaches added ones). */
  private cursor: Iterator<VisitorMap<unknown>> = this.members.values();
  /** The largest map the last reclaim found. */
  private heaviest: VisitorMap<unknown> | null = null;

  constructor(readonly max: number) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`a visitor budget must be a positive integer, got ${max}`);
  }

  join(map: VisitorMap<unknown>): void {
    this.members.add(map);
  }

  leave(map: VisitorMap<unknown>): void {
    this.members.delete(map);
  }

  /**
   * The budget is full: `asking` (below its fair share) takes a visitor from the largest of up to RECLAIM_SAMPLE maps,
   * read round-robin from where the last reclaim stopped, and the largest the last reclaim found. Sampled, not a scan of every rule's map, so under a flood of
   * new visitors with the budget full each one costs the same however many rules the edge holds; a map far over its
   * share is met within members / RECLAIM_SAMPLE reclaims.
   */
  reclaimFor(asking: VisitorMap<unknown>): void {
    // The largest met so far is kept as a candidate, so a flooded rule once found stays the one that gives.
    let largest: VisitorMap<unknown> | null = this.heaviest !== null && this.heaviest !== asking && this.members.has(this.heaviest) ? this.heaviest : null;
    for (let i = 0; i < RECLAIM_SAMPLE; i++) {
      let next = this.cursor.next();
      if (next.done) {
        this.cursor = this.members.values();
        next = this.cursor.next();
        if (next.done) break;
      }
      const m = next.value;
      if (m !== asking && (largest === null || m.size > largest.size)) largest = m;
    }
    this.heaviest = largest;
    if (largest !== null && largest.size > asking.size) largest.evictOldest();
    else asking.evictOldest();
  }

  /** How many visitors a map may hold before it gives up its own when the budget is full. */
  get fairShare(): number {
    return Math.max(1, Math.floor(this.max / Math.max(1, this.members.size)));
  }
}

/** The map of a VisitorMap that holds nobody: shared, never written (a first visitor gets a map of its own). */
const NOBODY: Map<string, unknown> = new Map();

/**
 * Visitor key → state, least recently seen first (a Map re-inserted on every use: a few tens of ns, no allocation).
 * At most `max` entries; within a shared VisitorBudget, at most the budget's total across maps. The map is made, and
 * the budget joined, on the first visitor: most rules of a large edge never see one.
 */
export class VisitorMap<V> {
  private entries: Map<string, V> = NOBODY as Map<string, V>;
  /** In the budget's members (from the first visitor until release). */
  private joined = false;
  /**
   * The key seen last (undefined: unknown): a visitor's requests come in runs (keep-alive), and re-inserting the
   * newest key changes no order, so get() skips it (a Map delete and set, ~0.4 µs per rule in the edge's profile).
   */
  private newest: string | undefined;

  constructor(
    private readonly max: number,
    private budget?: VisitorBudget,
  ) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`a visitor bound must be a positive integer, got ${max}`);
  }

  /** The state of `key`, now the most recently seen; undefined when not held. */
  get(key: string): V | undefined {
    const value = this.entries.get(key);
    if (value !== undefined && key !== this.newest) {
      this.entries.delete(key);
      this.entries.set(key, value);
      this.newest = key;
    }
    return value;
  }

  /** Holds a new visitor, making room first (this map's oldest, or, when the edge is full, the fullest map's). */
  add(key: string, value: V): void {
    if (this.entries.has(key)) {
      this.entries.delete(key);
      this.entries.set(key, value);
      this.newest = key;
      return;
    }
    const budget = this.budget;
    if (this.entries === NOBODY) this.entries = new Map();
    if (budget !== undefined && !this.joined) {
      budget.join(this as VisitorMap<unknown>);
      this.joined = true;
    }
    if (this.entries.size >= this.max) this.evictOldest();
    else if (budget !== undefined && budget.used >= budget.max) {
      if (this.entries.size >= budget.fairShare) this.evictOldest();
      else budget.reclaimFor(this as VisitorMap<unknown>);
    }
    this.entries.set(key, value);
    this.newest = key;
    if (budget !== undefined) budget.used++;
  }

  delete(key: string): void {
    if (key === this.newest) this.newest = undefined;
    if (this.entries.delete(key) && this.budget !== undefined) this.budget.used--;
  }

  evictOldest(): void {
    const oldest = this.entries.keys().next();
    if (!oldest.done) this.delete(oldest.value);
  }

  /**
   * Forgets every visitor and leaves the budget (the rule's state was dropped or replaced). A stage compiled before
   * may still use the map until its endpoint is recompiled: bounded by `max` alone meanwhile.
   */
  release(): void {
    if (this.budget !== undefined) {
      this.budget.used -= this.entries.size;
      if (this.joined) this.budget.leave(this as VisitorMap<unknown>);
      this.joined = false;
      this.budget = undefined;
    }
    this.entries = NOBODY as Map<string, V>;
    this.newest = undefined;
  }

  get size(): number {
    return this.entries.size;
  }
}

/** A rule's state as RateLimitCounters keeps it. */
export interface KeptRuleState {
  /** When the rule last judged a request, or was (re)compiled: ms by the rate-limit clock. */
  lastUse(): number;
  /** Frees its visitors (the state is dropped or replaced). */
  release(): void;
}

export interface RateLimitCountersOptions {
  /** Visitors per rule (EDGE_RATE_LIMIT_MAX_KEYS). */
  maxKeysPerRule: number;
  /** Visitors across every rule of the edge (DEFAULT_TOTAL_KEYS). */
  totalKeys?: number;
  /** Rules whose state the edge keeps (DEFAULT_MAX_RULE_STATES). */
  maxRules?: number;
}

/** Visitors held per edge across rules by default: about 150 MB at ~150 bytes each. */
export const DEFAULT_TOTAL_KEYS = 1_000_000;
/** Requests held by throttle rules at once per edge (src/edge/stages/rate-limit.ts HeldRequests). */
export const DEFAULT_MAX_HELD = 10_000;
/**
 * Requests held by throttle rules on this edge, against the most it may hold at once (DEFAULT_MAX_HELD): each is a
 * socket, a context and a place in a queue. Per edge, so many visitors each filling their own queue cannot make it
 * hold without bound; beyond it a throttle rule refuses (429) as `block` would.
 */
export class HeldRequests {
  count = 0;
  constructor(readonly max: number = DEFAULT_MAX_HELD) {}
}

/** The most rules one drop looks at (RateLimitCounters.dropLeastUsed). */
const EVICTION_SCAN = 1024;

/** Rules' state kept per edge by default (state of deleted or long-unused rules goes first). */
export const DEFAULT_MAX_RULE_STATES = 20_000;

/**
 * The edge's rate-limit state by rule: one per rule uuid, reused by every recompile of its endpoint while what the
 * rule counts is unchanged (`version`), replaced (and its visitors freed) when that changes. Apart from StageMemory
 * on purpose: that cache is shared by every stage of every endpoint and ordered by compile time, so churn elsewhere
 * (other endpoints compiled, say by a visitor touching many host names) would reset a rule's windows.
 */
export class RateLimitCounters {
  readonly budget: VisitorBudget;
  readonly maxKeysPerRule: number;
  private readonly maxRules: number;
  private readonly rules = new Map<string, { version: string; state: KeptRuleState; checkedAt: number }>();

  constructor(options: RateLimitCountersOptions) {
    this.maxKeysPerRule = options.maxKeysPerRule;
    this.budget = new VisitorBudget(options.totalKeys ?? DEFAULT_TOTAL_KEYS);
    this.maxRules = options.maxRules ?? DEFAULT_MAX_RULE_STATES;
    if (!Number.isInteger(this.maxRules) || this.maxRules < 1) throw new RangeError(`maxRules must be a positive integer, got ${this.maxRules}`);
  }

  /** The state kept for `rule` if built for `version`; else `make()`'s, kept from now on (the old one freed). */
  keep<T extends KeptRuleState>(rule: string, version: string, make: (budget: VisitorBudget) => T): T {
    const kept = this.rules.get(rule);
    if (kept !== undefined && kept.version === version) return kept.state as T;
    if (kept !== undefined) {
      kept.state.release();
      this.rules.delete(rule);
    } else if (this.rules.size >= this.maxRules) {
      this.dropLeastUsed();
    }
    const state = make(this.budget);
    this.rules.set(rule, { version, state, checkedAt: state.lastUse() });
    return state;
  }

  /** Rules whose state is held. */
  get size(): number {
    return this.rules.size;
  }

  /**
   * Drops a rule's state by second chance (the CLOCK approximation of least recently used): rules are looked at in
   * keep order; one used since it was last looked at is moved to the back and spared, the first one not used since
   * goes. Each spared rule was used in between, so a drop costs O(1) amortised, where a scan of every rule for the
   * least used made loading 100k endpoints each with a rule take over a minute. A scan is cut at EVICTION_SCAN rules,
   * dropping the least used of those.
   */
  private dropLeastUsed(): void {
    let victim: string | undefined;
    let oldest = Infinity;
    let seen = 0;
    for (const [uuid, kept] of this.rules) {
      const used = kept.state.lastUse();
      if (used <= kept.checkedAt) {
        victim = uuid;
        break;
      }
      if (used < oldest) {
        oldest = used;
        victim = uuid;
      }
      if (++seen === EVICTION_SCAN) break;
      kept.checkedAt = used;
      this.rules.delete(uuid);
      this.rules.set(uuid, kept);
    }
    if (victim === undefined) return;
    this.rules.get(victim)!.state.release();
    this.rules.delete(victim);
  }
}
