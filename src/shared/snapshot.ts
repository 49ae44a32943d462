// The config snapshot format: what the control plane publishes through the feed and edges compile into policies.
// Control and edge meet only here (docs/architecture.md "One program, three roles"); change it with both sides in mind.

/** Feed topics and their keys. */
export const TOPICS = {
  /** key: endpoint uuid → EndpointConfig */
  endpoint: 'endpoint',
  /** key: certificate id → CertificateConfig (served by an endpoint) */
  certificate: 'certificate',
  /** key: API key id → ApiKeyConfig (so edges authenticate agents without the control plane) */
  apiKey: 'api_key',
  /** key: account id → AccountConfig */
  account: 'account',
  /** key: dedicated IP group id → DedicatedIpGroupConfig (active and pending groups; retired ones are removed) */
  dedicatedIpGroup: 'dedicated_ip_group',
  /** key: application uuid → ApplicationConfig (src/shared/deploy.ts): what a deploying agent runs, and its order */
  application: 'application',
} as const;

/** A per-region group of dedicated addresses (docs/dedicated-ips.md): the DNS role answers grp-<id> from it. */
export interface DedicatedIpGroupConfig {
  id: number;
  account_id: number;
  /** Only `active` groups are answered; `pending` ones are published so edges can bind their addresses early. */
  status: 'active' | 'pending';
  addresses: DedicatedAddressConfig[];
}

export interface DedicatedAddressConfig {
  address: string;
  family: 4 | 6;
  /** The edge region that announces the address. */
  region: string;
}

/** Routing condition types (docs/routing-rules.md): the control API validates them, edges compile them. */
export const ROUTING_CONDITION_TYPES = ['path', 'method', 'header', 'query', 'cookie', 'source_ip', 'host'] as const;
export type RoutingConditionType = (typeof ROUTING_CONDITION_TYPES)[number];

/** How a `path` condition compares: condition_key of a path condition is one of these. */
export const ROUTING_PATH_MODES = ['prefix', 'exact', 'glob'] as const;
export type RoutingPathMode = (typeof ROUTING_PATH_MODES)[number];

/** Stored in canonical form by the control API (lower-cased names, trimmed lists), so edges compile it as is. */
export interface RoutingConditionConfig {
  condition_type: RoutingConditionType;
  /** Header, query parameter or cookie name; for path the match mode (prefix, exact, glob); empty otherwise. */
  condition_key: string;
  pattern: string;
}

/**
 * A rule targets agents (target_agent_id, target_agent_tags, or both) or an origin (target_origin_url), never
 * both. target_origin_url is absent from snapshots written before rules could name origins: read it as null.
 */
export interface RoutingRuleConfig {
  id: number;
  name: string;
  priority: number;
  enabled: boolean;
  target_agent_id: string | null;
  target_agent_tags: string[];
  /** A canonical http/https URL (src/shared/origin-url.ts) the rule's requests are forwarded to, instead of agents. */
  target_origin_url?: string | null;
  conditions: RoutingConditionConfig[];
}

