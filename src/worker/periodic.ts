// A worker job run on a timer: one pass at a time (a slow pass delays the next instead of overlapping it), and a
// failed pass is logged and skipped, because the next one judges the state afresh.
import { SpanStatusCode, type Tracer } from '@opentelemetry/api';
import type { Logger } from '../shared/log.ts';

/** What watches a job's passes (src/worker/metrics.ts): its stable label, how long each took, whether it went through. */
export interface JobObserver {
  jobPassed(job: string, seconds: number, ok: boolean): void;
}

/** A job's name as a metric label: lower-case words joined by `_` ("rate-limit hit pruning" → rate_limit_hit_pruning). */
export function jobLabel(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');
}

/**
 * How long a job may go without a pass that went through before it counts as stuck (/readyz): three intervals, and
 * at least a minute, so a pass slowed by a loaded store is not taken for a stuck one.
 */
export function staleAfterMs(intervalMs: number): number {
  return Math.max(3 * intervalMs, 60_000);
}

export class PeriodicJob {
  /** The job's name as a metric label. */
  readonly label: string;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> = Promise.resolve();
  private observer: JobObserver | null = null;
  private startedAt: number | null = null;
  private lastOkAt: number | null = null;
  private tracer: Tracer | null = null;

  /** `pass` does one round of work; it returns what to log at info (or null when there is nothing to say). */
  constructor(
    private readonly name: string,
    private readonly intervalMs: number,
    private readonly logger: Logger,
    private readonly pass: () => Promise<{ msg: string; fields: Record<string, unknown> } | null>,
    private readonly now: () => number = Date.now,
  ) {
    this.label = jobLabel(name);
  }

  /** Reports every pass from now on to `observer` (the worker's metrics). */
  observe(observer: JobObserver): this {
    this.observer = observer;
    return this;
  }

  /** Wraps every pass from now on in a span named after the job's label (when the worker's tracing is on). */
  trace(tracer: Tracer): this {
    this.tracer = tracer;
    return this;
  }

  start(): void {
    this.startedAt ??= this.now();
    this.timer = setInterval(() => void this.sweep(), this.intervalMs);
    this.timer.unref();
  }

  /**
   * Whether the job keeps up: started, and a pass went through (or it started) within staleAfterMs. A job whose
   * passes keep failing (the store refusing, presence unreadable) or hang stops being current.
   */
  current(): boolean {
    const since = this.lastOkAt ?? this.startedAt;
    return since !== null && this.now() - since <= staleAfterMs(this.intervalMs);
  }

  /** One pass now (serialised with the timer's); resolves when it is done. */
  sweep(): Promise<void> {
    this.running = this.running.then(async () => {
      const started = performance.now();
      // A root span per pass: a job is not part of any request's trace.
      const span = this.tracer?.startSpan(this.label, { attributes: { 'edge.job': this.label } });
      let ok = false;
      const trace_id = span?.spanContext().traceId;
      try {
        const report = await this.pass();
        ok = true;
        this.lastOkAt = this.now();
        if (report) this.logger.info({ ...report.fields, trace_id }, report.msg);
      } catch (err) {
        span?.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
        this.logger.warn({ err, trace_id }, `${this.name} skipped`);
      }
      span?.end();
      this.observer?.jobPassed(this.label, (performance.now() - started) / 1000, ok);
    });
    return this.running;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }
}
