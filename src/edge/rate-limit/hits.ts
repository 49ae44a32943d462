// Hit statistics of rate-limit rules: the rate-limit stage tells this counter of every rule a request matched; every
// couple of seconds the counts go out as one traffic record, which the worker rolls into hit_count and daily buckets.
import type { RateLimitHitsRecord, RecordSink } from '../../shared/records/types.ts';
import { RECORD_LIMITS } from '../../shared/records/types.ts';

/** A rule's tally for the current interval. Mutated in place, so a hit allocates nothing after the rule's first. */
interface Tally {
  count: number;
  /** ms since the epoch of the last match. */
  last: number;
}

export interface RuleHitsOptions {
  /** Where the records go (src/shared/records). */
  sink: RecordSink;
  /** This edge's node id, written into each record. */
  edge: string;
  /** How often the counts are sent (ms); 0 or less: only on flush(). */
  intervalMs?: number;
  /** Distinct rules counted per interval; hits of further rules are dropped (and counted in `dropped`). */
  maxRules?: number;
  now?: () => number;
}

export class RuleHits {
  private tallies = new Map<string, Tally>();
  private readonly sink: RecordSink;
  private readonly edge: string;
  private readonly maxRules: number;
  private readonly now: () => number;
  private readonly timer: NodeJS.Timeout | null;
  /** Hits not counted because the interval already held maxRules rules. */
  dropped = 0;

  constructor(options: RuleHitsOptions) {
    const intervalMs = options.intervalMs ?? 2_000;
    const maxRules = options.maxRules ?? RECORD_LIMITS.rulesPerRecord;
    if (!Number.isInteger(intervalMs)) throw new RangeError(`RuleHits intervalMs must be an integer, got ${intervalMs}`);
    if (!Number.isInteger(maxRules) || maxRules < 1 || maxRules > RECORD_LIMITS.rulesPerRecord) {
      throw new RangeError(`RuleHits maxRules must be an integer from 1 to ${RECORD_LIMITS.rulesPerRecord}, got ${maxRules}`);
    }
    this.sink = options.sink;
    this.edge = options.edge;
    this.maxRules = maxRules;
    this.now = options.now ?? Date.now;
    this.timer = intervalMs > 0 ? setInterval(() => this.flush(), intervalMs) : null;
    // Statistics never keep a process alive; close() sends the last interval.
    this.timer?.unref();
  }

  /** A request matched rule `ruleUuid` (at `at`, ms, when the caller already read the clock). */
  hit(ruleUuid: string, at: number = this.now()): void {
    const tally = this.tallies.get(ruleUuid);
    if (tally !== undefined) {
      tally.count++;
      if (at > tally.last) tally.last = at;
    } else if (this.tallies.size < this.maxRules) {
      this.tallies.set(ruleUuid, { count: 1, last: at });
    } else {
      this.dropped++;
    }
  }

  /** Sends the interval's counts as one record (nothing when no rule matched) and starts a new interval. */
  flush(): void {
    if (this.tallies.size === 0) return;
    const tallies = this.tallies;
    this.tallies = new Map();
    const record: RateLimitHitsRecord = { kind: 'rate_limit_hits', edge: this.edge, at: new Date(this.now()).toISOString(), counts: {}, last: {} };
    for (const [uuid, tally] of tallies) {
      record.counts[uuid] = tally.count;
      record.last[uuid] = new Date(tally.last).toISOString();
    }
    this.sink.append([record]);
  }

  /** Stops the timer and sends what was counted since the last flush (shutdown). */
  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.flush();
  }
}
