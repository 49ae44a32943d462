// The per-request pipeline, top to bottom: host lookup → endpoint state → path normalisation → the endpoint's
// compiled stages (HTTPS enforcement, rate limits, auth, JWT, RBAC, routing) → forward → capture when it ends.
import { ServerResponse, type IncomingMessage } from 'node:http';
import type { DedicatedAddresses } from '../dedicated-addresses.ts';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { PROBE_HEADER, verifyProbe } from '../../shared/health-probe.ts';
import type { Logger } from '../../shared/log.ts';
import { captureExchange, type CaptureSink } from '../capture.ts';
import type { EndpointCache } from '../endpoint-cache.ts';
import type { CompiledEndpoint } from '../compile.ts';
import { forwardToAgent, forwardUpgrade } from '../forward/agent.ts';
import { responseOnSocket, upgradeRefusal } from '../forward/upgrade.ts';
import type { OriginPools } from '../forward/origin.ts';
import { sendEdgeError } from '../http/pages.ts';
import type { ForwardRequest } from '../http/proxy-headers.ts';
import { formatAuthority, parseAuthority, type Authority } from '../http/host.ts';
import { normalizePath, splitTarget } from '../http/normalize-path.ts';
import { clientAddress, type TrustedProxies } from '../rate-limit/visitor-address.ts';
import type { TunnelRegistry } from '../tunnels/registry.ts';
import type { RelayPeers } from '../relay/peers.ts';
import { traceIdOfRequest, type RequestContext, type Stage, type Verdict } from './stage.ts';
import { stageEvent, traceRefusal, traceRequest } from './trace.ts';
import type { Tracing } from '../../shared/tracing.ts';
import type { AccessLog } from '../access-log.ts';

export interface PipelineDeps {
  config: EndpointCache;
  registry: TunnelRegistry;
  /** Other edges holding agents this edge lacks (src/edge/relay); absent: a single edge, no relay. */
  relay?: RelayPeers;
  origins: OriginPools;
  /** Receives every finished exchange of a known endpoint (counters always, details where capture is on). */
  capture: CaptureSink;
  /** Where a stage that failed is reported (its request answered 500). */
  logger?: Logger;
  /**
   * EDGE_TRUSTED_PROXIES: a request from one of them names its client in X-Forwarded-For (src/edge/rate-limit/
   * visitor-address.ts). Absent or null: the socket's peer is the client, whatever the visitor sends.
   */
  trustedProxies?: TrustedProxies | null;
  /**
   * The key health probes are signed with (SecretBox.derive(PROBE_KEY_PURPOSE), src/shared/health-probe.ts). Absent:
   * no request is taken for a probe.
   */
  probeKey?: Buffer;
  /** Which endpoints each dedicated address serves (src/edge/dedicated-addresses.ts); absent: every address serves all. */
  dedicated?: DedicatedAddresses;
  /** OpenTelemetry (src/shared/tracing.ts): a span per request when set; null or absent, tracing is off. */
  tracing?: Tracing | null;
  /** EDGE_ACCESS_LOG (src/edge/access-log.ts): a line per request when set; null or absent, off. */
  accessLog?: AccessLog | null;
}

/**
 * The one Host field of a request, or null when it has none; undefined when it has more than one line of it, which
 * RFC 9112 §3.2 makes a 400 (Node keeps the first, or joins them with joinDuplicateHeaders; rawHeaders has all).
 */
export function soleHost(req: IncomingMessage): string | null | undefined {
  const host = req.headers.host;
  if (host === undefined) return null;
  const raw = req.rawHeaders;
  let seen = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    if (name.length === 4 && name.toLowerCase() === 'host' && ++seen > 1) return undefined;
  }
  return host;
}

/**
 * Runs stages from `i` on. Awaits only when a stage returns a promise, so an endpoint whose stages are all
 * synchronous never allocates one.
 */
