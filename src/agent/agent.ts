// The agent: dials the edge's tunnel (raw `edge-tunnel/2` upgrade, WebSocket as the fallback), says hello, then serves
// the edge's HTTP/2 streams to the local target. It reconnects with full-jitter backoff until stopped or refused for good.
// Its parts: options.ts (settings), dial-raw.ts and dial-ws.ts (the transports), handshake.ts (hello and answer).
import { EventEmitter } from 'node:events';
import http2, { type ServerHttp2Session } from 'node:http2';
import { createLogger, type Logger } from '../shared/log.ts';
import { REFUSALS, encodeGoAwayReason, isRetryableRefusal, parseGoAwayReason, type GoAwayReason, type Welcome } from '../shared/tunnel/protocol.ts';
import { acceptTunnelServer, startKeepalive, type TunnelLink } from '../shared/tunnel/transport.ts';
import { RAW_UPGRADE_TOKEN, type TunnelTransport } from '../shared/tunnel/raw.ts';
import { failStream } from '../shared/tunnel/reset.ts';
import { Backoff } from './backoff.ts';
import { AgentDataConnections } from './data-connections.ts';
import { dialRaw } from './dial-raw.ts';
import { dialWebSocket } from './dial-ws.ts';
import { createHttpForwarder, type HttpForwarder } from './forward-http.ts';
import { createStreamForwarder } from './forward-stream.ts';
import { TunnelRefusedError, helloFor, readReply, type AttemptState, type DialContext, type Outcome } from './handshake.ts';
import { agentSettings, type AgentOptions, type AgentSettings } from './options.ts';
import { startTracing, type Tracing } from '../shared/tracing.ts';
import type { Target } from './target.ts';

// The agent's public surface, wherever its parts live.
export { TunnelRefusedError } from './handshake.ts';
export { DEFAULT_DATA_SPARES, TRANSPORT_CHOICES, tunnelUrl, type AgentOptions, type TransportChoice } from './options.ts';

/** How long data connections carrying an exchange may finish after their tunnel closed. */
const DATA_GRACE_MS = 10_000;

export interface DisconnectInfo {
  code: string;
  message: string;
}

export interface ReconnectInfo {
  /** Failed attempts since the last healthy connection, this one included. */
  attempt: number;
  delayMs: number;
  /** Why the last connection ended or the last attempt failed. */
  reason: string;
}

export interface AgentEvents {
  /** A tunnel is up; the welcome has the endpoint's public URL (the same one after a reconnect). */
  connected: [welcome: Welcome];
  /** A tunnel that was up went away. */
  disconnected: [info: DisconnectInfo];
  /** Waiting `delayMs` before the next attempt. */
  reconnecting: [info: ReconnectInfo];
  /** The agent stopped for good: null after stop(), the refusal when the edge refused it for good. */
  stopped: [error: TunnelRefusedError | null];
}

/** What reports its tunnels coming up and its end: an agent, or a set of them (src/agent/ha.ts). */
interface TunnelEvents {
  once(event: 'connected', listener: (welcome: Welcome) => void): unknown;
  once(event: 'stopped', listener: (err: TunnelRefusedError | null) => void): unknown;
  off(event: 'connected', listener: (welcome: Welcome) => void): unknown;
  off(event: 'stopped', listener: (err: TunnelRefusedError | null) => void): unknown;
}

/** The first welcome `source` reports; rejects with why it stopped first (a refusal for good, or stop()). */
export function firstWelcome(source: TunnelEvents): Promise<Welcome> {
  return new Promise<Welcome>((resolve, reject) => {
    const onConnected = (welcome: Welcome) => {
      source.off('stopped', onStopped);
      resolve(welcome);
    };
    const onStopped = (err: TunnelRefusedError | null) => {
      source.off('connected', onConnected);
      reject(err ?? new Error('agent stopped before it connected'));
    };
    source.once('connected', onConnected);
    source.once('stopped', onStopped);
  });
}

/**
 * An agent's tracing (src/shared/tracing.ts): a span per request forwarded over the tunnel's HTTP/2 streams. Absent:
 * started from the process's OTEL_* variables (off without an endpoint) and shut down, flushed, by stop(); null: off;
 * a Tracing: used as given (its owner shuts it down).
 */
