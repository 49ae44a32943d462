// Keeps a consumer's copy of the feed map exactly in version order, whatever the transport loses or repeats.
// Pub/sub only hints; the subscriber reads the log or a snapshot itself to fill gaps, and never goes backwards.
import { EventEmitter } from 'node:events';
import { createLogger, type Logger } from '../log.ts';
import { DEFAULT_SLICE_MS, TimeSlicer } from '../time-slice.ts';
import type { FeedListener, FeedSource } from './transport.ts';
import type { FeedChange, FeedEntry, FeedSnapshot } from './types.ts';

/** What the subscriber drives. Either call may throw: the consumer must then keep its previous state intact. */
export interface FeedConsumer {
  /**
   * Replace the whole state with `snapshot`. A large one should be applied in slices (FeedMirror does), with the
   * previous state in force until the swap; `signal` is aborted when the subscriber stops, and a reset that
   * gives up then must leave the previous state intact.
   */
  reset(snapshot: FeedSnapshot, signal?: AbortSignal): void | Promise<void>;
  /** Apply one change; it is always the version right after the last one applied or reset to. */
  apply(change: FeedChange): void | Promise<void>;
}

export interface FeedSubscriberOptions {
  /** Period of the safety-net comparison with the source's head; jittered by ±20% so a fleet spreads out. */
  checkIntervalMs: number;
  logger?: Logger;
  /**
   * The version the consumer already holds (e.g. config restored from disk). It then catches up from there
   * and is never reset to anything older. Omitted: the consumer holds nothing and starts from a snapshot.
   */
  version?: number;
}

/** Why the subscriber went to read the source: a start, a gap in versions, a hint, or the periodic check. */
export type ResyncReason = 'start' | 'gap' | 'reconnect' | 'reset' | 'check';

export interface ResyncDetail {
  /** replay: missed changes applied from the log; snapshot: the whole state replaced. */
  mode: 'replay' | 'snapshot';
  from: number;
  to: number;
}

export interface FeedSubscriberEvents {
  /** The consumer now holds `version` (after a change or a reset). */
  applied: [version: number];
  resync: [reason: ResyncReason, detail: ResyncDetail];
  /** The source only offers state older than what the consumer holds; it is kept and the source ignored. */
  stale: [sourceVersion: number, appliedVersion: number];
  /** A failed read or consumer call; already logged. Emitted only when someone listens, so it never throws. */
  error: [err: unknown];
}

export class FeedSubscriber extends EventEmitter<FeedSubscriberEvents> {
  private readonly checkIntervalMs: number;
  private readonly logger: Logger;
  private applied: number;
  /** The consumer's state is not a known prefix of the feed (fresh start, or a failed call): only a snapshot fixes it. */
  private needsReset: boolean;
  /** After a consumer failure or a refused snapshot, hints are ignored and only the next check retries. */
  private hold = false;
  private running = false;
  private started = false;
  private syncQueued = false;
  /** Every operation runs after the previous one settles, so the consumer never sees two calls at once. */
  private tail: Promise<void> = Promise.resolve();
  private checkTimer: NodeJS.Timeout | null = null;
  private readonly listener: FeedListener;
  /** Aborted by stop(), so a reset in slices is abandoned rather than waited for. */
  private readonly stopping = new AbortController();

  constructor(
    private readonly source: FeedSource,
    private readonly consumer: FeedConsumer,
    options: FeedSubscriberOptions,
  ) {
    super();
    if (!Number.isInteger(options.checkIntervalMs) || options.checkIntervalMs < 1) {
      throw new RangeError(`FeedSubscriber checkIntervalMs must be a positive integer, got ${options.checkIntervalMs}`);
    }
    if (options.version !== undefined && (!Number.isInteger(options.version) || options.version < 0)) {
      throw new RangeError(`FeedSubscriber version must be a non-negative integer, got ${options.version}`);
    }
    this.checkIntervalMs = options.checkIntervalMs;
    this.logger = (options.logger ?? createLogger('silent')).child({ component: 'feed-subscriber' });
    this.applied = options.version ?? 0;
    this.needsReset = options.version === undefined;
    this.listener = {
      onChange: (change) => {
        if (this.running) void this.enqueue(() => this.handleChange(change));
      },
      onReset: () => this.requestSync('reset'),
      onReconnect: () => this.requestSync('reconnect'),
    };
  }

  /** The version the consumer holds. */
  get version(): number {
    return this.applied;
  }

  /**
   * Subscribes, then brings the consumer up to date. Resolves even when the source is unreachable (the
   * consumer keeps what it has; a reconnect or the periodic check catches up later), so a node can start.
   */
  async start(): Promise<void> {
    if (this.started) throw new Error('FeedSubscriber can only be started once');
    this.started = true;
    this.running = true;
    try {
      // Subscribing before the first read means nothing published in between can be missed.
      await this.source.subscribe(this.listener);
    } catch (err) {
      this.report(err, 'warn', 'feed subscription not established yet; catching up once it is');
    }
    await this.enqueue(() => this.sync('start'));
    this.scheduleCheck();
  }

