// The parts of the /v1 API's answers that diff, apply and export read, as the API documents them (docs/api.md);
// typed by hand for the fields used, so a renamed field fails the type check here rather than at run time.

import type { paths } from '../shared/api/openapi.ts';

export interface EndpointView {
  uuid: string;
  hostname: string;
  subdomain: string;
  ephemeral: boolean;
  tags?: string[];
  origin_url: string | null;
  capture_enabled: boolean;
  capture_level: string | null;
  dedicated_tcp_port: number | null;
  dedicated_udp_port: number | null;
  /** The library certificate served; null: the platform certificate. */
  certificate_id: number | null;
}

/** A library certificate as GET /v1/certificates lists it: the file refers to it by name. */
export interface CertificateView {
  id: number;
  name: string;
}

export interface Page<T> {
  items: T[];
  total: number;
}

export interface DomainView {
  id: number;
  name: string;
  verified: boolean;
}

export interface MtlsView {
  mode: string;
  ca_certificates: { fingerprint_sha256: string }[];
}

export interface HealthCheckView {
  enabled: boolean;
  path: string;
  interval_seconds: number;
}

/** config holds the mode's fields, the JWT layer's while on, and {webhook} while verification is on. */
export interface SettingsConfig {
  realm?: string;
  allowed_redirects?: string[];
  scopes?: string[];
  jwks_url?: string;
  issuer?: string | null;
  audience?: string | null;
  claim_headers?: string;
  webhook?: { header: string; algo: string; prefix?: string; secret_fingerprint?: string | null };
}

export interface SettingsView {
  mode: string;
  config?: SettingsConfig;
  session_ttl_seconds?: number;
  enforce_https?: boolean;
  enabled_auth_methods?: Record<string, boolean>;
  basic_users?: { username: string; password_hash?: string }[];
}

export interface ProviderView {
  id: number;
  name: string;
  kind: string;
  issuer: string;
  client_id: string;
  client_secret_fingerprint?: string | null;
  scopes?: string[];
  allowed_emails?: string[];
  allowed_domains?: string[];
  authorization_url: string | null;
  token_url: string | null;
  userinfo_url: string | null;
  enabled: boolean;
}

export interface RoleView {
  id: number;
  name: string;
  description?: string;
  priority: number;
  is_default: boolean;
  permissions: Record<string, unknown>;
}

export interface RateLimitView {
  uuid: string;
  id: number;
  name: string;
  endpoint_uuid: string;
  description?: string;
  requests_per_window: number;
  window_size_seconds: number;
  action: string;
  status: string;
  priority: number;
  scope: string;
  fail_mode: string;
  conditions?: { condition_type: string; operator: string; condition_value: string; logical_operator: string }[];
  tags?: string[];
}

export interface RateLimitPage {
  rules: RateLimitView[];
  pagination: { total: number; totalPages: number };
  defaultDomain: string;
}

export interface RoutingRuleView {
  id: number;
  name: string;
  priority: number;
  enabled: boolean;
  target_agent_id: string | null;
  target_agent_tags: string;
  target_origin_url: string | null;
  conditions?: { condition_type: string; condition_key: string; pattern: string }[];
  tags?: string[];
}

export interface AlertChannelView {
  type: string;
  url?: string;
  to?: string;
  has_secret?: boolean;
  secret_fingerprint?: string | null;
}

export interface AlertView {
  uuid: string;
  id: number;
  name: string;
  endpoint_uuid: string | null;
  metric: string;
  comparison: string;
  threshold: number;
  window_seconds: number;
  channels?: AlertChannelView[];
  tags?: string[];
}

/** What any create answers that the apply keeps: the new resource's ids. */
export interface Created {
  id: number;
  uuid?: string;
  name?: string;
  verified?: boolean;
}

// ---------------------------------------------------------------------------------------------------------------
// The views above are held to the API's published description: each GET answer, as src/shared/api/openapi.ts
// (generated from the served OpenAPI document) types it, must be assignable to the view read from it. A field the
// API drops or retypes, or a regenerated document that no longer matches these readers, fails the type-check.
// ---------------------------------------------------------------------------------------------------------------

type Answer<P extends keyof paths> = paths[P] extends { get: { responses: { 200: { content: { 'application/json': infer T } } } } } ? T : 'no 200 JSON answer documented';
/** Compiles only when `Published` (what the API answers) fits `Read` (what this module reads from it). */
type Conforms<Published extends Read, Read> = [Published, Read];

export type PublishedViewChecks = [
  Conforms<Answer<'/v1/endpoints'>, Page<EndpointView>>,
  Conforms<Answer<'/v1/domains'>, { items: DomainView[] }>,
  Conforms<Answer<'/v1/certificates'>, { items: CertificateView[] }>,
  Conforms<Answer<'/v1/firewall/rate-limits'>, RateLimitPage>,
  Conforms<Answer<'/v1/traffic/alerts'>, { items: AlertView[] }>,
  Conforms<Answer<'/v1/endpoints/{id}/mtls'>, MtlsView>,
  Conforms<Answer<'/v1/endpoints/{id}/health-check'>, HealthCheckView>,
  Conforms<Answer<'/v1/endpoints/{id}/oauth/providers'>, { items: ProviderView[] }>,
  Conforms<Answer<'/v1/endpoints/{id}/rbac/roles'>, RoleView[]>,
  Conforms<Answer<'/v1/endpoints/{id}/settings'>, SettingsView>,
  Conforms<Answer<'/v1/endpoints/{id}/routing-rules'>, { items: RoutingRuleView[] }>,
];
