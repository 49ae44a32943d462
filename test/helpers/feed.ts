// Helpers for change-feed tests: waiting on a subscriber's version, a recording consumer, message loss on a
// real transport, and a subscriber running in a child process (test/fixtures/feed-subscriber-process.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { FeedMirror, type FeedSubscriber } from '../../src/shared/feed/subscriber.ts';
import type { FeedListener, FeedSource } from '../../src/shared/feed/transport.ts';
import type { FeedChange, FeedEntry, FeedSnapshot } from '../../src/shared/feed/types.ts';

/** Generous: a slow CI machine must not fail a correct test, while a hang still fails it. */
export const WAIT_MS = 15_000;

/** Resolves once `subscriber` holds at least `version`; rejects with a clear message after `timeoutMs`. */
export function waitForVersion(subscriber: FeedSubscriber, version: number, timeoutMs = WAIT_MS): Promise<void> {
  if (subscriber.version >= version) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onApplied = (v: number) => {
      if (v < version) return;
      clearTimeout(timer);
      subscriber.off('applied', onApplied);
      resolve();
    };
    const timer = setTimeout(() => {
      subscriber.off('applied', onApplied);
      reject(new Error(`subscriber did not reach version ${version} within ${timeoutMs} ms (at ${subscriber.version})`));
    }, timeoutMs);
    subscriber.on('applied', onApplied);
  });
}

interface Emitter {
  on(event: string, listener: (...args: never[]) => void): unknown;
  off(event: string, listener: (...args: never[]) => void): unknown;
}

/**
 * Resolves with the arguments of the next `event` that satisfies `accept`, or rejects after `timeoutMs`.
 * Unlike events.once, an 'error' event meanwhile does not reject: tests here provoke errors on purpose.
 */
export function nextEvent<T extends unknown[]>(
  emitter: Emitter,
  event: string,
  accept: (...args: T) => boolean = () => true,
  timeoutMs = WAIT_MS,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const listener = (...args: T) => {
      if (!accept(...args)) return;
      clearTimeout(timer);
      emitter.off(event, listener as never);
      resolve(args);
    };
    const timer = setTimeout(() => {
      emitter.off(event, listener as never);
      reject(new Error(`no '${event}' event within ${timeoutMs} ms`));
    }, timeoutMs);
    emitter.on(event, listener as never);
  });
}

export type ConsumerCall = { kind: 'reset'; version: number } | { kind: 'apply'; version: number };

/** A FeedMirror that records every call it gets and can be told to fail on chosen versions, once each. */
export class RecordingConsumer extends FeedMirror {
  readonly calls: ConsumerCall[] = [];
  private readonly failures = new Set<number>();

  /** The next apply (or reset) of `version` throws, as a consumer that cannot compile a config would. */
  failOnce(version: number): void {
    this.failures.add(version);
  }

  get resets(): number[] {
    return this.calls.filter((c) => c.kind === 'reset').map((c) => c.version);
  }

  get applies(): number[] {
    return this.calls.filter((c) => c.kind === 'apply').map((c) => c.version);
  }

  override reset(snapshot: FeedSnapshot, signal?: AbortSignal): Promise<void> {
    this.calls.push({ kind: 'reset', version: snapshot.version });
    this.maybeFail(snapshot.version);
    return super.reset(snapshot, signal);
  }

  override apply(change: FeedChange): void {
    this.calls.push({ kind: 'apply', version: change.version });
    this.maybeFail(change.version);
    super.apply(change);
  }

  private maybeFail(version: number): void {
    if (this.failures.delete(version)) throw new Error(`consumer refuses version ${version}`);
  }
}

/**
 * A real source whose pub/sub deliveries of the versions in `dropped` are lost, the at-most-once loss the
 * subscriber must survive. Reads go to the source untouched.
 */
export function losingDeliveries(source: FeedSource, dropped: Set<number>): FeedSource {
  return {
    subscribe: (listener: FeedListener) =>
      source.subscribe({
        onChange: (change) => {
          if (!dropped.has(change.version)) listener.onChange(change);
        },
        onReset: (version) => listener.onReset(version),
        onReconnect: () => listener.onReconnect(),
      }),
    head: () => source.head(),
    readSince: (version) => source.readSince(version),
    readSnapshot: () => source.readSnapshot(),
    close: () => source.close(),
  };
}

