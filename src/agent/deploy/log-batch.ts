// Output lines of a deployment, batched into `log` events for the control channel: a batch goes when it is full or
// shortly after its first line, so a chatty build costs few events and a quiet one still shows each line promptly.
import { MAX_LOG_LINES_PER_EVENT, MAX_LOG_LINE_LENGTH, type AgentControlEvent } from '../../shared/deploy.ts';

export class LogBatch {
  private lines: string[] = [];
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly deploymentId: number,
    private readonly report: (event: AgentControlEvent) => void,
    private readonly flushMs = 100,
  ) {}

  push(line: string): void {
    if (this.closed) return;
    this.lines.push(line.length > MAX_LOG_LINE_LENGTH ? line.slice(0, MAX_LOG_LINE_LENGTH) : line);
    if (this.lines.length >= MAX_LOG_LINES_PER_EVENT) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.flushMs);
  }

  /** Sends what is pending now: before a status event, so the log a status follows arrives first. */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.lines.length === 0) return;
    const lines = this.lines;
    this.lines = [];
    this.report({ type: 'log', deployment_id: this.deploymentId, lines });
  }

  close(): void {
    this.flush();
    this.closed = true;
  }
}
