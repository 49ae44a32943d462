// The HTML of the registration pages (src/edge/stages/register.ts): the invite and self-registration forms and the
// answer once registered. Everything echoed (host, names, e-mails, messages, the form's own URL) is escaped; no script.
import type { ServerResponse } from 'node:http';
import { escapeHtml } from '../http/pages.ts';

/**
 * Headers of every registration page: never stored (they carry a form token and an invite URL), never framed
 * (clickjacking a consent button), no referrer (the invite token is in the URL), forms posted to this origin only.
 */
export const REGISTER_PAGE_HEADERS = {
  'cache-control': 'no-store',
  'content-security-policy': "default-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
} as const;

/** What the form asks of the visitor: a username and password (basic mode), or a click that links their login. */
export type FormKind =
  | { kind: 'password'; username: string }
  /** Links the login's identity to an invite (`invite`) or asks for access with it (`self`). */
  | { kind: 'link' | 'self'; provider: string; account: string };

export interface FormPage {
  host: string;
  /** The form's action: the page's own path and query. */
  action: string;
  /** The CSRF field's value (an HMAC'd form token). */
  csrf: string;
  form: FormKind;
  /** Who the invite is for (its e-mail or identifier), when known. */
  invitee?: string;
  /** Why the previous submission was refused. */
  error?: string;
}

function page(title: string, body: string): string {
  return (
    `<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">` +
    `<title>${escapeHtml(title)}</title></head><body>${body}</body></html>\n`
  );
}

export function formPage(p: FormPage): string {
  const host = escapeHtml(p.host);
  const error = p.error === undefined ? '' : `<p role="alert"><strong>${escapeHtml(p.error)}</strong></p>`;
  const csrf = `<input type="hidden" name="csrf" value="${escapeHtml(p.csrf)}">`;
  const action = escapeHtml(p.action);
  const form = p.form;
  if (form.kind === 'password') {
    const invitee = p.invitee === undefined ? '' : ` as <strong>${escapeHtml(p.invitee)}</strong>`;
    return page(
      `Accept your invitation to ${p.host}`,
      `<h1>Accept your invitation to ${host}</h1><p>You were invited${invitee}. Choose the username and password you will sign in with.</p>${error}` +
        `<form method="post" action="${action}">${csrf}` +
        `<p><label>Username <input name="username" autocomplete="username" required maxlength="128" value="${escapeHtml(form.username)}"></label></p>` +
        `<p><label>Password <input type="password" name="password" autocomplete="new-password" required minlength="8" maxlength="72"></label></p>` +
        `<p><label>Confirm password <input type="password" name="confirm" autocomplete="new-password" required minlength="8" maxlength="72"></label></p>` +
        `<p><button type="submit">Register</button></p></form>`,
    );
  }
  const account = `<strong>${escapeHtml(form.account)}</strong> (${escapeHtml(form.provider)})`;
  if (form.kind === 'link') {
    const invitee = p.invitee === undefined ? '' : ` for <strong>${escapeHtml(p.invitee)}</strong>`;
    return page(
      `Accept your invitation to ${p.host}`,
      `<h1>Accept your invitation to ${host}</h1><p>This invitation${invitee} will be linked to the account you are signed in with: ${account}.</p>${error}` +
        `<form method="post" action="${action}">${csrf}<p><button type="submit">Link this account</button></p></form>`,
    );
  }
  return page(
    `Request access to ${p.host}`,
    `<h1>Request access to ${host}</h1><p>You are signed in as ${account}. Registering gives this account access to ${host}.</p>${error}` +
      `<form method="post" action="${action}">${csrf}<p><button type="submit">Request access</button></p></form>`,
  );
}

/** The answer once registered (or when the visitor already has access): what happened and a link into the endpoint. */
export function donePage(host: string, heading: string, message: string): string {
  return page(heading, `<h1>${escapeHtml(heading)}</h1><p>${escapeHtml(message)}</p><p><a href="/">Continue to ${escapeHtml(host)}</a></p>`);
}

/** Sends a page with the registration headers; `extra` adds fields (X-Edge-Error on a form shown again after a refusal). */
export function sendPage(res: ServerResponse, status: number, html: string, head: boolean, extra: Record<string, string> = {}): void {
  res.writeHead(status, { ...REGISTER_PAGE_HEADERS, ...extra, 'content-type': 'text/html; charset=utf-8', 'content-length': Buffer.byteLength(html) });
  res.end(head ? undefined : html);
}
