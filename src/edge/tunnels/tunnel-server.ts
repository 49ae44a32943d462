// Accepts agent tunnels on the edge's public HTTP(S) listener at /_edge/tunnel (only agents' upgrades: isAgentUpgrade), raw (`edge-tunnel/2`) or WebSocket:
// the hello/welcome handshake, then an HTTP/2 client session over the link, registered in the TunnelRegistry.
import type { IncomingMessage, Server as HttpServer } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import { createLogger, type Logger } from '../../shared/log.ts';
import {
  CLOSE_PROTOCOL_ERROR,
  MAX_DATA_CONNECTIONS,
  MAX_HELLO_BYTES,
  PROTOCOL_VERSION,
  LEGACY_AGENT_USER_AGENT,
  TUNNEL_PATH,
  TUNNEL_SUBPROTOCOL,
  parseEdgeReply,
  parseHello,
  refusalCloseCode,
  type Hello,
  type RefusalCode,
  type Refused,
  type TunnelEndpoint,
  type Welcome,
} from '../../shared/tunnel/protocol.ts';
import {
  DEFAULT_KEEPALIVE,
  DEFAULT_TUNING,
  MAX_MESSAGE_BYTES,
  connectTunnelClient,
  openTunnelStream,
  type KeepaliveOptions,
  type TunnelLink,
  type TunnelTuning,
} from '../../shared/tunnel/transport.ts';
import { RAW_UPGRADE_TOKEN, asksForRawTunnel, encodeHandshakeFrame, openRawLink, readHandshakeFrame, type TunnelTransport } from '../../shared/tunnel/raw.ts';
import { DATA_ID_HEADER, DATA_KEY_HEADER, DATA_UPGRADE_TOKEN, asksForDataConnection } from '../../shared/tunnel/data.ts';
import { parseAuthority } from '../http/host.ts';
import { DataConnections } from './data-connections.ts';
import { AgentSession, type DeployGrant, type TunnelCredential, type TunnelRegistry } from './registry.ts';

/** `credential` names the API key the session rests on, so the edge can end it when that key loses its standing. */
export type AuthorizeResult = { ok: true; endpoint: TunnelEndpoint; credential?: TunnelCredential; deploy?: DeployGrant } | { ok: false; code: RefusalCode; message: string };

/**
 * The edge's admission check for one hello: API key, endpoint ownership (or a new ephemeral endpoint when the
 * hello names none), the plan's allowed_regions against this edge's region, the protocol entitlement. It must not
 * throw for a refusal; a thrown error is logged and reaches the agent as a retryable `internal` refusal.
 */
/** What an admitted hello rests on, carried into its session. */
interface Admitted {
  credential?: TunnelCredential;
  deploy?: DeployGrant;
}

export type Authorize = (hello: Hello, remoteAddress: string) => Promise<AuthorizeResult>;

export interface TunnelServerOptions {
  authorize: Authorize;
  registry: TunnelRegistry;
  /** This edge's EDGE_REGION and node id, told to agents in the welcome. */
  region: string;
  node: string;
  logger?: Logger;
  /** Time from the upgrade to a decided hello (authorize included). */
  handshakeTimeoutMs?: number;
  /** Upgrades still in the handshake beyond this many are answered 503 (bounds what slow clients can hold). */
  maxPendingHandshakes?: number;
  /** HTTP/2 PING cadence (default DEFAULT_KEEPALIVE: every 20 s, 15 s to answer). */
  keepalive?: Partial<KeepaliveOptions>;
  /** HTTP/2 settings (default DEFAULT_TUNING). */
  tuning?: Partial<TunnelTuning>;
  /**
   * Data connections granted to each raw-transport http agent that offers them (docs/tunnels.md "Data
   * connections"); 0 grants none, and every request goes over HTTP/2 streams. Default 128.
   */
  maxDataConnections?: number;
  /**
   * Whether a host name (lower-case, no port) is an endpoint this edge serves: a plain WebSocket upgrade to the tunnel
   * path there is the endpoint's, not an agent's (isAgentUpgrade). Omitted: no host is an endpoint's.
   */
  servesEndpoint?: (host: string) => boolean;
}

type Upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

