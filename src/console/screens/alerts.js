// Traffic alerts: the account's rules with their status (unknown, ok, firing), a form to create one, and a rule's own
// page (/console/alerts/{uuid}) with its events, "Send test" (records a `test` event and notifies every channel once)
// and delete. API: docs/api.md "Traffic alerts", docs/traffic.md "Alerts".
import { html, useState } from '../vendor/htm-preact.mjs';
import { api } from '../api.js';
import { Link, navigate } from '../router.js';
import { ConfirmButton, ErrorMessage, Loading, formatTime, useAction, useApi } from '../ui.js';
import { AlertStatus, METRICS, WINDOWS, channelText, condition, metricValue } from './alert-format.js';

/** The account's endpoints by uuid, for names and the rule form's choice (empty when they cannot be read). */
function useEndpoints() {
  const { data } = useApi('/v1/endpoints?page_size=100');
  return data?.items ?? [];
}

function EndpointName({ rule, endpoints }) {
  if (!rule.endpoint_uuid) return 'All endpoints';
  const e = endpoints.find((x) => x.uuid === rule.endpoint_uuid);
  return html`<${Link} to=${`/endpoints/${encodeURIComponent(rule.endpoint_uuid)}`}>${e ? e.hostname : rule.endpoint_uuid}</${Link}>`;
}

// Labels beside their fields (the stylesheet is shared; CSSOM styles from script are allowed by the policy).
const FORM_GRID = { display: 'grid', gridTemplateColumns: 'max-content minmax(0, 30rem)', gap: '0.5rem 1rem', alignItems: 'center' };

const EMPTY_FORM = { name: '', endpoint: '', metric: 'error_rate', comparison: 'gt', threshold: '0.05', window: '300', channel: 'email', to: '', url: '', secret: '' };

function NewRule({ endpoints, onCreated }) {
  const [form, setForm] = useState(EMPTY_FORM);
  const action = useAction();
  const set = (field) => (e) => setForm({ ...form, [field]: e.currentTarget.value });
  const submit = (event) => {
    event.preventDefault();
    const channel =
      form.channel === 'email'
        ? { type: 'email', to: form.to.trim() }
        : { type: 'webhook', url: form.url.trim(), ...(form.secret ? { secret: form.secret } : {}) };
    const body = {
      name: form.name.trim(),
      endpoint_id: form.endpoint || null,
      metric: form.metric,
      comparison: form.comparison,
      threshold: Number(form.threshold),
      channels: [channel],
    };
    if (form.metric !== 'endpoint_down') body.window_seconds = Number(form.window);
    return action.run(async () => {
      const rule = await api('POST', '/v1/traffic/alerts', body);
      setForm(EMPTY_FORM);
      onCreated(rule);
    });
  };
  return html`<section>
    <h2>New rule</h2>
    <form class="form-grid" style=${FORM_GRID} onSubmit=${submit}>
      <label for="rule-name">Name</label>
      <input id="rule-name" required maxlength="100" value=${form.name} onInput=${set('name')} />
      <label for="rule-endpoint">Endpoint</label>
      <select id="rule-endpoint" value=${form.endpoint} onChange=${set('endpoint')}>
        <option value="">All endpoints of the account</option>
        ${endpoints.map((e) => html`<option value=${e.uuid}>${e.hostname}</option>`)}
      </select>
      <label for="rule-metric">Metric</label>
      <select id="rule-metric" value=${form.metric} onChange=${set('metric')}>
        ${METRICS.map(([value, label]) => html`<option value=${value}>${label}</option>`)}
      </select>
      <label for="rule-comparison">Fires when the value is</label>
      <select id="rule-comparison" value=${form.comparison} onChange=${set('comparison')}>
        <option value="gt">above the threshold</option>
        <option value="lt">below the threshold</option>
      </select>
      <label for="rule-threshold">Threshold</label>
      <span>
        <input id="rule-threshold" type="number" min="0" step="any" required value=${form.threshold} onInput=${set('threshold')} aria-describedby="rule-threshold-hint" />
        <span id="rule-threshold-hint" class="hint"> ${form.metric === 'error_rate' ? 'A fraction: 0.05 is 5 %.' : form.metric === 'latency_p95_ms' ? 'Milliseconds.' : ''}</span>
      </span>
      ${form.metric !== 'endpoint_down'
        ? html`<label for="rule-window">Window</label>
            <select id="rule-window" value=${form.window} onChange=${set('window')}>
              ${WINDOWS.map(([s, label]) => html`<option value=${String(s)}>${label}</option>`)}
            </select>`
        : ''}
      <label for="rule-channel">Notify by</label>
      <select id="rule-channel" value=${form.channel} onChange=${set('channel')}>
        <option value="email">E-mail</option>
        <option value="webhook">Webhook</option>
      </select>
      ${form.channel === 'email'
        ? html`<label for="rule-to">E-mail address</label>
            <input id="rule-to" type="email" required value=${form.to} onInput=${set('to')} />`
        : html`<label for="rule-url">Webhook URL</label>
            <input id="rule-url" type="url" required placeholder="https://hooks.example.com/alerts" value=${form.url} onInput=${set('url')} />
            <label for="rule-secret">Signing secret (optional)</label>
            <input id="rule-secret" type="password" autocomplete="off" minlength="16" value=${form.secret} onInput=${set('secret')} />`}
      <span></span>
      <span><button type="submit" class="primary" disabled=${action.busy}>Create rule</button></span>
    </form>
    <${ErrorMessage} error=${action.error} />
  </section>`;
}

