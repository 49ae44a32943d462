// The endpoint's rate-limits tab: its firewall rules in evaluation order with their conditions, limit, action,
// status, priority and hits, a warning on each shadowed rule (one an earlier rule always beats) saying why, and
// creating a rule with conditions, or deleting one. Writes need `rate_limits:update` and the plan's
// `custom_rate_limits`. API: docs/api.md "Firewall rate limits", docs/rate-limits.md.
import { html, useState } from '../vendor/htm-preact.mjs';
import { api } from '../api.js';
import { ConfirmButton, ErrorMessage, Loading, formatTime, useAction, useApi } from '../ui.js';
import { FORM_GRID, intOr } from './endpoint-common.js';

/** docs/rate-limits.md "Conditions": the operators each type allows. */
export const OPERATORS_BY_TYPE = {
  path: ['equals', 'in', 'not_in', 'contains', 'prefix', 'matches', 'exact_equals', 'exact_in', 'exact_not_in', 'exact_contains', 'exact_prefix', 'exact_matches'],
  method: ['equals', 'in', 'not_in'],
  source_ip: ['in', 'not_in'],
  header: ['exists', 'not_exists', 'equals', 'contains', 'prefix', 'matches'],
  cookie: ['exists', 'not_exists', 'equals', 'contains', 'prefix', 'matches'],
  country: ['equals', 'in', 'not_in'],
  asn: ['equals', 'in', 'not_in'],
  browser: ['equals', 'in', 'not_in'],
  user_agent: ['equals', 'contains', 'prefix', 'matches'],
  endpoint: ['equals', 'in', 'not_in', 'contains', 'prefix', 'matches'],
  protocol: ['equals', 'in', 'not_in'],
  port: ['equals', 'in', 'not_in'],
};
const TYPES = Object.keys(OPERATORS_BY_TYPE);

/** `path prefix /api AND method in GET,HEAD`: the rule's conditions as one line, in evaluation order. */
export function conditionText(conditions) {
  if (!conditions.length) return 'every request';
  return conditions
    .map((c, i) => `${c.condition_type} ${c.operator}${c.condition_value ? ` ${c.condition_value}` : ''}${i < conditions.length - 1 ? ` ${c.logical_operator}` : ''}`)
    .join(' ');
}

