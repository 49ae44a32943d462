// The endpoint's routing tab: rules that send matching requests to a chosen agent (by id or tags) or an origin, in
// evaluation order, created and deleted here. Every operation needs the plan's `endpoint_routing_rules` (the API's
// 403 names it). API: docs/api.md "Routing rules", docs/routing-rules.md.
import { html, useState } from '../vendor/htm-preact.mjs';
import { api } from '../api.js';
import { ConfirmButton, ErrorMessage, Loading, useAction, useApi } from '../ui.js';
import { CHECK_ROW, FORM_GRID, endpointApi, intOr } from './endpoint-common.js';

const TYPES = [
  ['path', 'path', 'prefix, exact or glob (empty: prefix)'],
  ['method', 'method', ''],
  ['header', 'header', 'the header name'],
  ['query', 'query', 'the parameter name'],
  ['cookie', 'cookie', 'the cookie name'],
  ['source_ip', 'source IP', ''],
  ['host', 'host', ''],
];
const KEYED = new Set(['path', 'header', 'query', 'cookie']);

function conditionText(c) {
  return `${c.condition_type}${c.condition_key ? ` ${c.condition_key}` : ''} ${c.pattern}`;
}

function targetText(rule) {
  if (rule.target_origin_url) return `origin ${rule.target_origin_url}`;
  const parts = [];
  if (rule.target_agent_id) parts.push(`agent ${rule.target_agent_id}`);
  if (rule.target_agent_tags) parts.push(`agents tagged ${rule.target_agent_tags}`);
  return parts.join(', ') || 'any agent';
}

