// The traffic inspector: an endpoint's captured requests, newest first and live while the page is open, filtered by
// status class, method and path prefix (kept in the URL's query so a link keeps them); one request at its own URL
// (/console/endpoints/{uuid}/traffic/{id}) with its headers and bodies, and a replay through the edge shown beside
// the original answer. Rendered by the endpoint screen as its `traffic` tab. API: docs/traffic.md "Logs", "Replay".
import { html, useEffect, useMemo, useRef, useState } from '../vendor/htm-preact.mjs';
import { api } from '../api.js';
import { Link, navigate } from '../router.js';
import { ConfirmButton, ErrorMessage, Loading, formatBytes, formatTime, useAction, useApi } from '../ui.js';
import { ExchangeSide } from './inspector-exchange.js';

const POLL_MS = 2000;
const PAGE = 50;
const STATUS_CLASSES = ['2xx', '3xx', '4xx', '5xx'];
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/** The filters as the URL's query holds them, normalised to what the API accepts. */
function readFilters(query) {
  const q = query ?? new URLSearchParams(location.search);
  const status = (q.get('status') ?? '').toLowerCase();
  const method = (q.get('method') ?? '').toUpperCase();
  return {
    status: STATUS_CLASSES.includes(status) ? status : '',
    method: /^[A-Z]{1,20}$/.test(method) ? method : '',
    path: q.get('path') ?? '',
  };
}

function filterQuery({ status, method, path }) {
  const q = new URLSearchParams();
  if (status) q.set('status', status);
  if (method) q.set('method', method);
  if (path) q.set('path', path);
  const s = q.toString();
  return s ? `?${s}` : '';
}

export function statusClass(code) {
  if (code >= 500) return 'bad';
  if (code >= 400) return 'warn';
  if (code >= 200 && code < 300) return 'ok';
  return '';
}

export function StatusBadge({ code }) {
  if (!code) return html`<span class="badge" title="The exchange ended before a response head">no answer</span>`;
  return html`<span class=${`badge ${statusClass(code)}`}>${code}</span>`;
}

function fullPath(row) {
  return row.query ? `${row.path}?${row.query}` : row.path;
}

function Filters({ filters, onChange }) {
  const [path, setPath] = useState(filters.path);
  useEffect(() => setPath(filters.path), [filters.path]);
  const submit = (event) => {
    event.preventDefault();
    const p = path.trim();
    onChange({ ...filters, path: p && !p.startsWith('/') ? `/${p}` : p });
  };
  const active = filters.status || filters.method || filters.path;
  return html`<form class="toolbar" role="search" aria-label="Filter captured requests" onSubmit=${submit}>
    <label for="filter-status">Status</label>
    <select id="filter-status" value=${filters.status} onChange=${(e) => onChange({ ...filters, status: e.currentTarget.value })}>
      <option value="">Any</option>
      ${STATUS_CLASSES.map((c) => html`<option value=${c}>${c}</option>`)}
    </select>
    <label for="filter-method">Method</label>
    <select id="filter-method" value=${filters.method} onChange=${(e) => onChange({ ...filters, method: e.currentTarget.value })}>
      <option value="">Any</option>
      ${[...new Set([...METHODS, ...(filters.method ? [filters.method] : [])])].map((m) => html`<option value=${m}>${m}</option>`)}
    </select>
    <label for="filter-path">Path starts with</label>
    <input id="filter-path" type="text" placeholder="/api" value=${path} onInput=${(e) => setPath(e.currentTarget.value)} />
    <button type="submit">Apply</button>
    ${active ? html`<button type="button" onClick=${() => onChange({ status: '', method: '', path: '' })}>Clear filters</button>` : ''}
  </form>`;
}

/** The endpoint's capture setting, with the one change the inspector offers: capture in full. */
function CaptureNotice({ endpoint, capture, onCapture }) {
  const action = useAction();
  const on = capture.enabled && capture.level !== 'off';
  const full = on && capture.level === 'full';
  if (full) return null;
  const turnOn = () =>
    action.run(async () => {
      await api('PUT', `/v1/endpoints/${encodeURIComponent(endpoint.uuid)}/settings/capture`, { capture_enabled: true, capture_level: 'full' });
      onCapture({ enabled: true, level: 'full' });
    });
  return html`<div class="warning">
    <p>
      ${on
        ? 'This endpoint captures metadata only: headers and bodies are not kept, and requests cannot be replayed.'
        : 'Capture is off for this endpoint: new requests are counted but not listed here.'}
      ${' '}Full capture keeps headers (credentials redacted) and the first 10 KiB of each body.
    </p>
    <button type="button" disabled=${action.busy} onClick=${turnOn}>Capture headers and bodies</button>
    <${ErrorMessage} error=${action.error} />
  </div>`;
}

