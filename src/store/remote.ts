// The store across a thread boundary: `serveDatabase` answers SQL sent over a MessagePort with a Database it owns,
// `RemoteDatabase` is that Database on the other end. `edge serve` keeps embedded PGlite in the store thread this way.
import type { MessagePort } from 'node:worker_threads';
import type { Database, QueryResult, Transaction } from './db.ts';

/** What the caller's end sends. `tx` names an open transaction; absent, the statement runs on its own. */
type Request =
  | { op: 'query'; id: number; sql: string; params: readonly unknown[]; tx?: number }
  | { op: 'begin'; id: number }
  | { op: 'commit' | 'rollback'; id: number; tx: number }
  | { op: 'listen' | 'unlisten'; id: number; channel: string };

/** What the owner's end answers: a reply to request `id`, or a NOTIFY payload on a listened channel. */
type Reply =
  | { id: number; ok: true; rows?: unknown[]; rowCount?: number; tx?: number }
  | { id: number; ok: false; error: SerializedError }
  | { notify: string; payload: string };

/**
 * An error as it crossed: structured cloning keeps only an Error's message and name, and callers branch on the
 * driver's fields (SQLSTATE `code`, `constraint`: store/db.ts isUniqueViolation), so those are copied by hand.
 */
interface SerializedError {
  name: string;
  message: string;
  fields: Record<string, string | number | undefined>;
}

const ERROR_FIELDS = ['code', 'constraint', 'detail', 'hint', 'table', 'column', 'schema', 'severity', 'position', 'where'] as const;

function serializeError(err: unknown): SerializedError {
  const e = (err ?? {}) as Record<string, unknown>;
  const fields: SerializedError['fields'] = {};
  for (const key of ERROR_FIELDS) {
    const value = e[key];
    if (typeof value === 'string' || typeof value === 'number') fields[key] = value;
  }
  return { name: typeof e.name === 'string' ? e.name : 'Error', message: err instanceof Error ? err.message : String(err), fields };
}

function restoreError(s: SerializedError): Error {
  return Object.assign(new Error(s.message), { name: s.name }, s.fields);
}

/**
 * Answers the requests arriving on `port` with `db` until the port closes. Statements of one transaction run in the
 * order sent; each transaction holds `db.transaction` open until its commit or rollback arrives, so the engine's own
 * queueing of transactions (PGlite's one backend) is what the callers see, exactly as in one thread.
 */
export function serveDatabase(db: Database, port: MessagePort): void {
  const open = new Map<number, { tx: Transaction; finish: (commit: boolean) => void }>();
  const listening = new Map<string, () => Promise<void>>();
  /** Transactions whose end was asked for: the request to answer once the engine has committed or rolled back. */
  const ending = new Map<number, { id: number; commit: boolean }>();
  let nextTx = 1;
  const reply = (message: Reply) => port.postMessage(message);
  const fail = (id: number, err: unknown) => reply({ id, ok: false, error: serializeError(err) });

  const begin = (id: number) => {
    const txId = nextTx++;
    let started = false;
    db.transaction(
      (tx) =>
        new Promise<void>((resolve, reject) => {
          started = true;
          open.set(txId, { tx, finish: (commit) => (commit ? resolve() : reject(ROLLBACK)) });
          reply({ id, ok: true, tx: txId });
        }),
    ).then(
      () => settle(null),
      (err) => settle(err),
    );
    function settle(err: unknown): void {
      const pending = ending.get(txId);
      ending.delete(txId);
      open.delete(txId);
      // The engine refused to start one (closed, out of connections): the caller's begin fails.
      if (!started) return fail(id, err);
      if (pending === undefined) return;
      if (err === null || (err === ROLLBACK && !pending.commit)) reply({ id: pending.id, ok: true });
      else fail(pending.id, err);
    }
  };

  port.on('message', (req: Request) => {
    switch (req.op) {
      case 'query': {
        const target = req.tx === undefined ? db : open.get(req.tx)?.tx;
        if (!target) return fail(req.id, new Error(`transaction ${req.tx} is not open`));
        target.query(req.sql, req.params).then(
          (res) => reply({ id: req.id, ok: true, rows: res.rows, rowCount: res.rowCount }),
          (err) => fail(req.id, err),
        );
        return;
      }
      case 'begin':
        return begin(req.id);
      case 'commit':
      case 'rollback': {
        const entry = open.get(req.tx);
        if (!entry) return fail(req.id, new Error(`transaction ${req.tx} is not open`));
        ending.set(req.tx, { id: req.id, commit: req.op === 'commit' });
        entry.finish(req.op === 'commit');
        return;
      }
      case 'listen': {
        if (listening.has(req.channel)) return reply({ id: req.id, ok: true });
        db.listen(req.channel, (payload) => reply({ notify: req.channel, payload })).then(
          (unlisten) => {
            listening.set(req.channel, unlisten);
            reply({ id: req.id, ok: true });
          },
          (err) => fail(req.id, err),
        );
        return;
      }
      case 'unlisten': {
        const unlisten = listening.get(req.channel);
        listening.delete(req.channel);
        (unlisten ? unlisten() : Promise.resolve()).then(
          () => reply({ id: req.id, ok: true }),
          (err) => fail(req.id, err),
        );
        return;
      }
    }
  });
}

