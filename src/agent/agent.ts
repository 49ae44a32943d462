// The agent: dials the edge's tunnel WebSocket, says hello, then serves the edge's HTTP/2 streams to the local
// target. It reconnects after any drop with full-jitter backoff and stops only when told to or when refused for good.
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import http2, { type ServerHttp2Session } from 'node:http2';
import { WebSocket, type ClientOptions } from 'ws';
import { createLogger, type Logger } from '../shared/log.ts';
import { MAX_API_KEY_LENGTH } from '../shared/api-keys.ts';
import {
  MAX_AGENT_ID_LENGTH,
  PROTOCOL_VERSION,
  REFUSALS,
  TUNNEL_PATH,
  TUNNEL_PROTOCOLS,
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
  type TunnelTuning,
} from '../shared/tunnel/transport.ts';
import { failStream } from '../shared/tunnel/reset.ts';
import { Backoff } from './backoff.ts';
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
  /** TLS settings for a wss:// (https://) edge, e.g. a private CA. */
  edgeTls?: { ca?: string | Buffer | Array<string | Buffer>; rejectUnauthorized?: boolean };
  /** Reconnect delays: full jitter below a cap doubling from initialMs to maxMs (default 500 ms → 30 s). */
  backoff?: { initialMs?: number; maxMs?: number };
  /** A connection that stayed up this long resets the backoff (default 10 s). */
  healthyAfterMs?: number;
  /** Time for the WebSocket upgrade and again for the edge's answer to the hello (default 10 s). */
  handshakeTimeoutMs?: number;
  /** HTTP/2 PING cadence (default every 20 s, 15 s to answer). */
  keepalive?: Partial<KeepaliveOptions>;
  /** HTTP/2 settings (default DEFAULT_TUNING). */
  tuning?: Partial<TunnelTuning>;
  /** UDP flows idle this long are closed (udp agents). */
  udpIdleMs?: number;
}

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

const AGENT_ID_CHARS = /[^A-Za-z0-9_.:@-]/g;

function defaultAgentId(): string {
  const host = hostname().replace(AGENT_ID_CHARS, '-').replace(/^[^A-Za-z0-9]+/, '').slice(0, 40) || 'agent';
  return `${host}-${randomBytes(4).toString('hex')}`;
}

/**
 * Whether WebSocket masking (RFC 6455 §5.3) can be skipped on this tunnel. Masking exists for browsers: script
 * that controls the bytes a browser sends could otherwise make a transparent proxy that does not understand
 * WebSocket read them as an HTTP request and poison its cache (§10.3). The agent is no browser, but what it sends
 * (HTTP/2 frames of local responses) can echo a visitor's bytes, so the guarantee is kept where an intermediary
 * could read them: plain ws:// to another machine. Over TLS (wss://, every deployed edge) no intermediary sees the
 * bytes, and on loopback there is none. There, an all-zero mask makes ws skip the XOR and the copy it needs for it
 * (an unmasked frame's payload goes out as is), and makes the edge skip unmasking: on 64 KiB messages about 7x
 * less CPU than the JS mask, and half that of the native bufferutil addon (docs/tunnels.md).
 */