export interface AgentTracingOption {
  tracing?: Tracing | null;
}

export class Agent extends EventEmitter<AgentEvents> {
  readonly agentId: string;
  /** Null for an agent whose `streams` handler picks the target per stream (`edge agent deploy`). */
  readonly target: Target | null;
  private readonly o: AgentSettings;
  /** What the transports' dials (dial-raw.ts, dial-ws.ts) use of this agent. */
  private readonly dial: DialContext;
  private readonly logger: Logger;
  private readonly backoff: Backoff;
  private readonly http: HttpForwarder | null;
  private readonly connectStream: ReturnType<typeof createStreamForwarder> | null;
  private endpointUuid: string | undefined;
  private current: Welcome | null = null;
  private stopping = false;
  /** Cuts the connection being dialled or served (before the HTTP/2 session exists, or as a last resort). */
  private abort: (() => void) | null = null;
  private session: ServerHttp2Session | null = null;
  private currentTransport: TunnelTransport | null = null;
  /** The data connections of the tunnel currently up, when the edge granted them. */
  private data: AgentDataConnections | null = null;
  /** The grace stop() was given, for exchanges still in flight on data connections. */
  private graceMs = 0;
  private wake: (() => void) | null = null;
  private loop: Promise<void> | null = null;

  /** Validates and freezes every option; throws TypeError/RangeError naming the bad one. Use startAgent(). */
  /** The tracing this agent started itself (from OTEL_*), which stop() shuts down; null when given or off. */
  private readonly ownTracing: Tracing | null;
  /** Tracing is on: no data connections are offered (see the constructor). */
  private readonly traced: boolean;

  constructor(options: AgentOptions & AgentTracingOption) {
    super();
    const o = agentSettings(options);
    this.o = o;
    this.agentId = o.agentId;
    this.target = o.target;
    this.logger = (options.logger ?? createLogger('silent')).child({ component: 'agent', agent: o.agentId });
    this.backoff = new Backoff(o.backoff);
    this.endpointUuid = options.endpoint;
    const target = o.target;
    this.ownTracing = options.tracing === undefined ? startTracing('agent', process.env, { 'edge.agent_id': o.agentId }) : null;
    const tracer = (options.tracing ?? this.ownTracing)?.tracer ?? null;
    // Data connections are bytes spliced to the local service, never parsed here: a traced agent takes every request
    // on its HTTP/2 streams, where each gets its span (docs/operations.md "Traces").
    this.traced = tracer !== null;
    this.http = target && o.protocol === 'http' ? createHttpForwarder({ target, logger: this.logger, hostHeader: o.hostHeader, verifyTls: o.verifyTargetTls, tracer }) : null;
    this.connectStream = target ? createStreamForwarder({ target, logger: this.logger, verifyTls: o.verifyTargetTls, udpIdleMs: o.udpIdleMs }) : null;
    this.dial = {
      o,
      setAbort: (abort) => (this.abort = abort),
      hello: (transport) => helloFor(o, this.endpointUuid, transport),
      onReply: (state, data, transport, openLink) => this.onReply(state, data, transport, openLink),
    };
  }

  /** The welcome of the tunnel currently up, or null between connections. */
  get welcome(): Welcome | null {
    return this.current;
  }

  get connected(): boolean {
    return this.current !== null;
  }

  /** The data connections of the tunnel currently up (open, and idle spares), or null when it has none. */
  get dataConnections(): { open: number; idle: number } | null {
    return this.data ? { open: this.data.size, idle: this.data.idle } : null;
  }

  /** What carries the tunnel currently up (`raw` or `ws`), or null between connections. */
  get transport(): TunnelTransport | null {
    return this.current ? this.currentTransport : null;
  }