export function AlertList() {
  const rules = useApi('/v1/traffic/alerts', { pollMs: 15_000 });
  const endpoints = useEndpoints();
  const remove = useAction();
  const del = (rule) =>
    remove.run(async () => {
      await api('DELETE', `/v1/traffic/alerts/${encodeURIComponent(rule.uuid)}`);
      rules.reload();
    });
  const items = rules.data?.items ?? [];
  return html`<section>
    <h1>Alerts</h1>
    <p class="hint">Rules judged every minute against the account's traffic; a rule notifies its channels when it starts firing and when it resolves.</p>
    <${ErrorMessage} error=${rules.error} />
    ${!rules.data
      ? rules.error
        ? ''
        : html`<${Loading} what="Loading alert rules" />`
      : items.length === 0
        ? html`<p>No alert rules yet.</p>`
        : html`<table>
            <caption class="visually-hidden">Alert rules</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                <th scope="col">Condition</th>
                <th scope="col">Endpoint</th>
                <th scope="col">Last value</th>
                <th scope="col">Last evaluated</th>
                <th scope="col"><span class="visually-hidden">Actions</span></th>
              </tr>
            </thead>
            <tbody>
              ${items.map(
                (rule) => html`<tr key=${rule.uuid}>
                  <td><${Link} to=${`/alerts/${encodeURIComponent(rule.uuid)}`}>${rule.name}</${Link}></td>
                  <td><${AlertStatus} status=${rule.status} /></td>
                  <td>${condition(rule)}</td>
                  <td><${EndpointName} rule=${rule} endpoints=${endpoints} /></td>
                  <td>${metricValue(rule.metric, rule.last_value)}</td>
                  <td>${formatTime(rule.last_evaluated_at)}</td>
                  <td><${ConfirmButton} label=${`Delete ${rule.name}`} confirmLabel="Yes, delete" onConfirm=${() => del(rule)} /></td>
                </tr>`,
              )}
            </tbody>
          </table>`}
    <${ErrorMessage} error=${remove.error} />
    <${NewRule} endpoints=${endpoints} onCreated=${(rule) => navigate(`/alerts/${encodeURIComponent(rule.uuid)}`)} />
  </section>`;
}

function Events({ events }) {
  const items = events.data?.items ?? [];
  return html`<section>
    <h2>Events</h2>
    <${ErrorMessage} error=${events.error} />
    ${!events.data
      ? events.error
        ? ''
        : html`<${Loading} what="Loading events" />`
      : items.length === 0
        ? html`<p>No events yet: the rule has neither fired nor resolved, and no test was sent.</p>`
        : html`<table>
            <caption class="visually-hidden">Events, most recent first</caption>
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Event</th>
                <th scope="col">Value</th>
                <th scope="col">Notification</th>
              </tr>
            </thead>
            <tbody>
              ${items.map(
                (e) => html`<tr key=${e.id}>
                  <td><time datetime=${e.triggered_at}>${formatTime(e.triggered_at)}</time></td>
                  <td><${AlertStatus} status=${e.status} /></td>
                  <td>${e.value}</td>
                  <td>${e.notified ? 'Sent to every channel' : `Not sent: ${e.notification_err ?? 'unknown reason'}`}</td>
                </tr>`,
              )}
            </tbody>
          </table>`}
  </section>`;
}

export function AlertScreen({ id }) {
  const path = `/v1/traffic/alerts/${encodeURIComponent(id)}`;
  const rule = useApi(path, { pollMs: 15_000 });
  const events = useApi(`${path}/events?limit=100`, { pollMs: 15_000 });
  const endpoints = useEndpoints();
  const test = useAction();
  const remove = useAction();
  const [sent, setSent] = useState(null);
  const back = html`<p><${Link} to="/alerts">All alert rules</${Link}></p>`;
  if (rule.error && !rule.data) return html`<section><h1>Alert rule</h1><${ErrorMessage} error=${rule.error} />${back}</section>`;
  if (!rule.data) return html`<${Loading} what="Loading the alert rule" />`;
  const r = rule.data;
  const sendTest = () =>
    test.run(async () => {
      setSent(null);
      setSent(await api('POST', `${path}/test`));
      events.reload();
    });
  const del = () =>
    remove.run(async () => {
      await api('DELETE', path);
      navigate('/alerts');
    });
  return html`<section>
    ${back}
    <h1>${r.name} <${AlertStatus} status=${r.status} /></h1>
    <dl class="facts">
      <dt>Status</dt><dd>${r.status}${r.status === 'unknown' ? ' (not judged with data yet)' : ''}</dd>
      <dt>Condition</dt><dd>${condition(r)}</dd>
      <dt>Endpoint</dt><dd><${EndpointName} rule=${r} endpoints=${endpoints} /></dd>
      <dt>Last value</dt><dd>${metricValue(r.metric, r.last_value)}</dd>
      <dt>Last evaluated</dt><dd>${formatTime(r.last_evaluated_at)}</dd>
      <dt>Channels</dt><dd><ul class="plain">${r.channels.map((c) => html`<li>${channelText(c)}</li>`)}</ul></dd>
      <dt>Created</dt><dd>${formatTime(r.created_at)}</dd>
    </dl>
    <div class="toolbar">
      <button type="button" disabled=${test.busy} onClick=${sendTest}>Send test</button>
      <${ConfirmButton} label="Delete rule" onConfirm=${del} disabled=${remove.busy} />
    </div>
    <${ErrorMessage} error=${test.error} />
    <${ErrorMessage} error=${remove.error} />
    ${sent
      ? html`<p role="status">${sent.notified ? 'Test sent to every channel.' : `Test recorded, but not every channel took it: ${sent.notification_err ?? ''}`}</p>`
      : ''}
    <${Events} events=${events} />
  </section>`;
}
