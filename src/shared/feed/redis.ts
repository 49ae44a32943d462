// The feed transport between nodes: Redis holds the map (hash), a capped change log (stream), the head version,
// and a pub/sub channel for hints. Writes are single Lua scripts, so several publishers can share one Redis safely.
import { Redis, type RedisOptions } from 'ioredis';
import { createLogger, type Logger } from '../log.ts';
import { parseEntries } from './parse.ts';
import { redisReady } from '../redis-ready.ts';
import type { FeedListener, FeedSink, FeedSource } from './transport.ts';
import type { FeedChange, FeedSnapshot } from './types.ts';
import { connectRedis } from '../redis-connect.ts';

export interface RedisFeedOptions {
  url: string;
  /** Starts every key and the channel, so several deployments (or tests) can share one Redis. */
  prefix: string;
  /** Approximate length of the change log; subscribers further behind than this resync from the map. */
  maxLen?: number;
  logger?: Logger;
  /** The longest any call waits for Redis, connecting included; past it the call fails instead of hanging. */
  commandTimeoutMs?: number;
  /** Cap of the reconnect backoff. Reconnection itself never gives up. */
  reconnectMaxDelayMs?: number;
}

/** What travels on the channel: a hint; the stream and the hash hold the truth. */
type WireMessage = { type: 'change'; change: FeedChange } | { type: 'reset'; version: number };

/**
 * KEYS: head, log, entries. ARGV: version, entry field, entry JSON ('' deletes), change JSON, maxlen, channel,
 * message. The head check makes publishing a compare-and-set, and the explicit stream ID `version-0` would
 * refuse a duplicate even if the check were bypassed.
 */
const PUBLISH_LUA = `
local head = redis.call('GET', KEYS[1])
if not head or tonumber(head) ~= tonumber(ARGV[1]) - 1 then return 0 end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], ARGV[1] .. '-0', 'change', ARGV[4])
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[3], ARGV[2])
else
  redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('PUBLISH', ARGV[6], ARGV[7])
return 1
`;

/**
 * KEYS: head, log, entries. ARGV: expected head ('*' any, '' none, else a version), version, channel, message,
 * then field/value pairs. HSET goes in chunks because Lua's unpack() is limited by the C stack (~8000 values).
 */
const RESET_LUA = `
local head = redis.call('GET', KEYS[1])
local expected = ARGV[1]
if expected ~= '*' then
  if expected == '' then
    if head then return 0 end
  elseif not head or tonumber(head) ~= tonumber(expected) then
    return 0
  end
end
redis.call('DEL', KEYS[2], KEYS[3])
for i = 5, #ARGV, 1000 do
  redis.call('HSET', KEYS[3], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
`;

/** ioredis flattens array arguments, which spares spreading a large snapshot into a call's argument list. */
type ScriptArg = string | number | string[];
type FeedConnection = Redis & {
  feedPublish(...args: ScriptArg[]): Promise<number>;
  feedReset(...args: ScriptArg[]): Promise<number>;
};

export class RedisFeedUnavailableError extends Error {
  override name = 'RedisFeedUnavailableError';
}

function entryField(topic: string, key: string): string {
  return `${topic}\u0000${key}`;
}

function parseHead(raw: string | null): number | null {
  return raw === null ? null : Number(raw);
}

/** Exponential from 100 ms, capped, with ±20% jitter so a fleet of edges does not reconnect in lockstep. */
function backoff(attempt: number, capMs: number): number {
  const base = Math.min(capMs, 100 * 2 ** Math.min(attempt - 1, 16));
  return Math.round(base * (0.8 + Math.random() * 0.4));
}

/** exec() reports per-command errors in its result rather than rejecting; surface the first one. */
function execResults(results: [Error | null, unknown][] | null): unknown[] {
  if (results === null) throw new RedisFeedUnavailableError('redis transaction aborted');
  for (const [err] of results) if (err) throw err;
  return results.map(([, value]) => value);
}

export class RedisFeed implements FeedSink, FeedSource {
  private readonly keys: { head: string; log: string; entries: string };
  private readonly channel: string;
  private readonly maxLen: number;
  private readonly commandTimeoutMs: number;
  private readonly logger: Logger;
  private readonly connectionOptions: RedisOptions;
  private readonly url: string;
  private readonly commands: FeedConnection;
  private subscriber: Redis | null = null;
  private subscribed = false;
  private readonly listeners = new Set<FeedListener>();
  /** subscribe() calls still waiting for the subscription; they resolve instead of hearing onReconnect. */
  private readonly waiting = new Set<{ listener: FeedListener; settle: (err?: Error) => void }>();
  private closed = false;

