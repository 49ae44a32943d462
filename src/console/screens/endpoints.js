// The endpoints list (/console/endpoints): the active account's endpoints a page at a time (the API pages them,
// newest first), searched by hostname or narrowed to a tag, with create, delete and promote. The search, the tag and
// the page live in the URL's query (`q`, `tag`, `page`, `page_size`), so a link or a reload shows the same page. Agents online come from one
// GET /v1/endpoints/{uuid}/tunnels per row shown (the list itself does not carry them). API: docs/api.md "Endpoints".
import { html, useEffect, useRef, useState } from '../vendor/htm-preact.mjs';
import { api } from '../api.js';
import { Link, navigate } from '../router.js';
import { ConfirmButton, ErrorMessage, Loading, formatTime, useAction, useApi } from '../ui.js';
import { EndpointStatus, endpointPath } from './endpoint-common.js';

const SEARCH_DEBOUNCE_MS = 300;
const PAGE_SIZES = [20, 50, 100];

/** The list's place as the URL says it: page ≥ 1, a page size the API accepts, the search text. */
function readQuery(query) {
  const page = Number.parseInt(query.get('page') ?? '1', 10);
  const size = Number.parseInt(query.get('page_size') ?? '20', 10);
  return {
    q: query.get('q') ?? '',
    tag: query.get('tag') ?? '',
    page: Number.isFinite(page) && page >= 1 ? page : 1,
    pageSize: PAGE_SIZES.includes(size) ? size : 20,
  };
}

function listUrl({ q, tag, page, pageSize }) {
  const params = new URLSearchParams();
  if (q) params.set('q', q);
  if (tag) params.set('tag', tag);
  if (page > 1) params.set('page', String(page));
  if (pageSize !== 20) params.set('page_size', String(pageSize));
  const s = params.toString();
  return s ? `/endpoints?${s}` : '/endpoints';
}

/** Agents serving the endpoint now, from presence: one request for this row. */
function AgentsOnline({ uuid, tick }) {
  const { data, error, reload } = useApi(`/v1/endpoints/${encodeURIComponent(uuid)}/tunnels`);
  const first = useRef(true);
  useEffect(() => {
    if (first.current) first.current = false;
    else reload();
  }, [tick]);
  if (error && !data) return html`<span class="badge bad" title=${error.message}>unknown</span>`;
  if (!data) return html`<span class="loading">…</span>`;
  const n = data.items.length;
  return html`<span class=${n > 0 ? 'badge ok' : 'badge'}>${n === 0 ? 'none' : `${n} online`}</span>`;
}

function CreateForm({ onCreated, onCancel }) {
  const [subdomain, setSubdomain] = useState('');
  const action = useAction();
  const submit = async (event) => {
    event.preventDefault();
    const name = subdomain.trim();
    const created = await action.run(() => api('POST', '/v1/endpoints', name ? { subdomain: name, is_custom: true } : {}));
    if (created) onCreated(created);
  };
  return html`<form class="panel" onSubmit=${submit} aria-labelledby="create-endpoint-heading">
    <h2 id="create-endpoint-heading">New endpoint</h2>
    <p class="hint">Leave the subdomain empty for a generated name. A chosen one needs a plan with custom subdomains.</p>
    <div class="toolbar">
      <label for="new-subdomain">Subdomain (optional)</label>
      <input id="new-subdomain" name="subdomain" value=${subdomain} onInput=${(e) => setSubdomain(e.currentTarget.value)} autocomplete="off" />
      <button type="submit" class="primary" disabled=${action.busy}>Create endpoint</button>
      <button type="button" onClick=${onCancel}>Cancel</button>
    </div>
    <${ErrorMessage} error=${action.error} />
  </form>`;
}

/** An endpoint's tags, each a link to the list narrowed to it. */
function Tags({ tags, where }) {
  if (!tags || tags.length === 0) return html`—`;
  return html`<ul class="tags">
    ${tags.map((tag) => html`<li key=${tag}><${Link} to=${listUrl({ ...where, tag, page: 1 })} aria-label=${`Endpoints tagged ${tag}`}>${tag}</${Link}></li>`)}
  </ul>`;
}

function Row({ endpoint, tick, where, onChanged }) {
  const action = useAction();
  const remove = () => action.run(async () => {
    await api('DELETE', `/v1/endpoints/${encodeURIComponent(endpoint.uuid)}`);
    onChanged({ deleted: endpoint.hostname });
  });
  const promote = () => action.run(async () => {
    await api('POST', `/v1/endpoints/${encodeURIComponent(endpoint.uuid)}/promote`);
    onChanged({});
  });
  return html`<tr>
    <td><${Link} to=${endpointPath(endpoint.uuid)}>${endpoint.hostname}</${Link}></td>
    <td><${EndpointStatus} endpoint=${endpoint} /></td>
    <td><${AgentsOnline} uuid=${endpoint.uuid} tick=${tick} /></td>
    <td><${Tags} tags=${endpoint.tags} where=${where} /></td>
    <td>${endpoint.ephemeral ? 'ephemeral' : 'permanent'}</td>
    <td>${formatTime(endpoint.created_at)}</td>
    <td>
      <div class="toolbar">
        ${endpoint.ephemeral ? html`<button type="button" disabled=${action.busy} onClick=${promote}>Promote</button>` : null}
        <${ConfirmButton} label="Delete" confirmLabel=${`Yes, delete ${endpoint.hostname}`} disabled=${action.busy} onConfirm=${remove} />
      </div>
      <${ErrorMessage} error=${action.error} />
    </td>
  </tr>`;
}

