// Carries out a plan through the /v1 API: domains first, then each endpoint with its rules (endpoints in parallel,
// bounded), then deletions; a 409 re-reads and re-plans that endpoint once. Every entry ends done, failed or not attempted.
import type { JsonRequestBody as Body } from '../shared/api/client.ts';
import { ApiError, pool, type ApiClient } from './client.ts';
import type { Document } from './document.ts';
import { isStoredSecret, RULE_GROUPS, type AuthState, type Plain, type RuleGroup, type SettingGroup } from './model.ts';
import type { AlertView, Created as CreatedView, DomainView, RateLimitPage, RoutingRuleView } from './views.ts';
import { certificateId, desiredEndpoints, needsOf, planEndpoint, type Entry, type PlanOptions } from './plan.ts';
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
        const d = await client.post<DomainView>('/v1/domains', { name: entry.key } satisfies Body<'/v1/domains', 'post'>);
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
      const r = await client.get<RateLimitPage>(`/v1/firewall/rate-limits?page=${page}&limit=100`);
      pages = r.pagination.totalPages;
      for (const rule of r.rules) add('rate_limits', rule.endpoint_uuid, rule);
    }
  }
  if (groups.has('alerts')) for (const rule of (await client.get<{ items: AlertView[] }>('/v1/traffic/alerts')).items) add('alerts', rule.endpoint_uuid, rule);
  const routed = [...new Set(created.filter((c) => c.group === 'routing_rules').map((c) => c.endpointUuid!))];
  await pool(routed, APPLY_CONCURRENCY, async (uuid) => {
    for (const rule of (await client.get<{ items: RoutingRuleView[] }>(`/v1/endpoints/${uuid}/routing-rules`)).items) add('routing_rules', uuid, rule);
  });
  await pool(created, APPLY_CONCURRENCY, async (c) => {
    const twins = rows.get(key(c.group, c.endpointUuid, c.name)) ?? [];
    const oldest = Math.min(...twins.map((r) => r.id));
    if (twins.length < 2 || c.id === oldest) return;
    try {
      await client.delete(`${ruleBase(c.entry, { uuid: c.endpointUuid ?? undefined } as Context)}/${c.ref}`);
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
    await writeSetting(ctx, 'auth', self.desired!, self.actual);
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
  if (entry.kind === 'domain') return void (await client.delete(`/v1/domains/${entry.id}`));
  if (entry.kind === 'endpoint') {
    if (entry.action === 'delete') return void (await client.delete(`/v1/endpoints/${entry.id}`));
    if (entry.action === 'create') {
      const created = await client.post<CreatedView>('/v1/endpoints', createBody(entry.host!, ctx.state, (entry.desired!.tags as string[] | undefined) ?? []));
      ctx.uuid = created.uuid;
      const groups = Object.keys(entry.desired!).filter((g) => g !== 'tags' || (entry.desired!.tags as string[]).length === 0) as SettingGroup[];
      // A new endpoint holds the API's defaults; writing the groups the file names is cheaper than reading them first.
      for (const g of groups) if (g !== 'tags' && !(g === 'auth' && ctx.deferAuth)) await writeSetting(ctx, g, entry.desired!, undefined);
      return;
    }
    const changed = new Set(entry.changes.map((c) => c.field.split('.')[0] as SettingGroup));
    for (const g of changed) if (!(g === 'auth' && ctx.deferAuth)) await writeSetting(ctx, g, entry.desired!, entry.actual);
    return;
  }
  const base = ruleBase(entry, ctx);
  if (entry.action === 'delete') return void (await client.delete(`${base}/${entry.id}`));
  const body = ruleBody(entry, ctx);
  if (entry.kind === 'oauth_provider') {
    const enabled = entry.desired!.enabled as boolean;
    const p = entry.action === 'create' ? await client.post<CreatedView>(base, body) : await client.put<CreatedView>(`${base}/${entry.id}`, body);
    ctx.providerIds.set(entry.name!, p.id);
    const toggle = entry.action === 'create' ? !enabled : entry.changes.some((c) => c.field === 'enabled');
    if (toggle) await client.put(`${base}/${p.id}/toggle`, { enabled } satisfies Body<'/v1/endpoints/{id}/oauth/providers/{provider_id}/toggle', 'put'>);
    return;
  }
  if (entry.action === 'update') return void (await client.put(`${base}/${entry.id}`, body));
  const made = await client.post<CreatedView>(base, body);
  if (entry.group !== 'rbac_roles') {
    const endpointUuid = entry.host === undefined ? null : ctx.uuid!;
    ctx.created.push({ group: entry.group!, endpointUuid, name: entry.name!, id: made.id, ref: made.uuid ?? made.id, entry });
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

async function writeSetting(ctx: Context, group: SettingGroup, desired: Plain, actual: Plain | undefined): Promise<void> {
  try {
    await writeGroup(ctx, group, desired, actual);
  } catch (err) {
    if (err instanceof ApiError) err.where = group;
    else if (err instanceof Error) err.message = `${group}: ${err.message}`;
    throw err;
  }
}

async function writeGroup(ctx: Context, group: SettingGroup, desired: Plain, actual: Plain | undefined): Promise<void> {
  const { client } = ctx;
  const base = `/v1/endpoints/${ctx.uuid}`;
  const v = desired[group];
  switch (group) {
    case 'tags':
      return void (await client.put(`${base}/tags`, { tags: v as string[] } satisfies Body<'/v1/endpoints/{id}/tags', 'put'>));
    case 'origin_url':
      return void (await client.put(`${base}/origin`, { url: v as string | null } satisfies Body<'/v1/endpoints/{id}/origin', 'put'>));
    case 'capture': {
      const c = v as { enabled: boolean; level: string | null };
      return void (await client.put(`${base}/settings/capture`, { capture_enabled: c.enabled, capture_level: c.level ?? '' } satisfies Body<'/v1/endpoints/{id}/settings/capture', 'put'>));
    }
    case 'ports': {
      const p = v as { tcp: number | null; udp: number | null };
      return void (await client.put(`${base}/ports`, { dedicated_tcp_port: p.tcp, dedicated_udp_port: p.udp } satisfies Body<'/v1/endpoints/{id}/ports', 'put'>));
    }
    case 'health_check':
      return void (await client.put(`${base}/health-check`, v));
    case 'mtls': {
      const m = v as { mode: 'disabled' | 'optional' | 'required'; ca_bundle_pem?: string };
      if (m.mode !== 'disabled' && !m.ca_bundle_pem) throw new LocalError(`mtls: the trusted CAs differ from ca_sha256; ca_bundle_pem is needed to change them`);
      return void (await client.put(`${base}/mtls`, (m.mode === 'disabled' ? { mode: 'disabled' } : { mode: m.mode, ca_bundle_pem: m.ca_bundle_pem }) satisfies Body<'/v1/endpoints/{id}/mtls', 'put'>));
    }
    case 'auth':
      return writeAuth(ctx, v as AuthState, actual?.auth as AuthState | undefined);
    case 'certificate':
      // The name was checked against the library when the plan was made.
      return void (await client.put(`${base}/certificate`, (v === null ? { use_default: true } : { certificate_id: certificateId(ctx.state, ctx.uuid!, v as string) }) satisfies Body<'/v1/endpoints/{id}/certificate', 'put'>));
  }
}

/** PUT …/settings for the mode and its fields, then …/jwt and …/webhook when theirs differ. */
async function writeAuth(ctx: Context, want: AuthState, have: AuthState | undefined): Promise<void> {
  const base = `/v1/endpoints/${ctx.uuid}/settings`;
  const sso = want.mode === 'oauth' || want.mode === 'oidc';
  const main = ['mode', 'enforce_https', 'session_ttl_seconds', 'realm', 'allowed_redirects', 'scopes', 'enabled_providers', 'basic_users'] as const;
  const differs = (f: keyof AuthState) => !have || JSON.stringify(want[f]) !== JSON.stringify(have[f]);
  if (main.some(differs)) {
    const config = want.mode === 'basic' ? (want.realm ? { realm: want.realm } : null) : sso ? ssoConfig(want) : null;
    const body: Plain = { mode: want.mode, enforce_https: want.enforce_https, session_ttl_seconds: want.session_ttl_seconds, config };
    if (want.mode === 'basic') body.basic_users = want.basic_users;
    if (sso) {
      body.enabled_auth_methods = want.enabled_providers.map((n) => {
        const id = ctx.providerIds.get(n);
        if (id === undefined) throw new LocalError(`auth.enabled_providers: provider "${n}" does not exist`);
        return String(id);
      });
    }
    await ctx.client.put(base, body);
  }
  if (differs('jwt')) {
    const j = want.jwt;
    await ctx.client.put(`${base}/jwt`, (j ? { enabled: true, jwks_url: j.jwks_url, issuer: j.issuer, audience: j.audience, claim_headers: JSON.stringify(j.claim_headers) } : { enabled: false }) satisfies Body<'/v1/endpoints/{id}/settings/jwt', 'put'>);
  }
  if (differs('webhook')) {
    const w = want.webhook;
    await ctx.client.put(
      `${base}/webhook`,
      (w ? { enabled: true, header: w.header, algo: w.algo, prefix: w.prefix, ...(isStoredSecret(w.secret) ? {} : { secret: w.secret }) } : { enabled: false }) satisfies Body<'/v1/endpoints/{id}/settings/webhook', 'put'>,
    );
  }
}

function ssoConfig(want: AuthState): Plain | null {
  const c: Plain = {};
  if (want.allowed_redirects.length > 0) c.allowed_redirects = want.allowed_redirects;
  if (want.scopes.length > 0) c.scopes = want.scopes;
  return Object.keys(c).length > 0 ? c : null;
}

function ruleBase(entry: Entry, ctx: Context): string {
  const ep = `/v1/endpoints/${ctx.uuid ?? entry.host}`;
  switch (entry.kind) {
    case 'oauth_provider':
      return `${ep}/oauth/providers`;
    case 'rbac_role':
      return `${ep}/rbac/roles`;
    case 'routing_rule':
      return `${ep}/routing-rules`;
    case 'rate_limit':
      return '/v1/firewall/rate-limits';
    default:
      return '/v1/traffic/alerts';
  }
}

/** A rule's create / replace body from its canonical form; tags are sent when there are some or were some. */
function ruleBody(entry: Entry, ctx: Context): Plain {
  const { tags, ...d } = entry.desired! as Plain & { tags?: string[] };
  // Every rule PUT is a full write: tags go with every body, [] included.
  const withTags = (b: Plain) => ({ ...b, tags: tags ?? [] });
  const name = entry.name!;
  switch (entry.kind) {
    case 'oauth_provider': {
      const { enabled: _enabled, client_secret, authorization_url, token_url, userinfo_url, ...rest } = d;
      const urls = Object.fromEntries(Object.entries({ authorization_url, token_url, userinfo_url }).filter(([, u]) => u !== null));
      return { name, ...rest, ...urls, ...(isStoredSecret(client_secret) ? {} : { client_secret }) };
    }
    case 'rbac_role':
      return { name, ...d };
    case 'rate_limit':
      return withTags({ name, endpoint_id: ctx.uuid, ...d });
    case 'routing_rule':
      return withTags({ name, ...d, target_agent_tags: (d.target_agent_tags as string[]).join(',') });
    default: {
      const channels = (d.channels as { type: string; url?: string; secret?: string | null }[]).map((c) =>
        c.type === 'webhook' ? { type: 'webhook', url: c.url, ...(c.secret === null ? { secret: null } : isStoredSecret(c.secret) ? {} : { secret: c.secret }) } : c,
      );
      return withTags({ name, endpoint_id: entry.host === undefined ? null : ctx.uuid, ...d, channels });
    }
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