  constructor(options: RedisFeedOptions) {
    const maxLen = options.maxLen ?? 10_000;
    const commandTimeoutMs = options.commandTimeoutMs ?? 5_000;
    const reconnectMaxDelayMs = options.reconnectMaxDelayMs ?? 2_000;
    if (!options.url) throw new TypeError('RedisFeed needs a redis:// url');
    if (!options.prefix) throw new TypeError('RedisFeed needs a key prefix (config redisPrefix, e.g. "edge:")');
    for (const [name, value] of Object.entries({ maxLen, commandTimeoutMs, reconnectMaxDelayMs })) {
      if (!Number.isInteger(value) || value < 1) throw new RangeError(`RedisFeed ${name} must be a positive integer, got ${value}`);
    }
    this.url = options.url;
    this.maxLen = maxLen;
    this.commandTimeoutMs = commandTimeoutMs;
    this.logger = (options.logger ?? createLogger('silent')).child({ component: 'redis-feed' });
    // One hash tag for the three keys the publish script writes together, so a Redis Cluster keeps them in one slot.
    this.keys = { head: `${options.prefix}{feed}:head`, log: `${options.prefix}{feed}:log`, entries: `${options.prefix}{feed}:entries` };
    this.channel = `${options.prefix}feed:changes`;
    this.connectionOptions = {
      // Nothing is queued while disconnected: a queued write could run after the caller gave up on it and
      // overwrite newer state. Calls wait for readiness themselves (bounded by commandTimeoutMs) instead.
      enableOfflineQueue: false,
      // Same reason for commands in flight when the connection dropped: they fail rather than run again later.
      autoResendUnfulfilledCommands: false,
      // Moot while the offline queue is off, but keeps the bound should anyone turn it back on.
      maxRetriesPerRequest: 1,
      commandTimeout: commandTimeoutMs,
      connectTimeout: commandTimeoutMs,
      retryStrategy: (attempt: number) => backoff(attempt, reconnectMaxDelayMs),
      scripts: {
        feedPublish: { lua: PUBLISH_LUA, numberOfKeys: 3 },
        feedReset: { lua: RESET_LUA, numberOfKeys: 3 },
      },
    };
    this.commands = this.connect('commands', {}) as FeedConnection;
  }

  // ---- FeedSink ----

  async head(): Promise<number | null> {
    await this.ready(this.commands);
    return parseHead(await this.commands.get(this.keys.head));
  }

  async publish(change: FeedChange): Promise<boolean> {
    const data = change.data ?? null;
    const changeJson = JSON.stringify({ version: change.version, topic: change.topic, key: change.key, data });
    const entryJson = data === null ? '' : JSON.stringify({ topic: change.topic, key: change.key, version: change.version, data });
    // Concatenated rather than re-stringified: the change can be large and is already JSON.
    const message = `{"type":"change","change":${changeJson}}`;
    await this.ready(this.commands);
    const ok = await this.commands.feedPublish(
      this.keys.head, this.keys.log, this.keys.entries,
      change.version, entryField(change.topic, change.key), entryJson, changeJson, this.maxLen, this.channel, message,
    );
    return ok === 1;
  }

  async reset(snapshot: FeedSnapshot, expectedHead?: number | null): Promise<boolean> {
    const expected = expectedHead === undefined ? '*' : expectedHead === null ? '' : String(expectedHead);
    const message = JSON.stringify({ type: 'reset', version: snapshot.version } satisfies WireMessage);
    const pairs: string[] = [];
    for (const e of snapshot.entries) {
      pairs.push(entryField(e.topic, e.key), JSON.stringify({ topic: e.topic, key: e.key, version: e.version, data: e.data }));
    }
    await this.ready(this.commands);
    const ok = await this.commands.feedReset(
      this.keys.head, this.keys.log, this.keys.entries,
      expected, snapshot.version, this.channel, message, pairs,
    );
    return ok === 1;
  }

  // ---- FeedSource ----

