// The forwarding headers the edge vouches for: visitor-sent copies are removed first, then the edge sets its own
// from the connection (docs/architecture.md: the client address comes from the socket unless a trusted proxy says so).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { OutgoingHttpHeaders } from 'node:http2';
import { headerKey, isEdgeOwnedLower } from '../../shared/edge-headers.ts';
import { addEndToEndFields, isConnectionSpecific, type HeaderMap } from '../../shared/tunnel/headers.ts';
import { withoutCookie } from './credentials.ts';

// A visitor's copies of the fields the edge owns (src/shared/edge-headers.ts) or its stages set would let them forge
// identity or origin. They are dropped in every spelling an upstream could read as the same field: any case, and
// `_` for `-` (CGI, WSGI, Rack and PHP all read `X_Forwarded_For` as HTTP_X_FORWARDED_FOR).

export interface ForwardFacts {
  clientIp: string;
  secure: boolean;
  host: string;
  /** The validated host and port the visitor named (RequestContext.authority): forwarded as Host or `:authority`. */
  authority: string;
  /** Headers stages decided to add (claims, identity); their names are lower-case. */
  extra: Record<string, string>;
  /** Visitor fields stages consumed or own on this endpoint (RequestContext.dropHeaders): left out in every spelling. */
  drop?: readonly string[];
  /** Cookies a stage consumed (RequestContext.dropCookie): left out of the forwarded Cookie field. */
  dropCookie?: string | readonly string[];
  /** The body a stage read whole (RequestContext.body): forwarded with its own Content-Length, not the visitor's framing. */
  body?: Buffer;
}

/** A judged visitor request, as the forwarders (agent tunnel, origin) receive it. */
export interface ForwardRequest extends ForwardFacts {
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  /** Normalised path plus "?query": the exact target the pipeline judged. */
  target: string;
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
  addForwardedFields(req, facts, out);
  out[':authority'] = facts.authority;
  return out as OutgoingHttpHeaders;
}

/**
 * The HTTP/1.1 header fields of a visitor's request to an origin (or to an agent's local service over a data
 * connection or an upgrade): the same pass as tunnelRequestHeaders, with the Host given (an origin's own, since
 * origins are virtual-hosted by name; the visitor's is in X-Forwarded-Host). `Expect` is left
 * out: the edge's server has already answered 100-continue to the visitor, and undici refuses the field.
 */
export function originRequestHeaders(req: IncomingMessage, facts: ForwardFacts, originHost: string): Record<string, string | string[]> {
  const out: HeaderMap = {};
  addForwardedFields(req, facts, out, 'expect');
  out.host = originHost;
  return out as Record<string, string | string[]>;
}

/** The origin pass's filter when no stage adds to it (bare endpoints): no closure per request. */
function ownedOrExpect(name: string): boolean {
  return name === 'expect' || isEdgeOwnedLower(name);
}

/**
 * Adds the visitor's end-to-end fields and then the edge's own to `out`, in one pass over the raw field lines. The
 * visitor's Host is not among them: the caller sets the validated one. The edge's fields go in after the hop-by-hop
 * pass, so a visitor cannot strip them by naming them in Connection. `drop` names one more visitor field to leave out.
 */
function addForwardedFields(req: IncomingMessage, facts: ForwardFacts, out: HeaderMap, drop?: string): void {
  const extra = facts.extra;
  const stageField = stageFieldMatcher(extra);
  // What auth stages consumed (a credential, a cookie) or own (claim names): only requests they passed pay for it.
  const dropped = facts.drop;
  const cookie = facts.dropCookie;
  // One filter, made only when there is more to leave out than the edge's own fields. Passed inline, never assigned
  // to a name first: tsx (esbuild keepNames) gives a closure assigned to a name a property definition at each
  // creation, ~0.7 µs per request on this machine (docs/performance.md "Every policy on"). Names arrive lower-cased.
  addEndToEndFields(
    req.rawHeaders,
    out,
    stageField === null && dropped === undefined && cookie === undefined
      ? drop === undefined
        ? isEdgeOwnedLower
        : drop === 'expect'
          ? ownedOrExpect
          : (name: string) => name === drop || isEdgeOwnedLower(name)
      : (name: string) =>
          name === drop ||
          isEdgeOwnedLower(name) ||
          (stageField !== null && stageField(name)) ||
          (cookie !== undefined && name === 'cookie') ||
          (dropped !== undefined && dropped.includes(name.indexOf('_') === -1 ? name : name.replaceAll('_', '-'))),
    // Node's own flag for a server created with joinDuplicateHeaders (not in its type definitions).
    (req as IncomingMessage & { joinDuplicateHeaders?: boolean | null }).joinDuplicateHeaders === true,
  );
  if (cookie !== undefined) {
    const rest = withoutCookie(req.headers.cookie, cookie);
    if (rest !== undefined) out.cookie = rest;
  }
  // A body read whole is forwarded as it is: its length, whatever framing (chunked) the visitor used.
  if (facts.body !== undefined) out['content-length'] = String(facts.body.length);
  out['x-forwarded-for'] = facts.clientIp;
  out['x-forwarded-proto'] = facts.secure ? 'https' : 'http';
  if (facts.host) out['x-forwarded-host'] = facts.host;
  if (stageField !== null) {
    // HTTP/2 forbids connection-specific fields (Node throws on them); a stage has no business setting them.
    for (const name in extra) if (!isConnectionSpecific(name)) out[name] = extra[name];
  }
}

/**
 * Whether a visitor field (lower-case name) is one of the fields stages set on this request, read as CGI reads
 * names (headerKey); null when stages set none, the common case, which then costs nothing per field. Stage names
 * are hyphenated as a rule, so only a visitor name with `_` needs folding; a stage name with `_` folds all names.
 */
function stageFieldMatcher(extra: Record<string, string>): ((name: string) => boolean) | null {
  let any = false;
  for (const name in extra) {
    if (name.indexOf('_') !== -1) {
      const keys = new Set(Object.keys(extra).map(headerKey));
      return (visitor) => keys.has(headerKey(visitor));
    }
    any = true;
  }
  if (!any) return null;
  return (visitor) => Object.hasOwn(extra, visitor) || (visitor.indexOf('_') !== -1 && Object.hasOwn(extra, visitor.replaceAll('_', '-')));
}

/**
 * Appends a stage's compiled drop list to a request's (RequestContext.dropHeaders), keeping the last join: the stages
 * before it on one endpoint hand it the same compiled array on every request they admit, so the join is made once,
 * not per request. The result is shared between requests, so it is never mutated (dropHeaders never is).
 */
export function dropAppender(mine: readonly string[]): (before: readonly string[] | undefined) => readonly string[] {
  let lastBefore: readonly string[] | undefined;
  let joined: readonly string[] = mine;
  return (before) => {
    if (before === undefined) return mine;
    if (before !== lastBefore) {
      joined = before.concat(mine);
      lastBefore = before;
    }
    return joined;
  };
}
