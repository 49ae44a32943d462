// The worker's own Prometheus metrics, served on its ops port (WORKER_OPS_PORT; docs/operations.md): jobs, health
// probes, alert evaluations and notifications, traffic records and their backlog, retention deletes, the process.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { collectProcessMetrics } from '../shared/process-metrics.ts';
import type { RecordBacklog, RecordSource } from '../shared/records/types.ts';
import type { JobObserver } from './periodic.ts';
import type { RecordWorkerStats } from './records.ts';

/** A health probe's verdict (src/store/health.ts HEALTH_STATUSES). */
export const PROBE_VERDICTS = ['healthy', 'unhealthy', 'error', 'timeout'] as const;
export type ProbeVerdict = (typeof PROBE_VERDICTS)[number];

/**
 * What judging one leased alert rule came to: it went `firing` or `resolved`; its value left it where it was, or
 * took it from unknown to ok, with nothing to notify (`unchanged`); there was nothing to judge (`no_data`); the transition was refused because the lease lapsed or the
 * rule changed meanwhile (`superseded`); or it failed (`failed`: a store error, logged).
 */
export const ALERT_OUTCOMES = ['firing', 'resolved', 'unchanged', 'no_data', 'superseded', 'failed'] as const;
export type AlertOutcome = (typeof ALERT_OUTCOMES)[number];

export const CHANNEL_KINDS = ['webhook', 'email'] as const;
export type ChannelKind = (typeof CHANNEL_KINDS)[number];

/** Tables the worker's retention passes delete from (traffic, rate-limit hit days, health probes). */
export const RETENTION_TABLES = [
  'traffic_logs',
  'endpoint_traffic_minutely',
  'endpoint_usage_daily',
  'applied_record_batches',
  'rate_limit_hits_daily',
  'health_probes',
] as const;
export type RetentionTable = (typeof RETENTION_TABLES)[number];

/** What the worker's modules report as they work; WorkerMetrics counts it. Each module takes it optionally. */
export interface WorkerObserver extends JobObserver {
  probed(verdict: ProbeVerdict): void;
  alertEvaluated(outcome: AlertOutcome): void;
  alertNotified(channel: ChannelKind, delivered: boolean): void;
  retentionDeleted(table: RetentionTable, rows: number): void;
}

/** The record worker's counts and the stream's backlog, as read at scrape time. */
export interface RecordReading {
  stats: RecordWorkerStats;
  /** Null where the transport could not say (Redis unreachable). */
  backlog: RecordBacklog | null;
}

/**
 * A reading of a record worker and of the source it reads: the backlog is null when the source cannot tell it
 * (no backlog(), Redis unreachable) within `timeoutMs`, so a scrape never waits long on Redis.
 */
export async function readRecords(stats: RecordWorkerStats, source: RecordSource, timeoutMs = 2_000): Promise<RecordReading> {
  if (!source.backlog) return { stats, backlog: null };
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), timeoutMs)));
  try {
    return { stats, backlog: await Promise.race([source.backlog().catch(() => null), late]) };
  } finally {
    clearTimeout(timer);
  }
}

export interface WorkerMetricsOptions {
  /**
   * Reads the record worker (this thread's, or the store thread's in role `all`); null: no record worker here. A
   * reading that fails or is late keeps the last one, so a busy store thread never turns counters back.
   */
  records?: () => Promise<RecordReading>;
}

/** Job durations: a presence read takes milliseconds, a retention pass over a large table minutes. */
const DURATION_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

export class WorkerMetrics implements WorkerObserver {
  readonly registry = new Registry();
  private readonly runs: Counter<'job'>;
  private readonly failures: Counter<'job'>;
  private readonly durations: Histogram<'job'>;
  private readonly lastSuccess: Gauge<'job'>;
  private readonly probes: Counter<'verdict'>;
  private readonly evaluations: Counter<'outcome'>;
  private readonly notifications: Counter<'channel' | 'outcome'>;
  private readonly retention: Counter<'table'>;
  private readonly readRecords: (() => Promise<RecordReading>) | undefined;
  /** The last reading of the record worker; counters repeat it when a scrape's reading fails. */
  private records: RecordReading | null = null;

