// The endpoint's rate-limits tab: its firewall rules in evaluation order with their conditions, limit, action,
// status, priority and hits, a warning on each shadowed rule (one an earlier rule always beats) saying why; creating a
// rule with conditions, editing one (its fields, and adding or deleting its conditions), deleting one. Writes need
// `rate_limits:update` and the plan's `custom_rate_limits`. API: docs/api.md "Firewall rate limits", docs/rate-limits.md.
import { html, useState } from '../vendor/htm-preact.mjs';
import { api } from '../api.js';
import { ConfirmButton, ErrorMessage, Loading, formatTime, useAction, useApi } from '../ui.js';
import { FORM_GRID, intOr } from './endpoint-common.js';
import { ConditionList, FormActions, rowKey, useEditing, useFields, useFocusOnOpen } from './endpoint-rule-form.js';

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

const blankCondition = () => ({ key: rowKey(), type: 'path', operator: 'prefix', value: '', logical_operator: 'AND' });

/** A condition's type, operator and value; `id` prefixes the ids, `n` follows each label ("Type 2"). */
function ConditionFields({ id, n, row, update }) {
  const suffix = n ? ` ${n}` : '';
  return html`
    <label for=${`${id}-type`}>Type${suffix}</label>
    <select id=${`${id}-type`} value=${row.type} onChange=${(e) => update({ type: e.currentTarget.value, operator: OPERATORS_BY_TYPE[e.currentTarget.value][0] })}>
      ${TYPES.map((t) => html`<option value=${t}>${t}</option>`)}
    </select>
    <label for=${`${id}-op`}>Operator${suffix}</label>
    <select id=${`${id}-op`} value=${row.operator} onChange=${(e) => update({ operator: e.currentTarget.value })}>
      ${OPERATORS_BY_TYPE[row.type].map((o) => html`<option value=${o}>${o}</option>`)}
    </select>
    <label for=${`${id}-value`}>Value${suffix}</label>
    <input id=${`${id}-value`} value=${row.value} onInput=${(e) => update({ value: e.currentTarget.value })} autocomplete="off" />`;
}

/** What a condition row sends (the body of `POST …/conditions`, and an item of a rule's `conditions`). */
const conditionBody = (r) => ({ type: r.type, operator: r.operator, value: r.value, logical_operator: r.logical_operator });

function ConditionRows({ rows, setRows }) {
  const row = (r, i, update) => html`
    <${ConditionFields} id=${`rl-${r.key}`} n=${i + 1} row=${r} update=${update} />
    ${i < rows.length - 1
      ? html`<label for=${`rl-join-${r.key}`}>Then</label>
          <select id=${`rl-join-${r.key}`} value=${r.logical_operator} onChange=${(e) => update({ logical_operator: e.currentTarget.value })}>
            <option value="AND">AND</option>
            <option value="OR">OR</option>
          </select>`
      : null}`;
  return html`<${ConditionList} legend="Conditions (none: every request; AND binds tighter than OR)" rows=${rows} setRows=${setRows} blank=${blankCondition} renderRow=${row} />`;
}

const EMPTY = { name: '', description: '', requests: '100', window: '60', action: 'block', status: 'active', priority: '0', scope: 'edge', fail_mode: 'open' };

/** A stored rule as the form's fields, so editing starts from what the API holds. */
function fieldsOf(rule) {
  return {
    name: rule.name,
    description: rule.description,
    requests: String(rule.requests_per_window),
    window: String(rule.window_size_seconds),
    action: rule.action,
    status: rule.status,
    priority: String(rule.priority),
    scope: rule.scope,
    fail_mode: rule.fail_mode,
  };
}

/** The rule's own fields as create and PUT take them (PUT is a full write: an omitted field would take its default). */
function ruleBody(f) {
  return {
    name: f.name.trim(),
    description: f.description,
    requests_per_window: intOr(f.requests, 0),
    window_size_seconds: intOr(f.window, 0),
    action: f.action,
    status: f.status,
    priority: intOr(f.priority, 0),
    scope: f.scope,
    fail_mode: f.fail_mode,
  };
}

