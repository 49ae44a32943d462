// An agent on several edges at once (`--edges`, `--ha-connections`): one tunnel to each of N different edges, each
// with its own reconnect loop; a tunnel whose edge went away is moved to an edge from the list not in use.
import { EventEmitter } from 'node:events';
import { lookup, Resolver } from 'node:dns/promises';
import { isIP } from 'node:net';
import { Agent, firstWelcome, type DisconnectInfo, type ReconnectInfo } from './agent.ts';
import type { TunnelRefusedError } from './handshake.ts';
import { agentSettings, tunnelUrl, type AgentOptions } from './options.ts';
import type { Welcome } from '../shared/tunnel/protocol.ts';

/** Most tunnels one agent keeps (Cloudflare keeps 4); more would only multiply keepalives. */
export const MAX_HA_CONNECTIONS = 8;
export const DEFAULT_HA_CONNECTIONS = 2;

export interface HaAgentOptions extends Omit<AgentOptions, 'edgeUrl'> {
  /**
   * The edges' public base URLs, or one entry whose host is a DNS name: each of its A/AAAA addresses is an edge
   * (same scheme and port), resolved again whenever a tunnel needs a new edge.
   */
  edges: string[];
  /** Tunnels to keep, each on a different edge (default 2; at most the number of edges). */
  haConnections?: number;
  /** DNS servers (ip[:port]) for expanding a name in `edges`; default the system resolver. */
  dnsServers?: string[];
}

export interface HaAgentEvents {
  /** A tunnel is up on `edge`. */
  connected: [welcome: Welcome, edge: string];
  disconnected: [info: DisconnectInfo, edge: string];
  reconnecting: [info: ReconnectInfo, edge: string];
  /** Every tunnel stopped: null after stop(), the refusal when an edge refused the agent for good. */
  stopped: [error: TunnelRefusedError | null];
}

/** Checks the list and the count; throws TypeError/RangeError naming the problem. */
export function checkHaOptions(edges: readonly string[], haConnections: number | undefined): number {
  if (!Array.isArray(edges) || edges.length === 0) throw new TypeError('edges must name at least one edge');
  const seen = new Set<string>();
  for (const edge of edges) {
    const href = tunnelUrl(edge).href; // throws on a URL that is no edge URL
    if (seen.has(href)) throw new TypeError(`edges names ${edge} twice`);
    seen.add(href);
  }
  const n = haConnections ?? DEFAULT_HA_CONNECTIONS;
  if (!Number.isInteger(n) || n < 1 || n > MAX_HA_CONNECTIONS) throw new RangeError(`haConnections must be an integer from 1 to ${MAX_HA_CONNECTIONS}, got ${haConnections}`);
  return n;
}

/** The edges as URLs: a single entry naming a DNS host becomes one URL per address it resolves to. */
export async function expandEdges(edges: readonly string[], dnsServers?: string[]): Promise<string[]> {
  if (edges.length !== 1) return [...edges];
  const url = new URL(edges[0].includes('://') ? edges[0] : `http://${edges[0]}`);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  // A literal address, or a TLS edge (certificates name the host, not its addresses): the entry is one edge.
  if (isIP(host) !== 0 || host === 'localhost' || url.protocol === 'https:' || url.protocol === 'wss:') return [...edges];
  let addresses: string[];
  if (dnsServers && dnsServers.length > 0) {
    const resolver = new Resolver({ timeout: 2_000, tries: 2 });
    resolver.setServers(dnsServers);
    const [v4, v6] = await Promise.all([resolver.resolve4(host).catch(() => []), resolver.resolve6(host).catch(() => [])]);
    addresses = [...v4, ...v6];
  } else {
    addresses = (await lookup(host, { all: true }).catch(() => [])).map((a) => a.address);
  }
  if (addresses.length === 0) throw new TypeError(`edges: ${host} resolves to no address`);
  return [...new Set(addresses)].map((address) => {
    const u = new URL(url.href);
    u.hostname = isIP(address) === 6 ? `[${address}]` : address;
    return u.href.replace(/\/$/, '');
  });
}