/** One connection in its handshake, as its transport carries the frames. */
interface Handshake {
  transport: TunnelTransport;
  remoteAddress: string;
  /** Sends the refused frame and closes (the WebSocket with `closeCode`). */
  refuse(frame: Refused, closeCode: number): void;
  /** The handshake is decided: stop treating further bytes as a violation. */
  settled(): void;
  /** Sends the welcome and hands over the link HTTP/2 runs on (null when the connection is gone). */
  open(welcome: Welcome, ready: (link: TunnelLink | null) => void): void;
  terminate(): void;
}

export class TunnelServer {
  private readonly authorize: Authorize;
  private readonly registry: TunnelRegistry;
  private readonly region: string;
  private readonly node: string;
  private readonly logger: Logger;
  private readonly handshakeTimeoutMs: number;
  private readonly maxPendingHandshakes: number;
  private readonly keepalive: KeepaliveOptions;
  private readonly tuning: TunnelTuning;
  private readonly wss: WebSocketServer;
  /** Connections still in the handshake; each maps to its refusal function. */
  private readonly handshakes = new Map<Handshake, (code: RefusalCode, message: string) => void>();
  private readonly sessions = new Set<AgentSession>();
  /** Sessions with data connections, by grant id (what a data connection's upgrade names). */
  private readonly grants = new Map<string, AgentSession>();
  /** Data connection sets of sessions this server accepted, until their last connection closed (it may outlive the tunnel). */
  private readonly dataSets = new Set<DataConnections>();
  private readonly maxDataConnections: number;
  private readonly servesEndpoint: (host: string) => boolean;
  private closing = false;

  constructor(options: TunnelServerOptions) {
    if (typeof options.authorize !== 'function') throw new TypeError('TunnelServer needs an authorize(hello, remoteAddress) function');
    if (!options.registry) throw new TypeError('TunnelServer needs a TunnelRegistry');
    for (const key of ['region', 'node'] as const) {
      if (typeof options[key] !== 'string' || options[key].length === 0 || options[key].length > 64) {
        throw new TypeError(`TunnelServer ${key} must be a non-empty string of at most 64 characters, got ${JSON.stringify(options[key])}`);
      }
    }
    const timeout = options.handshakeTimeoutMs ?? 10_000;
    if (!Number.isInteger(timeout) || timeout < 1) throw new RangeError(`TunnelServer handshakeTimeoutMs must be a positive integer, got ${timeout}`);
    const maxPending = options.maxPendingHandshakes ?? 1024;
    if (!Number.isInteger(maxPending) || maxPending < 1) throw new RangeError(`TunnelServer maxPendingHandshakes must be a positive integer, got ${maxPending}`);
    const maxData = options.maxDataConnections ?? 128;
    if (!Number.isInteger(maxData) || maxData < 0 || maxData > MAX_DATA_CONNECTIONS) {
      throw new RangeError(`TunnelServer maxDataConnections must be an integer from 0 to ${MAX_DATA_CONNECTIONS}, got ${maxData}`);
    }
    const keepalive = { ...DEFAULT_KEEPALIVE, ...options.keepalive };
    if (!(keepalive.intervalMs > 0 && keepalive.timeoutMs > 0)) {
      throw new RangeError('TunnelServer keepalive intervalMs and timeoutMs must be positive');
    }
    this.authorize = options.authorize;
    this.registry = options.registry;
    this.region = options.region;
    this.node = options.node;
    this.logger = (options.logger ?? createLogger('silent')).child({ component: 'tunnel-server' });
    this.handshakeTimeoutMs = timeout;
    this.maxPendingHandshakes = maxPending;
    this.maxDataConnections = maxData;
    this.keepalive = Object.freeze({ ...keepalive });
    this.tuning = Object.freeze({ ...DEFAULT_TUNING, ...options.tuning });
    this.servesEndpoint = options.servesEndpoint ?? (() => false);
    this.wss = new WebSocketServer({
      noServer: true,
      // Compressing HTTP/2 frames costs CPU for little, and compression under attacker-chosen plaintext next to
      // secrets is the CRIME/BREACH pattern. Off on both sides.
      perMessageDeflate: false,
      maxPayload: MAX_MESSAGE_BYTES,
      clientTracking: false,
    });
  }

