// What the control API's public registration route answered (POST /v1/rbac/registrations, src/shared/registration.ts),
// read into what the edge's registration pages show: the new client, the form again with why, or a refusal.
import { ERROR_CODES, type ErrorCode } from '../../shared/errors.ts';
import type { RegistrationResult } from '../../shared/registration.ts';

/** The message of a control API error body ({error, code, detail}), its detail's reason appended. */
export function controlMessage(body: unknown): { code?: string; text: string } {
  if (typeof body !== 'object' || body === null) return { text: typeof body === 'string' && body.length > 0 ? body.slice(0, 300) : 'the registration was refused' };
  const b = body as { error?: unknown; code?: unknown; detail?: unknown };
  let text = typeof b.error === 'string' ? b.error : 'the registration was refused';
  const detail = b.detail as { reason?: unknown; field?: unknown } | undefined;
  if (typeof detail === 'object' && detail !== null && typeof detail.reason === 'string') {
    text += typeof detail.field === 'string' ? ` (${detail.field}: ${detail.reason})` : `: ${detail.reason}`;
  } else if (typeof b.detail === 'string') text += `: ${b.detail}`;
  return { code: typeof b.code === 'string' ? b.code : undefined, text };
}

function isResult(body: unknown): body is RegistrationResult {
  if (typeof body !== 'object' || body === null) return false;
  const b = body as Record<string, unknown>;
  return typeof b.client_id === 'number' && typeof b.identifier === 'string' && typeof b.feed_version === 'number';
}

/** What the pages do with an answer. */
export type RegistrationOutcome =
  | { kind: 'registered'; result: RegistrationResult }
  /** The visitor can fix it on the form (invalid fields, a name taken): the form again, with the reason. */
  | { kind: 'form'; status: 400 | 409; code: ErrorCode; text: string }
  | { kind: 'refused'; code: ErrorCode; text: string }
  /** A status the contract does not name: the pages answer 503, the edge logs it. */
  | { kind: 'unexpected'; status: number };

/** Reads the control API's answer to a registration for an invite (`invite`) or by self-registration. */
export function registrationOutcome(answer: { status: number; body: unknown }, purpose: 'invite' | 'self'): RegistrationOutcome {
  if (answer.status === 200 && isResult(answer.body)) return { kind: 'registered', result: answer.body };
  const { code, text } = controlMessage(answer.body);
  // The control API's own code when the registry has it with this status (quota_paused, entitlement_required…).
  const known = code !== undefined && Object.hasOwn(ERROR_CODES, code) && ERROR_CODES[code as ErrorCode][0] === answer.status ? (code as ErrorCode) : undefined;
  switch (answer.status) {
    case 400:
      return { kind: 'form', status: 400, code: 'registration_invalid', text };
    case 401:
      return { kind: 'refused', code: 'login_required', text: 'your login could not be vouched for; sign in again and retry' };
    case 403:
      return { kind: 'refused', code: known ?? 'self_registration_disabled', text };
    case 404:
      return { kind: 'refused', code: purpose === 'invite' ? 'invite_not_found' : 'self_registration_disabled', text };
    case 409:
      if (known !== undefined && known !== 'already_exists' && known !== 'conflict') return { kind: 'refused', code: known, text };
      return { kind: 'form', status: 409, code: 'already_exists', text };
    case 410:
      return { kind: 'refused', code: 'invite_expired', text };
    default:
      return { kind: 'unexpected', status: answer.status };
  }
}
