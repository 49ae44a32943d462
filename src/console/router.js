// History-API routing: every screen has a URL of its own under /console/, so the back button and shared links work.
// The server answers index.html for any such path (src/control/console.ts).
import { html, useEffect, useState } from './vendor/htm-preact.mjs';

export const BASE = '/console';

/** Navigates within the console without a page load. */
export function navigate(path, { replace = false } = {}) {
  const url = path.startsWith(BASE) ? path : `${BASE}${path}`;
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  window.dispatchEvent(new Event('edge:navigate'));
}

/** The console path (without /console) and query of the current URL, updated on every navigation. */
export function useLocation() {
  const read = () => ({ path: location.pathname.slice(BASE.length) || '/', query: new URLSearchParams(location.search) });
  const [where, setWhere] = useState(read);
  useEffect(() => {
    const update = () => setWhere(read());
    window.addEventListener('popstate', update);
    window.addEventListener('edge:navigate', update);
    return () => {
      window.removeEventListener('popstate', update);
      window.removeEventListener('edge:navigate', update);
    };
  }, []);
  return where;
}

/** Matches `/endpoints/:id/:tab?` style patterns; returns the parameters or null. */
export function match(pattern, path) {
  const p = pattern.split('/').filter(Boolean);
  const s = path.split('/').filter(Boolean);
  const params = {};
  for (let i = 0; i < p.length; i++) {
    const part = p[i];
    const optional = part.endsWith('?');
    const name = part.replace(/^:/, '').replace(/\?$/, '');
    if (i >= s.length) {
      if (optional) continue;
      return null;
    }
    if (part.startsWith(':')) params[name] = decodeURIComponent(s[i]);
    else if (part !== s[i]) return null;
  }
  return s.length <= p.length ? params : null;
}

/** A link inside the console: a real <a href> (middle-click, copy link) that navigates without a reload. */
export function Link({ to, children, ...rest }) {
  const onClick = (event) => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(to);
  };
  return html`<a href=${`${BASE}${to}`} onClick=${onClick} ...${rest}>${children}</a>`;
}
