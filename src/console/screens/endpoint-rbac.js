// The endpoint's RBAC tab: roles with their method and path patterns (added, edited, deleted), clients with the roles
// they hold, invites, and assigning or removing a role. Reads need no entitlement; writes need the plan's `rbac` (the API's 403 names
// it). API: docs/api.md "RBAC", docs/rbac.md.
import { html, useState } from '../vendor/htm-preact.mjs';
import { api } from '../api.js';
import { ConfirmButton, ErrorMessage, Loading, formatTime, useAction, useApi } from '../ui.js';
import { CHECK_ROW, FORM_GRID, endpointApi, intOr, splitList } from './endpoint-common.js';

function list(values) {
  return values && values.length ? values.join(', ') : '—';
}

const EMPTY_ROLE = { name: '', description: '', priority: '0', is_default: false, allowed_methods: '', denied_methods: '', allowed_paths: '', denied_paths: '', rate_limit_rps: '' };

/** A role as the form's fields (lists comma separated). */
function roleFields(role) {
  const p = role.permissions;
  return {
    name: role.name,
    description: role.description ?? '',
    priority: String(role.priority),
    is_default: role.is_default,
    allowed_methods: p.allowed_methods.join(', '),
    denied_methods: p.denied_methods.join(', '),
    allowed_paths: p.allowed_paths.join(', '),
    denied_paths: p.denied_paths.join(', '),
    rate_limit_rps: p.rate_limit_rps ? String(p.rate_limit_rps) : '',
  };
}

/**
 * Adds a role, or edits `role` (PUT: the API replaces the permissions whole, so the headers and metadata the form does
 * not show are sent back as they are). Field ids carry `prefix`, so the two forms may share a page.
 */
