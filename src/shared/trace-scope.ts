// Which trace the code running now works for, so every log line written on its behalf names it (`trace_id`, added
// by the loggers of src/shared/log.ts). Entered only with tracing on: until then Node's async hooks stay off.
import { AsyncLocalStorage } from 'node:async_hooks';

const scope = new AsyncLocalStorage<string>();

/**
 * Runs `fn` as work of trace `traceId`: it, and every callback and promise it starts, log with that id. Work shared
 * between requests (a JWKS fetch two requests wait on) logs with the trace of the request that started it.
 */
export function inTrace<T>(traceId: string, fn: () => T): T {
  return scope.run(traceId, fn);
}

/** The trace the running code works for, if it was started inside inTrace. */
export function currentTraceId(): string | undefined {
  return scope.getStore();
}
