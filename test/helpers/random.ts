// A small seeded PRNG (mulberry32) for reproducible fuzzing: the same seed gives the same corpus on every run,
// with good low bits (an LCG's correlate), so `rand(n)` for small n is fair.

/** Returns `rand(n)`: an integer in [0, n). */
export function random(seed: number): (n: number) => number {
  let a = seed >>> 0;
  return (n) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) / 4294967296) * n | 0;
  };
}
