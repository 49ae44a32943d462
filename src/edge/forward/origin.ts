// Forwarding to an origin URL (an endpoint's, or a routing rule's) on the lean path: one undici Pool per origin
// (keep-alive, pipelined dispatch), the response streamed straight into the visitor's socket. http-proxy-3's fetch path measured 0.34×.
//
// Every connection checks the address it is about to use: an origin named by a host name was accepted by the control
// API on its name alone, and the name may resolve to 127.0.0.1 or 10.x today, or be rebound there later (DNS
// rebinding). So names are resolved through a lookup that refuses any answer the platform's address policy does not
// call public (src/shared/address-policy.ts, the policy the API applies to literals), and IP literals are checked
// before any connection, unless the edge runs with EDGE_ORIGIN_ALLOW_PRIVATE=true.
import { lookup as systemLookup, type LookupAddress } from 'node:dns';
import http, { ServerResponse, type IncomingMessage } from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { Pool } from 'undici';
import { createProxyServer } from 'http-proxy-3';
import type { Logger } from '../../shared/log.ts';
import { isPublicAddress } from '../../shared/address-policy.ts';
import type { EndpointConfig } from '../../shared/snapshot.ts';
import { endToEndHeaders } from '../../shared/tunnel/headers.ts';
import { sendEdgeError } from '../http/pages.ts';
import { forwardedHeaders, originRequestHeaders, type ForwardRequest } from '../http/proxy-headers.ts';


interface Origin {
  pool: Pool;
  /** Path prefix of the origin URL ("" for none). */
  base: string;
  host: string;
  /** A private IP literal this edge may not connect to (checked once: a literal never resolves to anything else). */
  refusedLiteral: string | null;
  /** When a refusal was last logged, so a busy misconfigured endpoint logs once a minute, not once a request. */
  refusalLoggedAt: number;
}

/** A connection refused because the origin's address is loopback, private or link-local. */
export class PrivateOriginError extends Error {
  override name = 'PrivateOriginError';
  readonly code = 'EDGE_ORIGIN_PRIVATE_ADDRESS';
  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    super(`origin ${host} resolves to ${address}, which is not a public address`);
  }
}

/**
 * A lookup for origin connections: resolves every address of the name (as net's happy-eyeballs connect does) and
 * fails with PrivateOriginError when any is private. Refusing the whole answer rather than filtering it keeps a
 * name that mixes public and private addresses from reaching the private one on a later connection.
 */
export function publicOnlyLookup(resolve: LookupFunction = systemLookup as LookupFunction): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, { ...options, all: true }, (err, answer) => {
      if (err) return callback(err, '');
      const addresses = answer as LookupAddress[];
      if (addresses.length === 0) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '');
      const refused = addresses.find((a) => !isPublicAddress(a.address));
      if (refused) return callback(new PrivateOriginError(hostname, refused.address), '');
      if (options.all) callback(null, addresses);
      else callback(null, addresses[0].address, addresses[0].family);
    });
  };
}

export interface OriginPoolsOptions {
  /** EDGE_ORIGIN_ALLOW_PRIVATE: connect to loopback, private and link-local addresses too (default false). */
  allowPrivate?: boolean;
  /** Where refused connections are reported. */
  logger?: Logger;
  /** How origin names are resolved; the system resolver (dns.lookup) unless a test points it elsewhere. */
  lookup?: LookupFunction;
}

const BODYLESS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'DELETE']);

/** Every origin URL the endpoints forward to: their own, and their routing rules' (what `track` counts). */
export function originUrls(endpoints: Iterable<EndpointConfig>): Set<string> {
  const urls = new Set<string>();
  for (const e of endpoints) {
    if (e.origin_url) urls.add(e.origin_url);
    for (const r of e.routing_rules ?? []) if (r.target_origin_url) urls.add(r.target_origin_url);
  }
  return urls;
}

const NO_URLS: ReadonlySet<string> = new Set();

/** Whether an endpoint may name an origin URL (its own, or through a rule): a cheap test before building the set. */
function namesOrigins(e: EndpointConfig | null): boolean {
  return e !== null && (e.origin_url !== null || (e.routing_rules?.length ?? 0) > 0);
}

/** Pools by origin URL, created on first use and closed when no endpoint uses them any more. */
export class OriginPools {
  private readonly origins = new Map<string, Origin>();
  /** origin URL → how many endpoints name it (as their origin or a rule's), kept by `track`. */
  private readonly uses = new Map<string, number>();
  // WebSocket upgrades to origins: http-proxy-3's ws pass handles the 101 handshake relay, where its cost is earned.
  private readonly wsProxy = createProxyServer({ xfwd: false, changeOrigin: true });
  private readonly allowPrivate: boolean;
  private readonly log: Logger | undefined;
  /** Passed to undici's connector and to the upgrade path's agents: the one place origin names are resolved. */
  private readonly lookup: LookupFunction | undefined;
  private readonly wsAgents: { http: http.Agent; https: https.Agent };

  /** Options are required so that no caller gets pools that connect anywhere by forgetting them. */
  constructor(options: OriginPoolsOptions) {
    this.allowPrivate = options.allowPrivate ?? false;
    this.log = options.logger;
    this.lookup = this.allowPrivate ? options.lookup : publicOnlyLookup(options.lookup);
    this.wsAgents = { http: new http.Agent({ lookup: this.lookup }), https: new https.Agent({ lookup: this.lookup }) };
    // Every upgrade passes its own callback; this only keeps a stray error from being thrown as unhandled.
    this.wsProxy.on('error', (_err, _req, socket) => (socket as Duplex | undefined)?.destroy?.());
  }

