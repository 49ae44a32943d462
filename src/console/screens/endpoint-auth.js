// The endpoint's visitor-auth tab: the mode visitors meet (none, basic, token, OAuth, OIDC) with HTTPS enforcement
// and the session lifetime, the basic-auth users, the visitor tokens (endpoint API keys: created here, shown once,
// revoked), the OAuth/OIDC providers (added, edited, toggled, deleted), and the JWT layer. API: docs/api.md
// "Visitor authentication", docs/visitor-auth.md.
import { html, useEffect, useState } from '../vendor/htm-preact.mjs';
import { api } from '../api.js';
import { ConfirmButton, ErrorMessage, Loading, formatTime, useAction, useApi } from '../ui.js';
import { CHECK_ROW, FORM_GRID, endpointApi, splitList } from './endpoint-common.js';

const NO_PROVIDERS = [];

const WRITE_MODES = [
  ['none', 'None: anyone may visit'],
  ['basic', 'Basic: username and password'],
  ['token', 'Token: a bearer token, header or cookie'],
  ['oauth', 'OAuth: log in with a provider'],
  ['oidc', 'OpenID Connect: log in with an OIDC provider'],
];

/** The mode to write back for the mode the API reports (docs/visitor-auth.md maps write modes to reported ones). */
function writeModeOf(settings, providers) {
  switch (settings.mode) {
    case 'basic':
      return 'basic';
    case 'token':
    case 'header':
    case 'cookie':
      return 'token';
    case 'sso': {
      const offered = (providers ?? []).filter((p) => settings.enabled_auth_methods?.[String(p.id)]);
      return offered.length > 0 && offered.every((p) => p.kind === 'oidc') ? 'oidc' : 'oauth';
    }
    default:
      return 'none';
  }
}

function ModeForm({ endpoint, settings, providers, onSaved }) {
  const [mode, setMode] = useState(writeModeOf(settings, providers));
  const [https, setHttps] = useState(!!settings.enforce_https);
  const [ttl, setTtl] = useState(settings.session_ttl_seconds ?? '');
  const action = useAction();
  useEffect(() => {
    setMode(writeModeOf(settings, providers));
    setHttps(!!settings.enforce_https);
    setTtl(settings.session_ttl_seconds ?? '');
  }, [settings, providers]);
  const submit = async (event) => {
    event.preventDefault();
    const body = { mode, enforce_https: https, session_ttl_seconds: String(ttl).trim() === '' ? null : Number(ttl) };
    const saved = await action.run(() => api('PUT', endpointApi(endpoint.uuid, 'settings'), body));
    if (saved) onSaved(saved);
  };
  return html`<section aria-labelledby="auth-mode-heading">
    <h2 id="auth-mode-heading">Mode</h2>
    <p>Visitors meet: <strong>${settings.mode}</strong>${settings.enforce_https ? ', HTTPS enforced' : ''}${settings.session_ttl_seconds ? `, sessions last ${settings.session_ttl_seconds} s` : ''}.</p>
    <form onSubmit=${submit}>
      <div style=${FORM_GRID}>
        <label for="auth-mode">Mode</label>
        <select id="auth-mode" value=${mode} onChange=${(e) => setMode(e.currentTarget.value)}>
          ${WRITE_MODES.map(([value, label]) => html`<option value=${value}>${label}</option>`)}
        </select>
        <label for="auth-ttl">Session lifetime (seconds, empty: the platform default)</label>
        <input id="auth-ttl" type="number" min="1" value=${ttl} onInput=${(e) => setTtl(e.currentTarget.value)} />
        <div style=${CHECK_ROW}><input id="auth-https" type="checkbox" checked=${https} onChange=${(e) => setHttps(e.currentTarget.checked)} /> <label for="auth-https">Enforce HTTPS (redirect plain HTTP)</label></div>
      </div>
      <button type="submit" disabled=${action.busy}>Save mode</button>
      <p class="hint">Basic needs at least one user, token a live token, OAuth/OIDC an enabled provider: add those below first.</p>
    </form>
    <${ErrorMessage} error=${action.error} />
  </section>`;
}

/**
 * The basic-auth users. The API replaces the whole set on each write and never returns a password, so keeping a user
 * means sending their password again (the current one keeps it, another changes it).
 */
