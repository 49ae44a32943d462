// The agent: dials the edge's tunnel (raw `edge-tunnel/2` upgrade, WebSocket as the fallback), says hello, then serves
// the edge's HTTP/2 streams to the local target. It reconnects with full-jitter backoff until stopped or refused for good.
import { EventEmitter } from 'node:events';
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import http2, { type ServerHttp2Session } from 'node:http2';
import { WebSocket, type ClientOptions } from 'ws';
import { createLogger, type Logger } from '../shared/log.ts';
import { MAX_API_KEY_LENGTH } from '../shared/api-keys.ts';
import {
  HOST_HEADER_PATTERN,
  MAX_AGENT_ID_LENGTH,
  MAX_DATA_CONNECTIONS,
  MAX_REPLY_BYTES,
  PROTOCOL_VERSION,
  REFUSALS,
  TUNNEL_PATH,
  TUNNEL_PROTOCOLS,
  TUNNEL_SUBPROTOCOL,
  encodeGoAwayReason,
  isRetryableRefusal,
  parseEdgeReply,
  parseGoAwayReason,
  parseHello,
  refusalForCloseCode,
  type GoAwayReason,
  type Hello,
  type TunnelProtocol,
  type Welcome,
} from '../shared/tunnel/protocol.ts';
import {
  DEFAULT_KEEPALIVE,
  DEFAULT_TUNING,
  MAX_MESSAGE_BYTES,
  acceptTunnelServer,
  openTunnelStream,
  startKeepalive,
  type KeepaliveOptions,
  type TunnelLink,
  type TunnelTuning,
} from '../shared/tunnel/transport.ts';
import { RAW_UPGRADE_TOKEN, asksForRawTunnel, encodeHandshakeFrame, openRawLink, readHandshakeFrame, type TunnelTransport } from '../shared/tunnel/raw.ts';
import { failStream } from '../shared/tunnel/reset.ts';
import { Backoff } from './backoff.ts';
import { AgentDataConnections } from './data-connections.ts';
import { createHttpForwarder, type HttpForwarder } from './forward-http.ts';
import { createStreamForwarder } from './forward-stream.ts';
import { parseTarget, type Target } from './target.ts';

export interface AgentOptions {
  /** The edge's public base URL (http://127.0.0.1:8080 in development); the tunnel lives at /_edge/tunnel on it. */
  edgeUrl: string;
  apiKey: string;
  /** The endpoint to serve; omitted, the edge creates an ephemeral one (kept across reconnects). */
  endpoint?: string;
  protocol: TunnelProtocol;
  /** `3000`, `host:port`, or a URL (`https://localhost:8443`, `udp://127.0.0.1:53`). */
  target: string | number;
  /** Stable across reconnects; default `<hostname>-<random>`, fixed for the life of this agent. */
  agentId?: string;
  tags?: string[];
  logger?: Logger;
  /** Name/version sent in the hello. */
  client?: string;
  /** Fixed Host header for the local service (default: the visitor's host). */
  hostHeader?: string;
  /** For an https:// target: verify the local service's certificate (default true). */
  verifyTargetTls?: boolean;
  /** TLS settings for an https:// (wss://) edge, on either transport, e.g. a private CA. */
  edgeTls?: { ca?: string | Buffer | Array<string | Buffer>; rejectUnauthorized?: boolean };
  /** Reconnect delays: full jitter below a cap doubling from initialMs to maxMs (default 500 ms → 30 s). */
  backoff?: { initialMs?: number; maxMs?: number };
  /** A connection that stayed up this long resets the backoff (default 10 s). */
  healthyAfterMs?: number;
  /** Time for the upgrade (raw or WebSocket) and again for the edge's answer to the hello (default 10 s). */
  handshakeTimeoutMs?: number;
  /** HTTP/2 PING cadence (default every 20 s, 15 s to answer). */
  keepalive?: Partial<KeepaliveOptions>;
  /** HTTP/2 settings (default DEFAULT_TUNING). */
  tuning?: Partial<TunnelTuning>;
  /** UDP flows idle this long are closed (udp agents). */
  udpIdleMs?: number;
  /**
   * Spare data connections to keep ready (docs/tunnels.md "Data connections"): on the raw transport, an http agent
   * with a plain-HTTP target offers them, and the edge then sends requests on them as HTTP/1.1, which the agent
   * splices to its local service. 0 sends every request over HTTP/2 streams. Default 8.
   */
  dataConnections?: number;
  /**
   * How to reach the edge: `raw` (HTTP/2 on the socket after an `edge-tunnel/2` upgrade), `ws` (HTTP/2 in WebSocket
   * messages, for networks that pass only WebSockets) or `auto` (default): raw, and ws when the upgrade is not
   * answered with 101 `edge-tunnel/2`, tried again on every connection.
   */
  transport?: TransportChoice;
}

