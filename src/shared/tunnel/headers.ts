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

/** Whether `name` (lower case) describes one connection, not the message. */
export function isConnectionSpecific(name: string): boolean {
  return CONNECTION_SPECIFIC.has(name);
}

/**
 * Fields Node keeps the first instance of when one repeats, instead of joining the values (IncomingMessage
 * matchKnownFields): single-valued by definition, so a repeat is an error or an attack, and the first one wins.
 */
const FIRST_WINS = new Set([
  'age', 'authorization', 'content-length', 'content-type', 'etag', 'expires', 'from', 'host', 'if-modified-since',
  'if-unmodified-since', 'last-modified', 'location', 'max-forwards', 'proxy-authorization', 'referer',
  'retry-after', 'server', 'user-agent',
]);

/**
 * Adds one field line to `out` the way Node folds repeated fields into message.headers: set-cookie collects into an
 * array, cookie joins with "; " (RFC 9113 §8.2.3), the FIRST_WINS fields keep their first value unless the server
 * joins duplicates (`joinDuplicateHeaders`), every other field joins with ", " (RFC 9110 §5.3). `name` is lower case.
 */
export function foldField(out: HeaderMap | OutgoingHttpHeaders, name: string, value: string, joinDuplicates = false): void {
  const previous = out[name];
  if (previous === undefined) out[name] = name === 'set-cookie' ? [value] : value;
  else if (name === 'set-cookie') (previous as string[]).push(value);
  else if (name === 'cookie') out[name] = `${previous as string}; ${value}`;
  else if (joinDuplicates || !FIRST_WINS.has(name)) out[name] = `${previous as string}, ${value}`;
}

/** The field names a Connection header lists (RFC 9110 §7.6.1): they are hop-by-hop too. */
function connectionOptions(value: string | string[] | undefined): Set<string> | null {
  if (value === undefined) return null;
  const names = (Array.isArray(value) ? value.join(',') : value).split(',').map((v) => v.trim().toLowerCase());
  return new Set(names.filter((n) => n.length > 0));
}

/** Connection values that name no field beyond the ones always dropped, so need no second look. */
function namesNothingElse(value: string): boolean {
  const v = value.length <= 10 ? value.toLowerCase() : '';
  return v === 'keep-alive' || v === 'close' || v === 'upgrade';
}

/**
 * Adds the end-to-end fields of a raw header list (Node's rawHeaders: name, value, name, value, ...) to `out` in one
 * pass: names lower-cased, repeats folded as Node folds them (foldField), connection-specific fields and the ones
 * the Connection field names left out, `te` kept only as "trailers", and so are names `skip` accepts. Returns the
 * first Host value, which the caller may turn into `:authority` (RFC 9113 §8.3.1). Pseudo-header names cannot
 * occur in HTTP/1.1 field lines, so whatever `out` already holds under them is safe.
 */
export function addEndToEndFields(
  raw: readonly string[],
  out: HeaderMap | OutgoingHttpHeaders,
  skip?: (name: string) => boolean,
  joinDuplicates = false,
): string | undefined {
  let host: string | undefined;
  let nominated: string[] | null = null;
  let te = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    const value = raw[i + 1];
    if (CONNECTION_SPECIFIC.has(name)) {
      if (name === 'host') host ??= value;
      else if (name === 'connection' && !namesNothingElse(value)) (nominated ??= []).push(value);
      continue;
    }
    if (name.charCodeAt(0) === 58 /* ':' */ || skip?.(name)) continue;
    if (name === 'te') {
      te ||= teAllowsTrailers(value);
      continue;
    }
    foldField(out, name, value, joinDuplicates);
  }
  if (te) out.te = 'trailers';
  // The Connection field may come after the fields it names, so they go once the pass is over (rare: clients
  // send "keep-alive" or "close", which name nothing else).
  if (nominated) {
    for (const name of connectionOptions(nominated)!) if (name.charCodeAt(0) !== 58) delete out[name];
  }
  return host;
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
