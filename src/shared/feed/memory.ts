// The feed transport inside one process, for the all-in-one mode without Redis: the same contract as RedisFeed.
// Values are stored as JSON text and deliveries are asynchronous, so consumers see exactly what Redis would give.
import { parseEntries } from './parse.ts';
import type { FeedSink, FeedSource, FeedListener } from './transport.ts';
import type { FeedChange, FeedSnapshot } from './types.ts';

export interface MemoryFeedOptions {
  /** How many recent changes the log keeps for subscribers that fell behind; older ones need a snapshot. */
  maxLen?: number;
}

interface LoggedChange {
  version: number;
  /** The change as JSON, so every reader gets its own copy, as it would from Redis. */
  json: string;
}

function entryField(topic: string, key: string): string {
  return `${topic}\u0000${key}`;
}

export class MemoryFeed implements FeedSink, FeedSource {
  private readonly maxLen: number;
  private head_: number | null = null;
  private log: LoggedChange[] = [];
  /** entry field -> FeedEntry as JSON. */
  private entries = new Map<string, string>();
  private readonly listeners = new Set<FeedListener>();

  constructor(options: MemoryFeedOptions = {}) {
    const maxLen = options.maxLen ?? 10_000;
    if (!Number.isInteger(maxLen) || maxLen < 1) throw new RangeError(`MemoryFeed maxLen must be a positive integer, got ${maxLen}`);
    this.maxLen = maxLen;
  }

  async head(): Promise<number | null> {
    return this.head_;
  }

  async publish(change: FeedChange): Promise<boolean> {
    if (this.head_ === null || this.head_ !== change.version - 1) return false;
    const json = JSON.stringify(change);
    this.log.push({ version: change.version, json });
    // Trim in batches rather than shifting one element per publish, like Redis's approximate MAXLEN.
    if (this.log.length > this.maxLen + Math.ceil(this.maxLen / 10)) this.log = this.log.slice(-this.maxLen);
    const field = entryField(change.topic, change.key);
    if (change.data === null) this.entries.delete(field);
    else this.entries.set(field, JSON.stringify({ topic: change.topic, key: change.key, version: change.version, data: change.data }));
    this.head_ = change.version;
    this.broadcast((l) => l.onChange(JSON.parse(json) as FeedChange));
    return true;
  }

  async reset(snapshot: FeedSnapshot, expectedHead?: number | null): Promise<boolean> {
    if (expectedHead !== undefined && this.head_ !== expectedHead) return false;
    const entries = new Map<string, string>();
    for (const e of snapshot.entries) entries.set(entryField(e.topic, e.key), JSON.stringify(e));
    this.entries = entries;
    this.log = [];
    this.head_ = snapshot.version;
    const version = snapshot.version;
    this.broadcast((l) => l.onReset(version));
    return true;
  }

  async subscribe(listener: FeedListener): Promise<void> {
    this.listeners.add(listener);
  }

  async readSince(version: number): Promise<FeedChange[] | null> {
    if (this.head_ === null || this.head_ <= version) return [];
    const first = this.log[0];
    if (first === undefined || first.version > version + 1) return null;
    // Versions in the log are contiguous, so the offset of version + 1 is arithmetic.
    return this.log.slice(version + 1 - first.version).map((c) => JSON.parse(c.json) as FeedChange);
  }

  async readSnapshot(): Promise<FeedSnapshot | null> {
    if (this.head_ === null) return null;
    // A consistent cut in one step, then parsed in slices: 100k entries in one go hold the event loop ~400 ms.
    const version = this.head_;
    return { version, entries: await parseEntries([...this.entries.values()]) };
  }

  async close(): Promise<void> {
    this.listeners.clear();
  }

  /** Delivered after the publishing call returns, as a network hop would, so no caller depends on sync delivery. */
  private broadcast(deliver: (listener: FeedListener) => void): void {
    for (const listener of this.listeners) queueMicrotask(() => deliver(listener));
  }
}
