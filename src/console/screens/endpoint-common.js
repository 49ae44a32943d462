// Small pieces the endpoint screens share: the endpoint's console URL, its status badge, and reading list fields.
import { html } from '../vendor/htm-preact.mjs';

export function endpointPath(uuid, tab) {
  return `/endpoints/${encodeURIComponent(uuid)}${tab ? `/${tab}` : ''}`;
}

/** The API path of one of the endpoint's resources: `/v1/endpoints/{uuid}/<rest>`. */
export function endpointApi(uuid, rest = '') {
  return `/v1/endpoints/${encodeURIComponent(uuid)}${rest ? `/${rest}` : ''}`;
}

const STATUS_CLASS = { active: 'ok', provisioning: 'warn', error: 'bad', disabled: 'bad' };

export function EndpointStatus({ endpoint }) {
  const paused = endpoint.paused_at ? html` <span class="badge warn">paused</span>` : null;
  return html`<span class=${`badge ${STATUS_CLASS[endpoint.status] ?? ''}`}>${endpoint.status}</span>${paused}`;
}

/** "a, b ,c" → ['a', 'b', 'c']; empty entries dropped. */
export function splitList(text) {
  return String(text ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** A whole number from an input, or `fallback` when it is empty or not one. */
export function intOr(text, fallback) {
  const n = Number.parseInt(String(text).trim(), 10);
  return Number.isFinite(n) ? n : fallback;
}

/**
 * Labels beside their fields, two columns. A style object (set through the CSSOM by Preact), which the console's
 * policy allows where a style attribute in markup would not be.
 */
export const FORM_GRID = { display: 'grid', gridTemplateColumns: 'max-content minmax(12rem, 32rem)', gap: '0.4rem 0.8rem', alignItems: 'center', margin: '0.5rem 0' };

/** A checkbox and its label across both columns of FORM_GRID. */
export const CHECK_ROW = { gridColumn: '1 / -1', display: 'flex', gap: '0.4rem', alignItems: 'center' };