/** Order-independent fingerprint of a map, so two processes can compare state by printing one line. */
export function entriesDigest(entries: Iterable<Pick<FeedEntry, 'topic' | 'key' | 'data'>>): string {
  const lines = [...entries].map((e) => JSON.stringify([e.topic, e.key, e.data])).sort();
  return createHash('sha256').update(lines.join('\n')).digest('hex').slice(0, 16);
}

/** One line the fixture prints on stdout. */
export type ChildEvent =
  | { event: 'started'; version: number }
  | { event: 'applied'; version: number; at: number; digest: string; sentAt?: number }
  | { event: 'resync'; reason: string; mode: string; from: number; to: number }
  | { event: 'stale'; source: number; applied: number }
  | { event: 'error'; message: string };

const FIXTURE = fileURLToPath(new URL('../fixtures/feed-subscriber-process.ts', import.meta.url));

/** Children still running, killed if the test process exits without killing them (a failed hook, say). */
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

/** A FeedSubscriber in another process, watched through the JSON lines it prints. */
export class ChildSubscriber {
  readonly events: ChildEvent[] = [];
  private readonly child: ChildProcess;
  private readonly waiters = new Set<() => void>();
  private exited = false;
  private stderr = '';

  constructor(env: { REDIS_URL: string; FEED_PREFIX: string; FEED_CHECK_INTERVAL_MS?: string }) {
    this.child = spawn(process.execPath, ['--import', 'tsx', FIXTURE], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(this.child);
    this.child.stderr!.on('data', (chunk) => {
      this.stderr = (this.stderr + chunk).slice(-4000);
    });
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      try {
        this.events.push(JSON.parse(line) as ChildEvent);
      } catch {
        return; // not ours (a stray library print)
      }
      for (const wake of this.waiters) wake();
    });
    this.child.once('exit', () => {
      children.delete(this.child);
      this.exited = true;
      for (const wake of this.waiters) wake();
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** The last version the child reported applied, or -1. */
  get version(): number {
    return this.lastApplied()?.version ?? -1;
  }

  /** Fingerprint of the child's map at its last applied version (see entriesDigest). */
  get digest(): string | undefined {
    return this.lastApplied()?.digest;
  }

  /** Versions in the order the child applied them. */
  get appliedVersions(): number[] {
    return this.events.flatMap((e) => (e.event === 'applied' ? [e.version] : []));
  }

  /** Resolves once `predicate` holds over what the child printed; rejects on timeout or if the child dies. */
  waitUntil(predicate: (child: ChildSubscriber) => boolean, what: string, timeoutMs = WAIT_MS): Promise<void> {
    if (predicate(this)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const finish = (err?: Error) => {
        clearTimeout(timer);
        this.waiters.delete(wake);
        if (err) reject(err);
        else resolve();
      };
      const wake = () => {
        if (predicate(this)) finish();
        else if (this.exited) finish(new Error(`subscriber process exited before ${what}; stderr: ${this.stderr}`));
      };
      const timer = setTimeout(() => {
        finish(new Error(`subscriber process: no ${what} within ${timeoutMs} ms (at version ${this.version}); stderr: ${this.stderr}`));
      }, timeoutMs);
      this.waiters.add(wake);
    });
  }

  waitForVersion(version: number, timeoutMs = WAIT_MS): Promise<void> {
    return this.waitUntil((c) => c.version >= version, `version ${version}`, timeoutMs);
  }

  private lastApplied(): Extract<ChildEvent, { event: 'applied' }> | undefined {
    for (let i = this.events.length - 1; i >= 0; i--) {
      const e = this.events[i];
      if (e.event === 'applied') return e;
    }
    return undefined;
  }

  /** SIGKILL, as a crash would; resolves once the process is gone. */
  async kill(): Promise<void> {
    if (this.exited || this.child.exitCode !== null) return;
    const gone = once(this.child, 'exit');
    this.child.kill('SIGKILL');
    await gone;
  }
}