/** Thrown inside a served transaction to roll it back on the caller's request; never reaches a caller. */
const ROLLBACK = Symbol('rollback');

/** The caller's end: a Database whose SQL runs in the thread that serves it; closing it is the owner's business. */
export class RemoteDatabase implements Database {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (reply: Extract<Reply, { ok: true }>) => void; reject: (err: Error) => void }>();
  private readonly channels = new Map<string, Set<(payload: string) => void>>();
  private closed: Error | null = null;

  constructor(
    private readonly port: MessagePort,
    readonly engine: Database['engine'],
    readonly schema: string,
    private readonly onClose: () => Promise<void>,
  ) {
    port.on('message', (reply: Reply) => {
      if ('notify' in reply) {
        for (const cb of this.channels.get(reply.notify) ?? []) cb(reply.payload);
        return;
      }
      const waiter = this.waiting.get(reply.id);
      if (!waiter) return;
      this.waiting.delete(reply.id);
      if (reply.ok) waiter.resolve(reply);
      else waiter.reject(restoreError(reply.error));
    });
  }

  /** Fails every request in flight and every later one: the serving thread is gone. */
  abandon(reason: Error): void {
    this.closed = reason;
    for (const waiter of this.waiting.values()) waiter.reject(reason);
    this.waiting.clear();
  }

  private send(req: Omit<Request, 'id'>): Promise<Extract<Reply, { ok: true }>> {
    if (this.closed) return Promise.reject(this.closed);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.port.postMessage({ ...req, id });
    });
  }

  async query<R>(sql: string, params: readonly unknown[] = [], tx?: number): Promise<QueryResult<R>> {
    const res = await this.send({ op: 'query', sql, params, tx } as Omit<Request, 'id'>);
    return { rows: (res.rows ?? []) as R[], rowCount: res.rowCount ?? 0 };
  }

  async transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    const txId = (await this.send({ op: 'begin' }))!.tx!;
    const pending: Array<() => Promise<void>> = [];
    const tx: Transaction = {
      query: <R>(sql: string, params: readonly unknown[] = []) => this.query<R>(sql, params, txId),
      beforeCommit: (task) => void pending.push(task),
    };
    let out: T;
    try {
      out = await fn(tx);
      for (let task = pending.shift(); task; task = pending.shift()) await task();
    } catch (err) {
      await this.send({ op: 'rollback', tx: txId } as Omit<Request, 'id'>).catch(() => {});
      throw err;
    }
    await this.send({ op: 'commit', tx: txId } as Omit<Request, 'id'>);
    return out;
  }

  async listen(channel: string, onPayload: (payload: string) => void): Promise<() => Promise<void>> {
    let set = this.channels.get(channel);
    if (!set) {
      set = new Set();
      this.channels.set(channel, set);
      await this.send({ op: 'listen', channel } as Omit<Request, 'id'>);
    }
    set.add(onPayload);
    return async () => {
      set.delete(onPayload);
    };
  }

  close(): Promise<void> {
    return this.onClose();
  }
}
