// Long synchronous work cut into slices: a loop asks `due()` per item and awaits `yield()` when it says so, so
// timers, I/O and requests run between slices and the event loop is never held longer than one slice.

/** How long one slice runs by default: well under the ~50 ms a request may wait behind config work. */
export const DEFAULT_SLICE_MS = 10;

/** Items between clock reads: performance.now() costs more than most per-item work it would guard. */
const CHECK_EVERY = 64;

export class TimeSlicer {
  private started = performance.now();
  private count = 0;
  /** Slices ended so far (each a return to the event loop). */
  yields = 0;

  /**
   * @param sliceMs longest stretch of work between two yields
   * @param signal aborts the work at its next yield (a stopping subscriber need not wait for a reset to finish)
   */
  constructor(
    readonly sliceMs = DEFAULT_SLICE_MS,
    private readonly signal?: AbortSignal,
  ) {
    if (!(sliceMs > 0)) throw new RangeError(`TimeSlicer sliceMs must be positive, got ${sliceMs}`);
  }

  /** True once the current slice has used its time. Call it once per item; it reads the clock every 64 calls. */
  due(): boolean {
    if (++this.count < CHECK_EVERY) return false;
    this.count = 0;
    return performance.now() - this.started >= this.sliceMs;
  }

  /**
   * Returns to the event loop and starts a new slice. setImmediate, not a resolved promise: microtasks would run
   * before any I/O, so a request would still wait for the whole job.
   */
  async yield(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.signal?.throwIfAborted();
    this.yields++;
    this.count = 0;
    this.started = performance.now();
  }

  /** `items`, `each` applied to every one, yielding whenever a slice is used up. */
  async forEach<T>(items: Iterable<T>, each: (item: T) => void): Promise<void> {
    for (const item of items) {
      each(item);
      if (this.due()) await this.yield();
    }
  }
}

/** A copy of `map` built in slices (copying 100k entries in one go holds the loop for ~50 ms on a small machine). */
export async function copyMap<K, V>(map: ReadonlyMap<K, V>, slicer: TimeSlicer): Promise<Map<K, V>> {
  const copy = new Map<K, V>();
  await slicer.forEach(map, ([k, v]) => copy.set(k, v));
  return copy;
}
