// The endpoint's overview tab: its public name and state, the agents serving it now (polled while the page is open),
// its tags, dedicated ports, request capture, and promote / delete. API: docs/api.md "Endpoints", "Tunnels", "Tags",
// "Request capture", "Dedicated ports", "Promote".
import { html, useState } from '../vendor/htm-preact.mjs';
import { api } from '../api.js';
import { navigate } from '../router.js';
import { ConfirmButton, ErrorMessage, Loading, formatTime, useAction, useApi, useDraft } from '../ui.js';
import { EndpointStatus, endpointApi } from './endpoint-common.js';

const AGENTS_POLL_MS = 2000;

function Agents({ endpoint }) {
  const { data, error } = useApi(endpointApi(endpoint.uuid, 'tunnels'), { pollMs: AGENTS_POLL_MS });
  return html`<section aria-labelledby="agents-heading">
    <h2 id="agents-heading">Agents connected</h2>
    <${ErrorMessage} error=${error} />
    ${!data && !error ? html`<${Loading} what="Loading the agents" />` : null}
    ${data && data.items.length === 0 ? html`<p>No agent serves this endpoint now. Start one with <code>edge agent --endpoint ${endpoint.uuid}</code>.</p>` : null}
    ${data && data.items.length > 0
      ? html`<table>
          <caption class="visually-hidden">Agents serving this endpoint</caption>
          <thead><tr><th scope="col">Agent id</th><th scope="col">Tags</th><th scope="col">Transport</th><th scope="col">Region</th><th scope="col">Edge</th><th scope="col">Connected</th></tr></thead>
          <tbody>
            ${data.items.map(
              (a) => html`<tr key=${`${a.agent_id}@${a.edge_node}`}>
                <td class="mono">${a.agent_id}</td>
                <td>${a.tags.length ? a.tags.join(', ') : '—'}</td>
                <td>${a.protocol}</td>
                <td>${a.region}</td>
                <td class="mono">${a.edge_node}</td>
                <td>${formatTime(a.connected_at)}</td>
              </tr>`,
            )}
          </tbody>
        </table>`
      : null}
  </section>`;
}

function Capture({ endpoint, reloadEndpoint }) {
  const [enabled, setEnabled] = useDraft(!!endpoint.capture_enabled);
  const [level, setLevel] = useDraft(endpoint.capture_level || 'metadata');
  const action = useAction();
  const [saved, setSaved] = useState(false);
  const submit = async (event) => {
    event.preventDefault();
    setSaved(false);
    const ok = await action.run(async () => {
      await api('PUT', endpointApi(endpoint.uuid, 'settings/capture'), { capture_enabled: enabled && level !== 'off', capture_level: enabled ? level : 'off' });
      return true;
    });
    if (ok) {
      setSaved(true);
      reloadEndpoint();
    }
  };
  return html`<section aria-labelledby="capture-heading">
    <h2 id="capture-heading">Request capture</h2>
    <p>Capture is <strong>${endpoint.capture_enabled ? `on (${endpoint.capture_level || 'metadata'})` : 'off'}</strong>. Full capture keeps headers and bodies (needed to replay); metadata keeps the request line and status.</p>
    <form class="toolbar" onSubmit=${submit}>
      <input id="capture-enabled" type="checkbox" checked=${enabled} onChange=${(e) => setEnabled(e.currentTarget.checked)} />
      <label for="capture-enabled">Capture requests</label>
      <label for="capture-level">Level</label>
      <select id="capture-level" value=${level} disabled=${!enabled} onChange=${(e) => setLevel(e.currentTarget.value)}>
        <option value="full">full</option>
        <option value="metadata">metadata</option>
      </select>
      <button type="submit" disabled=${action.busy}>Save capture</button>
      ${saved ? html`<span role="status">Saved.</span>` : null}
    </form>
    <${ErrorMessage} error=${action.error} />
  </section>`;
}

