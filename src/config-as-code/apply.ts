// Carries out a plan through the /v1 API: domains first, then each endpoint with its rules (endpoints in parallel,
// bounded), then deletions; a 409 re-reads and re-plans that endpoint once. Every entry ends done, failed or not attempted.
import type { JsonRequestBody as Body } from '../shared/api/client.ts';
import { ApiError, pool, type ApiClient } from './client.ts';
import type { Document } from './document.ts';
import { isStoredSecret, RULE_GROUPS, type AuthState, type BasicUser, type Plain, type RuleForms, type RuleGroup, type SecretValue, type SettingForms, type SettingGroup } from './model.ts';
import { certificateId, desiredEndpoints, needsOf, planEndpoint, type Entry, type Kind, type PlanOptions } from './plan.ts';
import { readEndpoint, type ActualState } from './state.ts';

export const APPLY_CONCURRENCY = 16;

export interface Outcome {
  entry: Entry;
  status: 'done' | 'failed' | 'skipped';
  error?: string;
}

export interface ApplyReport {
  outcomes: Outcome[];
  /** Things done beyond the plan: a duplicate a racing apply made, removed. */
  notes: string[];
}

/** What an entry needs beyond itself: the endpoint's uuid once created, its providers' ids by name, domains by name. */
interface Context {
  client: ApiClient;
  state: ActualState;
  uuid?: string;
  providerIds: Map<string, number>;
  /** The endpoint's auth is written after its providers (runEndpoint). */
  deferAuth?: boolean;
  /** Rules this apply created whose names the API does not keep unique (checked for a racing twin at the end). */
  created: Created[];
}

interface Created {
  group: RuleGroup;
  endpointUuid: string | null;
  name: string;
  id: number;
  /** What the API addresses it by. */
  ref: string | number;
  entry: Entry;
}

class LocalError extends Error {}

export async function applyPlan(
  client: ApiClient,
  doc: Document,
  state: ActualState,
  entries: Entry[],
  options: PlanOptions,
  progress: (o: Outcome) => void = () => {},
): Promise<ApplyReport> {
  const outcomes: Outcome[] = [];
  const created: Created[] = [];
  const record = (o: Outcome) => {
    outcomes.push(o);
    progress(o);
  };
  const run = async (entry: Entry, ctx: Context) => {
    try {
      await execute(entry, ctx);
      record({ entry, status: 'done' });
      return true;
    } catch (err) {
      if (err instanceof ApiError && err.status === 409) throw err;
      record({ entry, status: 'failed', error: describe(err) });
      return false;
    }
  };

  // 1. Domains the file names (endpoints on them need them first).
  await pool(
    entries.filter((e) => e.kind === 'domain' && e.action === 'create'),
    APPLY_CONCURRENCY,
    async (entry) => {
      try {
        const d = await client.call('post', '/v1/domains', { body: { name: entry.key } });
        state.domains.set(d.name, { id: d.id, verified: d.verified });
        record({ entry, status: 'done' });
      } catch (err) {
        record({ entry, status: 'failed', error: describe(err) });
      }
    },
  );

  // 2. Each endpoint with its rules, in dependency order within it; endpoints and account-wide alerts in parallel.
  const byHost = new Map<string, Entry[]>();
  const accountAlerts: Entry[] = [];
  for (const e of entries) {
    if (e.kind === 'domain' || (e.kind === 'endpoint' && e.action === 'delete')) continue;
    if (e.host === undefined) accountAlerts.push(e);
    else byHost.set(e.host, [...(byHost.get(e.host) ?? []), e]);
  }
  const desired = desiredEndpoints(doc, state.platformDomain);
  const tasks: (() => Promise<void>)[] = [
    ...[...byHost].map(([host, list]) => async () => {
      let todo = order(list);
      for (let attempt = 0; ; attempt++) {
        const ctx: Context = { client, state, uuid: state.endpoints.get(host)?.uuid, providerIds: providerIdsOf(state, host), created };
        try {
          await runEndpoint(todo, ctx, run, record);
          return;
        } catch (err) {
          const pending = todo.filter((e) => !outcomes.some((o) => o.entry === e));
          if (attempt > 0 || !(err instanceof ApiError)) {
            for (const e of pending) record({ entry: e, status: e === pending[0] ? 'failed' : 'skipped', error: e === pending[0] ? describe(err) : undefined });
            return;
          }
          // A racing apply (or hand) changed this endpoint: read it again and plan what is left, once.
          const need = needsOf(doc, options)(host);
          const fresh = await readEndpoint(client, host, need, options.selectTag).catch(() => null);
          if (fresh) state.endpoints.set(host, fresh);
          else state.endpoints.delete(host);
          const replanned = await planEndpoint(host, desired.get(host)!, fresh ?? undefined, options);
          for (const e of pending) record({ entry: e, status: 'skipped', error: 're-planned after a conflict' });
          todo = order(replanned);
        }
      }
    }),
    ...accountAlerts.map((entry) => async () => {
      await run(entry, { client, state, providerIds: new Map(), created }).catch((err) => record({ entry, status: 'failed', error: describe(err) }));
    }),
  ];
  await pool(tasks, APPLY_CONCURRENCY, (t) => t());

  // 3. Deletions the file asked for with --prune: endpoints (their rules go with them), then domains they freed.
  await pool(
    entries.filter((e) => e.kind === 'endpoint' && e.action === 'delete'),
    APPLY_CONCURRENCY,
    (entry) => run(entry, { client, state, providerIds: new Map(), created }).catch((err) => record({ entry, status: 'failed', error: describe(err) })),
  );
  await pool(
    entries.filter((e) => e.kind === 'domain' && e.action === 'delete'),
    APPLY_CONCURRENCY,
    (entry) => run(entry, { client, state, providerIds: new Map(), created }).catch((err) => record({ entry, status: 'failed', error: describe(err) })),
  );
  const notes = await removeRacingTwins(client, created);
  return { outcomes, notes };
}

