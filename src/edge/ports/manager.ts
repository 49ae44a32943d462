// Dedicated TCP/UDP ports: one listener per port an endpoint was assigned (./tcp.ts, ./udp.ts), opened and closed
// as the endpoint cache's `endpoint` events assign and release ports, and reported in the edge's heartbeat.
import type { Logger } from '../../shared/log.ts';
import type { EndpointConfig } from '../../shared/snapshot.ts';
import type { AgentSession } from '../tunnels/registry.ts';
import { serving, type DedicatedPortsOptions, type PortListener, type PortProtocol, type Settings } from './listener.ts';
import { TcpListener } from './tcp.ts';
import { UdpListener } from './udp.ts';

export type { DedicatedPortsOptions, PortProtocol } from './listener.ts';

/** One open listener, as reported in the edge's heartbeat (shared/presence.ts `EdgeHeartbeat.ports`). */
export interface OpenPort {
  endpoint: string;
  protocol: PortProtocol;
  port: number;
}

function portOf(endpoint: EndpointConfig | null, protocol: PortProtocol): number | null {
  if (!endpoint) return null;
  return protocol === 'tcp' ? endpoint.dedicated_tcp_port : endpoint.dedicated_udp_port;
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
      relay: null,
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
