// One agent session's data connections (docs/tunnels.md "Data connections"): sockets the agent opened beside its
// raw tunnel, kept as spares and handed to an undici Pool as its connections, so a request costs what an origin's does.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { Socket } from 'node:net';
import { Pool, type Dispatcher } from 'undici';
import type { DataConnectionGrant } from '../../shared/tunnel/protocol.ts';

export interface DataConnectionsOptions {
  /** Most connections (spares and in use) the agent may hold open to this edge for the session. */
  max: number;
  /** The Host the agent's local service must see (the agent's --host-header), or the visitor's when absent. */
  hostHeader?: string;
  /** How long undici's connect waits for a spare when none is at hand (rare: see hasCapacity). */
  waitMs?: number;
  /** Told how many connections were still carrying an exchange when a drain's grace ran out and they were cut. */
  onCut?: (open: number) => void;
}

/** How long exchanges in flight on a draining session's data connections may finish before they are cut. */
export const DRAIN_GRACE_MS = 10_000;

/** No spare data connection came within the wait; the request was not sent, so another path may serve it. */
export class NoDataConnectionError extends Error {
  override name = 'NoDataConnectionError';
  readonly code = 'EDGE_ERR_NO_DATA_CONNECTION';
}

export type OfferResult = 'accepted' | 'full' | 'closed';

interface Waiter {
  callback: (err: Error | null, socket: Socket | null) => void;
  timer: NodeJS.Timeout;
}

export class DataConnections {
  /** Names the session in the agent's upgrade; public within the grant, the key is what proves it. */
  readonly id = randomBytes(32).toString('base64url');
  private readonly key = randomBytes(32);
  readonly max: number;
  readonly hostHeader: string | undefined;
  private readonly waitMs: number;
  private readonly spares: Socket[] = [];
  private readonly waiters: Waiter[] = [];
  /** Sockets handed to undici and still open. */
  private inUse = 0;
  /** Spares taken for undici's connect, handed over on the next tick. */
  private handing = 0;
  /** Exchanges dispatched and not yet settled. */
  private inFlight = 0;
  /** Exchanges dispatched since the session began (for operators and tests: how much took this path). */
  private dispatched = 0;
  private closed = false;
  /** The drain's grace timer, and when it fires: a later drain with a shorter grace brings it forward. */
  private cut: NodeJS.Timeout | null = null;
  private cutAt = Infinity;
  private readonly onCut: ((open: number) => void) | undefined;
  private readonly allClosed: Promise<void>;
  private resolveAllClosed!: () => void;
  private readonly pool: Pool;

  constructor(options: DataConnectionsOptions) {
    this.max = options.max;
    this.hostHeader = options.hostHeader;
    this.waitMs = options.waitMs ?? 5_000;
    this.onCut = options.onCut;
    this.allClosed = new Promise((resolve) => (this.resolveAllClosed = resolve));
    this.pool = new Pool('http://agent.data.invalid', {
      connections: options.max,
      pipelining: 1,
      // Long polls and event streams may idle for minutes: the visitor and the local service decide (as the agent's
      // own local hop does). Idle connections close after undici's keep-alive rules, or the local service's hint.
      headersTimeout: 0,
      bodyTimeout: 0,
      connect: (_options, callback) => this.take(callback as Waiter['callback']),
    });
  }

  /** What the welcome tells the agent. */
  get grant(): DataConnectionGrant {
    return { id: this.id, key: this.key.toString('base64url'), max: this.max };
  }

  /** Whether `key` (the upgrade's field value) proves the grant; compared in constant time. */
  accepts(key: string | undefined): boolean {
    if (typeof key !== 'string' || key.length !== 43) return false;
    const given = Buffer.from(key, 'base64url');
    return given.length === this.key.length && timingSafeEqual(given, this.key);
  }

  /** Exchanges sent on data connections so far (those that fell back to HTTP/2 included). */
  get exchanges(): number {
    return this.dispatched;
  }

  /** Open data connections: spares and the ones undici holds. */
  get size(): number {
    return this.spares.length + this.handing + this.inUse;
  }

  /**
   * Whether a request dispatched now finds a connection without waiting: an idle one in the pool or a spare. A
   * request that would have to wait goes over the HTTP/2 stream instead, which is always there.
   */
  hasCapacity(): boolean {
    return !this.closed && this.inFlight < this.size;
  }

