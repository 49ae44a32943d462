// Presence: which agents are live on which edge, and which config version each edge has applied. Edges publish
// a heartbeat with their whole state; control (tunnels, edge status) and the worker (janitor) read it.
import { Redis } from 'ioredis';
import { connectRedis } from './redis-connect.ts';

export interface AgentPresence {
  endpoint: string;
  agent_id: string;
  tags: string[];
  protocol: string;
  connected_at: string;
}

/** An endpoint config (at a feed version) that an edge refused to put in force because it did not compile. */
export interface EndpointCompileError {
  /** The endpoint's uuid. */
  endpoint: string;
  /** The feed version of the config that failed. */
  version: number;
  error: string;
}

/** The longest compile_errors list a heartbeat carries: enough to act on, small enough for every beat. */
export const COMPILE_ERRORS_REPORTED = 20;

export interface EdgeHeartbeat {
  node: string;
  region: string;
  /** The config feed version the edge has applied. */
  version: number;
  heartbeat_at: string;
  agents: AgentPresence[];
  /**
   * Where other edges reach this one's relay listener (docs/cluster.md "Relay between edges"); absent when it runs
   * none (single node, or an edge that predates the relay).
   */
  relay?: { host: string; port: number };
  /** Streams in flight on this edge's agent sessions at the beat: how busy it is, for choosing among relay peers. */
  load?: number;
  /** The shared public addresses this edge serves (EDGE_PUBLIC_ADDRESSES): the DNS role answers endpoint names with them. */
  addresses?: string[];
  /** Dedicated addresses this edge listens on beside its bind host (docs/dedicated-ips.md "At the edge"). */
  dedicated_addresses?: string[];
  /** Dedicated ports this edge has bound right now (absent from edges that predate them). */
  ports?: Array<{ endpoint: string; protocol: 'tcp' | 'udp'; port: number }>;
  /**
   * Endpoint configs this edge could not compile, most recent first and at most COMPILE_ERRORS_REPORTED of them;
   * each endpoint keeps serving its last good config (or answers 503 if it never had one). Absent from older edges.
   */
  compile_errors?: EndpointCompileError[];
  /** How many endpoints are in that state in all (the list may hold fewer). */
  compile_error_count?: number;
  /**
   * Visitor credentials this edge accepted since it started: credential id (snapshot basic_users[].id, tokens[].id)
   * → ISO time of its last use. Edges cannot write the store, so the worker turns these into last_used_at. Bounded
   * by MAX_CREDENTIAL_USE_ENTRIES per map (the most recent uses are kept). Absent from older edges.
   */
  credential_use?: { basic_users?: Record<string, string>; tokens?: Record<string, string> };
}

/** How many ids each credential_use map may carry, so a heartbeat stays small however many credentials an edge sees. */
export const MAX_CREDENTIAL_USE_ENTRIES = 1000;

export interface PresenceStore {
  /** Replaces this edge's entry (edges call it periodically and on every connect/disconnect). */
  report(heartbeat: EdgeHeartbeat): Promise<void>;
  /** Removes an edge's entry (clean shutdown). */
  remove(node: string): Promise<void>;
  /** Edges whose last heartbeat is younger than the staleness window. */
  edges(): Promise<EdgeHeartbeat[]>;
  close(): Promise<void>;
}

/** Agents of one endpoint across every live edge, with the edge that holds each. */
export async function tunnelsOf(store: PresenceStore, endpoint: string): Promise<Array<AgentPresence & { node: string; region: string }>> {
  const out: Array<AgentPresence & { node: string; region: string }> = [];
  for (const edge of await store.edges()) {
    for (const agent of edge.agents) if (agent.endpoint === endpoint) out.push({ ...agent, node: edge.node, region: edge.region });
  }
  return out;
}

function fresh(heartbeat: EdgeHeartbeat, staleMs: number, now = Date.now()): boolean {
  return now - Date.parse(heartbeat.heartbeat_at) <= staleMs;
}

/** In-process presence for the single-node mode (control, edge and worker share this process). */
export class MemoryPresence implements PresenceStore {
  private readonly entries = new Map<string, EdgeHeartbeat>();
  constructor(private readonly staleMs: number) {}

  async report(heartbeat: EdgeHeartbeat): Promise<void> {
    this.entries.set(heartbeat.node, heartbeat);
  }

  async remove(node: string): Promise<void> {
    this.entries.delete(node);
  }

  async edges(): Promise<EdgeHeartbeat[]> {
    return [...this.entries.values()].filter((h) => fresh(h, this.staleMs));
  }

  async close(): Promise<void> {}
}

/**
 * Presence in one Redis hash, node → heartbeat JSON. Readers drop entries older than the staleness window, so an
 * edge that died without saying goodbye disappears by itself; a hash read is one round trip for every edge.
 */
export class RedisPresence implements PresenceStore {
  private readonly redis: Redis;
  private readonly key: string;

  constructor(url: string, prefix: string, private readonly staleMs: number) {
    this.redis = connectRedis(url, { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: false });
    this.redis.on('error', () => {}); // callers see failures as rejected calls and retry at the next beat
    this.key = `${prefix}presence:edges`;
  }

  async report(heartbeat: EdgeHeartbeat): Promise<void> {
    await this.redis.hset(this.key, heartbeat.node, JSON.stringify(heartbeat));
  }

  async remove(node: string): Promise<void> {
    await this.redis.hdel(this.key, node);
  }

  async edges(): Promise<EdgeHeartbeat[]> {
    const all = await this.redis.hgetall(this.key);
    const now = Date.now();
    const out: EdgeHeartbeat[] = [];
    const stale: string[] = [];
    for (const [node, json] of Object.entries(all)) {
      const h = JSON.parse(json) as EdgeHeartbeat;
      if (fresh(h, this.staleMs, now)) out.push(h);
      else if (now - Date.parse(h.heartbeat_at) > this.staleMs * 10) stale.push(node);
    }
    // Long-dead edges are forgotten, so the hash does not grow with every node id ever used.
    if (stale.length > 0) await this.redis.hdel(this.key, ...stale).catch(() => {});
    return out;
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}