function BasicUsers({ endpoint, settings, onSaved }) {
  const fromSettings = () => settings.basic_users.map((u) => ({ username: u.username, password: '', existing: true, last_used_at: u.last_used_at }));
  const [draft, setDraft] = useState(fromSettings);
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [problem, setProblem] = useState(null);
  const action = useAction();
  useEffect(() => setDraft(fromSettings()), [settings]);
  const dirty = draft.length !== settings.basic_users.length || draft.some((u) => !u.existing || u.password !== '');
  const add = (event) => {
    event.preventDefault();
    const name = username.trim();
    if (!name || !password) return setProblem({ message: 'A new user needs a username and a password.' });
    if (draft.some((u) => u.username === name)) return setProblem({ message: `“${name}” is already in the list.` });
    setProblem(null);
    setDraft([...draft, { username: name, password, existing: false }]);
    setUsername('');
    setPassword('');
  };
  const save = async () => {
    const missing = draft.filter((u) => u.password === '');
    if (missing.length > 0) {
      setProblem({ message: `The API replaces the whole set of users: enter the password of ${missing.map((u) => u.username).join(', ')} to keep them, or remove them.` });
      return;
    }
    setProblem(null);
    const body = draft.length > 0
      ? { mode: 'basic', basic_users: draft.map((u) => ({ username: u.username, password: u.password })) }
      : { mode: settings.mode === 'basic' ? 'none' : writeModeOf(settings, []), basic_users: null };
    const saved = await action.run(() => api('PUT', endpointApi(endpoint.uuid, 'settings'), body));
    if (saved) onSaved(saved);
  };
  const setPasswordOf = (i, value) => setDraft(draft.map((u, j) => (j === i ? { ...u, password: value } : u)));
  return html`<section aria-labelledby="basic-heading">
    <h2 id="basic-heading">Basic-auth users</h2>
    <p class="hint">Saving users turns mode basic on; removing every user turns visitor auth off.</p>
    ${draft.length === 0
      ? html`<p>No users.</p>`
      : html`<table>
          <caption class="visually-hidden">Basic-auth users</caption>
          <thead><tr><th scope="col">Username</th><th scope="col">Last used</th><th scope="col">Password</th><th scope="col">Actions</th></tr></thead>
          <tbody>
            ${draft.map(
              (u, i) => html`<tr key=${u.username}>
                <td class="mono">${u.username}${u.existing ? '' : ' (new, not saved)'}</td>
                <td>${u.existing ? formatTime(u.last_used_at) : '—'}</td>
                <td>
                  ${u.existing
                    ? html`<label class="visually-hidden" for=${`basic-keep-${i}`}>Password of ${u.username}</label>
                        <input id=${`basic-keep-${i}`} type="password" autocomplete="new-password" placeholder="needed to save" value=${u.password} onInput=${(e) => setPasswordOf(i, e.currentTarget.value)} />`
                    : 'set'}
                </td>
                <td><button type="button" onClick=${() => setDraft(draft.filter((_, j) => j !== i))}>Remove ${u.username}</button></td>
              </tr>`,
            )}
          </tbody>
        </table>`}
    <form class="toolbar" onSubmit=${add}>
      <label for="basic-username">Username</label>
      <input id="basic-username" autocomplete="off" value=${username} onInput=${(e) => setUsername(e.currentTarget.value)} />
      <label for="basic-password">Password</label>
      <input id="basic-password" type="password" autocomplete="new-password" value=${password} onInput=${(e) => setPassword(e.currentTarget.value)} />
      <button type="submit">Add user</button>
    </form>
    <div class="toolbar">
      <button type="button" class="primary" disabled=${action.busy || !dirty} onClick=${save}>Save users</button>
      ${dirty ? html`<span class="hint">Unsaved changes.</span>` : null}
    </div>
    <${ErrorMessage} error=${problem ?? action.error} />
  </section>`;
}

