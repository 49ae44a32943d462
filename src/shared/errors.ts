// The one registry of API and edge errors: each has a stable snake_case code and an HTTP status.
// Code raises `fail.<code>(...)`; the control API's error handler turns any EdgeError into the uniform body.

export interface ErrorBody {
  error: string;
  code: string;
  detail?: unknown;
  [extra: string]: unknown;
}

export class EdgeError extends Error {
  override name = 'EdgeError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly detail?: unknown,
    /**
     * Where the API contract fixes another body for this error (docs/errors.md): a string is sent as plain text; an object is laid over the
     * uniform body as a JSON merge patch (RFC 7396), so a key set to null removes that key. Set through `withBody`.
     */
    readonly body?: string | Record<string, unknown>,
  ) {
    super(message);
  }

  /** The same error answered with the body the API contract fixes for it (see `body`); status and code are unchanged. */
  withBody(body: string | Record<string, unknown>): EdgeError {
    return new EdgeError(this.status, this.code, this.message, this.detail, body);
  }

  /** The uniform `{error, code, detail?}` body, or the one the API contract fixes (plain text, or the uniform one patched). */
  toBody(): ErrorBody | Record<string, unknown> | string {
    if (typeof this.body === 'string') return this.body;
    const out: ErrorBody = { error: this.message, code: this.code };
    if (this.detail !== undefined) out.detail = this.detail;
    if (!this.body) return out;
    const patched: Record<string, unknown> = { ...out };
    for (const [key, value] of Object.entries(this.body)) {
      if (value === null) delete patched[key];
      else patched[key] = value;
    }
    return patched;
  }
}

/** Every code with its status and default message; docs/errors.md documents each (a test checks). */
export const ERROR_CODES = {
  invalid_json: [400, 'Invalid JSON body'],
  invalid_request: [400, 'Invalid request body'],
  unknown_field: [400, 'Invalid request body'],
  invalid_id: [400, 'Invalid identifier'],
  invalid_query: [400, 'Invalid query parameter'],
  pagination_too_deep: [400, 'Pagination offset too large'],
  integer_id_unsupported: [400, 'Integer ids are no longer accepted here; use the uuid'],
  // Also rate-limit condition validation, whose body the API contract fixes (docs/errors.md): `{error: "Bad request", code, detail: "<reason>"}`,
  // the one 400 whose detail is a string rather than `{field, reason}`.
  bad_request: [400, 'Bad request'],
  unauthorized: [401, 'Missing or invalid API key'],
  forbidden: [403, 'Forbidden'],
  permission_denied: [403, 'Missing permission'],
  not_a_member: [403, 'Not a member of the active account'],
  account_suspended: [403, 'Account suspended'],
  admin_required: [403, 'Administrator privileges required'],
  entitlement_required: [403, 'Plan does not include this feature'],
  quota_exceeded: [403, 'Quota reached'],
  verification_required: [403, 'Verification required'],
  not_found: [404, 'Not found'],
  route_not_found: [404, 'No such route'],
  conflict: [409, 'Conflict'],
  already_exists: [409, 'Already exists'],
  quota_paused: [409, 'Endpoint is paused over plan limits and is read-only'],
  // Traffic replay (POST /v1/traffic/logs/{id}/replay, docs/traffic.md "API").
  group_not_active: [409, 'The dedicated IP group is not active'],
  dedicated_ip_in_use: [409, 'The dedicated IP is already in use'],
  replay_not_captured: [409, 'Not enough of this exchange was captured to replay it'],
  // Applications and git push-to-deploy (docs/api.md "Applications and deployments").
  deployment_finished: [409, 'The deployment has finished'],
  not_rollbackable: [409, 'Only a deployment that was live, with a known commit, can be rolled back to'],
  webhook_signature_invalid: [401, 'The webhook signature is missing or does not match'],
  webhook_rate_limited: [429, 'Too many webhook deliveries for this application; retry later'],
  dns_repoint_failed: [502, 'The DNS change could not be published; the binding was reverted, retry later'],
  replay_failed: [502, 'The replay could not be completed through the edge'],
  alert_test_too_soon: [429, 'This alert rule was tested moments ago; retry after the cooldown'],
  replay_busy: [429, 'Too many replays of this account are in progress; retry when one has finished'],
  // RBAC registration (POST /v1/rbac/registrations, docs/rbac.md).
  invalid_identity_assertion: [401, 'The identity assertion is not valid for this endpoint'],
  self_registration_disabled: [403, 'Self-registration is not enabled on this endpoint'],
  email_domain_not_allowed: [403, 'The e-mail domain may not self-register on this endpoint'],
  invite_not_found: [404, 'The invite does not exist or was already used'],
  invite_expired: [410, 'The invite has expired'],
  body_too_large: [413, 'Request body too large'],
  unsupported_media_type: [415, 'Content-Type must be application/json'],
  internal: [500, 'Internal server error'],
  unavailable: [503, 'Service unavailable'],
  geodns_not_configured: [503, 'Per-region GeoDNS routing is not configured on this server'],
  store_unavailable: [503, 'The data store cannot be reached right now; try again shortly'],
  // Edge pages: what a visitor gets when the edge itself answers.
  endpoint_not_found: [404, 'No endpoint is configured for this hostname'],
  malformed_request: [400, 'The request could not be understood'],
  no_agent: [502, 'The endpoint is configured but no agent is connected to serve it'],
  agent_error: [502, 'The agent could not complete the request'],
  agent_timeout: [504, 'The agent did not answer in time'],
  origin_error: [502, 'The origin could not be reached or failed to answer'],
  endpoint_disabled: [503, 'The endpoint is disabled'],
  upgrade_not_supported: [501, 'The edge carries WebSocket upgrades only'],
  request_timeout: [408, 'The request did not arrive in time'],
  request_header_too_large: [431, 'The request header fields are too large'],
  client_certificate_required: [403, 'This endpoint requires a client certificate'],
  client_certificate_invalid: [403, 'The client certificate is not trusted by this endpoint'],
  misdirected_request: [421, 'This connection was not set up for this hostname'],
  auth_required: [401, 'This endpoint requires authentication'],
  invalid_credentials: [401, 'The credentials are not valid for this endpoint'],
  invalid_token: [401, 'The bearer token (JWT) is not valid for this endpoint'],
  invalid_signature: [401, 'The webhook signature is missing or does not match'],
  too_many_auth_failures: [429, 'Too many failed sign-in attempts from this address'],
  rate_limited: [429, 'Too many requests from this address; slow down'],
  rate_limit_unavailable: [503, 'The rate limit could not be checked'],
  auth_unavailable: [503, 'Authentication is temporarily unavailable'],
  login_required: [401, 'Sign in to reach this endpoint'],
  login_failed: [400, 'The sign-in could not be completed'],
  login_forbidden: [403, 'This account may not sign in to this endpoint'],
  method_not_allowed: [405, 'The method is not allowed on this path'],
  rbac_not_a_client: [403, 'Only clients of this endpoint may reach it'],
  rbac_client_inactive: [403, 'This client is not active on this endpoint'],
  rbac_forbidden: [403, 'Your roles do not allow this request'],
  rbac_rate_limited: [429, 'Too many requests for your role'],
  // The edge's registration pages (/register?endpoint=…, docs/rbac.md "Invites and self-registration").
  registration_invalid: [400, 'The registration form has errors'],
  registration_form_invalid: [403, 'The registration form could not be verified; reload it and try again'],
  registration_not_offered: [409, 'This endpoint does not take registrations with its sign-in method'],
  registration_unavailable: [503, 'Registration is temporarily unavailable'],
} as const satisfies Record<string, readonly [number, string]>;

