// The agents connected to this edge, per endpoint: the forwarder picks a session here for each request or stream.
// An AgentSession wraps one agent's HTTP/2 client session; connect/disconnect events feed presence publishing.
import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type ClientSessionRequestOptions, type OutgoingHttpHeaders } from 'node:http2';
import { encodeGoAwayReason, normalizeTags, parseGoAwayReason, type TunnelEndpoint, type TunnelProtocol } from '../../shared/tunnel/protocol.ts';
import { DEFAULT_KEEPALIVE, startKeepalive, type KeepaliveOptions, type TunnelLink } from '../../shared/tunnel/transport.ts';
import type { TunnelTransport } from '../../shared/tunnel/raw.ts';
import type { DataConnections } from './data-connections.ts';

/**
 * The API key a session was admitted with. The edge checks the session again whenever the feed changes that key,
 * its account or the endpoint (src/edge/agent-auth.ts), so revoking the key ends the tunnel.
 */
export interface TunnelCredential {
  keyId: string;
  /** The key entry's secret_hash at admission: an entry published again with another hash is another key. */
  secretHash: string;
  /** The key's account at admission, to find the sessions an account change concerns. */
  accountId: number;
}

/** What a deploying agent's session carries for its control stream (src/edge/deploy-channel.ts). */
export interface DeployGrant {
  application: string;
  /** The agent's own API key: its events reach the control API with it, judged there as any caller is. */
  apiKey: string;
}

export interface AgentSessionInfo {
  agentId: string;
  /** Lower case, without duplicates (tags compare case-insensitively). */
  tags: readonly string[];
  protocol: TunnelProtocol;
  endpoint: TunnelEndpoint;
  remoteAddress: string;
  /** The agent's self-description from its hello (name/version). */
  client: string;
  /** Absent only where the edge admits agents without API keys (test harnesses). */
  credential?: TunnelCredential;
  /** What carries the session: HTTP/2 on the socket itself (`raw`) or in WebSocket messages (`ws`, the default). */
  transport?: TunnelTransport;
  /** The data connections granted in the welcome (raw transport, http agents that offered them). */
  data?: DataConnections;
  /** Set for a deploying agent (`edge agent deploy`): its application and its key. */
  deploy?: DeployGrant;
}

/** Why a session left: a code from docs/tunnels.md (`agent_closed`, `ping_timeout`, `replaced`, ...) and words. */
export interface DisconnectReason {
  code: string;
  message: string;
}

export interface AgentSessionEvents {
  /** No new streams any more (a GOAWAY went either way); streams in flight may finish. */
  draining: [reason: DisconnectReason];
  close: [reason: DisconnectReason];
}

/**
 * Options for every request, the priority ones spelt out at their defaults (RFC 9113 §5.3.5). Node adds any that
 * are missing to its own copy of the object, and that costs ~8 µs per request: a loopback micro-benchmark of
 * session.request and its answer, client and server in one process, took 68 µs of CPU (median of ten runs) with
 * only endStream and 60 µs with these.
 */
const REQUEST_DEFAULTS = Object.freeze({ endStream: false, weight: 16, parent: 0, exclusive: false, silent: false }) as ClientSessionRequestOptions;

export class SessionUnavailableError extends Error {
  override name = 'SessionUnavailableError';
  readonly code = 'EDGE_ERR_TUNNEL_UNAVAILABLE';
}

export class AgentSession extends EventEmitter<AgentSessionEvents> {
  /** This connection's own id (an agent keeps its agentId across reconnects; each connection gets a new id). */
  readonly id = randomUUID();
  readonly agentId: string;
  readonly tags: readonly string[];
  readonly protocol: TunnelProtocol;
  readonly endpoint: TunnelEndpoint;
  readonly remoteAddress: string;
  readonly client: string;
  readonly credential: Readonly<TunnelCredential> | null;
  readonly transport: TunnelTransport;
  /** Where HTTP requests go when it has room (docs/tunnels.md "Data connections"); null: HTTP/2 streams only. */
  readonly data: DataConnections | null;
  readonly deploy: Readonly<DeployGrant> | null;
  readonly connectedAt = new Date();
  private reason: DisconnectReason | null = null;
  private draining = false;
  private ended = false;
  private open = 0;
  private readonly closed: Promise<void>;

