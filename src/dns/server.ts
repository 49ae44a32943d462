// The DNS role's authoritative server on the wire: UDP and TCP on one port, EDNS(0), Client Subnet, truncation,
// RFC 8482 minimal ANY answers and abuse limits. What the answers are comes from a DnsAuthority (src/dns/types.ts).
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { createServer, isIP, type Server, type Socket } from 'node:net';
import type { Answer } from 'dns-packet';
import { Counter, type Registry } from 'prom-client';
import { createLogger, type Logger } from '../shared/log.ts';
import {
  CLASSIC_UDP_BYTES,
  emptyBody,
  encodeResponse,
  encodeSlip,
  HEADER_BYTES,
  inspectQuery,
  isAnyQuery,
  subnetForAuthority,
  TCP_MESSAGE_BYTES,
  type AskedQuestion,
  type QueryEcho,
  type RcodeName,
  type ResponseBody,
} from './message.ts';
import { ResponseRateLimiter, type RateLimitAction } from './rate-limit.ts';
import { FrameReader } from './tcp-frames.ts';
import type { DnsAuthority, DnsClient, DnsQuestion } from './types.ts';

export interface DnsServerOptions {
  /** Bind address, e.g. '127.0.0.1', or '::' for both families. */
  host: string;
  /** 0: an ephemeral port, the same number for UDP and TCP. */
  port: number;
  authority: DnsAuthority;
  logger?: Logger;
  /** Per client network, UDP only; responsesPerSecond 0 turns limiting off. Default 20/s, slip 2. */
  rateLimit?: { responsesPerSecond: number; slip: number };
  /** Counters are registered here when given. */
  metrics?: Registry;
  /** A TCP connection with nothing sent or received for this long is closed (default 10 s). */
  tcpIdleMs?: number;
  /** Connections beyond this are closed as soon as they are accepted (default 256). */
  maxTcpConnections?: number;
}

export interface DnsServerStats {
  /** Messages received: datagrams and TCP frames. */
  queries: number;
  /** Messages that were not a well-formed query: dropped, or answered FORMERR. */
  malformed: number;
  /** UDP responses withheld by the rate limit, dropped or slipped. */
  rateLimited: number;
  /** Responses sent with TC=1 because the answer did not fit. */
  truncated: number;
}

export interface DnsServer {
  port: number;
  host: string;
  stats(): DnsServerStats;
  close(): Promise<void>;
}

type Transport = 'udp' | 'tcp';

const DEFAULT_RATE_LIMIT = { responsesPerSecond: 20, slip: 2 };
const DEFAULT_TCP_IDLE_MS = 10_000;
const DEFAULT_MAX_TCP_CONNECTIONS = 256;
/** Ephemeral UDP ports tried before giving up when TCP finds the same number taken. */
const BIND_ATTEMPTS = 5;
/** Unsent response bytes on one connection past which reading stops until the client has read them. */
const TCP_UNSENT_LIMIT = 256 * 1024;
/**
 * What one connection may hold unread. The reader holds one unfinished message plus the rest of one chunk, and
 * reading pauses under backpressure, so this is a backstop, never the working limit.
 */
const TCP_BUFFERED_LIMIT = 4 * (TCP_MESSAGE_BYTES + 2);
/** RFC 8482 §4.2: the synthesized HINFO's TTL. */
const SYNTHESIZED_HINFO_TTL = 3600;