  /**
   * Listens for upgrades on `server`. Requests for other paths are left alone while another 'upgrade' listener
   * exists (the edge's visitor WebSocket forwarding); when this is the only one, they are answered 404 so they
   * do not hang. An edge with its own upgrade router should call handleUpgrade() from it instead.
   * Returns a function that detaches the listener.
   */
  attach(server: HttpServer | HttpsServer): () => void {
    const listener: Upgrade = (req, socket, head) => {
      if (this.handleUpgrade(req, socket, head)) return;
      if (server.listenerCount('upgrade') === 1) rejectUpgrade(socket, 404, 'Not Found');
    };
    server.on('upgrade', listener);
    return () => void server.off('upgrade', listener);
  }

  /** Takes the upgrade if it is an agent's (isAgentUpgrade) and returns true; returns false, touching nothing, otherwise. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    if (!isAgentUpgrade(req, this.servesEndpoint)) return false;
    if (this.closing || this.handshakes.size >= this.maxPendingHandshakes) {
      rejectUpgrade(socket, 503, 'Service Unavailable');
      return true;
    }
    if (asksForDataConnection(req.headers.upgrade)) this.acceptData(req, socket as Socket, head);
    else if (asksForRawTunnel(req.headers.upgrade)) this.acceptRaw(req, socket as Socket, head);
    else this.wss.handleUpgrade(req, socket, head, (ws) => this.acceptWebSocket(ws, req));
    return true;
  }

  /** Agent sessions accepted by this server and still open. */
  get sessionCount(): number {
    return this.sessions.size;
  }

  /**
   * Stops accepting tunnels, refuses handshakes in progress with `shutting_down`, and drains the sessions this
   * server accepted (GOAWAY, streams in flight get `graceMs` to finish). Exchanges in flight on data connections get
   * the same grace: the HTTP/2 session closes as soon as it carries no stream, so they are waited for on their own.
   * Agents reconnect on their own.
   */
  async close(graceMs = 10_000): Promise<void> {
    this.closing = true;
    for (const refuse of [...this.handshakes.values()]) refuse('shutting_down', 'the edge is shutting down');
    const data = [...this.dataSets];
    for (const d of data) d.drain(graceMs);
    await Promise.all([
      ...[...this.sessions].map((s) => s.close({ code: 'shutting_down', message: 'the edge is shutting down' }, graceMs)),
      ...data.map((d) => d.whenClosed()),
    ]);
  }

  /** The WebSocket transport: one text frame each way, then HTTP/2 bytes in binary messages. */
  private acceptWebSocket(ws: WebSocket, req: IncomingMessage): void {
    const remoteAddress = req.socket.remoteAddress ?? 'unknown';
    const log = this.logger.child({ remote: remoteAddress, transport: 'ws' });
    // Anything after the hello and before the welcome is a protocol violation: the agent must wait.
    const early = () => flow.refuse('invalid_hello', 'the agent sent a frame before the welcome');
    const flow = this.begin(
      {
        transport: 'ws',
        remoteAddress,
        refuse: (frame, closeCode) => {
          if (ws.readyState !== WebSocket.OPEN) return void ws.terminate();
          ws.send(JSON.stringify(frame));
          // The close reason is limited to 123 bytes (RFC 6455 §5.5); the code is short and says enough.
          ws.close(closeCode, frame.code);
        },
        settled: () => ws.off('message', early),
        open: (welcome, ready) => {
          if (ws.readyState !== WebSocket.OPEN) return ready(null);
          ws.send(JSON.stringify(welcome));
          // Synchronously after the welcome: the agent's HTTP/2 bytes follow it directly (see openTunnelStream).
          ready(
            openTunnelStream(ws, (problem) => {
              log.warn({ problem }, 'tunnel protocol violation');
              ws.close(CLOSE_PROTOCOL_ERROR, 'protocol_error');
            }),
          );
        },
        terminate: () => ws.terminate(),
      },
      log,
    );
    // ws reports protocol errors (oversized frame, bad opcode) as 'error' and then closes with the matching code.
    ws.on('error', (err) => log.debug({ err: err.message }, 'tunnel socket error'));
    ws.once('close', flow.closed);
    ws.once('message', (data, isBinary) => {
      ws.on('message', early);
      if (isBinary) return flow.refuse('invalid_hello', 'the hello must be a text frame');
      flow.hello(data as Buffer);
    });
  }