export const TRANSPORT_CHOICES = ['auto', 'raw', 'ws'] as const;

/** Spare data connections an http agent keeps by default: enough for a burst while more are dialled. */
export const DEFAULT_DATA_SPARES = 8;
/** How long data connections carrying an exchange may finish after their tunnel closed. */
const DATA_GRACE_MS = 10_000;
export type TransportChoice = (typeof TRANSPORT_CHOICES)[number];

/** The edge refused this agent (or stopped it later) in a way retrying cannot fix. */
export class TunnelRefusedError extends Error {
  override name = 'TunnelRefusedError';
  constructor(
    /** The refusal code (`unauthorized`, `region_not_allowed`, ... see docs/tunnels.md). */
    readonly code: string,
    message: string,
    /** The WebSocket close code, when the refusal came as one. */
    readonly closeCode?: number,
  ) {
    super(message);
  }
}

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

type Outcome = { fatal: TunnelRefusedError } | { fatal?: undefined; reason: string; healthy: boolean; connected: boolean };
/** A raw attempt whose upgrade was not answered with 101 `edge-tunnel/2` (`status` when an HTTP answer came). */
type Unsupported = { unsupported: string; status?: number };

/** What one attempt shares between its transport's handshake and the HTTP/2 session after it. */
interface AttemptState {
  welcomed: boolean;
  connectedAt: number;
  lastError: string;
  goaway: GoAwayReason | null;
  finish(outcome: Outcome): void;
}

const AGENT_ID_CHARS = /[^A-Za-z0-9_.:@-]/g;

function defaultAgentId(): string {
  const host = hostname().replace(AGENT_ID_CHARS, '-').replace(/^[^A-Za-z0-9]+/, '').slice(0, 40) || 'agent';
  return `${host}-${randomBytes(4).toString('hex')}`;
}

/** ws(s)://host[:port][/base]/_edge/tunnel for the edge's public base URL. */
export function tunnelUrl(edgeUrl: string): URL {
  let url: URL;
  try {
    url = new URL(edgeUrl);
  } catch {
    throw new TypeError(`edge URL "${edgeUrl}" is not a URL; use e.g. http://127.0.0.1:8080`);
  }
  const scheme = { 'http:': 'ws:', 'ws:': 'ws:', 'https:': 'wss:', 'wss:': 'wss:' }[url.protocol];
  if (!scheme) throw new TypeError(`edge URL "${edgeUrl}" must be http(s):// or ws(s)://`);
  if (url.search || url.hash || url.username || url.password) throw new TypeError(`edge URL "${edgeUrl}" must not carry a query, fragment or credentials`);
  const out = new URL(url.href);
  out.protocol = scheme;
  out.pathname = `${url.pathname.replace(/\/+$/, '')}${TUNNEL_PATH}`;
  return out;
}

interface Frozen {
  url: URL;
  apiKey: string;
  endpoint?: string;
  protocol: TunnelProtocol;
  target: Target;
  agentId: string;
  tags: string[];
  client: string;
  healthyAfterMs: number;
  handshakeTimeoutMs: number;
  keepalive: KeepaliveOptions;
  tuning: TunnelTuning;
  wsOptions: ClientOptions;
  transport: TransportChoice;
  edgeTls: AgentOptions['edgeTls'];
  /** Spare data connections to keep; 0 when this agent offers none (tcp/udp, a TLS target, or turned off). */
  dataSpares: number;
  hostHeader: string | undefined;
}

