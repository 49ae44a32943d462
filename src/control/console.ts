// The web console at /console/ on the control port: static files, read and compressed once at start, served with a
// strict Content-Security-Policy. The console is a client of the public /v1 API like any other; nothing here is an API.
//
// Every file is the node's own (no CDN): the console's modules from src/console, and two vendored browser libraries
// from node_modules (htm's Preact build, uPlot). No build step: `npm install && npm start` serves it as it is.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { dirname, extname, join, relative, sep } from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, constants as zlib, gzipSync } from 'node:zlib';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ControlApp } from './http.ts';

export const CONSOLE_PREFIX = '/console/';

/**
 * No inline script or style, nothing from elsewhere, no framing, no plugins; the API is same-origin. Styles set
 * from script through the CSSOM (Preact's `style` objects, uPlot's sizes) are not inline styles to CSP.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
};

interface Asset {
  type: string;
  body: Buffer;
  gzip: Buffer;
  br: Buffer;
  etag: string;
}

const require = createRequire(import.meta.url);
const SOURCE = join(dirname(fileURLToPath(import.meta.url)), '..', 'console');

/** The vendored libraries, by the path the console's modules import them from. */
const VENDOR: Record<string, string> = {
  // htm's build that carries Preact and its hooks in one module, so the browser needs no import map.
  'vendor/htm-preact.mjs': join(dirname(require.resolve('htm')), '..', 'preact', 'standalone.mjs'),
  'vendor/uplot.js': join(dirname(require.resolve('uplot')), 'uPlot.iife.min.js'),
  'vendor/uplot.css': join(dirname(require.resolve('uplot')), 'uPlot.min.css'),
};

/** Where index.html takes the list of the console's modules (loadConsoleAssets). */
const PRELOAD_MARK = '<!-- modulepreload -->';

function asset(path: string): Asset {
  return assetOf(readFileSync(path), TYPES[extname(path)] ?? 'application/octet-stream');
}

function assetOf(body: Buffer, type: string): Asset {
  return {
    type,
    body,
    gzip: gzipSync(body, { level: 9 }),
    br: brotliCompressSync(body, { params: { [zlib.BROTLI_PARAM_QUALITY]: 11 } }),
    etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
  };
}

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : [path];
  });
}

/** Every file of the console by its path under /console/, read once. */
export function loadConsoleAssets(source = SOURCE): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  for (const path of walk(source)) {
    if (!TYPES[extname(path)]) continue;
    assets.set(relative(source, path).split(sep).join('/'), asset(path));
  }
  for (const [path, file] of Object.entries(VENDOR)) assets.set(path, asset(file));
  // The browser learns of a module only when the one importing it has arrived: a waterfall of round trips, one per
  // level of imports. Announcing every module in the page lets it fetch them all at once.
  const index = assets.get('index.html');
  if (index) {
    const modules = [...assets.keys()].filter((p) => p.endsWith('.js') || p.endsWith('.mjs')).filter((p) => p !== 'vendor/uplot.js').sort();
    const links = modules.map((p) => `    <link rel="modulepreload" href="${CONSOLE_PREFIX}${p}" />`).join('\n');
    const text = index.body.toString('utf8');
    if (text.includes(PRELOAD_MARK)) assets.set('index.html', assetOf(Buffer.from(text.replace(PRELOAD_MARK, links.trimStart())), index.type));
  }
  return assets;
}

let loaded: Map<string, Asset> | null = null;
/** The files as shipped, read and compressed once per process (every control app of a test run shares them). */
function defaultAssets(): Map<string, Asset> {
  loaded ??= loadConsoleAssets();
  return loaded;
}

/** The encoding to send: brotli, then gzip, where the browser's Accept-Encoding allows it (q=0 refuses). */
function encodingFor(accept: string | undefined): 'br' | 'gzip' | null {
  if (!accept) return null;
  const allowed = new Set<string>();
  for (const part of accept.split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    if (q && Number(q.slice(2)) === 0) continue;
    allowed.add(name!);
  }
  if (allowed.has('br')) return 'br';
  if (allowed.has('gzip')) return 'gzip';
  return null;
}

function send(req: FastifyRequest, reply: FastifyReply, file: Asset, cache: string): FastifyReply {
  reply
    .header('content-type', file.type)
    .header('content-security-policy', CONSOLE_CSP)
    .header('x-frame-options', 'DENY')
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('cache-control', cache)
    .header('etag', file.etag)
    .header('vary', 'accept-encoding');
  if (req.headers['if-none-match'] === file.etag) return reply.status(304).send();
  const encoding = encodingFor(req.headers['accept-encoding']);
  if (encoding) reply.header('content-encoding', encoding);
  return reply.send(encoding === 'br' ? file.br : encoding === 'gzip' ? file.gzip : file.body);
}

/**
 * GET /console/ and everything under it. A path naming a file serves it; any other path is a screen of the console
 * (its router reads the URL), so a shared link or a reload lands on index.html; a missing file with an extension is 404.
 */
export function consoleRoutes(app: ControlApp, assets = defaultAssets()): void {
  const index = assets.get('index.html');
  if (!index) throw new Error('the console has no index.html');
  // The router ignores a trailing slash, so this route also takes /console/: only the bare form is redirected, so
  // that the console's relative URLs resolve under /console/.
  app.get('/console', { config: { public: true }, schema: { hide: true } }, async (req, reply) =>
    req.url.split('?')[0] === '/console' ? reply.redirect(CONSOLE_PREFIX, 301) : send(req, reply, index, 'no-cache'),
  );
  app.get(`${CONSOLE_PREFIX}*`, { config: { public: true }, schema: { hide: true } }, async (req, reply) => {
    const path = (req.params as { '*': string })['*'];
    const file = assets.get(path);
    // Modules and styles change only with a release: revalidated by ETag, never served stale after one.
    if (file) return send(req, reply, file, 'no-cache');
    if (extname(path) !== '') return reply.status(404).header('content-type', 'text/plain; charset=utf-8').send('Not found\n');
    return send(req, reply, index, 'no-cache');
  });
}
