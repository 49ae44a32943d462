// Structured JSON logging shared by every role: one pino root logger, children per component.
// Disabled levels cost a no-op call, so debug logging on hot paths is free when off.
import { pino, type Logger } from 'pino';
import { currentTraceId } from './trace-scope.ts';

export type { Logger };

/**
 * A line written on behalf of a traced request or job carries its `trace_id` (src/shared/trace-scope.ts). A new
 * object each time: pino merges the line's own fields into it.
 */
function traceField(): object {
  const traceId = currentTraceId();
  return traceId === undefined ? {} : { trace_id: traceId };
}

/** A root logger writing JSON lines to `destination` (default stdout). */
export function createLogger(level: string, bindings: Record<string, unknown> = {}, destination?: pino.DestinationStream): Logger {
  return pino({ level, base: { pid: process.pid, ...bindings }, timestamp: pino.stdTimeFunctions.isoTime, mixin: traceField }, destination);
}
