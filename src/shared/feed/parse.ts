// Turns a snapshot read as one JSON text per entry (Redis HVALS, the in-process feed, a saved state file) into entries.
// Each text is let go once parsed and repeated strings are shared, so a large snapshot never holds texts and objects whole.
import { TimeSlicer } from '../time-slice.ts';
import { shareEndpointStrings, TOPICS, type EndpointConfig } from '../snapshot.ts';
import type { FeedEntry } from './types.ts';

/**
 * Strings a pool remembers before it forgets the ones not seen again: a snapshot also has unique strings (a
 * hostname's origin), and remembering all of them would cost more, for the length of the parse, than sharing saves.
 */
const POOL_GENERATION = 16_384;

/**
 * Shares equal strings between the entries of one snapshot as they are parsed. JSON.parse makes a new string for
 * every value: at 100k endpoints the uuid that is also the entry's key, the origin URL an endpoint and its routing
 * rule both name, shared by many endpoints, were each a copy (docs/performance.md "Issue 21: memory at 100k
 * endpoints"). Only the fields known to repeat are looked at (shareEndpointStrings): a walk of every value cost
 * as much CPU again as the parse. Two generations: a string seen again moves to the young one, so one repeated
 * across the snapshot stays shared while a unique one is dropped a generation later.
 */
export class StringPool {
  private young = new Map<string, string>();
  private old = new Map<string, string>();

  /** `entry` with the strings it repeats replaced by their pooled copies (in place). */
  entry(entry: FeedEntry): FeedEntry {
    if (entry.topic === TOPICS.endpoint && typeof entry.data === 'object' && entry.data !== null) {
      shareEndpointStrings(entry.data as EndpointConfig, entry.key, this.share);
    }
    return entry;
  }

  /** The pooled copy of `s`. */
  readonly share = (s: string): string => {
    const young = this.young.get(s);
    if (young !== undefined) return young;
    if (this.young.size >= POOL_GENERATION) {
      this.old = this.young;
      this.young = new Map();
    }
    const shared = this.old.get(s) ?? s;
    this.young.set(s, shared);
    return shared;
  };
}

/**
 * Parses `texts` (one FeedEntry's JSON each) in slices, emptying each slot of `texts` as it is parsed: the caller's
 * array is consumed. The texts of a 100k-endpoint snapshot are ~150 MB of heap and the parsed entries as much again;
 * with both held until the end the reset's peak (which V8 keeps committed for seconds after) was their sum.
 */
export async function parseEntries(texts: string[], slicer: TimeSlicer = new TimeSlicer()): Promise<FeedEntry[]> {
  const pool = new StringPool();
  const entries: FeedEntry[] = new Array(texts.length);
  for (let i = 0; i < texts.length; i++) {
    entries[i] = pool.entry(JSON.parse(texts[i]) as FeedEntry);
    texts[i] = '';
    if (slicer.due()) await slicer.yield();
  }
  return entries;
}