  /**
   * Connects and keeps connecting. Resolves with the first welcome; rejects with TunnelRefusedError when the edge
   * refuses for good (bad key, not the owner, region or protocol not allowed), or an Error if stop() comes first.
   * Transient failures (edge down, network) are retried with backoff, reported as 'reconnecting' events.
   */
  start(): Promise<Welcome> {
    if (this.loop) throw new Error('agent already started');
    const first = firstWelcome(this);
    this.loop = this.run();
    return first;
  }

  /**
   * Closes the tunnel gracefully: GOAWAY to the edge (no new streams), streams in flight get `graceMs` to
   * finish, then the connection closes. No reconnect follows.
   */
  async stop(graceMs = 5_000): Promise<void> {
    // Exchanges on data connections outlive the tunnel (its HTTP/2 session closes once it carries no stream): stop
    // resolves once they finished or were cut at the grace, so a caller that exits then cuts nothing short.
    const data = this.data;
    if (!this.stopping) {
      this.stopping = true;
      this.graceMs = graceMs;
      this.wake?.();
      const session = this.session;
      if (session && !session.closed && !session.destroyed) {
        sendGoAway(session, { code: 'agent_stopping', message: 'the agent is stopping' });
        session.close();
        const timer = setTimeout(() => {
          session.destroy();
          this.abort?.();
        }, graceMs);
        timer.unref();
        session.once('close', () => clearTimeout(timer));
      } else {
        this.abort?.();
      }
    }
    await this.loop;
    await data?.whenClosed();
    await this.ownTracing?.shutdown();
  }

