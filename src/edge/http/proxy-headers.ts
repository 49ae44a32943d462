// The forwarding headers the edge vouches for: visitor-sent copies are removed first, then the edge sets its own
// from the connection (ARCHITECTURE.md: the client address comes from the socket unless a trusted proxy says so).
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { OutgoingHttpHeaders } from 'node:http2';
import { addEndToEndFields, isConnectionSpecific, type HeaderMap } from '../../shared/tunnel/headers.ts';

/** Request fields only the edge may set; a visitor's copies would let them forge identity or origin. */
const EDGE_OWNED = ['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-forwarded-port', 'forwarded', 'x-real-ip'];
const EDGE_OWNED_SET = new Set(EDGE_OWNED);

export interface ForwardFacts {
  clientIp: string;
  secure: boolean;
  host: string;
  /** Headers stages decided to add (claims, identity); their names are lower-case. */
  extra: Record<string, string>;
}

/** A judged visitor request, as the forwarders (agent tunnel, origin) receive it. */
export interface ForwardRequest extends ForwardFacts {
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  /** Normalised path plus "?query": the exact target the pipeline judged. */
  target: string;
}

export function forwardedHeaders(headers: IncomingHttpHeaders, facts: ForwardFacts): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = { ...headers };
  for (const name of EDGE_OWNED) delete out[name];
  for (const name of Object.keys(facts.extra)) delete out[name];
  out['x-forwarded-for'] = facts.clientIp;
  out['x-forwarded-proto'] = facts.secure ? 'https' : 'http';
  if (facts.host) out['x-forwarded-host'] = facts.host;
  for (const [name, value] of Object.entries(facts.extra)) out[name] = value;
  return out;
}

/**
 * The HTTP/2 header block of a visitor's request to an agent, built in one pass over the visitor's raw field lines
 * (no intermediate copies: this runs for every request): pseudo-headers from the judged request line, the visitor's
 * end-to-end fields (shared/tunnel/headers.ts: hop-by-hop ones and those Connection names dropped, repeats folded as
 * in req.headers), without the visitor's copies of the fields the edge owns or its stages set, then the edge's own.
 * The edge's fields go in after the hop-by-hop pass, so a visitor cannot strip them by naming them in Connection.
 */
export function tunnelRequestHeaders(req: IncomingMessage, facts: ForwardFacts, method: string, path: string): OutgoingHttpHeaders {
  const out: HeaderMap = { ':method': method, ':path': path, ':authority': undefined, ':scheme': facts.secure ? 'https' : 'http' };
  const host = addForwardedFields(req, facts, out);
  out[':authority'] = host ?? facts.host;
  return out as OutgoingHttpHeaders;
}

/**
 * The HTTP/1.1 header fields of a visitor's request to an origin: the same pass as tunnelRequestHeaders, with the
 * origin's own Host (origins are virtual-hosted by name; the visitor's is in X-Forwarded-Host). `Expect` is left
 * out: the edge's server has already answered 100-continue to the visitor, and undici refuses the field.
 */
export function originRequestHeaders(req: IncomingMessage, facts: ForwardFacts, originHost: string): Record<string, string | string[]> {
  const out: HeaderMap = {};
  addForwardedFields(req, facts, out, 'expect');
  out.host = originHost;
  return out as Record<string, string | string[]>;
}

/**
 * Adds the visitor's end-to-end fields and then the edge's own to `out`, in one pass over the raw field lines;
 * returns the visitor's Host. The edge's fields go in after the hop-by-hop pass, so a visitor cannot strip them
 * by naming them in Connection. `drop` names one more visitor field to leave out.
 */
function addForwardedFields(req: IncomingMessage, facts: ForwardFacts, out: HeaderMap, drop?: string): string | undefined {
  const extra = facts.extra;
  let extras = false;
  for (const _ in extra) {
    extras = true;
    break;
  }
  const skip =
    drop !== undefined
      ? (name: string) => name === drop || EDGE_OWNED_SET.has(name) || Object.hasOwn(extra, name)
      : extras
        ? (name: string) => EDGE_OWNED_SET.has(name) || Object.hasOwn(extra, name)
        : isEdgeOwned;
  // Node's own flag for a server created with joinDuplicateHeaders (not in its type definitions).
  const join = (req as IncomingMessage & { joinDuplicateHeaders?: boolean | null }).joinDuplicateHeaders === true;
  const host = addEndToEndFields(req.rawHeaders, out, skip, join);
  out['x-forwarded-for'] = facts.clientIp;
  out['x-forwarded-proto'] = facts.secure ? 'https' : 'http';
  if (facts.host) out['x-forwarded-host'] = facts.host;
  if (extras) {
    // HTTP/2 forbids connection-specific fields (Node throws on them); a stage has no business setting them.
    for (const name in extra) if (!isConnectionSpecific(name)) out[name] = extra[name];
  }
  return host;
}

function isEdgeOwned(name: string): boolean {
  return EDGE_OWNED_SET.has(name);
}