export class Agent extends EventEmitter<AgentEvents> {
  readonly agentId: string;
  readonly target: Target;
  private readonly o: Frozen;
  private readonly logger: Logger;
  private readonly backoff: Backoff;
  private readonly http: HttpForwarder | null;
  private readonly connectStream: ReturnType<typeof createStreamForwarder>;
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
  constructor(options: AgentOptions) {
    super();
    if (!TUNNEL_PROTOCOLS.includes(options.protocol)) {
      throw new TypeError(`protocol must be one of ${TUNNEL_PROTOCOLS.join(', ')}, got ${JSON.stringify(options.protocol)}`);
    }
    if (typeof options.apiKey !== 'string' || options.apiKey.length === 0 || options.apiKey.length > MAX_API_KEY_LENGTH) {
      throw new TypeError('an API key is required (--api-key or EDGE_API_KEY)');
    }
    const agentId = options.agentId ?? defaultAgentId();
    const tags = options.tags ?? [];
    const client = (options.client ?? `edge-agent node/${process.versions.node}`).slice(0, 128);
    const hello: Hello = {
      type: 'hello',
      version: PROTOCOL_VERSION,
      api_key: options.apiKey,
      ...(options.endpoint !== undefined ? { endpoint: options.endpoint } : {}),
      protocol: options.protocol,
      agent_id: agentId,
      tags,
      client,
    };
    // The edge would refuse a hello the schema rejects; say so now, naming the field, instead of at connect.
    const check = parseHello(JSON.stringify(hello));
    if (!check.ok) {
      const hint = check.message.startsWith('/agent_id') ? ` (at most ${MAX_AGENT_ID_LENGTH} of A-Z a-z 0-9 _ . : @ -)` : '';
      throw new TypeError(`invalid agent option: ${check.message}${hint}`);
    }
    const initialMs = options.backoff?.initialMs ?? 500;
    const maxMs = options.backoff?.maxMs ?? 30_000;
    const keepalive = { ...DEFAULT_KEEPALIVE, ...options.keepalive };
    if (!(keepalive.intervalMs > 0 && keepalive.timeoutMs > 0)) throw new RangeError('keepalive intervalMs and timeoutMs must be positive');
    const handshakeTimeoutMs = options.handshakeTimeoutMs ?? 10_000;
    if (!(handshakeTimeoutMs > 0)) throw new RangeError(`handshakeTimeoutMs must be positive, got ${handshakeTimeoutMs}`);
    const url = tunnelUrl(options.edgeUrl);
    const transport = options.transport ?? 'auto';
    const dataSpares = options.dataConnections ?? DEFAULT_DATA_SPARES;
    if (!Number.isInteger(dataSpares) || dataSpares < 0 || dataSpares > MAX_DATA_CONNECTIONS) {
      throw new RangeError(`dataConnections must be an integer from 0 to ${MAX_DATA_CONNECTIONS}, got ${dataSpares}`);
    }
    if (options.hostHeader !== undefined && !new RegExp(HOST_HEADER_PATTERN).test(options.hostHeader)) {
      throw new TypeError(`hostHeader must be visible ASCII without spaces, got ${JSON.stringify(options.hostHeader)}`);
    }
    if (!TRANSPORT_CHOICES.includes(transport)) throw new TypeError(`transport must be one of ${TRANSPORT_CHOICES.join(', ')}, got ${JSON.stringify(transport)}`);

    this.agentId = agentId;
    this.target = Object.freeze(parseTarget(options.protocol, options.target));
    this.logger = (options.logger ?? createLogger('silent')).child({ component: 'agent', agent: agentId });
    this.backoff = new Backoff({ initialMs, maxMs });
    this.endpointUuid = options.endpoint;
    this.o = Object.freeze({
      url,
      apiKey: options.apiKey,
      endpoint: options.endpoint,
      protocol: options.protocol,
      target: this.target,
      agentId,
      tags: [...tags],
      client,
      healthyAfterMs: options.healthyAfterMs ?? 10_000,
      handshakeTimeoutMs,
      keepalive: Object.freeze(keepalive),
      tuning: Object.freeze({ ...DEFAULT_TUNING, ...options.tuning }),
      transport,
      edgeTls: options.edgeTls,
      dataSpares: options.protocol === 'http' && !this.target.tls ? dataSpares : 0,
      hostHeader: options.hostHeader,
      wsOptions: Object.freeze({
        perMessageDeflate: false,
        maxPayload: MAX_MESSAGE_BYTES,
        handshakeTimeout: handshakeTimeoutMs,
        followRedirects: false,
        headers: { 'user-agent': client },
        ...(options.edgeTls ?? {}),
        // No generateMask: ws masks every frame with a fresh random key (RFC 6455 §5.3), as a client must. A
        // TLS-terminating load balancer in front of the edge reads the frames in clear, which is exactly the
        // intermediary masking protects (§10.3); the raw transport is the fast path, not an unmasked WebSocket.
      }),
    });
    this.http =
      options.protocol === 'http'
        ? createHttpForwarder({ target: this.target, logger: this.logger, hostHeader: options.hostHeader, verifyTls: options.verifyTargetTls })
        : null;
    this.connectStream = createStreamForwarder({
      target: this.target,
      logger: this.logger,
      verifyTls: options.verifyTargetTls,
      udpIdleMs: options.udpIdleMs,
    });
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
    return new Promise<Welcome>((resolve, reject) => {
      const onConnected = (welcome: Welcome) => {
        this.off('stopped', onStopped);
        resolve(welcome);
      };
      const onStopped = (err: TunnelRefusedError | null) => {
        this.off('connected', onConnected);
        reject(err ?? new Error('agent stopped before it connected'));
      };
      this.once('connected', onConnected);
      this.once('stopped', onStopped);
      this.loop = this.run();
    });
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
    if (this.o.transport === 'ws') return this.connectWebSocket();
    const raw = await this.connectRaw();
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
    return this.connectWebSocket();
  }

