// Every visitor policy on one endpoint (a rate limit, basic auth, a JWT layer, RBAC roles, a routing rule): as the feed
// carries it (policyEndpoint; config-apply loads 100k) and set through the control API (applyPolicies; the proxy bench).
import type { EndpointConfig, RbacRoleConfig, RateLimitRuleConfig } from '../../src/shared/snapshot.ts';
import { endpointConfig } from '../../test/helpers/endpoint-config.ts';

export interface PolicyEndpointOptions {
  id: number;
  hostname: string;
  /** The endpoint's origin URL, and the routing rule's target (one rule matching every path). */
  originUrl: string;
  /** Where the JWT layer fetches its keys (once, then cached). */
  jwksUrl: string;
  /** bcrypt hash of the basic user's password (hashed once by the caller: bcrypt is 50 ms). */
  passwordHash: string;
  /** Stored capture setting; the proxy bench keeps the platform default (on, metadata). */
  capture?: boolean;
}

/** The basic user every request of the policy path sends; it is RBAC client 1. */
export const POLICY_USER = { username: 'bench', password: 'bench-password-1' };

function role(id: number, priority: number, permissions: Partial<RbacRoleConfig['permissions']>): RbacRoleConfig {
  return {
    id,
    name: `role-${id}`,
    priority,
    permissions: { allowed_methods: [], denied_methods: [], allowed_paths: [], denied_paths: [], rate_limit_rps: 0, headers: {}, ...permissions },
  };
}

/** A rate-limit rule far above any load the bench makes: every request is counted, none refused. */
function rateLimit(id: number): RateLimitRuleConfig {
  return {
    uuid: `20000000-0000-4000-8000-${String(id).padStart(12, '0')}`,
    id,
    name: 'api',
    requests_per_window: 1_000_000_000,
    window_size_seconds: 60,
    action: 'block',
    priority: 1,
    scope: 'edge',
    fail_mode: 'open',
    conditions: [{ uuid: `30000000-0000-4000-8000-${String(id).padStart(12, '0')}`, type: 'path', operator: 'prefix', value: '/', logical_operator: 'AND' }],
  };
}

export function policyEndpoint(o: PolicyEndpointOptions): EndpointConfig {
  const i = o.id;
  return endpointConfig({
    id: i,
    uuid: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    user_id: 1 + (i % 1000),
    account_id: 1 + (i % 1000),
    hostname: o.hostname,
    capture_enabled: o.capture ?? true,
    origin_url: o.originUrl,
    auth: {
      mode: 'basic',
      realm: 'bench',
      token_source: { kind: 'bearer' },
      basic_users: [{ id: `${i}-1`, client_id: 1, username: POLICY_USER.username, password_hash: o.passwordHash }],
      tokens: [],
      session_ttl_seconds: null,
      credentials_version: 1,
    },
    jwt: { jwks_url: o.jwksUrl, issuer: null, audience: null, claim_headers: { sub: 'x-user' } },
    rbac: {
      roles: [
        role(1, 30, { denied_methods: ['TRACE'], denied_paths: ['/admin/**', '/internal/*'] }),
        role(2, 20, { allowed_methods: ['GET', 'HEAD'], allowed_paths: ['/small', '/large', '/static/**'], headers: { 'x-tier': 'reader' } }),
        role(3, 10, { allowed_methods: ['GET'], allowed_paths: ['/docs/**'] }),
      ],
      clients: [{ id: 1, identifier: 'bench', status: 'active', email: null, identities: [], role_ids: [1, 2, 3] }],
      invites: [],
      self_registration: { enabled: false, allowed_email_domains: [] },
    },
    rate_limits: [rateLimit(i)],
    routing_rules: [
      {
        id: i,
        name: 'everything',
        priority: 1,
        enabled: true,
        target_agent_id: null,
        target_agent_tags: [],
        target_origin_url: o.originUrl,
        conditions: [{ condition_type: 'path', condition_key: 'glob', pattern: '/**' }],
      },
    ],
  });
}

/** A control-API call as the bench's user: JSON in, JSON (or nothing) out; anything but 2xx throws with the answer. */
export type ApiCall = (method: string, path: string, body?: unknown) => Promise<Record<string, unknown>>;

/**
 * The same policies as policyEndpoint, set on an existing endpoint through the control API as a user would (README
 * "Visitor authentication", "RBAC", "Rate limits"; docs/api.md): basic mode (its settings user is no RBAC client, so
 * the bench's requests authenticate as RBAC client `bench`), the JWT layer, three roles, the rate-limit rule and the
 * routing rule. Capture is left at whatever the endpoint has. Answers the fields every request must send.
 */
export async function applyPolicies(api: ApiCall, uuid: string, o: { originUrl: string; jwksUrl: string; jwt: string }): Promise<Record<string, string>> {
  const base = `/v1/endpoints/${uuid}`;
  await api('PUT', `${base}/settings`, { mode: 'basic', basic_users: [{ username: 'owner', password: 'owner password 1' }] });
  await api('PUT', `${base}/settings/jwt`, { enabled: true, jwks_url: o.jwksUrl, claim_headers: JSON.stringify({ sub: 'x-user' }) });
  const roles = [
    { name: 'role-1', priority: 30, permissions: { denied_methods: ['TRACE'], denied_paths: ['/admin/**', '/internal/*'] } },
    { name: 'role-2', priority: 20, permissions: { allowed_methods: ['GET', 'HEAD'], allowed_paths: ['/small', '/large', '/static/**'], headers: { 'x-tier': 'reader' } } },
    { name: 'role-3', priority: 10, permissions: { allowed_methods: ['GET'], allowed_paths: ['/docs/**'] } },
  ];
  const roleIds: number[] = [];
  for (const r of roles) roleIds.push((await api('POST', `${base}/rbac/roles`, r)).id as number);
  const client = await api('POST', `${base}/rbac/clients`, { identifier: 'bench', username: POLICY_USER.username, password: POLICY_USER.password });
  for (const role of roleIds) await api('POST', `${base}/rbac/memberships`, { client_id: client.id, role_id: role });
  // Far above any load the bench makes: every request is counted, none refused.
  await api('POST', '/v1/firewall/rate-limits', {
    endpoint_id: uuid,
    name: 'api',
    requests_per_window: 1_000_000_000,
    window_size_seconds: 60,
    action: 'block',
    conditions: [{ type: 'path', operator: 'prefix', value: '/' }],
  });
  await api('POST', `${base}/routing-rules`, {
    name: 'everything',
    priority: 1,
    target_origin_url: o.originUrl,
    conditions: [{ condition_type: 'path', condition_key: 'glob', pattern: '/**' }],
  });
  return {
    authorization: `Basic ${Buffer.from(`${POLICY_USER.username}:${POLICY_USER.password}`).toString('base64')}`,
    'x-jwt-assertion': o.jwt,
  };
}