/** An endpoint as edges see it. */
export interface EndpointConfig {
  id: number;
  uuid: string;
  user_id: number;
  account_id: number;
  hostname: string;
  status: 'active' | 'provisioning' | 'error' | 'disabled';
  ephemeral: boolean;
  dedicated_tcp_port: number | null;
  dedicated_udp_port: number | null;
  certificate_id: number | null;
  mtls_mode: 'disabled' | 'optional' | 'required';
  mtls_ca_pem: string | null;
  capture_enabled: boolean;
  capture_level: string | null;
  /** Plain-HTTP requests are redirected to HTTPS (the visitor auth settings' `enforce_https`). */
  enforce_https: boolean;
  paused: boolean;
  /** Forward to this origin (http/https URL) instead of agents, unless a routing rule picks agents. */
  origin_url: string | null;
  /** Enabled and disabled rules, in evaluation order (see docs/routing-rules.md). */
  routing_rules: RoutingRuleConfig[];
  /** Visitor authentication (PUT /v1/endpoints/{id}/settings). Absent in older snapshots: mode none. */
  auth?: VisitorAuthConfig;
  /** The JWT layer, present only while enabled (PUT …/settings/jwt); absent or null: no JWT layer. */
  jwt?: JwtLayerConfig | null;
  /** Inbound webhook verification, present only while enabled (PUT …/settings/webhook); absent or null: off. */
  webhook?: WebhookVerificationConfig | null;
  /**
   * Per-endpoint RBAC (docs/api.md "RBAC", docs/rbac.md). Absent or null in snapshots of endpoints that
   * never had RBAC written; RBAC is on exactly when `roles` is not empty.
   */
  rbac?: RbacConfig | null;
  /**
   * Firewall rate-limit rules (docs/api.md "Firewall rate limits", docs/rate-limits.md): the `active` rules only, in
   * evaluation order (ascending priority, then id). Absent or empty: the stage is not compiled.
   */
  rate_limits?: RateLimitRuleConfig[];
  /** A single dedicated IP serving this endpoint alone (docs/dedicated-ips.md). Absent or null: none. */
  dedicated_ip?: DedicatedAddressConfig | null;
  /** The dedicated IP group serving this endpoint (its addresses are in the group's entry). Absent or null: none. */
  dedicated_ip_group_id?: number | null;
}

/** Write modes of PUT …/settings (docs/visitor-auth.md maps them to the modes GET reports). */
export const VISITOR_AUTH_MODES = ['none', 'basic', 'token', 'oauth', 'oidc'] as const;
export type VisitorAuthMode = (typeof VISITOR_AUTH_MODES)[number];

/** Where token mode reads the visitor's token from. Header and cookie names are stored as sent to the API, headers lower-cased. */
export type TokenSource = { kind: 'bearer' } | { kind: 'header'; name: string } | { kind: 'cookie'; name: string };

/** A basic-auth user as edges see it: the bcrypt hash (cost ≥ 10), never the password. */
export interface BasicUserConfig {
  /** Stable id, reported back in the heartbeat's credential_use so last_used_at can be written. */
  id: string;
  /** Set when this is an RBAC client's username and password (docs/rbac.md); absent for the settings' basic_users. */
  client_id?: number;
  username: string;
  /** bcrypt ($2b$, cost ≥ 10). */
  password_hash: string;
}

/** A live visitor token: a settings token or an endpoint API key (revoked ones are left out of the snapshot). */
export interface VisitorTokenConfig {
  /** Stable id, reported back in the heartbeat's credential_use. */
  id: string;
  /** Set when this is an RBAC client's token (docs/rbac.md); absent for settings tokens and endpoint API keys. */
  client_id?: number;
  /** The token's name (settings) or the API key's label; the edge sends it to the agent as X-Edge-Auth-User. */
  label: string;
  /** tokenDigest(visitorTokenKey, token) (src/shared/visitor-credentials.ts): keyed, so a dump is not a lookup table. */
  digest: string;
  /** RFC 3339; null never expires. The edge refuses the token from this instant on. */
  expires_at: string | null;
}

export interface VisitorAuthConfig {
  mode: VisitorAuthMode;
  /** Basic mode's realm (RFC 7617 §2), already defaulted by the control API. */
  realm: string;
  /** Token mode only; `bearer` (Authorization: Bearer, RFC 6750 §2.1) unless the config names a header or cookie. */
  token_source: TokenSource;
  /** Basic mode's users; empty in other modes. */
  basic_users: BasicUserConfig[];
  /** Token mode's live tokens (settings tokens and endpoint API keys alike); empty in other modes. */
  tokens: VisitorTokenConfig[];
  /** Login-session lifetime for oauth/oidc; null means the platform default. */
  session_ttl_seconds: number | null;
  /** Changes whenever users or tokens change, so edges flush their credential verdict caches. */
  credentials_version: number;
  /** oauth/oidc: the providers visitors may log in with now — enabled (toggle) AND listed in enabled_auth_methods
   *  (all enabled ones when that list is empty) — in a stable order (id). A session whose provider is not here is refused. */
  providers?: OAuthProviderConfig[];
  /** oauth/oidc: extra allowed return_to targets (relative paths, or absolute URLs on the endpoint's own host). */
  allowed_redirects?: string[];
}

