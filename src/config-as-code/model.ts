// The canonical form both sides of a diff are brought to: the file's resources with every default filled in, and
// the API's views read into the same shape. Secrets the API never returns stand as a marker holding their hash.
import { createHash } from 'node:crypto';
import bcrypt from 'bcrypt';
import { canonicalCondition } from '../shared/match/condition.ts';
import { canonicalRateLimitCondition } from '../shared/rate-limit/conditions.ts';
import { describeCaBundle } from '../shared/x509.ts';
import type { AlertDoc, AuthDoc, EndpointDoc, ProviderDoc, RateLimitDoc, RoleDoc, RoutingRuleDoc } from './document.ts';
import type { JsonRequestBody as Body } from '../shared/api/client.ts';
import type { AlertView, EndpointView, HealthCheckView, MtlsView, ProviderView, RateLimitView, RoleView, RoutingRuleView, SettingsView } from './views.ts';

/** The rule maps of an endpoint, each keyed by the resource's name. */
export const RULE_GROUPS = ['oauth_providers', 'rbac_roles', 'rate_limits', 'routing_rules', 'alerts'] as const;
export type RuleGroup = (typeof RULE_GROUPS)[number];
/** The settings of an endpoint itself, each compared and written as one. */
// The certificate comes last: a new endpoint exists (on its verified domain) before one is assigned to it.
export const SETTING_GROUPS = ['tags', 'origin_url', 'capture', 'ports', 'mtls', 'health_check', 'auth', 'certificate'] as const;
export type SettingGroup = (typeof SETTING_GROUPS)[number];
/** Groups whose resources carry tags, filtered by --select-tag. */
export const TAGGED_GROUPS: readonly RuleGroup[] = ['rate_limits', 'routing_rules', 'alerts'];

export type Plain = Record<string, unknown>;

// ---------------------------------------------------------------------------------------------------------------
// The canonical forms, typed per group. Each is held to the API's request body by the key checks at the end of
// this section: a field the API adds, renames or drops fails the type-check here until the form (and with it the
// file, the plan and the apply) follows.
// ---------------------------------------------------------------------------------------------------------------

type ProviderBody = Body<'/v1/endpoints/{id}/oauth/providers', 'post'>;
type RoleBody = Body<'/v1/endpoints/{id}/rbac/roles', 'post'>;
type RateLimitBody = Body<'/v1/firewall/rate-limits', 'post'>;
type RoutingRuleBody = Body<'/v1/endpoints/{id}/routing-rules', 'post'>;
type AlertBody = Body<'/v1/traffic/alerts', 'post'>;
type HealthCheckBody = Body<'/v1/endpoints/{id}/health-check', 'put'>;

/** A secret field: the file's plain value, or the stored marker (storedSecret) once it matches what is stored. */
export type SecretValue = string | StoredSecret;

/** The create body's fields, every one present; the optional URLs are null when unset. */
type ProviderUrls = 'authorization_url' | 'token_url' | 'userinfo_url';
export type ProviderRule = Required<Omit<ProviderBody, 'name' | ProviderUrls>> & { [U in ProviderUrls]: string | null } & {
  /** Written with …/toggle, not in the body. */
  enabled: boolean;
};
export type Permissions = Required<NonNullable<RoleBody['permissions']>>;
export type RoleRule = { description: string; priority: number; is_default: boolean; permissions: Permissions };
export type RateLimitCondition = { type: string; operator: string; value?: string; logical_operator: string };
export type RateLimitRule = {
  description: string;
  requests_per_window: number;
  window_size_seconds: number;
  action: RateLimitBody['action'];
  status: NonNullable<RateLimitBody['status']>;
  priority: number;
  scope: NonNullable<RateLimitBody['scope']>;
  fail_mode: NonNullable<RateLimitBody['fail_mode']>;
  conditions: RateLimitCondition[];
  tags: string[];
};
export type RoutingCondition = RoutingRuleBody['conditions'][number] & { condition_key: string };
export type RoutingRule = {
  priority: number;
  enabled: boolean;
  target_agent_id: string | null;
  /** Sent as one comma-separated string. */
  target_agent_tags: string[];
  target_origin_url: string | null;
  conditions: RoutingCondition[];
  tags: string[];
};
export type AlertChannel = { type: 'webhook'; url: string; secret: SecretValue | null } | { type: 'email'; to: string };
export type AlertRule = {
  metric: AlertBody['metric'];
  comparison: AlertBody['comparison'];
  threshold: number;
  window_seconds: number;
  channels: AlertChannel[];
  tags: string[];
};

