// What the rate-limit stage needs of the edge beyond an endpoint's rules: time, GeoIP, the cluster store, bounds,
// and where matches are reported. One object per edge (src/edge/index.ts), reached through StageDeps.rateLimits.
import type { ClusterStore } from './cluster.ts';
import type { GeoDatabases } from '../../shared/geo.ts';
import type { HeldRequests, RateLimitCounters } from './visitors.ts';
import type { RateLimitClock } from './window.ts';

/**
 * What the rate-limit stage did with a request, for metrics and tests: `allowed` (rules matched, none acted; told
 * with an empty rule), `blocked` (429), `throttled` (held), `unavailable` (503, cluster rule failing closed),
 * `fail_open` (a cluster rule counted locally because Redis could not answer).
 */
export type RateLimitOutcome = 'allowed' | 'blocked' | 'throttled' | 'unavailable' | 'fail_open';

export const RATE_LIMIT_OUTCOMES: readonly RateLimitOutcome[] = ['allowed', 'blocked', 'throttled', 'unavailable', 'fail_open'];

export interface RateLimitDeps {
  /** The wall clock unless a test or bench drives time by hand. */
  clock?: RateLimitClock;
  /** GeoIP databases (EDGE_GEOIP_*); absent: the shipped ones, loaded on first need. */
  geo?: GeoDatabases;
  /** Redis for cluster-scope rules; absent (no REDIS_URL): cluster rules count on this edge only. */
  cluster?: ClusterStore;
  /** Visitors counted per rule in memory when there is no `counters` (tests). */
  maxKeys?: number;
  /** The edge's rate-limit state by rule, bounded per rule and in total; absent: each compile starts afresh. */
  counters?: RateLimitCounters;
  /** Requests held by throttle rules on this edge and their bound; absent: one per process. */
  held?: HeldRequests;
  /** Told of every request a rule matched (the hit statistics path, src/edge/rate-limit/hits.ts). */
  hits?: { hit(ruleUuid: string): void };
  /** Told of every request some rule matched (RateLimitOutcome), and when a cluster rule falls back to local counts. */
  observe?: (endpoint: string, rule: string, outcome: RateLimitOutcome) => void;
}
