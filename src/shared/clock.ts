// Where the edge's stages and their tests read the time: one injectable clock (StageDeps.clock), the wall clock
// unless a test moves time by hand, so expiry is tested by setting the time, never by waiting for it.

/** Milliseconds since the epoch, as Date.now() counts them. */
export interface Clock {
  now(): number;
}

/** The wall clock. */
export const systemClock: Clock = { now: () => Date.now() };