export function EndpointList({ query }) {
  const where = readQuery(query ?? new URLSearchParams(location.search));
  const [search, setSearch] = useState(where.q);
  const [creating, setCreating] = useState(false);
  const [notice, setNotice] = useState(null);
  const [tick, setTick] = useState(0);

  // The URL changed under us (back button, a link): the box follows it.
  useEffect(() => setSearch(where.q), [where.q]);
  // Typing searches after a pause; the URL is replaced, not pushed, so the back button skips the keystrokes.
  useEffect(() => {
    if (search.trim() === where.q) return undefined;
    const timer = setTimeout(() => navigate(listUrl({ ...where, q: search.trim(), page: 1 }), { replace: true }), SEARCH_DEBOUNCE_MS);
    return () => clearTimeout(timer);
  }, [search]);

  const params = new URLSearchParams({ page: String(where.page), page_size: String(where.pageSize) });
  if (where.q) params.set('q', where.q);
  if (where.tag) params.set('tag', where.tag);
  const { data, error, loading, reload } = useApi(`/v1/endpoints?${params}`);
  const refresh = () => {
    reload();
    setTick((n) => n + 1);
  };

  const onCreated = (created) => {
    setCreating(false);
    setNotice({ kind: 'created', endpoint: created });
    // Newest first: the new endpoint heads the first page of the unfiltered list.
    if (where.q || where.tag || where.page !== 1) navigate(listUrl({ ...where, q: '', tag: '', page: 1 }));
    else refresh();
  };
  const onChanged = ({ deleted }) => {
    setNotice(deleted ? { kind: 'deleted', hostname: deleted } : null);
    refresh();
  };

  const total = data?.total ?? 0;
  const pages = Math.max(1, Math.ceil(total / (data?.page_size ?? where.pageSize)));
  return html`<section aria-labelledby="endpoints-heading">
    <h1 id="endpoints-heading">Endpoints</h1>
    <div class="toolbar">
      <label for="endpoint-search">Search by hostname</label>
      <input id="endpoint-search" type="search" value=${search} onInput=${(e) => setSearch(e.currentTarget.value)} autocomplete="off" />
      <button type="button" onClick=${refresh}>Refresh</button>
      ${creating ? null : html`<button type="button" class="primary" onClick=${() => { setCreating(true); setNotice(null); }}>New endpoint</button>`}
    </div>
    ${where.tag
      ? html`<p class="notice">Showing endpoints tagged <strong>${where.tag}</strong>. <${Link} to=${listUrl({ ...where, tag: '', page: 1 })}>Show every endpoint</${Link}></p>`
      : null}
    ${creating ? html`<${CreateForm} onCreated=${onCreated} onCancel=${() => setCreating(false)} />` : null}
    <div aria-live="polite">
      ${notice?.kind === 'created'
        ? html`<p class="notice">Created <${Link} to=${endpointPath(notice.endpoint.uuid)}>${notice.endpoint.hostname}</${Link}>.</p>`
        : notice?.kind === 'deleted'
          ? html`<p class="notice">Deleted ${notice.hostname}.</p>`
          : null}
    </div>
    <${ErrorMessage} error=${error} />
    ${!data && loading ? html`<${Loading} what="Loading the endpoints" />` : null}
    ${data
      ? html`<table>
          <caption class="visually-hidden">Endpoints, newest first</caption>
          <thead><tr><th scope="col">Hostname</th><th scope="col">Status</th><th scope="col">Agents</th><th scope="col">Tags</th><th scope="col">Kind</th><th scope="col">Created</th><th scope="col">Actions</th></tr></thead>
          <tbody>
            ${data.items.length === 0
              ? html`<tr><td colspan="7">${where.q ? `No endpoint matches “${where.q}”.` : where.tag ? `No endpoint is tagged ${where.tag}.` : where.page > 1 ? 'No endpoints on this page.' : 'No endpoints yet.'}</td></tr>`
              : data.items.map((e) => html`<${Row} key=${e.uuid} endpoint=${e} tick=${tick} where=${where} onChanged=${onChanged} />`)}
          </tbody>
        </table>
        <nav class="toolbar" aria-label="Pages">
          ${where.page > 1 ? html`<${Link} to=${listUrl({ ...where, page: where.page - 1 })}>Previous page</${Link}>` : null}
          <span>Page ${where.page} of ${pages} · ${total} endpoint${total === 1 ? '' : 's'}</span>
          ${where.page < pages ? html`<${Link} to=${listUrl({ ...where, page: where.page + 1 })}>Next page</${Link}>` : null}
          <label for="page-size">Per page</label>
          <select id="page-size" value=${String(where.pageSize)} onChange=${(e) => navigate(listUrl({ ...where, page: 1, pageSize: Number(e.currentTarget.value) }))}>
            ${PAGE_SIZES.map((n) => html`<option value=${String(n)}>${n}</option>`)}
          </select>
        </nav>`
      : null}
  </section>`;
}
