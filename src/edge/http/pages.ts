// The pages the edge answers with itself (unknown host, no agent, disabled endpoint...): the registry's code and
// status, as a small HTML page or the uniform JSON body, and always in the X-Edge-Error header for tooling.
import type { ServerResponse } from 'node:http';
import { ERROR_CODES, type ErrorCode } from '../../shared/errors.ts';

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ESCAPES[c]);

export function sendEdgeError(res: ServerResponse, code: ErrorCode, accept: string | undefined, detail?: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const [status, message] = ERROR_CODES[code];
  const wantsJson = accept !== undefined && /application\/json/i.test(accept) && !/text\/html/i.test(accept);
  const body = wantsJson
    ? JSON.stringify(detail === undefined ? { error: message, code } : { error: message, code, detail })
    : `<!doctype html><html><head><meta charset="utf-8"><title>${status} ${escapeHtml(message)}</title></head>` +
      `<body><h1>${status}</h1><p>${escapeHtml(message)}.</p>${detail ? `<p>${escapeHtml(detail)}</p>` : ''}` +
      `<p><small>${code}</small></p></body></html>\n`;
  res.writeHead(status, {
    'content-type': wantsJson ? 'application/json' : 'text/html; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    'x-edge-error': code,
  });
  res.end(body);
}
