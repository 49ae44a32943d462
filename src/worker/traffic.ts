// Traffic storage in the worker: the record handlers for captured exchanges (traffic_logs rows) and usage (daily
// counters and the per-minute rollup), both idempotent under redelivery, and the retention job (by plan).
import type { Logger } from '../shared/log.ts';
import type { Plan } from '../shared/plans.ts';
import type { TrafficExchangeRecord, TrafficUsageRecord } from '../shared/records/types.ts';
import type { Database, Queryable } from '../store/db.ts';
import { addTrafficUsage, claimRecordBatches, insertTrafficLogs, pruneTraffic, type TrafficLogInsert } from '../store/traffic.ts';
import type { WorkerObserver } from './metrics.ts';
import { PeriodicJob } from './periodic.ts';
import type { RecordOrigin } from './records.ts';

/** The subdomain label of `hostname` (its first label), kept in case the endpoint is deleted before the write. */
function labelOf(hostname: string): string {
  const dot = hostname.indexOf('.');
  return dot < 0 ? hostname : hostname.slice(0, dot);
}

/** One traffic_logs row from a record; the key is the record's origin, the same on every delivery. */
export function trafficLogRow(r: TrafficExchangeRecord, origin: RecordOrigin, now: number = Date.now()): TrafficLogInsert {
  // An edge clock ahead of the worker's: the exchange is stored as happening now, so "newest first" stays truthful.
  const created = Math.min(Date.parse(r.at), now);
  return {
    recordKey: `${origin.batch}:${origin.index}`,
    createdAt: new Date(created).toISOString(),
    accountId: r.account,
    endpointUuid: r.endpoint,
    endpointNameFallback: labelOf(r.hostname),
    method: r.method,
    host: r.host,
    path: r.path,
    query: r.query,
    statusCode: r.status,
    durationMs: r.duration_ms,
    bytesIn: r.bytes_in,
    bytesOut: r.bytes_out,
    sourceIp: r.client_ip,
    country: r.country,
    userAgent: r.user_agent,
    tls: r.secure,
    routingRule: r.rule,
    edgeNode: r.edge,
    region: r.region,
    edgeError: r.edge_error,
    authOutcome: r.auth_outcome,
    rbacClientId: r.client_id,
    completed: r.completed,
    captureLevel: r.level,
    requestHeaders: r.level === 'full' ? (r.request_headers ?? {}) : null,
    responseHeaders: r.level === 'full' ? (r.response_headers ?? {}) : null,
    requestBody: r.level === 'full' ? (r.request_body ?? null) : null,
    responseBody: r.level === 'full' ? (r.response_body ?? null) : null,
    requestBodyTruncated: r.request_body_truncated === true,
    responseBodyTruncated: r.response_body_truncated === true,
  };
}

/** The record handler for kind traffic_exchange: rows keyed by origin, so a redelivered batch writes nothing. */
export async function writeTrafficExchanges(tx: Queryable, records: TrafficExchangeRecord[], origins: RecordOrigin[]): Promise<void> {
  const now = Date.now();
  await insertTrafficLogs(tx, records.map((r, i) => trafficLogRow(r, origins[i], now)));
}

/**
 * Keeps only the records of batches not applied before, claiming those batches in the same transaction (key
 * "<kind>:<batch id>" in applied_record_batches): counts that are added, not keyed, are then added once.
 */
export async function freshRecords<R extends { kind: string }>(tx: Queryable, records: R[], origins: RecordOrigin[]): Promise<R[]> {
  if (records.length === 0) return records;
  const keyOf = (i: number) => `${records[i].kind}:${origins[i].batch}`;
  const fresh = await claimRecordBatches(tx, records.map((_, i) => keyOf(i)));
  return records.filter((_, i) => fresh.has(keyOf(i)));
}

/** The record handler for kind traffic_usage: adds each batch's counts once. */
export async function writeTrafficUsage(tx: Queryable, records: TrafficUsageRecord[], origins: RecordOrigin[]): Promise<void> {
  const fresh = await freshRecords(tx, records, origins);
  await addTrafficUsage(tx, fresh.flatMap((r) => r.usage));
}

/** Plan name → traffic_retention_days, from the configured plans. */
export function retentionByPlan(plans: Readonly<Record<string, Plan>>): Record<string, number> {
  return Object.fromEntries(Object.entries(plans).map(([name, plan]) => [name, plan.traffic_retention_days]));
}

/** Deletes traffic past each plan's retention (and usage and applied batch keys past theirs), every `intervalMs`. */
export function trafficRetention(
  db: Database,
  options: { plans: Readonly<Record<string, Plan>>; intervalMs: number; logger: Logger; metrics?: Pick<WorkerObserver, 'retentionDeleted'> },
): PeriodicJob {
  const retention = retentionByPlan(options.plans);
  return new PeriodicJob('traffic retention', options.intervalMs, options.logger, async () => {
    const removed = await pruneTraffic(db, retention);
    options.metrics?.retentionDeleted('traffic_logs', removed.logs);
    options.metrics?.retentionDeleted('endpoint_traffic_minutely', removed.minutes);
    options.metrics?.retentionDeleted('endpoint_usage_daily', removed.days);
    options.metrics?.retentionDeleted('applied_record_batches', removed.batches);
    const total = removed.logs + removed.minutes + removed.days + removed.batches;
    return total > 0 ? { msg: 'deleted traffic past retention', fields: { ...removed } } : null;
  });
}
