// The alert evaluator: every period it leases the rules that are due, computes each one's metric over its window from
// the per-minute traffic rollup (or the last health verdicts), and on ok → firing / firing → ok records the event
// and notifies. One evaluator at a time holds a rule, and a transition is a compare-and-set, so none notifies twice.
import { randomBytes } from 'node:crypto';
import { thresholdCrossed, type AlertNotice, type AlertNotifier, type AlertRuleStatus, type NotificationOutcome } from '../shared/alerts.ts';
import type { Logger } from '../shared/log.ts';
import { TRAFFIC_LATENCY_BOUNDS_MS } from '../shared/records/types.ts';
import type { SecretBox } from '../shared/secrets.ts';
import {
  accountEndpointIds,
  latencyHistogram,
  openAlertChannels,
  leaseDueAlertRules,
  recordEvaluation,
  recordNotification,
  releaseAlertLease,
  trafficTotals,
  transitionAlertRule,
  type AlertEventRow,
  type AlertRuleRow,
} from '../store/alerts.ts';
import type { Database, Queryable } from '../store/db.ts';
import { lastVerdicts } from '../store/health.ts';
import type { AlertOutcome, WorkerObserver } from './metrics.ts';
import { PeriodicJob } from './periodic.ts';

/**
 * The 95th percentile of a latency histogram (counts per bucket of TRAFFIC_LATENCY_BOUNDS_MS, then one past the last
 * bound): the upper bound of the bucket holding the 95th-percentile exchange, never more than the longest duration
 * seen. So the value errs high by at most one bucket, which is what an alert on slowness should do. Null without data.
 */
export function p95FromHistogram(counts: readonly number[], maxMs: number): number | null {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = Math.ceil(total * 0.95);
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    seen += counts[i];
    if (seen >= rank) return i < TRAFFIC_LATENCY_BOUNDS_MS.length ? Math.min(TRAFFIC_LATENCY_BOUNDS_MS[i], maxMs) : maxMs;
  }
  return maxMs;
}

/** Health verdicts that mean "down" (src/store/health.ts HEALTH_STATUSES, all but healthy). */
const DOWN = new Set(['unhealthy', 'error', 'timeout']);

/**
 * A rule's metric now, or null when there is nothing to judge: error_rate and latency_p95_ms without requests in the
 * window, endpoint_down without a verdict of an enabled check. requests and errors_5xx are counts, 0 when nothing came
 * (so "requests lt 1" fires on silence).
 */
export async function metricValue(q: Queryable, rule: Pick<AlertRuleRow, 'account_id' | 'endpoint_id' | 'metric' | 'window_seconds'>): Promise<number | null> {
  switch (rule.metric) {
    case 'requests':
    case 'errors_5xx':
    case 'error_rate': {
      const totals = await trafficTotals(q, rule.account_id, rule.endpoint_id, rule.window_seconds);
      if (rule.metric === 'requests') return totals.requests;
      if (rule.metric === 'errors_5xx') return totals.errors_5xx;
      return totals.requests === 0 ? null : totals.errors_5xx / totals.requests;
    }
    case 'latency_p95_ms': {
      const { counts, maxMs } = await latencyHistogram(q, rule.account_id, rule.endpoint_id, rule.window_seconds);
      return p95FromHistogram(counts, maxMs);
    }
    case 'endpoint_down': {
      const ids = rule.endpoint_id !== null ? [rule.endpoint_id] : await accountEndpointIds(q, rule.account_id);
      const verdicts = [...(await lastVerdicts(q, ids)).values()].filter((v) => v.enabled);
      return verdicts.length === 0 ? null : verdicts.filter((v) => DOWN.has(v.status)).length;
    }
  }
}

/** Where a rule goes from `status` given a value: null when it stays. `unknown` leaves on the first value. */
export function nextStatus(status: AlertRuleStatus, crossed: boolean): { to: AlertRuleStatus; event: 'firing' | 'ok' | null } | null {
  if (status === 'unknown') return crossed ? { to: 'firing', event: 'firing' } : { to: 'ok', event: null };
  if (status === 'ok' && crossed) return { to: 'firing', event: 'firing' };
  if (status === 'firing' && !crossed) return { to: 'ok', event: 'ok' };
  return null;
}

/**
 * How long an evaluator holds a rule: past an evaluation with three webhook attempts at the configured timeout and
 * their backoff (so no other worker judges a rule whose notice is still being sent, and a resolved notice cannot
 * overtake the firing one), and past two evaluation intervals; at least 2 minutes.
 */
export function alertLeaseMs(settings: { evaluationIntervalMs: number; webhookTimeoutMs: number }): number {
  return Math.max(120_000, 2 * settings.evaluationIntervalMs, 3 * settings.webhookTimeoutMs + 30_000);
}