/** Visitor tokens: the endpoint's API keys (created here, the token shown once, revoked) and the settings tokens. */
function Tokens({ endpoint, settings, onChanged }) {
  const [name, setName] = useState('');
  const [expires, setExpires] = useState('');
  const [created, setCreated] = useState(null);
  const action = useAction();
  const create = async (event) => {
    event.preventDefault();
    const body = { name: name.trim() };
    if (expires) body.expires_at = new Date(expires).toISOString();
    const key = await action.run(() => api('POST', endpointApi(endpoint.uuid, 'api-keys'), body));
    if (key) {
      setCreated(key);
      setName('');
      setExpires('');
      onChanged();
    }
  };
  const revoke = (id) => action.run(async () => {
    await api('DELETE', endpointApi(endpoint.uuid, `api-keys/${id}`));
    onChanged();
  });
  return html`<section aria-labelledby="tokens-heading">
    <h2 id="tokens-heading">Visitor tokens</h2>
    <p class="hint">Used in token mode. API keys are generated here; settings tokens are set through the API as a whole set.</p>
    ${settings.tokens.length === 0
      ? html`<p>No tokens.</p>`
      : html`<table>
          <caption class="visually-hidden">Visitor tokens</caption>
          <thead><tr><th scope="col">Name</th><th scope="col">Source</th><th scope="col">Created</th><th scope="col">Expires</th><th scope="col">Last used</th><th scope="col">State</th><th scope="col">Actions</th></tr></thead>
          <tbody>
            ${settings.tokens.map(
              (t) => html`<tr key=${t.id}>
                <td>${t.label}</td>
                <td>${t.source === 'api_key' ? 'API key' : 'settings'}</td>
                <td>${formatTime(t.created_at)}</td>
                <td>${t.expires_at ? formatTime(t.expires_at) : 'never'}</td>
                <td>${formatTime(t.last_used_at)}</td>
                <td>${t.revoked_at ? html`<span class="badge bad">revoked</span>` : html`<span class="badge ok">live</span>`}</td>
                <td>${t.source === 'api_key' && !t.revoked_at
                  ? html`<${ConfirmButton} label=${`Revoke ${t.label}`} disabled=${action.busy} onConfirm=${() => revoke(t.id)} />`
                  : null}</td>
              </tr>`,
            )}
          </tbody>
        </table>`}
    <form class="toolbar" onSubmit=${create}>
      <label for="token-name">Token name</label>
      <input id="token-name" required value=${name} onInput=${(e) => setName(e.currentTarget.value)} />
      <label for="token-expires">Expires (optional)</label>
      <input id="token-expires" type="datetime-local" value=${expires} onInput=${(e) => setExpires(e.currentTarget.value)} />
      <button type="submit" disabled=${action.busy || name.trim() === ''}>Create token</button>
    </form>
    ${created
      ? html`<div class="warning" role="status">
          <p>Token “${created.label}” created. Copy it now, it is not shown again:</p>
          <pre class="mono">${created.token}</pre>
          <button type="button" onClick=${() => setCreated(null)}>Done</button>
        </div>`
      : null}
    <${ErrorMessage} error=${action.error} />
  </section>`;
}

const EMPTY_PROVIDER = { kind: 'oidc', name: '', issuer: '', client_id: '', client_secret: '', scopes: '', allowed_emails: '', allowed_domains: '', authorization_url: '', token_url: '', userinfo_url: '' };

/** A provider as GET returns it, as the form's fields; the client secret is never returned, so it starts empty. */
function providerFields(p) {
  return {
    kind: p.kind,
    name: p.name,
    issuer: p.issuer,
    client_id: p.client_id,
    client_secret: '',
    scopes: p.scopes.join(' '),
    allowed_emails: p.allowed_emails.join(', '),
    allowed_domains: p.allowed_domains.join(', '),
    authorization_url: p.authorization_url ?? '',
    token_url: p.token_url ?? '',
    userinfo_url: p.userinfo_url ?? '',
  };
}

/**
 * Adds a provider, or edits `provider` (PUT, a full update: every field is sent as the form holds it, and an empty
 * client secret is left out, which the API reads as "keep the stored one"). Field ids carry a prefix, so the two
 * forms may share a page.
 */
