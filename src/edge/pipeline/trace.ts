// The edge's span per visitor request (docs/operations.md "Traces"): a SERVER span continuing the visitor's
// traceparent, an event per policy stage that ran, and the span's own traceparent on what is forwarded.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { SpanStatusCode } from '@opentelemetry/api';
import { injectSpan, parentFrom, SpanKind, type Span, type Tracing } from '../../shared/tracing.ts';
import type { Duplex } from 'node:stream';
import { answerOf, edgeErrorOf, type Answer } from '../http/pages.ts';
import { upgradeAnswer } from '../forward/upgrade.ts';
import type { RequestContext, Verdict } from './stage.ts';

/**
 * Starts the request's span (child of the visitor's valid traceparent, else a new trace), names it as the parent on
 * the forwarded request (replacing the visitor's traceparent through upstreamHeaders, whose names the forwarders strip
 * from the visitor's fields; tracestate is carried on) and ends it when the response closes (an `upgrade`: when its
 * connection does). Called only with
 * tracing on: with it off, the visitor's own traceparent passes through untouched, as any end-to-end field does.
 */
export function traceRequest(tracing: Tracing, ctx: RequestContext, upgrade?: Duplex): void {
  const { req, res } = ctx;
  const span = tracing.tracer.startSpan(`${ctx.method} edge`, { kind: SpanKind.SERVER }, parentFrom(req.headers));
  // The visitor's tracestate is the trace's: the propagator carries the one it extracted with the parent. An unsampled
  // span is passed on too (its flags say so, and the agent's parent-based sampler follows), then nothing more is done.
  injectSpan(span, ctx.upstreamHeaders);
  if (!span.isRecording()) return;
  ctx.span = span;
  span.setAttributes({
    'edge.endpoint': ctx.endpoint.uuid,
    'server.address': ctx.host,
    'http.request.method': ctx.method,
    // The path only: a query string may carry tokens.
    'url.path': ctx.path,
    'url.scheme': ctx.secure ? 'https' : 'http',
    'client.address': ctx.clientIp,
  });
  const socket = req.socket;
  const writtenBefore = socket.bytesWritten;
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    const answer = upgrade === undefined ? answerOf(res) : upgradeAnswer(upgrade);
    span.setAttribute('edge.bytes_out', Math.max(0, socket.bytesWritten - writtenBefore));
    endSpan(span, answer, decidedBy(ctx, answer.error));
  };
  // An upgrade's span lasts as long as its connection (the response is detached from the socket once switched).
  if (upgrade === undefined) res.on('close', end);
  else upgrade.once('close', end);
}

/** Who answered: the stage that did, else the edge when it sent one of its error pages, else what was forwarded to. */
export function decidedBy(ctx: RequestContext, error: string | undefined): string {
  return ctx.decidedBy ?? (error === undefined ? 'forwarded' : 'edge');
}

/**
 * The span of a request refused before an endpoint was found (an unknown host, a malformed request): the same SERVER
 * span, with what could be read of the request, ended when the refusal closes. Called before the refusal is sent.
 */
export function traceRefusal(tracing: Tracing, req: IncomingMessage, res: ServerResponse, client: string): void {
  const span = tracing.tracer.startSpan(`${req.method ?? 'GET'} edge`, { kind: SpanKind.SERVER }, parentFrom(req.headers));
  if (!span.isRecording()) return;
  span.setAttributes({ 'http.request.method': req.method ?? '', 'client.address': client });
  res.once('close', () => endSpan(span, answerOf(res), 'edge'));
}

/** Ends a request's span with what the visitor was answered and who decided; no answer or a 5xx marks it failed. */
function endSpan(span: Span, answer: Answer, decided: string): void {
  span.setAttribute('http.response.status_code', answer.status);
  if (answer.error !== undefined) span.setAttribute('edge.error', answer.error);
  span.setAttribute('edge.decided_by', decided);
  if (answer.status >= 500 || answer.status === 0) span.setStatus({ code: SpanStatusCode.ERROR });
  span.end();
}

/**
 * One event per stage that ran: `stage <name>` with its outcome, `passed`, `refused` with the edge's error code, or
 * `answered` (a redirect, a login page). Only names and codes: never a header, credential or claim.
 */
export function stageEvent(span: Span, ctx: RequestContext, stage: string, verdict: Verdict): void {
  if (verdict === 'next') return void span.addEvent(`stage ${stage}`, { 'edge.stage': stage, 'edge.outcome': 'passed' });
  const code = edgeErrorOf(ctx.res);
  span.addEvent(`stage ${stage}`, code === undefined ? { 'edge.stage': stage, 'edge.outcome': 'answered' } : { 'edge.stage': stage, 'edge.outcome': 'refused', 'edge.error': code });
}
