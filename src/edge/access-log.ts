// The edge's access log (EDGE_ACCESS_LOG, docs/operations.md "Access log"): one JSON line per visitor request, with
// the fields operators grep for, written through an asynchronous buffered destination.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { pino } from 'pino';
import type { CapturedExchange, CaptureSink } from './capture.ts';
import { upgradeAnswer } from './forward/upgrade.ts';
import { answerOf, type Answer } from './http/pages.ts';
import { decidedBy } from './pipeline/trace.ts';
import { traceIdOfRequest, type RequestContext } from './pipeline/stage.ts';
import { traceIdOf } from '../shared/tracing.ts';

/** What one line holds (keys as written). `path` never has the query string: it may carry tokens. */
export interface AccessLine {
  time: string;
  /** null: refused before an endpoint was found (an unknown host, a malformed request). */
  endpoint: string | null;
  host: string;
  method: string;
  path: string;
  status: number;
  duration_ms: number;
  bytes_in: number;
  bytes_out: number;
  /** The stage that answered the request itself (`auth`, `rate-limit`, …), else `edge` for the edge's error pages, else `forwarded`. */
  decided_by: string;
  /** The edge's error code when the edge answered (a stage's refusal, agent_error, no_agent…). */
  error?: string;
  client: string;
  /** The request's trace: the edge span's when tracing is on, else the visitor's traceparent's; absent: neither. */
  trace_id?: string;
}

type Destination = ReturnType<typeof pino.destination>;

/** A line's trace: the edge span's when the request is traced, else the visitor's traceparent's. */
const traceOfLine = (ctx: RequestContext) => traceIdOfRequest(ctx) ?? traceIdOf(ctx.req.headers.traceparent);

/** How much of an unparsed host, method or path a refused request's line keeps. */
const MAX_ECHOED = 512;

export class AccessLog {
  private constructor(private readonly out: Destination) {}

  /**
   * Opens `target`: `stdout`, or a file path (appended to, its directory created). Writes are asynchronous
   * (sonic-boom, pino's destination): lines written while one write is in flight are joined into the next, so a slow
   * disk never holds a request, and a quiet edge's line is out at once (no minimum batch that could sit unwritten).
   */
  static open(target: string): AccessLog {
    return new AccessLog(pino.destination({ dest: target === 'stdout' ? 1 : target, sync: false, mkdir: true }));
  }

  /**
   * A capture sink for one request: writes its line when the exchange is recorded (the response closed), then hands
   * the exchange on to `next`. Health probes are not captured, so they have no line either.
   */
  around(ctx: RequestContext, next: CaptureSink): CaptureSink {
    return {
      record: (exchange, detailed) => {
        this.write(ctx, exchange);
        next.record(exchange, detailed);
      },
    };
  }

  /**
   * The line of a request refused before an endpoint was found (an unknown host, a malformed request), written when
   * its response closes. Called before the refusal is sent, so its bytes are counted. What the visitor sent is
   * logged as sent, cut to a bounded length: it was not valid enough to normalise.
   */
  refused(req: IncomingMessage, res: ServerResponse, client: string): void {
    const at = Date.now();
    const started = performance.now();
    const socket = req.socket;
    const writtenBefore = socket.bytesWritten;
    const target = req.url ?? '';
    const q = target.indexOf('?');
    res.once('close', () => {
      const line: AccessLine = {
        time: new Date(at).toISOString(),
        endpoint: null,
        host: String(req.headers.host ?? '').slice(0, MAX_ECHOED),
        method: (req.method ?? '').slice(0, MAX_ECHOED),
        path: (q === -1 ? target : target.slice(0, q)).slice(0, MAX_ECHOED),
        status: 0,
        duration_ms: Math.round((performance.now() - started) * 1000) / 1000,
        bytes_in: 0,
        bytes_out: Math.max(0, socket.bytesWritten - writtenBefore),
        decided_by: 'edge',
        client,
      };
      this.finish(line, answerOf(res), traceIdOf(req.headers.traceparent));
    });
  }

  /**
   * The line of a WebSocket upgrade to a known endpoint, written when its connection closes: status 101 once switched
   * (else the answer it got), the connection's whole life as the duration, and the bytes both ways over it
   * (`headBytes`: what was read past the request head before the upgrade was handed over).
   */
  upgrade(ctx: RequestContext, socket: Duplex, headBytes: number): void {
    const at = Date.now();
    const started = performance.now();
    const readBefore = socket instanceof Socket ? socket.bytesRead : 0;
    const writtenBefore = socket instanceof Socket ? socket.bytesWritten : 0;
    socket.once('close', () => {
      const answer = upgradeAnswer(socket);
      const line: AccessLine = {
        time: new Date(at).toISOString(),
        endpoint: ctx.endpoint.uuid,
        host: ctx.host,
        method: ctx.method,
        path: ctx.path,
        status: 0,
        duration_ms: Math.round((performance.now() - started) * 1000) / 1000,
        bytes_in: socket instanceof Socket ? socket.bytesRead - readBefore + headBytes : 0,
        bytes_out: socket instanceof Socket ? Math.max(0, socket.bytesWritten - writtenBefore) : 0,
        decided_by: decidedBy(ctx, answer.error),
        client: ctx.clientIp,
      };
      this.finish(line, answer, traceOfLine(ctx));
    });
  }

  private write(ctx: RequestContext, x: CapturedExchange): void {
    const line: AccessLine = {
      time: x.at,
      endpoint: x.endpoint,
      host: x.host,
      method: x.method,
      path: x.path,
      status: 0,
      duration_ms: x.duration_ms,
      bytes_in: x.bytes_in,
      bytes_out: x.bytes_out,
      decided_by: decidedBy(ctx, x.edge_error ?? undefined),
      client: x.client_ip,
    };
    this.finish(line, { status: x.status, error: x.edge_error ?? undefined }, traceOfLine(ctx));
  }

  /** Sets the answer (status, the edge's code when it answered) and the trace, then writes the line. */
  private finish(line: AccessLine, answer: Answer, traceId: string | undefined): void {
    line.status = answer.status;
    if (answer.error !== undefined) line.error = answer.error;
    if (traceId !== undefined) line.trace_id = traceId;
    this.out.write(`${JSON.stringify(line)}\n`);
  }

  /** Writes out what is buffered and closes the file (stdout is flushed, not closed). */
  close(): Promise<void> {
    return new Promise((resolve) => {
      const out = this.out;
      if ((out as unknown as { fd: number }).fd === 1) {
        out.flush(() => resolve());
        return;
      }
      out.once('close', () => resolve());
      out.end();
    });
  }
}