export function runStages(stages: readonly Stage[], ctx: RequestContext, i = 0): Verdict | Promise<Verdict> {
  for (; i < stages.length; i++) {
    const stage = stages[i];
    const verdict = stage.run(ctx);
    if (typeof verdict !== 'string') {
      const next = i + 1;
      return verdict.then((v) => (ranStage(ctx, stage, v) === 'done' ? 'done' : runStages(stages, ctx, next)));
    }
    if (ranStage(ctx, stage, verdict) === 'done') return 'done';
  }
  return 'next';
}

/** Notes a stage's verdict: the stage that answered (access log, span), and its event when the request is traced. */
function ranStage(ctx: RequestContext, stage: Stage, verdict: Verdict): Verdict {
  // One field test when tracing is off (docs/performance.md: tracing off costs nothing measurable).
  if (ctx.span !== undefined) stageEvent(ctx.span, ctx, stage.name, verdict);
  if (verdict === 'done') ctx.decidedBy = stage.name;
  return verdict;
}

type Resolved = { ctx: RequestContext; endpoint: CompiledEndpoint } | null;

/** The Host value read last, what it parsed to, and that as forwarded: most requests repeat the one before's. */
let lastHostField: string | null = null;
let lastHostAuthority: Authority | null = null;
let lastHostText = '';

/** parseAuthority of a Host value, remembered for the next request naming the same (the result is never changed). */
function hostAuthority(value: string): Authority | null {
  if (value !== lastHostField) {
    lastHostAuthority = parseAuthority(value);
    lastHostText = lastHostAuthority === null ? '' : formatAuthority(lastHostAuthority);
    lastHostField = value;
  }
  return lastHostAuthority;
}

type Refusal = 'malformed_request' | 'endpoint_not_found' | 'endpoint_disabled' | 'misdirected_request';

/**
 * The steps every request and upgrade share: validate the authority and the target, find the endpoint, check it may
 * serve, build the context. The authority is checked here once (src/edge/http/host.ts); what is routed on is what
 * every stage sees and what the agent or origin receives as Host (`:authority`).
 */
function resolve(deps: PipelineDeps, req: IncomingMessage, res: ServerResponse, secure: boolean, refuse: (code: Refusal, detail?: string) => void): Resolved {
  const target = splitTarget(req.url ?? '/');
  if (target === null) return void refuse('malformed_request', 'the request target is not an origin-form path or an http(s) URL without a fragment'), null;
  // RFC 9112 §3.2: more than one Host line, or an invalid one, is a 400 even when an absolute-form target makes
  // the server ignore its value (§3.2.2: the target's authority wins, so routing and the forwarded Host use it).
  const hostField = soleHost(req);
  if (hostField === undefined) return void refuse('malformed_request', 'the request has more than one Host field'), null;
  const fromHost = hostField === null ? null : hostAuthority(hostField);
  if (hostField !== null && fromHost === null) return void refuse('malformed_request', 'the Host field is not a valid host[:port]'), null;
  const authority = target.authority === null ? fromHost : parseAuthority(target.authority);
  if (authority === null) {
    return void refuse('malformed_request', target.authority === null ? 'the request has no Host field' : 'the request target names no valid host[:port]'), null;
  }
  const host = authority.host;
  const endpoint = deps.config.lookup(host);
  if (endpoint === null) return void refuse('endpoint_not_found'), null;
  // A dedicated address serves only the endpoints bound to it (docs/dedicated-ips.md "At the edge"); shared ones serve all.
  const dedicated = deps.dedicated;
  if (dedicated !== undefined && !dedicated.empty) {
    const served = dedicated.servedOn(req.socket.localAddress);
    if (served !== null && !served.has(endpoint.config.uuid)) return void refuse('misdirected_request', `${host} is not served on this dedicated address`), null;
  }
  if (endpoint.config.status === 'disabled' || endpoint.config.status === 'error') return void refuse('endpoint_disabled'), null;
  const path = normalizePath(target.path);
  if (path === null) return void refuse('malformed_request', 'the path has a malformed percent escape, or a "." or ".." segment with ";" parameters'), null;
  const query = target.query;
  const ctx: RequestContext = {
    req,
    res,
    endpoint: endpoint.config,
    method: req.method ?? 'GET',
    host,
    authority: authority === fromHost ? lastHostText : formatAuthority(authority),
    path,
    query,
    // Decided once here, so the forwarded X-Forwarded-For, logs, capture and every stage agree on the visitor.
    clientIp: clientAddress(req, deps.trustedProxies ?? null),
    secure,
    upstreamHeaders: {},
    // One header lookup per request; the HMAC runs only when the header is there.
    probe: deps.probeKey !== undefined && req.headers[PROBE_HEADER] !== undefined && verifyProbe(deps.probeKey, req.headers[PROBE_HEADER], endpoint.config.uuid, req.method ?? '', req.url ?? ''),
  };
  return { ctx, endpoint };
}

