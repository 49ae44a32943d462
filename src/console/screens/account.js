// The account screen: who is signed in, the active account (the key's own, or the one chosen here or in the header,
// sent as X-Account-Id) with its plan and the caller's permissions there, every account the caller belongs to with a
// switch to it, and the caller's API keys: create one (its secret shown this once), revoke one after a confirmation.
// API: docs/api.md "Accounts and API keys", "The active account".
import { html, useState } from '../vendor/htm-preact.mjs';
import { api } from '../api.js';
import { ConfirmButton, ErrorMessage, Loading, formatTime, useAction, useApi } from '../ui.js';

function yesNo(value) {
  return value ? 'yes' : 'no';
}

/** The plan's features and quotas as the node applies them (GET /v1/me `plan`). */
function PlanDetails({ plan }) {
  if (!plan) return html`<p class="hint">This node has no settings for the account's plan.</p>`;
  const quota = (n) => (n === 0 ? 'unlimited' : String(n));
  return html`<h3>What the plan includes</h3>
    <table>
      <caption class="visually-hidden">Plan features</caption>
      <thead><tr><th scope="col">Feature</th><th scope="col">Included</th></tr></thead>
      <tbody>
        ${Object.entries(plan.entitlements).map(([name, on]) => html`<tr><td><code>${name}</code></td><td>${on ? html`<span class="badge ok">yes</span>` : html`<span class="badge bad">no</span>`}</td></tr>`)}
      </tbody>
    </table>
    <dl class="facts">
      <dt>Permanent endpoints</dt><dd>${plan.quotas.permanent_endpoints ?? '—'}</dd>
      <dt>Organization endpoints</dt><dd>${plan.quotas.organization_endpoints ?? '—'}</dd>
      <dt>Dedicated ports</dt><dd>${plan.quotas.dedicated_ports_max === undefined ? '—' : quota(plan.quotas.dedicated_ports_max)}</dd>
      <dt>Regions</dt><dd>${plan.allowed_regions.includes('*') ? 'all' : plan.allowed_regions.join(', ')}</dd>
      <dt>Tunnel protocols</dt><dd>${plan.protocols.join(', ')}</dd>
    </dl>`;
}

function ActiveAccount({ me }) {
  const a = me.active_account;
  return html`<section>
    <h2>Active account</h2>
    <dl class="facts">
      <dt>Name</dt><dd>${a.name}</dd>
      <dt>Kind</dt><dd>${a.kind}</dd>
      <dt>Plan</dt><dd><strong>${a.plan}</strong></dd>
      <dt>Standing</dt><dd>${a.suspended ? html`<span class="badge bad">suspended</span> since ${formatTime(a.suspended_at)}` : html`<span class="badge ok">active</span>`}</dd>
      <dt>Your permissions</dt><dd>${a.permissions.length ? a.permissions.join(', ') : 'none'}</dd>
    </dl>
    <${PlanDetails} plan=${me.plan} />
    <h3>Signed in as</h3>
    <dl class="facts">
      <dt>E-mail</dt><dd>${me.user.email}</dd>
      <dt>Platform admin</dt><dd>${yesNo(me.user.is_admin)}</dd>
      <dt>E-mail verified</dt><dd>${yesNo(me.user.email_verified)}</dd>
      <dt>Payment method</dt><dd>${yesNo(me.user.payment_method)}</dd>
      <dt>Identity verified</dt><dd>${yesNo(me.user.identity_verified)}</dd>
    </dl>
  </section>`;
}

function Accounts({ me, switchAccount }) {
  return html`<section>
    <h2>Your accounts</h2>
    <table>
      <caption class="visually-hidden">Accounts you belong to</caption>
      <thead>
        <tr>
          <th scope="col">Name</th>
          <th scope="col">Kind</th>
          <th scope="col">Plan</th>
          <th scope="col">Role</th>
          <th scope="col">Permissions</th>
          <th scope="col">Standing</th>
          <th scope="col"><span class="visually-hidden">Actions</span></th>
        </tr>
      </thead>
      <tbody>
        ${me.accounts.map(
          (a) => html`<tr key=${a.id}>
            <td>${a.name}${a.id === me.active_account.id ? html` <span class="badge">active</span>` : ''}</td>
            <td>${a.kind}</td>
            <td>${a.plan}</td>
            <td>${a.is_owner ? 'owner' : 'member'}</td>
            <td>${a.permissions.length}${a.is_owner ? ' (all)' : ''}</td>
            <td>${a.suspended ? 'suspended' : 'active'}</td>
            <td>${a.id === me.active_account.id || !switchAccount
              ? ''
              : html`<button type="button" onClick=${() => switchAccount(String(a.id))}>Work in ${a.name}</button>`}</td>
          </tr>`,
        )}
      </tbody>
    </table>
    <p class="hint">
      This console works in the account chosen here or in the header, for this tab until you sign out. An API key used
      anywhere else acts in the account it was created for: create a key for another account below to work in it there.
    </p>
  </section>`;
}

