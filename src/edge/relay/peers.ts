// The visitor's side of the relay: which other edge holds an agent for an endpoint (from presence, refreshed on a
// timer so no request waits for Redis), and a reused HTTP/2 connection to each such edge's relay listener.
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type ClientSessionRequestOptions, type OutgoingHttpHeaders } from 'node:http2';
import type { Logger } from '../../shared/log.ts';
import type { AgentPresence, EdgeHeartbeat, PresenceStore } from '../../shared/presence.ts';
import { normalizeTags } from '../../shared/tunnel/protocol.ts';
import type { PickOptions } from '../tunnels/registry.ts';
import type { RelayCredentials } from './credentials.ts';
import { addRelayFields } from './headers.ts';

export interface RelayPeersOptions {
  presence: PresenceStore;
  /** This edge: never a peer of itself. */
  node: string;
  region: string;
  /** Regions nearest first (EDGE_REGION_ORDER); regions not named come after, this edge's own region first of all. */
  regionOrder: readonly string[];
  credentials: RelayCredentials;
  /** Longest wait for a peer's answer to begin (EDGE_RELAY_TIMEOUT_MS). */
  timeoutMs: number;
  /** Longest wait for the TLS connection to a peer (EDGE_RELAY_CONNECT_TIMEOUT_MS). */
  connectTimeoutMs: number;
  /** How long a peer that failed is passed over (EDGE_RELAY_FAILURE_HOLD_MS). */
  failureHoldMs: number;
  /** How often presence is read again. */
  refreshMs: number;
  logger: Logger;
}

/** Raised on a relayed stream whose peer did not begin to answer in time: the visitor gets 504 agent_timeout. */
export class RelayTimeoutError extends Error {
  override name = 'RelayTimeoutError';
  readonly code = 'EDGE_RELAY_TIMEOUT';
}

export interface RelayCounts {
  /** Streams sent to other edges. */
  sent: number;
  /** Relays that failed: peer unreachable, refused, timed out. */
  failed: number;
}

/** One peer edge as presence describes it. */
interface Peer {
  node: string;
  region: string;
  address: string;
  load: number;
  agents: AgentPresence[];
}

/**
 * Something the forwarders can open streams on, as on an agent session: here each stream goes to a peer edge, which
 * hands it to its own agent. No data connections: relayed HTTP always rides an HTTP/2 stream.
 */
export class RelayTarget {
  readonly data = null;
  constructor(
    private readonly peers: RelayPeers,
    readonly peer: string,
    private readonly endpoint: string,
    private readonly pick: PickOptions | undefined,
  ) {}

  request(headers: OutgoingHttpHeaders, options: ClientSessionRequestOptions = {}): ClientHttp2Stream {
    return this.peers.open(this.peer, addRelayFields(headers, this.endpoint, this.pick), options);
  }

  connect(authority: string): ClientHttp2Stream {
    return this.request({ ':method': 'CONNECT', ':authority': authority });
  }
}

export class RelayPeers {
  readonly counts: RelayCounts = { sent: 0, failed: 0 };
  private peers: Peer[] = [];
  /** Endpoint uuid → the peers holding an agent of it, with those agents: built at each refresh, read per request. */
  private byEndpoint = new Map<string, Array<{ peer: Peer; agents: AgentPresence[] }>>();
  private readonly sessions = new Map<string, ClientHttp2Session>();
  /** Peer node → time until which it is passed over after a failure. */
  private readonly held = new Map<string, number>();
  /** Streams this edge has open to each peer: counted with the peer's reported load between beats. */
  private readonly inFlight = new Map<string, number>();
  private readonly rank: (region: string) => number;
  private timer: NodeJS.Timeout | null = null;
  private readonly log: Logger;

  constructor(private readonly options: RelayPeersOptions) {
    this.log = options.logger.child({ component: 'relay' });
    const order = [options.region, ...options.regionOrder.filter((r) => r !== options.region)];
    this.rank = (region) => {
      const i = order.indexOf(region);
      return i === -1 ? order.length : i;
    };
  }