/** What a forwarder needs of a judged request: the normalised target and the facts the edge vouches for. */
function forwardRequest(ctx: RequestContext): ForwardRequest {
  return {
    req: ctx.req,
    res: ctx.res,
    method: ctx.method,
    target: ctx.query ? `${ctx.path}?${ctx.query}` : ctx.path,
    clientIp: ctx.clientIp,
    secure: ctx.secure,
    host: ctx.host,
    authority: ctx.authority,
    extra: ctx.upstreamHeaders,
    // What auth stages consumed or own, and a body read whole: absent (undefined) on most requests.
    drop: ctx.dropHeaders,
    dropCookie: ctx.dropCookie,
    body: ctx.body,
  };
}

/** The origin URL serving a request: a matching routing rule decides (its origin, or its agents); else the endpoint's. */
function originOf(ctx: RequestContext): string | null {
  return (ctx.selector === undefined ? ctx.endpoint.origin_url : ctx.selector.origin) ?? null;
}

function refuseNoAgent(ctx: RequestContext): void {
  const which = ctx.selector?.rule ? `no connected agent matches routing rule "${ctx.selector.rule}"` : undefined;
  sendEdgeError(ctx.res, 'no_agent', ctx.req.headers.accept, which);
}

/**
 * A stage (or what follows it) threw or rejected: a bug, or a stored value it could not handle. The request is
 * answered 500 `internal` (or cut, when an answer had begun or the socket went to a forwarder) and the failure
 * logged; the process goes on serving. Uncaught, the exception would end the process and every visitor's request.
 */
function stageFailed(deps: PipelineDeps, ctx: RequestContext, err: unknown): void {
  deps.logger?.error({ err, endpoint: ctx.endpoint.uuid, method: ctx.method, path: ctx.path, trace_id: traceIdOfRequest(ctx) }, 'the pipeline failed on a request; answering 500');
  if (ctx.res.socket === null && !ctx.res.headersSent) ctx.req.socket.destroy();
  else sendEdgeError(ctx.res, 'internal', ctx.req.headers.accept);
}

/**
 * Runs the endpoint's stages, then `proceed` (forward) when they all say next. Nothing a stage does can escape: a
 * synchronous throw is caught here (a try/catch around a call costs nothing in V8), a rejection in the promise's
 * handler; the synchronous path allocates nothing more than before.
 */
function judge(deps: PipelineDeps, ctx: RequestContext, stages: readonly Stage[], proceed: (deps: PipelineDeps, ctx: RequestContext) => void): void {
  let verdict: Verdict | Promise<Verdict>;
  try {
    verdict = runStages(stages, ctx);
    if (typeof verdict === 'string') {
      if (verdict === 'next') proceed(deps, ctx);
      return;
    }
  } catch (err) {
    return stageFailed(deps, ctx, err);
  }
  verdict.then(
    (v) => {
      try {
        if (v === 'next') proceed(deps, ctx);
      } catch (err) {
        stageFailed(deps, ctx, err);
      }
    },
    (err: unknown) => stageFailed(deps, ctx, err),
  );
}

