// The endpoint's routing tab: rules that send matching requests to a chosen agent (by id or tags) or an origin, in
// evaluation order, created, edited and deleted here. Every operation needs the plan's `endpoint_routing_rules` (the
// API's 403 names it). API: docs/api.md "Routing rules", docs/routing-rules.md.
import { html, useState } from '../vendor/htm-preact.mjs';
import { api } from '../api.js';
import { ConfirmButton, ErrorMessage, Loading, useAction, useApi } from '../ui.js';
import { CHECK_ROW, FORM_GRID, endpointApi, intOr } from './endpoint-common.js';
import { ConditionList, FormActions, rowKey, useEditing, useFields, useFocusOnOpen } from './endpoint-rule-form.js';

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

const blankCondition = () => ({ key: rowKey(), condition_type: 'path', condition_key: '', pattern: '' });
const EMPTY = { name: '', priority: '0', enabled: true, target: 'agent', agent_id: '', tags: '', origin: '' };

/** A stored rule as the form's fields, so editing starts from what the API holds. */
function fieldsOf(rule) {
  return {
    name: rule.name,
    priority: String(rule.priority),
    enabled: rule.enabled,
    target: rule.target_origin_url ? 'origin' : 'agent',
    agent_id: rule.target_agent_id ?? '',
    tags: rule.target_agent_tags ?? '',
    origin: rule.target_origin_url ?? '',
  };
}

/**
 * The body of a create or a PUT. PUT replaces the whole rule (omitted fields are zeroed), so every field is sent, and
 * only the chosen kind of target: a rule targets agents or an origin, never both.
 */
function ruleBody(f, rows) {
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
  return body;
}

/**
 * A rule's form, for a new rule and for editing one: `id` prefixes the controls' ids (both forms can be on the page);
 * `save(body)` writes it and resolves truthy once the API took it. A refusal stays beside the form with what was typed.
 */
function RuleForm({ id, heading, initial, initialRows, submitLabel, save, onCancel, resetAfterSave }) {
  const [f, set, setF] = useFields(initial);
  const [rows, setRows] = useState(initialRows);
  const action = useAction();
  const first = useFocusOnOpen();
  const submit = async (event) => {
    event.preventDefault();
    const saved = await action.run(() => save(ruleBody(f, rows)));
    if (saved && resetAfterSave) {
      setF(initial);
      setRows([blankCondition()]);
    }
  };
  const row = (r, i, update) => html`
    <label for=${`${id}-type-${r.key}`}>Type ${i + 1}</label>
    <select id=${`${id}-type-${r.key}`} value=${r.condition_type} onChange=${(e) => update({ condition_type: e.currentTarget.value })}>
      ${TYPES.map(([value, label]) => html`<option value=${value}>${label}</option>`)}
    </select>
    ${KEYED.has(r.condition_type)
      ? html`<label for=${`${id}-key-${r.key}`}>Key ${i + 1} (${TYPES.find((t) => t[0] === r.condition_type)[2]})</label>
          <input id=${`${id}-key-${r.key}`} value=${r.condition_key} onInput=${(e) => update({ condition_key: e.currentTarget.value })} autocomplete="off" />`
      : null}
    <label for=${`${id}-pattern-${r.key}`}>Pattern ${i + 1}</label>
    <input id=${`${id}-pattern-${r.key}`} value=${r.pattern} onInput=${(e) => update({ pattern: e.currentTarget.value })} autocomplete="off" />`;
  return html`<form onSubmit=${submit} aria-labelledby=${`${id}-heading`}>
    <h3 id=${`${id}-heading`}>${heading}</h3>
    <div style=${FORM_GRID}>
      <label for=${`${id}-name`}>Name</label>
      <input id=${`${id}-name`} ref=${onCancel ? first : null} value=${f.name} onInput=${set('name')} autocomplete="off" />
      <label for=${`${id}-priority`}>Priority (lower first)</label>
      <input id=${`${id}-priority`} type="number" value=${f.priority} onInput=${set('priority')} />
      <div style=${CHECK_ROW}><input id=${`${id}-enabled`} type="checkbox" checked=${f.enabled} onChange=${set('enabled')} /> <label for=${`${id}-enabled`}>Enabled</label></div>
      <label for=${`${id}-target`}>Send to</label>
      <select id=${`${id}-target`} value=${f.target} onChange=${set('target')}>
        <option value="agent">agents (by id and/or tags)</option>
        <option value="origin">an origin URL</option>
      </select>
      ${f.target === 'origin'
        ? html`<label for=${`${id}-origin`}>Origin URL</label>
            <input id=${`${id}-origin`} type="url" value=${f.origin} onInput=${set('origin')} />`
        : html`<label for=${`${id}-agent`}>Agent id (optional)</label>
            <input id=${`${id}-agent`} value=${f.agent_id} onInput=${set('agent_id')} autocomplete="off" />
            <label for=${`${id}-tags`}>Agent tags (comma separated, all required)</label>
            <input id=${`${id}-tags`} value=${f.tags} onInput=${set('tags')} autocomplete="off" />`}
    </div>
    <${ConditionList} legend="Conditions (all must match)" rows=${rows} setRows=${setRows} blank=${blankCondition} minRows=${1} renderRow=${row} />
    <${FormActions} submitLabel=${submitLabel} busy=${action.busy} onCancel=${onCancel} error=${action.error} />
  </form>`;
}