/**
 * Rate-limit, routing and alert rule names are not unique in the API, so two applies racing on one account can
 * each create the same rule. Of rules sharing an endpoint and a name, the oldest (lowest id) is kept: each apply
 * deletes only the twins it made itself, so both reach the same answer without talking to each other.
 */
async function removeRacingTwins(client: ApiClient, created: Created[]): Promise<string[]> {
  if (created.length === 0) return [];
  const notes: string[] = [];
  const rows = new Map<string, { id: number }[]>();
  const key = (group: string, endpoint: string | null, name: string) => `${group}\u0000${endpoint}\u0000${name}`;
  const add = (group: string, endpoint: string | null, r: { id: number; name: string }) => rows.set(key(group, endpoint, r.name), [...(rows.get(key(group, endpoint, r.name)) ?? []), r]);
  const groups = new Set(created.map((c) => c.group));
  if (groups.has('rate_limits')) {
    for (let page = 1, pages = 1; page <= pages; page++) {
      const r = await client.call('get', '/v1/firewall/rate-limits', { query: { page: String(page), limit: '100' } });
      pages = r.pagination.totalPages;
      for (const rule of r.rules) add('rate_limits', rule.endpoint_uuid, rule);
    }
  }
  if (groups.has('alerts')) for (const rule of (await client.call('get', '/v1/traffic/alerts', {})).items) add('alerts', rule.endpoint_uuid, rule);
  const routed = [...new Set(created.filter((c) => c.group === 'routing_rules').map((c) => c.endpointUuid!))];
  await pool(routed, APPLY_CONCURRENCY, async (uuid) => {
    for (const rule of (await client.call('get', '/v1/endpoints/{id}/routing-rules', { params: { id: uuid } })).items) add('routing_rules', uuid, rule);
  });
  await pool(created, APPLY_CONCURRENCY, async (c) => {
    const twins = rows.get(key(c.group, c.endpointUuid, c.name)) ?? [];
    const oldest = Math.min(...twins.map((r) => r.id));
    if (twins.length < 2 || c.id === oldest) return;
    try {
      await deleteRule(client, c.entry.kind, c.endpointUuid ?? '', c.ref);
      notes.push(`${c.entry.kind.replace('_', ' ')} ${c.entry.key}: another apply created it at the same time; kept theirs, removed this one`);
    } catch (err) {
      notes.push(`${c.entry.kind.replace('_', ' ')} ${c.entry.key}: another apply created it at the same time, and removing this copy failed: ${describe(err)}`);
    }
  });
  return notes;
}