  /** Stops reacting to the source and waits for the operation in progress. The source is the caller's to close. */
  async stop(): Promise<void> {
    this.running = false;
    if (this.checkTimer) clearTimeout(this.checkTimer);
    this.checkTimer = null;
    this.stopping.abort();
    await this.tail;
  }

  private enqueue(op: () => Promise<void>): Promise<void> {
    const run = this.tail.then(async () => {
      if (!this.running) return;
      try {
        await op();
      } catch (err) {
        // Consumer failures are handled where they happen; what lands here is the source failing.
        this.report(err, 'warn', 'feed source read failed; retrying at the next hint or check');
      }
    });
    this.tail = run;
    return run;
  }

  /** A burst of hints needs one catch-up, not one each. */
  private requestSync(reason: ResyncReason): void {
    if (!this.running || this.hold || this.syncQueued) return;
    this.syncQueued = true;
    void this.enqueue(async () => {
      this.syncQueued = false;
      if (!this.hold) await this.sync(reason);
    });
  }

  private async handleChange(change: FeedChange): Promise<void> {
    if (this.hold) return;
    if (this.needsReset || change.version > this.applied + 1) return this.sync('gap');
    if (change.version === this.applied + 1) await this.applyChange(change);
    // Older or repeated versions are already part of the consumer's state.
  }

  /** Brings the consumer to the source's head: replaying the log when it covers the gap, else from a snapshot. */
  private async sync(reason: ResyncReason): Promise<void> {
    const from = this.applied;
    if (!this.needsReset) {
      const changes = await this.source.readSince(this.applied);
      if (changes !== null && this.isContiguous(changes)) {
        for (const change of changes) {
          if (change.version <= this.applied) continue;
          if (!(await this.applyChange(change))) return;
        }
        if (this.applied > from) this.emit('resync', reason, { mode: 'replay', from, to: this.applied });
        return;
      }
    }
    const snapshot = await this.source.readSnapshot();
    if (snapshot === null) return; // the source holds no state yet; its publisher's reset hint will bring us back
    if (snapshot.version < this.applied) {
      // Serving older config than we already served would undo changes users saw take effect.
      this.hold = true;
      this.logger.warn(
        { snapshot: snapshot.version, applied: this.applied, reason },
        'feed source is behind this node; keeping current state',
      );
      this.emit('stale', snapshot.version, this.applied);
      return;
    }
    if (snapshot.version === this.applied && !this.needsReset) return;
    if (!this.running) return; // stopped while the snapshot was read
    // Changes that arrive while a reset runs (in slices) wait in the queue behind it, so they are applied after it.
    try {
      await this.consumer.reset(snapshot, this.stopping.signal);
    } catch (err) {
      if (this.stopping.signal.aborted) return; // abandoned by stop(): the previous state is intact, nothing to report
      return this.consumerFailed(err, snapshot.version);
    }
    this.applied = snapshot.version;
    this.needsReset = false;
    this.logger.info({ reason, from, to: snapshot.version, entries: snapshot.entries.length }, 'feed reset from snapshot');
    this.emit('resync', reason, { mode: 'snapshot', from, to: snapshot.version });
    this.emit('applied', snapshot.version);
  }

  /** Replayed changes must continue our version without a hole, or the log belongs to another history. */
  private isContiguous(changes: FeedChange[]): boolean {
    let expected = this.applied + 1;
    for (const change of changes) {
      if (change.version < expected) continue;
      if (change.version !== expected) return false;
      expected++;
    }
    return true;
  }

  private async applyChange(change: FeedChange): Promise<boolean> {
    try {
      await this.consumer.apply(change);
    } catch (err) {
      this.consumerFailed(err, change.version);
      return false;
    }
    this.applied = change.version;
    this.emit('applied', change.version);
    return true;
  }

  /**
   * The consumer may have applied part of the change, so only a full reset can make its state trustworthy
   * again. Retried at the next check rather than at once, so a change it cannot take does not spin.
   */
  private consumerFailed(err: unknown, version: number): void {
    this.needsReset = true;
    this.hold = true;
    this.report(err, 'error', `feed consumer failed at version ${version}; keeping version ${this.applied}, full resync at the next check`);
  }

  private scheduleCheck(): void {
    if (!this.running) return;
    const delay = Math.round(this.checkIntervalMs * (0.8 + Math.random() * 0.4));
    this.checkTimer = setTimeout(() => {
      void this.enqueue(() => this.check()).then(() => this.scheduleCheck());
    }, delay);
    // The check is a safety net; it must not keep a process alive that is otherwise done.
    this.checkTimer.unref();
  }

  /** The safety net for every lost hint: compare heads, and lift a hold so a failed resync is retried. */
  private async check(): Promise<void> {
    this.hold = false;
    if (this.needsReset) return this.sync('check');
    const head = await this.source.head();
    if (head === null) return;
    if (head > this.applied) return this.sync('check');
    if (head < this.applied) {
      this.logger.warn({ head, applied: this.applied }, 'feed source head is behind this node; keeping current state');
      this.emit('stale', head, this.applied);
    }
  }