  /** A promise for one attempt, with the state its handshake and session share. */
  private attempt<T>(run: (state: AttemptState, resolve: (value: T | Outcome) => void) => void): Promise<T | Outcome> {
    return new Promise((resolve) => {
      let settled = false;
      const state: AttemptState = {
        welcomed: false,
        connectedAt: 0,
        lastError: '',
        goaway: null,
        finish: (outcome) => {
          if (settled) return;
          settled = true;
          resolve(outcome);
        },
      };
      run(state, (value) => {
        if (settled) return;
        settled = true;
        resolve(value);
      });
    });
  }

  /**
   * The raw transport: `GET /_edge/tunnel` with `Upgrade: edge-tunnel/2`, then one length-prefixed JSON frame each
   * way on the socket, then HTTP/2 on the socket itself. Resolves Unsupported when the upgrade gets any answer but
   * 101 `edge-tunnel/2`, or none once connected (a proxy that drops what it does not know), so auto falls back.
   */
  private connectRaw(): Promise<Outcome | Unsupported> {
    return this.attempt<Unsupported>((state, resolve) => {
      const url = this.o.url;
      const secure = url.protocol === 'wss:';
      const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
      const retry = (reason: string) => state.finish({ reason, healthy: false, connected: false });
      let reached = false; // TCP (and TLS) up and the request sent: a silence now says something about the path
      let upgraded = false;
      const options: https.RequestOptions = {
        host,
        port: url.port || (secure ? 443 : 80),
        path: url.pathname,
        method: 'GET',
        agent: false,
        headers: { connection: 'Upgrade', upgrade: RAW_UPGRADE_TOKEN, 'user-agent': this.o.client },
        ...(secure ? (this.o.edgeTls ?? {}) : {}),
      };
      const req = (secure ? https : http).request(options);
      this.abort = () => req.destroy();
      const dialTimer = setTimeout(() => {
        if (reached) resolve({ unsupported: `no answer to the ${RAW_UPGRADE_TOKEN} upgrade within ${this.o.handshakeTimeoutMs} ms` });
        else retry(`could not connect within ${this.o.handshakeTimeoutMs} ms`);
        req.destroy();
      }, this.o.handshakeTimeoutMs);
      req.once('socket', (socket: Socket) => {
        socket.once(secure ? 'secureConnect' : 'connect', () => (reached = true));
      });
      req.on('error', (err) => {
        if (upgraded) return;
        clearTimeout(dialTimer);
        if (reached) resolve({ unsupported: `the connection closed without an answer to the ${RAW_UPGRADE_TOKEN} upgrade (${err.message})` });
        else retry(err.message);
      });
      req.once('response', (res) => {
        clearTimeout(dialTimer);
        res.resume();
        req.destroy();
        resolve({ unsupported: `answered HTTP ${res.statusCode} to the ${RAW_UPGRADE_TOKEN} upgrade`, status: res.statusCode });
      });
      req.once('upgrade', (res, socket: Socket, head: Buffer) => {
        clearTimeout(dialTimer);
        upgraded = true;
        if (!asksForRawTunnel(res.headers.upgrade)) {
          socket.destroy();
          return resolve({ unsupported: `answered 101 to ${JSON.stringify(res.headers.upgrade ?? '')} instead of ${RAW_UPGRADE_TOKEN}` });
        }
        this.abort = () => socket.destroy();
        socket.on('error', (err) => (state.lastError = err.message));
        socket.once('close', () => {
          clearTimeout(replyTimer);
          // After the welcome the HTTP/2 session's close decides; before it, no refusal frame came.
          if (!state.welcomed) retry(state.lastError || 'the connection closed before the welcome');
        });
        // HTTP/2 takes the socket only once this write is done (see the edge's TunnelServer: over TLS, a write
        // still queued completes into Node's HTTP/2 session, which aborts the process on a write it did not issue).
        let helloWritten = false;
        let afterHello: (() => void) | null = null;
        socket.write(encodeHandshakeFrame(JSON.stringify(this.hello('raw'))), () => {
          helloWritten = true;
          afterHello?.();
        });
        const replyTimer = setTimeout(() => {
          state.lastError = `no answer to the hello within ${this.o.handshakeTimeoutMs} ms`;
          stopReading();
          socket.destroy();
        }, this.o.handshakeTimeoutMs);
        const stopReading = readHandshakeFrame(socket, head, MAX_REPLY_BYTES, (result) => {
          clearTimeout(replyTimer);
          if (!result.ok) {
            state.lastError = `invalid answer from the edge: ${result.message}`;
            return void socket.destroy();
          }
          const reply = () => {
            if (socket.destroyed) return;
            this.onReply(state, result.frame, 'raw', () => {
              // The edge's HTTP/2 preface may have come in the same read as the welcome: back into the socket's
              // buffer, where Node's session reads it first.
              if (result.rest.length > 0) socket.unshift(result.rest);
              return openRawLink(socket);
            });
          };
          if (helloWritten) reply();
          else afterHello = reply;
        });
      });
      req.end();
    });
  }