/** Within an endpoint: itself, providers (auth may name them), then the other rules; provider deletions last. */
function order(list: Entry[]): Entry[] {
  const rank = (e: Entry) => {
    if (e.kind === 'endpoint') return 0;
    if (e.kind === 'oauth_provider') return e.action === 'delete' ? 9 : 1;
    return 2 + RULE_GROUPS.indexOf(e.group as RuleGroup);
  };
  return [...list].sort((a, b) => rank(a) - rank(b));
}

/**
 * Runs an endpoint's entries in order; when its creation fails, its rules are not attempted. Its auth settings are
 * written after its providers, which they may name (mode oauth needs one), and count with the endpoint's entry.
 */
async function runEndpoint(list: Entry[], ctx: Context, run: (e: Entry, ctx: Context) => Promise<boolean>, record: (o: Outcome) => void): Promise<void> {
  const self = list.find((e) => e.kind === 'endpoint');
  const deferAuth = self !== undefined && self.desired?.auth !== undefined && list.some((e) => e.kind === 'oauth_provider' && e.action !== 'delete');
  let authPending = deferAuth;
  for (const [i, entry] of list.entries()) {
    if (authPending && entry.kind !== 'endpoint' && !(entry.kind === 'oauth_provider' && entry.action !== 'delete')) {
      authPending = false;
      await writeDeferredAuth(self!, ctx, record);
    }
    ctx.deferAuth = deferAuth && entry === self;
    const ok = await run(entry, ctx);
    ctx.deferAuth = false;
    if (!ok && entry === self && entry.action === 'create' && ctx.uuid === undefined) {
      for (const rest of list.slice(i + 1)) record({ entry: rest, status: 'skipped', error: `endpoint ${entry.key} was not created` });
      return;
    }
  }
  if (authPending) await writeDeferredAuth(self!, ctx, record);
}

async function writeDeferredAuth(self: Entry, ctx: Context, record: (o: Outcome) => void): Promise<void> {
  try {
    await writeSetting(ctx, 'auth', settingsOf(self), self.actual);
  } catch (err) {
    if (err instanceof ApiError && err.status === 409) throw err;
    record({ entry: { ...self, key: `${self.key} (auth)` }, status: 'failed', error: describe(err) });
  }
}

function providerIdsOf(state: ActualState, host: string): Map<string, number> {
  const ids = state.endpoints.get(host)?.ids.oauth_providers ?? {};
  return new Map(Object.entries(ids).map(([n, id]) => [n, Number(id)]));
}

function describe(err: unknown): string {
  if (err instanceof ApiError) return err.describe();
  if (err instanceof LocalError) return err.message;
  return (err as Error).message ?? String(err);
}

// ---------------------------------------------------------------------------------------------------------------
// One entry → its API calls
// ---------------------------------------------------------------------------------------------------------------