  /** Reads presence now and then every refreshMs. */
  async start(): Promise<void> {
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), this.options.refreshMs);
    this.timer.unref();
  }

  private async refresh(): Promise<void> {
    let edges: EdgeHeartbeat[];
    try {
      edges = await this.options.presence.edges();
    } catch (err) {
      // Redis away: the last view stands; presence entries age out on their own once Redis answers again.
      this.log.debug({ err }, 'presence not readable; relay keeps its last view of the peers');
      return;
    }
    const before = this.peers.map((p) => p.node).join();
    this.peers = edges
      .filter((e) => e.node !== this.options.node && e.relay !== undefined && e.agents.length > 0)
      .map((e) => ({ node: e.node, region: e.region, address: `${e.relay!.host.includes(':') ? `[${e.relay!.host}]` : e.relay!.host}:${e.relay!.port}`, load: e.load ?? 0, agents: e.agents }));
    const byEndpoint = new Map<string, Array<{ peer: Peer; agents: AgentPresence[] }>>();
    for (const peer of this.peers) {
      const mine = new Map<string, AgentPresence[]>();
      for (const agent of peer.agents) {
        const list = mine.get(agent.endpoint);
        if (list) list.push(agent);
        else mine.set(agent.endpoint, [agent]);
      }
      for (const [endpoint, agents] of mine) {
        const holders = byEndpoint.get(endpoint);
        if (holders) holders.push({ peer, agents });
        else byEndpoint.set(endpoint, [{ peer, agents }]);
      }
    }
    this.byEndpoint = byEndpoint;
    const now = this.peers.map((p) => p.node).join();
    // Said once per change (an edge joined, left or went stale), not per read: operators and tests follow it.
    if (now !== before) this.log.info({ peers: now }, 'relay peers changed');
    // Connections to edges that left presence are closed.
    const live = new Set(this.peers.map((p) => p.node));
    for (const [node, session] of this.sessions) {
      if (!live.has(node)) {
        session.close();
        this.sessions.delete(node);
      }
    }
  }

  /**
   * A peer edge holding an agent of `endpoint` that matches `pick`: nearest region first, then the least loaded; a
   * peer that failed within failureHoldMs is passed over. Null when none does.
   */
  target(endpoint: string, pick?: PickOptions): RelayTarget | null {
    const now = Date.now();
    const tags = pick?.tags && pick.tags.length > 0 ? normalizeTags(pick.tags) : null;
    let best: Peer | null = null;
    let bestRank = 0;
    let bestLoad = 0;
    for (const { peer, agents } of this.byEndpoint.get(endpoint) ?? []) {
      const until = this.held.get(peer.node);
      if (until !== undefined && until > now) continue;
      if (!agents.some((a) => matches(a, pick, tags))) continue;
      const rank = this.rank(peer.region);
      const load = peer.load + (this.inFlight.get(peer.node) ?? 0);
      if (best === null || rank < bestRank || (rank === bestRank && load < bestLoad)) {
        best = peer;
        bestRank = rank;
        bestLoad = load;
      }
    }
    return best === null ? null : new RelayTarget(this, best.node, endpoint, pick);
  }

  /** Opens a stream to `node`'s relay listener; failures surface on the stream (error, or close with no answer). */
  open(node: string, headers: OutgoingHttpHeaders, options: ClientSessionRequestOptions): ClientHttp2Stream {
    const session = this.session(node);
    const stream = session.request(headers, options);
    this.counts.sent++;
    this.inFlight.set(node, (this.inFlight.get(node) ?? 0) + 1);
    let answered = false;
    const timer = setTimeout(() => {
      this.fail(node, 'no answer in time');
      stream.destroy(new RelayTimeoutError(`edge ${node} did not answer within ${this.options.timeoutMs} ms`));
    }, this.options.timeoutMs);
    stream.once('response', () => {
      answered = true;
      clearTimeout(timer);
    });
    stream.once('close', () => {
      clearTimeout(timer);
      const n = (this.inFlight.get(node) ?? 1) - 1;
      if (n > 0) this.inFlight.set(node, n);
      else this.inFlight.delete(node);
      // Refused (no agent there any more: presence was behind) or cut before any answer; a visitor who left is no failure.
      if (!answered && stream.rstCode !== http2.constants.NGHTTP2_CANCEL) this.counts.failed++;
    });
    return stream;
  }

  private session(node: string): ClientHttp2Session {
    const existing = this.sessions.get(node);
    if (existing && !existing.closed && !existing.destroyed) return existing;
    const peer = this.peers.find((p) => p.node === node);
    if (!peer) throw new Error(`edge ${node} is not a relay peer`);
    const { ca, cert, key, servername } = this.options.credentials;
    const session = http2.connect(`https://${peer.address}`, {
      ca,
      cert,
      key,
      minVersion: 'TLSv1.3',
      ...(servername ? { servername } : { checkServerIdentity: () => undefined }),
    });
    this.sessions.set(node, session);
    const forget = () => {
      if (this.sessions.get(node) === session) this.sessions.delete(node);
    };
    // A peer that does not finish the handshake in time (frozen, overloaded, a black hole) is given up on.
    const connectTimer = setTimeout(() => {
      this.fail(node, 'connect timeout');
      session.destroy(new RelayTimeoutError(`edge ${node} did not accept a relay connection within ${this.options.connectTimeoutMs} ms`));
    }, this.options.connectTimeoutMs);
    session.once('connect', () => clearTimeout(connectTimer));
    session.on('error', (err) => {
      this.fail(node, err.message);
      forget();
    });
    session.on('goaway', forget);
    session.on('close', () => {
      clearTimeout(connectTimer);
      forget();
    });
    // Idle connections do not keep this process alive.
    session.unref();
    return session;
  }

  private fail(node: string, why: string): void {
    this.held.set(node, Date.now() + this.options.failureHoldMs);
    this.log.warn({ peer: node, why }, 'relay to edge failed; passing it over for a while');
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    for (const session of this.sessions.values()) session.close();
    this.sessions.clear();
  }
}

function matches(agent: AgentPresence, pick: PickOptions | undefined, tags: string[] | null): boolean {
  if (pick?.agentId !== undefined && agent.agent_id !== pick.agentId) return false;
  if (pick?.protocol !== undefined && agent.protocol !== pick.protocol) return false;
  if (tags && !tags.every((t) => agent.tags.includes(t))) return false;
  return true;
}
