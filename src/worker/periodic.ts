// A worker job run on a timer: one pass at a time (a slow pass delays the next instead of overlapping it), and a
// failed pass is logged and skipped, because the next one judges the state afresh.
import type { Logger } from '../shared/log.ts';

export class PeriodicJob {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> = Promise.resolve();

  /** `pass` does one round of work; it returns what to log at info (or null when there is nothing to say). */
  constructor(
    private readonly name: string,
    private readonly intervalMs: number,
    private readonly logger: Logger,
    private readonly pass: () => Promise<{ msg: string; fields: Record<string, unknown> } | null>,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.sweep(), this.intervalMs);
    this.timer.unref();
  }

  /** One pass now (serialised with the timer's); resolves when it is done. */
  sweep(): Promise<void> {
    this.running = this.running.then(async () => {
      try {
        const report = await this.pass();
        if (report) this.logger.info(report.fields, report.msg);
      } catch (err) {
        this.logger.warn({ err }, `${this.name} skipped`);
      }
    });
    return this.running;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }
}