/** Each rule group's canonical form. */
export interface RuleForms {
  oauth_providers: ProviderRule;
  rbac_roles: RoleRule;
  rate_limits: RateLimitRule;
  routing_rules: RoutingRule;
  alerts: AlertRule;
}

/** A basic user: the file's password, or a bcrypt hash (the file's, or the stored one a matching password became). */
export type BasicUser = { username: string; password: SecretValue } | { username: string; password_hash: string | null };

/** An endpoint's auth group in canonical form (desiredAuth, actualAuth). */
export interface AuthState {
  /** none, basic, oauth or oidc; token, header or cookie as read from an endpoint a file cannot describe. */
  mode: string;
  enforce_https: boolean;
  session_ttl_seconds: number | null;
  realm: string | null;
  allowed_redirects: string[];
  scopes: string[];
  enabled_providers: string[];
  basic_users: BasicUser[];
  jwt: { jwks_url: string; issuer: string; audience: string; claim_headers: Record<string, string> } | null;
  webhook: { header: string; algo: 'sha256' | 'sha1'; prefix: string; secret: SecretValue } | null;
}
export type HealthCheck = Required<{ [K in keyof HealthCheckBody]: NonNullable<HealthCheckBody[K]> }>;
export type Mtls = { mode: 'disabled' | 'optional' | 'required'; ca_sha256: string[]; ca_bundle_pem?: string };

/** Each setting group's canonical form. */
export interface SettingForms {
  tags: string[];
  origin_url: string | null;
  capture: { enabled: boolean; level: 'full' | 'metadata' | null };
  ports: { tcp: number | null; udp: number | null };
  mtls: Mtls;
  health_check: HealthCheck;
  auth: AuthState;
  /** The library certificate by name; null: the platform certificate. */
  certificate: string | null;
}

/** An endpoint in canonical form: settings groups, then rule maps; a group the file omits is absent (not managed). */
export type Canonical = Partial<SettingForms> & { [G in RuleGroup]?: Record<string, RuleForms[G]> };

/** Compiles only when A and B have the same keys (the error names the keys that differ). */
type SameKeys<A, B> = [Exclude<keyof A, keyof B>, Exclude<keyof B, keyof A>] extends [never, never] ? true : { only_in_form: Exclude<keyof A, keyof B>; only_in_api: Exclude<keyof B, keyof A> };
/** The form carries every field of the API's create body but its name and endpoint (and what it sends elsewhere). */
export type RuleFormChecks = [
  SameKeys<Omit<ProviderRule, 'enabled'>, Omit<ProviderBody, 'name'>>,
  SameKeys<RoleRule, Omit<RoleBody, 'name'>>,
  SameKeys<RateLimitRule, Omit<RateLimitBody, 'name' | 'endpoint_id' | 'source_ip'>>,
  SameKeys<RoutingRule, Omit<RoutingRuleBody, 'name'>>,
  SameKeys<AlertRule, Omit<AlertBody, 'name' | 'endpoint_id'>>,
  SameKeys<HealthCheck, HealthCheckBody>,
];
type AllTrue<T extends readonly true[]> = T;
export type RuleFormsConform = AllTrue<RuleFormChecks>;

/** A secret as read from the API: its stored hash or fingerprint (null: none known). Compared, never shown. */
const SECRET_MARK = '\u0000stored:';
/** A stored secret's marker: a string the file never holds, so a plain secret narrows to `string` beside it. */
export type StoredSecret = string & { readonly stored: unique symbol };
export const storedSecret = (hash: string | null | undefined) => (SECRET_MARK + (hash ?? '')) as StoredSecret;
export const isStoredSecret = (v: unknown): v is StoredSecret => typeof v === 'string' && v.startsWith(SECRET_MARK);
const storedHash = (v: string) => v.slice(SECRET_MARK.length) || null;
export const SECRET_FIELDS = new Set(['password', 'secret', 'client_secret']);

export const sha256hex = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