function ConditionRows({ rows, setRows }) {
  const update = (i, patch) => setRows(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  return html`<fieldset>
    <legend>Conditions (none: every request; AND binds tighter than OR)</legend>
    ${rows.map(
      (r, i) => html`<div class="toolbar" key=${r.key}>
        <label for=${`rl-type-${r.key}`}>Type ${i + 1}</label>
        <select id=${`rl-type-${r.key}`} value=${r.type} onChange=${(e) => update(i, { type: e.currentTarget.value, operator: OPERATORS_BY_TYPE[e.currentTarget.value][0] })}>
          ${TYPES.map((t) => html`<option value=${t}>${t}</option>`)}
        </select>
        <label for=${`rl-op-${r.key}`}>Operator ${i + 1}</label>
        <select id=${`rl-op-${r.key}`} value=${r.operator} onChange=${(e) => update(i, { operator: e.currentTarget.value })}>
          ${OPERATORS_BY_TYPE[r.type].map((o) => html`<option value=${o}>${o}</option>`)}
        </select>
        <label for=${`rl-value-${r.key}`}>Value ${i + 1}</label>
        <input id=${`rl-value-${r.key}`} value=${r.value} onInput=${(e) => update(i, { value: e.currentTarget.value })} autocomplete="off" />
        ${i < rows.length - 1
          ? html`<label for=${`rl-join-${r.key}`}>Then</label>
              <select id=${`rl-join-${r.key}`} value=${r.logical_operator} onChange=${(e) => update(i, { logical_operator: e.currentTarget.value })}>
                <option value="AND">AND</option>
                <option value="OR">OR</option>
              </select>`
          : null}
        <button type="button" onClick=${() => setRows(rows.filter((_, j) => j !== i))}>Remove condition ${i + 1}</button>
      </div>`,
    )}
    <button type="button" onClick=${() => setRows([...rows, { key: `${Date.now()}-${rows.length}`, type: 'path', operator: 'prefix', value: '', logical_operator: 'AND' }])}>Add condition</button>
  </fieldset>`;
}

function NewRule({ endpoint, onCreated }) {
  const empty = { name: '', requests: '100', window: '60', action: 'block', status: 'active', priority: '0', scope: 'edge' };
  const [f, setF] = useState(empty);
  const [rows, setRows] = useState([]);
  const action = useAction();
  const set = (key) => (e) => setF({ ...f, [key]: e.currentTarget.value });
  const submit = async (event) => {
    event.preventDefault();
    const body = {
      endpoint_id: endpoint.uuid,
      name: f.name.trim(),
      requests_per_window: intOr(f.requests, 0),
      window_size_seconds: intOr(f.window, 0),
      action: f.action,
      status: f.status,
      priority: intOr(f.priority, 0),
      scope: f.scope,
      conditions: rows.map((r) => ({ type: r.type, operator: r.operator, value: r.value, logical_operator: r.logical_operator })),
    };
    const created = await action.run(() => api('POST', '/v1/firewall/rate-limits', body));
    if (created) {
      setF(empty);
      setRows([]);
      onCreated();
    }
  };
  return html`<form onSubmit=${submit} aria-labelledby="new-rule-heading">
    <h3 id="new-rule-heading">Add a rule</h3>
    <div style=${FORM_GRID}>
      <label for="rl-name">Name</label>
      <input id="rl-name" value=${f.name} onInput=${set('name')} autocomplete="off" />
      <label for="rl-requests">Requests per window</label>
      <input id="rl-requests" type="number" min="1" value=${f.requests} onInput=${set('requests')} />
      <label for="rl-window">Window (seconds)</label>
      <input id="rl-window" type="number" min="1" max="86400" value=${f.window} onInput=${set('window')} />
      <label for="rl-action">Action</label>
      <select id="rl-action" value=${f.action} onChange=${set('action')}>
        <option value="block">block (429)</option>
        <option value="throttle">throttle</option>
      </select>
      <label for="rl-status">Status</label>
      <select id="rl-status" value=${f.status} onChange=${set('status')}>
        <option value="active">active</option>
        <option value="inactive">inactive</option>
        <option value="disabled">disabled</option>
      </select>
      <label for="rl-priority">Priority (lower first)</label>
      <input id="rl-priority" type="number" value=${f.priority} onInput=${set('priority')} />
      <label for="rl-scope">Counted</label>
      <select id="rl-scope" value=${f.scope} onChange=${set('scope')}>
        <option value="edge">per edge</option>
        <option value="cluster">across the cluster</option>
      </select>
    </div>
    <${ConditionRows} rows=${rows} setRows=${setRows} />
    <button type="submit" disabled=${action.busy || f.name.trim() === ''}>Add rule</button>
    <${ErrorMessage} error=${action.error} />
  </form>`;
}

function RuleRow({ rule, onChanged }) {
  const action = useAction();
  const remove = () => action.run(async () => {
    await api('DELETE', `/v1/firewall/rate-limits/${encodeURIComponent(rule.uuid)}`);
    onChanged();
  });
  return html`<tr>
    <td class="num">${rule.priority}</td>
    <td>
      ${rule.name}
      ${rule.description ? html`<br /><span class="hint">${rule.description}</span>` : null}
      ${rule.shadowed ? html`<p class="warning" role="note"><strong>Shadowed:</strong> this rule never acts. ${rule.shadow_reason ?? ''}</p>` : null}
    </td>
    <td class="mono">${conditionText(rule.conditions)}</td>
    <td>${rule.requests_per_window} per ${rule.window_size_seconds} s (${rule.scope})</td>
    <td>${rule.action}</td>
    <td><span class=${`badge ${rule.status === 'active' ? 'ok' : ''}`}>${rule.status}</span></td>
    <td class="num">${rule.hit_count}<br /><span class="hint">last ${formatTime(rule.last_matched)}</span></td>
    <td><${ConfirmButton} label=${`Delete rule ${rule.name}`} disabled=${action.busy} onConfirm=${remove} /><${ErrorMessage} error=${action.error} /></td>
  </tr>`;
}

export function RateLimitsTab({ endpoint }) {
  const { data, error, reload } = useApi(`/v1/firewall/rate-limits?endpoint_id=${encodeURIComponent(endpoint.uuid)}&limit=100`);
  if (error && !data) return html`<h2>Rate limits</h2><${ErrorMessage} error=${error} />`;
  if (!data) return html`<${Loading} what="Loading the rate limits" />`;
  const rules = [...data.rules].sort((a, b) => a.priority - b.priority || a.id - b.id);
  const shadowed = rules.filter((r) => r.shadowed).length;
  return html`<section aria-labelledby="rate-limits-heading">
    <h2 id="rate-limits-heading">Rate-limit rules</h2>
    <p class="hint">Active rules are evaluated lowest priority first; hits are matches over the last 7 days.</p>
    ${shadowed > 0 ? html`<p class="warning" role="status">${shadowed} rule${shadowed === 1 ? ' is' : 's are'} shadowed: an earlier rule always acts first.</p>` : null}
    <${ErrorMessage} error=${error} />
    ${rules.length === 0
      ? html`<p>No rules.</p>`
      : html`<table>
          <caption class="visually-hidden">Rate-limit rules in evaluation order</caption>
          <thead><tr><th scope="col" class="num">Priority</th><th scope="col">Name</th><th scope="col">Conditions</th><th scope="col">Limit</th><th scope="col">Action</th><th scope="col">Status</th><th scope="col" class="num">Hits (7 d)</th><th scope="col">Actions</th></tr></thead>
          <tbody>${rules.map((r) => html`<${RuleRow} key=${r.uuid} rule=${r} onChanged=${reload} />`)}</tbody>
        </table>`}
    ${data.pagination.total > rules.length ? html`<p class="hint">Showing the first ${rules.length} of ${data.pagination.total} rules.</p>` : null}
    <${NewRule} endpoint=${endpoint} onCreated=${reload} />
  </section>`;
}
