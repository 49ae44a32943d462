// Moves committed feed changes from the database's outbox to the feed sink (Redis, or in-process), in order.
// The database is the truth: a sink that lost its state, or holds another database's, is reset from a snapshot.
import { EventEmitter } from 'node:events';
import type { Database } from '../store/db.ts';
import { feedChannel, pruneOutbox, readOutbox, readSnapshot } from '../store/feed.ts';
import type { FeedSink } from '../shared/feed/transport.ts';
import type { FeedChange } from '../shared/feed/types.ts';
import type { Logger } from '../shared/log.ts';

export interface FeedPublisherOptions {
  db: Database;
  sink: FeedSink;
  logger: Logger;
  /** Safety-net poll period; NOTIFY normally wakes the publisher at once. Also the retry period while the sink is down. */
  pollMs: number;
  /** Outbox rows kept behind the published version (config feed.outboxRetention). */
  retain: number;
  /** Outbox rows read per query. */
  batch?: number;
}

export interface FeedPublisherEvents {
  /** The sink now holds `version`, published by this publisher or observed there. */
  published: [version: number];
  /** This publisher replaced the sink's state with a snapshot at `version`. */
  reset: [version: number];
  /** A failed drain; already logged and retried at the next poll. Emitted only when someone listens. */
  error: [err: unknown];
}

export class FeedPublisher extends EventEmitter<FeedPublisherEvents> {
  private readonly db: Database;
  private readonly sink: FeedSink;
  private readonly logger: Logger;
  private readonly pollMs: number;
  private readonly retain: number;
  private readonly batch: number;
  /** Prune once the head moved this far since the last prune: often enough to bound the table, rarely enough to be cheap. */
  private readonly pruneEvery: number;
  private published = -1;
  private prunedAt = 0;
  private failing = false;
  private stopped = false;
  private timer: NodeJS.Timeout | null = null;
  private unlisten: (() => Promise<void>) | null = null;
  /** The drain in progress, and the one queued behind it; drains never overlap, and callers share the queued one. */
  private draining: Promise<void> | null = null;
  private queued: Promise<void> | null = null;

  constructor(options: FeedPublisherOptions) {
    super();
    const batch = options.batch ?? 500;
    for (const [name, value] of Object.entries({ pollMs: options.pollMs, retain: options.retain, batch })) {
      if (!Number.isInteger(value) || value < 1) throw new RangeError(`FeedPublisher ${name} must be a positive integer, got ${value}`);
    }
    this.db = options.db;
    this.sink = options.sink;
    this.logger = options.logger.child({ component: 'feed-publisher' });
    this.pollMs = options.pollMs;
    this.retain = options.retain;
    this.batch = batch;
    this.pruneEvery = Math.max(1, Math.floor(options.retain / 10));
  }

  /** The last version this publisher knows the sink to hold; -1 before its first successful drain. */
  get publishedVersion(): number {
    return this.published;
  }

  /** Listens for commits and starts polling. Does not wait for the first drain, so an unreachable sink cannot delay start. */
  async start(): Promise<void> {
    if (this.timer || this.stopped) throw new Error('FeedPublisher can only be started once');
    this.unlisten = await this.db.listen(feedChannel(this.db.schema), () => void this.kick());
    this.timer = setInterval(() => void this.kick(), this.pollMs);
    this.timer.unref();
    void this.kick();
  }

  /**
   * Asks for a drain and resolves once one that started after this call has finished, so everything committed
   * before the call has been published (or the attempt failed and was logged). Never rejects.
   */
  kick(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.queued) return this.queued;
    if (!this.draining) {
      this.draining = this.drain().finally(() => {
        this.draining = null;
      });
      return this.draining;
    }
    this.queued = this.draining.then(() => {
      this.queued = null;
      return this.kick();
    });
    return this.queued;
  }

  /** Resolves once the sink holds `version` as far as this publisher knows; rejects after `timeoutMs`. */
  waitFor(version: number, timeoutMs = 10_000): Promise<void> {
    if (this.published >= version) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onPublished = (v: number) => {
        if (v < version) return;
        clearTimeout(timer);
        this.off('published', onPublished);
        resolve();
      };
      const timer = setTimeout(() => {
        this.off('published', onPublished);
        reject(new Error(`feed version ${version} not published within ${timeoutMs} ms (published ${this.published})`));
      }, timeoutMs);
      this.on('published', onPublished);
    });
  }

  /** Stops listening and polling, and waits for the drain in progress. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.unlisten?.().catch(() => {});
    this.unlisten = null;
    await (this.queued ?? this.draining);
  }

  private async drain(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.publishPending();
      if (this.failing) this.logger.info({ version: this.published }, 'feed publishing recovered');
      this.failing = false;
      if (this.published - this.prunedAt >= this.pruneEvery) {
        const pruned = await pruneOutbox(this.db, this.published, this.retain);
        this.prunedAt = this.published;
        if (pruned > 0) this.logger.debug({ pruned, published: this.published }, 'feed outbox pruned');
      }
    } catch (err) {
      // A sink that stays down would otherwise log at every poll: warn once per outage, then quietly retry.
      if (this.failing) this.logger.debug({ err }, 'feed publishing still failing');
      else this.logger.warn({ err }, 'feed publishing failed; retrying at the next poll');
      this.failing = true;
      if (this.listenerCount('error') > 0) this.emit('error', err);
    }
  }

  private async publishPending(): Promise<void> {
    let resets = 0;
    for (;;) {
      if (this.stopped) return;
      const head = await this.sink.head();
      const changes = head === null ? null : await this.changesAfter(head);
      if (head === null || changes === null) {
        // Two resets in one drain means something keeps undoing them (say, a publisher on another database):
        // back off to the poll period rather than fight in a tight loop.
        if (++resets > 1) throw new Error(`feed sink keeps diverging from the database (sink head ${head})`);
        await this.resetSink(head);
        continue;
      }
      this.observe(head);
      if (changes.length === 0) return;
      for (const change of changes) {
        // false: another publisher moved the head (or the sink lost its state); re-read it and carry on from there.
        if (!(await this.sink.publish(change))) break;
        this.observe(change.version);
      }
    }
  }

  /** The outbox after the sink's head, or null when only a snapshot can bring the sink in line. */
  private async changesAfter(head: number): Promise<FeedChange[] | null> {
    const { version, changes } = await readOutbox(this.db, head, this.batch);
    // A head beyond our database's version was written from another database: its log means nothing here.
    return version < head ? null : changes;
  }

  private async resetSink(expectedHead: number | null): Promise<void> {
    const snapshot = await readSnapshot(this.db);
    // Conditional on the head we read, so a slower publisher cannot roll back one that already moved on.
    if (!(await this.sink.reset(snapshot, expectedHead))) return;
    this.logger.info(
      { previous: expectedHead, version: snapshot.version, entries: snapshot.entries.length },
      'feed sink reset from the database',
    );
    this.published = snapshot.version;
    this.emit('reset', snapshot.version);
    this.emit('published', snapshot.version);
  }

  private observe(version: number): void {
    if (version === this.published) return;
    this.published = version;
    this.emit('published', version);
  }
}
