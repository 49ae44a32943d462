// Dedicated TCP/UDP ports: one listener per port an endpoint was assigned, carrying visitor traffic to that endpoint's
// tcp or udp agents over CONNECT streams (raw bytes for TCP, length-prefixed datagrams for UDP; docs/tunnels.md).
import dgram from 'node:dgram';
import net from 'node:net';
import http2, { type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import type { Logger } from '../shared/log.ts';
import type { EndpointConfig } from '../shared/snapshot.ts';
import { DatagramDecoder, encodeDatagram } from '../shared/tunnel/datagram.ts';
import { resetSocket } from '../shared/tunnel/reset.ts';
import type { EdgeConfig } from './config.ts';
import type { AgentSession, TunnelRegistry } from './tunnels/registry.ts';

const { NGHTTP2_CANCEL, NGHTTP2_CONNECT_ERROR, NGHTTP2_NO_ERROR } = http2.constants;

export type PortProtocol = 'tcp' | 'udp';

/** One open listener, as reported in the edge's heartbeat (shared/presence.ts `EdgeHeartbeat.ports`). */
export interface OpenPort {
  endpoint: string;
  protocol: PortProtocol;
  port: number;
}

export interface DedicatedPortsOptions {
  config: EdgeConfig;
  registry: TunnelRegistry;
  /** Address every dedicated listener binds (the edge's bindHost). */
  host: string;
  logger: Logger;
  /** Called when the set of open ports changed (a bind succeeded, a listener closed): the edge re-reports presence. */
  onChange?: () => void;
  /** Time an agent has to answer a CONNECT with 200 before the visitor's connection is dropped (default 10 s). */
  connectTimeoutMs?: number;
  /** A UDP flow with no datagram either way for this long is ended (default 2 min, the agent's own default). */
  udpIdleMs?: number;
  /** Concurrent UDP flows per port; datagrams that would open more are dropped (default 10,000). */
  maxUdpFlows?: number;
  /** Framed datagrams queued on one flow's stream before further ones are dropped (default 1 MiB). */
  udpQueueBytes?: number;
  /** Bind retries back off from this delay, doubling up to `bindRetryMaxMs` (defaults 250 ms → 30 s). */
  bindRetryMs?: number;
  bindRetryMaxMs?: number;
}

type Settings = Required<Omit<DedicatedPortsOptions, 'onChange'>> & { onChange: () => void };

/** Statuses the HTTP pipeline refuses too (`endpoint_disabled`): the port stays held, but carries nothing. */
function serving(endpoint: EndpointConfig | undefined): endpoint is EndpointConfig {
  return endpoint !== undefined && endpoint.status !== 'disabled' && endpoint.status !== 'error';
}

function portOf(endpoint: EndpointConfig | null, protocol: PortProtocol): number | null {
  if (!endpoint) return null;
  return protocol === 'tcp' ? endpoint.dedicated_tcp_port : endpoint.dedicated_udp_port;
}

/**
 * The next available session of `endpoint` speaking `protocol`, round-robin through `cursor`. registry.pick() knows
 * tags and agent ids but not protocols, and an http agent must never receive raw TCP, so the choice is made here.
 * Runs once per TCP connection or UDP flow, not per packet, so copying the endpoint's short session list is fine.
 */
function pickSession(registry: TunnelRegistry, endpoint: string, protocol: PortProtocol, cursor: { next: number }): AgentSession | null {
  const sessions = registry.sessions(endpoint);
  const n = sessions.length;
  for (let i = 0; i < n; i++) {
    const index = (cursor.next + i) % n;
    const s = sessions[index];
    if (s.available && s.protocol === protocol) {
      cursor.next = (index + 1) % n;
      return s;
    }
  }
  return null;
}

/** Opens a CONNECT stream on the next matching session; a session that began draining since it was listed is skipped. */
function openStream(
  settings: Settings,
  endpoint: EndpointConfig,
  protocol: PortProtocol,
  port: number,
  cursor: { next: number },
): { session: AgentSession; stream: ClientHttp2Stream } | null {
  const tried = new Set<AgentSession>();
  for (;;) {
    const session = pickSession(settings.registry, endpoint.uuid, protocol, cursor);
    if (!session || tried.has(session)) return null;
    tried.add(session);
    try {
      // The agent only logs :authority and dials its own target: the name and port the visitor reached.
      return { session, stream: session.connect(`${endpoint.hostname}:${port}`) };
    } catch {
      // SessionUnavailableError: drained between listing and use; try the next one.
    }
  }
}

/** One bound (or binding) port of one endpoint. */
abstract class PortListener {
  /** True while the port is bound and accepting. */
  bound = false;
  protected closed = false;
  protected readonly cursor = { next: 0 };
  private attempt = 0;
  private retry: NodeJS.Timeout | null = null;

  constructor(
    readonly endpoint: string,
    readonly protocol: PortProtocol,
    readonly port: number,
    protected readonly settings: Settings,
    protected readonly log: Logger,
  ) {}

  /** Starts binding; failures (EADDRINUSE while another process or a closing listener holds the port) retry with backoff. */
  open(): void {
    if (this.closed) return;
    this.bind((err) => {
      if (this.closed) return;
      if (!err) {
        this.attempt = 0;
        this.bound = true;
        this.log.info({ endpoint: this.endpoint, protocol: this.protocol, port: this.port }, 'dedicated port open');
        this.settings.onChange();
        return;
      }
      const delay = Math.min(this.settings.bindRetryMaxMs, this.settings.bindRetryMs * 2 ** this.attempt++);
      this.log.warn({ endpoint: this.endpoint, protocol: this.protocol, port: this.port, err: err.message, code: err.code, retry_in_ms: delay }, 'dedicated port could not be bound; retrying');
      this.retry = setTimeout(() => {
        this.retry = null;
        this.open();
      }, delay);
      this.retry.unref();
    });
  }

  /**
   * Stops listening at once (the heartbeat stops listing the port immediately, so the worker never sees a port
   * that is going away). `cut` also ends live TCP connections; otherwise they run until either side closes.
   */
  close(cut: boolean): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      if (this.retry) clearTimeout(this.retry);
      const wasBound = this.bound;
      this.bound = false;
      this.unbind();
      if (wasBound) {
        this.log.info({ endpoint: this.endpoint, protocol: this.protocol, port: this.port }, 'dedicated port closed');
        this.settings.onChange();
      }
    }
    if (cut) this.cut();
    return this.idle();
  }

  /** Ends every live connection or flow (endpoint deleted or disabled, or shutdown past its grace). */
  abstract cut(): void;
  /** Resolves when no connection or flow is left. */
  abstract idle(): Promise<void>;
  protected abstract bind(done: (err: NodeJS.ErrnoException | null) => void): void;
  protected abstract unbind(): void;
}