  /**
   * The raw transport: 101 to `edge-tunnel/2`, one length-prefixed JSON frame each way, then HTTP/2 on the socket
   * itself (net.Socket, or TLSSocket on the HTTPS listener). Refusals are the frame, then FIN: no close codes.
   */
  private acceptRaw(req: IncomingMessage, socket: Socket, head: Buffer): void {
    const remoteAddress = req.socket.remoteAddress ?? 'unknown';
    const log = this.logger.child({ remote: remoteAddress, transport: 'raw' });
    socket.on('error', (err) => log.debug({ err: err.message }, 'tunnel socket error'));
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${RAW_UPGRADE_TOKEN}\r\n\r\n`);
    let stopReading = () => {};
    const early = () => flow.refuse('invalid_hello', 'the agent sent bytes before the welcome');
    const flow = this.begin(
      {
        transport: 'raw',
        remoteAddress,
        refuse: (frame) => {
          stopReading();
          if (!socket.writable) return void socket.destroy();
          socket.end(encodeHandshakeFrame(JSON.stringify(frame)));
          // Whatever the agent still sends is read and dropped, so the refusal is not lost to a RST; then closed.
          socket.resume();
          const cut = setTimeout(() => socket.destroy(), 2_000);
          cut.unref();
          socket.once('close', () => clearTimeout(cut));
        },
        settled: () => socket.off('data', early),
        open: (welcome, ready) => {
          if (socket.destroyed || !socket.writable) return ready(null);
          // The agent's HTTP/2 bytes that arrive meanwhile wait in the socket's buffer; Node's session reads them.
          socket.pause();
          // HTTP/2 takes the socket only once our own writes are done: over TLS a write still queued in the
          // TLSWrap completes into whichever listener the stream has then, and Node's HTTP/2 session aborts the
          // process on a write it did not issue (node_http2.cc: Assertion failed: is_write_in_progress()).
          socket.write(encodeHandshakeFrame(JSON.stringify(welcome)), (err) => ready(err || socket.destroyed ? null : openRawLink(socket)));
        },
        terminate: () => socket.destroy(),
      },
      log,
    );
    socket.once('close', flow.closed);
    // A FIN before the welcome: the agent gave up (the socket is half-open after an HTTP upgrade).
    socket.once('end', () => {
      flow.closed();
      socket.destroy();
    });
    stopReading = readHandshakeFrame(socket, head, MAX_HELLO_BYTES, (result) => {
      if (!result.ok) return flow.refuse('invalid_hello', `invalid hello: ${result.message}`);
      if (result.rest.length > 0) return flow.refuse('invalid_hello', 'the agent sent bytes before the welcome');
      // Kept reading while the hello is decided: bytes now are a violation, and a FIN must be seen.
      socket.on('data', early);
      socket.resume();
      flow.hello(result.frame);
    });
  }

  /**
   * A data connection for a live session (`edge-tunnel-data/1`, naming the grant and proving its key): 101, then the
   * socket waits as a spare until a request needs it. Decided at once, so it never counts as a pending handshake.
   * An unknown grant and a wrong key get the same 403, so the answer tells nothing about which sessions exist.
   */
  private acceptData(req: IncomingMessage, socket: Socket, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    const id = req.headers[DATA_ID_HEADER];
    const session = typeof id === 'string' ? this.grants.get(id) : undefined;
    const data = session?.data;
    const key = req.headers[DATA_KEY_HEADER];
    if (!session || !data || !data.accepts(typeof key === 'string' ? key : undefined)) return rejectUpgrade(socket, 403, 'Forbidden');
    // The agent speaks only after a request arrives; bytes behind the upgrade are a violation.
    if (head.length > 0) return rejectUpgrade(socket, 400, 'Bad Request');
    if (!session.available) return rejectUpgrade(socket, 503, 'Service Unavailable');
    if (data.size >= data.max) return rejectUpgrade(socket, 429, 'Too Many Requests');
    socket.setTimeout(0);
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${DATA_UPGRADE_TOKEN}\r\n\r\n`);
    if (data.offer(socket) !== 'accepted') socket.destroy();
  }

  /**
   * The handshake both transports share: the timeout, the pending bound, the hello's checks and the decision,
   * then the HTTP/2 session over the link the transport opens. Returns what the transport calls on its events.
   */
  private begin(h: Handshake, log: Logger): { hello(data: Buffer): void; refuse(code: RefusalCode, message: string): void; closed(): void } {
    let settled = false;
    const settle = () => {
      settled = true;
      clearTimeout(timer);
      this.handshakes.delete(h);
      h.settled();
    };
    const refuse = (code: RefusalCode, message: string) => {
      if (settled) return;
      settle();
      log.info({ code, reason: message }, 'tunnel refused');
      h.refuse({ type: 'refused', code, message }, refusalCloseCode(code));
    };
    const timer = setTimeout(() => refuse('handshake_timeout', `no decided hello within ${this.handshakeTimeoutMs} ms`), this.handshakeTimeoutMs);
    this.handshakes.set(h, refuse);
    return {
      refuse,
      closed: () => {
        if (!settled) settle();
      },
      hello: (data) => {
        if (settled) return;
        const parsed = parseHello(data);
        if (!parsed.ok) return refuse('invalid_hello', `invalid hello: ${parsed.message}`);
        const hello = parsed.value;
        if (hello.version !== PROTOCOL_VERSION) {
          return refuse('unsupported_version', `this edge speaks tunnel protocol version ${PROTOCOL_VERSION}, the agent sent version ${hello.version}; upgrade the agent`);
        }
        void this.decide(hello, h.remoteAddress).then((result) => {
          if (settled) return; // timed out, shut down or disconnected meanwhile
          if (!result.ok) return refuse(result.code, result.message);
          settle();
          // A deploying agent's target moves with each release, so it forwards every request itself (no splice).
          const data = result.admitted.deploy ? undefined : this.grantData(h, hello);
          if (data) result.welcome.data_connections = data.grant;
          this.open(h, hello, result.welcome, result.admitted, log, data);
        });
      },
    };
  }

  private async decide(
    hello: Hello,
    remoteAddress: string,
  ): Promise<{ ok: true; welcome: Welcome; admitted: Admitted } | { ok: false; code: RefusalCode; message: string }> {
    let result: AuthorizeResult;
    try {
      result = await this.authorize(hello, remoteAddress);
    } catch (err) {
      this.logger.error({ err }, 'tunnel authorize failed');
      return { ok: false, code: 'internal', message: 'the edge could not check this agent; it will retry' };
    }
    if (!result.ok) return result;
    const welcome: Welcome = { type: 'welcome', endpoint: result.endpoint, region: this.region, node: this.node };
    // The agent validates strictly; a welcome it would reject is the edge's bug, so it is caught here.
    const checked = parseEdgeReply(JSON.stringify(welcome));
    if (!checked.ok) {
      this.logger.error({ problem: checked.message }, 'authorize returned an endpoint the protocol cannot carry');
      return { ok: false, code: 'internal', message: 'the edge produced an invalid welcome' };
    }
    return { ok: true, welcome, admitted: { credential: result.credential, deploy: result.deploy } };
  }

  /**
   * Data connections for a session that may have them: raw transport (a network that passes only WebSockets would
   * not pass them either), an http agent that offered them, and an edge that grants any.
   */
  private grantData(h: Handshake, hello: Hello): DataConnections | undefined {
    if (h.transport !== 'raw' || hello.protocol !== 'http' || hello.data_connections === undefined || this.maxDataConnections === 0) return undefined;
    return new DataConnections({
      max: this.maxDataConnections,
      hostHeader: hello.data_connections.host_header,
      onCut: (open) => this.logger.warn({ remote: h.remoteAddress, agent: hello.agent_id, open }, 'data connections still carrying exchanges cut at the end of the grace'),
    });
  }

  private open(h: Handshake, hello: Hello, welcome: Welcome, admitted: Admitted, log: Logger, data?: DataConnections): void {
    if (this.closing) return void h.terminate();
    h.open(welcome, (link) => {
      if (!link || this.closing) return void h.terminate();
      this.serve(h, link, hello, welcome, admitted, log, data);
    });
  }

  private serve(
    h: Handshake,
    link: TunnelLink,
    hello: Hello,
    welcome: Welcome,
    admitted: Admitted,
    log: Logger,
    data: DataConnections | undefined,
  ): void {
    const h2 = connectTunnelClient(link, this.tuning);
    const session = new AgentSession(
      {
        agentId: hello.agent_id,
        tags: hello.tags,
        protocol: hello.protocol,
        endpoint: welcome.endpoint,
        remoteAddress: h.remoteAddress,
        client: hello.client,
        credential: admitted.credential,
        transport: h.transport,
        data,
        deploy: admitted.deploy,
      },
      h2,
      link,
      this.keepalive,
    );
    const slog = log.child({ session: session.id, agent: session.agentId, endpoint: session.endpoint.uuid });
    this.sessions.add(session);
    if (data) {
      this.grants.set(data.id, session);
      this.dataSets.add(data);
      void data.whenClosed().then(() => this.dataSets.delete(data));
    }
    session.once('close', (reason) => {
      this.sessions.delete(session);
      if (data) this.grants.delete(data.id);
      // Data connections still carrying an exchange finish within their grace (DataConnections.drain).
      slog.info({ code: reason.code, reason: reason.message, dataConnectionsOpen: data?.size ?? 0 }, 'tunnel closed');
    });
    slog.info(
      { protocol: session.protocol, transport: session.transport, tags: session.tags, client: session.client, dataConnections: data?.max ?? 0 },
      'tunnel open',
    );
    this.registry.add(session);
  }
}

