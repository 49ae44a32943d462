// The pages the edge answers with itself (unknown host, no agent, disabled endpoint...): the registry's code and
// status, as a small HTML page or the uniform JSON body, and always in the X-Edge-Error header for tooling.
import type { ServerResponse } from 'node:http';
import { ERROR_CODES, type ErrorCode } from '../../shared/errors.ts';
import { wantsJson as prefersJson } from './negotiate.ts';

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** Text for HTML content or a quoted attribute value: the five characters that could end either escaped. */
export const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ESCAPES[c]);

/**
 * Responses the edge answered itself, with their code. Capture and metrics read it here rather than from the
 * X-Edge-Error header: writeHead's headers are not readable back, and an upstream's response may carry the header.
 */
const answered = new WeakMap<ServerResponse, ErrorCode>();

/** The edge's own error code on `res`, when the edge answered it (sendEdgeError); undefined for upstream answers. */
export function edgeErrorOf(res: ServerResponse): ErrorCode | undefined {
  return answered.get(res);
}

/** What a visitor was answered, for spans and the access log: the status (0: none was sent) and the edge's code. */
export interface Answer {
  status: number;
  /** An ErrorCode; a string here, as the traffic record keeps it. */
  error?: string;
}

export function answerOf(res: ServerResponse): Answer {
  return res.headersSent ? { status: res.statusCode, error: answered.get(res) } : { status: 0 };
}

/**
 * Answers with the registry's page for `code`. `link`, when given, is offered on the HTML page (an edge path the
 * visitor may follow, such as the RBAC registration page); the JSON body carries its href as `link`.
 */
export function sendEdgeError(res: ServerResponse, code: ErrorCode, accept: string | undefined, detail?: string, link?: { href: string; text: string }): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  answered.set(res, code);
  const [status, message] = ERROR_CODES[code];
  // HTML unless Accept prefers JSON (./negotiate.ts): a browser, curl's */* and a client naming neither get the page.
  const wantsJson = prefersJson(accept);
  const body = wantsJson
    ? JSON.stringify({ error: message, code, ...(detail === undefined ? {} : { detail }), ...(link === undefined ? {} : { link: link.href }) })
    : `<!doctype html><html><head><meta charset="utf-8"><title>${status} ${escapeHtml(message)}</title></head>` +
      `<body><h1>${status}</h1><p>${escapeHtml(message)}.</p>${detail ? `<p>${escapeHtml(detail)}</p>` : ''}` +
      (link ? `<p><a href="${escapeHtml(link.href)}">${escapeHtml(link.text)}</a></p>` : '') +
      `<p><small>${code}</small></p></body></html>\n`;
  res.writeHead(status, {
    'content-type': wantsJson ? 'application/json' : 'text/html; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    'x-edge-error': code,
  });
  res.end(body);
}
