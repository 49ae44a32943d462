// One place that turns REDIS_URL into an ioredis connection: a single server (redis://, rediss://), a Sentinel-managed
// primary (redis+sentinel://) or a Redis Cluster (redis+cluster://). Every Redis user of the platform connects here.
import { Cluster, Redis, type RedisOptions } from 'ioredis';

/** host:port pairs, as REDIS_SENTINELS and REDIS_CLUSTER_NODES list them. */
export interface RedisNode {
  host: string;
  port: number;
}

export type RedisTarget =
  | { kind: 'single'; url: string }
  | { kind: 'sentinel'; sentinels: RedisNode[]; name: string; password?: string; db?: number }
  | { kind: 'cluster'; nodes: RedisNode[]; password?: string };

/** Parses `host:port,host:port` (IPv6 in brackets); throws naming the first bad entry. */
export function parseRedisNodes(list: string, what: string): RedisNode[] {
  const nodes: RedisNode[] = [];
  for (const raw of list.split(',')) {
    const entry = raw.trim();
    const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(entry);
    const port = m ? Number(m[2]) : 0;
    if (!m || port < 1 || port > 65535) throw new TypeError(`${what}: "${entry}" is not host:port`);
    nodes.push({ host: m[1].replace(/^\[|\]$/g, ''), port });
  }
  return nodes;
}

/** What a REDIS_URL names; throws TypeError on a malformed one. */
export function parseRedisTarget(url: string): RedisTarget {
  const m = /^redis\+(sentinel|cluster):\/\/(?:(?::([^@]*))@)?([^/?#]+)(?:\/([^/?#]*))?(?:\/(\d+))?$/.exec(url);
  if (!m) {
    if (!/^rediss?:\/\//.test(url)) throw new TypeError(`"${url.replace(/:[^@/]*@/, ':***@')}" is not a redis://, rediss://, redis+sentinel:// or redis+cluster:// URL`);
    return { kind: 'single', url };
  }
  const [, kind, password, hosts, name, db] = m;
  const nodes = parseRedisNodes(hosts, `redis+${kind} URL`);
  const secret = password ? decodeURIComponent(password) : undefined;
  if (kind === 'cluster') return { kind: 'cluster', nodes, password: secret };
  return { kind: 'sentinel', sentinels: nodes, name: name || 'mymaster', password: secret, db: db === undefined ? undefined : Number(db) };
}

/**
 * A connection to whatever `url` names, with the caller's options (timeouts, offline queue, retries). A Cluster is
 * returned typed as a Redis: the commands this platform sends (scripts whose keys share a hash tag, streams, hashes,
 * pub/sub) behave alike on both.
 */
export function connectRedis(url: string, options: RedisOptions = {}): Redis {
  const target = parseRedisTarget(url);
  switch (target.kind) {
    case 'single':
      return new Redis(url, options);
    case 'sentinel':
      return new Redis({ ...options, sentinels: target.sentinels, name: target.name, password: target.password, db: target.db });
    case 'cluster': {
      const { lazyConnect, enableOfflineQueue, maxRetriesPerRequest, scripts, ...nodeOptions } = options;
      return new Cluster(target.nodes, {
        lazyConnect,
        enableOfflineQueue,
        scripts,
        redisOptions: { ...nodeOptions, maxRetriesPerRequest, password: target.password },
        // Slots move during a failover: follow MOVED/ASK answers rather than fail the command.
        maxRedirections: 16,
        clusterRetryStrategy: (times) => Math.min(100 * times, 2_000),
      }) as unknown as Redis;
    }
  }
}
