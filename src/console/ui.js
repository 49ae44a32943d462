// Small pieces every screen uses: loading data from the API with its error in place, an error message, a confirm
// step, tabs and formatting. Values from the API are always rendered as text (Preact escapes them); nothing here
// sets innerHTML.
import { html, useCallback, useEffect, useRef, useState } from './vendor/htm-preact.mjs';
import { api } from './api.js';
import { Link } from './router.js';

/**
 * Loads `path` (re-loading when it changes or when `reload()` is called; every `pollMs` while the page is open when
 * given). Returns { data, error, loading, reload }.
 */
export function useApi(path, { pollMs } = {}) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const [tick, setTick] = useState(0);
  const reload = useCallback(() => setTick((n) => n + 1), []);
  useEffect(() => {
    if (path === null) return undefined;
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    api('GET', path).then(
      (data) => live && setState({ data, error: null, loading: false }),
      (error) => live && setState((s) => ({ data: s.data, error, loading: false })),
    );
    return () => {
      live = false;
    };
  }, [path, tick]);
  useEffect(() => {
    if (!pollMs || path === null) return undefined;
    const timer = setInterval(reload, pollMs);
    return () => clearInterval(timer);
  }, [pollMs, path, reload]);
  return { ...state, reload };
}

/**
 * A form field's draft of a stored value: starts as `stored`, is what the person types, and takes `stored` again only
 * when that changes (a save, a reload). Not on the first render: Preact runs effects after paint, and a reset then
 * would wipe what was typed in between.
 */
export function useDraft(stored) {
  const [draft, setDraft] = useState(stored);
  const last = useRef(stored);
  useEffect(() => {
    if (last.current === stored) return;
    last.current = stored;
    setDraft(stored);
  }, [stored]);
  return [draft, setDraft];
}

/** Runs an API change, keeping its error to show next to the control that caused it. */
export function useAction() {
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const run = useCallback(async (fn) => {
    setBusy(true);
    setError(null);
    try {
      return await fn();
    } catch (err) {
      setError(err);
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { error, busy, run, clear: () => setError(null) };
}

export function ErrorMessage({ error }) {
  if (!error) return null;
  // Refusals carry their reason in `detail` beside a general message: a string ("Bad request": a rate-limit condition
  // the API refuses), or the field and why for a body that fails validation (docs/errors.md). The reason is what the
  // person can act on.
  const detail = error.detail;
  const why =
    typeof detail === 'string'
      ? detail
      : detail && typeof detail === 'object' && typeof detail.reason === 'string'
        ? `${typeof detail.field === 'string' && detail.field !== '' ? `${detail.field}: ` : ''}${detail.reason}`
        : '';
  const reason = why !== '' && why !== error.message ? `: ${why}` : '';
  return html`<p class="error" role="alert">${error.message}${reason}${error.code && error.status ? html` <span class="code">(${error.status} ${error.code})</span>` : ''}</p>`;
}

export function Loading({ what = 'Loading' }) {
  return html`<p class="loading" aria-live="polite">${what}…</p>`;
}

/** A button that asks before it acts (deleting, replaying): the second click confirms. */
export function ConfirmButton({ label, confirmLabel, onConfirm, disabled, danger = true }) {
  const [asking, setAsking] = useState(false);
  const cancelRef = useRef(null);
  useEffect(() => {
    if (asking) cancelRef.current?.focus();
  }, [asking]);
  if (!asking) return html`<button type="button" class=${danger ? 'danger' : ''} disabled=${disabled} onClick=${() => setAsking(true)}>${label}</button>`;
  return html`<span class="confirm" role="group" aria-label=${label}>
    <button type="button" class=${danger ? 'danger' : ''} onClick=${() => { setAsking(false); onConfirm(); }}>${confirmLabel ?? `Yes, ${label.toLowerCase()}`}</button>
    <button type="button" ref=${cancelRef} onClick=${() => setAsking(false)}>Cancel</button>
  </span>`;
}

/** Tabs as links: each tab is a URL of its own. */
export function Tabs({ base, tabs, current }) {
  return html`<nav class="tabs" aria-label="Sections">
    ${tabs.map(([id, label]) => html`<${Link} to=${`${base}/${id}`} aria-current=${current === id ? 'page' : undefined} class=${current === id ? 'active' : ''}>${label}</${Link}>`)}
  </nav>`;
}

export function formatTime(value) {
  if (!value) return '—';
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? String(value) : d.toLocaleString();
}

export function formatBytes(n) {
  if (n === null || n === undefined) return '—';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

export function formatPercent(x) {
  return x === null || x === undefined ? '—' : `${(x * (x <= 1 ? 100 : 1)).toFixed(2)} %`;
}
