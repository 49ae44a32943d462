// What the rate-limit stage needs of the edge beyond an endpoint's rules: time, GeoIP, the cluster store, bounds,
// and where matches are reported. One object per edge (src/edge/index.ts), reached through StageDeps.rateLimits.
import type { ClusterStore } from './cluster.ts';
import type { GeoDatabases } from './geo.ts';
import type { RateLimitClock } from './window.ts';

/** What a rule did to a request, for metrics and tests. */
export type RateLimitOutcome = 'blocked' | 'throttled' | 'unavailable' | 'fallback';

export interface RateLimitDeps {
  /** The wall clock unless a test or bench drives time by hand. */
  clock?: RateLimitClock;
  /** GeoIP databases (EDGE_GEOIP_*); absent: the shipped ones, loaded on first need. */
  geo?: GeoDatabases;
  /** Redis for cluster-scope rules; absent (no REDIS_URL): cluster rules count on this edge only. */
  cluster?: ClusterStore;
  /** Visitors counted per rule in memory (EDGE_RATE_LIMIT_MAX_KEYS). */
  maxKeys?: number;
  /** Told of every request a rule matched (the hit statistics path, src/edge/rate-limit/hits.ts). */
  hits?: { hit(ruleUuid: string): void };
  /** Told when a rule refuses, delays or cannot decide a request, and when a cluster rule falls back to local counts. */
  observe?: (endpoint: string, rule: string, outcome: RateLimitOutcome) => void;
}