export function maskingProtectsNothing(url: URL): boolean {
  const host = url.hostname;
  return url.protocol === 'wss:' || host === 'localhost' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** ws calls this for every frame; the Sender's own 4-byte buffer is left all zero (see maskingProtectsNothing). */
function zeroMask(mask: Buffer): void {
  mask.fill(0);
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
  private ws: WebSocket | null = null;
  private session: ServerHttp2Session | null = null;
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
      wsOptions: Object.freeze({
        perMessageDeflate: false,
        maxPayload: MAX_MESSAGE_BYTES,
        handshakeTimeout: handshakeTimeoutMs,
        followRedirects: false,
        headers: { 'user-agent': client },
        ...(options.edgeTls ?? {}),
        ...(maskingProtectsNothing(url) ? { generateMask: zeroMask } : {}),
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
    if (!this.stopping) {
      this.stopping = true;
      this.wake?.();
      const session = this.session;
      if (session && !session.closed && !session.destroyed) {
        sendGoAway(session, { code: 'agent_stopping', message: 'the agent is stopping' });
        session.close();
        const timer = setTimeout(() => {
          session.destroy();
          this.ws?.terminate();
        }, graceMs);
        timer.unref();
        session.once('close', () => clearTimeout(timer));
      } else {
        this.ws?.terminate();
      }
    }
    await this.loop;
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

  /** One connection, from dial to close. Resolves (never rejects) with what should happen next. */
  private connectOnce(): Promise<Outcome> {
    return new Promise<Outcome>((resolve) => {
      let settled = false;
      let welcomed = false;
      let connectedAt = 0;
      let lastError = '';
      let goaway: GoAwayReason | null = null;
      const finish = (outcome: Outcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(replyTimer);
        resolve(outcome);
      };
      const retry = (reason: string) => finish({ reason, healthy: false, connected: false });

      const ws = new WebSocket(this.o.url, this.o.wsOptions);
      this.ws = ws;
      let replyTimer: NodeJS.Timeout | undefined;

      ws.on('error', (err) => {
        lastError = err.message;
      });
      ws.once('unexpected-response', (req, res) => {
        const status = res.statusCode ?? 0;
        res.resume();
        req.destroy();
        // A 4xx to the upgrade means this URL is no tunnel endpoint (a wrong --edge): retrying cannot help.
        if (status >= 400 && status < 500 && status !== 408 && status !== 429) {
          finish({ fatal: new TunnelRefusedError('not_a_tunnel_endpoint', `${this.o.url.href} answered HTTP ${status} to the tunnel upgrade; check --edge`) });
        } else {
          retry(`the edge answered HTTP ${status} to the tunnel upgrade`);
        }
      });
      ws.once('open', () => {
        const hello: Hello = {
          type: 'hello',
          version: PROTOCOL_VERSION,
          api_key: this.o.apiKey,
          ...(this.endpointUuid !== undefined ? { endpoint: this.endpointUuid } : {}),
          protocol: this.o.protocol,
          agent_id: this.o.agentId,
          tags: this.o.tags,
          client: this.o.client,
        };
        ws.send(JSON.stringify(hello));
        replyTimer = setTimeout(() => {
          lastError = `no answer to the hello within ${this.o.handshakeTimeoutMs} ms`;
          ws.terminate();
        }, this.o.handshakeTimeoutMs);
      });
      ws.once('message', (data, isBinary) => {
        clearTimeout(replyTimer);
        const reply = isBinary ? ({ ok: false, message: 'binary frame before the welcome' } as const) : parseEdgeReply(data as Buffer);
        if (!reply.ok) {
          lastError = `invalid answer from the edge: ${reply.message}`;
          return void ws.terminate();
        }
        if (reply.value.type === 'refused') {
          const { code, message } = reply.value;
          // The edge closes with the matching code; the frame is the authoritative reason.
          if (isRetryableRefusal(code)) retry(`refused: ${code}: ${message}`);
          else finish({ fatal: new TunnelRefusedError(code, message) });
          return;
        }
        welcomed = true;
        connectedAt = performance.now();
        // Synchronously, inside this handler: the edge's HTTP/2 preface may be in the same read as the welcome.
        const link = openTunnelStream(ws, (problem) => {
          lastError = problem;
          ws.terminate();
        });
        const session = acceptTunnelServer(link, this.o.tuning);
        this.session = session;
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
          goaway ??= parseGoAwayReason(opaque);
        });
        session.on('error', (err: Error) => {
          lastError = err.message;
        });
        startKeepalive(session, link, this.o.keepalive, (problem) => {
          lastError = problem;
          session.destroy();
          link.terminate();
        });
        session.once('close', () => {
          this.session = null;
          this.current = null;
          const reason = goaway ? `${goaway.code}: ${goaway.message}` : lastError || 'the tunnel connection closed';
          this.logger.info({ reason }, 'tunnel down');
          this.emit('disconnected', { code: goaway?.code ?? 'connection_lost', message: goaway?.message ?? reason });
          // The edge may end a session for good, e.g. `replaced` by another process with this agent id.
          if (goaway && Object.hasOwn(REFUSALS, goaway.code) && !isRetryableRefusal(goaway.code)) {
            return finish({ fatal: new TunnelRefusedError(goaway.code, goaway.message) });
          }
          finish({ reason, healthy: performance.now() - connectedAt >= this.o.healthyAfterMs, connected: true });
        });

        const welcome = reply.value;
        this.endpointUuid = welcome.endpoint.uuid;
        this.current = welcome;
        this.logger.info({ url: welcome.endpoint.public_url, region: welcome.region, node: welcome.node }, 'tunnel up');
        if (this.stopping) {
          sendGoAway(session, { code: 'agent_stopping', message: 'the agent is stopping' });
          session.close();
          return;
        }
        this.emit('connected', welcome);
      });
      ws.once('close', (code) => {
        this.ws = null;
        clearTimeout(replyTimer);
        if (welcomed) return; // the HTTP/2 session's close decides (openTunnelStream guarantees it comes)
        const refusal = refusalForCloseCode(code);
        if (refusal && !REFUSALS[refusal].retry) {
          finish({ fatal: new TunnelRefusedError(refusal, `the edge closed the connection with code ${code} (${refusal})`, code) });
        } else {
          retry(lastError || `the connection closed before the welcome (code ${code})`);
        }
      });
    });
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
