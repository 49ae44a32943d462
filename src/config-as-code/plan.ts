// The plan: what an apply of a document would change, resource by resource (create / update field by field /
// delete), from the file's canonical form and the account's as read; printed by diff, carried out by apply.
import type { Document } from './document.ts';
import { desiredAlert, desiredEndpoint, display, RULE_GROUPS, same, settleSecrets, SETTING_GROUPS, type Canonical, type Plain, type RuleGroup, type SettingGroup } from './model.ts';
import type { ActualEndpoint, ActualState, Needs } from './state.ts';

export type Action = 'create' | 'update' | 'delete';
export type Kind = 'domain' | 'endpoint' | 'oauth_provider' | 'rbac_role' | 'rate_limit' | 'routing_rule' | 'alert';

export interface Change {
  field: string;
  old: unknown;
  new: unknown;
}

export interface Entry {
  kind: Kind;
  action: Action;
  /** How the plan names it: a domain, a hostname, `hostname/rule name`, or an account-wide alert's name. */
  key: string;
  changes: Change[];
  host?: string;
  group?: RuleGroup;
  name?: string;
  /** The resource's canonical form from the file (create, update). */
  desired?: Plain;
  /** The API's id of what exists (update, delete). */
  id?: string | number;
  /** The canonical form read from the API (update): a PUT that keeps what it omits needs it. */
  actual?: Plain;
}

/** A file that names what the account does not have, found once the account is read: nothing is applied. */
export class PlanError extends Error {}

/** The id of the library certificate a file names; refused when none, or more than one, has that name. */
export function certificateId(state: ActualState, host: string, name: string): number {
  const found = state.certificates.filter((c) => c.name === name);
  if (found.length === 0) throw new PlanError(`endpoint ${host}: no certificate in the library is named "${name}" (GET /v1/certificates lists them)`);
  if (found.length > 1) throw new PlanError(`endpoint ${host}: ${found.length} certificates in the library are named "${name}" (ids ${found.map((c) => c.id).join(', ')}); rename all but one`);
  return found[0].id;
}

/** Whether a run reads the certificate library: some endpoint of the file names a certificate. */
export const needsCertificates = (doc: Document) => Object.values(doc.endpoints ?? {}).some((e) => e.certificate !== undefined);

export interface PlanOptions {
  prune: boolean;
  selectTag?: string;
}

const KIND_OF: Record<RuleGroup, Kind> = {
  oauth_providers: 'oauth_provider',
  rbac_roles: 'rbac_role',
  rate_limits: 'rate_limit',
  routing_rules: 'routing_rule',
  alerts: 'alert',
};

/** The file's endpoints by full hostname: a bare label lives under the platform domain. */
export function desiredEndpoints(doc: Document, platformDomain: string): Map<string, Canonical> {
  const out = new Map<string, Canonical>();
  for (const [key, e] of Object.entries(doc.endpoints ?? {})) out.set(key.includes('.') ? key : `${key}.${platformDomain}`, desiredEndpoint(e));
  return out;
}

/** What to read per hostname: the groups the file names, and every rule map when --prune may delete from them. */
export function needsOf(doc: Document, options: PlanOptions): Needs {
  const named = new Map<string, Set<SettingGroup | RuleGroup>>();
  for (const [key, e] of Object.entries(doc.endpoints ?? {})) {
    const groups = new Set([...Object.keys(e), ...(options.prune ? RULE_GROUPS : [])] as (SettingGroup | RuleGroup)[]);
    named.set(key, groups);
  }
  const none = new Set<SettingGroup | RuleGroup>();
  return (host) => named.get(host) ?? named.get(host.split('.')[0]) ?? none;
}

/** Whether a run needs the account's alert rules: the file names some, or --prune may delete them. */
export const needsAlerts = (doc: Document, options: PlanOptions) =>
  options.prune || doc.alerts !== undefined || Object.values(doc.endpoints ?? {}).some((e) => e.alerts !== undefined);

/** Field-by-field changes between two canonical resources (secrets settled first). */
function changesOf(desired: Plain, actual: Plain | undefined, prefix = ''): Change[] {
  const out: Change[] = [];
  for (const [field, value] of Object.entries(desired)) {
    if (field === 'ca_bundle_pem') continue;
    const old = actual?.[field];
    if (same(value, old)) continue;
    // Auth is one group with many fields: name each, as an operator reads them.
    if (field === 'auth' && value && typeof value === 'object') out.push(...changesOf(value as Plain, (old ?? undefined) as Plain | undefined, 'auth.'));
    // A new resource lists what it sets, not every empty default.
    else if (actual !== undefined || !isEmpty(value)) out.push({ field: prefix + field, old, new: value });
  }
  return out;
}

const isEmpty = (v: unknown) => v === null || v === '' || v === false || (Array.isArray(v) && v.length === 0) || (typeof v === 'object' && v !== null && Object.keys(v).length === 0);

