// The console's one way to the control API: same-origin /v1 calls with the API key from sessionStorage, and every
// failure turned into an ApiError that says what went wrong in words a person can act on.

const KEY = 'edge.apiKey';

export function apiKey() {
  return sessionStorage.getItem(KEY);
}

export function signIn(key) {
  sessionStorage.setItem(KEY, key);
}

export function signOut() {
  sessionStorage.removeItem(KEY);
}

/** A refused or failed call: the HTTP status, the API's stable code, and a message to show next to what caused it. */
export class ApiError extends Error {
  constructor(status, code, message, detail) {
    super(message);
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

/** What an error body means to a person: the API's message, with the plan feature named where one is missing. */
function explain(status, body) {
  const code = body && typeof body === 'object' ? body.code : undefined;
  let message = body && typeof body === 'object' ? body.error || body.message : typeof body === 'string' ? body : '';
  if (!message) message = `The API answered ${status}.`;
  const detail = body && typeof body === 'object' ? body.detail : undefined;
  if (code === 'entitlement_required') {
    const feature = (detail && (detail.feature || detail.entitlement)) || body.feature;
    message = feature ? `Your plan does not include ${feature}. ${message}` : message;
  }
  if (status === 401) message = 'The API key was not accepted. Sign in again.';
  return new ApiError(status, code || `http_${status}`, message, detail);
}

/**
 * One call. `body` is sent as JSON. Resolves with the parsed answer (null for 204); rejects with ApiError. A 401
 * signs out, so the console returns to the sign-in screen.
 */
export async function api(method, path, body) {
  const headers = { accept: 'application/json' };
  const key = apiKey();
  if (key) headers['x-api-key'] = key;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (err) {
    throw new ApiError(0, 'network', `The control API could not be reached: ${err.message}`);
  }
  const text = await res.text();
  let parsed = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
  }
  if (!res.ok) {
    const error = explain(res.status, parsed);
    if (res.status === 401) {
      signOut();
      window.dispatchEvent(new CustomEvent('edge:signed-out'));
    }
    throw error;
  }
  return parsed;
}
