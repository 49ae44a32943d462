// Recent errors: the active account's error answers (status ≥ 400), newest first, by class and time window (both in
// the URL's query), each row linked to its request in the endpoint's inspector while the endpoint exists.
// API: GET /v1/traffic/errors/recent (docs/api.md "Recent errors").
import { html } from '../vendor/htm-preact.mjs';
import { Link, navigate } from '../router.js';
import { ErrorMessage, Loading, formatTime, useApi } from '../ui.js';
import { StatusBadge } from './inspector.js';

const TIERS = [
  ['', 'All errors'],
  ['4xx', '4xx (client)'],
  ['5xx', '5xx (server)'],
];
const WINDOWS = [
  [1, 'Last hour'],
  [6, 'Last 6 hours'],
  [24, 'Last 24 hours'],
  [72, 'Last 3 days'],
  [168, 'Last 7 days'],
  [720, 'Last 30 days'],
];
const LIMIT = 100;

export function RecentErrors({ query }) {
  const q = query ?? new URLSearchParams(location.search);
  const tier = ['4xx', '5xx'].includes(q.get('tier') ?? '') ? q.get('tier') : '';
  const asked = Number(q.get('hours'));
  const hours = WINDOWS.some(([h]) => h === asked) ? asked : 24;
  const params = new URLSearchParams({ hours: String(hours), limit: String(LIMIT) });
  if (tier) params.set('tier', tier);
  const { data, error } = useApi(`/v1/traffic/errors/recent?${params}`, { pollMs: 10_000 });

  const go = (next) => {
    const p = new URLSearchParams();
    if (next.tier) p.set('tier', next.tier);
    if (next.hours !== 24) p.set('hours', String(next.hours));
    const s = p.toString();
    navigate(`/traffic/errors${s ? `?${s}` : ''}`, { replace: true });
  };

  const rows = data?.errors ?? [];
  return html`<section>
    <h1>Recent errors</h1>
    <p class="hint">Error answers (status 400 and above) of every endpoint of the account, newest first, up to ${LIMIT}.</p>
    <form class="toolbar" aria-label="Which errors" onSubmit=${(e) => e.preventDefault()}>
      <label for="errors-tier">Class</label>
      <select id="errors-tier" value=${tier} onChange=${(e) => go({ tier: e.currentTarget.value, hours })}>
        ${TIERS.map(([value, label]) => html`<option value=${value}>${label}</option>`)}
      </select>
      <label for="errors-hours">Window</label>
      <select id="errors-hours" value=${String(hours)} onChange=${(e) => go({ tier, hours: Number(e.currentTarget.value) })}>
        ${WINDOWS.map(([value, label]) => html`<option value=${String(value)}>${label}</option>`)}
      </select>
    </form>
    <${ErrorMessage} error=${error} />
    ${!data
      ? error
        ? ''
        : html`<${Loading} what="Loading recent errors" />`
      : rows.length === 0
        ? html`<p>No errors in the last ${data.hours} hour${data.hours === 1 ? '' : 's'}${tier ? ` of class ${tier}` : ''}.</p>`
        : html`<table>
            <caption class="visually-hidden">Recent errors, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Status</th>
                <th scope="col">Method</th>
                <th scope="col">Path</th>
                <th scope="col">Endpoint</th>
                <th scope="col">Visitor</th>
              </tr>
            </thead>
            <tbody>
              ${rows.map(
                (row) => html`<tr key=${row.id}>
                  <td><time datetime=${row.created_at}>${formatTime(row.created_at)}</time></td>
                  <td><${StatusBadge} code=${row.status_code} /></td>
                  <td class="mono">${row.method}</td>
                  <td class="mono">
                    ${row.endpoint_uuid
                      ? html`<${Link} to=${`/endpoints/${encodeURIComponent(row.endpoint_uuid)}/traffic/${row.id}`}>${row.path}</${Link}>`
                      : row.path}
                  </td>
                  <td>
                    ${row.endpoint_uuid
                      ? html`<${Link} to=${`/endpoints/${encodeURIComponent(row.endpoint_uuid)}`}>${row.endpoint_name || row.host}</${Link}>`
                      : html`${row.endpoint_name || row.host || '—'} <span class="hint">(deleted)</span>`}
                  </td>
                  <td class="mono">${row.source_ip || '—'}</td>
                </tr>`,
              )}
            </tbody>
          </table>`}
  </section>`;
}