/** JSON with object keys sorted: equal canonical values print the same. */
export function stable(value: unknown): string {
  return JSON.stringify(value, (k, v) =>
    // The PEM itself is never read back: its fingerprints stand for it (ca_sha256).
    k === 'ca_bundle_pem' ? undefined : v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, (v as Plain)[k]])) : v,
  );
}
export const same = (a: unknown, b: unknown) => stable(a) === stable(b);

const sortedUnique = (xs: readonly string[] | undefined) => [...new Set(xs ?? [])].sort();
const lowerValues = (o: Record<string, string> | undefined) => Object.fromEntries(Object.entries(o ?? {}).map(([k, v]) => [k, v.toLowerCase()]));
const lowerKeys = (o: Record<string, string> | undefined) => Object.fromEntries(Object.entries(o ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
/** The API stores windows in whole minutes (rounded up). */
const minutes = (s: number) => Math.ceil(s / 60) * 60;

/**
 * A file's enum field: the file's schema takes its enums from control's schemas (document.ts), where they are strings
 * with an `enum`, so the loader has already refused any other value; this names the API's literal union for it.
 */
type Enum<T extends string> = T;

// ---------------------------------------------------------------------------------------------------------------
// The file's side
// ---------------------------------------------------------------------------------------------------------------

export function desiredEndpoint(e: EndpointDoc): Canonical {
  const out: Canonical = {};
  if (e.tags !== undefined) out.tags = sortedUnique(e.tags);
  if (e.origin_url !== undefined) out.origin_url = e.origin_url;
  if (e.capture) out.capture = { enabled: e.capture.enabled, level: e.capture.level ?? null };
  if (e.ports) out.ports = { tcp: e.ports.tcp ?? null, udp: e.ports.udp ?? null };
  if (e.mtls) {
    const pem = e.mtls.ca_bundle_pem;
    const ca = e.mtls.mode === 'disabled' ? [] : pem ? describeCaBundle(pem).map((c) => c.fingerprint_sha256) : (e.mtls.ca_sha256 ?? []);
    out.mtls = { mode: e.mtls.mode, ca_sha256: sortedUnique(ca), ...(pem && e.mtls.mode !== 'disabled' ? { ca_bundle_pem: pem } : {}) };
  }
  if (e.health_check) out.health_check = { enabled: e.health_check.enabled, path: e.health_check.path ?? '/', interval_seconds: e.health_check.interval_seconds ?? 60 };
  if (e.auth) out.auth = desiredAuth(e.auth, e.oauth_providers);
  // By the library certificate's name; null: the platform certificate.
  if (e.certificate !== undefined) out.certificate = e.certificate;
  const map = <T, F>(m: Record<string, T> | undefined, f: (v: T) => F) => (m === undefined ? undefined : Object.fromEntries(Object.entries(m).map(([k, v]) => [k, f(v)])));
  const groups: Canonical = {
    oauth_providers: map(e.oauth_providers, desiredProvider),
    rbac_roles: map(e.rbac_roles, desiredRole),
    rate_limits: map(e.rate_limits, desiredRateLimit),
    routing_rules: map(e.routing_rules, desiredRoutingRule),
    alerts: map(e.alerts, desiredAlert),
  };
  for (const g of RULE_GROUPS) if (groups[g] === undefined) delete groups[g];
  return { ...out, ...groups };
}

function desiredAuth(a: AuthDoc, providers: Record<string, ProviderDoc> | undefined): AuthState {
  const sso = a.mode === 'oauth' || a.mode === 'oidc';
  // As the API reads it: a list naming every provider that could be offered is the same as no list.
  const offerable = Object.entries(providers ?? {})
    .filter(([, p]) => (p.enabled ?? true) && (a.mode !== 'oidc' || p.kind === 'oidc'))
    .map(([n]) => n);
  const listed = sortedUnique(a.enabled_providers);
  const everyOne = providers !== undefined && same(listed, offerable.sort());
  return {
    mode: a.mode,
    enforce_https: a.enforce_https ?? false,
    session_ttl_seconds: a.session_ttl_seconds ?? null,
    realm: a.mode === 'basic' ? (a.realm ?? null) : null,
    allowed_redirects: sso ? (a.allowed_redirects ?? []) : [],
    scopes: sso ? (a.scopes ?? []) : [],
    enabled_providers: sso && !everyOne ? listed : [],
    basic_users: [...(a.basic_users ?? [])]
      .sort((x, y) => x.username.localeCompare(y.username))
      // The loader checked that each has exactly one of the two.
      .map((u): BasicUser => (u.password !== undefined ? { username: u.username, password: u.password } : { username: u.username, password_hash: u.password_hash ?? null })),
    jwt: a.jwt ? { jwks_url: a.jwt.jwks_url ?? '', issuer: a.jwt.issuer ?? '', audience: a.jwt.audience ?? '', claim_headers: lowerValues(a.jwt.claim_headers) } : null,
    // Header names are stored lower-case.
    webhook: a.webhook ? { header: (a.webhook.header ?? '').toLowerCase(), algo: (a.webhook.algo ?? 'sha256') as Enum<'sha256' | 'sha1'>, prefix: a.webhook.prefix ?? '', secret: a.webhook.secret } : null,
  };
}

/**
 * What the API stores for a field a body omits (its full-write PUTs and creates alike): a file's rule takes these
 * for what it leaves out, and export leaves out what equals them.
 */
export const RULE_DEFAULTS = {
  oauth_providers: { scopes: [], allowed_emails: [], allowed_domains: [], authorization_url: null, token_url: null, userinfo_url: null, enabled: true },
  rbac_roles: { description: '', priority: 0, is_default: false },
  rate_limits: { description: '', status: 'active', priority: 0, scope: 'edge', fail_mode: 'open', conditions: [], tags: [] },
  routing_rules: { priority: 0, enabled: true, target_agent_id: null, target_agent_tags: [], target_origin_url: null, tags: [] },
  alerts: { window_seconds: 300, tags: [] },
} satisfies { [G in RuleGroup]: Partial<RuleForms[G]> };
export const PERMISSION_DEFAULTS: Permissions = { allowed_methods: [], denied_methods: [], allowed_paths: [], denied_paths: [], rate_limit_rps: 0, headers: {}, metadata: {} };

export const desiredProvider = (p: ProviderDoc): ProviderRule => ({ ...RULE_DEFAULTS.oauth_providers, ...p, kind: p.kind as Enum<ProviderRule['kind']> });

export const desiredRole = (r: RoleDoc): RoleRule => ({
  ...RULE_DEFAULTS.rbac_roles,
  ...r,
  permissions: { ...PERMISSION_DEFAULTS, ...(r.permissions ?? {}), headers: lowerKeys(r.permissions?.headers) },
});

export const desiredRateLimit = (r: RateLimitDoc): RateLimitRule => ({
  ...RULE_DEFAULTS.rate_limits,
  ...r,
  conditions: (r.conditions ?? []).map((c) => ({
    ...canonicalRateLimitCondition(String(c.type), String(c.operator), c.value === undefined || c.value === null ? undefined : String(c.value)),
    logical_operator: String(c.logical_operator ?? 'AND').toUpperCase(),
  })),
  tags: sortedUnique(r.tags),
});

export const desiredRoutingRule = (r: RoutingRuleDoc): RoutingRule => ({
  ...RULE_DEFAULTS.routing_rules,
  ...r,
  target_agent_id: r.target_agent_id || null,
  target_agent_tags: sortedUnique((r.target_agent_tags ?? []).map((t) => t.toLowerCase())),
  target_origin_url: r.target_origin_url || null,
  conditions: r.conditions.map((c) => {
    const k = canonicalCondition(c.condition_type, c.condition_key ?? '', c.pattern);
    return { condition_type: k.condition_type, condition_key: k.condition_key, pattern: k.pattern };
  }),
  tags: sortedUnique(r.tags),
});

export const desiredAlert = (r: AlertDoc): AlertRule => ({
  metric: r.metric as Enum<AlertRule['metric']>,
  comparison: r.comparison as Enum<AlertRule['comparison']>,
  threshold: r.threshold,
  window_seconds: minutes(r.window_seconds ?? 300),
  channels: r.channels.map((c): AlertChannel => (c.type === 'webhook' ? { type: 'webhook', url: c.url ?? '', secret: c.secret ?? null } : { type: 'email', to: c.to ?? '' })),
  tags: sortedUnique(r.tags),
});

// ---------------------------------------------------------------------------------------------------------------
// The API's side (views as the /v1 API answers them)
// ---------------------------------------------------------------------------------------------------------------

export function actualSettings(view: EndpointView): Pick<SettingForms, 'tags' | 'origin_url' | 'capture' | 'ports'> {
  return {
    tags: sortedUnique(view.tags ?? []),
    origin_url: view.origin_url ?? null,
    capture: { enabled: view.capture_enabled, level: view.capture_level === 'off' || !view.capture_level ? null : view.capture_level },
    ports: { tcp: view.dedicated_tcp_port ?? null, udp: view.dedicated_udp_port ?? null },
  };
}

export const actualMtls = (v: MtlsView): Mtls => ({ mode: v.mode, ca_sha256: sortedUnique((v.ca_certificates ?? []).map((c) => c.fingerprint_sha256)) });

export const actualHealth = (v: HealthCheckView): HealthCheck => ({ enabled: v.enabled, path: v.path, interval_seconds: v.interval_seconds });

/**
 * The settings view in the file's terms. `token` (and its header / cookie forms) cannot be written by a file: the
 * mode is kept as the API names it, so a file's mode always differs from it and export leaves the group out.
 */
export function actualAuth(v: SettingsView, providers: Record<string, ProviderRule>, providerIds: Map<number, string>): AuthState {
  const config = v.config ?? {};
  let mode: string = v.mode === 'jwt' ? 'none' : v.mode;
  const enabledMap: Record<string, boolean> = v.enabled_auth_methods ?? {};
  if (mode === 'sso') {
    // Both oauth and oidc read as sso; oidc offers only providers of kind oidc, so an enabled oauth2 provider left
    // out of an oidc endpoint tells them apart (and when every provider is oidc the two behave the same).
    const hidden = Object.entries(enabledMap).some(([id, on]) => !on && providers[providerIds.get(Number(id)) ?? '']?.kind === 'oauth2' && providers[providerIds.get(Number(id)) ?? '']?.enabled);
    mode = hidden ? 'oidc' : 'oauth';
  }
  const sso = mode === 'oauth' || mode === 'oidc';
  const offered = Object.entries(enabledMap)
    .filter(([, on]) => on)
    .map(([id]) => providerIds.get(Number(id)))
    .filter((n): n is string => n !== undefined);
  const enabledNames = Object.entries(providers)
    .filter(([, p]) => p.enabled && (mode !== 'oidc' || p.kind === 'oidc'))
    .map(([n]) => n);
  // A list naming every provider that could be offered reads the same as an empty one.
  const everyOne = offered.length === enabledNames.length;
  const jwks = config.jwks_url;
  let claims: Record<string, string> = {};
  try {
    claims = config.claim_headers ? JSON.parse(config.claim_headers) : {};
  } catch {
    /* an unreadable stored value compares unequal to any file */
  }
  const webhook = config.webhook;
  return {
    mode,
    enforce_https: v.enforce_https ?? false,
    session_ttl_seconds: v.session_ttl_seconds ?? null,
    realm: mode === 'basic' ? (config.realm ?? null) : null,
    allowed_redirects: sso ? (config.allowed_redirects ?? []) : [],
    scopes: sso ? (config.scopes ?? []) : [],
    enabled_providers: sso && !everyOne ? sortedUnique(offered) : [],
    basic_users: mode === 'basic' ? [...(v.basic_users ?? [])].sort((x, y) => x.username.localeCompare(y.username)).map((u) => ({ username: u.username, password_hash: u.password_hash ?? null })) : [],
    jwt: jwks !== undefined ? { jwks_url: jwks, issuer: config.issuer ?? '', audience: config.audience ?? '', claim_headers: claims } : null,
    webhook: webhook ? { header: webhook.header, algo: webhook.algo, prefix: webhook.prefix ?? '', secret: storedSecret(webhook.secret_fingerprint) } : null,
  };
}

export const actualProvider = (p: ProviderView): ProviderRule => ({
  kind: p.kind,
  issuer: p.issuer,
  client_id: p.client_id,
  client_secret: storedSecret(p.client_secret_fingerprint),
  scopes: p.scopes ?? [],
  allowed_emails: p.allowed_emails ?? [],
  allowed_domains: p.allowed_domains ?? [],
  authorization_url: p.authorization_url ?? null,
  token_url: p.token_url ?? null,
  userinfo_url: p.userinfo_url ?? null,
  enabled: p.enabled,
});

export const actualRole = (r: RoleView): RoleRule => ({
  description: r.description ?? '',
  priority: r.priority,
  is_default: r.is_default,
  permissions: { ...PERMISSION_DEFAULTS, ...r.permissions },
});

export const actualRateLimit = (r: RateLimitView): RateLimitRule => ({
  description: r.description ?? '',
  requests_per_window: r.requests_per_window,
  window_size_seconds: r.window_size_seconds,
  action: r.action,
  status: r.status,
  priority: r.priority,
  scope: r.scope,
  fail_mode: r.fail_mode,
  conditions: (r.conditions ?? []).map((c) => ({ type: c.condition_type, operator: c.operator, value: c.condition_value, logical_operator: c.logical_operator })),
  tags: sortedUnique(r.tags ?? []),
});

export const actualRoutingRule = (r: RoutingRuleView): RoutingRule => ({
  priority: r.priority,
  enabled: r.enabled,
  target_agent_id: r.target_agent_id || null,
  target_agent_tags: sortedUnique(String(r.target_agent_tags ?? '').split(',').filter(Boolean)),
  target_origin_url: r.target_origin_url || null,
  conditions: (r.conditions ?? []).map((c) => ({ condition_type: c.condition_type, condition_key: c.condition_key, pattern: c.pattern })),
  tags: sortedUnique(r.tags ?? []),
});

export const actualAlert = (r: AlertView): AlertRule => ({
  metric: r.metric,
  comparison: r.comparison,
  threshold: r.threshold,
  window_seconds: r.window_seconds,
  channels: (r.channels ?? []).map((c): AlertChannel =>
    c.type === 'webhook' ? { type: 'webhook', url: c.url ?? '', secret: c.has_secret ? storedSecret(c.secret_fingerprint) : null } : { type: 'email', to: c.to ?? '' },
  ),
  tags: sortedUnique(r.tags ?? []),
});

// ---------------------------------------------------------------------------------------------------------------
// Secrets: a file's secret equal to the stored one takes the stored marker, so equal values compare equal
// ---------------------------------------------------------------------------------------------------------------

/**
 * Walks `desired` beside `actual` and replaces each plain secret that matches the stored one (bcrypt of the
 * password for basic users; the fingerprint, bcrypt of its SHA-256, for the others) with the stored marker.
 */
export async function settleSecrets(desired: unknown, actual: unknown): Promise<void> {
  if (Array.isArray(desired) && Array.isArray(actual)) {
    await Promise.all(desired.map((d, i) => settleSecrets(d, actual[i])));
    return;
  }
  if (!desired || typeof desired !== 'object' || !actual || typeof actual !== 'object') return;
  const d = desired as Plain;
  const a = actual as Plain;
  // A basic user: the API shows the bcrypt hash itself.
  if (typeof d.password === 'string' && typeof a.password_hash === 'string' && d.username === a.username) {
    // $2y$ is $2b$ under another name, which node's bcrypt does not take.
    if (await bcrypt.compare(d.password, a.password_hash.replace(/^\$2y\$/, '$2b$'))) {
      delete d.password;
      d.password_hash = a.password_hash;
    }
    return;
  }
  await Promise.all(
    Object.keys(d).map(async (k) => {
      const dv = d[k];
      const av = a[k];
      if (SECRET_FIELDS.has(k) && typeof dv === 'string' && !isStoredSecret(dv) && isStoredSecret(av)) {
        const hash = storedHash(av);
        if (hash !== null && (await bcrypt.compare(sha256hex(dv), hash))) d[k] = av;
        return;
      }
      await settleSecrets(dv, av);
    }),
  );
}

/** A value as the plan prints it (`field` its name): secrets never shown. */
export function display(value: unknown, field = ''): string {
  if (value === undefined) return '(none)';
  if (typeof value === 'string' && isStoredSecret(value)) return '(secret)';
  if (typeof value === 'string' && SECRET_FIELDS.has(field.split('.').pop()!)) return '(changed)';
  return JSON.stringify(value, (k, v) => {
    if (SECRET_FIELDS.has(k) && typeof v === 'string') return isStoredSecret(v) ? '(secret)' : '(changed)';
    if (k === 'password_hash' && typeof v === 'string') return '(bcrypt hash)';
    if (k === 'ca_bundle_pem') return undefined;
    return v;
  });
}
