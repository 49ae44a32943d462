// Structured JSON logging shared by every role: one pino root logger, children per component.
// Disabled levels cost a no-op call, so debug logging on hot paths is free when off.
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string, bindings: Record<string, unknown> = {}): Logger {
  return pino({ level, base: { pid: process.pid, ...bindings }, timestamp: pino.stdTimeFunctions.isoTime });
}