  constructor(
    info: AgentSessionInfo,
    private readonly session: ClientHttp2Session,
    private readonly link: TunnelLink,
    keepalive: KeepaliveOptions = DEFAULT_KEEPALIVE,
  ) {
    super();
    this.agentId = info.agentId;
    this.tags = Object.freeze(normalizeTags(info.tags));
    this.protocol = info.protocol;
    this.endpoint = Object.freeze({ ...info.endpoint });
    this.remoteAddress = info.remoteAddress;
    this.client = info.client;
    this.credential = info.credential ? Object.freeze({ ...info.credential }) : null;
    this.transport = info.transport ?? 'ws';
    this.data = info.data ?? null;
    this.deploy = info.deploy ? Object.freeze({ ...info.deploy }) : null;

    session.on('goaway', (_code, _lastStreamId, data) => {
      this.reason ??= parseGoAwayReason(data) ?? { code: 'agent_closed', message: 'the agent closed the tunnel' };
      this.drain();
    });
    // Every error ends in 'close'; the first one names the reason there.
    session.on('error', (err: Error) => {
      this.reason ??= { code: 'session_error', message: err.message };
    });
    this.closed = new Promise((resolve) => {
      session.once('close', () => {
        this.reason ??= { code: 'connection_lost', message: 'the tunnel connection closed' };
        this.drain();
        this.ended = true;
        this.emit('close', this.reason);
        resolve();
      });
    });
    startKeepalive(session, link, keepalive, (message) => void this.destroy({ code: 'ping_timeout', message }));
  }

  /** True while new requests may be sent on this session. */
  get available(): boolean {
    return !this.draining && !this.session.closed && !this.session.destroyed;
  }

  /** Why the session drained or closed; null while it is serving. */
  get disconnectReason(): DisconnectReason | null {
    return this.reason;
  }

  /**
   * Opens an HTTP/2 request stream to the agent (RFC 9113 §8.3.1): `headers` carries `:method`, `:path`,
   * `:authority` and `:scheme` plus end-to-end fields only (see shared/tunnel/headers.ts). The request body is
   * whatever is written to the stream, and the caller must end() it: unlike Node's default, which closes GET,
   * HEAD and DELETE streams at once, `endStream` defaults to false here so no body is ever dropped silently.
   * Throws SessionUnavailableError when the session drains or closed since it was picked.
   */
  request(headers: OutgoingHttpHeaders, options: ClientSessionRequestOptions = {}): ClientHttp2Stream {
    if (!this.available) throw new SessionUnavailableError(`agent session ${this.id} is not accepting streams`);
    const stream = this.session.request(headers, { ...REQUEST_DEFAULTS, ...options });
    this.open++;
    stream.on('close', this.streamClosed);
    return stream;
  }

  private readonly streamClosed = () => {
    this.open--;
  };

  /**
   * Opens a CONNECT stream (RFC 9113 §8.5): after a 200 response it carries raw bytes both ways to the agent's
   * local target (a TCP connection, a WebSocket upgrade replayed as bytes, or framed UDP datagrams for a udp
   * agent). `authority` is the host:port the visitor reached; the agent only logs it and always dials its own
   * configured target, so no edge can make an agent connect elsewhere. `headers` may add metadata fields.
   */
  connect(authority: string, headers: OutgoingHttpHeaders = {}, options: ClientSessionRequestOptions = {}): ClientHttp2Stream {
    return this.request({ ...headers, ':method': 'CONNECT', ':authority': authority }, options);
  }

