// Header mapping between HTTP/1.1 and the tunnel's HTTP/2, used by the edge (visitor request in, response out)
// and by the agent (HTTP/2 in, local HTTP/1.1 out and back). Connection-specific fields never cross a hop.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { IncomingHttpHeaders as Http2IncomingHeaders } from 'node:http2';

/**
 * Fields that describe one connection, not the message: RFC 9110 §7.6.1 (Connection and the fields it names) and
 * RFC 9113 §8.2.2, which makes a message carrying them malformed in HTTP/2 (Node throws on them). `host` is
 * replaced by `:authority` (RFC 9113 §8.3.1) and rebuilt from it on the way back to HTTP/1.1.
 */
const CONNECTION_SPECIFIC = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'host']);

export type HeaderMap = Record<string, string | string[] | undefined>;

/** The field names a Connection header lists (RFC 9110 §7.6.1): they are hop-by-hop too. */
function connectionOptions(value: string | string[] | undefined): Set<string> | null {
  if (value === undefined) return null;
  const names = (Array.isArray(value) ? value.join(',') : value).split(',').map((v) => v.trim().toLowerCase());
  return new Set(names.filter((n) => n.length > 0));
}

/**
 * Copies `headers` (lower-case names, as Node delivers them) without connection-specific fields and pseudo-headers.
 * `te` survives only as "trailers", the one value HTTP/2 allows (RFC 9113 §8.2.2).
 */
export function endToEndHeaders(headers: IncomingHttpHeaders | Http2IncomingHeaders | HeaderMap): HeaderMap {
  const nominated = connectionOptions(headers.connection as string | string[] | undefined);
  const out: HeaderMap = {};
  for (const name of Object.keys(headers)) {
    const value = headers[name];
    if (value === undefined || name.charCodeAt(0) === 58 /* ':' */) continue;
    if (CONNECTION_SPECIFIC.has(name) || nominated?.has(name)) continue;
    if (name === 'te') {
      if (teAllowsTrailers(value)) out.te = 'trailers';
      continue;
    }
    out[name] = value as string | string[];
  }
  return out;
}

function teAllowsTrailers(value: string | string[]): boolean {
  const list = Array.isArray(value) ? value.join(',') : value;
  return list.split(',').some((v) => v.split(';')[0].trim().toLowerCase() === 'trailers');
}

export interface RequestLine {
  method: string;
  /** Origin-form path with query, as judged by the edge pipeline (RFC 9113 §8.3.1 `:path`). */
  path: string;
  /** Host (and port) the visitor asked for: becomes `:authority`. */
  authority: string;
  /** Scheme the visitor used at the edge (RFC 9113 §8.3.1 `:scheme`). */
  scheme: 'http' | 'https';
}

/** An HTTP/1.1 request's line and headers as the HTTP/2 request header block the edge sends to the agent. */
export function toHttp2RequestHeaders(line: RequestLine, headers: IncomingHttpHeaders | HeaderMap): OutgoingHttpHeaders {
  return {
    ':method': line.method,
    ':path': line.path,
    ':authority': line.authority,
    ':scheme': line.scheme,
    ...endToEndHeaders(headers),
  };
}

/** An HTTP/2 response header block (or trailers) as HTTP/1.1 response headers: pseudo-headers dropped. */
export function toHttp1ResponseHeaders(headers: Http2IncomingHeaders | HeaderMap): HeaderMap {
  return endToEndHeaders(headers);
}

/**
 * An HTTP/2 request as the HTTP/1.1 request the agent sends to its local service: `Host` from `:authority`
 * (RFC 9113 §8.3.1: it replaces Host), unless a fixed host header is configured.
 */
export function toHttp1RequestHeaders(headers: Http2IncomingHeaders, hostHeader?: string): HeaderMap {
  const out = endToEndHeaders(headers);
  const host = hostHeader ?? headers[':authority'] ?? (headers.host as string | undefined);
  // Host goes first, as HTTP/1.1 senders place it (RFC 9110 §7.2 asks for it early so it is seen first).
  return host ? { host, ...out } : out;
}

/** A local HTTP/1.1 response as the HTTP/2 response header block the agent sends back. */
export function toHttp2ResponseHeaders(status: number, headers: IncomingHttpHeaders | HeaderMap): OutgoingHttpHeaders {
  return { ':status': status, ...endToEndHeaders(headers) };
}