class TcpListener extends PortListener {
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  private drained: (() => void) | null = null;

  protected bind(done: (err: NodeJS.ErrnoException | null) => void): void {
    // allowHalfOpen: a visitor's FIN becomes END_STREAM while bytes still flow back (RFC 9113 §8.5); keepAlive
    // finds visitors that vanished without a FIN, which would otherwise hold a stream open for good.
    const server = net.createServer({ allowHalfOpen: true, noDelay: true, keepAlive: true, keepAliveInitialDelay: 60_000 }, (socket) => this.accept(socket));
    const onError = (err: NodeJS.ErrnoException) => {
      server.close();
      done(err);
    };
    server.once('error', onError);
    server.listen({ port: this.port, host: this.settings.host }, () => {
      server.off('error', onError);
      if (this.closed) return void server.close();
      server.on('error', (err) => this.log.warn({ err, port: this.port }, 'dedicated tcp listener error'));
      this.server = server;
      done(null);
    });
  }

  protected unbind(): void {
    this.server?.close();
    this.server = null;
  }

  cut(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  idle(): Promise<void> {
    if (this.sockets.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const previous = this.drained;
      this.drained = () => {
        previous?.();
        resolve();
      };
    });
  }

  private forget(socket: net.Socket): void {
    if (this.sockets.delete(socket) && this.sockets.size === 0 && this.drained) {
      const drained = this.drained;
      this.drained = null;
      drained();
    }
  }

