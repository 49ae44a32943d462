// Waiting, bounded, for an ioredis connection to become usable: the feed and the traffic records both run with the
// offline queue off, so a command sent before 'ready' fails instead of waiting, and each caller waits first.
import type { Redis } from 'ioredis';

/**
 * Resolves once `conn` is ready; rejects with `closed()` when it ends first, or with `late()` after `timeoutMs`.
 * The errors are built when they happen, so a message may name the connection's status at that moment.
 */
export function redisReady(conn: Redis, timeoutMs: number, errors: { closed: () => Error; late: () => Error }): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (err?: Error) => {
      clearTimeout(timer);
      conn.off('ready', onReady);
      conn.off('end', onEnd);
      if (err) reject(err);
      else resolve();
    };
    const onReady = () => done();
    const onEnd = () => done(errors.closed());
    const timer = setTimeout(() => done(errors.late()), timeoutMs);
    conn.on('ready', onReady);
    conn.on('end', onEnd);
  });
}