/** One identity provider an endpoint in mode oauth/oidc logs visitors in with, as edges need it. */
export interface OAuthProviderConfig {
  id: number;
  kind: 'oidc' | 'oauth2';
  name: string;
  /** oidc: the issuer (discovery at <issuer>/.well-known/openid-configuration); oauth2: the provider's identifier. */
  issuer: string;
  client_id: string;
  /** Sealed with SecretBox (src/shared/secrets.ts), as certificate keys are; edges open it. */
  client_secret_sealed: string;
  /** The scopes to request: the settings' `config.scopes` override when set, else the provider's, else ["openid","email","profile"] (oidc) */
  scopes: string[];
  /** Lower-case; empty = no restriction by address. A login is allowed when both lists are empty, or the
   *  verified e-mail is in allowed_emails, or its domain is in allowed_domains. */
  allowed_emails: string[];
  allowed_domains: string[];
  /** oauth2 only (null for oidc): explicit endpoints for providers without discovery. */
  authorization_url: string | null;
  token_url: string | null;
  userinfo_url: string | null;
}

export interface JwtLayerConfig {
  /** https URL of the JWKS (http only where private origins are allowed). */
  jwks_url: string;
  /** Required `iss` claim; null: not checked. */
  issuer: string | null;
  /** Required `aud` claim (one of); null: not checked. */
  audience: string | null;
  /** Claim name → lower-case header name, set on the forwarded request after every visitor copy is removed. */
  claim_headers: Record<string, string>;
}

export interface WebhookVerificationConfig {
  /** Lower-case name of the header carrying the signature (e.g. x-hub-signature-256). */
  header: string;
  /** HMAC hash over the raw request body. */
  algo: 'sha256' | 'sha1';
  /** The shared secret sealed with the node's SecretBox (EDGE_SECRET_KEY), as certificate keys are; edges open it. */
  secret_sealed: string;
  /** Text before the hex digest in the header value ("sha256=" for GitHub), "" for none. */
  prefix: string;
}

export interface CertificateConfig {
  id: number;
  account_id: number;
  certificate_pem: string;
  /** Sealed with EDGE_SECRET_KEY (SecretBox); edges open it to serve TLS. */
  private_key_sealed: string;
  not_after: string;
  sans: string[];
}

export interface ApiKeyConfig {
  key_id: string;
  /** base64 SHA-256 of the whole key (src/shared/api-keys.ts). */
  secret_hash: string;
  user_id: number;
  account_id: number;
  /**
   * The key's user's effective permissions in `account_id` (owners and admins: all), republished whenever they
   * change. Edges admit an agent only with `tunnels:connect`. Absent from entries written before edges checked
   * it: read as the rule of that time (the account's keys may connect) until the control plane, at its next
   * start, republishes every key whose entry differs (docs/tunnels.md "Admission and standing").
   */
  permissions?: string[];
}

export interface AccountConfig {
  id: number;
  plan: string;
  suspended: boolean;
}

/** RBAC client statuses (docs/api.md "Clients and invites"). Only `active` clients are granted anything. */
export const RBAC_CLIENT_STATUSES = ['active', 'invited', 'disabled', 'revoked'] as const;
export type RbacClientStatus = (typeof RBAC_CLIENT_STATUSES)[number];

/** A role's permissions, canonical: methods upper-case, path patterns as the routing compiler canonicalises them. */
export interface RbacPermissionsConfig {
  allowed_methods: string[];
  denied_methods: string[];
  /** Path patterns: exact (`/admin`), prefix (`/api/*`), or glob (`/api/**\/export`) (docs/rbac.md). */
  allowed_paths: string[];
  denied_paths: string[];
  /** Requests per second for a client whose request this role decides; 0: no limit. */
  rate_limit_rps: number;
  /** Set on the forwarded request when this role decides (lower-case names, never an edge-owned field). */
  headers: Record<string, string>;
}

export interface RbacRoleConfig {
  id: number;
  name: string;
  /** Higher wins when several of a client's roles have an opinion on a request. */
  priority: number;
  permissions: RbacPermissionsConfig;
}

