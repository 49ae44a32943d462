// What every dedicated-port listener shares (docs/tunnels.md): binding with retries, closing, and opening a CONNECT
// stream to one of the endpoint's agents of the port's protocol. The TCP and UDP listeners are ./tcp.ts and ./udp.ts.
import type { ClientHttp2Stream } from 'node:http2';
import type { Logger } from '../../shared/log.ts';
import type { EndpointConfig } from '../../shared/snapshot.ts';
import type { EndpointCache } from '../endpoint-cache.ts';
import type { TunnelRegistry } from '../tunnels/registry.ts';
import type { AgentTarget } from '../forward/agent.ts';
import type { RelayPeers } from '../relay/peers.ts';

export type PortProtocol = 'tcp' | 'udp';

export interface DedicatedPortsOptions {
  config: EndpointCache;
  registry: TunnelRegistry;
  /** Other edges holding agents this edge lacks: a port's connection is carried there (src/edge/relay); null: none. */
  relay?: RelayPeers | null;
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

export type Settings = Required<Omit<DedicatedPortsOptions, 'onChange'>> & { onChange: () => void };

/** Statuses the HTTP pipeline refuses too (`endpoint_disabled`): the port stays held, but carries nothing. */
export function serving(endpoint: EndpointConfig | undefined): endpoint is EndpointConfig {
  return endpoint !== undefined && endpoint.status !== 'disabled' && endpoint.status !== 'error';
}

/**
 * Opens a CONNECT stream on the endpoint's next available session speaking `protocol` (TunnelRegistry.pick, round-
 * robin; an http agent never receives raw TCP); a session that began draining since it was picked is skipped.
 */
export function openStream(settings: Settings, endpoint: EndpointConfig, protocol: PortProtocol, port: number): { session: AgentTarget; stream: ClientHttp2Stream } | null {
  const tried = new Set<AgentTarget>();
  for (;;) {
    const session = settings.registry.pick(endpoint.uuid, { protocol });
    if (!session || tried.has(session)) break;
    tried.add(session);
    try {
      // The agent only logs :authority and dials its own target: the name and port the visitor reached.
      return { session, stream: session.connect(`${endpoint.hostname}:${port}`) };
    } catch {
      // SessionUnavailableError: drained between listing and use; try the next one.
    }
  }
  // No agent of that protocol here: an edge that holds one carries the connection.
  const relayed = settings.relay?.target(endpoint.uuid, { protocol });
  return relayed ? { session: relayed, stream: relayed.connect(`${endpoint.hostname}:${port}`) } : null;
}

/** One bound (or binding) port of one endpoint. */
export abstract class PortListener {
  /** True while the port is bound and accepting. */
  bound = false;
  protected closed = false;
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
