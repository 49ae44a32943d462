// The config snapshot format: what the control plane publishes through the feed and edges compile into policies.
// Control and edge meet only here (ARCHITECTURE.md "One program, three roles"); change it with both sides in mind.

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
} as const;

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
}

export interface AccountConfig {
  id: number;
  plan: string;
  suspended: boolean;
}
