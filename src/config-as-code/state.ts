// Reads an account's current configuration through the /v1 API into the canonical form (model.ts), by endpoint
// hostname and rule name, keeping the ids the apply needs; only the groups a run needs are read.
import { ApiError, pool, type ApiClient } from './client.ts';
import type { AlertView, CertificateView, EndpointView, RoutingRuleView } from './views.ts';
import {
  actualAlert,
  actualAuth,
  actualHealth,
  actualMtls,
  actualProvider,
  actualRateLimit,
  actualRole,
  actualRoutingRule,
  actualSettings,
  type Canonical,
  type AlertRule,
  type RuleForms,
  type RuleGroup,
  type SettingForms,
  type SettingGroup,
} from './model.ts';

export const READ_CONCURRENCY = 16;

export interface ActualEndpoint {
  hostname: string;
  uuid: string;
  view: EndpointView;
  state: Canonical;
  /** Rule name → the id the API addresses it by (uuid or integer), per group. */
  ids: Partial<Record<RuleGroup, Record<string, string | number>>>;
  /** Rules whose name another rule of the group already has: only --prune touches them (deleted). */
  duplicates: { group: RuleGroup; id: string | number; name: string }[];
}

export interface ActualState {
  platformDomain: string;
  domains: Map<string, { id: number; verified: boolean }>;
  /** The certificate library (read when a run names or exports certificates): the file refers to them by name. */
  certificates: CertificateView[];
  endpoints: Map<string, ActualEndpoint>;
  alerts: Record<string, AlertRule>;
  alertIds: Record<string, string>;
  alertDuplicates: { id: string; name: string }[];
  /** Export only: the key may not read alert rules (traffic:read), so none are in the file. */
  alertsUnread: boolean;
}

/** Which groups to read for one endpoint: what the file names, and every rule map when pruning or exporting. */
export type Needs = (hostname: string) => ReadonlySet<SettingGroup | RuleGroup>;

const PAGE = 100;

async function allPages<T>(fetchPage: (page: number) => Promise<{ items: T[]; total: number }>): Promise<T[]> {
  const first = await fetchPage(1);
  const pages = Math.ceil(first.total / PAGE);
  const rest = await pool(
    Array.from({ length: Math.max(0, pages - 1) }, (_, i) => i + 2),
    READ_CONCURRENCY,
    fetchPage,
  );
  return [first, ...rest].flatMap((p) => p.items);
}

/** Keyed by name; later rules of an already-seen name are duplicates. */
function byName<T extends { name: string }, F>(rows: T[], id: (r: T) => string | number, view: (r: T) => F) {
  const state: Record<string, F> = {};
  const ids: Record<string, string | number> = {};
  const dups: { id: string | number; name: string }[] = [];
  for (const r of rows) {
    if (r.name in state) dups.push({ id: id(r), name: r.name });
    else {
      state[r.name] = view(r);
      ids[r.name] = id(r);
    }
  }
  return { state, ids, dups };
}

/**
 * `alerts`: whether to read alert rules (they need traffic:read, which a key managing only endpoints may lack);
 * `if-allowed` (export) reads them unless the key is refused, and says so in `alertsUnread`.
 */
