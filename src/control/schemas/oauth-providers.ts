// The OAuth/OIDC provider API's shapes (docs/api.md): the create and replace bodies, the toggle, and
// the provider view with the redirect URI to register; one schema object per operation.
import { Type } from '@sinclair/typebox';
import { Nullable, Strict, Timestamp } from '../../shared/schema.ts';
import { CALLBACK_PATH, httpsLocation } from '../../shared/public-urls.ts';
import { DEFAULT_OIDC_SCOPES, MAX_ALLOWED_DOMAINS, MAX_ALLOWED_EMAILS, MAX_OAUTH_PROVIDERS, type OAuthProviderRow } from '../../store/oauth-providers.ts';
import { KINDS } from '../services/oauth-providers.ts';
import { ScopesBody } from '../validation.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';

const TAGS = ['visitor-auth'];

/** RFC 6749 Appendix A.1/A.2: client_id and client_secret are VSCHAR (%x20-7E). */
const VSCHAR = '^[\\x20-\\x7e]+$';
/** URLs as sent: visible ASCII only, so the stored issuer is exactly the string an ID token's iss is compared with. */
const URL_CHARS = '^[\\x21-\\x7e]+$';

const providerBody = (create: boolean) => {
  const secret = Type.String({ minLength: 1, maxLength: 4096, pattern: VSCHAR, description: 'Stored sealed, never returned' });
  return Strict({
    kind: Type.String({ enum: [...KINDS], description: 'oidc: OpenID Connect with discovery and an ID token; oauth2: explicit endpoints, identity from userinfo' }),
    name: Type.String({ minLength: 1, maxLength: 100, pattern: '^[^\\x00-\\x1f\\x7f]+$', description: 'Shown on the login page; unique per endpoint' }),
    issuer: Type.String({
      minLength: 1,
      maxLength: 2048,
      pattern: URL_CHARS,
      description: 'https URL with a public host (http only with EDGE_ORIGIN_ALLOW_PRIVATE); oidc: the issuer, exactly as in its ID tokens',
    }),
    client_id: Type.String({ minLength: 1, maxLength: 512, pattern: VSCHAR }),
    client_secret: create ? secret : Type.Optional({ ...secret, description: 'Omitted: the stored secret is kept' }),
    scopes: Type.Optional(ScopesBody(`RFC 6749 scope tokens; oidc must include openid; omitted or empty: ${DEFAULT_OIDC_SCOPES.join(' ')} for oidc, none for oauth2`)),
    allowed_emails: Type.Optional(
      Type.Array(Type.String({ format: 'email', maxLength: 254 }), { maxItems: MAX_ALLOWED_EMAILS, description: 'Verified addresses allowed to log in (compared lower-case)' }),
    ),
    allowed_domains: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 253 }), { maxItems: MAX_ALLOWED_DOMAINS, description: 'Domains whose verified addresses may log in (exact domain)' }),
    ),
    authorization_url: Type.Optional(Type.String({ minLength: 1, maxLength: 2048, pattern: URL_CHARS, description: 'Kind oauth2 only (required there)' })),
    token_url: Type.Optional(Type.String({ minLength: 1, maxLength: 2048, pattern: URL_CHARS, description: 'Kind oauth2 only (required there)' })),
    userinfo_url: Type.Optional(Type.String({ minLength: 1, maxLength: 2048, pattern: URL_CHARS, description: 'Kind oauth2 only (required there)' })),
  });
};
const CreateBody = providerBody(true);
const ReplaceBody = providerBody(false);
const ToggleBody = Strict({ enabled: Type.Optional(Type.Boolean({ description: 'Omitted means false (docs/api.md)' })) });

