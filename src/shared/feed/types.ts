// The change feed's data model: a versioned map of (topic, key) -> JSON value, replicated to every node.
// Control writes changes in the same transaction as the config they describe; edges mirror the map in order.

/** One committed change. `data === null` deletes the key. Versions are gapless and strictly increasing. */
export interface FeedChange {
  version: number;
  topic: string;
  key: string;
  data: unknown;
}

export interface FeedEntry {
  topic: string;
  key: string;
  version: number;
  data: unknown;
}

/** The whole map as of `version`: what a subscriber resets to when it cannot replay the changes it missed. */
export interface FeedSnapshot {
  version: number;
  entries: FeedEntry[];
}