export interface EvaluatorOptions {
  /** Who holds the leases (node id and a per-process suffix). */
  owner?: string;
  /** How long a lease lasts: longer than an evaluation with its notifications (three webhook attempts). */
  leaseMs: number;
  notifier: AlertNotifier;
  secrets: SecretBox;
  logger: Logger;
  /** Rules leased and evaluated together. */
  batch?: number;
  /** Counts each rule's outcome and each channel's notification (the worker's metrics). */
  metrics?: Pick<WorkerObserver, 'alertEvaluated' | 'alertNotified'>;
}

export interface PassReport {
  evaluated: number;
  fired: string[];
  resolved: string[];
}

async function notifyEvent(db: Database, rule: AlertRuleRow, event: AlertEventRow, opts: EvaluatorOptions): Promise<void> {
  const channels = openAlertChannels(rule.channels, opts.secrets);
  let outcome: NotificationOutcome;
  if (typeof channels === 'string') outcome = { notified: false, error: channels };
  else {
    const notice: AlertNotice = {
      rule: { uuid: rule.uuid, name: rule.name, metric: rule.metric, comparison: rule.comparison, threshold: rule.threshold },
      status: event.status,
      value: event.value,
      triggered_at: new Date(event.triggered_at).toISOString(),
      ...(rule.endpoint_uuid ? { endpoint: { uuid: rule.endpoint_uuid, name: rule.endpoint_name ?? '' } } : {}),
      event_id: event.id,
    };
    // One call per channel, so each channel's outcome is known (and counted); the event's outcome is theirs together.
    const each = await Promise.all(channels.map((channel) => opts.notifier([channel], notice)));
    each.forEach((o, i) => opts.metrics?.alertNotified(channels[i].type, o.notified));
    const errors = each.filter((o) => !o.notified).map((o) => o.error);
    outcome = errors.length === 0 ? { notified: true, error: null } : { notified: false, error: errors.join('; ') };
  }
  await recordNotification(db, event.id, outcome.notified, outcome.error);
}

/** Evaluates one leased rule; returns what it came to (firing and resolved are transitions with an event). */
async function evaluateRule(db: Database, rule: AlertRuleRow, owner: string, opts: EvaluatorOptions): Promise<AlertOutcome> {
  try {
    const value = await metricValue(db, rule);
    const next = value === null ? null : nextStatus(rule.status, thresholdCrossed(rule.comparison, value, rule.threshold));
    if (value === null || next === null) {
      await recordEvaluation(db, rule.id, owner, value);
      return value === null ? 'no_data' : 'unchanged';
    }
    const done = await db.transaction((tx) => transitionAlertRule(tx, rule.id, owner, rule.status, next.to, value, next.event));
    if (done === null) return 'superseded'; // the lease lapsed, or the rule changed meanwhile: the next pass judges afresh
    if (done.event) await notifyEvent(db, rule, done.event, opts);
    return next.event === 'firing' ? 'firing' : next.event === 'ok' ? 'resolved' : 'unchanged';
  } finally {
    await releaseAlertLease(db, rule.id, owner).catch((err) => opts.logger.warn({ err, rule: rule.uuid }, 'could not release an alert lease'));
  }
}

/** One pass: every rule whose lease has lapsed, in id order, in batches, until none is left. */
export async function evaluateAlerts(db: Database, opts: EvaluatorOptions): Promise<PassReport> {
  const owner = opts.owner ?? `evaluator-${randomBytes(4).toString('hex')}`;
  const report: PassReport = { evaluated: 0, fired: [], resolved: [] };
  let after = 0;
  for (;;) {
    const rules = await leaseDueAlertRules(db, owner, opts.leaseMs, opts.batch ?? 20, after);
    if (rules.length === 0) return report;
    after = Math.max(...rules.map((r) => r.id));
    const outcomes = await Promise.allSettled(rules.map((r) => evaluateRule(db, r, owner, opts)));
    outcomes.forEach((o, i) => {
      const rule = rules[i];
      report.evaluated++;
      opts.metrics?.alertEvaluated(o.status === 'rejected' ? 'failed' : o.value);
      if (o.status === 'rejected') opts.logger.warn({ err: o.reason, rule: rule.uuid }, 'alert rule not evaluated');
      else if (o.value === 'firing') report.fired.push(rule.uuid);
      else if (o.value === 'resolved') report.resolved.push(rule.uuid);
    });
  }
}

/** The evaluator as a worker job: one pass every `intervalMs` (EDGE_ALERT_EVALUATION_INTERVAL_MS). */
export function alertEvaluator(db: Database, opts: EvaluatorOptions & { intervalMs: number }): PeriodicJob {
  const owner = opts.owner ?? `evaluator-${randomBytes(4).toString('hex')}`;
  return new PeriodicJob('alert evaluation', opts.intervalMs, opts.logger, async () => {
    const report = await evaluateAlerts(db, { ...opts, owner });
    return report.fired.length + report.resolved.length > 0 ? { msg: 'alert rules changed state', fields: { fired: report.fired, resolved: report.resolved } } : null;
  });
}
