// One endpoint's config as a snapshot carries it, with every field at its plain default, for tests and benches that
// hand an endpoint to the edge without the control API; no test-runner imports, so bench/ may import it too.
import type {
  EndpointConfig,
  OAuthProviderConfig,
  RbacClientConfig,
  RbacConfig,
  RbacPermissionsConfig,
  RbacRoleConfig,
  VisitorAuthConfig,
} from '../../src/shared/snapshot.ts';

/**
 * An active endpoint forwarding to agents, with visitor auth, mTLS, capture, HTTPS enforcement and routing rules off;
 * `over` names what a caller needs (its uuid and hostname, most often).
 */
export function endpointConfig(over: Partial<EndpointConfig> = {}): EndpointConfig {
  return {
    id: 1,
    uuid: '0b7d4c8e-2a61-4f3b-9f0e-6d1c2b3a4e5f',
    user_id: 1,
    account_id: 1,
    hostname: 'app.edge.test',
    status: 'active',
    ephemeral: false,
    dedicated_tcp_port: null,
    dedicated_udp_port: null,
    certificate_id: null,
    mtls_mode: 'disabled',
    mtls_ca_pem: null,
    capture_enabled: false,
    capture_level: null,
    enforce_https: false,
    paused: false,
    origin_url: null,
    routing_rules: [],
    ...over,
  };
}

/** Visitor auth as a snapshot carries it: mode none, every list empty; `over` names the mode and what it uses. */
export function visitorAuthConfig(over: Partial<VisitorAuthConfig> = {}): VisitorAuthConfig {
  return { mode: 'none', realm: '', token_source: { kind: 'bearer' }, basic_users: [], tokens: [], session_ttl_seconds: null, credentials_version: 1, ...over };
}

/** An OIDC provider with the usual scopes, no allow-lists and discovery instead of explicit URLs. */
export function oidcProviderConfig(over: Pick<OAuthProviderConfig, 'issuer' | 'client_id' | 'client_secret_sealed'> & Partial<OAuthProviderConfig>): OAuthProviderConfig {
  return {
    id: 1,
    kind: 'oidc',
    name: 'Test OP',
    scopes: ['openid', 'email'],
    allowed_emails: [],
    allowed_domains: [],
    authorization_url: null,
    token_url: null,
    userinfo_url: null,
    ...over,
  };
}

/** An RBAC role whose permissions allow and deny nothing but what `permissions` names. */
export function rbacRole(id: number, name: string, priority: number, permissions: Partial<RbacPermissionsConfig> = {}): RbacRoleConfig {
  return {
    id,
    name,
    priority,
    permissions: { allowed_methods: [], denied_methods: [], allowed_paths: [], denied_paths: [], rate_limit_rps: 0, headers: {}, ...permissions },
  };
}

/** An active RBAC client holding `role_ids`, with no e-mail or linked identities unless `over` gives them. */
export function rbacClient(id: number, identifier: string, role_ids: number[], over: Partial<RbacClientConfig> = {}): RbacClientConfig {
  return { id, identifier, status: 'active', email: null, identities: [], role_ids, ...over };
}

/** An endpoint's RBAC section: no invites and self-registration off unless `over` says otherwise. */
export function rbacConfig(roles: RbacRoleConfig[], clients: RbacClientConfig[], over: Partial<RbacConfig> = {}): RbacConfig {
  return { roles, clients, invites: [], self_registration: { enabled: false, allowed_email_domains: [] }, ...over };
}