  private origin(url: string): Origin {
    let o = this.origins.get(url);
    if (!o) {
      const parsed = new URL(url);
      const literal = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
      o = {
        pool: new Pool(parsed.origin, {
          connections: 128,
          pipelining: 1,
          keepAliveTimeout: 30_000,
          headersTimeout: 60_000,
          bodyTimeout: 0,
          // Every new connection resolves the name again through the checking lookup (undici caches no DNS answer).
          connect: this.lookup ? { lookup: this.lookup } : undefined,
        }),
        base: parsed.pathname === '/' ? '' : parsed.pathname,
        host: parsed.host,
        // Sockets skip the lookup for IP literals, so those are judged here.
        refusedLiteral: !this.allowPrivate && isIP(literal) !== 0 && !isPublicAddress(literal) ? literal : null,
        refusalLoggedAt: 0,
      };
      this.origins.set(url, o);
    }
    return o;
  }

  /** Logs a refused origin address, at most once a minute per origin URL. */
  private reportRefusal(url: string, origin: Origin, address: string): void {
    const now = Date.now();
    if (now - origin.refusalLoggedAt < 60_000) return;
    origin.refusalLoggedAt = now;
    this.log?.warn({ origin: url, address }, 'origin refused: its address is not public (loopback, private, link-local or another non-unicast range; EDGE_ORIGIN_ALLOW_PRIVATE is off)');
  }

  /**
   * Follows one endpoint's change (null: absent before, or removed): the origin URLs it names move their counts,
   * and the pool of a URL no endpoint names any more is closed. The work is that endpoint's URLs, whatever the
   * number of endpoints, so a reset of n endpoints costs n calls, not n scans of all of them.
   */
  track(previous: EndpointConfig | null, next: EndpointConfig | null): void {
    if (!namesOrigins(previous) && !namesOrigins(next)) return; // most endpoints: nothing to count, nothing allocated
    const before = previous ? originUrls([previous]) : NO_URLS;
    const after = next ? originUrls([next]) : NO_URLS;
    for (const url of after) if (!before.has(url)) this.uses.set(url, (this.uses.get(url) ?? 0) + 1);
    for (const url of before) {
      if (after.has(url)) continue;
      const left = (this.uses.get(url) ?? 0) - 1;
      if (left > 0) {
        this.uses.set(url, left);
        continue;
      }
      this.uses.delete(url);
      const o = this.origins.get(url);
      if (!o) continue;
      this.origins.delete(url);
      void o.pool.close();
    }
  }

  /** How many endpoints name `url`, and whether a pool to it is open (what `track` maintains; for tests and status). */
  usage(url: string): { endpoints: number; pooled: boolean } {
    return { endpoints: this.uses.get(url) ?? 0, pooled: this.origins.has(url) };
  }

  forward(url: string, f: ForwardRequest): void {
    const { req, res } = f;
    const origin = this.origin(url);
    if (origin.refusedLiteral !== null) {
      this.reportRefusal(url, origin, origin.refusedLiteral);
      return sendEdgeError(res, 'origin_error', req.headers.accept);
    }
    const headers = originRequestHeaders(req, f, origin.host);
    const hasBody = !BODYLESS.has(f.method) || req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
    origin.pool
      .stream(
        { path: origin.base + f.target, method: f.method as never, headers, body: f.body ?? (hasBody ? req : null), opaque: res },
        ({ statusCode, headers: resHeaders, opaque }) => {
          const out = opaque as ServerResponse;
          out.writeHead(statusCode, endToEndHeaders(resHeaders as Record<string, string | string[]>) as Record<string, string | string[]>);
          return out;
        },
      )
      .catch((err: unknown) => {
        if (err instanceof PrivateOriginError) this.reportRefusal(url, origin, err.address);
        if (!res.headersSent) sendEdgeError(res, 'origin_error', req.headers.accept);
        else res.destroy();
      });
  }

  /** A visitor's upgrade relayed to the origin (ws:// or wss:// per the origin's scheme). */
  upgrade(url: string, f: Omit<ForwardRequest, 'res'>, socket: Duplex, head: Buffer): void {
    const origin = this.origin(url);
    const { req } = f;
    if (origin.refusedLiteral !== null) {
      this.reportRefusal(url, origin, origin.refusedLiteral);
      return answerUpgrade(req, socket);
    }
    const target = new URL(url);
    const secure = target.protocol === 'https:';
    req.url = origin.base + f.target;
    req.headers = forwardedHeaders(req.headers, f);
    const options = { target: `${secure ? 'wss' : 'ws'}://${target.host}`, agent: secure ? this.wsAgents.https : this.wsAgents.http };
    this.wsProxy.ws(req, socket, head, options, (err) => {
      if (err instanceof PrivateOriginError) this.reportRefusal(url, origin, err.address);
      // Before the origin answered, the visitor can still get the page; after, the relay just ends.
      if ((socket as Socket).bytesWritten === 0) answerUpgrade(req, socket);
      else socket.destroy();
    });
  }

  async close(): Promise<void> {
    this.wsProxy.close();
    this.wsAgents.http.destroy();
    this.wsAgents.https.destroy();
    await Promise.all([...this.origins.values()].map((o) => o.pool.close()));
    this.origins.clear();
  }
}

/** The origin_error page on an upgrade's raw socket, which no origin has written to. */
function answerUpgrade(req: IncomingMessage, socket: Duplex): void {
  const res = new ServerResponse(req);
  res.assignSocket(socket as Socket);
  res.shouldKeepAlive = false;
  res.on('finish', () => socket.end());
  sendEdgeError(res, 'origin_error', req.headers.accept);
}
