// Writes an account's current configuration as a document that apply round-trips with an empty diff: every group
// of every endpoint, defaults left out, and secrets as `${ENV}` references (basic users as their bcrypt hashes).
import { stringify } from 'yaml';
import { DOCUMENT_VERSION } from './document.ts';
import { isStoredSecret, PERMISSION_DEFAULTS, RULE_DEFAULTS, RULE_GROUPS, SETTING_GROUPS, type Plain, type RuleGroup } from './model.ts';
import type { ActualState } from './state.ts';

export interface Exported {
  document: Plain;
  /** The environment variables the document references, one per secret the API keeps. */
  references: string[];
  /** What the format cannot express and export therefore left out. */
  warnings: string[];
}

const envName = (...parts: string[]) => 'EDGE_SECRET_' + parts.join('_').toUpperCase().replace(/[^A-Z0-9]+/g, '_').replace(/^_|_$/g, '');

export function exportDocument(state: ActualState): Exported {
  const references: string[] = [];
  const warnings: string[] = [];
  const ref = (...parts: string[]) => {
    const name = envName(...parts);
    references.push(name);
    return `\${${name}}`;
  };
  const endpoints: Record<string, Plain> = {};
  for (const [host, e] of [...state.endpoints].sort(([a], [b]) => a.localeCompare(b))) {
    const out: Plain = {};
    const s = e.state as Plain;
    for (const g of SETTING_GROUPS) {
      if (s[g] === undefined) continue;
      if (g === 'auth') {
        const auth = exportAuth(s.auth as Plain, () => ref(host, 'webhook'));
        if (auth === null) warnings.push(`${host}: auth mode "${(s.auth as Plain).mode}" cannot be written in a file; auth left out`);
        else if ((auth.basic_users as Plain[] | undefined)?.some((u) => u.password_hash === null)) {
          // The API shows hashes only to keys holding endpoints:update.
          warnings.push(`${host}: this API key cannot read the basic users' password hashes (endpoints:update); auth left out`);
        } else if (auth.mode !== 'none' || Object.keys(auth).length > 1) out.auth = auth;
        continue;
      }
      const v = exportSetting(g, s[g]);
      if (v !== undefined) out[g] = v;
    }
    for (const g of RULE_GROUPS) {
      const rules = s[g] as Record<string, Plain> | undefined;
      if (!rules || Object.keys(rules).length === 0) continue;
      out[g] = Object.fromEntries(Object.entries(rules).map(([name, r]) => [name, exportRule(g, r, (field) => ref(host, g, name, field))]));
    }
    for (const d of e.duplicates) warnings.push(`${host}: a second ${d.group} rule named "${d.name}" is left out (names are keys in the file)`);
    endpoints[host] = out;
  }
  const alerts = Object.fromEntries(Object.entries(state.alerts).map(([name, r]) => [name, exportRule('alerts', r, (field) => ref('alerts', name, field))]));
  if (state.alertsUnread) warnings.push('this API key may not read alert rules (traffic:read): none are in the file');
  for (const d of state.alertDuplicates) warnings.push(`a second alert rule named "${d.name}" is left out (names are keys in the file)`);
  const document: Plain = { version: DOCUMENT_VERSION };
  if (state.domains.size > 0) document.domains = [...state.domains.keys()].sort();
  document.endpoints = endpoints;
  if (Object.keys(alerts).length > 0) document.alerts = alerts;
  return { document, references, warnings };
}

export function documentText(document: Plain, format: 'yaml' | 'json'): string {
  return format === 'json' ? JSON.stringify(document, null, 2) + '\n' : stringify(document, { lineWidth: 0 });
}

/** A setting group as written: left out when it holds the API's defaults, so a short file stays short. */
function exportSetting(g: string, value: unknown): unknown {
  const v = value as Plain;
  switch (g) {
    case 'tags':
      return (value as string[]).length > 0 ? value : undefined;
    case 'origin_url':
      return v ?? undefined;
    case 'capture':
      // A new endpoint captures, at no set level.
      return v.enabled && v.level === null ? undefined : drop(v, { level: null });
    case 'ports':
      return v.tcp !== null || v.udp !== null ? drop(v, { tcp: null, udp: null }) : undefined;
    case 'mtls':
      return v.mode === 'disabled' ? undefined : v;
    case 'certificate':
      // The platform certificate is a new endpoint's; a name is written as read.
      return v ?? undefined;
    case 'health_check':
      return v.enabled || v.path !== '/' || v.interval_seconds !== 60 ? drop(v, { path: '/', interval_seconds: 60 }) : undefined;
  }
  return v;
}

function exportAuth(a: Plain, webhookRef: () => string): Plain | null {
  if (!['none', 'basic', 'oauth', 'oidc'].includes(a.mode as string)) return null;
  const out = drop(a, { enforce_https: false, session_ttl_seconds: null, realm: null, allowed_redirects: [], scopes: [], enabled_providers: [], basic_users: [], jwt: null, webhook: null });
  if (a.jwt) out.jwt = drop(a.jwt as Plain, { issuer: '', audience: '', claim_headers: {} });
  if (a.webhook) out.webhook = { ...drop(a.webhook as Plain, { prefix: '' }), secret: webhookRef() };
  return out;
}

function exportRule(group: RuleGroup, r: Plain, ref: (field: string) => string): Plain {
  const out = drop(r, RULE_DEFAULTS[group]);
  if (group === 'oauth_providers') out.client_secret = ref('client_secret');
  if (group === 'rate_limits' && Array.isArray(out.conditions)) out.conditions = (out.conditions as Plain[]).map((c) => drop(c, { logical_operator: 'AND' }));
  if (group === 'rbac_roles') {
    const p = out.permissions as Plain;
    out.permissions = drop(p, PERMISSION_DEFAULTS);
    if (Object.keys(out.permissions as Plain).length === 0) delete out.permissions;
  }
  if (group === 'alerts') {
    out.channels = (r.channels as Plain[]).map((c, i) => (isStoredSecret(c.secret) ? { ...c, secret: ref(`channel_${i + 1}`) } : drop(c, { secret: null })));
  }
  return out;
}

/** `v` without the fields equal to their default. */
function drop(v: Plain, defaults: Plain): Plain {
  return Object.fromEntries(Object.entries(v).filter(([k, x]) => !(k in defaults) || JSON.stringify(x) !== JSON.stringify(defaults[k])));
}
