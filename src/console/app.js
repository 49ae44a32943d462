// The console's shell: sign-in, the navigation, and the route table that maps each URL to its screen. Screens live
// in ./screens/, one module per screen, each a client of the public /v1 API through ./api.js.
import { html, render, useEffect, useState } from './vendor/htm-preact.mjs';
import { api, apiKey, signIn, signOut } from './api.js';
import { Link, match, navigate, useLocation } from './router.js';
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

function Shell({ me, onSignOut }) {
  const { path, query } = useLocation();
  useEffect(() => {
    if (path === '/' || path === '') navigate('/endpoints', { replace: true });
  }, [path]);
  let screen = html`<p>No such page. <${Link} to="/endpoints">Go to the endpoints</${Link}>.</p>`;
  for (const [pattern, Screen] of ROUTES) {
    const params = match(pattern, path);
    if (params) {
      screen = html`<${Screen} ...${params} query=${query} me=${me} />`;
      break;
    }
  }
  return html`<div class="layout">
    <header class="top">
      <a class="brand" href="/console/endpoints" onClick=${(e) => { e.preventDefault(); navigate('/endpoints'); }}>Edge console</a>
      <nav aria-label="Main">
        ${NAV.map(([to, label]) => html`<${Link} to=${to} aria-current=${path.startsWith(to) ? 'page' : undefined}>${label}</${Link}>`)}
      </nav>
      <span class="who">${[me.user?.email, me.active_account?.name].filter((v, i, all) => v && all.indexOf(v) === i).join(' · ')}</span>
      <button type="button" onClick=${onSignOut}>Sign out</button>
    </header>
    <main id="main">${screen}</main>
  </div>`;
}

function App() {
  const [me, setMe] = useState(null);
  const [checking, setChecking] = useState(apiKey() !== null);
  useEffect(() => {
    if (apiKey() === null) return;
    api('GET', '/v1/me').then(setMe, () => signOut()).finally(() => setChecking(false));
  }, []);
  useEffect(() => {
    const onSignedOut = () => setMe(null);
    window.addEventListener('edge:signed-out', onSignedOut);
    return () => window.removeEventListener('edge:signed-out', onSignedOut);
  }, []);
  if (checking) return html`<p class="loading">Signing in…</p>`;
  if (!me) return html`<${SignIn} onSignedIn=${setMe} />`;
  return html`<${Shell} me=${me} onSignOut=${() => { signOut(); setMe(null); }} />`;
}

render(html`<${App} />`, document.getElementById('app'));