  private report(err: unknown, level: 'warn' | 'error', message: string): void {
    this.logger[level]({ err }, message);
    if (this.listenerCount('error') > 0) this.emit('error', err);
  }
}


function mirrorKey(topic: string, key: string): string {
  return `${topic}\u0000${key}`;
}

/**
 * Puts a consumer's prepared state in force. It runs in the same tick as the mirror's own swap, so nothing ever
 * sees one new and the other old; what it returns (listeners told in slices, say) is awaited before the reset ends.
 */
export type ResetSwap = () => void | Promise<void>;

export interface FeedMirrorOptions {
  /**
   * Told of every applied change, after the mirror holds it, with the entry it replaced. Without `prepareReset`,
   * also told (in slices) of a reset's differences once the new map is in force.
   */
  onChange?: (change: FeedChange, previous: FeedEntry | undefined) => void;
  /**
   * Told of a reset's differences (the keys whose version differs, removed keys as `data: null` at the
   * snapshot's version) while the previous state is still in force: builds what depends on them off to the side,
   * yielding through `slicer`, and returns the swap. A throw leaves everything as it was.
   */
  prepareReset?: (differences: FeedChange[], slicer: TimeSlicer) => Promise<ResetSwap>;
  /** Longest stretch a reset works without yielding to the event loop (default 10 ms). */
  sliceMs?: number;
}

/**
 * The simplest consumer: the feed map itself, kept in memory. A reset builds the new map in slices beside the old
 * one and swaps it in whole (docs/architecture.md "Build, then swap"), so reads never see a half-applied snapshot and
 * 100k entries never hold the event loop.
 */
export class FeedMirror implements FeedConsumer {
  private map = new Map<string, FeedEntry>();
  private version_ = 0;
  private resetting = false;
  private readonly onChange: FeedMirrorOptions['onChange'] | null;
  private readonly prepareReset: FeedMirrorOptions['prepareReset'] | null;
  private readonly sliceMs: number;

  constructor(options: FeedMirrorOptions = {}) {
    this.onChange = options.onChange ?? null;
    this.prepareReset = options.prepareReset ?? null;
    this.sliceMs = options.sliceMs ?? DEFAULT_SLICE_MS;
  }

  get version(): number {
    return this.version_;
  }

  get size(): number {
    return this.map.size;
  }

  get(topic: string, key: string): FeedEntry | undefined {
    return this.map.get(mirrorKey(topic, key));
  }

  /**
   * Every entry, or those of one topic, as of one version: entries are replaced, never changed in place, so the
   * array stays a consistent cut while later changes arrive.
   */
  entries(topic?: string): FeedEntry[] {
    const all = [...this.map.values()];
    return topic === undefined ? all : all.filter((e) => e.topic === topic);
  }

  /**
   * Replaces the map with `snapshot`'s, in slices. Until it resolves, reads see the previous state; `signal`
   * abandons it (before the swap only), leaving the previous state in force.
   */
  async reset(snapshot: FeedSnapshot, signal?: AbortSignal): Promise<void> {
    // The subscriber never overlaps calls; a direct caller that did would have its change lost at the swap.
    if (this.resetting) throw new Error('FeedMirror: a reset is already in progress');
    this.resetting = true;
    try {
      const slicer = new TimeSlicer(this.sliceMs, signal);
      const previous = this.map;
      const next = new Map<string, FeedEntry>();
      const differences: FeedChange[] = [];
      for (const entry of snapshot.entries) {
        const id = mirrorKey(entry.topic, entry.key);
        next.set(id, entry);
        // An entry has a change's fields, so it is passed as is (100k copies would only feed the garbage collector).
        if (previous.get(id)?.version !== entry.version) differences.push(entry);
        if (slicer.due()) await slicer.yield();
      }
      for (const [id, entry] of previous) {
        if (!next.has(id)) differences.push({ version: snapshot.version, topic: entry.topic, key: entry.key, data: null });
        if (slicer.due()) await slicer.yield();
      }
      const swap = this.prepareReset ? await this.prepareReset(differences, slicer) : null;
      this.map = next;
      this.version_ = snapshot.version;
      if (swap) return await swap();
      const onChange = this.onChange;
      // A new slicer: abandoning the reset after the swap would leave listeners told of only part of it.
      if (onChange) await new TimeSlicer(this.sliceMs).forEach(differences, (d) => onChange(d, previous.get(mirrorKey(d.topic, d.key))));
    } finally {
      this.resetting = false;
    }
  }

  apply(change: FeedChange): void {
    if (this.resetting) throw new Error('FeedMirror: apply while a reset is in progress');
    const id = mirrorKey(change.topic, change.key);
    const previous = this.map.get(id);
    if (change.data === null) this.map.delete(id);
    else this.map.set(id, { topic: change.topic, key: change.key, version: change.version, data: change.data });
    this.version_ = change.version;
    this.onChange?.(change, previous);
  }
}