  private async run(): Promise<void> {
    let fatal: TunnelRefusedError | null = null;
    while (!this.stopping) {
      const outcome = await this.connectOnce();
      if (this.stopping) break;
      if (outcome.fatal) {
        // An ephemeral endpoint can expire while the agent is away: ask for a new one rather than give up.
        if (outcome.fatal.code === 'endpoint_not_found' && this.o.endpoint === undefined && this.endpointUuid !== undefined) {
          this.logger.warn({ endpoint: this.endpointUuid }, 'ephemeral endpoint is gone; asking for a new one');
          this.endpointUuid = undefined;
          continue;
        }
        fatal = outcome.fatal;
        this.logger.error({ code: fatal.code, reason: fatal.message }, 'tunnel refused; not retrying');
        break;
      }
      if (outcome.healthy) this.backoff.reset();
      const delayMs = this.backoff.next();
      this.logger.info({ reason: outcome.reason, delayMs, attempt: this.backoff.attempts }, 'reconnecting');
      this.emit('reconnecting', { attempt: this.backoff.attempts, delayMs, reason: outcome.reason });
      await this.sleep(delayMs);
    }
    this.http?.close();
    this.emit('stopped', fatal);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = () => {
        this.wake = null;
        done();
      };
    });
  }

  /** One connection, from dial to close, over the chosen transport. Resolves (never rejects) with what comes next. */
  private async connectOnce(): Promise<Outcome> {
    if (this.o.transport === 'ws') return dialWebSocket(this.dial);
    const raw = await dialRaw(this.dial);
    if (!('unsupported' in raw)) return raw;
    if (this.o.transport === 'raw' || this.stopping) {
      // As for a WebSocket upgrade: a 4xx means this URL is no tunnel endpoint (or a proxy refuses the token).
      const { status } = raw;
      if (status !== undefined && status >= 400 && status < 500 && status !== 408 && status !== 429) {
        const hint = this.o.transport === 'raw' ? '; check --edge, or try --transport ws (or auto) behind a proxy that passes only WebSockets' : '';
        return { fatal: new TunnelRefusedError('not_a_tunnel_endpoint', `${this.o.url.href} ${raw.unsupported}${hint}`) };
      }
      return { reason: raw.unsupported, healthy: false, connected: false };
    }
    this.logger.info({ reason: raw.unsupported }, `no ${RAW_UPGRADE_TOKEN} on the way to the edge; falling back to the WebSocket transport`);
    return dialWebSocket(this.dial);
  }

  /**
   * The edge's answer to the hello, on either transport. A refusal ends the attempt; a welcome opens the link
   * (synchronously: the edge's HTTP/2 bytes follow the welcome) and serves HTTP/2 on it until it closes.
   */
  private onReply(state: AttemptState, data: Buffer, transport: TunnelTransport, openLink: () => TunnelLink): void {
    const welcome = readReply(state, data);
    if (welcome === null) return void this.abort?.();
    state.welcomed = true;
    state.connectedAt = performance.now();
    const link = openLink();
    const session = acceptTunnelServer(link, this.o.tuning);
    this.session = session;
    this.abort = () => link.terminate();
    session.on('stream', (stream, headers) => {
      stream.on('error', (err) => this.logger.debug({ err: err.message }, 'stream error'));
      try {
        if (this.o.streams) return this.o.streams(stream, headers);
        if (headers[':method'] === 'CONNECT' && this.connectStream) return this.connectStream(stream, headers);
        if (this.http) return this.http.handle(stream, headers);
        stream.respond({ ':status': 501, 'content-type': 'text/plain; charset=utf-8' });
        stream.end(`This is a ${this.o.protocol} agent; it serves CONNECT streams only.\n`);
      } catch (err) {
        // One bad stream must not take the tunnel (and every other stream on it) down.
        this.logger.error({ err }, 'stream handler failed');
        failStream(stream, 'the stream handler failed');
      }
    });
    session.on('goaway', (_code, _last, opaque) => {
      state.goaway ??= parseGoAwayReason(opaque);
    });
    session.on('error', (err: Error) => {
      state.lastError = err.message;
    });
    startKeepalive(session, link, this.o.keepalive, (problem) => {
      state.lastError = problem;
      session.destroy();
      link.terminate();
    });
    const grant = welcome.data_connections;
    const target = this.o.target;
    const dataConnections =
      grant !== undefined && transport === 'raw' && this.o.dataSpares > 0 && target !== null && !this.traced
        ? new AgentDataConnections({
            url: this.o.url,
            edgeTls: this.o.edgeTls,
            grant,
            spares: Math.min(this.o.dataSpares, grant.max),
            target,
            logger: this.logger,
            userAgent: this.o.client,
            handshakeTimeoutMs: this.o.handshakeTimeoutMs,
          })
        : null;
    this.data = dataConnections;
    session.once('close', () => {
      dataConnections?.stop(this.stopping ? this.graceMs : DATA_GRACE_MS);
      this.data = null;
      this.session = null;
      this.current = null;
      this.abort = null;
      const { goaway } = state;
      const reason = goaway ? `${goaway.code}: ${goaway.message}` : state.lastError || 'the tunnel connection closed';
      this.logger.info({ reason, transport }, 'tunnel down');
      this.emit('disconnected', { code: goaway?.code ?? 'connection_lost', message: goaway?.message ?? reason });
      // The edge may end a session for good, e.g. `replaced` by another process with this agent id.
      if (goaway && Object.hasOwn(REFUSALS, goaway.code) && !isRetryableRefusal(goaway.code)) {
        return state.finish({ fatal: new TunnelRefusedError(goaway.code, goaway.message) });
      }
      state.finish({ reason, healthy: performance.now() - state.connectedAt >= this.o.healthyAfterMs, connected: true });
    });

    this.endpointUuid = welcome.endpoint.uuid;
    this.current = welcome;
    this.currentTransport = transport;
    this.logger.info({ url: welcome.endpoint.public_url, region: welcome.region, node: welcome.node, transport, dataConnections: dataConnections !== null }, 'tunnel up');
    if (this.stopping) {
      sendGoAway(session, { code: 'agent_stopping', message: 'the agent is stopping' });
      session.close();
      return;
    }
    dataConnections?.start();
    this.emit('connected', welcome);
  }
}

function sendGoAway(session: ServerHttp2Session, reason: GoAwayReason): void {
  try {
    session.goaway(http2.constants.NGHTTP2_NO_ERROR, 0, encodeGoAwayReason(reason));
  } catch {
    // destroyed meanwhile; nothing to tell
  }
}

/** Creates an agent and resolves once its first tunnel is up; see Agent.start() for what rejects. */
export async function startAgent(options: AgentOptions & AgentTracingOption): Promise<Agent> {
  const agent = new Agent(options);
  await agent.start();
  return agent;
}