  /** Takes a new data connection (after its 101). Anything it sends before a request is a violation and closes it. */
  offer(socket: Socket): OfferResult {
    if (this.closed) return 'closed';
    if (this.size >= this.max) return 'full';
    socket.setNoDelay(true);
    const waiter = this.waiters.shift();
    if (waiter) {
      clearTimeout(waiter.timer);
      this.handOver(socket, waiter.callback);
      return 'accepted';
    }
    const spare = () => socket.destroy();
    socket.on('data', spare);
    // The agent's FIN: the edge's sockets allow half-open connections (http.Server's do), so without this a spare
    // the agent ended would stay counted, and be handed to a request that could only fail on it.
    socket.on('end', spare);
    socket.on('error', noop);
    socket.once('close', () => {
      const i = this.spares.indexOf(socket);
      if (i !== -1) this.spares.splice(i, 1);
      this.checkClosed();
    });
    (socket as SpareSocket)[VIOLATION] = spare;
    this.spares.push(socket);
    return 'accepted';
  }

  /** Sends one exchange on a data connection; `handler` is told when it settles through its own hooks. */
  dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): void {
    this.inFlight++;
    this.dispatched++;
    this.pool.dispatch(options, handler);
  }

  /** For the exchange's `settled` hook. */
  settled(): void {
    this.inFlight--;
  }

  /**
   * The session is draining: no new exchanges, spares closed, exchanges in flight finish on their connections within
   * `graceMs`, then whatever is still open is cut. The tunnel's own HTTP/2 session closes as soon as it carries no
   * stream, which with every request on data connections is at once: so the bound on these is their own. Called
   * again (the agent's GOAWAY, then the edge's shutdown), the shortest grace wins.
   */
  drain(graceMs = DRAIN_GRACE_MS): void {
    if (!this.closed) {
      this.stopTaking();
      void this.pool.close();
      this.checkClosed();
    }
    if (this.size === 0 || Date.now() + graceMs >= this.cutAt) return;
    if (this.cut !== null) clearTimeout(this.cut);
    this.cutAt = Date.now() + graceMs;
    this.cut = setTimeout(() => {
      const open = this.size;
      this.destroy();
      if (open > 0) this.onCut?.(open);
    }, graceMs);
    // The sockets it would cut keep the process alive until it fires; nothing else needs it to.
    this.cut.unref();
  }

  /** The session is gone: every data connection is cut. */
  destroy(): void {
    if (!this.closed) this.stopTaking();
    this.clearCut();
    void this.pool.destroy();
    this.checkClosed();
  }

  /** Resolves once the session drained or was destroyed and every one of its data connections has closed. */
  whenClosed(): Promise<void> {
    return this.allClosed;
  }

  /** No new exchanges: spares closed, requests waiting for one sent elsewhere. */
  private stopTaking(): void {
    this.closed = true;
    for (const socket of this.spares.splice(0)) socket.destroy();
    for (const w of this.waiters.splice(0)) {
      clearTimeout(w.timer);
      w.callback(new NoDataConnectionError('the agent session is closing'), null);
    }
  }

  private checkClosed(): void {
    if (!this.closed || this.size > 0) return;
    this.clearCut();
    this.resolveAllClosed();
  }

  private clearCut(): void {
    if (this.cut !== null) clearTimeout(this.cut);
    this.cut = null;
  }

  private take(callback: Waiter['callback']): void {
    const socket = this.spares.pop();
    // Never synchronously: undici's client is still marked as connecting until its connector returns, and a
    // socket handed over inside the call leaves the request queued forever.
    if (socket) {
      this.handing++;
      return void process.nextTick(() => {
        this.handing--;
        this.handOver(socket, callback);
      });
    }
    if (this.closed) return void process.nextTick(() => callback(new NoDataConnectionError('the agent session is closing'), null));
    const waiter: Waiter = {
      callback,
      timer: setTimeout(() => {
        const i = this.waiters.indexOf(waiter);
        if (i !== -1) this.waiters.splice(i, 1);
        callback(new NoDataConnectionError(`no data connection from the agent within ${this.waitMs} ms`), null);
      }, this.waitMs),
    };
    this.waiters.push(waiter);
  }

  private handOver(socket: Socket, callback: Waiter['callback']): void {
    if (socket.destroyed) {
      callback(new NoDataConnectionError('the data connection closed before its first request'), null);
      return this.checkClosed();
    }
    const violation = (socket as SpareSocket)[VIOLATION];
    if (violation) socket.off('data', violation).off('end', violation);
    this.inUse++;
    socket.once('close', () => {
      this.inUse--;
      this.checkClosed();
    });
    // undici attaches its listeners inside this call, before any read can happen.
    callback(null, socket);
  }
}

const VIOLATION = Symbol('spare data listener');
type SpareSocket = Socket & { [VIOLATION]?: () => void };

function noop(): void {}