/**
 * An RBAC client as edges see it: who it is and which roles it holds. Its password hash and token digest travel in
 * `auth.basic_users` / `auth.tokens` with `client_id` set (only in the mode that uses them), so the auth stage checks
 * them like any other credential; OAuth/OIDC visitors are matched here by identity or verified e-mail.
 */
export interface RbacClientConfig {
  id: number;
  /** Lower-case; sent to the agent in X-Edge-Rbac-Client. */
  identifier: string;
  status: RbacClientStatus;
  /** Lower-case; null when none. Matched against a login's verified e-mail. */
  email: string | null;
  /** Linked OAuth/OIDC identities: the endpoint's provider id (decimal string) and the provider's subject. */
  identities: { provider: string; subject: string }[];
  /** The roles the client holds (memberships), by id. */
  role_ids: number[];
}

/** A pending invite, so the edge can render the registration form without asking the control plane. */
export interface RbacInviteConfig {
  /** The placeholder client. */
  client_id: number;
  /** tokenDigest(visitorTokenKey, invite_token) (src/shared/visitor-credentials.ts). */
  digest: string;
  /** RFC 3339. */
  expires_at: string;
}

export interface RbacConfig {
  /** Empty: RBAC is off for the endpoint. */
  roles: RbacRoleConfig[];
  clients: RbacClientConfig[];
  invites: RbacInviteConfig[];
  /** Self-registration (docs/rbac.md): off unless enabled; domains lower-case, empty = any verified e-mail. */
  self_registration: { enabled: boolean; allowed_email_domains: string[] };
}

/** Rate-limit condition types (docs/api.md "Rate-limit rule"). */
export const RATE_LIMIT_CONDITION_TYPES = [
  'source_ip',
  'country',
  'asn',
  'browser',
  'user_agent',
  'endpoint',
  'path',
  'method',
  'header',
  'cookie',
  'protocol',
  'port',
] as const;
export type RateLimitConditionType = (typeof RATE_LIMIT_CONDITION_TYPES)[number];

/** Stored canonical by the control API (validated with the compiler the edge runs), so edges compile it as is. */
export interface RateLimitConditionConfig {
  uuid: string;
  type: RateLimitConditionType;
  operator: string;
  /** Canonical (src/shared/rate-limit/conditions.ts); for header/cookie exists / not_exists, the name alone. */
  value: string;
  /** Joins this condition to the next one; AND binds tighter than OR. */
  logical_operator: 'AND' | 'OR';
}

export interface RateLimitRuleConfig {
  uuid: string;
  /** The legacy integer id. */
  id: number;
  name: string;
  requests_per_window: number;
  window_size_seconds: number;
  action: 'block' | 'throttle';
  priority: number;
  /** `edge`: counted in memory on each edge; `cluster`: one count across edges in Redis. */
  scope: 'edge' | 'cluster';
  /** cluster scope with Redis unreachable: `open` counts locally, `closed` answers 503. */
  fail_mode: 'open' | 'closed';
  /** In position order. */
  conditions: RateLimitConditionConfig[];
}

/**
 * Makes an endpoint config parsed from the feed refer to one copy of strings that repeat: its uuid is also the feed
 * entry's key, and an origin URL is named by the endpoint and its routing rules and shared by many endpoints, as is a
 * JWKS URL. JSON.parse gives each its own copy (~130 bytes an endpoint; src/shared/feed/parse.ts). `share` returns the
 * copy to keep for a string.
 */
export function shareEndpointStrings(config: EndpointConfig, key: string, share: (s: string) => string): void {
  if (config.uuid === key) config.uuid = key;
  if (typeof config.origin_url === 'string') config.origin_url = share(config.origin_url);
  if (Array.isArray(config.routing_rules)) {
    for (const rule of config.routing_rules) {
      if (typeof rule?.target_origin_url === 'string') rule.target_origin_url = share(rule.target_origin_url);
    }
  }
  if (typeof config.jwt?.jwks_url === 'string') config.jwt.jwks_url = share(config.jwt.jwks_url);
}
