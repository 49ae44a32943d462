// The source of truth: PostgreSQL through `pg` when DATABASE_URL is set, embedded PGlite otherwise.
// Both engines run the same SQL and migrations behind one small interface; int8 columns read as numbers.
import { mkdirSync } from 'node:fs';
import pg from 'pg';
import { PGlite, types as pgliteTypes } from '@electric-sql/pglite';
import { migrate } from './migrate.ts';

export interface QueryResult<R> {
  rows: R[];
  rowCount: number;
}

/** Anything SQL can be sent to: the database itself or an open transaction. */
export interface Queryable {
  query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<QueryResult<R>>;
}

/** An open transaction: SQL, plus work queued to run inside it just before COMMIT (the feed's publish step). */
export interface Transaction extends Queryable {
  /**
   * Queues `task` to run after the transaction's function has returned and before COMMIT, in the order queued; a
   * task may queue more. A throw rolls the transaction back. store/feed-changes.ts publishes what was touched here.
   */
  beforeCommit(task: () => Promise<void>): void;
}

export function isTransaction(q: Queryable): q is Transaction {
  return typeof (q as Partial<Transaction>).beforeCommit === 'function';
}

/** Runs `fn`, then the tasks it queued for before COMMIT (a task may queue more). */
async function runThenPrecommit<T>(tx: Queryable, fn: (tx: Transaction) => Promise<T>): Promise<T> {
  const pending: Array<() => Promise<void>> = [];
  const out = await fn(Object.assign(tx, { beforeCommit: (task: () => Promise<void>) => void pending.push(task) }));
  for (let task = pending.shift(); task; task = pending.shift()) await task();
  return out;
}

export interface Database extends Queryable {
  readonly engine: 'postgres' | 'pglite';
  readonly schema: string;
  /** Runs `fn` in one transaction: committed when it (and its beforeCommit tasks) resolve, rolled back when one throws. */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T>;
  /** LISTEN on a channel; NOTIFY payloads arrive after the notifying transaction commits. */
  listen(channel: string, onPayload: (payload: string) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  /** postgres:// URL; empty selects embedded PGlite. */
  url: string;
  /** Where PGlite keeps its files; `memory://` keeps them in memory. */
  dataDir: string;
  /** PostgreSQL schema holding every table, so several instances can share one database. */
  schema: string;
  /** PostgreSQL connections kept at most (default 10); the store thread's record writer needs two. */
  maxConnections?: number;
  /**
   * Longest a PostgreSQL statement may run (EDGE_DATABASE_STATEMENT_TIMEOUT_MS, default 15 s): the server cancels it,
   * and the client gives up a little later still if the server itself is unreachable, so a caller never hangs.
   */
  statementTimeoutMs?: number;
}

/** SQLSTATE classes and driver errors that say the store cannot be reached now, not that the statement is wrong. */
const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND', '57P01', '57P02', '57P03', '57014', '53300']);
const UNAVAILABLE_MESSAGES = /Connection terminated|connection timeout|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|the store thread exited/i;

/**
 * True for a failure of the store itself (PostgreSQL restarting or unreachable, a connection cut, a statement that ran
 * out of time): the control API answers these 503 store_unavailable with Retry-After instead of 500.
 */
export function isStoreUnavailable(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | null;
  if (!e || typeof e !== 'object') return false;
  if (typeof e.code === 'string' && (UNAVAILABLE_CODES.has(e.code) || e.code.startsWith('08'))) return true;
  return typeof e.message === 'string' && UNAVAILABLE_MESSAGES.test(e.message);
}

/** Postgres reports int8 as text to stay exact; our ids stay far below 2^53, so numbers are safe and simpler. */
function parseInt8(value: string): number {
  return Number(value);
}

/** Unique-violation check that works for both drivers (both surface SQLSTATE in `code`). */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  const e = err as { code?: string; constraint?: string; message?: string };
  if (e?.code !== '23505') return false;
  return constraint === undefined || e.constraint === constraint || (e.message ?? '').includes(constraint);
}

/** SQLSTATE foreign_key_violation: a RESTRICT reference refuses deleting a row still in use. */
export function isForeignKeyViolation(err: unknown): boolean {
  return (err as { code?: string })?.code === '23503';
}

class PostgresDatabase implements Database {
  readonly engine = 'postgres' as const;
  get schema(): string {
    return this.options.schema;
  }
  private listener: pg.Client | null = null;
  private closed = false;
  private readonly channels = new Map<string, Set<(payload: string) => void>>();

  constructor(
    private readonly pool: pg.Pool,
    private readonly options: DatabaseOptions,
  ) {}

  async query<R>(sql: string, params: readonly unknown[] = []): Promise<QueryResult<R>> {
    const res = await this.pool.query(sql, params as unknown[]);
    return { rows: res.rows as R[], rowCount: res.rowCount ?? 0 };
  }

