// The two errors whose body the API contract fixes differently from the uniform one (docs/errors.md), built from
// the registry. Stand-ins with the signatures src/shared/errors.ts gains in the "errors" part: import from there.
import { fail, type EdgeError } from '../shared/errors.ts';

/** `err` answering `body` instead of `{error, code, detail}`: a string as text/plain, an object over the uniform body. */
function withFixedBody(err: EdgeError, body: string | Record<string, unknown>): EdgeError {
  return Object.assign(err, { body });
}

/**
 * The 403 fixed for an unmet verification gate (dedicated ports): `error` is the code itself, and the body names the
 * gate, the feature it guards and a sentence for the user. `code` stays, as on every error.
 */
export function verificationRequired(gateType: string, feature: string, message: string): EdgeError {
  return withFixedBody(fail.verification_required(message), { error: 'verification_required', gate_type: gateType, feature, message });
}

/** The 403 fixed for promoting past an endpoint quota: a plain-text body naming the limit; the detail stays for logs. */
export function quotaExceededAsText(message: string, detail?: Record<string, unknown>): EdgeError {
  return withFixedBody(fail.quota_exceeded(message, detail), message);
}
