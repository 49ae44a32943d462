// Traffic alerts: the account's rules with their status (unknown, ok, firing), a form to create one, and a rule's own
// page (/console/alerts/{uuid}) with its events, edit (the same form, pre-filled), "Send test" (records a `test` event
// and notifies every channel once) and delete. API: docs/api.md "Traffic alerts", docs/traffic.md "Alerts".
import { html, useState } from '../vendor/htm-preact.mjs';
import { api } from '../api.js';
import { Link, navigate } from '../router.js';
import { ConfirmButton, ErrorMessage, Loading, formatTime, useAction, useApi } from '../ui.js';
import { AlertStatus, METRICS, WINDOWS, channelText, condition, metricValue, windowLabel } from './alert-format.js';

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
const ACROSS = { gridColumn: '1 / -1' };

/** As many channels as the API takes on one rule (MAX_ALERT_CHANNELS). */
const MAX_CHANNELS = 10;

const EMPTY_CHANNEL = { type: 'email', to: '', url: '', secret: '', signed: false, unsign: false };
const EMPTY_FORM = { name: '', endpoint: '', metric: 'error_rate', comparison: 'gt', threshold: '0.05', window: '300', channels: [EMPTY_CHANNEL] };

/** A rule as GET returns it, as the form's fields; a webhook's secret is never returned, so its field starts empty. */
function ruleFields(rule) {
  return {
    name: rule.name,
    endpoint: rule.endpoint_uuid ?? '',
    metric: rule.metric,
    comparison: rule.comparison,
    threshold: String(rule.threshold),
    window: String(rule.window_seconds),
    channels: rule.channels.map((c) =>
      c.type === 'email' ? { ...EMPTY_CHANNEL, to: c.to } : { ...EMPTY_CHANNEL, type: 'webhook', url: c.url, signed: !!c.has_secret },
    ),
  };
}

/**
 * A channel as the API takes it. A webhook's empty secret field is left out, which keeps the current secret of the
 * channel with the same URL (docs/api.md); "stop signing" sends null, which removes it.
 */
function channelBody(c) {
  if (c.type === 'email') return { type: 'email', to: c.to.trim() };
  const body = { type: 'webhook', url: c.url.trim() };
  if (c.secret) body.secret = c.secret;
  else if (c.unsign) body.secret = null;
  return body;
}

function ruleBody(form) {
  const body = {
    name: form.name.trim(),
    endpoint_id: form.endpoint || null,
    metric: form.metric,
    comparison: form.comparison,
    threshold: Number(form.threshold),
    channels: form.channels.map(channelBody),
  };
  if (form.metric !== 'endpoint_down') body.window_seconds = Number(form.window);
  return body;
}

/** One channel's fields; the first channel's labels are plain, later ones say which channel they belong to. */
function ChannelFields({ channel: c, index, count, editing, onChange, onRemove }) {
  const n = index === 0 ? '' : ` (channel ${index + 1})`;
  const id = (field) => `rule-${field}-${index}`;
  const set = (field) => (e) => onChange({ ...c, [field]: e.currentTarget.type === 'checkbox' ? e.currentTarget.checked : e.currentTarget.value });
  return html`
    <label for=${id('channel')}>Notify by${n}</label>
    <span class="toolbar">
      <select id=${id('channel')} value=${c.type} onChange=${set('type')}>
        <option value="email">E-mail</option>
        <option value="webhook">Webhook</option>
      </select>
      ${count > 1 ? html`<button type="button" onClick=${onRemove}>Remove channel ${index + 1}</button>` : ''}
    </span>
    ${c.type === 'email'
      ? html`<label for=${id('to')}>E-mail address${n}</label>
          <input id=${id('to')} type="email" required value=${c.to} onInput=${set('to')} />`
      : html`<label for=${id('url')}>Webhook URL${n}</label>
          <input id=${id('url')} type="url" required placeholder="https://hooks.example.com/alerts" value=${c.url} onInput=${set('url')} />
          <label for=${id('secret')}>${editing && c.signed ? 'New signing secret' : 'Signing secret (optional)'}${n}</label>
          <input
            id=${id('secret')}
            type="password"
            autocomplete="off"
            minlength="16"
            value=${c.secret}
            disabled=${c.unsign}
            onInput=${set('secret')}
            aria-describedby=${editing && c.signed ? id('secret-hint') : undefined}
          />
          ${editing && c.signed
            ? html`<span></span><span id=${id('secret-hint')} class="hint">Left empty, deliveries stay signed with the current secret while the URL stays the same.</span>
                <span style=${ACROSS}><input id=${id('unsign')} type="checkbox" checked=${c.unsign} onChange=${set('unsign')} /> <label for=${id('unsign')}>Stop signing deliveries${n}</label></span>`
            : ''}`}`;
}

