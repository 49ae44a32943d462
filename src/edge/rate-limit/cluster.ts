// Cluster-scope rate limits: one count per (rule, visitor) across every edge, in Redis, decided by one Lua script
// per request (the same sliding-window estimate as ./window.ts, atomically), with a local "blocked until" shortcut.
import { Redis } from 'ioredis';
import { VisitorMap, type VisitorBudget } from './visitors.ts';
import { decide, type WindowDecision } from './window.ts';
import { connectRedis } from '../../shared/redis-connect.ts';

/**
 * KEYS: the current fixed window's counter, the previous one's. ARGV: limit, window ms, now ms (the caller's clock,
 * so tests and every edge's decision use the time the edge judged the request at). Counts the request when the
 * estimate before it is below the limit (./window.ts waitMs); the counter lives two windows (it is the "previous"
 * one during the next). Returns {allowed 1|0, previous count, current count before this request}.
 */
export const SLIDING_WINDOW_LUA = `
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local elapsed = now % window
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local previous = tonumber(redis.call('GET', KEYS[2]) or '0')
if previous * (window - elapsed) / window + current < limit then
  redis.call('INCR', KEYS[1])
  redis.call('PEXPIRE', KEYS[1], window * 2)
  return {1, previous, current}
end
return {0, previous, current}
`;

type ClusterConnection = Redis & { rateLimitTake(current: string, previous: string, limit: number, windowMs: number, now: number): Promise<[number, number, number]> };

/** Redis could not decide in time (down, unreachable, slower than the timeout): the rule's fail_mode applies. */
export class RateLimitStoreUnavailable extends Error {
  override name = 'RateLimitStoreUnavailable';
}

export interface ClusterStoreOptions {
  url: string;
  /** Starts every key (EDGE_REDIS_PREFIX), so deployments and tests can share one Redis. */
  prefix: string;
  /** Longest a decision waits for Redis, connecting included (EDGE_RATE_LIMIT_REDIS_TIMEOUT_MS). */
  timeoutMs: number;
}

/**
 * The edge's own Redis connection for rate limits, apart from the feed's: no offline queue (a command while
 * disconnected fails at once instead of waiting for a reconnect) and a command timeout, so a slow or gone Redis
 * costs a request at most `timeoutMs`. ioredis's defineCommand sends EVALSHA and falls back to EVAL on NOSCRIPT
 * (a restarted or flushed Redis has forgotten the script).
 */
export class ClusterStore {
  private readonly redis: ClusterConnection;
  private readonly prefix: string;

  constructor(options: ClusterStoreOptions) {
    this.redis = connectRedis(options.url, {
      lazyConnect: true,
      enableOfflineQueue: false,
      commandTimeout: options.timeoutMs,
      connectTimeout: Math.max(options.timeoutMs, 1000),
      maxRetriesPerRequest: 0,
      // Reconnect for ever, backing off to a second: rules fall back (or close) meanwhile.
      retryStrategy: (times) => Math.min(50 * times, 1000),
    }) as ClusterConnection;
    this.redis.on('error', () => {});
    this.redis.defineCommand('rateLimitTake', { numberOfKeys: 2, lua: SLIDING_WINDOW_LUA });
    this.prefix = options.prefix;
    this.redis.connect().catch(() => {});
  }

  /**
   * Counts a request of `key` under `rule` at `now` if it fits, across every edge on this Redis. Rejects with
   * RateLimitStoreUnavailable when Redis cannot answer in time.
   */
  async take(rule: string, key: string, limit: number, windowMs: number, now: number): Promise<WindowDecision> {
    const window = Math.floor(now / windowMs);
    // One hash tag per (rule, visitor): both windows in one slot, should the Redis be a cluster.
    const base = `${this.prefix}rl:{${rule}:${key}}:`;
    let reply: [number, number, number];
    try {
      reply = await this.redis.rateLimitTake(base + window, base + (window - 1), limit, windowMs, now);
    } catch (err) {
      throw new RateLimitStoreUnavailable((err as Error).message);
    }
    const [allowed, previous, current] = reply;
    const decision = decide(previous, current, now - window * windowMs, windowMs, limit);
    // The script's verdict is the one that counted; the shared math only describes it (they agree, one formula).
    decision.allowed = allowed === 1;
    if (!decision.allowed && decision.retryAfterMs === 0) decision.retryAfterMs = 1;
    return decision;
  }

  /** Resolves once the connection is up (tests; the edge never waits: until then cluster rules fall back). */
  ready(): Promise<void> {
    if (this.redis.status === 'ready') return Promise.resolve();
    return new Promise((resolve) => this.redis.once('ready', () => resolve()));
  }

  close(): void {
    this.redis.disconnect();
  }
}

/**
 * Per rule on one edge: when a visitor was last refused by the cluster count, until when it stays refused (the
 * script's wait). Lets a blocked visitor's requests be refused here with no Redis round trip; bounded like the
 * local counters (./visitors.ts), memory taken per visitor refused.
 */
export class BlockedUntil {
  private readonly until: VisitorMap<number>;

  constructor(maxKeys: number, budget?: VisitorBudget) {
    this.until = new VisitorMap(maxKeys, budget);
  }

  /** Ms the visitor stays refused from `now`, or 0. */
  remaining(key: string, now: number): number {
    const t = this.until.get(key);
    if (t === undefined) return 0;
    if (t <= now) {
      this.until.delete(key);
      return 0;
    }
    return t - now;
  }

  set(key: string, until: number): void {
    this.until.add(key, until);
  }

  release(): void {
    this.until.release();
  }
}
