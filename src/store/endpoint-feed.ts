// An endpoint's data-plane view as the change feed carries it: everything an edge needs to serve it, nothing else.
// Read-only: writes touch the endpoint (feed-changes.ts) and the view is built here once, just before commit.
import type { Queryable } from './db.ts';
import { offersProvider, requestedScopes } from './oauth-offers.ts';
import type { OAuthProviderRow } from './oauth-providers.ts';
import {
  TOPICS,
  type BasicUserConfig,
  type EndpointConfig,
  type OAuthProviderConfig,
  type RateLimitConditionConfig,
  type RateLimitRuleConfig,
  type RbacClientConfig,
  type RbacConfig,
  type RbacInviteConfig,
  type RbacRoleConfig,
  type RoutingRuleConfig,
  type VisitorAuthConfig,
  type VisitorAuthMode,
  type VisitorTokenConfig,
} from '../shared/snapshot.ts';
import { edgePermissions, fillRbacPermissions } from '../shared/rbac-permissions.ts';
import { tokenSourceOf } from '../shared/visitor-credentials.ts';

export const ENDPOINT_TOPIC = TOPICS.endpoint;

/**
 * The routing rules an edge evaluates for one endpoint, enabled and disabled, in evaluation order (ascending
 * priority, then id; docs/routing-rules.md). Conditions come in their stored position order.
 */
export async function loadRoutingRules(tx: Queryable, endpointId: number): Promise<RoutingRuleConfig[]> {
  const { rows } = await tx.query<Omit<RoutingRuleConfig, 'conditions'> & { conditions: RoutingRuleConfig['conditions'] | string }>(
    `SELECT r.id, r.name, r.priority, r.enabled, r.target_agent_id, r.target_agent_tags, r.target_origin_url,
            COALESCE((SELECT json_agg(json_build_object('condition_type', c.condition_type, 'condition_key', c.condition_key, 'pattern', c.pattern)
                                      ORDER BY c.position)
                      FROM routing_rule_conditions c WHERE c.rule_id = r.id), '[]'::json) AS conditions
     FROM routing_rules r WHERE r.endpoint_id = $1 ORDER BY r.priority, r.id`,
    [endpointId],
  );
  return rows.map((r) => ({ ...r, conditions: typeof r.conditions === 'string' ? JSON.parse(r.conditions) : r.conditions }));
}

interface AuthSnapshotRow {
  mode: VisitorAuthMode;
  mode_config: Record<string, Record<string, unknown>> | string;
  session_ttl_seconds: number | null;
  enabled_auth_methods: string[];
  credentials_version: number;
  jwt_enabled: boolean | null;
  jwks_url: string | null;
  issuer: string | null;
  audience: string | null;
  claim_headers: Record<string, string> | string | null;
  webhook_enabled: boolean | null;
  webhook_header: string | null;
  webhook_algo: 'sha256' | 'sha1' | null;
  webhook_secret_sealed: string | null;
  webhook_prefix: string | null;
  basic_users: BasicUserConfig[] | string;
  tokens: VisitorTokenConfig[] | string;
}

const parsed = <T>(value: T | string): T => (typeof value === 'string' ? (JSON.parse(value) as T) : value);

/**
 * A stored bcrypt hash as node's bcrypt checks it. $2y$ (PHP's crypt_blowfish) computes exactly what $2b$ does, but
 * node's bcrypt refuses the prefix; the hash is stored as the API was given it (so an export reads back what was
 * imported) and renamed wherever it is checked: the edges' snapshot and the API's unchanged-password test.
 */
export function nodeBcryptHash(hash: string): string {
  return hash.startsWith('$2y$') ? `$2b$${hash.slice(4)}` : hash;
}

/**
 * Visitor authentication as edges see it (src/shared/snapshot.ts): only the credentials the mode uses, tokens only
 * while live (revoked and expired ones are left out), secrets only as bcrypt hashes, keyed digests or sealed. Nothing
 * when the endpoint's auth settings were never written: edges read the absence as mode none.
 */