  /** Streams opened through this session that have not closed yet (for least-busy choices and drain waits). */
  get activeStreams(): number {
    return this.open;
  }

  /** Round-trip time of an HTTP/2 PING, in ms. */
  ping(): Promise<number> {
    return new Promise((resolve, reject) => {
      const sent = this.session.ping((err, duration) => (err ? reject(err) : resolve(duration)));
      if (!sent) reject(new Error('too many outstanding pings'));
    });
  }

  /**
   * Graceful close: a GOAWAY carrying `reason` (the agent reads it), no new streams, streams in flight finish;
   * after `graceMs` whatever remains is cut. Resolves once the connection is closed.
   */
  close(reason: DisconnectReason = { code: 'closed', message: 'the edge closed the tunnel' }, graceMs = 10_000): Promise<void> {
    if (!this.ended && !this.session.closed && !this.session.destroyed) {
      this.reason ??= reason;
      try {
        this.session.goaway(http2.constants.NGHTTP2_NO_ERROR, 0, encodeGoAwayReason(reason));
      } catch {
        // already destroyed: the close below is a no-op and 'close' follows
      }
      this.drain();
      this.session.close();
      const timer = setTimeout(() => void this.destroy(reason), graceMs);
      timer.unref();
      void this.closed.then(() => clearTimeout(timer));
    }
    return this.closed;
  }

  /** Immediate close: streams in flight are reset and the connection is cut (see TunnelLink.terminate). */
  destroy(reason: DisconnectReason = { code: 'closed', message: 'the edge closed the tunnel' }): Promise<void> {
    this.reason ??= reason;
    this.drain();
    this.data?.destroy();
    if (!this.session.destroyed) this.session.destroy();
    this.link.terminate();
    return this.closed;
  }

  /** Resolves when the connection has closed. */
  whenClosed(): Promise<void> {
    return this.closed;
  }

  private drain(): void {
    if (this.draining) return;
    this.draining = true;
    // Exchanges in flight on data connections finish there; idle ones and spares close now.
    this.data?.drain();
    this.emit('draining', this.reason ?? { code: 'closed', message: 'closing' });
  }
}

export interface PickOptions {
  /** Only this agent (routing rules that pin an agent). */
  agentId?: string;
  /** Only agents carrying every one of these tags (compared case-insensitively). */
  tags?: readonly string[];
  /** Only agents speaking this protocol (dedicated ports: an http agent never receives raw TCP). */
  protocol?: TunnelProtocol;
}

export interface TunnelRegistryEvents {
  connect: [session: AgentSession];
  /** Once per session, when it stops taking new streams (drain) or closes, whichever comes first. */
  disconnect: [session: AgentSession, reason: DisconnectReason];
}

interface EndpointEntry {
  sessions: AgentSession[];
  /** Round-robin position: the index after the last session picked. */
  cursor: number;
}

export class TunnelRegistry extends EventEmitter<TunnelRegistryEvents> {
  private readonly endpoints = new Map<string, EndpointEntry>();
  private readonly all = new Set<AgentSession>();
  /** Sessions by the API key, and by the account of the key, that admitted them: a change to either finds them. */
  private readonly byKey = new Map<string, Set<AgentSession>>();
  private readonly byAccount = new Map<number, Set<AgentSession>>();

  /**
   * Adds a live session. One agent id is one agent: a new connection with the id of a session already on the
   * endpoint replaces it (that one is usually a dead connection the agent has given up on; a second process
   * misconfigured with the same id is told so by the `replaced` reason instead of sharing traffic unknowingly).
   */
  add(session: AgentSession): void {
    if (this.all.has(session) || !session.available) return;
    let entry = this.endpoints.get(session.endpoint.uuid);
    if (!entry) {
      entry = { sessions: [], cursor: 0 };
      this.endpoints.set(session.endpoint.uuid, entry);
    }
    const previous = entry.sessions.find((s) => s.agentId === session.agentId);
    entry.sessions.push(session);
    this.all.add(session);
    if (session.credential) {
      addTo(this.byKey, session.credential.keyId, session);
      addTo(this.byAccount, session.credential.accountId, session);
    }
    session.once('draining', (reason) => this.remove(session, reason));
    session.once('close', (reason) => this.remove(session, reason));
    this.emit('connect', session);
    if (previous) {
      void previous.close({ code: 'replaced', message: `agent "${session.agentId}" connected again from ${session.remoteAddress}` });
    }
  }

