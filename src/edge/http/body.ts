// The one reader of a visitor's request body held whole by a stage (webhook verification, registration forms):
// bounded in bytes before and while reading, optionally in time, and never confused with an upgrade's new protocol.
import type { IncomingMessage } from 'node:http';

/** The body passed its limit (a declared Content-Length over it is refused before a byte is read). */
export class BodyTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`the request body is larger than ${limit} bytes`);
  }
}

/** The body had not all arrived within the time allowed once the head had. */
export class BodyTimeout extends Error {
  constructor(readonly ms: number) {
    super(`the request body did not arrive within ${ms} ms`);
  }
}

/** Node's flag on a request handed over by the 'upgrade' event (not in its type definitions). */
export function isUpgradeRequest(req: IncomingMessage): boolean {
  return (req as IncomingMessage & { upgrade?: boolean }).upgrade === true;
}

export interface BodyLimits {
  /** The most bytes read; one more rejects with BodyTooLarge. */
  maxBytes: number;
  /** How long the body may take to arrive; absent: as long as the connection's own timeouts allow. */
  timeoutMs?: number;
}

/**
 * The request body, whole. Rejects with BodyTooLarge, BodyTimeout, the stream's error, or an Error when the visitor
 * closes before the end; the rest is then left unread (the stream paused), so the caller answers and closes the
 * connection rather than keep it for another request. An upgrade's body is empty: its bytes after the head belong
 * to the new protocol.
 */
export function readRequestBody(req: IncomingMessage, limits: BodyLimits): Promise<Buffer> {
  const { maxBytes, timeoutMs } = limits;
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > maxBytes) return Promise.reject(new BodyTooLarge(maxBytes));
  if (isUpgradeRequest(req)) return Promise.resolve(Buffer.alloc(0));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (err: Error | null) => {
      if (timer !== undefined) clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', finish);
      req.off('close', onClose);
      if (err !== null) {
        req.pause();
        reject(err);
      } else resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) return finish(new BodyTooLarge(maxBytes));
      chunks.push(chunk);
    };
    const onEnd = () => finish(null);
    const onClose = () => {
      if (!req.complete) finish(new Error('the visitor closed the request before its body ended'));
    };
    const timer = timeoutMs === undefined ? undefined : setTimeout(() => finish(new BodyTimeout(timeoutMs)), timeoutMs);
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', finish);
    req.on('close', onClose);
  });
}