function RequestList({ rows, base, search, selected }) {
  return html`<table>
    <caption class="visually-hidden">Captured requests, newest first</caption>
    <thead>
      <tr>
        <th scope="col">Time</th>
        <th scope="col">Method</th>
        <th scope="col">Path</th>
        <th scope="col">Status</th>
        <th scope="col" class="num">Duration</th>
        <th scope="col" class="num">Sent</th>
      </tr>
    </thead>
    <tbody>
      ${rows.map(
        (row) => html`<tr key=${row.id} class=${String(row.id) === String(selected) ? 'selected' : ''}>
          <td><time datetime=${row.created_at}>${formatTime(row.created_at)}</time></td>
          <td class="mono">${row.method}</td>
          <td class="mono">
            <${Link} to=${`${base}/${row.id}${search}`} aria-current=${String(row.id) === String(selected) ? 'true' : undefined}>${fullPath(row)}</${Link}>
          </td>
          <td><${StatusBadge} code=${row.status_code} />${row.edge_error ? html` <span class="hint">${row.edge_error}</span>` : ''}</td>
          <td class="num">${row.duration_ms} ms</td>
          <td class="num">${formatBytes(row.bytes_out)}</td>
        </tr>`,
      )}
    </tbody>
  </table>`;
}

function Replay({ log }) {
  const action = useAction();
  const [result, setResult] = useState(null);
  useEffect(() => setResult(null), [log.id]);
  const safe = log.method === 'GET' || log.method === 'HEAD';
  const replay = () =>
    action.run(async () => {
      setResult(null);
      setResult(await api('POST', `/v1/traffic/logs/${log.id}/replay${safe ? '' : '?force=true'}`));
    });
  const why =
    log.capture_level !== 'full'
      ? 'Only a request captured in full can be replayed.'
      : !log.endpoint_exists
        ? 'The endpoint no longer exists.'
        : null;
  return html`<section class="replay">
    <h3>Replay</h3>
    <p class="hint">
      Sends the captured request again through the edge, as a visitor would: the endpoint answers as it is configured now.
      Redacted credentials are not sent.
    </p>
    <div class="toolbar">
      ${safe
        ? html`<button type="button" class="primary" disabled=${action.busy || why !== null} onClick=${replay}>Replay request</button>`
        : html`<${ConfirmButton} label=${`Replay ${log.method} request`} confirmLabel=${`Yes, send this ${log.method} again`} danger=${false} disabled=${action.busy || why !== null} onConfirm=${replay} />`}
      ${action.busy ? html`<span class="loading" aria-live="polite">Replaying…</span>` : ''}
      ${why ? html`<span class="hint">${why}</span>` : ''}
    </div>
    <${ErrorMessage} error=${action.error} />
    ${result &&
    html`<div class="side-by-side" aria-live="polite">
      <${ExchangeSide} title="Original response" level=${4} status=${log.status_code || 'no answer'} headers=${log.response?.headers} body=${log.response?.body}>
        <p class="hint">${formatTime(log.created_at)}, ${log.duration_ms} ms</p>
      </${ExchangeSide}>
      <${ExchangeSide} title="Replayed response" level=${4} status=${result.status} headers=${result.headers} body=${result.body} compare=${log.response?.headers ?? {}}>
        <p class="hint"><span class="mono">${result.request.method} ${result.request.url}</span>, ${result.duration_ms} ms</p>
        ${result.status !== log.status_code ? html`<p class="warning">The status differs from the original (${log.status_code || 'no answer'}).</p>` : ''}
      </${ExchangeSide}>
    </div>`}
  </section>`;
}

// Facts three to a row, the ones not recorded for this exchange left out.
const FACTS_GRID = { gridTemplateColumns: 'repeat(3, max-content minmax(0, 1fr))' };

function Facts({ log }) {
  const facts = [
    ['Time', formatTime(log.created_at)],
    ['Status', log.status_code || 'no answer'],
    ['Duration', `${log.duration_ms} ms`],
    ['Host', log.host],
    ['Received', formatBytes(log.bytes_in)],
    ['Sent', formatBytes(log.bytes_out)],
    ['Visitor', log.source_ip],
    ['Country', log.country],
    ['TLS', log.tls ? 'yes' : 'no'],
    ['Edge', [log.edge_node, log.region].filter(Boolean).join(', ')],
    ['Edge error', log.edge_error],
    ['Routing rule', log.routing_rule],
    ['Authentication', log.auth_outcome],
    ['RBAC client', log.rbac_client_id],
    ['Completed', log.completed ? 'yes' : 'no (cut short)'],
    ['Captured', log.capture_level],
    ['User agent', log.user_agent],
  ].filter(([, v]) => v !== null && v !== undefined && v !== '');
  return html`<dl class="facts" style=${FACTS_GRID}>${facts.map(([k, v]) => html`<dt>${k}</dt><dd>${v}</dd>`)}</dl>`;
}

const INHERIT_SIZE = { fontSize: 'inherit' };

