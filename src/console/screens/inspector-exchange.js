// How one captured side of an exchange is shown: its headers as a table and its body as text, pretty-printed JSON or
// a hex preview of the first bytes. Everything is rendered as text (Preact escapes it): a header value or body full
// of markup stays characters on the screen.
import { html } from '../vendor/htm-preact.mjs';
import { formatBytes } from '../ui.js';

/** The value the capture stores for a credential it did not keep (docs/traffic.md "On the edge"). */
export const REDACTED = '[redacted]';

/** How many bytes of a binary body the hex preview shows. */
const HEX_PREVIEW_BYTES = 256;

function headerValue(value) {
  if (Array.isArray(value)) return value.map(String).join(', ');
  if (value === null || value === undefined) return '';
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

/** The Content-Type of a headers object (names any case), or ''. */
export function contentType(headers) {
  if (!headers || typeof headers !== 'object') return '';
  for (const [name, value] of Object.entries(headers)) if (name.toLowerCase() === 'content-type') return headerValue(value).toLowerCase();
  return '';
}

function lowerKeys(headers) {
  const out = new Map();
  if (headers && typeof headers === 'object') for (const [name, value] of Object.entries(headers)) out.set(name.toLowerCase(), headerValue(value));
  return out;
}

/**
 * Headers as a table; a redacted value is marked as such, next to the text the API returned. With `compare` (the
 * other side of a comparison), a header it lacks is marked new and one whose value differs changed.
 */
export function HeadersTable({ headers, caption, compare }) {
  const entries = headers && typeof headers === 'object' ? Object.entries(headers) : [];
  const other = compare ? lowerKeys(compare) : null;
  const mark = (name, text) => {
    if (!other) return '';
    const was = other.get(name.toLowerCase());
    if (was === undefined) return html` <span class="badge ok">new</span>`;
    return was === text ? '' : html` <span class="badge warn">changed</span>`;
  };
  if (entries.length === 0) return html`<p class="hint">No headers.</p>`;
  return html`<table class="headers">
    <caption class="visually-hidden">${caption}</caption>
    <thead><tr><th scope="col">Name</th><th scope="col">Value</th></tr></thead>
    <tbody>
      ${entries.map(([name, value]) => {
        const text = headerValue(value);
        return html`<tr>
          <th scope="row" class="mono">${name}${mark(name, text)}</th>
          <td class="mono">${text === REDACTED ? html`<span class="badge warn" title="The capture does not keep credentials">redacted</span> ` : ''}${text}</td>
        </tr>`;
      })}
    </tbody>
  </table>`;
}

function decodeBase64(data) {
  const raw = atob(data);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

/** Classic hex dump lines: offset, 16 bytes in hex, the printable ASCII of them. */
export function hexDump(bytes, limit = HEX_PREVIEW_BYTES) {
  const lines = [];
  const end = Math.min(bytes.length, limit);
  for (let offset = 0; offset < end; offset += 16) {
    const row = bytes.subarray(offset, Math.min(offset + 16, end));
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, '0')).join(' ');
    const ascii = Array.from(row, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('');
    lines.push(`${offset.toString(16).padStart(8, '0')}  ${hex.padEnd(47, ' ')}  ${ascii}`);
  }
  return lines.join('\n');
}

function prettyJson(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return null;
  }
}

/**
 * A body as the API gives it ({encoding, data, size, truncated}): UTF-8 text as text (pretty-printed when it is
 * JSON), anything else as a hex preview of its first bytes.
 */
export function BodyView({ body, headers }) {
  if (!body) return html`<p class="hint">No body kept.</p>`;
  const cut = body.truncated
    ? html`<p class="warning">Cut at the capture limit: only the first ${formatBytes(body.size)} were kept.</p>`
    : '';
  if (body.size === 0 && !body.truncated) return html`<p class="hint">Empty body.</p>`;
  if (body.encoding === 'utf8') {
    const type = contentType(headers);
    const json = type.includes('json') || /^\s*[[{]/.test(body.data) ? prettyJson(body.data) : null;
    return html`<div>
      <p class="hint">${json !== null ? 'JSON' : 'Text'}, ${formatBytes(body.size)}${type ? `, ${type}` : ''}</p>
      <pre>${json ?? body.data}</pre>
      ${cut}
    </div>`;
  }
  let bytes;
  try {
    bytes = decodeBase64(body.data);
  } catch {
    return html`<p class="error">The body could not be decoded (${formatBytes(body.size)}).</p>`;
  }
  const shown = Math.min(bytes.length, HEX_PREVIEW_BYTES);
  return html`<div>
    <p class="hint">Binary, ${formatBytes(body.size)}${bytes.length > shown ? `; the first ${shown} bytes as hex` : ', as hex'}</p>
    <pre>${hexDump(bytes)}</pre>
    ${cut}
  </div>`;
}

/** One side (request, response, replay answer): optional status line, headers, body; `compare`: see HeadersTable. */
export function ExchangeSide({ title, level = 3, status, headers, body, compare, children }) {
  const H = `h${level}`;
  const Sub = `h${level + 1}`;
  return html`<section class="exchange-side">
    <${H}>${title}</${H}>
    ${status !== undefined ? html`<p>Status <strong>${status}</strong></p>` : ''}
    ${children}
    <${Sub}>Headers</${Sub}>
    <${HeadersTable} headers=${headers} caption=${`${title} headers`} compare=${compare} />
    <${Sub}>Body</${Sub}>
    <${BodyView} body=${body} headers=${headers} />
  </section>`;
}