function ProviderForm({ endpoint, provider, onDone, onCancel }) {
  const editing = provider !== undefined;
  const prefix = editing ? 'edit-provider' : 'provider';
  const [f, setF] = useState(editing ? providerFields(provider) : EMPTY_PROVIDER);
  const action = useAction();
  const set = (key) => (e) => setF({ ...f, [key]: e.currentTarget.value });
  const submit = async (event) => {
    event.preventDefault();
    const body = { kind: f.kind, name: f.name.trim(), issuer: f.issuer.trim(), client_id: f.client_id.trim() };
    if (!editing || f.client_secret !== '') body.client_secret = f.client_secret;
    const scopes = f.scopes.split(/[\s,]+/).filter(Boolean);
    if (scopes.length) body.scopes = scopes;
    const emails = splitList(f.allowed_emails);
    if (emails.length) body.allowed_emails = emails;
    const domains = splitList(f.allowed_domains);
    if (domains.length) body.allowed_domains = domains;
    if (f.kind === 'oauth2') Object.assign(body, { authorization_url: f.authorization_url.trim(), token_url: f.token_url.trim(), userinfo_url: f.userinfo_url.trim() });
    const saved = await action.run(() =>
      editing
        ? api('PUT', endpointApi(endpoint.uuid, `oauth/providers/${provider.id}`), body)
        : api('POST', endpointApi(endpoint.uuid, 'oauth/providers'), body),
    );
    if (saved) {
      if (!editing) setF(EMPTY_PROVIDER);
      onDone(saved);
    }
  };
  const input = (key, label, type = 'text', extra = {}) => html`<label for=${`${prefix}-${key}`}>${label}</label>
    <input id=${`${prefix}-${key}`} type=${type} value=${f[key]} onInput=${set(key)} autocomplete="off" ...${extra} />`;
  const heading = `${prefix}-heading`;
  return html`<form onSubmit=${submit} aria-labelledby=${heading} class=${editing ? 'edit-form' : ''}>
    <h3 id=${heading}>${editing ? `Edit provider ${provider.name}` : 'Add a provider'}</h3>
    <div style=${FORM_GRID}>
      <label for=${`${prefix}-kind`}>Kind</label>
      <select id=${`${prefix}-kind`} value=${f.kind} onChange=${set('kind')}>
        <option value="oidc">OpenID Connect (discovery)</option>
        <option value="oauth2">OAuth 2 (explicit URLs)</option>
      </select>
      ${input('name', 'Name')}
      ${input('issuer', 'Issuer URL')}
      ${input('client_id', 'Client id')}
      ${editing
        ? html`${input('client_secret', 'Client secret (leave empty to keep the stored one)', 'password', { 'aria-describedby': `${prefix}-secret-hint` })}
            <span></span><span id=${`${prefix}-secret-hint`} class="hint">The API never returns the secret; a value typed here replaces it.</span>`
        : input('client_secret', 'Client secret', 'password')}
      ${input('scopes', 'Scopes (space separated, optional)')}
      ${input('allowed_emails', 'Allowed e-mail addresses (comma separated, optional)')}
      ${input('allowed_domains', 'Allowed e-mail domains (comma separated, optional)')}
      ${f.kind === 'oauth2' ? html`${input('authorization_url', 'Authorization URL')}${input('token_url', 'Token URL')}${input('userinfo_url', 'Userinfo URL')}` : null}
    </div>
    <div class="toolbar">
      <button type="submit" class=${editing ? 'primary' : ''} disabled=${action.busy}>${editing ? 'Save provider' : 'Add provider'}</button>
      ${editing ? html`<button type="button" onClick=${onCancel}>Cancel</button>` : null}
    </div>
    <${ErrorMessage} error=${action.error} />
  </form>`;
}

function Providers({ endpoint, settings, providers, onChanged }) {
  const action = useAction();
  const [editing, setEditing] = useState(null);
  const editProvider = editing === null ? undefined : providers.items.find((p) => p.id === editing);
  const toggle = (p) => action.run(async () => {
    await api('PUT', endpointApi(endpoint.uuid, `oauth/providers/${p.id}/toggle`), { enabled: !p.enabled });
    onChanged();
  });
  const remove = (p) => action.run(async () => {
    await api('DELETE', endpointApi(endpoint.uuid, `oauth/providers/${p.id}`));
    onChanged();
  });
  return html`<section aria-labelledby="providers-heading">
    <h2 id="providers-heading">OAuth and OIDC providers</h2>
    ${providers.error ? html`<${ErrorMessage} error=${providers.error} />` : null}
    ${providers.items.length === 0
      ? html`<p>No providers.</p>`
      : html`<table>
          <caption class="visually-hidden">OAuth and OIDC providers</caption>
          <thead><tr><th scope="col">Name</th><th scope="col">Kind</th><th scope="col">Issuer</th><th scope="col">Client id</th><th scope="col">Redirect URI</th><th scope="col">Enabled</th><th scope="col">Offered now</th><th scope="col">Actions</th></tr></thead>
          <tbody>
            ${providers.items.map(
              (p) => html`<tr key=${p.id}>
                <td>${p.name}</td>
                <td>${p.kind}</td>
                <td class="mono">${p.issuer}</td>
                <td class="mono">${p.client_id}</td>
                <td class="mono">${p.redirect_uri}</td>
                <td>${p.enabled ? html`<span class="badge ok">enabled</span>` : html`<span class="badge">disabled</span>`}</td>
                <td>${settings.enabled_auth_methods ? (settings.enabled_auth_methods[String(p.id)] ? 'yes' : 'no') : '— (not an OAuth mode)'}</td>
                <td><div class="toolbar">
                  <button type="button" aria-expanded=${editing === p.id ? 'true' : 'false'} onClick=${() => setEditing(editing === p.id ? null : p.id)}>Edit ${p.name}</button>
                  <button type="button" disabled=${action.busy} onClick=${() => toggle(p)}>${p.enabled ? `Disable ${p.name}` : `Enable ${p.name}`}</button>
                  <${ConfirmButton} label=${`Delete ${p.name}`} disabled=${action.busy} onConfirm=${() => remove(p)} />
                </div></td>
              </tr>`,
            )}
          </tbody>
        </table>`}
    <${ErrorMessage} error=${action.error} />
    ${editProvider
      ? html`<${ProviderForm} key=${editProvider.id} endpoint=${endpoint} provider=${editProvider} onCancel=${() => setEditing(null)} onDone=${() => { setEditing(null); onChanged(); }} />`
      : null}
    <${ProviderForm} endpoint=${endpoint} onDone=${onChanged} />
  </section>`;
}

