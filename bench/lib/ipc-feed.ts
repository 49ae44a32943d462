// The change feed across a process boundary, for benchmarks: a MemoryFeed in the parent served over Node's IPC
// channel to an edge in a child process, so the memory the child reports is the edge's alone, not the feed's too.
//
// A deployed edge reads its feed from Redis, whose snapshot read (HVALS) hands over every entry's JSON text at once,
// parsed in slices (src/shared/feed/redis.ts). The snapshot here arrives the same way (its values sent in chunks, as
// a Redis client reads a long reply, so no transport buffer the size of the whole snapshot exists), so the edge's
// peak while it applies a reset is close to what it would be on Redis. Hints are sent as they are published.
import type { ChildProcess } from 'node:child_process';
import type { MemoryFeed } from '../../src/shared/feed/memory.ts';
import type { FeedListener, FeedSource } from '../../src/shared/feed/transport.ts';
import type { FeedChange, FeedSnapshot } from '../../src/shared/feed/types.ts';
import { parseEntries } from '../../src/shared/feed/parse.ts';

type Call = { feed: 'call'; id: number; method: 'head' | 'readSince' | 'readSnapshot'; since?: number };
type Reply = { feed: 'reply'; id: number; value: unknown } | { feed: 'chunk'; id: number; values: string[] };

/** Snapshot values per IPC message. */
const CHUNK = 1_000;
type Hint = { feed: 'change'; change: FeedChange } | { feed: 'reset' };

/** Whether an IPC message belongs to the feed (the bench's own messages share the channel). */
export function isFeedMessage(message: unknown): boolean {
  return typeof message === 'object' && message !== null && 'feed' in message;
}

/**
 * Parent side: answers the child's reads from `feed` and forwards its hints. The snapshot is sent as JSON text per
 * entry, as Redis stores it. Returns a function that stops serving.
 */
export async function serveFeed(child: ChildProcess, feed: MemoryFeed): Promise<() => void> {
  let serving = true;
  const send = (message: Reply | Hint) => {
    if (serving && child.connected) child.send(message);
  };
  /**
   * The snapshot as Redis holds it, one JSON text per entry: made before the child asks (and again only after a
   * change), so what the edge waits for is the transfer, as from Redis, not this process reading its own feed.
   */
  let held: { head: number | null; text: Promise<{ version: number; values: string[] } | null> } | null = null;
  const snapshotText = async () => {
    const head = await feed.head();
    if (held === null || held.head !== head) {
      const text = feed.readSnapshot().then((snapshot) => snapshot && { version: snapshot.version, values: snapshot.entries.map((e) => JSON.stringify(e)) });
      held = { head, text };
    }
    return held.text;
  };
  /** Sent a chunk at a time, then its version. */
  const sendSnapshot = async (id: number) => {
    const snapshot = await snapshotText();
    if (snapshot === null) return send({ feed: 'reply', id, value: null });
    for (let i = 0; i < snapshot.values.length; i += CHUNK) send({ feed: 'chunk', id, values: snapshot.values.slice(i, i + CHUNK) });
    send({ feed: 'reply', id, value: snapshot.version });
  };
  await feed.subscribe({
    onChange: (change) => send({ feed: 'change', change }),
    onReset: () => send({ feed: 'reset' }),
    onReconnect: () => {},
  });
  const onMessage = (message: unknown) => {
    if (!isFeedMessage(message) || (message as Call).feed !== 'call') return;
    const call = message as Call;
    if (call.method === 'readSnapshot') return void sendSnapshot(call.id);
    const read = call.method === 'head' ? feed.head() : feed.readSince(call.since!);
    void read.then((value) => send({ feed: 'reply', id: call.id, value }));
  };
  child.on('message', onMessage);
  await snapshotText();
  return () => {
    serving = false;
    child.off('message', onMessage);
  };
}

/** Child side: the FeedSource an edge in this process reads, served by the parent's serveFeed. */
export class IpcFeedSource implements FeedSource {
  private nextId = 0;
  private readonly pending = new Map<number, (value: unknown) => void>();
  /** Snapshot values received so far, by call. */
  private readonly chunks = new Map<number, string[]>();
  private readonly listeners = new Set<FeedListener>();
  private readonly onMessage = (message: unknown) => {
    if (!isFeedMessage(message)) return;
    const m = message as Reply | Hint;
    if (m.feed === 'chunk') {
      const values = this.chunks.get(m.id);
      if (values === undefined) this.chunks.set(m.id, m.values);
      else for (const v of m.values) values.push(v);
    } else if (m.feed === 'reply') {
      const resolve = this.pending.get(m.id);
      this.pending.delete(m.id);
      resolve?.(m.value);
    } else if (m.feed === 'change') {
      for (const l of this.listeners) l.onChange(m.change);
    } else {
      for (const l of this.listeners) l.onReset(0);
    }
  };

  constructor() {
    if (!process.send) throw new Error('IpcFeedSource: this process has no IPC channel (spawn it with stdio "ipc")');
    process.on('message', this.onMessage);
  }

  private call<T>(method: Call['method'], since?: number): Promise<T> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.pending.set(id, resolve as (value: unknown) => void);
      process.send!({ feed: 'call', id, method, since } satisfies Call);
    });
  }

  async subscribe(listener: FeedListener): Promise<void> {
    this.listeners.add(listener);
  }

  head(): Promise<number | null> {
    return this.call('head');
  }

  readSince(version: number): Promise<FeedChange[] | null> {
    return this.call('readSince', version);
  }

  async readSnapshot(): Promise<FeedSnapshot | null> {
    const id = this.nextId;
    const version = await this.call<number | null>('readSnapshot');
    const values = this.chunks.get(id) ?? [];
    this.chunks.delete(id);
    if (version === null) return null;
    // As RedisFeed.readSnapshot: every value's text at once, parsed in slices (each let go once parsed).
    return { version, entries: await parseEntries(values) };
  }

  async close(): Promise<void> {
    this.listeners.clear();
    process.off('message', this.onMessage);
  }
}
