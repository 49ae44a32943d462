// Reconnect delays for the agent: exponential with "full jitter" (a uniform draw below the exponential cap).
// Full jitter spreads a fleet of agents that lost the same edge at once, so the restarted edge is not stampeded.

export interface BackoffOptions {
  /** Cap of the first delay. */
  initialMs: number;
  /** Largest cap the doubling reaches. */
  maxMs: number;
  /** Source of uniform numbers in [0, 1); tests may pin it. */
  random?: () => number;
}

export class Backoff {
  private attempt = 0;
  private readonly initialMs: number;
  private readonly maxMs: number;
  private readonly random: () => number;

  constructor(options: BackoffOptions) {
    if (!(options.initialMs > 0)) throw new RangeError(`backoff initialMs must be positive, got ${options.initialMs}`);
    if (!(options.maxMs >= options.initialMs)) throw new RangeError(`backoff maxMs must be at least initialMs (${options.initialMs}), got ${options.maxMs}`);
    this.initialMs = options.initialMs;
    this.maxMs = options.maxMs;
    this.random = options.random ?? Math.random;
  }

  /** Attempts made since the last reset. */
  get attempts(): number {
    return this.attempt;
  }

  /** The next delay: uniform in [0, min(max, initial · 2^attempt)) (AWS Architecture Blog, "Exponential Backoff And Jitter"). */
  next(): number {
    const cap = Math.min(this.maxMs, this.initialMs * 2 ** Math.min(this.attempt, 30));
    this.attempt++;
    return Math.floor(this.random() * cap);
  }

  /** After a healthy connection: the next failure starts again from the initial cap. */
  reset(): void {
    this.attempt = 0;
  }
}