function JwtForm({ endpoint, settings, onSaved }) {
  const config = settings.config ?? {};
  const on = typeof config.jwks_url === 'string';
  const [enabled, setEnabled] = useState(on);
  const [jwks, setJwks] = useState(config.jwks_url ?? '');
  const [issuer, setIssuer] = useState(config.issuer ?? '');
  const [audience, setAudience] = useState(config.audience ?? '');
  const [claims, setClaims] = useState(config.claim_headers && config.claim_headers !== '{}' ? config.claim_headers : '');
  const [saved, setSaved] = useState(false);
  const action = useAction();
  const submit = async (event) => {
    event.preventDefault();
    setSaved(false);
    const body = { enabled };
    body.jwks_url = jwks.trim();
    body.issuer = issuer.trim();
    body.audience = audience.trim();
    body.claim_headers = claims.trim();
    const ok = await action.run(async () => {
      await api('PUT', endpointApi(endpoint.uuid, 'settings/jwt'), body);
      return true;
    });
    if (ok) {
      setSaved(true);
      onSaved();
    }
  };
  return html`<section aria-labelledby="jwt-heading">
    <h2 id="jwt-heading">JWT layer</h2>
    <p>The JWT layer is <strong>${on ? 'on' : 'off'}</strong>: when on, every request must carry a bearer JWT signed by a key of the JWKS, after the mode's own check.</p>
    <form onSubmit=${submit}>
      <div style=${FORM_GRID}>
        <div style=${CHECK_ROW}><input id="jwt-enabled" type="checkbox" checked=${enabled} onChange=${(e) => setEnabled(e.currentTarget.checked)} /> <label for="jwt-enabled">Require a JWT</label></div>
        <label for="jwt-jwks">JWKS URL (https)</label>
        <input id="jwt-jwks" type="url" value=${jwks} onInput=${(e) => setJwks(e.currentTarget.value)} />
        <label for="jwt-issuer">Issuer (optional)</label>
        <input id="jwt-issuer" value=${issuer} onInput=${(e) => setIssuer(e.currentTarget.value)} />
        <label for="jwt-audience">Audience (optional)</label>
        <input id="jwt-audience" value=${audience} onInput=${(e) => setAudience(e.currentTarget.value)} />
        <label for="jwt-claims">Claim headers (JSON: claim → header name, optional)</label>
        <input id="jwt-claims" class="mono" value=${claims} onInput=${(e) => setClaims(e.currentTarget.value)} placeholder='{"sub": "X-User"}' />
      </div>
      <button type="submit" disabled=${action.busy}>Save JWT layer</button>
      ${saved ? html` <span role="status">Saved.</span>` : null}
    </form>
    <${ErrorMessage} error=${action.error} />
  </section>`;
}

export function AuthTab({ endpoint }) {
  const settings = useApi(endpointApi(endpoint.uuid, 'settings'));
  const providers = useApi(endpointApi(endpoint.uuid, 'oauth/providers'));
  const [current, setCurrent] = useState(null);
  useEffect(() => setCurrent(settings.data), [settings.data]);
  if (settings.error && !settings.data) return html`<h2>Visitor auth</h2><${ErrorMessage} error=${settings.error} />`;
  if (!current) return html`<${Loading} what="Loading the visitor auth settings" />`;
  const reloadAll = () => {
    settings.reload();
    providers.reload();
  };
  const providerList = { items: providers.data?.items ?? NO_PROVIDERS, error: providers.error };
  return html`<div>
    <${ModeForm} endpoint=${endpoint} settings=${current} providers=${providerList.items} onSaved=${setCurrent} />
    <${BasicUsers} endpoint=${endpoint} settings=${current} onSaved=${setCurrent} />
    <${Tokens} endpoint=${endpoint} settings=${current} onChanged=${settings.reload} />
    <${Providers} endpoint=${endpoint} settings=${current} providers=${providerList} onChanged=${reloadAll} />
    <${JwtForm} endpoint=${endpoint} settings=${current} onSaved=${settings.reload} />
  </div>`;
}