export type ErrorCode = keyof typeof ERROR_CODES;

type Raise = (message?: string, detail?: unknown) => EdgeError;

/** `fail.not_found('endpoint not found')` builds the registered error, with an optional message and detail. */
export const fail = Object.fromEntries(
  Object.entries(ERROR_CODES).map(([code, [status, message]]) => [
    code,
    (custom?: string, detail?: unknown) => new EdgeError(status, code, custom ?? message, detail),
  ]),
) as Record<ErrorCode, Raise>;

/**
 * A 400 invalid_request naming the field and why: every validation error's `detail` has this `{field, reason}`
 * shape (extra keys, such as a limit, may follow), whether the schema validator or the domain found it.
 */
export function invalid(field: string, reason: string, extra: Record<string, unknown> = {}): EdgeError {
  return fail.invalid_request(`Invalid ${field}: ${reason}`, { field, reason, ...extra });
}

/**
 * The 403 the API contract fixes for an unmet verification gate (dedicated ports): `error` is the code itself, and the body
 * names the gate, the feature it guards and a sentence for the user. `code` stays, as on every error.
 */
export function verificationRequired(gateType: string, feature: string, message: string): EdgeError {
  return fail.verification_required(message).withBody({ error: 'verification_required', gate_type: gateType, feature, message });
}

/**
 * The 403 the API contract fixes for promoting past the permanent-endpoint quota: a plain-text body naming the limit. The
 * detail (quota, limit, used) is kept on the error for logs; clients get the text only.
 */
export function quotaExceededAsText(message: string, detail?: Record<string, unknown>): EdgeError {
  return fail.quota_exceeded(message, detail).withBody(message);
}

export function isEdgeError(err: unknown): err is EdgeError {
  return err instanceof EdgeError;
}
