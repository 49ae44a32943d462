// Upstream of the proxy benchmark, run as a child process: a raw `node:net` HTTP/1.1 server answering GET /small (100 B)
// and /large (64 KiB) with whole preallocated responses. `node --import tsx bench/upstream.ts` prints {"port":N}.
//
// Why not node:http: its parser, IncomingMessage and ServerResponse cost tens of µs of CPU per request, on the core the
// upstream shares with the load generator; at the proxies' saturation that core filled first and capped the figures.
// Here a request costs a search for its blank line and one write of a buffer built in advance.
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { exitWithParent } from './lib/procs.ts';

/** Response bodies by path; the benchmark checks every response's length against these. */
export const BODY_BYTES = { '/small': 100, '/large': 64 * 1024 } as const;

/** What the server does with one request head. */
export interface RequestHead {
  /** The request target, e.g. "/small"; undefined when the head is malformed or not a bodiless GET. */
  path: string | undefined;
  /** The client asked to close (Connection: close, or HTTP/1.0), or the head could not be read: answer, then end. */
  close: boolean;
}

const HEAD_END = Buffer.from('\r\n\r\n');
/** A request head longer than this without its blank line is refused (Node's default limit is 16 KiB too). */
export const MAX_HEAD_BYTES = 16 * 1024;
// One scan of the header block for the fields that change the answer. The bench sends no bodies, so a request that
// announces one (a non-zero Content-Length, any Transfer-Encoding) cannot be framed here and is refused.
const FIELDS = /\r\n(connection|content-length|transfer-encoding)[ \t]*:[ \t]*([^\r]*)/gi;

const CLOSE_TOKEN = /(?:^|,)[ \t]*close[ \t]*(?:,|$)/;
const KEEP_ALIVE_TOKEN = /(?:^|,)[ \t]*keep-alive[ \t]*(?:,|$)/;

/** Reads one request head (the bytes before its blank line, latin1): request line and the fields that matter. */
export function parseRequestHead(head: string): RequestHead {
  const lineEnd = head.indexOf('\r\n');
  const line = lineEnd < 0 ? head : head.slice(0, lineEnd);
  const sp1 = line.indexOf(' ');
  const sp2 = line.indexOf(' ', sp1 + 1);
  const version = line.slice(sp2 + 1);
  if (sp1 < 0 || sp2 < 0 || (version !== 'HTTP/1.1' && version !== 'HTTP/1.0')) return { path: undefined, close: true };
  let close = version === 'HTTP/1.0';
  let bodiless = line.slice(0, sp1) === 'GET';
  if (lineEnd >= 0) {
    FIELDS.lastIndex = lineEnd;
    for (let m = FIELDS.exec(head); m !== null; m = FIELDS.exec(head)) {
      const name = m[1].toLowerCase();
      const value = m[2].trim().toLowerCase();
      // RFC 9112 §9.3: "close" ends the connection after this answer; "keep-alive" keeps an HTTP/1.0 one open.
      if (name === 'connection') close = CLOSE_TOKEN.test(value) || (close && !KEEP_ALIVE_TOKEN.test(value));
      else if (name === 'transfer-encoding' || !/^0+$/.test(value)) bodiless = false;
    }
  }
  // Anything but a bodiless GET leaves bytes we would not know how to skip: answered 400, then the connection ends.
  return bodiless ? { path: line.slice(sp1 + 1, sp2), close } : { path: undefined, close: true };
}

/** RFC 9110 §5.6.7 IMF-fixdate, as Node's http server sends it; an origin server with a clock sends Date (§6.6.1). */
const httpDate = () => new Date().toUTCString();

interface Responses {
  keepAlive: Map<string, Buffer>;
  close: Map<string, Buffer>;
  notFound: { keepAlive: Buffer; close: Buffer };
  badRequest: Buffer;
}