export async function loadVisitorAuth(tx: Queryable, endpointId: number, hostname: string): Promise<Pick<EndpointConfig, 'auth' | 'jwt' | 'webhook'>> {
  const { rows } = await tx.query<AuthSnapshotRow>(
    `SELECT s.mode, s.mode_config, s.session_ttl_seconds, s.enabled_auth_methods, s.credentials_version,
            j.enabled AS jwt_enabled, j.jwks_url, j.issuer, j.audience, j.claim_headers,
            w.enabled AS webhook_enabled, w.header AS webhook_header, w.algo AS webhook_algo, w.secret_sealed AS webhook_secret_sealed, w.prefix AS webhook_prefix,
            CASE WHEN s.mode = 'basic' THEN COALESCE((
              SELECT json_agg(json_build_object('id', u.id::text, 'username', u.username, 'password_hash', u.password_hash) ORDER BY u.id)
              FROM endpoint_basic_users u WHERE u.endpoint_id = s.endpoint_id), '[]'::json) ELSE '[]'::json END AS basic_users,
            CASE WHEN s.mode = 'token' THEN COALESCE((
              SELECT json_agg(json_build_object('id', t.id::text, 'label', t.label, 'digest', t.digest,
                                                'expires_at', to_char(t.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) ORDER BY t.id)
              FROM endpoint_visitor_tokens t
              WHERE t.endpoint_id = s.endpoint_id AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())), '[]'::json) ELSE '[]'::json END AS tokens
     FROM endpoint_auth_settings s
     LEFT JOIN endpoint_jwt_settings j ON j.endpoint_id = s.endpoint_id
     LEFT JOIN endpoint_webhook_verification w ON w.endpoint_id = s.endpoint_id
     WHERE s.endpoint_id = $1`,
    [endpointId],
  );
  const r = rows[0];
  if (!r) return {};
  const modeConfig = parsed(r.mode_config);
  const basic = modeConfig.basic ?? {};
  return {
    auth: {
      mode: r.mode,
      realm: typeof basic.realm === 'string' && basic.realm !== '' ? basic.realm : hostname,
      token_source: tokenSourceOf(modeConfig.token),
      basic_users: parsed(r.basic_users).map((u) => ({ ...u, password_hash: nodeBcryptHash(u.password_hash) })),
      tokens: parsed(r.tokens),
      session_ttl_seconds: r.session_ttl_seconds,
      credentials_version: r.credentials_version,
      ...(r.mode === 'oauth' || r.mode === 'oidc' ? await loadOAuthLogin(tx, endpointId, r.mode, r.enabled_auth_methods, modeConfig[r.mode] ?? {}) : {}),
    },
    jwt: r.jwt_enabled
      ? { jwks_url: r.jwks_url!, issuer: r.issuer || null, audience: r.audience || null, claim_headers: parsed(r.claim_headers ?? {}) }
      : null,
    webhook: r.webhook_enabled
      ? { header: r.webhook_header!, algo: r.webhook_algo!, secret_sealed: r.webhook_secret_sealed!, prefix: r.webhook_prefix ?? '' }
      : null,
  };
}

/**
 * Modes oauth/oidc: the providers visitors may log in with now (offersProvider), in id order, each with the scopes to
 * ask for and its secret still sealed, and the extra return_to targets. An empty list is sent as such: the edge then
 * refuses every visitor rather than letting anyone through.
 */
async function loadOAuthLogin(
  tx: Queryable,
  endpointId: number,
  mode: 'oauth' | 'oidc',
  listed: readonly string[],
  config: Record<string, unknown>,
): Promise<{ providers: OAuthProviderConfig[]; allowed_redirects: string[] }> {
  const { rows } = await tx.query<Pick<OAuthProviderRow, 'id' | 'kind' | 'enabled' | 'scopes'> & Omit<OAuthProviderConfig, 'scopes'>>(
    `SELECT id, kind, enabled, name, issuer, client_id, client_secret_sealed, scopes, allowed_emails, allowed_domains, authorization_url, token_url, userinfo_url
     FROM endpoint_oauth_providers WHERE endpoint_id = $1 ORDER BY id`,
    [endpointId],
  );
  const override = Array.isArray(config.scopes) ? (config.scopes as string[]) : undefined;
  const providers = rows
    .filter((p) => offersProvider(mode, listed, p))
    .map((p) => ({
      id: p.id,
      kind: p.kind,
      name: p.name,
      issuer: p.issuer,
      client_id: p.client_id,
      client_secret_sealed: p.client_secret_sealed,
      scopes: requestedScopes(p, override),
      allowed_emails: p.allowed_emails,
      allowed_domains: p.allowed_domains,
      authorization_url: p.authorization_url,
      token_url: p.token_url,
      userinfo_url: p.userinfo_url,
    }));
  return { providers, allowed_redirects: Array.isArray(config.allowed_redirects) ? (config.allowed_redirects as string[]) : [] };
}

/** A client as loaded for the snapshot: the edge's view plus the credentials that go into `auth`. */
interface RbacClientSnapshotRow extends RbacClientConfig {
  username: string | null;
  password_hash: string | null;
  token_digest: string | null;
}

interface RbacSnapshotRow {
  roles: RbacRoleConfig[] | string;
  clients: RbacClientSnapshotRow[] | string;
  invites: RbacInviteConfig[] | string;
  has_settings: boolean;
  self_registration_enabled: boolean | null;
  self_registration_domains: string[] | null;
}

/**
 * Unredeemed invites that expired within this many days stay in the snapshot, so the edge (which judges expiry by its
 * own clock) answers a link that just expired "invite expired" (410) rather than "not valid" (404). At most
 * MAX_EXPIRED_INVITES of them, the most recently expired: pending ones are bounded by the client limit already.
 */