  private accept(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.once('close', () => this.forget(socket));
    socket.on('error', () => {}); // handled through 'close' below; an unhandled 'error' would crash the edge
    const endpoint = this.settings.config.endpoint(this.endpoint);
    // No agent (or a disabled endpoint): close at once, so the visitor's client fails fast instead of hanging.
    const opened = serving(endpoint) ? openStream(this.settings, endpoint, 'tcp', this.port, this.cursor) : null;
    if (!opened) return void socket.destroy();
    const { stream } = opened;

    // The socket is not read until the tunnel is up: early bytes wait in its buffer, then TCP backpressure holds
    // the visitor, so nothing is lost and nothing piles up.
    let established = false;
    const timer = setTimeout(() => {
      if (!stream.closed) stream.close(NGHTTP2_CANCEL);
      socket.destroy();
    }, this.settings.connectTimeoutMs);
    timer.unref();

    stream.on('error', () => {}); // reported by 'close' with its rstCode
    stream.once('response', (headers: IncomingHttpHeaders) => {
      clearTimeout(timer);
      if (Number(headers[':status']) !== 200) {
        // The agent could not reach its target (502 with a reason, docs/tunnels.md): the visitor sees a close.
        this.log.debug({ endpoint: this.endpoint, status: headers[':status'] }, 'agent refused a dedicated-port connection');
        stream.close(NGHTTP2_CANCEL);
        return void socket.destroy();
      }
      if (socket.destroyed) return void stream.close(NGHTTP2_CANCEL);
      established = true;
      // pipe() both ways: each side's backpressure stops the other reading; HTTP/2 flow control carries it to the
      // agent's local socket. Each end() is a FIN one way only.
      socket.pipe(stream);
      stream.pipe(socket);
    });
    socket.once('close', (hadError) => {
      clearTimeout(timer);
      if (stream.closed || stream.destroyed) return;
      // RFC 9113 §8.5: a TCP error is RST_STREAM CONNECT_ERROR; a visitor gone before the tunnel was up cancels.
      stream.close(hadError && established ? NGHTTP2_CONNECT_ERROR : NGHTTP2_CANCEL);
    });
    stream.once('close', () => {
      clearTimeout(timer);
      if (socket.destroyed) return;
      // RFC 9113 §8.5: a reset stream is answered with a TCP RST, so the visitor sees an abort, not a clean end.
      if (!established || stream.rstCode !== NGHTTP2_NO_ERROR) resetSocket(socket);
      else socket.destroySoon(); // flush what the agent sent, then close
    });
  }
}

interface Flow {
  session: AgentSession;
  stream: ClientHttp2Stream;
}

class UdpListener extends PortListener {
  private socket: dgram.Socket | null = null;
  private readonly flows = new Map<string, Flow>();
  private dropped = 0;
  private lastDropLog = 0;

  protected bind(done: (err: NodeJS.ErrnoException | null) => void): void {
    const socket = dgram.createSocket(net.isIP(this.settings.host) === 6 ? 'udp6' : 'udp4');
    const onError = (err: NodeJS.ErrnoException) => {
      try {
        socket.close();
      } catch {
        // a socket whose bind failed may already count as closed
      }
      done(err);
    };
    socket.once('error', onError);
    socket.bind(this.port, this.settings.host, () => {
      socket.off('error', onError);
      if (this.closed) return void socket.close();
      socket.on('error', (err) => this.log.warn({ err, port: this.port }, 'dedicated udp socket error'));
      socket.on('message', (message, rinfo) => this.receive(message, rinfo));
      this.socket = socket;
      done(null);
    });
  }

  protected unbind(): void {
    this.socket?.close();
    this.socket = null;
    // Replies can only leave from the socket the visitor wrote to; with it gone a flow has nothing left to do.
    this.cut();
  }

  cut(): void {
    for (const flow of this.flows.values()) flow.stream.close(NGHTTP2_CANCEL);
    this.flows.clear();
  }

  idle(): Promise<void> {
    return Promise.resolve();
  }

  /**
   * Ends the flows carried by a session that drains (agent stopping, replaced, edge closing it). A TCP connection
   * has a natural end and may finish on a draining session; a UDP flow has none and would hold the agent's
   * shutdown for its whole idle time. The visitor's next datagram opens a new flow on another agent.
   */
  endFlowsOf(session: AgentSession): void {
    for (const [key, flow] of this.flows) {
      if (flow.session !== session) continue;
      this.flows.delete(key);
      flow.stream.close(NGHTTP2_NO_ERROR);
    }
  }

