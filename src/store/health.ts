// Health checks in the store: each endpoint's check configuration, the prober's schedule and lease, the probe rows
// and the cached last verdict (docs/health-checks.md). The control API, the prober and the alert evaluator read here.
import type { Queryable } from './db.ts';

export const HEALTH_STATUSES = ['healthy', 'unhealthy', 'error', 'timeout'] as const;
export type HealthStatus = (typeof HEALTH_STATUSES)[number];

/** docs/api.md limits: the interval's range and default, the path's default and length. */
export const HEALTH_LIMITS = Object.freeze({
  minIntervalSeconds: 60,
  maxIntervalSeconds: 86400,
  defaultIntervalSeconds: 60,
  defaultPath: '/',
  maxPathLength: 255,
  recentChecks: 50,
  /** The cached last verdict is ignored (and cleared by the worker) once older than this. */
  verdictMaxAgeDays: 7,
  /** Probe rows older than this are removed. */
  probeRetentionDays: 30,
});

/** The stored configuration; null path and interval mean the defaults. */
export interface HealthCheckRow {
  endpoint_id: number;
  enabled: boolean;
  path: string | null;
  interval_seconds: number | null;
  updated_at: Date;
}

export interface ProbeRow {
  id: number;
  status: HealthStatus;
  status_code: number | null;
  latency_ms: number;
  error_message: string | null;
  checked_at: Date;
}

export interface Verdict {
  status: HealthStatus;
  checked_at: Date;
  /** Whether the check is enabled now: a verdict outlives disabling (up to 7 days), a reader may want to know. */
  enabled: boolean;
}

/** The stored configuration of one endpoint's check, or null when it was never configured (all defaults). */
export async function findHealthCheck(db: Queryable, endpointId: number, opts: { forUpdate?: boolean } = {}): Promise<HealthCheckRow | null> {
  const { rows } = await db.query<HealthCheckRow>(
    `SELECT endpoint_id, enabled, path, interval_seconds, updated_at FROM health_checks WHERE endpoint_id = $1${opts.forUpdate ? ' FOR UPDATE' : ''}`,
    [endpointId],
  );
  return rows[0] ?? null;
}

/**
 * Writes the whole configuration (the caller merged a partial update into the current one). Enabling a check, or
 * changing its interval, clears its schedule: the prober then gives it a first probe time, spread over at most 25 s
 * (with a poll, the 30 s propagation docs/api.md promises), so a thousand checks enabled at once do not fire in the same second.
 */
export async function saveHealthCheck(tx: Queryable, endpointId: number, check: { enabled: boolean; path: string | null; interval_seconds: number | null }): Promise<HealthCheckRow> {
  const { rows } = await tx.query<HealthCheckRow>(
    `INSERT INTO health_checks (endpoint_id, enabled, path, interval_seconds) VALUES ($1, $2, $3, $4)
     ON CONFLICT (endpoint_id) DO UPDATE SET
       enabled = EXCLUDED.enabled,
       path = EXCLUDED.path,
       interval_seconds = EXCLUDED.interval_seconds,
       next_probe_at = CASE
         WHEN EXCLUDED.enabled AND (NOT health_checks.enabled OR health_checks.interval_seconds IS DISTINCT FROM EXCLUDED.interval_seconds) THEN NULL
         ELSE health_checks.next_probe_at END,
       updated_at = now()
     RETURNING endpoint_id, enabled, path, interval_seconds, updated_at`,
    [endpointId, check.enabled, check.path, check.interval_seconds],
  );
  return rows[0];
}

/**
 * The cached last verdict of each endpoint that has one younger than 7 days (docs/api.md: it ages out unless a fresh
 * probe overwrites it), whether or not its check is still enabled. What the alert evaluator's endpoint_down reads.
 */
export async function lastVerdicts(db: Queryable, endpointIds: readonly number[]): Promise<Map<number, Verdict>> {
  const out = new Map<number, Verdict>();
  if (endpointIds.length === 0) return out;
  const { rows } = await db.query<{ endpoint_id: number; status: HealthStatus; checked_at: Date; enabled: boolean }>(
    `SELECT endpoint_id, last_status AS status, last_checked_at AS checked_at, enabled FROM health_checks
     WHERE endpoint_id = ANY($1::bigint[]) AND last_status IS NOT NULL
       AND last_checked_at > now() - make_interval(days => $2)`,
    [endpointIds, HEALTH_LIMITS.verdictMaxAgeDays],
  );
  for (const r of rows) out.set(r.endpoint_id, { status: r.status, checked_at: r.checked_at, enabled: r.enabled });
  return out;
}

