// The console's one way to the control API: same-origin /v1 calls with the API key (and the chosen account) from
// sessionStorage, and every failure turned into an ApiError that says what went wrong in words a person can act on.

const KEY = 'edge.apiKey';
/** The account the user chose to work in, sent as X-Account-Id (docs/api.md "Accounts and API keys"), kept by the key. */
const ACCOUNT = 'edge.accountId';

export function apiKey() {
  return sessionStorage.getItem(KEY);
}

/** A new key starts in the account it is bound to: a choice made with another key is dropped. */
export function signIn(key) {
  sessionStorage.setItem(KEY, key);
  sessionStorage.removeItem(ACCOUNT);
}

export function signOut() {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem(ACCOUNT);
}

/** The chosen account's id as a string, or null for the account the key is bound to. */
export function chosenAccount() {
  return sessionStorage.getItem(ACCOUNT);
}

/** Work in account `id` from the next call on (null: the key's own account). */
export function chooseAccount(id) {
  if (id === null || id === undefined) sessionStorage.removeItem(ACCOUNT);
  else sessionStorage.setItem(ACCOUNT, String(id));
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
 * signs out, so the console returns to the sign-in screen. A 403 not_a_member for the chosen account (the user was
 * removed from it) drops the choice, so the next call is made in the key's own account, and tells the shell
 * (`edge:account-lost`); the API refused before doing anything, so nothing was changed.
 */
export async function api(method, path, body) {
  const headers = { accept: 'application/json' };
  const key = apiKey();
  if (key) headers['x-api-key'] = key;
  const account = chosenAccount();
  if (account) headers['x-account-id'] = account;
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
    } else if (error.code === 'not_a_member' && account) {
      error.message =
        'You no longer belong to the account this console was working in: it went back to the account of your API key. Nothing was changed.';
      // Several calls in flight may be refused alike: the first one still holding the choice reports it.
      if (chosenAccount() === account) {
        chooseAccount(null);
        window.dispatchEvent(new CustomEvent('edge:account-lost', { detail: { accountId: account } }));
      }
    }
    throw error;
  }
  return parsed;
}