/** The endpoint's tags as one comma-separated field: saving writes the whole set (PUT …/tags), empty clears it. */
function EndpointTags({ endpoint, reloadEndpoint }) {
  const shown = (endpoint.tags ?? []).join(', ');
  const [text, setText] = useDraft(shown);
  const [saved, setSaved] = useState(false);
  const action = useAction();
  const submit = async (event) => {
    event.preventDefault();
    setSaved(false);
    const tags = text.split(',').map((t) => t.trim()).filter(Boolean);
    const ok = await action.run(async () => {
      await api('PUT', endpointApi(endpoint.uuid, 'tags'), { tags });
      return true;
    });
    if (ok) {
      setSaved(true);
      reloadEndpoint();
    }
  };
  return html`<section aria-labelledby="tags-heading">
    <h2 id="tags-heading">Tags</h2>
    <p>${shown ? html`Tagged <strong>${shown}</strong>.` : 'No tags.'} Tags are labels for you and for configuration as code (<code>edge apply --select-tag</code>); the edge ignores them.</p>
    <form class="toolbar" onSubmit=${submit}>
      <label for="endpoint-tags">Tags, comma-separated</label>
      <input id="endpoint-tags" value=${text} onInput=${(e) => setText(e.currentTarget.value)} autocomplete="off" />
      <button type="submit" disabled=${action.busy}>Save tags</button>
      ${saved ? html`<span role="status">Saved.</span>` : null}
    </form>
    <${ErrorMessage} error=${action.error} />
  </section>`;
}

function Ports({ endpoint, reloadEndpoint }) {
  const [tcp, setTcp] = useState(endpoint.dedicated_tcp_port ?? '');
  const [udp, setUdp] = useState(endpoint.dedicated_udp_port ?? '');
  const action = useAction();
  const port = (v) => (String(v).trim() === '' ? null : Number(v));
  const submit = async (event) => {
    event.preventDefault();
    const ok = await action.run(async () => {
      await api('PUT', endpointApi(endpoint.uuid, 'ports'), { dedicated_tcp_port: port(tcp), dedicated_udp_port: port(udp) });
      return true;
    });
    if (ok) reloadEndpoint();
  };
  return html`<section aria-labelledby="ports-heading">
    <h2 id="ports-heading">Dedicated ports</h2>
    <p>TCP ${endpoint.dedicated_tcp_port ?? 'none'} · UDP ${endpoint.dedicated_udp_port ?? 'none'}. Empty clears a port.</p>
    <form class="toolbar" onSubmit=${submit}>
      <label for="port-tcp">TCP port</label>
      <input id="port-tcp" type="number" min="1024" max="65535" value=${tcp} onInput=${(e) => setTcp(e.currentTarget.value)} />
      <label for="port-udp">UDP port</label>
      <input id="port-udp" type="number" min="1024" max="65535" value=${udp} onInput=${(e) => setUdp(e.currentTarget.value)} />
      <button type="submit" disabled=${action.busy}>Save ports</button>
    </form>
    <${ErrorMessage} error=${action.error} />
  </section>`;
}

export function OverviewTab({ endpoint, reloadEndpoint }) {
  const action = useAction();
  const promote = () => action.run(async () => {
    await api('POST', endpointApi(endpoint.uuid, 'promote'));
    reloadEndpoint();
  });
  const remove = () => action.run(async () => {
    await api('DELETE', endpointApi(endpoint.uuid));
    navigate('/endpoints');
  });
  return html`<section aria-labelledby="overview-heading">
    <h2 id="overview-heading" class="visually-hidden">Overview</h2>
    <dl class="facts">
      <dt>Public URL</dt><dd class="mono">${endpoint.public_url}</dd>
      <dt>Status</dt><dd><${EndpointStatus} endpoint=${endpoint} /></dd>
      <dt>Kind</dt><dd>${endpoint.ephemeral ? `ephemeral (last active ${formatTime(endpoint.last_active_at)})` : 'permanent'}</dd>
      <dt>Protocol</dt><dd>${endpoint.protocol}</dd>
      <dt>Origin</dt><dd>${endpoint.origin_url ?? 'none: requests go to agents'}</dd>
      <dt>mTLS</dt><dd>${endpoint.mtls_mode}</dd>
      <dt>Id</dt><dd class="mono">${endpoint.uuid}</dd>
      <dt>Created</dt><dd>${formatTime(endpoint.created_at)}</dd>
    </dl>
    <div class="toolbar">
      ${endpoint.ephemeral ? html`<button type="button" disabled=${action.busy} onClick=${promote}>Promote to permanent</button>` : null}
      <${ConfirmButton} label="Delete endpoint" confirmLabel=${`Yes, delete ${endpoint.hostname}`} disabled=${action.busy} onConfirm=${remove} />
    </div>
    <${ErrorMessage} error=${action.error} />
    <${Agents} endpoint=${endpoint} />
    <${EndpointTags} endpoint=${endpoint} reloadEndpoint=${reloadEndpoint} />
    <${Capture} endpoint=${endpoint} reloadEndpoint=${reloadEndpoint} />
    <${Ports} endpoint=${endpoint} reloadEndpoint=${reloadEndpoint} />
  </section>`;
}
