// Publishes an endpoint's data-plane view to the change feed: everything an edge needs to serve it, nothing else.
// Every write that changes what an edge must do calls this inside its transaction (or publishes a deletion).
import type { Queryable } from './db.ts';
import { recordChange } from './feed.ts';
import { offersProvider, requestedScopes, type OAuthProviderRow } from './oauth-providers.ts';
import {
  TOPICS,
  type BasicUserConfig,
  type EndpointConfig,
  type OAuthProviderConfig,
  type RoutingRuleConfig,
  type VisitorAuthMode,
  type VisitorTokenConfig,
} from '../shared/snapshot.ts';
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
      basic_users: parsed(r.basic_users),
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

export async function publishEndpoint(tx: Queryable, endpointId: number): Promise<void> {
  const { rows } = await tx.query<Omit<EndpointConfig, 'paused' | 'routing_rules'> & { paused_at: Date | null }>(
    `SELECT id, uuid::text AS uuid, user_id, account_id, hostname, status, ephemeral, dedicated_tcp_port, dedicated_udp_port,
            certificate_id, mtls_mode, mtls_ca_pem, capture_enabled, capture_level, enforce_https, origin_url, paused_at
     FROM endpoints WHERE id = $1`,
    [endpointId],
  );
  const row = rows[0];
  if (!row) return;
  const { paused_at, ...record } = row;
  const config: EndpointConfig = {
    ...record,
    paused: paused_at !== null,
    routing_rules: await loadRoutingRules(tx, endpointId),
    ...(await loadVisitorAuth(tx, endpointId, row.hostname)),
  };
  await recordChange(tx, ENDPOINT_TOPIC, row.uuid, config);
}

export async function publishEndpointDeleted(tx: Queryable, uuid: string): Promise<void> {
  await recordChange(tx, ENDPOINT_TOPIC, uuid, null);
}
