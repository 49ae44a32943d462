// Waiting for state that settles asynchronously (across processes, or behind a periodic report): retry a check
// until it yields a value, with a deadline that fails the test rather than a fixed sleep that guesses.

export async function eventually<T>(check: () => Promise<T | undefined>, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Reads `read` until `accept` takes what it returned, and returns that; the same deadline as `eventually`. */
export function readUntil<T>(read: () => Promise<T>, accept: (value: T) => boolean, ms = 15_000): Promise<T> {
  return eventually(async () => {
    const value = await read();
    return accept(value) ? value : undefined;
  }, ms);
}