async function execute(entry: Entry, ctx: Context): Promise<void> {
  const { client } = ctx;
  if (entry.kind === 'domain') return void (await client.call('delete', '/v1/domains/{id}', { params: { id: String(entry.id) } }));
  if (entry.kind === 'endpoint') {
    if (entry.action === 'delete') return void (await client.call('delete', '/v1/endpoints/{id}', { params: { id: String(entry.id) } }));
    const desired = settingsOf(entry);
    if (entry.action === 'create') {
      const created = await client.call('post', '/v1/endpoints', { body: createBody(entry.host!, ctx.state, desired.tags ?? []) });
      ctx.uuid = created.uuid;
      const groups = (Object.keys(desired) as SettingGroup[]).filter((g) => g !== 'tags' || desired.tags?.length === 0);
      // A new endpoint holds the API's defaults; writing the groups the file names is cheaper than reading them first.
      for (const g of groups) if (g !== 'tags' && !(g === 'auth' && ctx.deferAuth)) await writeSetting(ctx, g, desired, undefined);
      return;
    }
    const changed = new Set(entry.changes.map((c) => c.field.split('.')[0] as SettingGroup));
    for (const g of changed) if (!(g === 'auth' && ctx.deferAuth)) await writeSetting(ctx, g, desired, entry.actual);
    return;
  }
  // The endpoint's uuid once known, else its hostname (the API takes either); account-wide alerts have none.
  const endpoint = ctx.uuid ?? entry.host ?? '';
  if (entry.action === 'delete') return deleteRule(client, entry.kind, endpoint, entry.id!);
  if (entry.kind === 'oauth_provider') return writeProvider(entry, ctx, endpoint);
  const made = await writeRule(entry, ctx, endpoint);
  if (made !== undefined && entry.group !== 'rbac_roles') {
    const endpointUuid = entry.host === undefined ? null : ctx.uuid!;
    ctx.created.push({ group: entry.group!, endpointUuid, name: entry.name!, id: made.id, ref: made.ref, entry });
  }
}

/** POST /v1/endpoints for a hostname: its label on the platform domain, or on the account's domain holding it. */
function createBody(host: string, state: ActualState, tags: string[]): Body<'/v1/endpoints', 'post'> {
  const withTags = (b: Body<'/v1/endpoints', 'post'>) => (tags.length > 0 ? { ...b, tags } : b);
  const platform = `.${state.platformDomain}`;
  if (host.endsWith(platform) && !host.slice(0, -platform.length).includes('.')) return withTags({ subdomain: host.slice(0, -platform.length), is_custom: true });
  const domain = [...state.domains.keys()].filter((d) => host === d || host.endsWith(`.${d}`)).sort((a, b) => b.length - a.length)[0];
  if (domain === undefined) throw new LocalError(`no domain of the account holds ${host} (list it under domains: and verify it)`);
  const label = host === domain ? '@' : host.slice(0, -domain.length - 1);
  if (label.includes('.')) throw new LocalError(`${host}: an endpoint takes one label under ${domain}`);
  return withTags({ subdomain: label, is_custom: true, domain_id: state.domains.get(domain)!.id });
}

/** An endpoint entry's settings, as planEndpoint took them from the file's canonical endpoint. */
const settingsOf = (entry: Entry) => (entry.desired ?? {}) as Partial<SettingForms>;

/** A rule entry's canonical form, as planRules took it from its group's map. */
function ruleOf<G extends RuleGroup>(entry: Entry, group: G): RuleForms[G] {
  if (entry.group !== group || entry.desired === undefined) throw new Error(`${entry.key}: planned as ${entry.group}, written as ${group}`);
  return entry.desired as RuleForms[G];
}

async function writeSetting(ctx: Context, group: SettingGroup, desired: Partial<SettingForms>, actual: Plain | undefined): Promise<void> {
  try {
    await writeGroup(ctx, group, desired, actual);
  } catch (err) {
    if (err instanceof ApiError) err.where = group;
    else if (err instanceof Error) err.message = `${group}: ${err.message}`;
    throw err;
  }
}

