// The console's shell: sign-in, the navigation, the account the console works in, and the route table that maps
// each URL to its screen. Screens live in ./screens/, one module per screen, each a client of the /v1 API (./api.js).
import { html, render, useEffect, useRef, useState } from './vendor/htm-preact.mjs';
import { api, apiKey, chooseAccount, chosenAccount, signIn, signOut } from './api.js';
import { BASE, Link, match, navigate, useLocation } from './router.js';
import { ErrorMessage } from './ui.js';
import { ROUTES } from './routes.js';

function SignIn({ onSignedIn }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    signIn(key.trim());
    try {
      const me = await api('GET', '/v1/me');
      onSignedIn(me);
    } catch (err) {
      signOut();
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<main class="sign-in">
    <h1>Edge console</h1>
    <form onSubmit=${submit}>
      <label for="api-key">API key</label>
      <input id="api-key" name="api-key" type="password" autocomplete="off" required value=${key} onInput=${(e) => setKey(e.currentTarget.value)} />
      <p class="hint">The key stays in this tab only (session storage) and is sent to this node's API as X-API-KEY.</p>
      <button type="submit" disabled=${busy || key.trim() === ''}>Sign in</button>
      <${ErrorMessage} error=${error} />
    </form>
  </main>`;
}

const NAV = [
  ['/endpoints', 'Endpoints'],
  ['/traffic/errors', 'Recent errors'],
  ['/alerts', 'Alerts'],
  ['/account', 'Account'],
];

/**
 * GET /v1/me in the chosen account. A choice the user lost (api.js drops it on 403 not_a_member) is read again in
 * the key's own account.
 */
async function loadMe() {
  try {
    return await api('GET', '/v1/me');
  } catch (err) {
    if (err.code === 'not_a_member') return api('GET', '/v1/me');
    throw err;
  }
}

/**
 * One endpoint's or rule's page belongs to the account it was opened in: on a change of account, the console goes to
 * the list of the same kind instead.
 */
function toAccountLists() {
  const path = location.pathname.slice(BASE.length);
  if (/^\/(endpoints|alerts)\/./.test(path)) navigate(path.startsWith('/alerts') ? '/alerts' : '/endpoints');
}

/** The active account in the header: a choice among the user's accounts, or its name when there is one. */
function AccountSwitch({ me, onSwitch, busy }) {
  const accounts = me.accounts ?? [];
  if (accounts.length < 2) {
    return html`<span class="who">${[me.user?.email, me.active_account?.name].filter((v, i, all) => v && all.indexOf(v) === i).join(' · ')}</span>`;
  }
  return html`<span class="who">${me.user?.email}</span>
    <span class="account-switch">
      <label for="account-switch">Active account</label>
      <select id="account-switch" disabled=${busy} value=${String(me.active_account.id)} onChange=${(e) => onSwitch(e.currentTarget.value)}>
        ${accounts.map((a) => html`<option key=${a.id} value=${String(a.id)}>${a.name} (${a.kind})</option>`)}
      </select>
    </span>`;
}

function Shell({ me, notice, onDismiss, onSwitch, switching, onSignOut }) {
  const { path, query } = useLocation();
  useEffect(() => {
    if (path === '/' || path === '') navigate('/endpoints', { replace: true });
  }, [path]);
  let screen = html`<p>No such page. <${Link} to="/endpoints">Go to the endpoints</${Link}>.</p>`;
  for (const [pattern, Screen] of ROUTES) {
    const params = match(pattern, path);
    if (params) {
      screen = html`<${Screen} ...${params} query=${query} me=${me} switchAccount=${onSwitch} />`;
      break;
    }
  }
  return html`<div class="layout">
    <header class="top">
      <a class="brand" href="/console/endpoints" onClick=${(e) => { e.preventDefault(); navigate('/endpoints'); }}>Edge console</a>
      <nav aria-label="Main">
        ${NAV.map(([to, label]) => html`<${Link} to=${to} aria-current=${path.startsWith(to) ? 'page' : undefined}>${label}</${Link}>`)}
      </nav>
      <${AccountSwitch} me=${me} onSwitch=${onSwitch} busy=${switching} />
      <button type="button" onClick=${onSignOut}>Sign out</button>
    </header>
    ${notice
      ? html`<div class="notice-bar warning" role="alert"><span>${notice}</span> <button type="button" onClick=${onDismiss}>Dismiss</button></div>`
      : null}
    <main id="main" key=${me.active_account.id}>${screen}</main>
  </div>`;
}

function App() {
  const [me, setMe] = useState(null);
  const [notice, setNotice] = useState(null);
  const [switching, setSwitching] = useState(false);
  const [checking, setChecking] = useState(apiKey() !== null);
  // The accounts as last read, to name the one a refused call says the user left.
  const meRef = useRef(null);
  meRef.current = me;
  useEffect(() => {
    if (apiKey() === null) return;
    loadMe().then(setMe, () => signOut()).finally(() => setChecking(false));
  }, []);
  useEffect(() => {
    const onSignedOut = () => setMe(null);
    const onAccountLost = async (event) => {
      const lost = meRef.current?.accounts?.find((a) => String(a.id) === event.detail.accountId);
      try {
        const next = await loadMe();
        setMe(next);
        toAccountLists();
        const which = lost ? `the account “${lost.name}”` : `account #${event.detail.accountId}`;
        setNotice(`You no longer belong to ${which}: the console is back in “${next.active_account.name}”, the account of your API key.`);
      } catch (err) {
        setNotice(err.message);
      }
    };
    window.addEventListener('edge:signed-out', onSignedOut);
    window.addEventListener('edge:account-lost', onAccountLost);
    return () => {
      window.removeEventListener('edge:signed-out', onSignedOut);
      window.removeEventListener('edge:account-lost', onAccountLost);
    };
  }, []);
  /** Works in account `id` from now on (kept in this tab with the key); false when the API refused it. */
  const switchAccount = async (id) => {
    const previous = chosenAccount();
    setSwitching(true);
    chooseAccount(id);
    try {
      const next = await api('GET', '/v1/me');
      setNotice(null);
      setMe(next);
      toAccountLists();
      return true;
    } catch (err) {
      // A lost account was already dropped by api.js (and the shell told); anything else leaves the choice as it was.
      if (err.code !== 'not_a_member') {
        chooseAccount(previous);
        setNotice(`Could not switch accounts: ${err.message}`);
      }
      return false;
    } finally {
      setSwitching(false);
    }
  };
  if (checking) return html`<p class="loading">Signing in…</p>`;
  if (!me) return html`<${SignIn} onSignedIn=${setMe} />`;
  const signOutNow = () => {
    signOut();
    setNotice(null);
    setMe(null);
  };
  return html`<${Shell} me=${me} notice=${notice} onDismiss=${() => setNotice(null)} onSwitch=${switchAccount} switching=${switching} onSignOut=${signOutNow} />`;
}

// The page's "Loading the console…" placeholder is not Preact's to diff away: cleared first, or it stays under the app.
const root = document.getElementById('app');
root.textContent = '';
render(html`<${App} />`, root);