  private drop(reason: string, rinfo: dgram.RemoteInfo): void {
    this.dropped++;
    // Under a flood this runs per datagram: log at most once a second, with the running count.
    const now = Date.now();
    if (now - this.lastDropLog < 1_000) return;
    this.lastDropLog = now;
    this.log.debug({ endpoint: this.endpoint, port: this.port, reason, from: `${rinfo.address}:${rinfo.port}`, dropped: this.dropped }, 'udp datagram dropped');
  }

  private receive(message: Buffer, rinfo: dgram.RemoteInfo): void {
    // Unique per visitor: the port never contains ':', so the last one splits address and port unambiguously.
    const key = `${rinfo.address}:${rinfo.port}`;
    let flow = this.flows.get(key);
    if (flow && (flow.stream.destroyed || flow.stream.writableEnded)) {
      // Ended by the agent (idle, reset) but its 'close' has not run yet: this datagram starts a new flow.
      this.flows.delete(key);
      flow = undefined;
    }
    if (!flow) {
      const endpoint = this.settings.config.endpoint(this.endpoint);
      if (!serving(endpoint)) return this.drop('endpoint not serving', rinfo);
      // Each flow holds a stream and an agent-side socket; a spoofed-source flood must not exhaust either. New
      // flows are refused rather than old ones evicted, so established visitors keep working through a flood.
      if (this.flows.size >= this.settings.maxUdpFlows) return this.drop('flow table full', rinfo);
      const opened = openStream(this.settings, endpoint, 'udp', this.port, this.cursor);
      if (!opened) return this.drop('no udp agent', rinfo);
      flow = this.startFlow(key, opened.session, opened.stream, rinfo);
    }
    // Datagram semantics: a stream the agent reads slowly drops datagrams instead of buffering them without bound.
    // Writing before the 200 is fine: the agent reads them once its local socket is up, or the flow fails whole.
    if (flow.stream.writableLength > this.settings.udpQueueBytes) return this.drop('flow congested', rinfo);
    flow.stream.write(encodeDatagram(message));
  }

  private startFlow(key: string, session: AgentSession, stream: ClientHttp2Stream, rinfo: dgram.RemoteInfo): Flow {
    const flow: Flow = { session, stream };
    this.flows.set(key, flow);
    const { address, port } = rinfo;
    stream.on('error', () => {});
    stream.once('response', (headers: IncomingHttpHeaders) => {
      if (Number(headers[':status']) !== 200) {
        this.log.debug({ endpoint: this.endpoint, status: headers[':status'] }, 'agent refused a udp flow');
        return void stream.close(NGHTTP2_CANCEL);
      }
      // Every reply on this stream goes back to the one visitor address that opened it.
      const decoder = new DatagramDecoder((payload) => {
        this.socket?.send(payload, port, address, () => {}); // send errors (unreachable visitor) lose one datagram
      });
      stream.on('data', (chunk: Buffer) => decoder.push(chunk));
      stream.once('end', () => stream.end()); // the agent ended its side (its own idle timer): end ours too
    });
    // One timer per stream, reset by Node on every read and write: no datagram either way for udpIdleMs ends it.
    stream.setTimeout(this.settings.udpIdleMs, () => stream.close(NGHTTP2_NO_ERROR));
    stream.once('close', () => {
      // The next datagram from this visitor opens a fresh flow (possibly to another agent).
      if (this.flows.get(key) === flow) this.flows.delete(key);
    });
    return flow;
  }
}

/**
 * Keeps one listener per dedicated port in the edge's config, following the config's `endpoint` events:
 * assigned → bind (retrying while the port is busy); cleared or changed → stop listening, live TCP connections run
 * on to their natural end, UDP flows end; endpoint deleted → stop listening and cut everything.
 */
export class DedicatedPorts {
  private readonly settings: Settings;
  private readonly log: Logger;
  /** `${protocol}:${port}` → listener. The feed makes each port belong to at most one endpoint at a time. */
  private readonly listeners = new Map<string, PortListener>();
  /** endpoint uuid → its listeners, so a change or a disconnect touches that endpoint's ports only, not every port. */
  private readonly owned = new Map<string, Set<PortListener>>();
  /** Listeners closed without cutting, whose TCP connections are still running; cut at shutdown. */
  private readonly retired = new Set<PortListener>();
  private started = false;
  private stopped = false;
  private readonly onEndpoint = (uuid: string, next: EndpointConfig | null, previous: EndpointConfig | null) => this.apply(uuid, next, previous);
  private readonly onDisconnect = (session: AgentSession) => {
    if (session.protocol !== 'udp') return;
    for (const l of this.owned.get(session.endpoint.uuid) ?? []) if (l instanceof UdpListener) l.endFlowsOf(session);
  };