/** The rule's fields, two columns; `id` prefixes the controls' ids (the new-rule form and an editor can both be open). */
function RuleFields({ id, f, set, firstRef }) {
  return html`<div style=${FORM_GRID}>
    <label for=${`${id}-name`}>Name</label>
    <input id=${`${id}-name`} ref=${firstRef} value=${f.name} onInput=${set('name')} maxlength="100" autocomplete="off" />
    <label for=${`${id}-description`}>Description (optional)</label>
    <input id=${`${id}-description`} value=${f.description} onInput=${set('description')} maxlength="1000" autocomplete="off" />
    <label for=${`${id}-requests`}>Requests per window</label>
    <input id=${`${id}-requests`} type="number" min="1" value=${f.requests} onInput=${set('requests')} />
    <label for=${`${id}-window`}>Window (seconds)</label>
    <input id=${`${id}-window`} type="number" min="1" max="86400" value=${f.window} onInput=${set('window')} />
    <label for=${`${id}-action`}>Action</label>
    <select id=${`${id}-action`} value=${f.action} onChange=${set('action')}>
      <option value="block">block (429)</option>
      <option value="throttle">throttle</option>
    </select>
    <label for=${`${id}-status`}>Status</label>
    <select id=${`${id}-status`} value=${f.status} onChange=${set('status')}>
      <option value="active">active</option>
      <option value="inactive">inactive</option>
      <option value="disabled">disabled</option>
    </select>
    <label for=${`${id}-priority`}>Priority (lower first)</label>
    <input id=${`${id}-priority`} type="number" value=${f.priority} onInput=${set('priority')} />
    <label for=${`${id}-scope`}>Counted</label>
    <select id=${`${id}-scope`} value=${f.scope} onChange=${set('scope')}>
      <option value="edge">per edge</option>
      <option value="cluster">across the cluster</option>
    </select>
    <label for=${`${id}-fail`}>Cluster count unavailable</label>
    <select id=${`${id}-fail`} value=${f.fail_mode} onChange=${set('fail_mode')}>
      <option value="open">count on the edge (open)</option>
      <option value="closed">refuse with 503 (closed)</option>
    </select>
  </div>`;
}

function NewRule({ endpoint, onCreated }) {
  const [f, set, setF] = useFields(EMPTY);
  const [rows, setRows] = useState([]);
  const action = useAction();
  const submit = async (event) => {
    event.preventDefault();
    const body = { endpoint_id: endpoint.uuid, ...ruleBody(f), conditions: rows.map(conditionBody) };
    const created = await action.run(() => api('POST', '/v1/firewall/rate-limits', body));
    if (created) {
      setF(EMPTY);
      setRows([]);
      onCreated();
    }
  };
  return html`<form onSubmit=${submit} aria-labelledby="new-rule-heading">
    <h3 id="new-rule-heading">Add a rule</h3>
    <${RuleFields} id="rl" f=${f} set=${set} />
    <${ConditionRows} rows=${rows} setRows=${setRows} />
    <${FormActions} submitLabel="Add rule" busy=${action.busy} disabled=${f.name.trim() === ''} error=${action.error} />
  </form>`;
}

const ruleApi = (rule, rest = '') => `/v1/firewall/rate-limits/${encodeURIComponent(rule.uuid)}${rest}`;

/**
 * One of the rule's conditions in the editor, deleted at once (after a confirming click) by
 * `DELETE …/conditions/{uuid}`; the others keep their order.
 */
function StoredCondition({ rule, condition, n, last, onChanged }) {
  const action = useAction();
  const remove = () => action.run(async () => {
    await api('DELETE', ruleApi(rule, `/conditions/${encodeURIComponent(condition.uuid)}`));
    onChanged();
  });
  return html`<li>
    <span class="mono">${conditionText([condition])}</span>${last ? null : html` <span class="hint">${condition.logical_operator}</span>`}
    ${' '}<${ConfirmButton} label=${`Delete condition ${n}`} disabled=${action.busy} onConfirm=${remove} />
    <${ErrorMessage} error=${action.error} />
  </li>`;
}

/**
 * Appends a condition (`POST …/conditions`). The join to the conditions before it is the last condition's
 * `logical_operator`; choosing another one first rewrites that condition's join (`PUT …/conditions/{uuid}` with its
 * own type, operator and value). A join after the last condition is never read, so should the append then be
 * refused, what the rule matches has not changed.
 */