  /**
   * The next live session of the endpoint that matches, round-robin, or null when none does. Constant work per
   * call for the common case (no filter); with filters it scans at most the endpoint's sessions once.
   */
  pick(endpointUuid: string, options?: PickOptions): AgentSession | null {
    const entry = this.endpoints.get(endpointUuid);
    if (!entry) return null;
    const { sessions } = entry;
    const tags = options?.tags && options.tags.length > 0 ? normalizeTags(options.tags) : null;
    const agentId = options?.agentId;
    const protocol = options?.protocol;
    const n = sessions.length;
    for (let i = 0; i < n; i++) {
      const index = (entry.cursor + i) % n;
      const s = sessions[index];
      if (!s.available) continue;
      if (agentId !== undefined && s.agentId !== agentId) continue;
      if (protocol !== undefined && s.protocol !== protocol) continue;
      if (tags && !tags.every((t) => s.tags.includes(t))) continue;
      entry.cursor = (index + 1) % n;
      return s;
    }
    return null;
  }

  /** The live sessions of one endpoint, or of all endpoints. */
  sessions(endpointUuid?: string): AgentSession[] {
    if (endpointUuid === undefined) return [...this.all];
    return [...(this.endpoints.get(endpointUuid)?.sessions ?? [])];
  }

  /** The live sessions admitted with this API key (by key id). */
  sessionsOfKey(keyId: string): AgentSession[] {
    return [...(this.byKey.get(keyId) ?? [])];
  }

  /** The live sessions admitted with a key of this account. */
  sessionsOfAccount(accountId: number): AgentSession[] {
    return [...(this.byAccount.get(accountId) ?? [])];
  }

  get size(): number {
    return this.all.size;
  }

  /** Drains every session (GOAWAY `shutting_down`, agents reconnect elsewhere or later) and waits for them. */
  async close(graceMs = 10_000): Promise<void> {
    const closing = [...this.all].map((s) => s.close({ code: 'shutting_down', message: 'the edge is shutting down' }, graceMs));
    await Promise.all(closing);
  }

  private remove(session: AgentSession, reason: DisconnectReason): void {
    if (!this.all.delete(session)) return;
    if (session.credential) {
      removeFrom(this.byKey, session.credential.keyId, session);
      removeFrom(this.byAccount, session.credential.accountId, session);
    }
    const entry = this.endpoints.get(session.endpoint.uuid);
    if (entry) {
      const index = entry.sessions.indexOf(session);
      if (index >= 0) {
        entry.sessions.splice(index, 1);
        // Keep the rotation where it was: the session after the removed one is next.
        if (index < entry.cursor) entry.cursor--;
        if (entry.cursor >= entry.sessions.length) entry.cursor = 0;
      }
      if (entry.sessions.length === 0) this.endpoints.delete(session.endpoint.uuid);
    }
    this.emit('disconnect', session, reason);
  }
}

function addTo<K>(index: Map<K, Set<AgentSession>>, key: K, session: AgentSession): void {
  let set = index.get(key);
  if (!set) index.set(key, (set = new Set()));
  set.add(session);
}

function removeFrom<K>(index: Map<K, Set<AgentSession>>, key: K, session: AgentSession): void {
  const set = index.get(key);
  if (set?.delete(session) && set.size === 0) index.delete(key);
}