async function writeGroup(ctx: Context, group: SettingGroup, desired: Partial<SettingForms>, actual: Plain | undefined): Promise<void> {
  const { client } = ctx;
  const params = { id: ctx.uuid! };
  switch (group) {
    case 'tags':
      return void (await client.call('put', '/v1/endpoints/{id}/tags', { params, body: { tags: desired.tags! } }));
    case 'origin_url':
      return void (await client.call('put', '/v1/endpoints/{id}/origin', { params, body: { url: desired.origin_url! } }));
    case 'capture': {
      const c = desired.capture!;
      return void (await client.call('put', '/v1/endpoints/{id}/settings/capture', { params, body: { capture_enabled: c.enabled, capture_level: c.level ?? '' } }));
    }
    case 'ports': {
      const p = desired.ports!;
      return void (await client.call('put', '/v1/endpoints/{id}/ports', { params, body: { dedicated_tcp_port: p.tcp, dedicated_udp_port: p.udp } }));
    }
    case 'health_check':
      return void (await client.call('put', '/v1/endpoints/{id}/health-check', { params, body: desired.health_check! }));
    case 'mtls': {
      const m = desired.mtls!;
      if (m.mode !== 'disabled' && !m.ca_bundle_pem) throw new LocalError(`mtls: the trusted CAs differ from ca_sha256; ca_bundle_pem is needed to change them`);
      return void (await client.call('put', '/v1/endpoints/{id}/mtls', { params, body: m.mode === 'disabled' ? { mode: 'disabled' } : { mode: m.mode, ca_bundle_pem: m.ca_bundle_pem } }));
    }
    case 'auth':
      return writeAuth(ctx, desired.auth!, actual?.auth as AuthState | undefined);
    case 'certificate': {
      const name = desired.certificate!;
      // The name was checked against the library when the plan was made.
      const body = name === null ? { use_default: true } : { certificate_id: certificateId(ctx.state, ctx.uuid!, name) };
      return void (await client.call('put', '/v1/endpoints/{id}/certificate', { params, body }));
    }
  }
}

/** The modes a file can write (token is not one: docs/config-as-code.md). */
const WRITABLE_MODES = ['none', 'basic', 'oauth', 'oidc'] as const satisfies readonly Body<'/v1/endpoints/{id}/settings', 'put'>['mode'][];
const isWritableMode = (mode: string): mode is (typeof WRITABLE_MODES)[number] => (WRITABLE_MODES as readonly string[]).includes(mode);

/** PUT …/settings for the mode and its fields, then …/jwt and …/webhook when theirs differ. */
async function writeAuth(ctx: Context, want: AuthState, have: AuthState | undefined): Promise<void> {
  const params = { id: ctx.uuid! };
  const sso = want.mode === 'oauth' || want.mode === 'oidc';
  const main = ['mode', 'enforce_https', 'session_ttl_seconds', 'realm', 'allowed_redirects', 'scopes', 'enabled_providers', 'basic_users'] as const;
  const differs = (f: keyof AuthState) => !have || JSON.stringify(want[f]) !== JSON.stringify(have[f]);
  if (main.some(differs)) {
    const mode = want.mode;
    if (!isWritableMode(mode)) throw new LocalError(`auth.mode: ${mode} cannot be written from a file`);
    const config = mode === 'basic' ? (want.realm ? { realm: want.realm } : null) : sso ? ssoConfig(want) : null;
    const body: Body<'/v1/endpoints/{id}/settings', 'put'> = { mode, enforce_https: want.enforce_https, session_ttl_seconds: want.session_ttl_seconds, config };
    if (mode === 'basic') body.basic_users = want.basic_users.map(basicUserBody);
    if (sso) {
      body.enabled_auth_methods = want.enabled_providers.map((n) => {
        const id = ctx.providerIds.get(n);
        if (id === undefined) throw new LocalError(`auth.enabled_providers: provider "${n}" does not exist`);
        return String(id);
      });
    }
    await ctx.client.call('put', '/v1/endpoints/{id}/settings', { params, body });
  }
  if (differs('jwt')) {
    const j = want.jwt;
    const body = j ? { enabled: true, jwks_url: j.jwks_url, issuer: j.issuer, audience: j.audience, claim_headers: JSON.stringify(j.claim_headers) } : { enabled: false };
    await ctx.client.call('put', '/v1/endpoints/{id}/settings/jwt', { params, body });
  }
  if (differs('webhook')) {
    const w = want.webhook;
    const body = w ? { enabled: true, header: w.header, algo: w.algo, prefix: w.prefix, ...(isStoredSecret(w.secret) ? {} : { secret: w.secret }) } : { enabled: false };
    await ctx.client.call('put', '/v1/endpoints/{id}/settings/webhook', { params, body });
  }
}

