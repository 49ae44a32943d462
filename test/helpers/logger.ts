// A pino logger whose entries a test reads back, for checking what the code logged (a warning, a refused config, a
// failed pass) rather than only what it did.
import { Writable } from 'node:stream';
import type { Level, Logger } from 'pino';
import { createLogger } from '../../src/shared/log.ts';

/** A logger at `level` and the entries it wrote, parsed, in order. */
export function capturedLogger(level: Level = 'warn'): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  // The roles' own logger configuration (fields, timestamps), writing to the test.
  return { logger: createLogger(level, {}, stream), lines };
}
