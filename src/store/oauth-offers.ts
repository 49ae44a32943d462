// Which OAuth providers an endpoint offers and the scopes a login asks for: one rule for the settings API, its read
// shape and the snapshot. Pure functions, so the snapshot builder (endpoint-feed.ts) needs no store write module.
import type { OAuthProviderRow } from './oauth-providers.ts';

/** Scopes an OpenID Connect login asks for when neither the settings nor the provider name any. */
export const DEFAULT_OIDC_SCOPES = ['openid', 'email', 'profile'] as const;

/**
 * Whether visitors may log in with a provider now, in mode oauth or oidc: enabled by its toggle, listed in the
 * settings' enabled_auth_methods (every enabled provider when that list is empty), and in mode oidc of kind oidc
 * (that mode takes identities from validated ID tokens only).
 */
export function offersProvider(mode: string, listed: readonly string[], p: Pick<OAuthProviderRow, 'id' | 'kind' | 'enabled'>): boolean {
  if (!p.enabled) return false;
  if (mode === 'oidc' && p.kind !== 'oidc') return false;
  return listed.length === 0 || listed.includes(String(p.id));
}

/**
 * The scopes a login asks for: the settings' override when set, else the provider's, else the OIDC default. An
 * OpenID Connect login needs `openid` (Core §3.1.2.1): an override shared with oauth2 providers may lack it.
 */
export function requestedScopes(p: Pick<OAuthProviderRow, 'kind' | 'scopes'>, override: readonly string[] | undefined): string[] {
  const scopes = override && override.length > 0 ? [...override] : p.scopes.length > 0 ? [...p.scopes] : p.kind === 'oidc' ? [...DEFAULT_OIDC_SCOPES] : [];
  return p.kind === 'oidc' && !scopes.includes('openid') ? ['openid', ...scopes] : scopes;
}