function isTunnelPath(url: string | undefined): boolean {
  if (!url) return false;
  const q = url.indexOf('?');
  return (q === -1 ? url : url.slice(0, q)) === TUNNEL_PATH;
}

/** Whether a WebSocket upgrade offers `protocol` in Sec-WebSocket-Protocol (a comma list, RFC 6455 §11.3.4). */
function offersSubprotocol(req: IncomingMessage, protocol: string): boolean {
  const offered = req.headers['sec-websocket-protocol'];
  if (offered === undefined) return false;
  for (const p of offered.split(',')) if (p.trim() === protocol) return true;
  return false;
}

/**
 * Whether an upgrade to the tunnel path is an agent's, so the edge takes it before any endpoint lookup
 * (docs/tunnels.md "Where agents connect"). Plain requests never are: a GET or POST to /_edge/tunnel reaches the
 * endpoint's service like any path. Upgrades are an agent's when they
 * - ask for an agent transport by its upgrade token (`edge-tunnel/2`, a data connection), which no application
 *   negotiates: on any host;
 * - are a WebSocket offering the `edge-tunnel` subprotocol: on any host;
 * - are a WebSocket on a host that is no endpoint's (the edge's own name or address, what --edge names);
 * - are a WebSocket from an agent of the release before the subprotocol (its User-Agent), for one release.
 * Any other upgrade (a customer application's WebSocket to its own /_edge/tunnel) goes to the endpoint.
 */
export function isAgentUpgrade(req: IncomingMessage, servesEndpoint: (host: string) => boolean): boolean {
  if (!isTunnelPath(req.url)) return false;
  const upgrade = req.headers.upgrade;
  if (asksForRawTunnel(upgrade) || asksForDataConnection(upgrade)) return true;
  if (upgrade === undefined || upgrade.trim().toLowerCase() !== 'websocket') return false;
  if (offersSubprotocol(req, TUNNEL_SUBPROTOCOL)) return true;
  const authority = req.headers.host === undefined ? null : parseAuthority(req.headers.host);
  if (authority === null || !servesEndpoint(authority.host)) return true;
  return req.headers['user-agent']?.startsWith(LEGACY_AGENT_USER_AGENT) === true;
}

function rejectUpgrade(socket: Duplex, status: number, text: string): void {
  if (socket.writable) {
    socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: ${text.length + 1}\r\n\r\n${text}\n`);
  }
  socket.once('error', () => {});
  socket.once('finish', () => socket.destroy());
}
