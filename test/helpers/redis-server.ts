// A private redis-server per test file, on a free port and with nothing persisted, so tests can stop and
// restart it (losing all state, as a crashed cache would) without touching the machine's shared Redis.
// The server itself is the local cluster's (src/cluster/services.ts); this keeps the tests' stop/restart words.
import { startLocalRedis } from '../../src/cluster/services.ts';

export interface RedisServer {
  readonly port: number;
  readonly url: string;
  /** Stops the server (SIGKILL); everything it held is gone. */
  stop(): Promise<void>;
  /** Starts it again, empty, on the same port. */
  restart(): Promise<void>;
}

/** Starts a private server; extra arguments go to redis-server (e.g. ['--stream-node-max-entries', '1']). */
export async function startRedisServer(extraArgs: readonly string[] = []): Promise<RedisServer> {
  const redis = await startLocalRedis({ args: extraArgs });
  return {
    port: redis.port,
    url: redis.url,
    stop: () => redis.stop(),
    async restart() {
      await redis.kill();
      await redis.start();
    },
  };
}
