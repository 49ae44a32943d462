// The agent's options: what a caller may set (AgentOptions), validated once and frozen into the settings every part
// of the agent reads (AgentSettings), with the tunnel URL derived from --edge.
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import type { ClientOptions } from 'ws';
import { MAX_API_KEY_LENGTH } from '../shared/api-keys.ts';
import {
  HOST_HEADER_PATTERN,
  MAX_AGENT_ID_LENGTH,
  MAX_DATA_CONNECTIONS,
  PROTOCOL_VERSION,
  TUNNEL_PATH,
  TUNNEL_PROTOCOLS,
  parseHello,
  type Hello,
  type TunnelProtocol,
} from '../shared/tunnel/protocol.ts';
import { DEFAULT_KEEPALIVE, DEFAULT_TUNING, MAX_MESSAGE_BYTES, type KeepaliveOptions, type TunnelTuning } from '../shared/tunnel/transport.ts';
import type { Logger } from '../shared/log.ts';
import { parseTarget, type Target } from './target.ts';

export interface AgentOptions {
  /** The edge's public base URL (http://127.0.0.1:8080 in development); the tunnel lives at /_edge/tunnel on it. */
  edgeUrl: string;
  apiKey: string;
  /** The endpoint to serve; omitted, the edge creates an ephemeral one (kept across reconnects). */
  endpoint?: string;
  protocol: TunnelProtocol;
  /** `3000`, `host:port`, or a URL (`https://localhost:8443`, `udp://127.0.0.1:53`). Required unless `streams` is given. */
  target?: string | number;
  /**
   * Serves every stream the edge opens instead of the built-in forwarding to `target` (`edge agent deploy`, whose
   * target moves with each release: src/agent/deploy/agent.ts). Such an agent offers no data connections.
   */
  streams?: StreamHandler;
  /** The application a deploying agent serves (hello `application`); the edge then opens its control stream. */
  application?: string;
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

/** Serves one HTTP/2 stream the edge opened on the tunnel (its request headers as received). */
export type StreamHandler = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void;

export const TRANSPORT_CHOICES = ['auto', 'raw', 'ws'] as const;
export type TransportChoice = (typeof TRANSPORT_CHOICES)[number];

/** Spare data connections an http agent keeps by default: enough for a burst while more are dialled. */
export const DEFAULT_DATA_SPARES = 8;

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

/** The options validated and frozen, with what derives from them: what every part of the agent reads. */
export interface AgentSettings {
  url: URL;
  apiKey: string;
  endpoint?: string;
  application?: string;
  protocol: TunnelProtocol;
  /** Null for an agent whose `streams` handler chooses where each stream goes. */
  target: Target | null;
  streams: StreamHandler | undefined;
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
  verifyTargetTls: boolean | undefined;
  udpIdleMs: number | undefined;
  backoff: { initialMs: number; maxMs: number };
}

/** Validates and freezes every option; throws TypeError/RangeError naming the bad one. */
export function agentSettings(options: AgentOptions): AgentSettings {
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
    ...(options.application !== undefined ? { application: options.application } : {}),
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
  if (options.target === undefined && options.streams === undefined) throw new TypeError('a target is required (a port, host:port or a URL)');
  const target = options.target === undefined ? null : Object.freeze(parseTarget(options.protocol, options.target));
  return Object.freeze({
    url,
    apiKey: options.apiKey,
    endpoint: options.endpoint,
    application: options.application,
    protocol: options.protocol,
    target,
    streams: options.streams,
    agentId,
    tags: [...tags],
    client,
    healthyAfterMs: options.healthyAfterMs ?? 10_000,
    handshakeTimeoutMs,
    keepalive: Object.freeze(keepalive),
    tuning: Object.freeze({ ...DEFAULT_TUNING, ...options.tuning }),
    transport,
    edgeTls: options.edgeTls,
    // Data connections splice to one fixed local service; an agent that picks its target per stream has none.
    dataSpares: options.protocol === 'http' && target !== null && !target.tls && options.streams === undefined ? dataSpares : 0,
    hostHeader: options.hostHeader,
    verifyTargetTls: options.verifyTargetTls,
    udpIdleMs: options.udpIdleMs,
    backoff: { initialMs, maxMs },
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
}
