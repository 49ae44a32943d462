// Structured JSON logging shared by every role: one pino root logger, children per component.
// Disabled levels cost a no-op call, so debug logging on hot paths is free when off.
import { pino, type Logger } from 'pino';

export type { Logger };

/** A root logger writing JSON lines to `destination` (default stdout). */
export function createLogger(level: string, bindings: Record<string, unknown> = {}, destination?: pino.DestinationStream): Logger {
  return pino({ level, base: { pid: process.pid, ...bindings }, timestamp: pino.stdTimeFunctions.isoTime}, destination);
}
