// Upstream of the proxy benchmark, run as a child process: GET /small (100 B) and /large (64 KiB) from preallocated
// buffers, so its own cost per request is small and steady. `node --import tsx bench/upstream.ts` prints {"port":N}.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { exitWithParent } from './lib/procs.ts';

/** Response bodies by path; the benchmark checks every response's length against these. */
export const BODY_BYTES = { '/small': 100, '/large': 64 * 1024 } as const;

const bodies = new Map<string, Buffer>(Object.entries(BODY_BYTES).map(([path, size]) => [path, Buffer.alloc(size, 'x')]));

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const server = http.createServer((req, res) => {
    const body = bodies.get(req.url ?? '');
    req.resume(); // a request body, if any, is not wanted; reading it keeps the connection reusable
    if (!body) {
      res.writeHead(404, { 'content-length': 0 });
      return void res.end();
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length });
    res.end(body);
  });
  // Longer than any pause between cases, so pooled connections from the proxies stay open for the whole run.
  server.keepAliveTimeout = 120_000;
  server.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
    process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
  });
  exitWithParent();
}