  async subscribe(listener: FeedListener): Promise<void> {
    if (this.closed) throw new RedisFeedUnavailableError('redis feed is closed');
    this.listeners.add(listener);
    this.subscriber ??= this.openSubscriber();
    if (this.subscribed) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(waiter);
        reject(new RedisFeedUnavailableError(`redis feed subscription not established within ${this.commandTimeoutMs} ms; still trying`));
      }, this.commandTimeoutMs);
      const waiter = {
        listener,
        settle: (err?: Error) => {
          clearTimeout(timer);
          this.waiting.delete(waiter);
          if (err) reject(err);
          else resolve();
        },
      };
      this.waiting.add(waiter);
    });
  }

  async readSince(version: number): Promise<FeedChange[] | null> {
    await this.ready(this.commands);
    const [rawHead, rawEntries] = execResults(
      await this.commands.multi().get(this.keys.head).xrange(this.keys.log, `${version + 1}-0`, '+').exec(),
    ) as [string | null, [id: string, fields: string[]][]];
    const head = parseHead(rawHead);
    if (head === null || head <= version) return [];
    const changes = rawEntries.map(([, fields]) => JSON.parse(fields[1]) as FeedChange);
    // Trimmed by MAXLEN, or emptied by a reset: the log no longer reaches back to version + 1.
    if (changes.length === 0 || changes[0].version !== version + 1) return null;
    return changes;
  }

  async readSnapshot(): Promise<FeedSnapshot | null> {
    await this.ready(this.commands);
    const [rawHead, values] = execResults(
      await this.commands.multi().get(this.keys.head).hvals(this.keys.entries).exec(),
    ) as [string | null, string[]];
    const version = parseHead(rawHead);
    if (version === null) return null;
    // Parsed in slices (100k entries in one go would hold the event loop for several hundred ms), each text let go
    // as it is parsed, so texts and entries are not both held whole.
    return { version, entries: await parseEntries(values) };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const waiter of this.waiting) waiter.settle(new RedisFeedUnavailableError('redis feed closed'));
    this.listeners.clear();
    await Promise.all([this.commands, this.subscriber].map((conn) => conn && this.disconnect(conn)));
  }

  // ---- connections ----

  private connect(role: string, extra: RedisOptions): Redis {
    const conn = connectRedis(this.url, { ...this.connectionOptions, ...extra });
    let down = false;
    // Logged once per outage: a Redis that stays down must not flood the log at every reconnect attempt.
    conn.on('error', (err: Error) => {
      if (down) return this.logger.debug({ err, role }, 'redis feed connection still failing');
      down = true;
      this.logger.warn({ err, role }, 'redis feed connection failed; reconnecting');
    });
    conn.on('ready', () => {
      if (down) this.logger.info({ role }, 'redis feed connection restored');
      down = false;
    });
    return conn;
  }

  private openSubscriber(): Redis {
    // We resubscribe ourselves on every 'ready', so we know when the subscription is really back before
    // telling listeners to catch up (a catch-up read before that could miss changes published meanwhile).
    const conn = this.connect('subscriber', { autoResubscribe: false });
    conn.on('ready', () => void this.resubscribe(conn));
    conn.on('close', () => {
      this.subscribed = false;
    });
    conn.on('message', (channel: string, message: string) => {
      if (channel === this.channel) this.deliver(message);
    });
    return conn;
  }

  private async resubscribe(conn: Redis): Promise<void> {
    try {
      await conn.subscribe(this.channel);
    } catch (err) {
      // The connection dropped again; its next 'ready' retries.
      this.logger.debug({ err }, 'redis feed subscribe failed');
      return;
    }
    if (this.closed) return;
    this.subscribed = true;
    const fresh = new Set<FeedListener>();
    for (const waiter of this.waiting) {
      fresh.add(waiter.listener);
      waiter.settle();
    }
    for (const listener of this.listeners) {
      if (!fresh.has(listener)) this.safely(() => listener.onReconnect());
    }
  }

  private deliver(message: string): void {
    for (const listener of this.listeners) {
      this.safely(() => {
        // Parsed per listener so that no listener can see another's mutations, as with MemoryFeed.
        const msg = JSON.parse(message) as WireMessage;
        if (msg.type === 'change') listener.onChange(msg.change);
        else if (msg.type === 'reset') listener.onReset(msg.version);
      });
    }
  }

  /** A listener that throws must not break delivery to the others or the connection's event handling. */
  private safely(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.logger.error({ err }, 'redis feed listener failed');
    }
  }

  /** Waits (bounded) for the connection to be usable; the offline queue is off, so sending earlier would fail. */
  private async ready(conn: Redis): Promise<void> {
    if (conn.status === 'ready') return;
    if (this.closed || conn.status === 'end') throw new RedisFeedUnavailableError('redis feed is closed');
    await redisReady(conn, this.commandTimeoutMs, {
      closed: () => new RedisFeedUnavailableError('redis feed is closed'),
      late: () => new RedisFeedUnavailableError(`redis not reachable within ${this.commandTimeoutMs} ms (status ${conn.status})`),
    });
  }

  private async disconnect(conn: Redis): Promise<void> {
    // QUIT lets in-flight replies arrive; when Redis is down there is nothing to wait for.
    if (conn.status === 'ready') await conn.quit().catch(() => {});
    conn.disconnect();
  }
}
