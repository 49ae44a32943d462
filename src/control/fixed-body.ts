// A registry error whose body the API contract fixes differently from the uniform one: plain text, or extra fields.
// Stands in until src/shared/errors.ts offers this itself; built from `fail.<code>(...)`, never by hand.
import type { EdgeError } from '../shared/errors.ts';

/**
 * `err` answering `body` instead of `{error, code, detail}`: a string is sent as text/plain (promote's quota refusal,
 * docs/api.md), an object is merged over the uniform body (the verification gate's `gate_type` and `feature`).
 */
export function withFixedBody(err: EdgeError, body: string | Record<string, unknown>): EdgeError {
  return Object.assign(err, { body });
}