export const EXPIRED_INVITES_DAYS = 7;
export const MAX_EXPIRED_INVITES = 1000;

/** RFC 3339 in UTC with milliseconds, as the other snapshot instants (tokens' expires_at). */
const SQL_INSTANT = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * Per-endpoint RBAC as edges see it (docs/rbac.md "The snapshot"), in one query whatever the number of clients:
 * roles by decision order (priority descending, then id) without the API-only metadata; every client with its
 * identities and role ids, and its credentials for mergeRbacCredentials; unredeemed invites, pending or expired within
 * EXPIRED_INVITES_DAYS (bounded); self-registration from its settings row (off without one). Null when the endpoint has no roles, no
 * clients and no settings row: nothing about RBAC was ever written.
 */
export async function loadRbac(tx: Queryable, endpointId: number): Promise<{ rbac: RbacConfig; clients: RbacClientSnapshotRow[] } | null> {
  const { rows } = await tx.query<RbacSnapshotRow>(
    `SELECT
       COALESCE((SELECT json_agg(json_build_object('id', r.id, 'name', r.name, 'priority', r.priority, 'permissions', r.permissions - 'metadata')
                                 ORDER BY r.priority DESC, r.id)
                 FROM rbac_roles r WHERE r.endpoint_id = $1), '[]'::json) AS roles,
       COALESCE((SELECT json_agg(json_build_object(
                   'id', c.id, 'identifier', c.identifier, 'status', c.status, 'email', c.email,
                   'identities', COALESCE((SELECT json_agg(json_build_object('provider', i.provider, 'subject', i.subject) ORDER BY i.provider, i.subject)
                                           FROM rbac_client_identities i WHERE i.client_id = c.id), '[]'::json),
                   'role_ids', COALESCE((SELECT json_agg(m.role_id ORDER BY m.role_id) FROM rbac_memberships m WHERE m.client_id = c.id), '[]'::json),
                   'username', c.username, 'password_hash', c.password_hash, 'token_digest', c.token_digest) ORDER BY c.id)
                 FROM rbac_clients c WHERE c.endpoint_id = $1), '[]'::json) AS clients,
       COALESCE((SELECT json_agg(json_build_object('client_id', v.client_id, 'digest', v.token_digest, 'expires_at', ${SQL_INSTANT('v.expires_at')}) ORDER BY v.id)
                 FROM (SELECT * FROM rbac_invites WHERE endpoint_id = $1 AND redeemed_at IS NULL AND expires_at > now()
                       UNION ALL
                       (SELECT * FROM rbac_invites WHERE endpoint_id = $1 AND redeemed_at IS NULL AND expires_at <= now()
                          AND expires_at > now() - make_interval(days => ${EXPIRED_INVITES_DAYS})
                        ORDER BY expires_at DESC LIMIT ${MAX_EXPIRED_INVITES})) AS v), '[]'::json) AS invites,
       s.endpoint_id IS NOT NULL AS has_settings, s.self_registration_enabled, s.self_registration_domains
     FROM (SELECT 1) AS one LEFT JOIN endpoint_rbac_settings s ON s.endpoint_id = $1`,
    [endpointId],
  );
  const r = rows[0];
  const roles = parsed(r.roles);
  const clients = parsed(r.clients);
  if (roles.length === 0 && clients.length === 0 && !r.has_settings) return null;
  return {
    rbac: {
      roles: roles.map((role) => ({ ...role, permissions: edgePermissions(fillRbacPermissions(parsed(role.permissions))) })),
      clients: clients.map(({ id, identifier, status, email, identities, role_ids }) => ({ id, identifier, status, email, identities, role_ids })),
      invites: parsed(r.invites),
      self_registration: { enabled: r.self_registration_enabled ?? false, allowed_email_domains: r.self_registration_domains ?? [] },
    },
    clients,
  };
}

/**
 * RBAC clients' credentials join the auth stage's lists, so it checks them like any other (docs/rbac.md): mode basic
 * takes every client with a username but `invited` ones, which have not registered; mode token every client with a
 * token. Ids are `rbac-client:<id>` (the heartbeat's credential_use names them), `client_id` ties the credential to the
 * client. Statuses other than active are still sent: the rbac stage answers them 403, not 401. A username or digest
 * the settings' own users or tokens already hold stays theirs: the snapshot never has two entries for one credential.
 */