export class HaAgent extends EventEmitter<HaAgentEvents> {
  readonly haConnections: number;
  /** Edge URL → the agent holding a tunnel there (connected or reconnecting). */
  private readonly members = new Map<string, Agent>();
  /** Edge URL → when a tunnel there last failed: such an edge is tried after every other. */
  private readonly failedAt = new Map<string, number>();
  private endpoint: string | undefined;
  private stopping = false;
  private readonly agentId: string;

  constructor(private readonly options: HaAgentOptions) {
    super();
    this.haConnections = checkHaOptions(options.edges, options.haConnections);
    this.endpoint = options.endpoint;
    // Every tunnel carries the same agent id: it is one agent, present on several edges.
    this.agentId = agentSettings({ ...options, edgeUrl: options.edges[0] }).agentId;
  }

  /** The tunnels up now: edge URL → welcome. */
  get connections(): Map<string, Welcome> {
    const out = new Map<string, Welcome>();
    for (const [edge, agent] of this.members) if (agent.welcome) out.set(edge, agent.welcome);
    return out;
  }

  /** The welcome of one tunnel up now (each names its edge's node and region), or null when none is up. */
  get welcome(): Welcome | null {
    for (const agent of this.members.values()) if (agent.welcome) return agent.welcome;
    return null;
  }

  /** What carries a tunnel up now (`raw` or `ws`), or null when none is up. */
  get transport(): string | null {
    for (const agent of this.members.values()) if (agent.transport) return agent.transport;
    return null;
  }

  /** Resolves with the first welcome; rejects when an edge refuses the agent for good or stop() comes first. */
  async start(): Promise<Welcome> {
    const first = firstWelcome(this);
    const edges = await expandEdges(this.options.edges, this.options.dnsServers);
    // An ephemeral endpoint is created by the first tunnel; the others ask for the same one.
    if (this.endpoint === undefined) {
      this.add(edges[0]);
      const welcome = await first;
      for (const edge of edges.slice(1, this.haConnections)) this.add(edge);
      return welcome;
    }
    for (const edge of edges.slice(0, this.haConnections)) this.add(edge);
    return first;
  }

  private add(edge: string): void {
    const agent = new Agent({ ...this.options, edgeUrl: edge, endpoint: this.endpoint, agentId: this.agentId });
    this.members.set(edge, agent);
    agent.on('connected', (welcome) => {
      this.endpoint ??= welcome.endpoint.uuid;
      this.failedAt.delete(edge);
      this.emit('connected', welcome, edge);
    });
    agent.on('disconnected', (info) => this.emit('disconnected', info, edge));
    agent.on('reconnecting', (info) => {
      this.emit('reconnecting', info, edge);
      void this.moveFrom(edge, agent);
    });
    agent.on('stopped', (err) => {
      // Refused for good (bad key, not allowed): the same answer waits on every edge.
      if (err && !this.stopping) void this.shutdown(0, err);
    });
    agent.start().catch(() => {});
  }

  /** A tunnel lost its edge: move it to an edge not in use, when the list has one; else it keeps retrying there. */
  private async moveFrom(edge: string, agent: Agent): Promise<void> {
    if (this.stopping || this.members.get(edge) !== agent) return;
    this.failedAt.set(edge, Date.now());
    let edges: string[];
    try {
      edges = await expandEdges(this.options.edges, this.options.dnsServers);
    } catch {
      return;
    }
    if (this.stopping || this.members.get(edge) !== agent) return;
    const spare = edges
      .filter((e) => !this.members.has(e))
      .sort((a, b) => (this.failedAt.get(a) ?? 0) - (this.failedAt.get(b) ?? 0))[0];
    if (spare === undefined || (this.failedAt.get(spare) ?? 0) > Date.now() - 1_000) return;
    this.members.delete(edge);
    void agent.stop(0);
    this.add(spare);
  }

  /** Stops every tunnel gracefully (see Agent.stop). */
  stop(graceMs = 5_000): Promise<void> {
    return this.shutdown(graceMs, null);
  }

  private async shutdown(graceMs: number, err: TunnelRefusedError | null): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    await Promise.all([...this.members.values()].map((a) => a.stop(graceMs)));
    this.members.clear();
    this.emit('stopped', err);
  }
}

/** Creates an agent on several edges and resolves once its first tunnel is up. */
export async function startHaAgent(options: HaAgentOptions): Promise<HaAgent> {
  const agent = new HaAgent(options);
  await agent.start();
  return agent;
}
