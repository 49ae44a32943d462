// A bounded LRU cache that costs nothing until its first write: what compiled stages keep per endpoint or per rule.
// lru-cache allocates its index arrays for `max` entries up front (~80 KiB at 10,000), which at 100k endpoints is tens of GiB for caches most endpoints never fill.
import { LRUCache } from 'lru-cache';

/**
 * An LRUCache built on the first `set`, with the same bounds (max, ttl) from then on; reads before it find nothing.
 * `clear()` drops the cache whole, so a flushed cache (a JWKS rotation) is back to costing nothing. Only the calls
 * the stages use are offered, so each one keeps lru-cache's meaning exactly.
 */
export class LazyLru<K extends {}, V extends {}> {
  private cache: LRUCache<K, V> | null = null;

  constructor(private readonly options: LRUCache.Options<K, V, unknown>) {}

  get(key: K): V | undefined {
    return this.cache?.get(key);
  }

  has(key: K): boolean {
    return this.cache?.has(key) ?? false;
  }

  set(key: K, value: V, options?: LRUCache.SetOptions<K, V, unknown>): this {
    (this.cache ??= new LRUCache<K, V>(this.options)).set(key, value, options);
    return this;
  }

  delete(key: K): boolean {
    return this.cache?.delete(key) ?? false;
  }

  clear(): void {
    this.cache = null;
  }

  get size(): number {
    return this.cache?.size ?? 0;
  }

  /** Whether the underlying cache exists yet (for tests and memory accounting). */
  get allocated(): boolean {
    return this.cache !== null;
  }
}