/** A user whose password matched the stored hash carries that hash (settleSecrets): sent as it is, kept unchanged. */
function basicUserBody(u: BasicUser): { username: string; password?: string; password_hash?: string } {
  if ('password' in u) return { username: u.username, password: u.password };
  if (u.password_hash === null) throw new LocalError(`auth.basic_users: ${u.username} has neither a password nor a password_hash`);
  return { username: u.username, password_hash: u.password_hash };
}

function ssoConfig(want: AuthState): { allowed_redirects?: string[]; scopes?: string[] } | null {
  const c: { allowed_redirects?: string[]; scopes?: string[] } = {};
  if (want.allowed_redirects.length > 0) c.allowed_redirects = want.allowed_redirects;
  if (want.scopes.length > 0) c.scopes = want.scopes;
  return Object.keys(c).length > 0 ? c : null;
}

/** A secret the API must be sent: a stored marker here means the plan lost the file's value. */
function plainSecret(value: SecretValue, where: string): string {
  if (isStoredSecret(value)) throw new LocalError(`${where}: the secret is needed to create it`);
  return value;
}

/** Creates or replaces a provider (PUT is a full write: the secret is kept when not sent), then sets its toggle. */
async function writeProvider(entry: Entry, ctx: Context, endpoint: string): Promise<void> {
  const { enabled, client_secret, authorization_url, token_url, userinfo_url, ...rest } = ruleOf(entry, 'oauth_providers');
  const urls = { ...(authorization_url === null ? {} : { authorization_url }), ...(token_url === null ? {} : { token_url }), ...(userinfo_url === null ? {} : { userinfo_url }) };
  const body = { name: entry.name!, ...rest, ...urls };
  const p =
    entry.action === 'create'
      ? await ctx.client.call('post', '/v1/endpoints/{id}/oauth/providers', { params: { id: endpoint }, body: { ...body, client_secret: plainSecret(client_secret, 'client_secret') } })
      : await ctx.client.call('put', '/v1/endpoints/{id}/oauth/providers/{provider_id}', {
          params: { id: endpoint, provider_id: String(entry.id) },
          body: { ...body, ...(isStoredSecret(client_secret) ? {} : { client_secret }) },
        });
  ctx.providerIds.set(entry.name!, p.id);
  const toggle = entry.action === 'create' ? !enabled : entry.changes.some((c) => c.field === 'enabled');
  if (toggle) await ctx.client.call('put', '/v1/endpoints/{id}/oauth/providers/{provider_id}/toggle', { params: { id: endpoint, provider_id: String(p.id) }, body: { enabled } });
}

/**
 * Creates (POST) or replaces (PUT, a full write: tags go with every body, [] included) a role, rate-limit, routing or
 * alert rule; answers a created rule's ids.
 */
