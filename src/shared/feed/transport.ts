// The two ends of the feed transport between the control plane's publisher and every subscriber (edges).
// Redis implements both across nodes, MemoryFeed inside one process; the subscriber and publisher see only these.
import type { FeedChange, FeedSnapshot } from './types.ts';

/**
 * The publisher's side. The sink holds a copy of the map, a bounded log of recent changes and a head version;
 * the database stays the source of truth, so a sink that lost its state is simply reset from it.
 */
export interface FeedSink {
  /** The last version the sink holds, or null when it holds no state (e.g. a Redis that restarted empty). */
  head(): Promise<number | null>;
  /**
   * Appends `change` to the log, applies it to the map, moves the head and broadcasts it, all atomically and
   * only if the head is exactly `change.version - 1`. Returns false when it is not (another publisher moved
   * the head, or the sink lost its state), so concurrent publishers can never skip or duplicate a version.
   */
  publish(change: FeedChange): Promise<boolean>;
  /**
   * Replaces the whole map and the head with `snapshot` atomically, empties the log (its changes may belong to
   * another history) and broadcasts a reset hint. With `expectedHead`, does so only while the head still is
   * that value (null: no state) and returns false otherwise, so a publisher acting on a stale read cannot
   * undo another's newer work. Without it the reset is unconditional and returns true.
   */
  reset(snapshot: FeedSnapshot, expectedHead?: number | null): Promise<boolean>;
  close(): Promise<void>;
}

/** What a subscription is told. Hints arrive at most once and may be lost; the subscriber reads the truth itself. */
export interface FeedListener {
  /** A change was published. Versions may arrive with gaps (lost messages) or repeated. */
  onChange(change: FeedChange): void;
  /** The sink was reset to a snapshot at `version`. */
  onReset(version: number): void;
  /** The subscription was re-established after a disconnect: anything may have been missed meanwhile. */
  onReconnect(): void;
}

/** The subscriber's side. */
export interface FeedSource {
  /**
   * Registers `listener` and resolves once the subscription is active. If the source is unreachable the
   * promise rejects, but the subscription keeps trying and calls `onReconnect` once it is established.
   */
  subscribe(listener: FeedListener): Promise<void>;
  /** The last version the source holds, or null when it holds no state. */
  head(): Promise<number | null>;
  /**
   * Every change after `version`, oldest first; [] when the source holds nothing newer; null when the log no
   * longer covers `version + 1` (trimmed, or replaced by a reset), in which case only a snapshot can help.
   */
  readSince(version: number): Promise<FeedChange[] | null>;
  /** The whole map at one consistent version, or null when the source holds no state. */
  readSnapshot(): Promise<FeedSnapshot | null>;
  close(): Promise<void>;
}
