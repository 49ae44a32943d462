// Forwarding to an endpoint's origin URL on the lean path: one undici Pool per origin (keep-alive, pipelined
// dispatch), the response streamed straight into the visitor's socket. http-proxy-3's fetch path measured 0.34×.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { Pool } from 'undici';
import { createProxyServer } from 'http-proxy-3';
import type { EndpointConfig } from '../../shared/snapshot.ts';
import { endToEndHeaders } from '../../shared/tunnel/headers.ts';
import { sendEdgeError } from '../http/pages.ts';
import { forwardedHeaders, type ForwardFacts } from '../http/proxy-headers.ts';

export interface OriginRequest extends ForwardFacts {
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  /** Normalised path plus "?query". */
  target: string;
}

interface Origin {
  pool: Pool;
  /** Path prefix of the origin URL ("" for none). */
  base: string;
  host: string;
}

const BODYLESS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'DELETE']);

/** Every origin URL the endpoints forward to: their own, and their routing rules' (what `retain` should keep). */
export function originUrls(endpoints: Iterable<EndpointConfig>): Set<string> {
  const urls = new Set<string>();
  for (const e of endpoints) {
    if (e.origin_url) urls.add(e.origin_url);
    for (const r of e.routing_rules ?? []) if (r.target_origin_url) urls.add(r.target_origin_url);
  }
  return urls;
}

/** Pools by origin URL, created on first use and closed when no endpoint uses them any more. */
export class OriginPools {
  private readonly origins = new Map<string, Origin>();
  // WebSocket upgrades to origins: http-proxy-3's ws pass handles the 101 handshake relay, where its cost is earned.
  private readonly wsProxy = createProxyServer({ xfwd: false, changeOrigin: true });

  constructor() {
    this.wsProxy.on('error', (_err, _req, socket) => (socket as Duplex | undefined)?.destroy?.());
  }

  private origin(url: string): Origin {
    let o = this.origins.get(url);
    if (!o) {
      const parsed = new URL(url);
      o = {
        pool: new Pool(parsed.origin, { connections: 128, pipelining: 1, keepAliveTimeout: 30_000, headersTimeout: 60_000, bodyTimeout: 0 }),
        base: parsed.pathname === '/' ? '' : parsed.pathname,
        host: parsed.host,
      };
      this.origins.set(url, o);
    }
    return o;
  }

  /** Drops pools whose origin no endpoint names any more; pass `originUrls(endpoints)`, rules' origins included. */
  retain(urls: ReadonlySet<string>): void {
    for (const [url, o] of this.origins) {
      if (urls.has(url)) continue;
      this.origins.delete(url);
      void o.pool.close();
    }
  }

  forward(url: string, f: OriginRequest): void {
    const { req, res } = f;
    const origin = this.origin(url);
    const headers = endToEndHeaders(forwardedHeaders(req.headers, f));
    // Origins are virtual-hosted by name: they get their own host; the visitor's is in X-Forwarded-Host.
    headers.host = origin.host;
    const hasBody = !BODYLESS.has(f.method) || req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
    origin.pool
      .stream(
        { path: origin.base + f.target, method: f.method as never, headers: headers as Record<string, string>, body: hasBody ? req : null, opaque: res },
        ({ statusCode, headers: resHeaders, opaque }) => {
          const out = opaque as ServerResponse;
          out.writeHead(statusCode, endToEndHeaders(resHeaders as Record<string, string | string[]>) as Record<string, string | string[]>);
          return out;
        },
      )
      .catch(() => {
        if (!res.headersSent) sendEdgeError(res, 'origin_error', req.headers.accept);
        else res.destroy();
      });
  }

  /** A visitor's upgrade relayed to the origin (ws:// or wss:// per the origin's scheme). */
  upgrade(url: string, f: Omit<OriginRequest, 'res'>, socket: Duplex, head: Buffer): void {
    const origin = this.origin(url);
    const target = new URL(url);
    f.req.url = origin.base + f.target;
    f.req.headers = forwardedHeaders(f.req.headers, f);
    this.wsProxy.ws(f.req, socket, head, { target: `${target.protocol === 'https:' ? 'wss' : 'ws'}://${target.host}` });
  }

  async close(): Promise<void> {
    this.wsProxy.close();
    await Promise.all([...this.origins.values()].map((o) => o.pool.close()));
    this.origins.clear();
  }
}