/** The cached last verdict as a probe row (GET health's last_check), or null when none is younger than 7 days. */
export async function lastCheck(db: Queryable, endpointId: number): Promise<ProbeRow | null> {
  const { rows } = await db.query<ProbeRow>(
    `SELECT last_probe_id AS id, last_status AS status, last_status_code AS status_code, last_latency_ms AS latency_ms,
            last_error_message AS error_message, last_checked_at AS checked_at
     FROM health_checks
     WHERE endpoint_id = $1 AND last_status IS NOT NULL AND last_checked_at > now() - make_interval(days => $2)`,
    [endpointId, HEALTH_LIMITS.verdictMaxAgeDays],
  );
  return rows[0] ?? null;
}

/** The newest probe rows of an endpoint, newest first. */
export async function recentProbes(db: Queryable, endpointId: number, limit: number = HEALTH_LIMITS.recentChecks): Promise<ProbeRow[]> {
  const { rows } = await db.query<ProbeRow>(
    `SELECT id, status, status_code, latency_ms, error_message, checked_at FROM health_probes
     WHERE endpoint_id = $1 ORDER BY checked_at DESC, id DESC LIMIT $2`,
    [endpointId, limit],
  );
  return rows;
}

export interface UptimeAggregates {
  /** Percent of healthy probes among all probes in the window, 2 decimals; 0 with no probe in the window. */
  uptime_24h: number;
  uptime_7d: number;
  uptime_30d: number;
  /** Mean latency of the healthy probes of the last 24 h, 2 decimals; 0 with none. */
  avg_latency_ms: number;
}

function percent(healthy: number, all: number): number {
  return all === 0 ? 0 : Math.round((healthy / all) * 10000) / 100;
}

/** Uptime over 24 h, 7 d and 30 d and the 24 h healthy latency, in one pass over the endpoint's index range. */
export async function uptimeAggregates(db: Queryable, endpointId: number): Promise<UptimeAggregates> {
  const { rows } = await db.query<{ n24: number; h24: number; n7: number; h7: number; n30: number; h30: number; avg24: number | null }>(
    `SELECT
       count(*) FILTER (WHERE checked_at > now() - interval '24 hours')::int AS n24,
       count(*) FILTER (WHERE checked_at > now() - interval '24 hours' AND status = 'healthy')::int AS h24,
       count(*) FILTER (WHERE checked_at > now() - interval '7 days')::int AS n7,
       count(*) FILTER (WHERE checked_at > now() - interval '7 days' AND status = 'healthy')::int AS h7,
       count(*)::int AS n30,
       count(*) FILTER (WHERE status = 'healthy')::int AS h30,
       (avg(latency_ms) FILTER (WHERE checked_at > now() - interval '24 hours' AND status = 'healthy'))::float8 AS avg24
     FROM health_probes WHERE endpoint_id = $1 AND checked_at > now() - interval '30 days'`,
    [endpointId],
  );
  const r = rows[0];
  return {
    uptime_24h: percent(r.h24, r.n24),
    uptime_7d: percent(r.h7, r.n7),
    uptime_30d: percent(r.h30, r.n30),
    avg_latency_ms: r.avg24 === null ? 0 : Math.round(Number(r.avg24) * 100) / 100,
  };
}

/** What one probe found, as the prober records it. */
export interface ProbeResult {
  status: HealthStatus;
  status_code: number | null;
  latency_ms: number;
  error_message: string | null;
  /** When the probe was made; the database's clock when absent. */
  checked_at?: Date;
}

/**
 * Stores a probe row and makes it the cached last verdict (unless a newer one is already there), and releases the
 * lease `owner` held, in one statement. Null when the endpoint was removed meanwhile (its rows went with it).
 */
export async function recordProbe(db: Queryable, endpointId: number, owner: string, result: ProbeResult): Promise<ProbeRow | null> {
  const message = result.error_message === null ? null : result.error_message.slice(0, 500);
  const { rows } = await db.query<ProbeRow>(
    `WITH probe AS (
       INSERT INTO health_probes (endpoint_id, status, status_code, latency_ms, error_message, checked_at)
       SELECT $1, $2, $3, $4, $5, COALESCE($6::timestamptz, now()) WHERE EXISTS (SELECT 1 FROM endpoints WHERE id = $1)
       RETURNING id, status, status_code, latency_ms, error_message, checked_at
     ), verdict AS (
       UPDATE health_checks hc SET
         last_probe_id = CASE WHEN hc.last_checked_at IS NULL OR hc.last_checked_at <= probe.checked_at THEN probe.id ELSE hc.last_probe_id END,
         last_status = CASE WHEN hc.last_checked_at IS NULL OR hc.last_checked_at <= probe.checked_at THEN probe.status ELSE hc.last_status END,
         last_status_code = CASE WHEN hc.last_checked_at IS NULL OR hc.last_checked_at <= probe.checked_at THEN probe.status_code ELSE hc.last_status_code END,
         last_latency_ms = CASE WHEN hc.last_checked_at IS NULL OR hc.last_checked_at <= probe.checked_at THEN probe.latency_ms ELSE hc.last_latency_ms END,
         last_error_message = CASE WHEN hc.last_checked_at IS NULL OR hc.last_checked_at <= probe.checked_at THEN probe.error_message ELSE hc.last_error_message END,
         last_checked_at = GREATEST(hc.last_checked_at, probe.checked_at),
         lease_owner = CASE WHEN hc.lease_owner = $7 THEN NULL ELSE hc.lease_owner END,
         lease_until = CASE WHEN hc.lease_owner = $7 THEN NULL ELSE hc.lease_until END
       FROM probe WHERE hc.endpoint_id = $1
     )
     SELECT * FROM probe`,
    [endpointId, result.status, result.status_code, Math.max(0, Math.round(result.latency_ms)), message, result.checked_at ?? null, owner],
  );
  return rows[0] ?? null;
}