  /** The WebSocket transport: one text frame each way, then HTTP/2 in binary messages (openTunnelStream). */
  private connectWebSocket(): Promise<Outcome> {
    return this.attempt<never>((state) => {
      const retry = (reason: string) => state.finish({ reason, healthy: false, connected: false });
      // The subprotocol marks the upgrade as an agent's on any host name (docs/tunnels.md "Where agents connect").
      const ws = new WebSocket(this.o.url, [TUNNEL_SUBPROTOCOL], this.o.wsOptions);
      this.abort = () => ws.terminate();
      let replyTimer: NodeJS.Timeout | undefined;

      ws.on('error', (err) => {
        state.lastError = err.message;
      });
      ws.once('unexpected-response', (req, res) => {
        const status = res.statusCode ?? 0;
        res.resume();
        req.destroy();
        // A 4xx to the upgrade means this URL is no tunnel endpoint (a wrong --edge): retrying cannot help.
        if (status >= 400 && status < 500 && status !== 408 && status !== 429) {
          state.finish({ fatal: new TunnelRefusedError('not_a_tunnel_endpoint', `${this.o.url.href} answered HTTP ${status} to the tunnel upgrade; check --edge`) });
        } else {
          retry(`the edge answered HTTP ${status} to the tunnel upgrade`);
        }
      });
      ws.once('open', () => {
        ws.send(JSON.stringify(this.hello('ws')));
        replyTimer = setTimeout(() => {
          state.lastError = `no answer to the hello within ${this.o.handshakeTimeoutMs} ms`;
          ws.terminate();
        }, this.o.handshakeTimeoutMs);
      });
      ws.once('message', (data, isBinary) => {
        clearTimeout(replyTimer);
        if (isBinary) {
          state.lastError = 'invalid answer from the edge: binary frame before the welcome';
          return void ws.terminate();
        }
        // Synchronously, inside this handler: the edge's HTTP/2 preface may be in the same read as the welcome.
        this.onReply(state, data as Buffer, 'ws', () =>
          openTunnelStream(ws, (problem) => {
            state.lastError = problem;
            ws.terminate();
          }),
        );
      });
      ws.once('close', (code) => {
        clearTimeout(replyTimer);
        if (state.welcomed) return; // the HTTP/2 session's close decides (openTunnelStream guarantees it comes)
        const refusal = refusalForCloseCode(code);
        if (refusal && !REFUSALS[refusal].retry) {
          state.finish({ fatal: new TunnelRefusedError(refusal, `the edge closed the connection with code ${code} (${refusal})`, code) });
        } else {
          retry(state.lastError || `the connection closed before the welcome (code ${code})`);
        }
      });
    });
  }