function RoleForm({ endpoint, role, onDone, onCancel }) {
  const editing = role !== undefined;
  const prefix = editing ? 'edit-role' : 'role';
  const [f, setF] = useState(editing ? roleFields(role) : EMPTY_ROLE);
  const action = useAction();
  const set = (key) => (e) => setF({ ...f, [key]: e.currentTarget.type === 'checkbox' ? e.currentTarget.checked : e.currentTarget.value });
  const submit = async (event) => {
    event.preventDefault();
    const permissions = {
      allowed_methods: splitList(f.allowed_methods).map((m) => m.toUpperCase()),
      denied_methods: splitList(f.denied_methods).map((m) => m.toUpperCase()),
      allowed_paths: splitList(f.allowed_paths),
      denied_paths: splitList(f.denied_paths),
    };
    if (f.rate_limit_rps.trim()) permissions.rate_limit_rps = intOr(f.rate_limit_rps, 0);
    else if (editing) permissions.rate_limit_rps = 0;
    if (editing) Object.assign(permissions, { headers: role.permissions.headers, metadata: role.permissions.metadata });
    const body = { name: f.name.trim(), priority: intOr(f.priority, 0), is_default: f.is_default, permissions };
    // On an update an omitted description keeps the old one: an emptied field is sent empty, so it clears.
    if (f.description.trim() || editing) body.description = f.description.trim();
    const saved = await action.run(() =>
      editing ? api('PUT', endpointApi(endpoint.uuid, `rbac/roles/${role.id}`), body) : api('POST', endpointApi(endpoint.uuid, 'rbac/roles'), body),
    );
    if (saved) {
      if (!editing) setF(EMPTY_ROLE);
      onDone(saved);
    }
  };
  const field = (key, label) => html`<label for=${`${prefix}-${key}`}>${label}</label>
    <input id=${`${prefix}-${key}`} value=${f[key]} onInput=${set(key)} autocomplete="off" />`;
  const heading = `${prefix}-heading`;
  return html`<form onSubmit=${submit} aria-labelledby=${heading} class=${editing ? 'edit-form' : ''}>
    <h3 id=${heading}>${editing ? `Edit role ${role.name}` : 'Add a role'}</h3>
    ${editing
      ? html`<p class="hint">Saving replaces the role's methods, paths and rate. Emptying all of them keeps the stored ones (the API reads that as no change): delete the role instead.</p>`
      : null}
    <div style=${FORM_GRID}>
      ${field('name', 'Name')}
      ${field('description', 'Description (optional)')}
      <label for=${`${prefix}-priority`}>Priority (higher wins)</label>
      <input id=${`${prefix}-priority`} type="number" value=${f.priority} onInput=${set('priority')} />
      ${field('allowed_methods', 'Allowed methods (comma separated, * for any)')}
      ${field('denied_methods', 'Denied methods')}
      ${field('allowed_paths', 'Allowed paths (globs: /api/*, /files/**)')}
      ${field('denied_paths', 'Denied paths')}
      <label for=${`${prefix}-rps`}>Requests per second (optional)</label>
      <input id=${`${prefix}-rps`} type="number" min="0" value=${f.rate_limit_rps} onInput=${set('rate_limit_rps')} />
      <div style=${CHECK_ROW}><input id=${`${prefix}-default`} type="checkbox" checked=${f.is_default} onChange=${set('is_default')} /> <label for=${`${prefix}-default`}>Give to new clients</label></div>
    </div>
    <div class="toolbar">
      <button type="submit" class=${editing ? 'primary' : ''} disabled=${action.busy || f.name.trim() === ''}>${editing ? 'Save role' : 'Add role'}</button>
      ${editing ? html`<button type="button" onClick=${onCancel}>Cancel</button>` : null}
    </div>
    <${ErrorMessage} error=${action.error} />
  </form>`;
}

function Roles({ endpoint, rbac, onChanged }) {
  const action = useAction();
  const [editing, setEditing] = useState(null);
  const editRole = editing === null ? undefined : rbac.roles.find((r) => r.id === editing);
  const remove = (role) => action.run(async () => {
    await api('DELETE', endpointApi(endpoint.uuid, `rbac/roles/${role.id}`));
    onChanged();
  });
  return html`<section aria-labelledby="roles-heading">
    <h2 id="roles-heading">Roles</h2>
    ${rbac.roles.length === 0
      ? html`<p>No roles: RBAC is off for this endpoint.</p>`
      : html`<table>
          <caption class="visually-hidden">Roles</caption>
          <thead><tr><th scope="col">Name</th><th scope="col" class="num">Priority</th><th scope="col">Default</th><th scope="col">Methods allowed / denied</th><th scope="col">Paths allowed / denied</th><th scope="col" class="num">RPS</th><th scope="col">Actions</th></tr></thead>
          <tbody>
            ${rbac.roles.map(
              (r) => html`<tr key=${r.id}>
                <td>${r.name}${r.description ? html`<br /><span class="hint">${r.description}</span>` : null}</td>
                <td class="num">${r.priority}</td>
                <td>${r.is_default ? 'yes' : 'no'}</td>
                <td class="mono">${list(r.permissions.allowed_methods)} / ${list(r.permissions.denied_methods)}</td>
                <td class="mono">${list(r.permissions.allowed_paths)} / ${list(r.permissions.denied_paths)}</td>
                <td class="num">${r.permissions.rate_limit_rps || '—'}</td>
                <td><div class="toolbar">
                  <button type="button" aria-expanded=${editing === r.id ? 'true' : 'false'} onClick=${() => setEditing(editing === r.id ? null : r.id)}>Edit role ${r.name}</button>
                  <${ConfirmButton} label=${`Delete role ${r.name}`} disabled=${action.busy} onConfirm=${() => remove(r)} />
                </div></td>
              </tr>`,
            )}
          </tbody>
        </table>`}
    <${ErrorMessage} error=${action.error} />
    ${editRole
      ? html`<${RoleForm} key=${editRole.id} endpoint=${endpoint} role=${editRole} onCancel=${() => setEditing(null)} onDone=${() => { setEditing(null); onChanged(); }} />`
      : null}
    <${RoleForm} endpoint=${endpoint} onDone=${onChanged} />
  </section>`;
}

function NewClient({ endpoint, onCreated }) {
  const [f, setF] = useState({ identifier: '', display_name: '', email: '', auto_generate_token: false });
  const [created, setCreated] = useState(null);
  const action = useAction();
  const set = (key) => (e) => setF({ ...f, [key]: e.currentTarget.type === 'checkbox' ? e.currentTarget.checked : e.currentTarget.value });
  const submit = async (event) => {
    event.preventDefault();
    const body = { identifier: f.identifier.trim() };
    if (f.display_name.trim()) body.display_name = f.display_name.trim();
    if (f.email.trim()) body.email = f.email.trim();
    if (f.auto_generate_token) body.auto_generate_token = true;
    const client = await action.run(() => api('POST', endpointApi(endpoint.uuid, 'rbac/clients'), body));
    if (client) {
      setCreated(client);
      setF({ identifier: '', display_name: '', email: '', auto_generate_token: false });
      onCreated();
    }
  };
  return html`<form onSubmit=${submit} aria-labelledby="new-client-heading">
    <h3 id="new-client-heading">Add a client</h3>
    <div style=${FORM_GRID}>
      <label for="client-identifier">Identifier</label>
      <input id="client-identifier" value=${f.identifier} onInput=${set('identifier')} autocomplete="off" />
      <label for="client-name">Display name (optional)</label>
      <input id="client-name" value=${f.display_name} onInput=${set('display_name')} autocomplete="off" />
      <label for="client-email">E-mail (optional)</label>
      <input id="client-email" type="email" value=${f.email} onInput=${set('email')} autocomplete="off" />
      <div style=${CHECK_ROW}><input id="client-token" type="checkbox" checked=${f.auto_generate_token} onChange=${set('auto_generate_token')} /> <label for="client-token">Generate a token (token mode)</label></div>
    </div>
    <button type="submit" disabled=${action.busy || f.identifier.trim() === ''}>Add client</button>
    ${created?.generated_token
      ? html`<div class="warning" role="status"><p>Token of ${created.identifier}, shown this once:</p><pre>${created.generated_token}</pre></div>`
      : null}
    <${ErrorMessage} error=${action.error} />
  </form>`;
}

function NewInvite({ endpoint, onCreated }) {
  const [email, setEmail] = useState('');
  const [name, setName] = useState('');
  const [hours, setHours] = useState('72');
  const [invite, setInvite] = useState(null);
  const action = useAction();
  const submit = async (event) => {
    event.preventDefault();
    const body = { expires_in_hours: intOr(hours, 72) };
    if (email.trim()) body.email = email.trim();
    if (name.trim()) body.display_name = name.trim();
    const made = await action.run(() => api('POST', endpointApi(endpoint.uuid, 'rbac/clients/invites'), body));
    if (made) {
      setInvite(made);
      setEmail('');
      setName('');
      onCreated();
    }
  };
  return html`<form onSubmit=${submit} aria-labelledby="new-invite-heading">
    <h3 id="new-invite-heading">Invite a client</h3>
    <div style=${FORM_GRID}>
      <label for="invite-email">E-mail (optional)</label>
      <input id="invite-email" type="email" value=${email} onInput=${(e) => setEmail(e.currentTarget.value)} autocomplete="off" />
      <label for="invite-name">Display name (optional)</label>
      <input id="invite-name" value=${name} onInput=${(e) => setName(e.currentTarget.value)} autocomplete="off" />
      <label for="invite-hours">Expires in (hours)</label>
      <input id="invite-hours" type="number" min="1" max="8760" value=${hours} onInput=${(e) => setHours(e.currentTarget.value)} />
    </div>
    <button type="submit" disabled=${action.busy}>Create invite</button>
    ${invite
      ? html`<div class="warning" role="status">
          <p>Invite created, expires ${formatTime(invite.expires_at)}. Send this link (on https://${endpoint.hostname}); it is shown this once and no mail is sent:</p>
          <pre>https://${endpoint.hostname}${invite.invite_url}</pre>
        </div>`
      : null}
    <${ErrorMessage} error=${action.error} />
  </form>`;
}

function Assign({ endpoint, rbac, onChanged }) {
  const [client, setClient] = useState('');
  const [role, setRole] = useState('');
  const action = useAction();
  const submit = async (event) => {
    event.preventDefault();
    const ok = await action.run(() => api('POST', endpointApi(endpoint.uuid, 'rbac/memberships'), { client_id: Number(client), role_id: Number(role) }));
    if (ok) onChanged();
  };
  if (rbac.clients.length === 0 || rbac.roles.length === 0) return null;
  return html`<form class="toolbar" onSubmit=${submit} aria-label="Give a role">
    <label for="assign-client">Client</label>
    <select id="assign-client" value=${client} onChange=${(e) => setClient(e.currentTarget.value)}>
      <option value="">Choose…</option>
      ${rbac.clients.map((c) => html`<option value=${String(c.id)}>${c.identifier}</option>`)}
    </select>
    <label for="assign-role">Role</label>
    <select id="assign-role" value=${role} onChange=${(e) => setRole(e.currentTarget.value)}>
      <option value="">Choose…</option>
      ${rbac.roles.map((r) => html`<option value=${String(r.id)}>${r.name}</option>`)}
    </select>
    <button type="submit" disabled=${action.busy || !client || !role}>Give role</button>
    <${ErrorMessage} error=${action.error} />
  </form>`;
}

function Clients({ endpoint, rbac, onChanged }) {
  const action = useAction();
  const roleName = new Map(rbac.roles.map((r) => [r.id, r.name]));
  const remove = (c) => action.run(async () => {
    await api('DELETE', endpointApi(endpoint.uuid, `rbac/clients/${c.id}`));
    onChanged();
  });
  const unassign = (clientId, roleId) => action.run(async () => {
    await api('DELETE', endpointApi(endpoint.uuid, 'rbac/memberships'), { client_id: clientId, role_id: roleId });
    onChanged();
  });
  return html`<section aria-labelledby="clients-heading">
    <h2 id="clients-heading">Clients and invites</h2>
    ${rbac.clients.length === 0
      ? html`<p>No clients.</p>`
      : html`<table>
          <caption class="visually-hidden">Clients</caption>
          <thead><tr><th scope="col">Identifier</th><th scope="col">Name</th><th scope="col">E-mail</th><th scope="col">Status</th><th scope="col">Credentials</th><th scope="col">Source</th><th scope="col">Roles</th><th scope="col">Actions</th></tr></thead>
          <tbody>
            ${rbac.clients.map((c) => {
              const held = rbac.memberships.filter((m) => m.client_id === c.id);
              const creds = [c.has_password && 'password', c.has_token && 'token', c.has_oauth && 'sign-in'].filter(Boolean);
              return html`<tr key=${c.id}>
                <td class="mono">${c.identifier}</td>
                <td>${c.display_name || '—'}</td>
                <td>${c.email || '—'}</td>
                <td><span class=${`badge ${c.status === 'active' ? 'ok' : c.status === 'invited' ? 'warn' : 'bad'}`}>${c.status}</span></td>
                <td>${creds.length ? creds.join(', ') : '—'}</td>
                <td>${c.registration_source}</td>
                <td>${held.length === 0
                  ? '—'
                  : held.map((m) => html`<span class="toolbar" key=${m.id}>${roleName.get(m.role_id) ?? `role ${m.role_id}`}
                      <button type="button" disabled=${action.busy} onClick=${() => unassign(c.id, m.role_id)}>Remove ${roleName.get(m.role_id) ?? 'role'} from ${c.identifier}</button></span>`)}</td>
                <td><${ConfirmButton} label=${`Delete client ${c.identifier}`} disabled=${action.busy} onConfirm=${() => remove(c)} /></td>
              </tr>`;
            })}
          </tbody>
        </table>`}
    <${ErrorMessage} error=${action.error} />
    <${Assign} endpoint=${endpoint} rbac=${rbac} onChanged=${onChanged} />
    <${NewClient} endpoint=${endpoint} onCreated=${onChanged} />
    <${NewInvite} endpoint=${endpoint} onCreated=${onChanged} />
  </section>`;
}

export function RbacTab({ endpoint }) {
  const { data, error, reload } = useApi(endpointApi(endpoint.uuid, 'rbac'));
  if (error && !data) return html`<h2>RBAC</h2><${ErrorMessage} error=${error} />`;
  if (!data) return html`<${Loading} what="Loading RBAC" />`;
  return html`<div>
    <p class="hint">Visitors signed in through the endpoint's auth mode are clients; their roles decide which methods and paths they may use.</p>
    <${ErrorMessage} error=${error} />
    <${Roles} endpoint=${endpoint} rbac=${data} onChanged=${reload} />
    <${Clients} endpoint=${endpoint} rbac=${data} onChanged=${reload} />
  </div>`;
}