function RequestDetail({ requestId, base, search }) {
  const { data: log, error, loading } = useApi(`/v1/traffic/logs/${encodeURIComponent(requestId)}`);
  const heading = useRef(null);
  useEffect(() => {
    heading.current?.focus();
  }, [requestId, log !== null]);
  const close = html`<p><${Link} to=${`${base}${search}`}>Back to the list</${Link}></p>`;
  if (error && !log) return html`<section class="request-detail"><h2>Request ${requestId}</h2><${ErrorMessage} error=${error} />${close}</section>`;
  if (!log || (loading && String(log.id) !== String(requestId))) return html`<section class="request-detail"><h2>Request ${requestId}</h2><${Loading} what="Loading the request" /></section>`;
  return html`<section class="request-detail">
    <h2 tabindex="-1" ref=${heading}><span class="mono" style=${INHERIT_SIZE}>${log.method} ${fullPath(log)}</span> <${StatusBadge} code=${log.status_code} /></h2>
    ${close}
    <${Facts} log=${log} />
    ${log.request === null
      ? html`<p class="warning">This request was captured as metadata only: headers and bodies are kept with full capture.</p>`
      : html`<div class="side-by-side">
          <${ExchangeSide} title="Request" level=${3} headers=${log.request.headers} body=${log.request.body} />
          <${ExchangeSide} title="Response" level=${3} status=${log.status_code || 'no answer'} headers=${log.response?.headers} body=${log.response?.body} />
        </div>`}
    <${Replay} log=${log} />
  </section>`;
}

/**
 * The endpoint's `traffic` tab. `endpoint`: the endpoint as GET /v1/endpoints/{uuid} answers; `requestId`: the
 * selected request's log id from the URL, if any; `query`: the URL's query (URLSearchParams) holding the filters.
 */
export function Inspector({ endpoint, requestId, query }) {
  const base = `/endpoints/${encodeURIComponent(endpoint.uuid)}/traffic`;
  const filters = readFilters(query);
  const search = filterQuery(filters);
  const [live, setLive] = useState(true);
  const [capture, setCapture] = useState({ enabled: !!endpoint.capture_enabled, level: endpoint.capture_level ?? null });
  useEffect(() => setCapture({ enabled: !!endpoint.capture_enabled, level: endpoint.capture_level ?? null }), [endpoint.uuid]);

  const listPath = useMemo(() => {
    const q = new URLSearchParams({ endpoint: endpoint.uuid, limit: String(PAGE) });
    if (filters.status) q.set('status', filters.status);
    if (filters.method) q.set('method', filters.method);
    if (filters.path) q.set('path_prefix', filters.path);
    return `/v1/traffic/logs?${q}`;
  }, [endpoint.uuid, filters.status, filters.method, filters.path]);
  const list = useApi(listPath, { pollMs: live ? POLL_MS : undefined });

  // Older pages, fetched on request with the cursor; reset when the filters change.
  const [older, setOlder] = useState({ path: listPath, items: [], cursor: undefined });
  const more = useAction();
  const olderItems = older.path === listPath ? older.items : [];
  const cursor = older.path === listPath && older.cursor !== undefined ? older.cursor : list.data?.next_cursor;
  const loadOlder = () =>
    more.run(async () => {
      const page = await api('GET', `${listPath}&cursor=${encodeURIComponent(cursor)}`);
      setOlder({ path: listPath, items: [...olderItems, ...page.items], cursor: page.next_cursor });
    });
  const rows = useMemo(() => {
    const seen = new Set();
    return [...(list.data?.items ?? []), ...olderItems].filter((r) => (seen.has(r.id) ? false : (seen.add(r.id), true)));
  }, [list.data, olderItems]);

  const setFilters = (next) => navigate(`${base}${requestId ? `/${encodeURIComponent(requestId)}` : ''}${filterQuery(next)}`, { replace: true });

  return html`<div class="inspector">
    <${CaptureNotice} endpoint=${endpoint} capture=${capture} onCapture=${setCapture} />
    ${requestId ? html`<${RequestDetail} key=${requestId} requestId=${requestId} base=${base} search=${search} />` : ''}
    <section class="request-list">
      <h2>Captured requests</h2>
      <${Filters} filters=${filters} onChange=${setFilters} />
      <div class="toolbar">
        <input id="inspector-live" type="checkbox" checked=${live} onChange=${(e) => setLive(e.currentTarget.checked)} />
        <label for="inspector-live">Live (refresh every ${POLL_MS / 1000} s)</label>
        <span class="hint" aria-live="polite">${list.data ? `${rows.length} request${rows.length === 1 ? '' : 's'} shown` : ''}</span>
      </div>
      <${ErrorMessage} error=${list.error} />
      ${!list.data
        ? list.error
          ? ''
          : html`<${Loading} what="Loading captured requests" />`
        : rows.length === 0
          ? html`<p>No captured requests${search ? ' match these filters' : ' yet'}.</p>`
          : html`<${RequestList} rows=${rows} base=${base} search=${search} selected=${requestId} />`}
      ${cursor && rows.length > 0
        ? html`<p><button type="button" disabled=${more.busy} onClick=${loadOlder}>Show older requests</button></p>`
        : ''}
      <${ErrorMessage} error=${more.error} />
    </section>
  </div>`;
}
