// Baseline of the proxy benchmark, run as a child process: a bare http-proxy-3 proxy with a keep-alive http.Agent, so
// "edge ÷ baseline" reads as what the edge's pipeline and tunnel add to proxying at all. Prints {"port":N} when ready.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { createProxyServer } from 'http-proxy-3';
import { exitWithParent } from './lib/procs.ts';

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const upstreamPort = Number(process.argv[2]);
  if (!Number.isInteger(upstreamPort) || upstreamPort <= 0) {
    process.stderr.write('usage: baseline-proxy.ts <upstreamPort>\n');
    process.exit(2);
  }
  // Defaults otherwise (no xfwd, no changeOrigin): the cheapest forward http-proxy-3 offers. Without a keep-alive
  // agent it would send `connection: close` and open a connection per request, which no real deployment does.
  const agent = new http.Agent({ keepAlive: true, maxFreeSockets: 256 });
  // A parsed URL, not a string: http-proxy-3 would otherwise re-parse the target on every request.
  const proxy = createProxyServer({ target: new URL(`http://127.0.0.1:${upstreamPort}`), agent });
  proxy.on('error', (_err, _req, res) => {
    // A failed forward must be visible to the load generator (it counts non-200 answers as errors).
    if (res instanceof http.ServerResponse && !res.headersSent) res.writeHead(502, { 'content-length': 0 }).end();
    else res.destroy();
  });
  const server = http.createServer((req, res) => proxy.web(req, res));
  server.keepAliveTimeout = 120_000;
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
  });
  exitWithParent();
}
