// Hit statistics of rate-limit rules in the store: the worker adds what edges counted (hit_count, last_matched, one
// bucket per rule and UTC day) and prunes buckets past the 7-day window the API shows (rate-limit-rules.ts reads it).
import type { Queryable } from './db.ts';
import { HIT_DAYS } from './rate-limit-rules.ts';

export interface RuleHitTotal {
  uuid: string;
  hits: number;
  /** The latest match; a time ahead of the database's clock is taken as now. */
  last: Date;
}

export interface RuleHitDay {
  uuid: string;
  /** UTC day, YYYY-MM-DD. */
  day: string;
  hits: number;
}

/** YYYY-MM-DD of the UTC day `days` before `now`'s. */
export function utcDay(now: Date, days = 0): string {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() - days)).toISOString().slice(0, 10);
}

/**
 * Adds hits, in the caller's transaction. Rules are locked in id order first, so two workers adding to the same
 * rules queue up instead of deadlocking; unknown uuids (deleted rules) match nothing. Neither `updated_at` nor the
 * feed moves: these are statistics, not config. Returns the rules updated.
 */
export async function addRuleHits(q: Queryable, totals: readonly RuleHitTotal[], days: readonly RuleHitDay[]): Promise<number> {
  if (totals.length === 0) return 0;
  await q.query('SELECT id FROM rate_limit_rules WHERE uuid = ANY($1::uuid[]) ORDER BY id FOR UPDATE', [totals.map((t) => t.uuid)]);
  const updated = await q.query(
    `UPDATE rate_limit_rules r
        SET hit_count = r.hit_count + h.hits,
            last_matched = GREATEST(coalesce(r.last_matched, '-infinity'::timestamptz), LEAST(h.last, now()))
       FROM unnest($1::uuid[], $2::bigint[], $3::timestamptz[]) AS h(uuid, hits, last)
      WHERE r.uuid = h.uuid`,
    [totals.map((t) => t.uuid), totals.map((t) => t.hits), totals.map((t) => t.last.toISOString())],
  );
  if (days.length > 0) {
    // (uuid, day) pairs are unique in `days`: ON CONFLICT cannot touch one row twice in a statement.
    await q.query(
      `INSERT INTO rate_limit_hits_daily (rule_id, day, hits)
       SELECT r.id, h.day, h.hits FROM unnest($1::uuid[], $2::date[], $3::bigint[]) AS h(uuid, day, hits)
         JOIN rate_limit_rules r ON r.uuid = h.uuid
       ON CONFLICT (rule_id, day) DO UPDATE SET hits = rate_limit_hits_daily.hits + EXCLUDED.hits`,
      [days.map((d) => d.uuid), days.map((d) => d.day), days.map((d) => d.hits)],
    );
  }
  return updated.rowCount;
}

/** Deletes buckets older than the window (HIT_DAYS days up to `now`'s UTC day); returns how many went. */
export async function pruneRuleHitDays(q: Queryable, now: Date = new Date()): Promise<number> {
  const res = await q.query('DELETE FROM rate_limit_hits_daily WHERE day < $1::date', [utcDay(now, HIT_DAYS - 1)]);
  return res.rowCount;
}
