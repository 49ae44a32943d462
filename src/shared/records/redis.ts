// The traffic-record stream between nodes: one capped Redis Stream that edges append batches to (XADD … MAXLEN ~)
// and workers read through one consumer group (XREADGROUP, XACK, XAUTOCLAIM for a dead worker's pending batches).
import { Redis, type RedisOptions } from 'ioredis';
import { createLogger, type Logger } from '../log.ts';
import { redisReady } from '../redis-ready.ts';
import { RECORD_LIMITS, parseBatch, type ReadOptions, type RecordBacklog, type RecordBatch, type RecordSink, type RecordSinkStats, type RecordSource, type TrafficRecord } from './types.ts';
import { connectRedis } from '../redis-connect.ts';

export interface RedisRecordsOptions {
  url: string;
  /** Starts the stream's key, so several deployments (or tests) can share one Redis. */
  prefix: string;
  /** This node's name in the consumer group (its node id). */
  consumer: string;
  /** Approximate cap of the stream, in batches: bounds Redis's memory while no worker reads. */
  maxLen?: number;
  /** Records an edge holds while Redis is unreachable; beyond it the oldest are dropped (and counted). */
  maxBuffered?: number;
  /** A batch pending on a consumer for this long is claimed by another reader (its worker is presumed dead). */
  reclaimAfterMs?: number;
  /** The longest a command waits for Redis (a blocking read: its block time plus this). */
  commandTimeoutMs?: number;
  /** The longest one read blocks waiting for a batch; longer requests are cut to it. */
  maxBlockMs?: number;
  logger?: Logger;
}

/** The consumer group every worker reads through; one group, so a batch acknowledged is also deleted. */
const GROUP = 'workers';
/** Consumers gone this long with nothing pending are removed from the group (node ids are new at every start). */
const FORGET_CONSUMER_MS = 3_600_000;

type Entry = [id: string, fields: string[] | null];

function field(fields: string[] | null, name: string): string | null {
  if (!fields) return null;
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return null;
}

function errorCode(err: unknown): string {
  return String((err as Error)?.message ?? '').split(' ')[0];
}

export class RedisRecords implements RecordSink, RecordSource {
  readonly key: string;
  private readonly consumer: string;
  private readonly maxLen: number;
  private readonly maxBuffered: number;
  private readonly reclaimAfterMs: number;
  private readonly commandTimeoutMs: number;
  private readonly maxBlockMs: number;
  private readonly logger: Logger;
  private readonly url: string;
  private readonly connectionOptions: RedisOptions;
  private commands: Redis | null = null;
  /** Blocking reads get their own connection: a blocked XREADGROUP would hold up every other command. */
  private reader: Redis | null = null;
  private closed = false;

  // ---- sink state ----
  private buffer: TrafficRecord[] = [];
  private inFlight = 0;
  private sending: Promise<void> | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private retryDelayMs = 0;
  private dropped = 0;
  private sent = 0;
  private down = false;

  // ---- source state ----
  private groupReady = false;
  /** At start, this consumer's pending list is unknown (a previous run under the same node id may have left some). */
  private starting = true;
  /** Delivered and not yet acknowledged: the next read asks for this consumer's pending list again first. */
  private readonly unacked = new Set<string>();
  private lastReclaim = 0;
  private reclaimCursor = '0-0';

