// What compiled stages keep across recompiles of the same endpoint: verdict caches, JWKS resolvers, failure counters.
// An endpoint is recompiled for any change to it (and after a cache eviction); its stages' state survives while the part of the config it derives from is unchanged.
import { LRUCache } from 'lru-cache';

interface Kept {
  /** What the state was built from (a version number or a checksum of the relevant config), as a string. */
  version: string;
  value: unknown;
}

/**
 * State by (stage, endpoint), reused while its version is unchanged: Pomerium's evaluator reuse (docs/architecture.md
 * "Unchanged parts (same checksum) are reused across rebuilds"). Bounded: the least recently compiled go first, so
 * an endpoint that was deleted or went quiet costs nothing for long. One per edge, so two edges in one process
 * (tests) never share a verdict.
 */
export class StageMemory {
  private readonly kept: LRUCache<string, Kept>;

  constructor(max = 10_000) {
    this.kept = new LRUCache({ max });
  }

  /**
   * The value kept for `stage` of `endpoint` if it was built from `version`; otherwise `make()`'s, kept from now on.
   * A different version replaces the old value whole (its caches are then garbage).
   */
  keep<T>(stage: string, endpoint: string, version: string, make: () => T): T {
    const key = `${stage}\u0000${endpoint}`;
    const hit = this.kept.get(key);
    if (hit !== undefined && hit.version === version) return hit.value as T;
    const value = make();
    this.kept.set(key, { version, value });
    return value;
  }

  get size(): number {
    return this.kept.size;
  }
}