/** A check the prober has claimed: what it probes, and its configured interval. */
export interface ClaimedCheck {
  endpoint_id: number;
  uuid: string;
  hostname: string;
  /** The effective path (`/` for none). */
  path: string;
  /** The effective configured interval (60 for none), before the prober's test scale. */
  interval_seconds: number;
}

/**
 * Gives enabled checks without a schedule (just enabled, or given a new interval) their first probe time: random
 * within the first min(interval × scale, 25 s), so with the prober's poll (at most 5 s) config changes apply within
 * about 30 s (docs/api.md), and checks enabled
 * together are spread out. Returns how many were scheduled.
 */
export async function scheduleNewChecks(db: Queryable, scale: number): Promise<number> {
  const { rowCount } = await db.query(
    `UPDATE health_checks SET next_probe_at = now() + make_interval(secs => random() * LEAST(COALESCE(interval_seconds, 60) * $1::float8, 25))
     WHERE enabled AND next_probe_at IS NULL`,
    [scale],
  );
  return rowCount;
}

/**
 * Claims up to `limit` due checks for `owner`, in due order, skipping rows another worker is claiming right now.
 * In the same statement each claimed check gets a lease (`leaseSeconds`: the probe's timeout and a margin) and its
 * next probe time, a whole effective interval on plus up to 5 % jitter: so however many workers poll, an endpoint
 * is probed by one of them at a time and never twice within its interval, and schedules do not fall into step.
 * `scale` is EDGE_HEALTH_MIN_INTERVAL_SECONDS / 60 (1 outside tests).
 */
export async function claimDueChecks(db: Queryable, owner: string, opts: { limit: number; leaseSeconds: number; scale: number }): Promise<ClaimedCheck[]> {
  const { rows } = await db.query<ClaimedCheck>(
    `WITH due AS (
       SELECT endpoint_id FROM health_checks
       WHERE enabled AND next_probe_at <= now() AND (lease_until IS NULL OR lease_until <= now())
       ORDER BY next_probe_at
       LIMIT $2
       FOR UPDATE SKIP LOCKED
     )
     UPDATE health_checks hc SET
       lease_owner = $1,
       lease_until = now() + make_interval(secs => $3::float8),
       next_probe_at = now() + make_interval(secs => COALESCE(hc.interval_seconds, 60) * $4::float8 * (1 + random() * 0.05))
     FROM due, endpoints e
     WHERE hc.endpoint_id = due.endpoint_id AND e.id = hc.endpoint_id
     RETURNING hc.endpoint_id, e.uuid::text AS uuid, e.hostname, COALESCE(NULLIF(hc.path, ''), '/') AS path,
               COALESCE(hc.interval_seconds, 60) AS interval_seconds`,
    [owner, opts.limit, opts.leaseSeconds, opts.scale],
  );
  return rows;
}

/** Removes probe rows past the 30-day retention and clears cached verdicts past 7 days. */
export async function pruneHealth(db: Queryable): Promise<{ probes: number; verdicts: number }> {
  const probes = await db.query('DELETE FROM health_probes WHERE checked_at < now() - make_interval(days => $1)', [HEALTH_LIMITS.probeRetentionDays]);
  const verdicts = await db.query(
    `UPDATE health_checks SET last_probe_id = NULL, last_status = NULL, last_status_code = NULL, last_latency_ms = NULL,
       last_error_message = NULL, last_checked_at = NULL
     WHERE last_checked_at < now() - make_interval(days => $1)`,
    [HEALTH_LIMITS.verdictMaxAgeDays],
  );
  return { probes: probes.rowCount, verdicts: verdicts.rowCount };
}
