// Micro-benchmarks of the request-validation checks on the hot path, each beside the check it replaced: the Host
// parser, the edge-owned header test over a typical visitor header list, and the path normaliser's fast path.
// `npx tsx bench/request-validation.ts`; a few seconds; read the figures as ratios to the old check.
import { Bench } from 'tinybench';
import { parseAuthority } from '../src/edge/http/host.ts';
import { normalizePath } from '../src/edge/http/normalize-path.ts';
import { isEdgeOwnedLower } from '../src/shared/edge-headers.ts';

/** The resolver's Host check before request validation: split at the first colon, no validation. */
function oldHostOf(header: string): string | null {
  const host = header.startsWith('[') ? header.slice(0, header.indexOf(']') + 1) : header.split(':')[0];
  return host.length > 0 && host.length <= 253 ? host.toLowerCase() : null;
}

const OLD_OWNED = new Set(['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-forwarded-port', 'forwarded', 'x-real-ip']);

// What a browser sends, lower-cased as the header pass sees the names; one underscore name among them.
const NAMES = [
  'host', 'user-agent', 'accept', 'accept-language', 'accept-encoding', 'referer', 'cookie', 'sec-fetch-dest',
  'sec-fetch-mode', 'sec-fetch-site', 'upgrade-insecure-requests', 'cache-control', 'x_requested_with',
];
const HOSTS = ['quiet-river-stone.edge.localhost', 'app.example.com:8443', 'API.Example.COM'];
const PATHS = ['/api/v1/items/42', '/static/app.3f9a1c.js', '/a/../b//c'];

const bench = new Bench({ time: 500 });
let sink = 0;
bench
  .add('host: old split at ":"', () => {
    for (const h of HOSTS) sink += oldHostOf(h)!.length;
  })
  .add('host: parseAuthority', () => {
    for (const h of HOSTS) sink += parseAuthority(h)!.host.length;
  })
  .add('headers: old Set.has', () => {
    for (const n of NAMES) if (OLD_OWNED.has(n)) sink++;
  })
  .add('headers: isEdgeOwnedLower', () => {
    for (const n of NAMES) if (isEdgeOwnedLower(n)) sink++;
  })
  .add('path: normalizePath', () => {
    for (const p of PATHS) sink += normalizePath(p)!.length;
  });
await bench.run();
console.table(bench.table());
// Read once, so no case's result is dead code the compiler could drop.
if (sink < 0) console.log(sink);