export async function startDnsServer(options: DnsServerOptions): Promise<DnsServer> {
  const logger = (options.logger ?? createLogger('silent')).child({ component: 'dns' });
  const rateLimit = options.rateLimit ?? DEFAULT_RATE_LIMIT;
  const limiter = rateLimit.responsesPerSecond > 0 ? new ResponseRateLimiter(rateLimit) : null;
  const metrics = options.metrics ? registerMetrics(options.metrics) : null;
  const responder = new Responder(options.authority, logger, metrics, limiter);
  const idleMs = options.tcpIdleMs ?? DEFAULT_TCP_IDLE_MS;

  const connections = new Set<Socket>();
  const tcp = createServer((socket) => {
    connections.add(socket);
    socket.once('close', () => connections.delete(socket));
    serveTcpConnection(socket, responder, logger, idleMs);
  });
  // RFC 7766 §6.2.2: a server may cap concurrent connections; Node closes each one past the cap on accept.
  tcp.maxConnections = options.maxTcpConnections ?? DEFAULT_MAX_TCP_CONNECTIONS;
  tcp.on('drop', (peer) => logger.debug({ client: peer?.remoteAddress }, 'dns tcp connection over the limit closed'));

  const udp = await bindBoth(options.host, options.port, tcp);
  tcp.on('error', (err) => logger.error({ err }, 'dns tcp listener failed'));
  serveUdp(udp, responder, logger);
  logger.info({ host: options.host, port: udp.address().port }, 'dns server listening');

  let closing: Promise<void> | null = null;
  return {
    port: udp.address().port,
    host: options.host,
    stats: () => ({ ...responder.stats }),
    close: () => (closing ??= closeAll(udp, tcp, connections)),
  };
}

interface DnsMetrics {
  queries: Counter<'transport' | 'rcode'>;
  malformed: Counter;
  rateLimited: Counter<'action'>;
  truncated: Counter;
}

function registerMetrics(registry: Registry): DnsMetrics {
  return {
    queries: counter(registry, 'dns_queries_total', 'DNS queries answered, by transport and the rcode sent', ['transport', 'rcode']),
    malformed: counter(registry, 'dns_malformed_total', 'DNS messages that were not a well-formed query', []),
    rateLimited: counter(registry, 'dns_rate_limited_total', 'UDP responses withheld by the rate limit', ['action']),
    truncated: counter(registry, 'dns_truncated_total', 'DNS responses sent with TC=1 because the answer did not fit', []),
  };
}

/** The registry's counter of that name when a server registered it before (a restart in one process), else a new one. */
function counter<T extends string>(registry: Registry, name: string, help: string, labelNames: T[]): Counter<T> {
  const existing = registry.getSingleMetric(name);
  if (existing instanceof Counter) return existing as Counter<T>;
  return new Counter({ name, help, labelNames, registers: [registry] });
}

/** From received bytes to the bytes to send back (or nothing), the same for both transports but for limits. */
class Responder {
  readonly stats: DnsServerStats = { queries: 0, malformed: 0, rateLimited: 0, truncated: 0 };

  constructor(
    private readonly authority: DnsAuthority,
    private readonly logger: Logger,
    private readonly metrics: DnsMetrics | null,
    private readonly limiter: ResponseRateLimiter | null,
  ) {}

  respond(message: Buffer, address: string, transport: Transport): Buffer | null {
    this.stats.queries += 1;
    const inspection = inspectQuery(message);
    if (inspection.kind === 'drop') {
      if (inspection.malformed) this.countMalformed();
      this.logger.debug({ client: address, transport, reason: inspection.reason }, 'dns message dropped');
      return null;
    }
    if (inspection.kind === 'error') {
      if (inspection.rcode === 'FORMERR') this.countMalformed();
      this.logger.debug({ client: address, transport, rcode: inspection.rcode, reason: inspection.reason }, 'dns query not served');
    }
    // Only UDP is limited: its source can be spoofed, TCP's cannot, and TCP is where slipped clients are sent.
    const action = transport === 'udp' && this.limiter ? this.limiter.take(address) : 'send';
    if (action !== 'send') return this.withhold(action, inspection.echo);
    const body = inspection.kind === 'error' ? emptyBody(inspection.rcode) : this.answer(inspection.question, inspection.echo, address);
    // Without EDNS a UDP answer is at most 512 bytes (RFC 1035 §4.2.1); with it, what the client advertised, ≤ 1232.
    const limit = transport === 'udp' ? (inspection.echo.edns?.udpSize ?? CLASSIC_UDP_BYTES) : TCP_MESSAGE_BYTES;
    const { bytes, truncated, rcode } = this.encode(inspection.echo, body, limit);
    if (truncated) {
      this.stats.truncated += 1;
      this.metrics?.truncated.inc();
    }
    this.metrics?.queries.inc({ transport, rcode });
    return bytes;
  }