async function writeRule(entry: Entry, ctx: Context, endpoint: string): Promise<{ id: number; ref: string | number } | undefined> {
  const { client } = ctx;
  const name = entry.name!;
  const create = entry.action === 'create';
  const ref = String(entry.id);
  switch (entry.kind) {
    case 'rbac_role': {
      const body = { name, ...ruleOf(entry, 'rbac_roles') };
      if (!create) return void (await client.call('put', '/v1/endpoints/{id}/rbac/roles/{role_id}', { params: { id: endpoint, role_id: ref }, body }));
      const made = await client.call('post', '/v1/endpoints/{id}/rbac/roles', { params: { id: endpoint }, body });
      return { id: made.id, ref: made.id };
    }
    case 'rate_limit': {
      const body = { name, endpoint_id: endpoint, ...ruleOf(entry, 'rate_limits') };
      if (!create) return void (await client.call('put', '/v1/firewall/rate-limits/{uuid}', { params: { uuid: ref }, body }));
      const made = await client.call('post', '/v1/firewall/rate-limits', { body });
      return { id: made.id, ref: made.uuid };
    }
    case 'routing_rule': {
      const r = ruleOf(entry, 'routing_rules');
      const body = { name, ...r, target_agent_tags: r.target_agent_tags.join(',') };
      if (!create) return void (await client.call('put', '/v1/endpoints/{id}/routing-rules/{rule_id}', { params: { id: endpoint, rule_id: ref }, body }));
      const made = await client.call('post', '/v1/endpoints/{id}/routing-rules', { params: { id: endpoint }, body });
      return { id: made.id, ref: made.id };
    }
    default: {
      const r = ruleOf(entry, 'alerts');
      // A webhook's stored secret is kept by leaving it out; null removes it.
      const channels = r.channels.map((c) => (c.type === 'webhook' ? { type: c.type, url: c.url, ...(isStoredSecret(c.secret) ? {} : { secret: c.secret }) } : c));
      const body = { name, endpoint_id: entry.host === undefined ? null : endpoint, ...r, channels };
      if (!create) return void (await client.call('put', '/v1/traffic/alerts/{uuid}', { params: { uuid: ref }, body }));
      const made = await client.call('post', '/v1/traffic/alerts', { body });
      return { id: made.id, ref: made.uuid };
    }
  }
}

/** Deletes a rule by the id the API addresses it by; `endpoint` is its endpoint's uuid (or hostname). */
async function deleteRule(client: ApiClient, kind: Kind, endpoint: string, ref: string | number): Promise<void> {
  const id = String(ref);
  switch (kind) {
    case 'oauth_provider':
      return void (await client.call('delete', '/v1/endpoints/{id}/oauth/providers/{provider_id}', { params: { id: endpoint, provider_id: id } }));
    case 'rbac_role':
      return void (await client.call('delete', '/v1/endpoints/{id}/rbac/roles/{role_id}', { params: { id: endpoint, role_id: id } }));
    case 'routing_rule':
      return void (await client.call('delete', '/v1/endpoints/{id}/routing-rules/{rule_id}', { params: { id: endpoint, rule_id: id } }));
    case 'rate_limit':
      return void (await client.call('delete', '/v1/firewall/rate-limits/{uuid}', { params: { uuid: id } }));
    case 'alert':
      return void (await client.call('delete', '/v1/traffic/alerts/{uuid}', { params: { uuid: id } }));
    default:
      throw new Error(`${kind} is not a rule`);
  }
}

/** The summary line and the failures, each named with the API's error code and message. */
export function formatReport(report: ApplyReport): string {
  const count = (a: string) => report.outcomes.filter((o) => o.status === 'done' && o.entry.action === a).length;
  const failed = report.outcomes.filter((o) => o.status === 'failed');
  const skipped = report.outcomes.filter((o) => o.status === 'skipped' && o.error !== 're-planned after a conflict');
  const lines = report.notes.map((n) => `note: ${n}`);
  lines.push(`Apply: ${count('create')} created, ${count('update')} updated, ${count('delete')} deleted, ${failed.length} failed.`);
  for (const o of failed) lines.push(`  failed: ${o.entry.action} ${o.entry.kind.replace('_', ' ')} ${o.entry.key}: ${o.error}`);
  for (const o of skipped) lines.push(`  not attempted: ${o.entry.action} ${o.entry.kind.replace('_', ' ')} ${o.entry.key} (${o.error})`);
  if (failed.length + skipped.length > 0) lines.push('Run the apply again to finish: it plans from what the account holds now.');
  return lines.join('\n') + '\n';
}
