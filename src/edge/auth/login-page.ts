// The page a browser sees when an endpoint offers several identity providers: one link per provider, to the edge's
// login path. Provider names come from the endpoint's owner, so every one is escaped; the page runs no script.
import type { ServerResponse } from 'node:http';
import { escapeHtml } from '../http/pages.ts';

import { LOGIN_PATH } from '../../shared/public-urls.ts';

// The reserved paths live in shared/, where the control API reads the callback to show as each provider's redirect URI.
export { AUTH_PREFIX, CALLBACK_PATH, LOGIN_PATH, LOGOUT_PATH } from '../../shared/public-urls.ts';

/** The login path for one provider (or for the choice, without one), returning to `returnTo` afterwards. */
export function loginHref(returnTo: string, provider?: number): string {
  const query = provider === undefined ? '' : `provider=${provider}&`;
  return `${LOGIN_PATH}?${query}return_to=${encodeURIComponent(returnTo)}`;
}

/** The HTML of the choice: the host named in the title, a link per provider. */
export function loginPage(host: string, providers: ReadonlyArray<{ id: number; name: string }>, returnTo: string): string {
  const items = providers.map((p) => `<li><a href="${escapeHtml(loginHref(returnTo, p.id))}">${escapeHtml(p.name)}</a></li>`).join('');
  return (
    `<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">` +
    `<title>Sign in to ${escapeHtml(host)}</title></head><body><h1>Sign in to ${escapeHtml(host)}</h1>` +
    `<p>Choose how to sign in:</p><ul>${items}</ul></body></html>\n`
  );
}

/**
 * Headers for every page and redirect of the login flow: never stored (they carry one visitor's cookies and
 * state), never framed (clickjacking a login), no script or outside resource at all.
 */
export const LOGIN_FLOW_HEADERS = {
  'cache-control': 'no-store',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'; form-action 'none'",
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
} as const;

export function sendLoginPage(res: ServerResponse, html: string, head: boolean): void {
  res.writeHead(200, { ...LOGIN_FLOW_HEADERS, 'content-type': 'text/html; charset=utf-8', 'content-length': Buffer.byteLength(html) });
  res.end(head ? undefined : html);
}