export async function makePlan(doc: Document, actual: ActualState, options: PlanOptions): Promise<Entry[]> {
  const entries: Entry[] = [];
  const wantedDomains = doc.domains ?? [];
  for (const name of wantedDomains) if (!actual.domains.has(name)) entries.push({ kind: 'domain', action: 'create', key: name, changes: [] });

  const desired = desiredEndpoints(doc, actual.platformDomain);
  // A certificate to assign must be one of the library's, by a name no other certificate has: checked for every
  // endpoint before anything is applied.
  for (const [host, want] of desired) {
    const name = want.certificate;
    if (typeof name === 'string' && actual.endpoints.get(host)?.state.certificate !== name) certificateId(actual, host, name);
  }
  for (const [host, want] of desired) entries.push(...(await planEndpoint(host, want, actual.endpoints.get(host), options)));

  const accountAlerts = Object.fromEntries(Object.entries(doc.alerts ?? {}).map(([n, a]) => [n, desiredAlert(a)]));
  entries.push(
    ...(await planRules('alerts', undefined, doc.alerts === undefined && !options.prune ? undefined : accountAlerts, actual.alerts, actual.alertIds, options)),
  );
  if (options.prune) for (const d of actual.alertDuplicates) entries.push({ kind: 'alert', action: 'delete', key: `${d.name} (duplicate)`, changes: [], id: d.id });

  if (options.prune) {
    for (const [host, e] of actual.endpoints) if (!desired.has(host)) entries.push({ kind: 'endpoint', action: 'delete', key: host, host, changes: [], id: e.uuid });
    // Domains carry no tags: a file that manages one team's resources leaves the account's domains alone.
    if (options.selectTag === undefined) {
      for (const [name, d] of actual.domains) if (!wantedDomains.includes(name)) entries.push({ kind: 'domain', action: 'delete', key: name, changes: [], id: d.id });
    }
  }
  return entries;
}

/** One endpoint's entries: itself (create or update of its settings), then its rules. */
export async function planEndpoint(host: string, want: Canonical, have: ActualEndpoint | undefined, options: PlanOptions): Promise<Entry[]> {
  const entries: Entry[] = [];
  const settings: Plain = {};
  for (const g of SETTING_GROUPS) if (want[g] !== undefined) settings[g] = structuredClone(want[g]);
  if (!have) {
    entries.push({ kind: 'endpoint', action: 'create', key: host, host, changes: changesOf(settings, undefined), desired: settings });
  } else {
    await settleSecrets(settings, have.state);
    const changes = changesOf(settings, have.state as Plain);
    if (changes.length > 0) entries.push({ kind: 'endpoint', action: 'update', key: host, host, changes, desired: settings, actual: have.state as Plain, id: have.uuid });
  }
  for (const g of RULE_GROUPS) {
    const wanted = want[g] ?? (options.prune ? {} : undefined);
    entries.push(...(await planRules(g, host, wanted, have?.state[g] ?? {}, have?.ids[g] ?? {}, options)));
  }
  if (have && options.prune) {
    for (const d of have.duplicates) entries.push({ kind: KIND_OF[d.group], action: 'delete', key: `${host}/${d.name} (duplicate)`, host, group: d.group, changes: [], id: d.id });
  }
  return entries;
}

async function planRules(
  group: RuleGroup,
  host: string | undefined,
  wanted: Record<string, Plain> | undefined,
  have: Record<string, Plain>,
  ids: Record<string, string | number>,
  options: PlanOptions,
): Promise<Entry[]> {
  if (wanted === undefined) return [];
  const entries: Entry[] = [];
  const kind = KIND_OF[group];
  const key = (name: string) => (host ? `${host}/${name}` : name);
  for (const [name, value] of Object.entries(wanted)) {
    const d = structuredClone(value);
    const old = have[name];
    if (old === undefined) {
      entries.push({ kind, action: 'create', key: key(name), host, group, name, changes: changesOf(d, undefined), desired: d });
      continue;
    }
    await settleSecrets(d, old);
    const changes = changesOf(d, old);
    if (changes.length > 0) entries.push({ kind, action: 'update', key: key(name), host, group, name, changes, desired: d, actual: old, id: ids[name] });
  }
  if (options.prune) {
    for (const name of Object.keys(have)) if (!(name in wanted)) entries.push({ kind, action: 'delete', key: key(name), host, group, name, changes: [], id: ids[name] });
  }
  return entries;
}

const SIGN: Record<Action, string> = { create: '+', update: '~', delete: '-' };

/** The plan as diff prints it; ends with the count line. */
export function formatPlan(entries: Entry[]): string {
  if (entries.length === 0) return 'No changes: the account matches the file.\n';
  const lines: string[] = [];
  for (const e of entries) {
    lines.push(`${SIGN[e.action]} ${e.action} ${e.kind.replace('_', ' ')} ${e.key}`);
    for (const c of e.changes) lines.push(e.action === 'create' ? `    ${c.field}: ${display(c.new, c.field)}` : `    ${c.field}: ${display(c.old, c.field)} → ${display(c.new, c.field)}`);
  }
  const count = (a: Action) => entries.filter((e) => e.action === a).length;
  lines.push('', `Plan: ${count('create')} to create, ${count('update')} to update, ${count('delete')} to delete.`);
  return lines.join('\n') + '\n';
}