/** Every answer, whole (head and body in one buffer): built once a second, for the Date field, never per request. */
function buildResponses(): Responses {
  const date = httpDate();
  // The same fields node:http sent before (Keep-Alive's timeout keeps undici's pooled connections open between cases).
  const head = (status: string, length: number, type: string, close: boolean) =>
    `HTTP/1.1 ${status}\r\n${type}Content-Length: ${length}\r\nDate: ${date}\r\n` +
    (close ? 'Connection: close\r\n\r\n' : 'Connection: keep-alive\r\nKeep-Alive: timeout=120\r\n\r\n');
  const ok = (size: number, close: boolean) =>
    Buffer.concat([Buffer.from(head('200 OK', size, 'Content-Type: application/octet-stream\r\n', close), 'latin1'), Buffer.alloc(size, 'x')]);
  const paths = Object.entries(BODY_BYTES);
  return {
    keepAlive: new Map(paths.map(([path, size]) => [path, ok(size, false)])),
    close: new Map(paths.map(([path, size]) => [path, ok(size, true)])),
    notFound: { keepAlive: Buffer.from(head('404 Not Found', 0, '', false), 'latin1'), close: Buffer.from(head('404 Not Found', 0, '', true), 'latin1') },
    badRequest: Buffer.from(head('400 Bad Request', 0, '', true), 'latin1'),
  };
}

/**
 * Splits a connection's bytes into request heads: several in one read (pipelining) and one split across reads
 * both work. Returns the heads completed by `chunk`; keeps a partial head for the next read.
 */
export class RequestSplitter {
  private pending: Buffer | undefined;

  /** Heads completed by this chunk, in order; `tooLong` when a head outgrew MAX_HEAD_BYTES (the caller ends). */
  push(chunk: Buffer): { heads: string[]; tooLong: boolean } {
    let buf = chunk;
    let from = 0;
    if (this.pending) {
      // Only the tail of the old part can start the blank line, so the search resumes 3 bytes before the seam.
      from = Math.max(0, this.pending.length - 3);
      buf = Buffer.concat([this.pending, chunk]);
      this.pending = undefined;
    }
    const heads: string[] = [];
    let start = 0;
    for (;;) {
      const end = buf.indexOf(HEAD_END, from);
      if (end < 0) break;
      heads.push(buf.toString('latin1', start, end));
      start = from = end + 4;
    }
    if (start < buf.length) {
      if (buf.length - start > MAX_HEAD_BYTES) return { heads, tooLong: true };
      // A copy: the rest of a large read must not be kept alive by a few bytes of it.
      this.pending = Buffer.from(buf.subarray(start));
    }
    return { heads, tooLong: false };
  }
}

/** The upstream server (not listening yet): exported for the load generator's self-test. */
export function createUpstreamServer(): net.Server {
  let responses = buildResponses();
  const clock = setInterval(() => (responses = buildResponses()), 1_000);
  clock.unref();
  const server = net.createServer({ noDelay: true }, (socket) => {
    const splitter = new RequestSplitter();
    socket.on('error', () => socket.destroy()); // a reset by the peer: nothing to answer
    socket.on('data', (chunk: Buffer) => {
      const { heads, tooLong } = splitter.push(chunk);
      // Pipelined answers leave in one writev.
      if (heads.length > 1) socket.cork();
      for (const raw of heads) {
        const req = parseRequestHead(raw);
        if (req.path === undefined) {
          socket.end(responses.badRequest);
          return;
        }
        const found = (req.close ? responses.close : responses.keepAlive).get(req.path);
        const answer = found ?? (req.close ? responses.notFound.close : responses.notFound.keepAlive);
        if (req.close) {
          socket.end(answer);
          return;
        }
        socket.write(answer);
      }
      if (heads.length > 1) socket.uncork();
      if (tooLong) socket.end(responses.badRequest);
    });
  });
  server.on('close', () => clearInterval(clock));
  return server;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const server = createUpstreamServer();
  server.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
    process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
  });
  exitWithParent();
}
