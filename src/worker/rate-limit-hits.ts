// Rate-limit hit statistics in the worker: sums the edges' rate_limit_hits records of one read into per-rule totals
// and UTC-day buckets for the store, and prunes buckets past the 7-day window on the janitor's cadence.
import type { Logger } from '../shared/log.ts';
import type { RateLimitHitsRecord } from '../shared/records/types.ts';
import type { Database, Queryable } from '../store/db.ts';
import { addRuleHits, pruneRuleHitDays, utcDay, type RuleHitDay, type RuleHitTotal } from '../store/rate-limit-hits.ts';
import { HIT_DAYS } from '../store/rate-limit-rules.ts';
import type { WorkerObserver } from './metrics.ts';
import { PeriodicJob } from './periodic.ts';
import type { RecordOrigin } from './records.ts';
import { freshRecords } from './traffic.ts';

/**
 * One read's records summed: per rule the hits and the latest match, and per (rule, UTC day of the record's flush)
 * the hits. A flush time ahead of `now` (a fast edge clock) counts today; days already outside the window are
 * left out of the buckets (they still count in hit_count).
 */
export function sumRuleHits(records: readonly RateLimitHitsRecord[], now: Date = new Date()): { totals: RuleHitTotal[]; days: RuleHitDay[] } {
  const totals = new Map<string, { hits: number; last: number }>();
  const days = new Map<string, RuleHitDay>();
  const firstDay = utcDay(now, HIT_DAYS - 1);
  for (const record of records) {
    const day = utcDay(new Date(Math.min(Date.parse(record.at), now.getTime())));
    for (const [uuid, hits] of Object.entries(record.counts)) {
      const last = Date.parse(record.last[uuid] ?? record.at);
      const total = totals.get(uuid);
      if (total) {
        total.hits += hits;
        if (last > total.last) total.last = last;
      } else totals.set(uuid, { hits, last });
      if (day < firstDay) continue;
      const key = `${uuid} ${day}`;
      const bucket = days.get(key);
      if (bucket) bucket.hits += hits;
      else days.set(key, { uuid, day, hits });
    }
  }
  return {
    totals: [...totals].map(([uuid, t]) => ({ uuid, hits: t.hits, last: new Date(t.last) })),
    days: [...days.values()],
  };
}

/**
 * The record handler for kind rate_limit_hits (src/worker/records.ts). Each batch's hits are added once: its key is
 * claimed in applied_record_batches in the same transaction, so a redelivered batch adds nothing. Without origins
 * (callers outside the record worker) every record is added.
 */
export async function writeRuleHits(tx: Queryable, records: RateLimitHitsRecord[], origins?: RecordOrigin[]): Promise<void> {
  const fresh = origins === undefined ? records : await freshRecords(tx, records, origins);
  const { totals, days } = sumRuleHits(fresh);
  await addRuleHits(tx, totals, days);
}

/** Deletes daily buckets past the window, every `intervalMs`. */
export function ruleHitPruner(db: Database, options: { intervalMs: number; logger: Logger; metrics?: Pick<WorkerObserver, 'retentionDeleted'> }): PeriodicJob {
  return new PeriodicJob('rate-limit hit pruning', options.intervalMs, options.logger, async () => {
    const removed = await pruneRuleHitDays(db);
    options.metrics?.retentionDeleted('rate_limit_hits_daily', removed);
    return removed > 0 ? { msg: 'pruned rate-limit hit buckets past the window', fields: { removed } } : null;
  });
}
