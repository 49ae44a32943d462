// Content negotiation for the pages the edge answers itself: one reading of Accept (RFC 9110 §12.5.1, q-values
// honoured, through @fastify/accept-negotiator) for error pages, registration pages and the login redirect.
import { negotiate } from '@fastify/accept-negotiator';
import { LRUCache } from 'lru-cache';

/** What a visitor's Accept asks of an edge page: HTML, JSON, or nothing in particular (absent, `*` / `*\/*` only). */
export type PageFormat = 'html' | 'json' | 'any';

/**
 * The media types the edge can answer in, as the negotiator ranks them: at equal quality HTML wins (a browser's
 * `text/html, application/json` is a page load), and the wildcards rank last so a named type beats them.
 */
const SUPPORTED = ['text/html', 'application/json', 'application/xhtml+xml', 'text/*', 'application/*', '*/*'] as const;
type Supported = (typeof SUPPORTED)[number];

const FORMAT: Record<Supported, PageFormat> = {
  'text/html': 'html',
  'application/xhtml+xml': 'html',
  'text/*': 'html',
  'application/json': 'json',
  'application/*': 'json',
  '*/*': 'any',
};

// Accept values repeat (every browser sends one of a handful): answers are cached, bounded since visitors choose them.
const chosen = new LRUCache<string, PageFormat>({ max: 512 });

/**
 * Media types are case-insensitive and may carry parameters (`application/json; charset=utf-8`); the negotiator
 * reads tokens and q only, so the rest is folded and dropped first.
 */
function normalise(accept: string): string {
  const lower = accept.toLowerCase();
  return lower.includes(';') ? lower.replace(/;\s*(?!q\s*=)[^;,]*/g, '') : lower;
}

/** The format `accept` prefers; `any` when it names none the edge serves (or none at all): the caller's default. */
export function pageFormat(accept: string | undefined): PageFormat {
  if (accept === undefined) return 'any';
  let format = chosen.get(accept);
  if (format === undefined) {
    const normal = normalise(accept).trim();
    const best = normal === '*' ? null : negotiate(normal, [...SUPPORTED]);
    format = best === null ? 'any' : FORMAT[best];
    chosen.set(accept, format);
  }
  return format;
}

/** Whether the edge's own answer is JSON (the uniform error body) rather than its HTML page, HTML being the default. */
export function wantsJson(accept: string | undefined): boolean {
  return pageFormat(accept) === 'json';
}

/** Whether a visitor asks for a page by name (a browser navigating), not just anything (`*\/*`, an API client). */
export function asksForHtml(accept: string | undefined): boolean {
  return pageFormat(accept) === 'html';
}
