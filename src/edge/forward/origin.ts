// Forwarding to an origin URL (an endpoint's, or a routing rule's) on the lean path: one undici Pool per origin
// (keep-alive), each exchange dispatched with a handler that writes the origin's chunks straight to the visitor's
// response (no Writable adapter, no header object in between: docs/performance.md). http-proxy-3's fetch path measured 0.34×.
//
// Every connection checks the address it is about to use: an origin named by a host name was accepted by the control
// API on its name alone, and the name may resolve to 127.0.0.1 or 10.x today, or be rebound there later (DNS
// rebinding). So names are resolved through a lookup that refuses any answer the platform's address policy does not
// call public (src/shared/address-policy.ts, the policy the API applies to literals), and IP literals are checked
// before any connection, unless the edge runs with EDGE_ORIGIN_ALLOW_PRIVATE=true.
import http, { type ServerResponse } from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import type { Duplex } from 'node:stream';
import { Pool } from 'undici';
import type { Logger } from '../../shared/log.ts';
import { isPublicAddress } from '../../shared/address-policy.ts';
import { PrivateAddressError as PrivateOriginError, publicOnlyLookup } from '../../shared/public-lookup.ts';
import type { EndpointConfig } from '../../shared/snapshot.ts';
import { isConnectionSpecific } from '../../shared/tunnel/headers.ts';
import { sendEdgeError } from '../http/pages.ts';
import { originRequestHeaders, type ForwardRequest } from '../http/proxy-headers.ts';
import { finalStatus } from './status.ts';
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
    // undici refuses CONNECT outside its upgrade API; the pipeline never forwards one, and this keeps it that way.
    if (f.method === 'CONNECT') return sendEdgeError(res, 'origin_error', req.headers.accept);
    const headers = originRequestHeaders(req, f, origin.host);
    const hasBody = !BODYLESS.has(f.method) || req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
    origin.pool.dispatch(
      { path: origin.base + f.target, method: f.method as never, headers, body: f.body ?? (hasBody ? req : null) },
      new OriginExchange(this, url, origin, f),
    );
  }

  /** For OriginExchange: a connection refused by the address policy is reported like a refused literal. */
  refused(url: string, origin: Origin, err: unknown): void {
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

/**
 * One origin exchange as undici's dispatch handler (the callback form the client calls directly, so no adapter or
 * parsed header object is made per response): the status line and fields go to the visitor in one writeHead from
 * the raw field list, each body chunk is written to the visitor as undici hands it over (a view of the socket's read
 * buffer, never copied), and the visitor's backpressure pauses the origin's socket. Pool.stream, used before, added a
 * Writable adapter, a finished() hook and a parsed-then-copied header object to every response.
 */
class OriginExchange {
  private abort: ((err?: Error) => void) | null = null;
  /** The visitor left before the exchange ended: the origin request is aborted as soon as undici allows it. */
  private gone = false;
  private paused: (() => void) | null = null;
  private readonly res: ServerResponse;

  constructor(
    private readonly pools: OriginPools,
    private readonly url: string,
    private readonly origin: Origin,
    private readonly f: ForwardRequest,
  ) {
    this.res = f.res;
    this.res.once('close', () => this.visitorClosed());
  }

  private visitorClosed(): void {
    if (this.res.writableFinished) return;
    this.gone = true;
    this.abort?.(new Error('the visitor closed the connection'));
  }

  onConnect(abort: (err?: Error) => void): void {
    this.abort = abort;
    if (this.gone) abort(new Error('the visitor closed the connection'));
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    // 1xx answers are interim (undici reports 100-continue and 103 here too): they are not relayed.
    if (statusCode < 200) return true;
    // A status writeHead would throw on (or relay meaninglessly, 6xx-9xx): the exchange is aborted and answered 502.
    const status = finalStatus(statusCode);
    if (status === null) {
      this.abort?.(new Error(`the origin answered status ${statusCode}, not a final status (200-599)`));
      return false;
    }
    try {
      const fields = responseFields(rawHeaders);
      const res = this.res;
      if (res.getHeaderNames().length === 0) res.writeHead(status, fields);
      else {
        // A stage set fields on this response already (a refreshed session cookie): the origin's fields replace
        // those of the same name, repeats of its own kept (the flat form of writeHead would keep only the last).
        for (let i = 0; i < fields.length; i += 2) res.removeHeader(fields[i]);
        for (let i = 0; i < fields.length; i += 2) res.appendHeader(fields[i], fields[i + 1]);
        res.writeHead(status);
      }
    } catch (err) {
      // A field Node refuses to send (writeHead throws before writing anything): 502, and the origin is cut off.
      this.abort?.(err as Error);
      return false;
    }
    this.paused = resume;
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.res.write(chunk)) return true;
    // The visitor reads slower than the origin sends: undici stops reading the origin's socket until 'drain'.
    this.res.once('drain', this.paused ?? noop);
    return false;
  }

  onComplete(): void {
    this.res.end();
  }

  onError(err: Error): void {
    this.pools.refused(this.url, this.origin, err);
    const { res, req } = this.f;
    if (!res.headersSent) sendEdgeError(res, 'origin_error', req.headers.accept);
    else res.destroy();
  }
}

function noop(): void {}

/**
 * An origin's raw field lines (name, value, … as undici's parser hands them, latin1 bytes) as the flat array form of
 * res.writeHead: connection-specific fields, the ones the origin's Connection field names, and pseudo-header names
 * are left out (what endToEndHeaders does for parsed headers), `te` passes only as "trailers"; repeats stay separate
 * lines, in their order, as the origin sent them.
 */
function responseFields(raw: Buffer[]): string[] {
  const out: string[] = [];
  let nominated: string[] | null = null;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i].toString('latin1');
    const lower = name.toLowerCase();
    const value = raw[i + 1].toString('latin1');
    if (isConnectionSpecific(lower)) {
      // "keep-alive" and "close", what origins send, name no other field.
      if (lower === 'connection' && !/^\s*(keep-alive|close)\s*$/i.test(value)) (nominated ??= []).push(value);
      continue;
    }
    if (lower.charCodeAt(0) === 58 /* ':' */) continue;
    if (lower === 'te') {
      if (value.split(',').some((v) => v.split(';')[0].trim().toLowerCase() === 'trailers')) out.push('te', 'trailers');
      continue;
    }
    out.push(name, value);
  }
  if (nominated === null) return out;
  // The Connection field may come after the fields it names, so they go once the pass is over (rare: origins send
  // "keep-alive" or "close", which name nothing else).
  const names = new Set(nominated.join(',').split(',').map((v) => v.trim().toLowerCase()));
  const kept: string[] = [];
  for (let i = 0; i < out.length; i += 2) if (!names.has(out[i].toLowerCase())) kept.push(out[i], out[i + 1]);
  return kept;
}