export function mergeRbacCredentials(auth: VisitorAuthConfig, clients: readonly RbacClientSnapshotRow[]): VisitorAuthConfig {
  if (auth.mode === 'basic') {
    const taken = new Set(auth.basic_users.map((u) => u.username));
    const users: BasicUserConfig[] = clients
      .filter((c) => c.username !== null && c.password_hash !== null && c.status !== 'invited' && !taken.has(c.username))
      .map((c) => ({ id: `rbac-client:${c.id}`, client_id: c.id, username: c.username!, password_hash: c.password_hash! }));
    return users.length === 0 ? auth : { ...auth, basic_users: [...auth.basic_users, ...users] };
  }
  if (auth.mode === 'token') {
    const taken = new Set(auth.tokens.map((t) => t.digest));
    const tokens: VisitorTokenConfig[] = clients
      .filter((c) => c.token_digest !== null && !taken.has(c.token_digest))
      .map((c) => ({ id: `rbac-client:${c.id}`, client_id: c.id, label: c.identifier, digest: c.token_digest!, expires_at: null }));
    return tokens.length === 0 ? auth : { ...auth, tokens: [...auth.tokens, ...tokens] };
  }
  return auth;
}

/**
 * The snapshot's `rate_limits` (src/shared/snapshot.ts): the endpoint's ACTIVE rules in evaluation order (ascending
 * priority, then id), conditions in position order, as stored (canonical; the edge compiles them as they are).
 */
export async function loadRateLimitRules(tx: Queryable, endpointId: number): Promise<RateLimitRuleConfig[]> {
  const { rows } = await tx.query<Omit<RateLimitRuleConfig, 'conditions'> & { conditions: RateLimitConditionConfig[] | string }>(
    `SELECT r.uuid::text AS uuid, r.id, r.name, r.requests_per_window, r.window_size_seconds, r.action, r.priority, r.scope, r.fail_mode,
            COALESCE((SELECT json_agg(json_build_object('uuid', c.uuid::text, 'type', c.condition_type, 'operator', c.operator,
                                                        'value', c.condition_value, 'logical_operator', c.logical_operator) ORDER BY c.position)
                      FROM rate_limit_conditions c WHERE c.rule_id = r.id), '[]'::json) AS conditions
     FROM rate_limit_rules r WHERE r.endpoint_id = $1 AND r.status = 'active' ORDER BY r.priority, r.id`,
    [endpointId],
  );
  return rows.map((r) => ({ ...r, conditions: typeof r.conditions === 'string' ? (JSON.parse(r.conditions) as RateLimitConditionConfig[]) : r.conditions }));
}

/** The endpoint's feed entry (key: its uuid) as it stands in `tx`, or null when the row is gone. */
export async function endpointRecord(tx: Queryable, endpointId: number): Promise<{ uuid: string; config: EndpointConfig } | null> {
  const { rows } = await tx.query<
    Omit<EndpointConfig, 'paused' | 'routing_rules' | 'dedicated_ip'> & { paused_at: Date | null; ip_address: string | null; ip_family: 4 | 6 | null; ip_region: string | null }
  >(
    `SELECT e.id, e.uuid::text AS uuid, e.user_id, e.account_id, e.hostname, e.status, e.ephemeral, e.dedicated_tcp_port, e.dedicated_udp_port,
            e.certificate_id, e.mtls_mode, e.mtls_ca_pem, e.capture_enabled, e.capture_level, e.enforce_https, e.origin_url, e.paused_at,
            e.dedicated_ip_group_id, i.address AS ip_address, i.family AS ip_family, i.region AS ip_region
     FROM endpoints e LEFT JOIN dedicated_ips i ON i.id = e.dedicated_ip_id WHERE e.id = $1`,
    [endpointId],
  );
  const row = rows[0];
  if (!row) return null;
  const { paused_at, ip_address, ip_family, ip_region, dedicated_ip_group_id, ...record } = row;
  const visitorAuth = await loadVisitorAuth(tx, endpointId, row.hostname);
  const rbac = await loadRbac(tx, endpointId);
  if (rbac && visitorAuth.auth) visitorAuth.auth = mergeRbacCredentials(visitorAuth.auth, rbac.clients);
  const config: EndpointConfig = {
    ...record,
    paused: paused_at !== null,
    routing_rules: await loadRoutingRules(tx, endpointId),
    ...visitorAuth,
    rbac: rbac?.rbac ?? null,
  };
  // Absent when no rule is active, so the edge compiles no rate-limit stage (and snapshots without rules are unchanged).
  const rateLimits = await loadRateLimitRules(tx, endpointId);
  if (rateLimits.length > 0) config.rate_limits = rateLimits;
  // Absent when nothing dedicated serves the endpoint, so records (and snapshots) of other endpoints are unchanged.
  if (ip_address !== null && ip_family !== null && ip_region !== null) config.dedicated_ip = { address: ip_address, family: ip_family, region: ip_region };
  if (dedicated_ip_group_id !== null && dedicated_ip_group_id !== undefined) config.dedicated_ip_group_id = dedicated_ip_group_id;
  return { uuid: row.uuid, config };
}