  countMalformed(): void {
    this.stats.malformed += 1;
    this.metrics?.malformed.inc();
  }

  /** A response over the rate limit: nothing, or now and then an empty TC=1 one (BIND's "slip"). */
  private withhold(action: Exclude<RateLimitAction, 'send'>, echo: QueryEcho): Buffer | null {
    this.stats.rateLimited += 1;
    this.metrics?.rateLimited.inc({ action: action === 'slip' ? 'slipped' : 'dropped' });
    return action === 'slip' ? encodeSlip(echo) : null;
  }

  private answer(question: AskedQuestion, echo: QueryEcho, address: string): ResponseBody {
    const client: DnsClient = { address };
    const subnet = subnetForAuthority(echo.edns?.subnet ?? null);
    if (subnet) client.subnet = subnet;
    if (isAnyQuery(question)) return this.minimalAny(question.name, client);
    return this.ask({ name: question.name, type: question.type }, client);
  }

  /**
   * RFC 8482 §4.1–4.2, over UDP and TCP alike: ANY is answered with one RRset, the name's A records when it has
   * them, else a synthesized HINFO "RFC8482" — never everything the name holds, which is what amplification wants.
   */
  private minimalAny(name: string, client: DnsClient): ResponseBody {
    const body = this.ask({ name, type: 'A' }, client);
    if (body.rcode !== 'NOERROR') return body;
    if (body.answers.length > 0) return { ...body, answers: firstRRset(body.answers) };
    const hinfo: Answer = { name, type: 'HINFO', class: 'IN', ttl: SYNTHESIZED_HINFO_TTL, data: { cpu: 'RFC8482', os: '' } };
    return { ...body, answers: [hinfo], authorities: [] };
  }

  private ask(question: DnsQuestion, client: DnsClient): ResponseBody {
    try {
      const response = this.authority.answer(question, client);
      return { ...response, ecsScope: response.ecsScope ?? 0 };
    } catch (err) {
      this.logger.debug({ err, question }, 'dns authority failed; answering SERVFAIL');
      return emptyBody('SERVFAIL');
    }
  }

  /** A record the authority built that cannot be encoded (a malformed address, say) makes the answer SERVFAIL. */
  private encode(echo: QueryEcho, body: ResponseBody, limit: number): { bytes: Buffer; truncated: boolean; rcode: RcodeName } {
    try {
      return { ...encodeResponse(echo, body, limit), rcode: body.rcode };
    } catch (err) {
      this.logger.debug({ err }, 'dns response could not be encoded; answering SERVFAIL');
      return { ...encodeResponse(echo, emptyBody('SERVFAIL'), limit), rcode: 'SERVFAIL' };
    }
  }
}

/** The records sharing the first answer's owner and type: for an alias, its CNAME. */
function firstRRset(answers: Answer[]): Answer[] {
  const [first] = answers;
  return answers.filter((record) => record.type === first.type && record.name.toLowerCase() === first.name.toLowerCase());
}

/** An IPv4 client on a dual-stack socket arrives as ::ffff:a.b.c.d; the authority and the limiter see a.b.c.d. */
function clientAddress(address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}

function serveUdp(socket: UdpSocket, responder: Responder, logger: Logger): void {
  socket.on('message', (message, remote) => {
    try {
      const reply = responder.respond(message, clientAddress(remote.address), 'udp');
      if (!reply) return;
      socket.send(reply, remote.port, remote.address, (err) => {
        if (err) logger.debug({ err, client: remote.address }, 'dns udp send failed');
      });
    } catch (err) {
      // A bad source port (0) throws from send(); nothing a datagram carries may take the listener down.
      logger.debug({ err, client: remote.address }, 'dns udp datagram not answered');
    }
  });
  socket.on('error', (err) => logger.error({ err }, 'dns udp socket failed'));
}

