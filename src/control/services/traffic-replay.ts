// The traffic replay client: one HTTP request to an edge's public listener, made as a visitor's request for a
// captured exchange (docs/traffic.md "API"), and the per-account and per-process bounds on replays in flight.
import http from 'node:http';
import https from 'node:https';

export const REPLAY_RESPONSE_LIMIT = 1024 * 1024;
export const REPLAY_TIMEOUT_MS = 30_000;

/**
 * Never re-sent: hop-by-hop headers (RFC 9110 7.6.1), what the new connection frames itself (Host, Content-Length),
 * an Expect that would wait for a 100 that nobody reads, and credentials, which capture redacts anyway.
 */
const NOT_RESENT = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'host',
  'content-length',
  'expect',
  'authorization',
  'proxy-authorization',
  'cookie',
]);
/** What capture writes in place of a secret header's value. */
const REDACTED = /^\[?redacted\]?$/i;

/** The captured request headers as they are sent again: Host names the endpoint, X-Replay-Of the log row. */
export function replayHeaders(captured: Record<string, unknown> | null, hostname: string, logId: number, bodyLength: number): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(captured ?? {})) {
    const key = name.toLowerCase();
    if (NOT_RESENT.has(key) || key.startsWith(':')) continue;
    const values = (Array.isArray(value) ? value : [value]).filter((v): v is string => typeof v === 'string' && !REDACTED.test(v));
    if (values.length === 0) continue;
    out[key] = values.length === 1 ? values[0] : values;
  }
  out.host = hostname;
  out['x-replay-of'] = String(logId);
  if (bodyLength > 0) out['content-length'] = String(bodyLength);
  return out;
}

export interface ReplayTarget {
  origin: string;
  verifyTls: boolean;
}

export interface ReplayAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  truncated: boolean;
  durationMs: number;
}

/** Sends one request to `origin` with Host (and SNI) naming the endpoint; reads at most the response limit. */
export function sendReplay(
  target: ReplayTarget,
  request: { method: string; path: string; hostname: string; headers: http.OutgoingHttpHeaders; body: Buffer },
): Promise<ReplayAnswer> {
  const url = new URL(target.origin);
  const secure = url.protocol === 'https:';
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const options: https.RequestOptions = {
      host: url.hostname.replace(/^\[|\]$/g, ''),
      port: url.port || (secure ? 443 : 80),
      method: request.method,
      path: request.path,
      headers: request.headers,
      agent: false,
      signal: AbortSignal.timeout(REPLAY_TIMEOUT_MS),
    };
    if (secure) Object.assign(options, { servername: request.hostname, rejectUnauthorized: target.verifyTls });
    const req = (secure ? https : http).request(options, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let truncated = false;
      const done = () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks, size), truncated, durationMs: performance.now() - started });
      res.on('data', (chunk: Buffer) => {
        if (truncated) return;
        const room = REPLAY_RESPONSE_LIMIT - size;
        if (chunk.length > room) {
          chunks.push(chunk.subarray(0, room));
          size += room;
          truncated = true;
          res.destroy();
          return done();
        }
        chunks.push(chunk);
        size += chunk.length;
      });
      res.on('end', done);
      // Cut mid-body after the head: what arrived is the answer, marked incomplete.
      res.on('error', () => {
        truncated = true;
        done();
      });
    });
    req.on('error', reject);
    req.end(request.body.length > 0 ? request.body : undefined);
  });
}

/**
 * Replays in flight, per account and in this control process. Each holds a socket for up to 30 s and buffers up to
 * 1 MiB of answer, so unbounded they would let one account pile up memory and sockets against its own slow endpoint.
 */
export const REPLAY_LIMITS = { perAccount: 4, perProcess: 64 } as const;

export class ReplaySlots {
  private readonly byAccount = new Map<number, number>();
  private total = 0;

  /** A release function, or null when the account or the process is at its limit. */
  take(accountId: number): (() => void) | null {
    const held = this.byAccount.get(accountId) ?? 0;
    if (held >= REPLAY_LIMITS.perAccount || this.total >= REPLAY_LIMITS.perProcess) return null;
    this.byAccount.set(accountId, held + 1);
    this.total++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      const left = (this.byAccount.get(accountId) ?? 1) - 1;
      if (left === 0) this.byAccount.delete(accountId);
      else this.byAccount.set(accountId, left);
    };
  }
}