/**
 * The rule's fields, for a new rule or an existing one (`rule`: pre-filled from it, saved with PUT, which writes the
 * whole rule). `onSave(body)` makes the call; its error stays beside the form.
 */
function RuleForm({ rule, endpoints, submitLabel, onSave, onCancel }) {
  const editing = rule !== undefined;
  const [form, setForm] = useState(editing ? ruleFields(rule) : EMPTY_FORM);
  const action = useAction();
  const set = (field) => (e) => setForm({ ...form, [field]: e.currentTarget.value });
  const setChannels = (channels) => setForm({ ...form, channels });
  const submit = (event) => {
    event.preventDefault();
    return action.run(async () => {
      await onSave(ruleBody(form));
      if (!editing) setForm(EMPTY_FORM);
    });
  };
  // A rule's endpoint or window the lists do not hold (an endpoint beyond the first page, a window set through the
  // API) is offered as it is, so saving does not change it unasked.
  const endpointOptions = form.endpoint && !endpoints.some((e) => e.uuid === form.endpoint) ? [...endpoints, { uuid: form.endpoint, hostname: form.endpoint }] : endpoints;
  const windows = WINDOWS.some(([s]) => String(s) === form.window) ? WINDOWS : [...WINDOWS, [Number(form.window), windowLabel(Number(form.window))]];
  return html`<form class="form-grid" style=${FORM_GRID} onSubmit=${submit} aria-label=${editing ? `Edit rule ${rule.name}` : 'New rule'}>
      <label for="rule-name">Name</label>
      <input id="rule-name" required maxlength="100" value=${form.name} onInput=${set('name')} />
      <label for="rule-endpoint">Endpoint</label>
      <select id="rule-endpoint" value=${form.endpoint} onChange=${set('endpoint')}>
        <option value="">All endpoints of the account</option>
        ${endpointOptions.map((e) => html`<option value=${e.uuid}>${e.hostname}</option>`)}
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
              ${windows.map(([s, label]) => html`<option value=${String(s)}>${label}</option>`)}
            </select>`
        : ''}
      ${form.channels.map(
        (c, i) => html`<${ChannelFields}
          key=${i}
          channel=${c}
          index=${i}
          count=${form.channels.length}
          editing=${editing}
          onChange=${(next) => setChannels(form.channels.map((x, j) => (j === i ? next : x)))}
          onRemove=${() => setChannels(form.channels.filter((_, j) => j !== i))}
        />`,
      )}
      <span></span>
      <span class="toolbar">
        ${form.channels.length < MAX_CHANNELS ? html`<button type="button" onClick=${() => setChannels([...form.channels, EMPTY_CHANNEL])}>Add a channel</button>` : ''}
        <button type="submit" class="primary" disabled=${action.busy}>${submitLabel}</button>
        ${onCancel ? html`<button type="button" onClick=${onCancel}>Cancel</button>` : ''}
      </span>
      <span style=${ACROSS}><${ErrorMessage} error=${action.error} /></span>
    </form>`;
}

function NewRule({ endpoints, onCreated }) {
  return html`<section>
    <h2>New rule</h2>
    <${RuleForm} endpoints=${endpoints} submitLabel="Create rule" onSave=${async (body) => onCreated(await api('POST', '/v1/traffic/alerts', body))} />
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
  const [editing, setEditing] = useState(false);
  const [saved, setSaved] = useState(false);
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
  const save = async (body) => {
    await api('PUT', path, body);
    setEditing(false);
    setSaved(true);
    rule.reload();
  };
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
      <button type="button" aria-expanded=${editing ? 'true' : 'false'} onClick=${() => { setSaved(false); setEditing(!editing); }}>Edit rule</button>
      <button type="button" disabled=${test.busy} onClick=${sendTest}>Send test</button>
      <${ConfirmButton} label="Delete rule" onConfirm=${del} disabled=${remove.busy} />
      ${saved ? html`<span role="status">Rule saved.</span>` : ''}
    </div>
    ${editing
      ? html`<section class="edit-form">
          <h2>Edit the rule</h2>
          <p class="hint">Saving writes the whole rule; its status and events stay.</p>
          <${RuleForm} key=${r.updated_at} rule=${r} endpoints=${endpoints} submitLabel="Save rule" onSave=${save} onCancel=${() => setEditing(false)} />
        </section>`
      : ''}
    <${ErrorMessage} error=${test.error} />
    <${ErrorMessage} error=${remove.error} />
    ${sent
      ? html`<p role="status">${sent.notified ? 'Test sent to every channel.' : `Test recorded, but not every channel took it: ${sent.notification_err ?? ''}`}</p>`
      : ''}
    <${Events} events=${events} />
  </section>`;
}