/**
 * RFC 7766: several queries per connection, each answered as soon as it is read (pipelining, §6.2.1.1), frames
 * reassembled across chunks, idle connections closed (§6.2.3), reading paused while the client leaves answers unread.
 */
function serveTcpConnection(socket: Socket, responder: Responder, logger: Logger, idleMs: number): void {
  const address = clientAddress(socket.remoteAddress ?? '');
  const reader = new FrameReader(HEADER_BYTES);
  let ended = false;
  socket.setNoDelay(true);
  socket.setTimeout(idleMs, () => socket.destroy());
  socket.on('error', (err) => logger.debug({ err, client: address }, 'dns tcp connection failed'));

  const end = (reason: string): void => {
    ended = true;
    logger.debug({ client: address, reason }, 'dns tcp connection closed');
    socket.end();
  };
  const readFrames = (): void => {
    while (!ended) {
      if (socket.writableLength > TCP_UNSENT_LIMIT) {
        socket.pause();
        return;
      }
      const frame = reader.next();
      if (frame === 'incomplete') return;
      if (frame === 'zero-length') return end('zero-length frame');
      if (frame === 'too-short') {
        responder.countMalformed();
        return end('frame shorter than a DNS header');
      }
      const reply = responder.respond(frame, address, 'tcp');
      if (reply) socket.write(framed(reply));
    }
  };
  socket.on('data', (chunk: Buffer) => {
    if (ended) return;
    reader.push(chunk);
    if (reader.bufferedBytes > TCP_BUFFERED_LIMIT) {
      logger.debug({ client: address }, 'dns tcp connection buffered too much; closed');
      socket.destroy();
      return;
    }
    readFrames();
  });
  socket.on('drain', () => {
    if (!socket.isPaused()) return;
    socket.resume();
    readFrames();
  });
}

function framed(message: Buffer): Buffer {
  const length = Buffer.allocUnsafe(2);
  length.writeUInt16BE(message.length, 0);
  return Buffer.concat([length, message]);
}

/** Binds UDP first, then TCP on the same number; with port 0, another ephemeral port when TCP finds it taken. */
async function bindBoth(host: string, port: number, tcp: Server): Promise<UdpSocket> {
  for (let attempt = 1; ; attempt += 1) {
    const udp = createSocket({ type: isIP(host) === 6 ? 'udp6' : 'udp4' });
    try {
      await bindUdp(udp, host, port);
    } catch (err) {
      udp.close();
      throw err;
    }
    try {
      await listenTcp(tcp, host, udp.address().port);
      return udp;
    } catch (err) {
      await new Promise<void>((resolve) => udp.close(() => resolve()));
      const taken = (err as NodeJS.ErrnoException).code === 'EADDRINUSE';
      if (port !== 0 || !taken || attempt >= BIND_ATTEMPTS) throw err;
    }
  }
}

function bindUdp(udp: UdpSocket, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    udp.once('error', reject);
    udp.bind({ port, address: host }, () => {
      udp.off('error', reject);
      resolve();
    });
  });
}

function listenTcp(tcp: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    tcp.once('error', reject);
    tcp.listen({ port, host }, () => {
      tcp.off('error', reject);
      resolve();
    });
  });
}

async function closeAll(udp: UdpSocket, tcp: Server, connections: Set<Socket>): Promise<void> {
  const tcpClosed = new Promise<void>((resolve, reject) => tcp.close((err) => (err ? reject(err) : resolve())));
  for (const socket of connections) socket.destroy();
  await Promise.all([tcpClosed, new Promise<void>((resolve) => udp.close(() => resolve()))]);
}