  constructor(options: DedicatedPortsOptions) {
    this.settings = {
      connectTimeoutMs: 10_000,
      udpIdleMs: 120_000,
      maxUdpFlows: 10_000,
      udpQueueBytes: 1024 * 1024,
      bindRetryMs: 250,
      bindRetryMaxMs: 30_000,
      ...options,
      onChange: options.onChange ?? (() => {}),
    };
    this.log = options.logger.child({ component: 'dedicated-ports' });
  }

  /** Opens the ports of every endpoint already in the config (restored from disk) and follows changes from now on. */
  start(): void {
    if (this.started) return;
    this.started = true;
    this.settings.config.on('endpoint', this.onEndpoint);
    this.settings.registry.on('disconnect', this.onDisconnect);
    for (const endpoint of this.settings.config.endpoints()) this.apply(endpoint.uuid, endpoint, null);
  }

  /** Ports bound right now, for the heartbeat. */
  open(): OpenPort[] {
    const out: OpenPort[] = [];
    for (const l of this.listeners.values()) if (l.bound) out.push({ endpoint: l.endpoint, protocol: l.protocol, port: l.port });
    return out;
  }

  /**
   * Stops every listener at once, lets TCP connections finish for up to `graceMs` (the tunnels drain alongside),
   * then cuts what is left.
   */
  async close(graceMs = 2_000): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.settings.config.off('endpoint', this.onEndpoint);
    this.settings.registry.off('disconnect', this.onDisconnect);
    const all = [...this.listeners.values(), ...this.retired];
    this.listeners.clear();
    this.owned.clear();
    this.retired.clear();
    const idle = Promise.all(all.map((l) => l.close(false)));
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
    await Promise.race([idle, grace]);
    clearTimeout(timer);
    for (const l of all) l.cut();
  }

  /** Follows one endpoint's change: work for its own ports only (at most two), whatever the number of endpoints. */
  private apply(uuid: string, next: EndpointConfig | null, previous: EndpointConfig | null): void {
    if (this.stopped) return;
    // An endpoint without dedicated ports, now or before, is nearly every change: nothing to look at.
    if (!this.owned.has(uuid) && portOf(next, 'tcp') === null && portOf(next, 'udp') === null) return;
    for (const protocol of ['tcp', 'udp'] as const) {
      const want = portOf(next, protocol);
      // Close what this endpoint held on this protocol but no longer wants. Looked up by owner, not by
      // `previous`, because a resync can deliver events in any order (another endpoint may have taken the port).
      for (const l of [...(this.owned.get(uuid) ?? [])]) {
        if (l.protocol !== protocol || l.port === want) continue;
        this.remove(l);
        this.retire(l, next === null);
      }
      if (want === null) continue;
      const current = this.listeners.get(`${protocol}:${want}`);
      if (current?.endpoint === uuid) continue;
      if (current) {
        // The port moved to this endpoint before the previous owner's release reached us (resync order).
        this.remove(current);
        this.retire(current, false);
      }
      this.add(protocol === 'tcp' ? new TcpListener(uuid, protocol, want, this.settings, this.log) : new UdpListener(uuid, protocol, want, this.settings, this.log));
    }
    // A disabled endpoint keeps its ports bound (they stay its reservation) but carries nothing, like HTTP's 503.
    if (next && !serving(next) && serving(previous ?? undefined)) {
      for (const l of this.owned.get(uuid) ?? []) l.cut();
    }
  }

  private add(listener: PortListener): void {
    this.listeners.set(`${listener.protocol}:${listener.port}`, listener);
    let mine = this.owned.get(listener.endpoint);
    if (!mine) this.owned.set(listener.endpoint, (mine = new Set()));
    mine.add(listener);
    listener.open();
  }

  private remove(listener: PortListener): void {
    this.listeners.delete(`${listener.protocol}:${listener.port}`);
    const mine = this.owned.get(listener.endpoint);
    mine?.delete(listener);
    if (mine?.size === 0) this.owned.delete(listener.endpoint);
  }

  private retire(listener: PortListener, cut: boolean): void {
    this.retired.add(listener);
    void listener.close(cut).then(() => this.retired.delete(listener));
  }
}