function NewKey({ me, onCreated }) {
  const [name, setName] = useState('');
  const [account, setAccount] = useState(String(me.active_account.id));
  const action = useAction();
  const submit = (event) => {
    event.preventDefault();
    return action.run(async () => {
      const body = { account_id: Number(account) };
      if (name.trim()) body.name = name.trim();
      const created = await api('POST', '/v1/api-keys', body);
      setName('');
      onCreated(created);
    });
  };
  return html`<form class="toolbar" onSubmit=${submit}>
    <label for="key-name">Name</label>
    <input id="key-name" maxlength="100" value=${name} onInput=${(e) => setName(e.currentTarget.value)} placeholder="laptop agent" />
    ${me.accounts.length > 1
      ? html`<label for="key-account">Account</label>
          <select id="key-account" value=${account} onChange=${(e) => setAccount(e.currentTarget.value)}>
            ${me.accounts.map((a) => html`<option value=${String(a.id)}>${a.name}</option>`)}
          </select>`
      : ''}
    <button type="submit" class="primary" disabled=${action.busy}>Create key</button>
    <${ErrorMessage} error=${action.error} />
  </form>`;
}

function NewSecret({ created, onDone }) {
  const [copied, setCopied] = useState(null);
  const copy = () =>
    navigator.clipboard.writeText(created.api_key).then(
      () => setCopied('Copied.'),
      () => setCopied('Copying was refused: select the key and copy it.'),
    );
  return html`<div class="warning" role="status">
    <p><strong>New key ${created.name ? `“${created.name}”` : `#${created.id}`}.</strong> Copy it now: it is shown this once and cannot be read again.</p>
    <p><code class="secret">${created.api_key}</code></p>
    <div class="toolbar">
      <button type="button" onClick=${copy}>Copy key</button>
      <button type="button" onClick=${onDone}>I have saved it</button>
      ${copied ? html`<span>${copied}</span>` : ''}
    </div>
  </div>`;
}

function ApiKeys({ me }) {
  const keys = useApi('/v1/api-keys');
  const [created, setCreated] = useState(null);
  const revoke = useAction();
  const accountName = (id) => me.accounts.find((a) => a.id === id)?.name ?? `#${id}`;
  const revokeKey = (key) =>
    revoke.run(async () => {
      await api('DELETE', `/v1/api-keys/${key.id}`);
      keys.reload();
    });
  const items = keys.data?.items ?? [];
  return html`<section>
    <h2>API keys</h2>
    <p class="hint">
      Keys for the API, the agent and this console. Their secrets are never shown again after creation. Revoking the
      key this tab signed in with signs the console out.
    </p>
    ${created ? html`<${NewSecret} created=${created} onDone=${() => setCreated(null)} />` : ''}
    <${NewKey} me=${me} onCreated=${(k) => { setCreated(k); keys.reload(); }} />
    <${ErrorMessage} error=${keys.error} />
    <${ErrorMessage} error=${revoke.error} />
    ${!keys.data
      ? keys.error
        ? ''
        : html`<${Loading} what="Loading API keys" />`
      : items.length === 0
        ? html`<p>No API keys.</p>`
        : html`<table>
            <caption class="visually-hidden">API keys</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Id</th>
                <th scope="col">Account</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">Status</th>
                <th scope="col"><span class="visually-hidden">Actions</span></th>
              </tr>
            </thead>
            <tbody>
              ${items.map((k) => {
                const label = k.name || `key #${k.id}`;
                return html`<tr key=${k.id}>
                  <td>${k.name || html`<span class="hint">unnamed</span>`}</td>
                  <td class="mono">${k.id}</td>
                  <td>${accountName(k.account_id)}</td>
                  <td>${formatTime(k.created_at)}</td>
                  <td>${formatTime(k.last_used_at)}</td>
                  <td>${k.revoked_at ? html`<span class="badge bad">revoked</span> ${formatTime(k.revoked_at)}` : html`<span class="badge ok">active</span>`}</td>
                  <td>
                    ${k.revoked_at
                      ? ''
                      : html`<${ConfirmButton}
                          label=${`Revoke ${label}`}
                          confirmLabel="Yes, revoke"
                          onConfirm=${() => revokeKey(k)}
                        />`}
                  </td>
                </tr>`;
              })}
            </tbody>
          </table>`}
  </section>`;
}

export function AccountScreen({ me: signedIn, switchAccount }) {
  const fresh = useApi('/v1/me');
  const me = fresh.data ?? signedIn;
  if (!me) return fresh.error ? html`<${ErrorMessage} error=${fresh.error} />` : html`<${Loading} />`;
  return html`<section>
    <h1>Account</h1>
    <${ErrorMessage} error=${fresh.error} />
    <${ActiveAccount} me=${me} />
    <${Accounts} me=${me} switchAccount=${switchAccount} />
    <${ApiKeys} me=${me} />
  </section>`;
}
