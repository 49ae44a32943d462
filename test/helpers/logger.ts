// A pino logger whose entries a test reads back, for checking what the code logged (a warning, a refused config, a
// failed pass) rather than only what it did.
import { Writable } from 'node:stream';
import { pino, type Level, type Logger } from 'pino';

/** A logger at `level` and the entries it wrote, parsed, in order. */
export function capturedLogger(level: Level = 'warn'): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  return { logger: pino({ level }, stream), lines };
}