  constructor(options: WorkerMetricsOptions = {}) {
    const registers = [this.registry];
    collectProcessMetrics(this.registry, 'edge_worker_');
    this.readRecords = options.records;

    this.runs = new Counter({ name: 'edge_worker_job_runs_total', help: 'Passes of each periodic worker job, failed ones included', labelNames: ['job'], registers });
    this.failures = new Counter({ name: 'edge_worker_job_failures_total', help: 'Passes of each periodic worker job that failed (logged and skipped)', labelNames: ['job'], registers });
    this.durations = new Histogram({ name: 'edge_worker_job_duration_seconds', help: 'How long each pass of a periodic worker job took', labelNames: ['job'], buckets: DURATION_BUCKETS, registers });
    this.lastSuccess = new Gauge({ name: 'edge_worker_job_last_success_timestamp_seconds', help: 'When each periodic worker job last completed a pass (seconds since the epoch; 0 before the first)', labelNames: ['job'], registers });
    this.probes = new Counter({ name: 'edge_worker_health_probes_total', help: 'Health probes this worker made, by verdict', labelNames: ['verdict'], registers });
    for (const verdict of PROBE_VERDICTS) this.probes.inc({ verdict }, 0);
    this.evaluations = new Counter({ name: 'edge_worker_alert_evaluations_total', help: 'Alert rules this worker judged, by outcome', labelNames: ['outcome'], registers });
    for (const outcome of ALERT_OUTCOMES) this.evaluations.inc({ outcome }, 0);
    this.notifications = new Counter({ name: 'edge_worker_alert_notifications_total', help: 'Alert notifications this worker sent, by channel kind and outcome (delivered, failed)', labelNames: ['channel', 'outcome'], registers });
    for (const channel of CHANNEL_KINDS) for (const outcome of ['delivered', 'failed']) this.notifications.inc({ channel, outcome }, 0);
    this.retention = new Counter({ name: 'edge_worker_retention_deleted_rows_total', help: 'Rows the worker deleted as past retention, by table', labelNames: ['table'], registers });
    for (const table of RETENTION_TABLES) this.retention.inc({ table }, 0);

    if (!options.records) return;
    const records = () => this.records;
    const recordCounter = (name: string, help: string, value: (s: RecordWorkerStats) => number) =>
      new Counter({
        name,
        help,
        registers,
        collect() {
          this.reset();
          const reading = records();
          if (reading) this.inc(value(reading.stats));
        },
      });
    recordCounter('edge_worker_record_batches_written_total', 'Traffic-record batches written to the store and acknowledged', (s) => s.batches);
    recordCounter('edge_worker_record_batches_dead_lettered_total', 'Traffic-record batches given up after repeated refusals by the store (acknowledged unwritten, logged)', (s) => s.deadLetteredBatches);
    recordCounter('edge_worker_records_dead_lettered_total', 'Traffic records in the batches given up', (s) => s.deadLetteredRecords);
    recordCounter('edge_worker_records_skipped_total', 'Traffic records that did not parse (malformed, out of bounds, unknown kind), acknowledged unwritten', (s) => s.skipped);
    new Gauge({
      name: 'edge_worker_record_backlog_batches',
      help: 'Traffic-record batches not yet acknowledged: queued (not yet delivered to a worker) or pending (delivered, not acknowledged)',
      labelNames: ['state'],
      registers,
      collect() {
        this.reset();
        const backlog = records()?.backlog;
        if (!backlog) return;
        this.set({ state: 'queued' }, backlog.queued);
        this.set({ state: 'pending' }, backlog.pending);
      },
    });
  }

  jobPassed(job: string, seconds: number, ok: boolean): void {
    this.runs.inc({ job });
    this.failures.inc({ job }, ok ? 0 : 1);
    this.durations.observe({ job }, seconds);
    if (ok) this.lastSuccess.set({ job }, Date.now() / 1000);
  }

  /** Gives a job its series before its first pass, so every job is listed from the start. */
  jobWatched(job: string): void {
    this.runs.inc({ job }, 0);
    this.failures.inc({ job }, 0);
    this.durations.zero({ job });
    this.lastSuccess.set({ job }, 0);
  }

  probed(verdict: ProbeVerdict): void {
    this.probes.inc({ verdict });
  }

  alertEvaluated(outcome: AlertOutcome): void {
    this.evaluations.inc({ outcome });
  }

  alertNotified(channel: ChannelKind, delivered: boolean): void {
    this.notifications.inc({ channel, outcome: delivered ? 'delivered' : 'failed' });
  }

  retentionDeleted(table: RetentionTable, rows: number): void {
    if (rows > 0) this.retention.inc({ table }, rows);
  }

  /** The Prometheus text exposition; the record worker is read first, once per scrape. */
  async text(): Promise<string> {
    if (this.readRecords) {
      this.records = await this.readRecords().catch(() => this.records);
    }
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