function AddCondition({ rule, onChanged }) {
  const last = rule.conditions[rule.conditions.length - 1];
  const [row, setRow] = useState(() => ({ ...blankCondition(), logical_operator: last?.logical_operator ?? 'AND' }));
  const action = useAction();
  const id = `rl-add-${rule.uuid}`;
  const submit = async (event) => {
    event.preventDefault();
    const added = await action.run(async () => {
      if (last && last.logical_operator !== row.logical_operator) {
        await api('PUT', ruleApi(rule, `/conditions/${encodeURIComponent(last.uuid)}`), {
          type: last.condition_type,
          operator: last.operator,
          value: last.condition_value,
          logical_operator: row.logical_operator,
        });
      }
      return api('POST', ruleApi(rule, '/conditions'), { ...conditionBody(row), logical_operator: 'AND' });
    });
    if (added) {
      setRow({ ...blankCondition(), logical_operator: 'AND' });
      onChanged();
    }
  };
  return html`<form onSubmit=${submit} aria-labelledby=${`${id}-heading`}>
    <h4 id=${`${id}-heading`}>Add a condition to ${rule.name}</h4>
    <div class="toolbar">
      ${last
        ? html`<label for=${`${id}-join`}>Joined by</label>
            <select id=${`${id}-join`} value=${row.logical_operator} onChange=${(e) => setRow({ ...row, logical_operator: e.currentTarget.value })}>
              <option value="AND">AND</option>
              <option value="OR">OR</option>
            </select>`
        : null}
      <${ConditionFields} id=${id} row=${row} update=${(patch) => setRow({ ...row, ...patch })} />
      <button type="submit" disabled=${action.busy}>Append condition</button>
    </div>
    <${ErrorMessage} error=${action.error} />
  </form>`;
}

/**
 * The editor under a rule's row. Saving PUTs the fields with the rule's conditions as they are now (PUT replaces
 * them; they change only through the condition controls below, which write at once), so Save waits while the list is
 * being re-read after such a change.
 */
function EditRule({ rule, reading, onSaved, onCancel, onChanged }) {
  const [f, set] = useFields(() => fieldsOf(rule));
  const action = useAction();
  const first = useFocusOnOpen();
  const id = `rl-edit-${rule.uuid}`;
  const submit = async (event) => {
    event.preventDefault();
    const conditions = rule.conditions.map((c) => ({ type: c.condition_type, operator: c.operator, value: c.condition_value, logical_operator: c.logical_operator }));
    const saved = await action.run(() => api('PUT', ruleApi(rule), { ...ruleBody(f), conditions }));
    if (saved) onSaved();
  };
  return html`<form onSubmit=${submit} aria-labelledby=${`${id}-heading`}>
      <h3 id=${`${id}-heading`}>Edit rule ${rule.name}</h3>
      <${RuleFields} id=${id} f=${f} set=${set} firstRef=${first} />
      <${FormActions} submitLabel="Save rule" busy=${action.busy} disabled=${reading || f.name.trim() === ''} onCancel=${onCancel} error=${action.error} />
    </form>
    <section aria-labelledby=${`${id}-conditions`}>
      <h4 id=${`${id}-conditions`}>Conditions of ${rule.name}</h4>
      <p class="hint">Adding or deleting a condition changes the rule at once; AND binds tighter than OR.</p>
      ${rule.conditions.length === 0
        ? html`<p>None: the rule counts every request.</p>`
        : html`<ol class="conditions">
            ${rule.conditions.map((c, i) => html`<${StoredCondition} key=${c.uuid} rule=${rule} condition=${c} n=${i + 1} last=${i === rule.conditions.length - 1} onChanged=${onChanged} />`)}
          </ol>`}
      <${AddCondition} key=${rule.conditions.length} rule=${rule} onChanged=${onChanged} />
    </section>`;
}

function RuleRow({ rule, reading, onChanged }) {
  const action = useAction();
  const edit = useEditing();
  const remove = () => action.run(async () => {
    await api('DELETE', ruleApi(rule));
    onChanged();
  });
  const saved = () => {
    edit.close();
    onChanged();
  };
  return html`<tr key="row">
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
      <td>
        <div class="toolbar">
          <button type="button" ref=${edit.buttonRef} aria-expanded=${edit.editing ? 'true' : 'false'} disabled=${edit.editing} onClick=${edit.open}>Edit rule ${rule.name}</button>
          <${ConfirmButton} label=${`Delete rule ${rule.name}`} disabled=${action.busy} onConfirm=${remove} />
        </div>
        <${ErrorMessage} error=${action.error} />
      </td>
    </tr>
    ${edit.editing
      ? html`<tr class="editing" key="edit"><td colspan="8">
          <${EditRule} rule=${rule} reading=${reading} onSaved=${saved} onCancel=${edit.close} onChanged=${onChanged} />
        </td></tr>`
      : null}`;
}

export function RateLimitsTab({ endpoint }) {
  const { data, error, loading, reload } = useApi(`/v1/firewall/rate-limits?endpoint_id=${encodeURIComponent(endpoint.uuid)}&limit=100`);
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
          <tbody>${rules.map((r) => html`<${RuleRow} key=${r.uuid} rule=${r} reading=${loading} onChanged=${reload} />`)}</tbody>
        </table>`}
    ${data.pagination.total > rules.length ? html`<p class="hint">Showing the first ${rules.length} of ${data.pagination.total} rules.</p>` : null}
    <${NewRule} endpoint=${endpoint} onCreated=${reload} />
  </section>`;
}