/** Handles one visitor request end to end. */
export function handleRequest(deps: PipelineDeps, req: IncomingMessage, res: ServerResponse, secure: boolean): void {
  const resolved = resolve(deps, req, res, secure, (code, detail) => {
    if (deps.accessLog || deps.tracing) observeRefusal(deps, req, res);
    sendEdgeError(res, code, req.headers.accept, detail);
  });
  if (resolved === null) return;
  const { ctx, endpoint } = resolved;
  // Armed first, so answers from stages (redirects, refusals) are counted and captured like forwarded ones.
  captureExchange(deps.accessLog ? deps.accessLog.around(ctx, deps.capture) : deps.capture, ctx);
  const stages = ctx.probe === true ? endpoint.probeStages : endpoint.stages;
  if (deps.tracing) traceRequest(deps.tracing, ctx);
  judge(deps, ctx, stages, forward);
}

/** A request refused before an endpoint was found still gets its access-log line and span (when they are on). */
function observeRefusal(deps: PipelineDeps, req: IncomingMessage, res: ServerResponse): void {
  const client = clientAddress(req, deps.trustedProxies ?? null);
  deps.accessLog?.refused(req, res, client);
  if (deps.tracing) traceRefusal(deps.tracing, req, res, client);
}

function forward(deps: PipelineDeps, ctx: RequestContext): void {
  const origin = originOf(ctx);
  if (origin) return deps.origins.forward(origin, forwardRequest(ctx));
  // An agent on this edge, else an edge that holds one: the request was judged here and is only carried there.
  const session = deps.registry.pick(ctx.endpoint.uuid, ctx.selector) ?? deps.relay?.target(ctx.endpoint.uuid, ctx.selector) ?? null;
  if (session === null) return refuseNoAgent(ctx);
  forwardToAgent(session, forwardRequest(ctx));
}

/** A visitor's upgrade (WebSocket): the same lookup and stages, then raw bytes over a CONNECT stream. */
export function handleUpgrade(deps: PipelineDeps, req: IncomingMessage, socket: Duplex, head: Buffer, secure: boolean): void {
  // Node hands an upgrade's socket over with no error listener of its own; a visitor's reset must not throw.
  socket.on('error', () => socket.destroy());
  // A response bound to the raw socket, so refusals and stages that answer (401, redirects) work as for requests.
  const res = responseOnSocket(req, socket);
  const resolved = resolve(deps, req, res, secure, (code) => {
    if (deps.accessLog || deps.tracing) observeRefusal(deps, req, res);
    sendEdgeError(res, code, req.headers.accept);
  });
  if (resolved === null) return;
  const { ctx, endpoint } = resolved;
  // Its line and span cover the whole connection: they end when it closes.
  deps.accessLog?.upgrade(ctx, socket, head.length);
  if (deps.tracing) traceRequest(deps.tracing, ctx, socket);
  // Refused before any stage runs or anything is forwarded (./forward/upgrade.ts says which upgrades are carried).
  const refusal = upgradeRefusal(req);
  if (refusal !== null) return sendEdgeError(res, 'upgrade_not_supported', req.headers.accept, refusal);
  // RFC 6455 §4.1 (a GET) and RFC 9110 §7.8: an upgrade request carries no body. One that does is refused before any
  // stage runs: Node hands the bytes after the head over as the new protocol's (`head`), so a stage that reads the
  // body (webhook verification) would judge an empty one while the real one went to the service behind the 101.
  if (req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0) {
    return sendEdgeError(res, 'malformed_request', req.headers.accept, 'an upgrade request carries no body (Content-Length or Transfer-Encoding)');
  }
  const proceed = () => {
    const origin = originOf(ctx);
    if (origin) {
      res.detachSocket(socket as Socket);
      return deps.origins.upgrade(origin, forwardRequest(ctx), socket, head);
    }
    const session = deps.registry.pick(ctx.endpoint.uuid, ctx.selector) ?? deps.relay?.target(ctx.endpoint.uuid, ctx.selector) ?? null;
    if (session === null) return refuseNoAgent(ctx);
    res.detachSocket(socket as Socket);
    forwardUpgrade(session, forwardRequest(ctx), socket, head);
  };
  judge(deps, ctx, endpoint.stages, proceed);
}