function NewRule({ endpoint, onCreated }) {
  const empty = { name: '', priority: '0', enabled: true, target: 'agent', agent_id: '', tags: '', origin: '' };
  const [f, setF] = useState(empty);
  const [rows, setRows] = useState([{ key: 'c0', condition_type: 'path', condition_key: '', pattern: '' }]);
  const action = useAction();
  const set = (key) => (e) => setF({ ...f, [key]: e.currentTarget.type === 'checkbox' ? e.currentTarget.checked : e.currentTarget.value });
  const update = (i, patch) => setRows(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  const submit = async (event) => {
    event.preventDefault();
    const body = {
      name: f.name.trim(),
      priority: intOr(f.priority, 0),
      enabled: f.enabled,
      conditions: rows.map((r) => ({ condition_type: r.condition_type, condition_key: KEYED.has(r.condition_type) ? r.condition_key.trim() : '', pattern: r.pattern.trim() })),
    };
    if (f.target === 'origin') body.target_origin_url = f.origin.trim();
    else {
      if (f.agent_id.trim()) body.target_agent_id = f.agent_id.trim();
      if (f.tags.trim()) body.target_agent_tags = f.tags.trim();
    }
    const created = await action.run(() => api('POST', endpointApi(endpoint.uuid, 'routing-rules'), body));
    if (created) {
      setF(empty);
      setRows([{ key: `c${Date.now()}`, condition_type: 'path', condition_key: '', pattern: '' }]);
      onCreated();
    }
  };
  return html`<form onSubmit=${submit} aria-labelledby="new-route-heading">
    <h3 id="new-route-heading">Add a routing rule</h3>
    <div style=${FORM_GRID}>
      <label for="route-name">Name</label>
      <input id="route-name" value=${f.name} onInput=${set('name')} autocomplete="off" />
      <label for="route-priority">Priority (lower first)</label>
      <input id="route-priority" type="number" value=${f.priority} onInput=${set('priority')} />
      <div style=${CHECK_ROW}><input id="route-enabled" type="checkbox" checked=${f.enabled} onChange=${set('enabled')} /> <label for="route-enabled">Enabled</label></div>
      <label for="route-target">Send to</label>
      <select id="route-target" value=${f.target} onChange=${set('target')}>
        <option value="agent">agents (by id and/or tags)</option>
        <option value="origin">an origin URL</option>
      </select>
      ${f.target === 'origin'
        ? html`<label for="route-origin">Origin URL</label>
            <input id="route-origin" type="url" value=${f.origin} onInput=${set('origin')} />`
        : html`<label for="route-agent">Agent id (optional)</label>
            <input id="route-agent" value=${f.agent_id} onInput=${set('agent_id')} autocomplete="off" />
            <label for="route-tags">Agent tags (comma separated, all required)</label>
            <input id="route-tags" value=${f.tags} onInput=${set('tags')} autocomplete="off" />`}
    </div>
    <fieldset>
      <legend>Conditions (all must match)</legend>
      ${rows.map(
        (r, i) => html`<div class="toolbar" key=${r.key}>
          <label for=${`route-type-${r.key}`}>Type ${i + 1}</label>
          <select id=${`route-type-${r.key}`} value=${r.condition_type} onChange=${(e) => update(i, { condition_type: e.currentTarget.value })}>
            ${TYPES.map(([value, label]) => html`<option value=${value}>${label}</option>`)}
          </select>
          ${KEYED.has(r.condition_type)
            ? html`<label for=${`route-key-${r.key}`}>Key ${i + 1} (${TYPES.find((t) => t[0] === r.condition_type)[2]})</label>
                <input id=${`route-key-${r.key}`} value=${r.condition_key} onInput=${(e) => update(i, { condition_key: e.currentTarget.value })} autocomplete="off" />`
            : null}
          <label for=${`route-pattern-${r.key}`}>Pattern ${i + 1}</label>
          <input id=${`route-pattern-${r.key}`} value=${r.pattern} onInput=${(e) => update(i, { pattern: e.currentTarget.value })} autocomplete="off" />
          ${rows.length > 1 ? html`<button type="button" onClick=${() => setRows(rows.filter((_, j) => j !== i))}>Remove condition ${i + 1}</button>` : null}
        </div>`,
      )}
      <button type="button" onClick=${() => setRows([...rows, { key: `c${Date.now()}`, condition_type: 'path', condition_key: '', pattern: '' }])}>Add condition</button>
    </fieldset>
    <button type="submit" disabled=${action.busy}>Add routing rule</button>
    <${ErrorMessage} error=${action.error} />
  </form>`;
}

function RuleRow({ endpoint, rule, onChanged }) {
  const action = useAction();
  const remove = () => action.run(async () => {
    await api('DELETE', endpointApi(endpoint.uuid, `routing-rules/${rule.id}`));
    onChanged();
  });
  return html`<tr>
    <td class="num">${rule.priority}</td>
    <td>${rule.name || '—'}</td>
    <td>${rule.enabled ? html`<span class="badge ok">enabled</span>` : html`<span class="badge">disabled</span>`}</td>
    <td class="mono">${rule.conditions.map(conditionText).join(' AND ')}</td>
    <td>${targetText(rule)}</td>
    <td><${ConfirmButton} label=${`Delete routing rule ${rule.name || rule.id}`} disabled=${action.busy} onConfirm=${remove} /><${ErrorMessage} error=${action.error} /></td>
  </tr>`;
}

export function RoutingTab({ endpoint }) {
  const { data, error, reload } = useApi(endpointApi(endpoint.uuid, 'routing-rules'));
  return html`<section aria-labelledby="routing-heading">
    <h2 id="routing-heading">Routing rules</h2>
    <p class="hint">The first enabled rule whose conditions all match decides where a request goes; requests no rule matches go to the endpoint's origin if it has one, else to any of its agents. A matching rule whose target is not connected answers 502; it does not fall through.</p>
    <${ErrorMessage} error=${error} />
    ${!data && !error ? html`<${Loading} what="Loading the routing rules" />` : null}
    ${data
      ? data.items.length === 0
        ? html`<p>No routing rules.</p>`
        : html`<table>
            <caption class="visually-hidden">Routing rules in evaluation order</caption>
            <thead><tr><th scope="col" class="num">Priority</th><th scope="col">Name</th><th scope="col">State</th><th scope="col">Conditions</th><th scope="col">Target</th><th scope="col">Actions</th></tr></thead>
            <tbody>${data.items.map((r) => html`<${RuleRow} key=${r.id} endpoint=${endpoint} rule=${r} onChanged=${reload} />`)}</tbody>
          </table>`
      : null}
    ${error && !data ? null : html`<${NewRule} endpoint=${endpoint} onCreated=${reload} />`}
  </section>`;
}
