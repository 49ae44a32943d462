// Forwarding to an origin URL (an endpoint's, or a routing rule's) on the lean path: one undici Pool per origin
// (keep-alive), each exchange dispatched with a handler that writes the origin's chunks straight to the visitor's
// response (no Writable adapter, no header object in between: docs/performance.md). http-proxy-3's fetch path measured 0.34×.
//
// Every connection checks the address it is about to use: an origin named by a host name was accepted by the control
// API on its name alone, and the name may resolve to 127.0.0.1 or 10.x today, or be rebound there later (DNS
// rebinding). So names are resolved through a lookup that refuses any answer the platform's address policy does not
// call public (src/shared/address-policy.ts, the policy the API applies to literals), and IP literals are checked
// before any connection, unless the edge runs with EDGE_ORIGIN_ALLOW_PRIVATE=true.
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import type { Duplex } from 'node:stream';
import { Pool } from 'undici';
import type { Logger } from '../../shared/log.ts';
import { isPublicAddress } from '../../shared/address-policy.ts';
import { PrivateAddressError as PrivateOriginError, publicOnlyLookup } from '../../shared/public-lookup.ts';
import type { EndpointConfig } from '../../shared/snapshot.ts';
import { sendEdgeError } from '../http/pages.ts';
import { originRequestHeaders, type ForwardRequest } from '../http/proxy-headers.ts';
import { UpstreamExchange, upstreamBody, type ExchangeHooks } from './exchange.ts';
import { relayUpgrade, responseOnSocket, upgradeRequestHeaders } from './upgrade.ts';


interface Origin {
  pool: Pool;
  /** Path prefix of the origin URL ("" for none). */
  base: string;
  host: string;
  /** Where upgrades connect: the origin URL's parts, parsed once (a string target would be re-parsed per use). */
  upgradeTarget: { secure: boolean; hostname: string; port: number };
  /** A private IP literal this edge may not connect to (checked once: a literal never resolves to anything else). */
  refusedLiteral: string | null;
  /** When a refusal was last logged, so a busy misconfigured endpoint logs once a minute, not once a request. */
  refusalLoggedAt: number;
  /**
   * Every exchange's hooks, made once with the pool: a closure made per request cost a property definition under
   * tsx (esbuild keepNames names every closure it creates), ~1.3 % of the edge's CPU on the origin path.
   */
  hooks: ExchangeHooks;
}

/** A connection refused because the origin's address is loopback, private or link-local. */
export { PrivateAddressError as PrivateOriginError, publicOnlyLookup } from '../../shared/public-lookup.ts';

export interface OriginPoolsOptions {
  /** EDGE_ORIGIN_ALLOW_PRIVATE: connect to loopback, private and link-local addresses too (default false). */
  allowPrivate?: boolean;
  /** Where refused connections are reported. */
  logger?: Logger;
  /** How origin names are resolved; the system resolver (dns.lookup) unless a test points it elsewhere. */
  lookup?: LookupFunction;
}

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
        upgradeTarget: {
          secure: parsed.protocol === 'https:',
          hostname: literal,
          port: parsed.port === '' ? (parsed.protocol === 'https:' ? 443 : 80) : Number(parsed.port),
        },
        // Sockets skip the lookup for IP literals, so those are judged here.
        refusedLiteral: !this.allowPrivate && isIP(literal) !== 0 && !isPublicAddress(literal) ? literal : null,
        refusalLoggedAt: 0,
        hooks: {},
      };
      const origin = o;
      o.hooks = { onError: (err) => this.refused(url, origin, err) };
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
    // undici refuses CONNECT outside its upgrade API; the pipeline never forwards one, and this keeps it that way.
    if (f.method === 'CONNECT') return sendEdgeError(res, 'origin_error', req.headers.accept);
    const headers = originRequestHeaders(req, f, origin.host);
    origin.pool.dispatch(
      { path: origin.base + f.target, method: f.method as never, headers, body: upstreamBody(f) },
      new UpstreamExchange(f, 'origin_error', origin.hooks),
    );
  }

  /** A connection refused by the address policy is reported like a refused literal. */
  private refused(url: string, origin: Origin, err: unknown): void {
    if (err instanceof PrivateOriginError) this.reportRefusal(url, origin, err.address);
  }

  /**
   * A visitor's WebSocket upgrade relayed to the origin (ws:// or wss:// by the origin's scheme), on a connection of
   * its own through the checking lookup. relayUpgrade (./upgrade.ts) judges the answer as for agents: only a 101
   * makes a byte pipe. http-proxy-3's ws pass, used before, relayed other answers too, but with the origin's
   * Connection and hop-by-hop fields (or a `keep-alive` of its own) on a connection it then closed.
   */
  upgrade(url: string, f: Omit<ForwardRequest, 'res'>, socket: Duplex, head: Buffer): void {
    const origin = this.origin(url);
    const { req } = f;
    if (origin.refusedLiteral !== null) {
      this.reportRefusal(url, origin, origin.refusedLiteral);
      return sendEdgeError(responseOnSocket(req, socket), 'origin_error', req.headers.accept);
    }
    const { secure, hostname, port } = origin.upgradeTarget;
    const out = (secure ? https : http).request({
      agent: secure ? this.wsAgents.https : this.wsAgents.http,
      host: hostname,
      port,
      method: 'GET',
      path: origin.base + f.target,
      headers: upgradeRequestHeaders(f, origin.host),
    });
    relayUpgrade(out, {
      req,
      socket,
      head,
      failure: 'origin_error',
      teardown: () => out.socket?.destroy(),
      onError: (err) => {
        if (err instanceof PrivateOriginError) this.reportRefusal(url, origin, err.address);
      },
    });
  }

  async close(): Promise<void> {
    this.wsAgents.http.destroy();
    this.wsAgents.https.destroy();
    await Promise.all([...this.origins.values()].map((o) => o.pool.close()));
    this.origins.clear();
  }
}