  /** Data connections are offered on the raw transport only: a network that passes only WebSockets drops them. */
  private hello(transport: TunnelTransport): Hello {
    return {
      type: 'hello',
      version: PROTOCOL_VERSION,
      api_key: this.o.apiKey,
      ...(this.endpointUuid !== undefined ? { endpoint: this.endpointUuid } : {}),
      protocol: this.o.protocol,
      agent_id: this.o.agentId,
      tags: this.o.tags,
      client: this.o.client,
      ...(transport === 'raw' && this.o.dataSpares > 0
        ? { data_connections: this.o.hostHeader !== undefined ? { host_header: this.o.hostHeader } : {} }
        : {}),
    };
  }

  /**
   * The edge's answer to the hello, on either transport. A refusal ends the attempt; a welcome opens the link
   * (synchronously: the edge's HTTP/2 bytes follow the welcome) and serves HTTP/2 on it until it closes.
   */
  private onReply(state: AttemptState, data: Buffer, transport: TunnelTransport, openLink: () => TunnelLink): void {
    const reply = parseEdgeReply(data);
    if (!reply.ok) {
      state.lastError = `invalid answer from the edge: ${reply.message}`;
      return void this.abort?.();
    }
    if (reply.value.type === 'refused') {
      const { code, message } = reply.value;
      // The frame is the authoritative reason (the WebSocket close code that follows only repeats it).
      if (isRetryableRefusal(code)) state.finish({ reason: `refused: ${code}: ${message}`, healthy: false, connected: false });
      else state.finish({ fatal: new TunnelRefusedError(code, message) });
      return void this.abort?.();
    }
    state.welcomed = true;
    state.connectedAt = performance.now();
    const link = openLink();
    const session = acceptTunnelServer(link, this.o.tuning);
    this.session = session;
    this.abort = () => link.terminate();
    session.on('stream', (stream, headers) => {
      stream.on('error', (err) => this.logger.debug({ err: err.message }, 'stream error'));
      try {
        if (headers[':method'] === 'CONNECT') return this.connectStream(stream, headers);
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
    const grant = reply.value.data_connections;
    const dataConnections =
      grant !== undefined && transport === 'raw' && this.o.dataSpares > 0
        ? new AgentDataConnections({
            url: this.o.url,
            edgeTls: this.o.edgeTls,
            grant,
            spares: Math.min(this.o.dataSpares, grant.max),
            target: this.o.target,
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

    const welcome = reply.value;
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
export async function startAgent(options: AgentOptions): Promise<Agent> {
  const agent = new Agent(options);
  await agent.start();
  return agent;
}