  async transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    const tx: Queryable = {
      query: async <R>(sql: string, params: readonly unknown[] = []) => {
        const res = await client.query(sql, params as unknown[]);
        return { rows: res.rows as R[], rowCount: res.rowCount ?? 0 };
      },
    };
    try {
      await client.query('BEGIN');
      const out = await runThenPrecommit(tx, fn);
      await client.query('COMMIT');
      return out;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }

  async listen(channel: string, onPayload: (payload: string) => void): Promise<() => Promise<void>> {
    let set = this.channels.get(channel);
    if (!set) {
      set = new Set();
      this.channels.set(channel, set);
      if (this.listener) await this.listener.query(`LISTEN "${channel.replace(/"/g, '')}"`);
    }
    set.add(onPayload);
    if (!this.listener) await this.connectListener();
    return async () => {
      set.delete(onPayload);
    };
  }

  /**
   * One connection holds every LISTEN. When it drops it is re-established (with backoff) and every channel is
   * listened to again; notifications sent meanwhile are lost, which is why consumers also poll.
   */
  private async connectListener(attempt = 0): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.options.url, application_name: `edge-listen-${this.options.schema}` });
    client.on('notification', (msg) => {
      for (const cb of this.channels.get(msg.channel) ?? []) cb(msg.payload ?? '');
    });
    const reconnect = () => {
      if (this.listener !== client || this.closed) return;
      this.listener = null;
      const delay = Math.min(30_000, 250 * 2 ** attempt) * (0.5 + Math.random() / 2);
      setTimeout(() => void this.connectListener(attempt + 1).catch(() => {}), delay).unref();
    };
    client.on('error', reconnect);
    client.on('end', reconnect);
    this.listener = client;
    try {
      await client.connect();
      for (const channel of this.channels.keys()) await client.query(`LISTEN "${channel.replace(/"/g, '')}"`);
      attempt = 0;
    } catch (err) {
      if (attempt > 0) return reconnect();
      this.listener = null;
      client.removeAllListeners('end');
      await client.end().catch(() => {});
      throw err;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.listener?.end().catch(() => {});
    await this.pool.end();
  }
}

/** PGlite reports affectedRows 0 for SELECT; pg's rowCount counts returned rows there, so match it. */
function liteResult<R>(res: { rows: R[]; affectedRows?: number }): QueryResult<R> {
  return { rows: res.rows, rowCount: res.rows.length > 0 ? res.rows.length : (res.affectedRows ?? 0) };
}

class PgliteDatabase implements Database {
  readonly engine = 'pglite' as const;
  constructor(
    private readonly db: PGlite,
    readonly schema: string,
  ) {}

  async query<R>(sql: string, params: readonly unknown[] = []): Promise<QueryResult<R>> {
    return liteResult(await this.db.query<R>(sql, params as unknown[]));
  }

  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    // PGlite has one backend; its transaction() queues callers, which matches row locking's outcome.
    return this.db.transaction(async (t) =>
      runThenPrecommit(
        {
          query: async <R>(sql: string, params: readonly unknown[] = []) => {
            return liteResult(await t.query<R>(sql, params as unknown[]));
          },
        },
        fn,
      ),
    );
  }

  async listen(channel: string, onPayload: (payload: string) => void): Promise<() => Promise<void>> {
    const unlisten = await this.db.listen(channel, onPayload);
    return async () => unlisten();
  }

  async close(): Promise<void> {
    if (!this.db.closed) await this.db.close();
  }
}

/** Opens the configured engine and applies pending migrations before returning. */
export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  let db: Database;
  if (options.url) {
    // The server applies search_path at connection start, so no query can run before it takes effect.
    const statementTimeoutMs = options.statementTimeoutMs ?? 15_000;
    const pool = new pg.Pool({
      connectionString: options.url,
      max: options.maxConnections ?? 10,
      options: `-c search_path=${options.schema} -c statement_timeout=${statementTimeoutMs}`,
      // A server that does not answer (restarting, a dead host) fails the call rather than holding it.
      connectionTimeoutMillis: 5_000,
      query_timeout: statementTimeoutMs + 5_000,
    });
    pool.on('error', () => {}); // idle-client errors surface on the next query instead
    pool.on('connect', (client) => client.setTypeParser(20, parseInt8));
    db = new PostgresDatabase(pool, options);
    await db.query(`CREATE SCHEMA IF NOT EXISTS "${options.schema}"`);
  } else {
    if (!options.dataDir.startsWith('memory://')) mkdirSync(options.dataDir, { recursive: true });
    const lite = await PGlite.create(options.dataDir, { parsers: { [pgliteTypes.INT8]: parseInt8 } });
    db = new PgliteDatabase(lite, options.schema);
    if (options.schema !== 'public') {
      await db.query(`CREATE SCHEMA IF NOT EXISTS "${options.schema}"`);
      await lite.exec(`SET search_path TO "${options.schema}"`);
    }
  }
  await migrate(db);
  return db;
}