const ProviderView = Type.Object(
  {
    id: Type.Integer({ description: 'int64' }),
    kind: Type.String({ enum: [...KINDS] }),
    name: Type.String(),
    issuer: Type.String(),
    client_id: Type.String(),
    scopes: Type.Array(Type.String(), { description: 'As configured; empty: the default' }),
    allowed_emails: Type.Array(Type.String()),
    allowed_domains: Type.Array(Type.String()),
    authorization_url: Nullable(Type.String({ description: 'oauth2 only' })),
    token_url: Nullable(Type.String({ description: 'oauth2 only' })),
    userinfo_url: Nullable(Type.String({ description: 'oauth2 only' })),
    enabled: Type.Boolean({ description: 'Set by PUT …/toggle' }),
    redirect_uri: Type.String({ description: 'The redirect URI to register at the provider for this client' }),
    client_secret_fingerprint: Nullable(
      Type.String({
        description:
          'bcrypt (cost 10) of the lower-case hex SHA-256 of the client secret, made when the secret was written: ' +
          'bcrypt.compare(sha256hex(secret), fingerprint) tells whether a secret is the stored one. Null for a secret stored before fingerprints existed',
      }),
    ),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { description: 'OAuth/OIDC provider (never its client secret; its salted fingerprint)' },
);

/**
 * Where the edge receives the provider's answer, exactly as the edge sends it as redirect_uri (with the public HTTPS
 * port when it is not 443): the provider must have it registered for the client, so the API shows it.
 */
export function providerView(p: OAuthProviderRow, hostname: string, httpsPort: number) {
  return {
    id: p.id,
    kind: p.kind,
    name: p.name,
    issuer: p.issuer,
    client_id: p.client_id,
    scopes: p.scopes,
    allowed_emails: p.allowed_emails,
    allowed_domains: p.allowed_domains,
    authorization_url: p.authorization_url,
    token_url: p.token_url,
    userinfo_url: p.userinfo_url,
    enabled: p.enabled,
    redirect_uri: httpsLocation(hostname, httpsPort, CALLBACK_PATH),
    client_secret_fingerprint: p.client_secret_fingerprint,
    created_at: iso(p.created_at),
    updated_at: iso(p.updated_at),
  };
}

const EndpointParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }) });
const ProviderParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }), provider_id: Type.String({ description: 'Provider id (int64)' }) });
const Errors409 = { ...ErrorResponses, 409: ErrorBody };

const LOCKOUT_NOTE =
  'Disabling or deleting the last provider visitors may use while the endpoint is in mode oauth/oidc is allowed: the endpoint ' +
  'stays in that mode and the edge refuses every visitor until a provider is enabled or the mode changed (never open).';

// ---------------------------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------------------------

export const CreateProvider = {
  operationId: 'createOauthProvider',
  summary: 'Add an OAuth/OIDC provider',
  description:
    'A provider visitors log in with in modes oauth and oidc (PUT …/settings). kind oidc discovers its endpoints from the ' +
    'issuer; kind oauth2 names authorization_url, token_url and userinfo_url. issuer and URLs must be https with a public host. ' +
    'The client secret is stored sealed and never returned. Enabled on creation; with an empty enabled_auth_methods it is offered ' +
    `to visitors at once. At most ${MAX_OAUTH_PROVIDERS} per endpoint; names are unique per endpoint (409). Needs endpoints:update.`,
  tags: TAGS,
  params: EndpointParams,
  body: CreateBody,
  response: { 201: ProviderView, ...Errors409 },
};

export const ListProviders = {
  operationId: 'listOauthProviders',
  summary: 'List the endpoint’s OAuth/OIDC providers',
  description: 'Oldest first, enabled or not. Never a client secret. Needs endpoints:read.',
  tags: TAGS,
  params: EndpointParams,
  response: { 200: Type.Object({ items: Type.Array(ProviderView) }), ...ErrorResponses },
};

export const GetProvider = {
  operationId: 'getOauthProvider',
  summary: 'Get one OAuth/OIDC provider',
  description: '404 when the endpoint or the provider is missing, not the caller’s, or the provider belongs to another endpoint. Needs endpoints:read.',
  tags: TAGS,
  params: ProviderParams,
  response: { 200: ProviderView, ...ErrorResponses },
};

export const ReplaceProvider = {
  operationId: 'replaceOauthProvider',
  summary: 'Replace an OAuth/OIDC provider',
  description:
    'A full update with the fields of create: omitted optional fields are emptied (scopes, allowed_emails, allowed_domains), ' +
    'except client_secret, whose omission keeps the stored one. The enabled flag is left as it is (PUT …/toggle sets it). ' +
    'Effective on every edge from the next request; sessions made with the provider stay valid while it is offered. ' +
    'Needs endpoints:update.',
  tags: TAGS,
  params: ProviderParams,
  body: ReplaceBody,
  response: { 200: ProviderView, ...Errors409 },
};

export const ToggleProvider = {
  operationId: 'setOauthProviderEnabled',
  summary: 'Enable or disable an OAuth/OIDC provider',
  description:
    'An explicit set, not a flip: enabled true enables, enabled false or omitted disables (docs/api.md). The provider and its ' +
    'configuration stay stored. A disabled provider is not offered, and sessions made with it are refused from the next ' +
    `request. ${LOCKOUT_NOTE} 204 with an empty body. Needs endpoints:update.`,
  tags: TAGS,
  params: ProviderParams,
  body: ToggleBody,
  response: { 204: Type.Null({ description: 'Set' }), ...Errors409 },
};

export const DeleteProvider = {
  operationId: 'deleteOauthProvider',
  summary: 'Delete an OAuth/OIDC provider',
  description:
    `Sessions made with it are refused from the next request. ${LOCKOUT_NOTE} An id listed in enabled_auth_methods stays ` +
    'there and matches nothing (ids are never reused). Needs endpoints:update.',
  tags: TAGS,
  params: ProviderParams,
  response: { 204: Type.Null({ description: 'Deleted' }), ...Errors409 },
};