  constructor(options: RedisRecordsOptions) {
    const maxLen = options.maxLen ?? 100_000;
    const maxBuffered = options.maxBuffered ?? 50_000;
    const reclaimAfterMs = options.reclaimAfterMs ?? 60_000;
    const commandTimeoutMs = options.commandTimeoutMs ?? 5_000;
    const maxBlockMs = options.maxBlockMs ?? 5_000;
    if (!options.url) throw new TypeError('RedisRecords needs a redis:// url');
    if (!options.prefix) throw new TypeError('RedisRecords needs a key prefix (config redisPrefix)');
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(options.consumer ?? '')) throw new TypeError(`RedisRecords consumer must be a node id, got ${JSON.stringify(options.consumer)}`);
    for (const [name, value] of Object.entries({ maxLen, maxBuffered, reclaimAfterMs, commandTimeoutMs, maxBlockMs })) {
      if (!Number.isInteger(value) || value < 1) throw new RangeError(`RedisRecords ${name} must be a positive integer, got ${value}`);
    }
    this.url = options.url;
    this.key = `${options.prefix}records`;
    this.consumer = options.consumer;
    this.maxLen = maxLen;
    this.maxBuffered = maxBuffered;
    this.reclaimAfterMs = reclaimAfterMs;
    this.commandTimeoutMs = commandTimeoutMs;
    this.maxBlockMs = maxBlockMs;
    this.logger = (options.logger ?? createLogger('silent')).child({ component: 'traffic-records' });
    this.connectionOptions = {
      // Nothing queued while disconnected: the sink keeps its own bounded buffer and a request never waits.
      enableOfflineQueue: false,
      autoResendUnfulfilledCommands: false,
      maxRetriesPerRequest: 1,
      commandTimeout: commandTimeoutMs,
      connectTimeout: commandTimeoutMs,
      retryStrategy: (attempt: number) => Math.min(2_000, 100 * 2 ** Math.min(attempt, 5)),
    };
  }

  // ---- RecordSink ----

  append(records: readonly TrafficRecord[]): void {
    if (this.closed || records.length === 0) return;
    for (const record of records) this.buffer.push(record);
    this.trimBuffer();
    // Deferred a tick, so appends made together travel in one XADD; during a backoff the retry timer sends.
    if (!this.retryTimer) void this.kick(true);
  }

  async flush(timeoutMs = this.commandTimeoutMs): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((this.buffer.length > 0 || this.sending) && Date.now() < deadline && !this.closed) {
      if (this.retryTimer) {
        clearTimeout(this.retryTimer);
        this.retryTimer = null;
      }
      const before = this.buffer.length;
      await this.kick(false);
      // A send that moved nothing (Redis down) will not do better in a tight loop.
      if (this.buffer.length >= before && this.buffer.length > 0) break;
    }
  }

  stats(): RecordSinkStats {
    return { buffered: this.buffer.length + this.inFlight, dropped: this.dropped, sent: this.sent };
  }

  private trimBuffer(): void {
    const over = this.buffer.length + this.inFlight - this.maxBuffered;
    if (over <= 0) return;
    const cut = Math.min(over, this.buffer.length);
    this.buffer.splice(0, cut);
    this.dropped += cut;
  }

  /** One sender at a time; `deferred` waits a tick first so that appends made together share a batch. */
  private kick(deferred: boolean): Promise<void> {
    this.sending ??= (deferred ? new Promise<void>((r) => setImmediate(r)) : Promise.resolve())
      .then(() => this.send())
      .finally(() => {
        this.sending = null;
      });
    return this.sending;
  }

  /** Sends the buffer in batches, one XADD each; on failure keeps them (bounded) and retries with backoff. */
  private async send(): Promise<void> {
    while (this.buffer.length > 0 && !this.closed) {
      const batch = this.buffer.splice(0, RECORD_LIMITS.recordsPerBatch);
      this.inFlight = batch.length;
      try {
        const conn = this.connection();
        if (conn.status !== 'ready') await this.ready(conn);
        await conn.xadd(this.key, 'MAXLEN', '~', this.maxLen, '*', 'records', JSON.stringify(batch));
        this.sent += batch.length;
        if (this.down) this.logger.info('traffic records reach redis again');
        this.down = false;
        this.retryDelayMs = 0;
      } catch (err) {
        // Back in front, oldest first, then the cap applies: the oldest are what a long outage loses.
        this.buffer.unshift(...batch);
        this.inFlight = 0;
        this.trimBuffer();
        if (!this.down) this.logger.warn({ err, buffered: this.buffer.length }, 'traffic records cannot reach redis; buffering (bounded)');
        this.down = true;
        this.retryDelayMs = Math.min(5_000, Math.max(100, this.retryDelayMs * 2));
        if (this.closed) return;
        this.retryTimer = setTimeout(() => {
          this.retryTimer = null;
          void this.kick(false);
        }, this.retryDelayMs);
        this.retryTimer.unref();
        return;
      } finally {
        this.inFlight = 0;
      }
    }
  }

  // ---- RecordSource ----

  async read(options: ReadOptions): Promise<RecordBatch[]> {
    if (this.closed) return [];
    const conn = this.connection();
    if (conn.status !== 'ready') await this.ready(conn);
    if (!this.groupReady) await this.createGroup(conn);
    try {
      if (this.starting || this.unacked.size > 0) {
        // Id 0: this consumer's delivered, unacknowledged batches (entries trimmed meanwhile come back empty).
        const own = await this.readGroup(conn, options.count, null, '0');
        this.starting = false;
        this.unacked.clear();
        if (own.length > 0) return this.delivered(own);
      }
      if (Date.now() - this.lastReclaim >= Math.min(this.reclaimAfterMs, 30_000)) {
        const claimed = await this.reclaim(conn, options.count);
        if (claimed.length > 0) return this.delivered(claimed);
      }
      if (options.signal?.aborted) return [];
      // BLOCK 0 would wait forever: a read that must not wait goes on the commands connection without BLOCK.
      const batches = options.blockMs > 0 ? await this.blockingRead(options) : await this.readGroup(conn, options.count, null, '>');
      return this.delivered(batches);
    } catch (err) {
      // The stream (and so the group) is gone: Redis restarted empty, or someone deleted the key.
      if (errorCode(err) === 'NOGROUP') {
        this.groupReady = false;
        return [];
      }
      throw err;
    }
  }

  async ack(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    const conn = this.connection();
    // One group reads the stream, so what it acknowledged can go: the stream holds only what is still to do.
    const results = await conn.multi().xack(this.key, GROUP, ...ids).xdel(this.key, ...ids).exec();
    for (const [err] of results ?? []) if (err) throw err;
    if (results === null) throw new Error('redis transaction aborted');
    for (const id of ids) this.unacked.delete(id);
  }

  /**
   * The stream holds only what is still to do (acknowledged entries are deleted), so its length is the backlog;
   * XPENDING's summary says how much of it workers hold unacknowledged. No stream yet: nothing to do.
   */
  async backlog(): Promise<RecordBacklog> {
    const conn = this.connection();
    if (conn.status !== 'ready') await this.ready(conn);
    const results = await conn.multi().xlen(this.key).xpending(this.key, GROUP).exec();
    if (results === null) throw new Error('redis transaction aborted');
    const [[lenErr, length], [pendingErr, summary]] = results as [[Error | null, number], [Error | null, [number, ...unknown[]] | null]];
    if (lenErr) throw lenErr;
    // NOGROUP: no worker has read the stream yet, so nothing is delivered.
    if (pendingErr && errorCode(pendingErr) !== 'NOGROUP') throw pendingErr;
    const pending = pendingErr ? 0 : Number(summary?.[0] ?? 0);
    return { queued: Math.max(0, Number(length) - pending), pending };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // Last chance for what the edge buffered (its hits flushed just before).
    await this.flush().catch(() => {});
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    for (const conn of [this.commands, this.reader]) {
      if (!conn) continue;
      if (conn.status === 'ready') await conn.quit().catch(() => {});
      conn.disconnect();
    }
  }

  /** Unacknowledged batches come back first at this consumer's next read, from its pending list. */
  private delivered(batches: RecordBatch[]): RecordBatch[] {
    for (const batch of batches) this.unacked.add(batch.id);
    return batches;
  }

  private async createGroup(conn: Redis): Promise<void> {
    try {
      // From the start of the stream: batches appended before any worker ran are read too.
      await conn.xgroup('CREATE', this.key, GROUP, '0', 'MKSTREAM');
    } catch (err) {
      if (errorCode(err) !== 'BUSYGROUP') throw err;
    }
    this.groupReady = true;
  }

  private async readGroup(conn: Redis, count: number, blockMs: number | null, id: string): Promise<RecordBatch[]> {
    const args: (string | number)[] = ['GROUP', GROUP, this.consumer, 'COUNT', count];
    if (blockMs !== null) args.push('BLOCK', blockMs);
    args.push('STREAMS', this.key, id);
    const reply = (await (conn.xreadgroup as (...a: (string | number)[]) => Promise<unknown>)(...args)) as [string, Entry[]][] | null;
    return this.parse(conn, reply?.[0]?.[1] ?? []);
  }

  /** Entries whose data is gone (trimmed while pending) are acknowledged here; the rest become batches. */
  private async parse(conn: Redis, entries: Entry[]): Promise<RecordBatch[]> {
    const gone = entries.filter(([, fields]) => fields === null).map(([id]) => id);
    if (gone.length > 0) await conn.xack(this.key, GROUP, ...gone);
    return entries.filter(([, fields]) => fields !== null).map(([id, fields]) => parseBatch(id, field(fields, 'records')));
  }

  /** XAUTOCLAIM one page of batches pending longer than the reclaim timeout; a full pass also forgets dead consumers. */
  private async reclaim(conn: Redis, count: number): Promise<RecordBatch[]> {
    const reply = (await conn.xautoclaim(this.key, GROUP, this.consumer, this.reclaimAfterMs, this.reclaimCursor, 'COUNT', count)) as [string, Entry[], string[]?];
    const [cursor, entries, deleted = []] = reply;
    // Redis 7 drops trimmed entries from the pending list itself and names them; 6.2 returns them without fields.
    if (deleted.length > 0) this.logger.warn({ batches: deleted.length }, 'pending traffic-record batches were trimmed before a worker wrote them');
    this.reclaimCursor = cursor;
    if (cursor === '0-0') {
      this.lastReclaim = Date.now();
      await this.forgetConsumers(conn).catch((err) => this.logger.debug({ err }, 'could not list record consumers'));
    }
    const batches = await this.parse(conn, entries);
    if (batches.length > 0) this.logger.warn({ batches: batches.length }, 'claimed traffic-record batches a stopped worker left pending');
    return batches;
  }

  private async forgetConsumers(conn: Redis): Promise<void> {
    const consumers = (await conn.xinfo('CONSUMERS', this.key, GROUP)) as unknown[][];
    for (const info of consumers.slice(0, 1000)) {
      const fields = info as (string | number)[];
      const get = (name: string) => fields[fields.indexOf(name) + 1];
      const name = String(get('name'));
      if (name !== this.consumer && Number(get('pending')) === 0 && Number(get('idle')) > FORGET_CONSUMER_MS) {
        await conn.xgroup('DELCONSUMER', this.key, GROUP, name);
      }
    }
  }

  /**
   * XREADGROUP … BLOCK on the reader connection. Aborting drops that connection (a blocked command cannot be
   * cancelled otherwise) and the next read opens a new one; anything it had been given stays pending, not lost.
   */
  private async blockingRead(options: ReadOptions): Promise<RecordBatch[]> {
    const blockMs = Math.min(options.blockMs, this.maxBlockMs);
    const reader = (this.reader ??= this.open({ commandTimeout: this.maxBlockMs + this.commandTimeoutMs }));
    const onAbort = () => {
      if (this.reader === reader) this.reader = null;
      reader.disconnect();
    };
    options.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      if (reader.status !== 'ready') await this.ready(reader);
      return await this.readGroup(reader, options.count, blockMs, '>');
    } catch (err) {
      if (options.signal?.aborted) return [];
      throw err;
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
    }
  }

  private connection(): Redis {
    return (this.commands ??= this.open({}));
  }

  private open(extra: RedisOptions): Redis {
    const conn = connectRedis(this.url, { ...this.connectionOptions, ...extra });
    // Failures reach callers as rejected commands; the sink and the worker log them once per outage.
    conn.on('error', (err: Error) => this.logger.debug({ err }, 'traffic-record redis connection error'));
    return conn;
  }

  private ready(conn: Redis): Promise<void> {
    return redisReady(conn, this.commandTimeoutMs, {
      closed: () => new Error('redis connection closed'),
      late: () => new Error(`redis not reachable within ${this.commandTimeoutMs} ms`),
    });
  }
}