function NewRule({ endpoint, onCreated }) {
  const save = async (body) => {
    await api('POST', endpointApi(endpoint.uuid, 'routing-rules'), body);
    onCreated();
    return true;
  };
  return html`<${RuleForm} id="route" heading="Add a routing rule" initial=${EMPTY} initialRows=${[blankCondition()]} submitLabel="Add routing rule" save=${save} resetAfterSave=${true} />`;
}

function RuleRow({ endpoint, rule, onChanged }) {
  const action = useAction();
  const edit = useEditing();
  const label = rule.name || rule.id;
  const remove = () => action.run(async () => {
    await api('DELETE', endpointApi(endpoint.uuid, `routing-rules/${rule.id}`));
    onChanged();
  });
  // A full replacement (docs/api.md): the form sends every field, as pre-filled or as changed.
  const save = async (body) => {
    await api('PUT', endpointApi(endpoint.uuid, `routing-rules/${rule.id}`), body);
    edit.close();
    onChanged();
    return true;
  };
  const editor = edit.editing
    ? html`<tr class="editing" key="edit"><td colspan="6">
        <${RuleForm}
          id=${`route-${rule.id}`}
          heading=${`Edit routing rule ${label}`}
          initial=${fieldsOf(rule)}
          initialRows=${rule.conditions.map((c) => ({ key: rowKey(), condition_type: c.condition_type, condition_key: c.condition_key ?? '', pattern: c.pattern }))}
          submitLabel="Save routing rule"
          save=${save}
          onCancel=${edit.close}
        />
      </td></tr>`
    : null;
  return html`<tr key="row">
      <td class="num">${rule.priority}</td>
      <td>${rule.name || '—'}</td>
      <td>${rule.enabled ? html`<span class="badge ok">enabled</span>` : html`<span class="badge">disabled</span>`}</td>
      <td class="mono">${rule.conditions.map(conditionText).join(' AND ')}</td>
      <td>${targetText(rule)}</td>
      <td>
        <div class="toolbar">
          <button type="button" ref=${edit.buttonRef} aria-expanded=${edit.editing ? 'true' : 'false'} disabled=${edit.editing} onClick=${edit.open}>Edit routing rule ${label}</button>
          <${ConfirmButton} label=${`Delete routing rule ${label}`} disabled=${action.busy} onConfirm=${remove} />
        </div>
        <${ErrorMessage} error=${action.error} />
      </td>
    </tr>
    ${editor}`;
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