export async function readState(
  client: ApiClient,
  needs: Needs,
  selectTag?: string,
  alerts: boolean | 'if-allowed' = true,
  certificates = false,
): Promise<ActualState> {
  let alertsUnread = false;
  const readAlerts = async () => {
    if (!alerts) return { items: [] as AlertView[] };
    try {
      return await client.call('get', '/v1/traffic/alerts', {});
    } catch (err) {
      if (alerts !== 'if-allowed' || !(err instanceof ApiError) || err.status !== 403) throw err;
      alertsUnread = true;
      return { items: [] as AlertView[] };
    }
  };
  const [endpointViews, domains, rateLimits, alertList, library] = await Promise.all([
    allPages((page) => client.call('get', '/v1/endpoints', { query: { page: String(page), page_size: String(PAGE) } })),
    client.call('get', '/v1/domains', {}),
    // The rate-limit list also names the platform domain (endpoints with domain_id null live under it).
    allPages(async (page) => {
      const r = await client.call('get', '/v1/firewall/rate-limits', { query: { page: String(page), limit: String(PAGE) } });
      return { items: [r], total: r.pagination.total };
    }),
    readAlerts(),
    certificates ? client.call('get', '/v1/certificates', {}) : { items: [] as CertificateView[] },
  ]);
  const certificateNames = new Map(library.items.map((c) => [c.id, c.name]));
  const platformDomain: string = rateLimits[0].defaultDomain;
  const rules = rateLimits.flatMap((p) => p.rules);
  const tagged = (r: { tags?: string[] }) => selectTag === undefined || (r.tags ?? []).includes(selectTag);

  const endpoints = new Map<string, ActualEndpoint>();
  const selected = endpointViews.filter((e) => !e.ephemeral && tagged(e));
  const byUuid = new Map<string, ActualEndpoint>();
  await pool(selected, READ_CONCURRENCY, async (view) => {
    const need = needs(view.hostname);
    const uuid = view.uuid;
    const id = { params: { id: uuid } };
    const e: ActualEndpoint = { hostname: view.hostname, uuid, view, state: {}, ids: {}, duplicates: [] };
    const settings: Partial<SettingForms> = actualSettings(view);
    for (const g of ['tags', 'origin_url', 'capture', 'ports'] as const) if (!need.has(g)) delete settings[g];
    Object.assign(e.state, settings);
    // By name, as the file refers to it (an id the library does not list, which a racing delete can leave, by id).
    if (need.has('certificate')) e.state.certificate = view.certificate_id === null ? null : (certificateNames.get(view.certificate_id) ?? `#${view.certificate_id}`);
    const [mtls, health, providers, roles, routing, auth] = await Promise.all([
      need.has('mtls') ? client.call('get', '/v1/endpoints/{id}/mtls', id) : undefined,
      need.has('health_check') ? client.call('get', '/v1/endpoints/{id}/health-check', id) : undefined,
      need.has('oauth_providers') || need.has('auth') ? client.call('get', '/v1/endpoints/{id}/oauth/providers', id) : undefined,
      need.has('rbac_roles') ? client.call('get', '/v1/endpoints/{id}/rbac/roles', id) : undefined,
      need.has('routing_rules') ? readRouting(client, uuid) : undefined,
      need.has('auth') ? client.call('get', '/v1/endpoints/{id}/settings', id) : undefined,
    ]);
    if (mtls) e.state.mtls = actualMtls(mtls);
    if (health) e.state.health_check = actualHealth(health);
    const group = <G extends RuleGroup, T extends { name: string }>(g: G, rows: T[], id: (r: T) => string | number, view: (r: T) => RuleForms[G]) => {
      const r = byName(rows, id, view);
      Object.assign(e.state, { [g]: r.state });
      e.ids[g] = r.ids;
      e.duplicates.push(...r.dups.map((d) => ({ group: g, ...d })));
    };
    if (providers) group('oauth_providers', providers.items, (p) => p.id, actualProvider);
    if (auth) {
      const providerIds = new Map(Object.entries(e.ids.oauth_providers ?? {}).map(([n, id]) => [Number(id), n]));
      e.state.auth = actualAuth(auth, e.state.oauth_providers ?? {}, providerIds);
      if (!need.has('oauth_providers')) delete e.state.oauth_providers;
    }
    if (roles) group('rbac_roles', roles, (r) => r.id, actualRole);
    if (routing) group('routing_rules', routing.filter(tagged), (r) => r.id, actualRoutingRule);
    if (need.has('rate_limits')) group('rate_limits', rules.filter((r) => r.endpoint_uuid === uuid && tagged(r)), (r) => r.uuid, actualRateLimit);
    if (need.has('alerts')) group('alerts', alertList.items.filter((r) => r.endpoint_uuid === uuid && tagged(r)), (r) => r.uuid, actualAlert);
    endpoints.set(view.hostname, e);
    byUuid.set(uuid, e);
  });

  const account = byName(
    alertList.items.filter((r) => r.endpoint_uuid === null && tagged(r)),
    (r) => r.uuid,
    actualAlert,
  );
  return {
    platformDomain,
    domains: new Map(domains.items.map((d) => [d.name, { id: d.id, verified: d.verified }])),
    certificates: library.items,
    endpoints,
    alerts: account.state,
    alertIds: account.ids as Record<string, string>,
    alertDuplicates: account.dups as { id: string; name: string }[],
    alertsUnread,
  };
}

/** Routing rules need a plan entitlement even to list: without it the endpoint has none to manage. */
async function readRouting(client: ApiClient, uuid: string): Promise<RoutingRuleView[]> {
  try {
    return (await client.call('get', '/v1/endpoints/{id}/routing-rules', { params: { id: uuid } })).items;
  } catch (err) {
    if (err instanceof ApiError && err.code === 'entitlement_required') return [];
    throw err;
  }
}

/** Re-reads one endpoint (after a 409 from a racing apply); null when it is gone. */
export async function readEndpoint(client: ApiClient, hostname: string, need: ReadonlySet<SettingGroup | RuleGroup>, selectTag?: string): Promise<ActualEndpoint | null> {
  const state = await readState(client, (h) => (h === hostname ? need : new Set()), selectTag, need.has('alerts'), need.has('certificate'));
  return state.endpoints.get(hostname) ?? null;
}
