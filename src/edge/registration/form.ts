// A registration form posted to the edge (docs/rbac.md "Invites and self-registration"): the CSRF defences (same
// origin, a signed form token bound to the endpoint and what the form is for, short-lived) and the bounded read.
import { createHmac } from 'node:crypto';
import type { ErrorCode } from '../../shared/errors.ts';
import type { SecretBox } from '../../shared/secrets.ts';
import { openToken, signToken } from '../../shared/signed-token.ts';
import { BodyTimeout, BodyTooLarge, readRequestBody } from '../http/body.ts';
import type { RequestContext } from '../pipeline/stage.ts';

/** The largest form body read: a username, two passwords and a token are a few hundred bytes. */
export const MAX_FORM_BYTES = 8 * 1024;
/** How long a form body may take to arrive once its head has. */
export const FORM_READ_TIMEOUT_MS = 10_000;
/** How long a form stays good to submit after it was served. */
export const FORM_TTL_SECONDS = 30 * 60;

/** The SecretBox.derive purpose of the form token key, and the signed-token purpose of form tokens. */
const FORM_KEY_PURPOSE = 'visitor-registration-form';

/**
 * The form tokens of one endpoint: `<exp>.<mac>` (src/shared/signed-token.ts) under a key derived from
 * EDGE_SECRET_KEY and the endpoint's uuid, bound to what the form is for (an invite's digest, or "self"), so a token
 * served for one invite or endpoint is worthless for another and any edge checks what another served. (Until issue
 * 20 the MAC covered a newline-joined text of its own: forms served before an upgrade are refused after it with
 * "reload the form", for at most FORM_TTL_SECONDS.)
 */
export class FormTokens {
  private readonly key: Buffer;

  constructor(box: SecretBox, endpointUuid: string, private readonly now: () => number) {
    this.key = createHmac('sha256', box.derive(FORM_KEY_PURPOSE)).update(endpointUuid).digest();
  }

  /** A token for a form about `boundTo`, good for FORM_TTL_SECONDS. */
  issue(boundTo: string): string {
    return signToken(this.key, FORM_KEY_PURPOSE, [String(Math.floor(this.now() / 1000) + FORM_TTL_SECONDS)], [boundTo]);
  }

  /** Whether `given` is an unexpired token of this endpoint's form about `boundTo`. */
  valid(boundTo: string, given: string | undefined): boolean {
    if (given === undefined || given.length > 64) return false;
    const fields = openToken(this.key, FORM_KEY_PURPOSE, given, 1, [boundTo]);
    return fields !== null && /^[0-9]{1,12}$/.test(fields[0]) && Number(fields[0]) * 1000 > this.now();
  }
}

/** Same-origin checks of a posted form (the browser's own word, where it gives one): why a cross-site post is refused, or null. */
export function crossSiteRefusal(ctx: RequestContext): string | null {
  const origin = ctx.req.headers.origin;
  if (origin !== undefined && origin !== `https://${ctx.authority}`) return `the form was posted from another origin (${origin.slice(0, 100)})`;
  const site = ctx.req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return `the form was posted from a ${site} page`;
  return null;
}

/** The fields of a urlencoded form, each at most once and all among `allowed`; a string saying what is wrong otherwise. */
export function formFields(body: Buffer, allowed: readonly string[]): Map<string, string> | string {
  const fields = new Map<string, string>();
  for (const [name, value] of new URLSearchParams(body.toString('utf8'))) {
    if (!allowed.includes(name)) return `unexpected field "${name.slice(0, 40)}"`;
    if (fields.has(name)) return `the field "${name}" is repeated`;
    fields.set(name, value);
  }
  return fields;
}

/** Why a posted form is refused: the error code and its detail. */
export interface FormRefusal {
  code: ErrorCode;
  detail: string;
}

/**
 * Reads and checks a posted form: same origin, urlencoded, bounded in bytes and time, only `allowed` fields (and
 * `csrf`), each once, carrying a valid form token about `boundTo`. `gone`: the visitor went away mid-body.
 */
export async function readPostedForm(ctx: RequestContext, tokens: FormTokens, boundTo: string, allowed: readonly string[]): Promise<Map<string, string> | FormRefusal | 'gone'> {
  const why = crossSiteRefusal(ctx);
  if (why !== null) return { code: 'registration_form_invalid', detail: why };
  const type = ctx.req.headers['content-type'];
  if (type === undefined || type.split(';')[0].trim().toLowerCase() !== 'application/x-www-form-urlencoded') {
    return { code: 'registration_invalid', detail: 'the form must be sent as application/x-www-form-urlencoded' };
  }
  let body: Buffer;
  try {
    body = await readRequestBody(ctx.req, { maxBytes: MAX_FORM_BYTES, timeoutMs: FORM_READ_TIMEOUT_MS });
  } catch (err) {
    if (err instanceof BodyTimeout) return { code: 'request_timeout', detail: `the form did not arrive within ${FORM_READ_TIMEOUT_MS / 1000} s` };
    if (err instanceof BodyTooLarge) return { code: 'body_too_large', detail: `registration forms are read up to ${MAX_FORM_BYTES} bytes` };
    return 'gone';
  }
  const form = formFields(body, ['csrf', ...allowed]);
  if (typeof form === 'string') return { code: 'registration_invalid', detail: form };
  if (!tokens.valid(boundTo, form.get('csrf'))) {
    return { code: 'registration_form_invalid', detail: form.has('csrf') ? 'the form token is not valid for this form, or it expired; reload the form' : 'the form token is missing' };
  }
  return form;
}
