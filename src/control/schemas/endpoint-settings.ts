// The visitor-auth settings API's shapes: the resolved read (docs/visitor-auth.md) with its row -> JSON
// view, and the bodies of PUT …/settings, …/settings/jwt and …/settings/webhook, one schema object per operation.
import { Type } from '@sinclair/typebox';
import { Nullable, Strict, Timestamp } from '../../shared/schema.ts';
import { VISITOR_AUTH_MODES, type VisitorAuthMode } from '../../shared/snapshot.ts';
import { BCRYPT_MAX_IMPORTED_COST, BCRYPT_MAX_PASSWORD_BYTES, BCRYPT_MIN_COST, reportedAuthMode, tokenSourceOf } from '../../shared/visitor-credentials.ts';
import { MAX_OAUTH_PROVIDERS, offersProvider, type OAuthProviderRow } from '../../store/oauth-providers.ts';
import { MAX_BASIC_USERS, MAX_SETTINGS_TOKENS, type AuthState } from '../../store/visitor-auth.ts';
import { WEBHOOK_ALGOS } from '../services/endpoint-settings.ts';
import { MIN_TOKEN_LENGTH, NO_CONTROL_PATTERN, TOKEN_PATTERN } from '../validation.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';

const TAGS = ['visitor-auth'];

// ---------------------------------------------------------------------------------------------------------------
// The read shape (docs/api.md "Endpoint auth settings")
// ---------------------------------------------------------------------------------------------------------------

const TokenView = Type.Object({
  id: Type.Integer(),
  label: Type.String({ description: 'The token’s name, or the API key’s' }),
  source: Type.String({ enum: ['settings', 'api_key'], description: 'settings: set by PUT …/settings; api_key: /v1/endpoints/{id}/api-keys' }),
  created_at: Timestamp(),
  expires_at: Type.Optional(Timestamp({ description: 'Omitted when the token never expires' })),
  last_used_at: Type.Optional(Timestamp({ description: 'As reported by edges, at most about a minute late; omitted when never used' })),
  revoked_at: Type.Optional(Timestamp({ description: 'API keys only; revoked keys stay listed' })),
});

const BasicUserView = Type.Object({
  id: Type.Integer(),
  username: Type.String(),
  password_hash: Type.Optional(
    Type.String({
      description:
        'The stored bcrypt hash (never the password), for configuration as code to export and compare; only for a caller ' +
        'holding endpoints:update, absent for read-only callers',
    }),
  ),
  created_at: Timestamp(),
  last_used_at: Type.Optional(Timestamp()),
});

/** Webhook verification while on (PUT …/settings/webhook): the secret never, its fingerprint yes. */
const WebhookView = Type.Object({
  header: Type.String(),
  algo: Type.String({ enum: [...WEBHOOK_ALGOS] }),
  prefix: Type.String(),
  secret_fingerprint: Nullable(
    Type.String({
      description:
        'bcrypt (cost 10) of the lower-case hex SHA-256 of the secret, made when it was written (docs/api.md "Secret fingerprints"): ' +
        'bcrypt.compare(sha256hex(secret), fingerprint) tells whether a secret is the stored one. Null for a secret stored before fingerprints existed',
    }),
  ),
});

export const SettingsView = Type.Object(
  {
    endpoint_id: Type.Integer(),
    mode: Type.String({
      enum: ['none', 'token', 'header', 'cookie', 'basic', 'jwt', 'sso'],
      description: 'none (jwt when only the JWT layer is on), basic, token (header / cookie when the token is read from one), sso for oauth/oidc',
    }),
    config: Type.Optional(
      Type.Object(
        {
          realm: Type.Optional(Type.String({ description: 'basic: the realm the browser shows' })),
          header: Type.Optional(Type.String({ description: 'token: the request header the token is read from' })),
          cookie: Type.Optional(Type.String({ description: 'token: the cookie the token is read from' })),
          allowed_redirects: Type.Optional(Type.Array(Type.String(), { description: 'oauth/oidc: extra return_to targets' })),
          scopes: Type.Optional(Type.Array(Type.String(), { description: 'oauth/oidc: scopes asked of every provider' })),
          jwks_url: Type.Optional(Type.String({ description: 'JWT layer (while on): where signing keys are fetched' })),
          issuer: Type.Optional(Nullable(Type.String({ description: 'JWT layer: the iss a token must carry; null: any' }))),
          audience: Type.Optional(Nullable(Type.String({ description: 'JWT layer: the aud a token must carry; null: any' }))),
          claim_headers: Type.Optional(Type.String({ description: 'JWT layer: claim → request header, as JSON object text' })),
          webhook: Type.Optional(WebhookView),
        },
        {
          additionalProperties: true,
          description:
            'The mode’s config (basic: realm; token: header or cookie; oauth/oidc: allowed_redirects, scopes), then, while on, the JWT layer (jwks_url, issuer, audience, ' +
            'claim_headers) and webhook verification (webhook). Never a secret. Omitted when empty.',
        },
      ),
    ),
    session_ttl_seconds: Type.Optional(Type.Integer({ description: 'Omitted when unset (the platform default applies)' })),
    enforce_https: Type.Boolean(),
    enabled_auth_methods: Type.Optional(Type.Record(Type.String(), Type.Boolean(), { description: 'Provider id → enabled; oauth/oidc modes only' })),
    tokens: Type.Array(TokenView),
    basic_users: Type.Array(BasicUserView),
  },
  { description: 'Endpoint auth settings' },
);

function optional<K extends string>(key: K, value: Date | null): { [P in K]?: string } {
  return (value === null ? {} : { [key]: iso(value) }) as { [P in K]?: string };
}


/**
 * docs/api.md's map of provider id → enabled: every provider of the endpoint, true for those visitors may log in with
 * now (offersProvider). A stored list naming every enabled provider reads the same as an empty one.
 */
function enabledAuthMethods(mode: VisitorAuthMode, listed: readonly string[], providers: readonly OAuthProviderRow[]): Record<string, boolean> {
  return Object.fromEntries(providers.map((p) => [String(p.id), offersProvider(mode, listed, p)]));
}

/**
 * `withHashes`: the caller holds endpoints:update, so basic users carry their bcrypt hashes
 * (docs/api.md "Endpoint auth settings"): whoever may replace the users may read what they would send back; a
 * read-only caller never sees them.
 */
export function settingsView(endpointId: number, s: AuthState, withHashes: boolean) {
  const mode = s.settings?.mode ?? 'none';
  const configs = s.settings?.mode_config ?? {};
  const jwtOn = s.jwt?.enabled === true;
  const config: Record<string, unknown> = { ...(configs[mode] ?? {}) };
  if (jwtOn && s.jwt) {
    Object.assign(config, { jwks_url: s.jwt.jwks_url, issuer: s.jwt.issuer, audience: s.jwt.audience, claim_headers: JSON.stringify(s.jwt.claim_headers) });
  }
  // Nested: token mode's config has a `header` of its own.
  // secret_fingerprint: docs/api.md "Secret fingerprints" (the secret itself is never shown).
  if (s.webhook?.enabled) config.webhook = { header: s.webhook.header, algo: s.webhook.algo, prefix: s.webhook.prefix, secret_fingerprint: s.webhook.secret_fingerprint };
  const sso = mode === 'oauth' || mode === 'oidc';
  return {
    endpoint_id: endpointId,
    mode: reportedAuthMode(mode, tokenSourceOf(configs.token), jwtOn),
    ...(Object.keys(config).length > 0 ? { config } : {}),
    ...(s.settings?.session_ttl_seconds != null ? { session_ttl_seconds: s.settings.session_ttl_seconds } : {}),
    enforce_https: s.enforce_https,
    ...(sso ? { enabled_auth_methods: enabledAuthMethods(mode, s.settings?.enabled_auth_methods ?? [], s.oauth_providers) } : {}),
    tokens: s.tokens.map((t) => ({
      id: t.id,
      label: t.label,
      source: t.source,
      created_at: iso(t.created_at),
      ...optional('expires_at', t.expires_at),
      ...optional('last_used_at', t.last_used_at),
      ...optional('revoked_at', t.revoked_at),
    })),
    basic_users: s.basic_users.map((u) => ({
      id: u.id,
      username: u.username,
      ...(withHashes ? { password_hash: u.password_hash } : {}),
      created_at: iso(u.created_at),
      ...optional('last_used_at', u.last_used_at),
    })),
  };
}


// ---------------------------------------------------------------------------------------------------------------
// Request bodies
// ---------------------------------------------------------------------------------------------------------------

const MAX_SESSION_TTL_SECONDS = 366 * 24 * 3600;

const BasicUsersBody = Type.Array(
  Strict(
    {
      username: Type.String({ minLength: 1, maxLength: 128, pattern: '^[^:\\x00-\\x1f\\x7f]+$', description: 'No colon (RFC 7617)' }),
      password: Type.Optional(
        Type.String({ minLength: 1, maxLength: 1024, description: `At most ${BCRYPT_MAX_PASSWORD_BYTES} bytes in UTF-8; stored as a bcrypt hash` }),
      ),
      password_hash: Type.Optional(
        Type.String({
          maxLength: 60,
          description: `Instead of password: a bcrypt hash ($2a$, $2b$ or $2y$, cost ${BCRYPT_MIN_COST}-${BCRYPT_MAX_IMPORTED_COST}), stored as sent`,
        }),
      ),
    },
    { description: 'Exactly one of password and password_hash' },
  ),
  { maxItems: MAX_BASIC_USERS, description: 'Mode basic only: the whole set of users (by username; others are removed); null removes all' },
);

const TokensBody = Type.Array(
  Strict({
    name: Type.String({ minLength: 1, maxLength: 100, pattern: NO_CONTROL_PATTERN, description: 'Sent to the agent as X-Edge-Auth-User' }),
    token: Type.String({
      minLength: MIN_TOKEN_LENGTH,
      maxLength: 512,
      pattern: TOKEN_PATTERN,
      description: `At least ${MIN_TOKEN_LENGTH} characters of A-Z a-z 0-9 - . _ ~ + / (then = padding): RFC 6750 b64token`,
    }),
    expires_at: Type.Optional(Nullable(Timestamp({ description: 'RFC 3339, in the future; omitted or null: never' }))),
  }),
  {
    maxItems: MAX_SETTINGS_TOKENS,
    description: 'Mode token only: the whole set of settings tokens (by value; others are removed; API keys are untouched); null removes all',
  },
);

const SettingsBody = Strict({
  mode: Type.String({ enum: [...VISITOR_AUTH_MODES], description: 'none, basic, token, oauth or oidc' }),
  enforce_https: Type.Optional(Nullable(Type.Boolean({ description: 'Redirect plain HTTP to HTTPS at the edge; null clears it (off)' }))),
  session_ttl_seconds: Type.Optional(
    Nullable(Type.Integer({ minimum: 1, maximum: MAX_SESSION_TTL_SECONDS, description: 'Login-session lifetime (> 0); null clears it (platform default)' })),
  ),
  enabled_auth_methods: Type.Optional(
    Nullable(
      Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
        maxItems: MAX_OAUTH_PROVIDERS,
        description:
          'Ids (decimal strings) of the endpoint’s OAuth/OIDC providers offered on the login page; empty or null: every enabled one. ' +
          'Unknown ids are a 400; in mode oidc, only kind oidc providers',
      }),
    ),
  ),
  basic_users: Type.Optional(Nullable(BasicUsersBody)),
  tokens: Type.Optional(Nullable(TokensBody)),
  config: Type.Optional(
    Nullable(
      Type.Object(
        {},
        {
          additionalProperties: true,
          description:
            'The mode’s settings, replacing what the mode had (null clears them). basic: {realm}; token: {header} or {cookie} (at most one); ' +
            'oauth, oidc: {allowed_redirects, scopes} (extra return_to targets: "/path" or https URLs on the endpoint’s hostname; scopes ' +
            'asked of every provider instead of its own); none: {}. Unknown keys are a 400.',
        },
      ),
    ),
  ),
});

const JwtBody = Strict({
  enabled: Type.Boolean({ description: 'true needs a jwks_url (sent now or stored); false keeps the stored configuration' }),
  jwks_url: Type.Optional(Type.String({ maxLength: 2048, description: 'https; "" clears it' })),
  issuer: Type.Optional(Type.String({ maxLength: 1024, description: 'Required iss; "" means not enforced' })),
  audience: Type.Optional(Type.String({ maxLength: 1024, description: 'Required aud; "" means not enforced' })),
  claim_headers: Type.Optional(
    Type.String({ maxLength: 8192, description: 'A JSON-encoded object of claim name → header name, e.g. "{\\"sub\\":\\"X-User\\"}"; "" clears it' }),
  ),
});

const WebhookBody = Strict({
  enabled: Type.Boolean({ description: 'true needs header, algo and secret (sent now or stored); false keeps the stored configuration' }),
  header: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'The header carrying the signature, e.g. X-Hub-Signature-256' })),
  algo: Type.Optional(Type.String({ enum: [...WEBHOOK_ALGOS], description: 'HMAC hash: sha256 or sha1' })),
  secret: Type.Optional(Type.String({ minLength: 1, maxLength: 1024, description: 'The shared secret; stored sealed, never returned' })),
  prefix: Type.Optional(
    Type.String({ maxLength: 32, pattern: '^[\\x21-\\x7e]*$', description: 'Text before the hex digest, e.g. "sha256=" for GitHub; default ""' }),
  ),
});

const EndpointParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }) });
const Errors409 = { ...ErrorResponses, 409: ErrorBody };

// ---------------------------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------------------------

export const GetSettings = {
  operationId: 'getEndpointSettings',
  summary: 'Read the endpoint’s visitor authentication settings',
  description:
    'The resolved view of PUT …/settings, …/settings/jwt and …/settings/webhook, and of the endpoint’s API keys (listed under tokens). ' +
    'Secrets are never returned; basic users carry their bcrypt password_hash only for a caller holding endpoints:update. ' +
    'Needs endpoints:read. docs/visitor-auth.md maps the reported mode.',
  tags: TAGS,
  params: EndpointParams,
  response: { 200: SettingsView, ...ErrorResponses },
};

export const PutSettings = {
  operationId: 'setEndpointSettings',
  summary: 'Configure visitor authentication',
  description:
    'Strict; merges with what is stored: omitted fields are kept, null clears a field. mode is required. basic_users (mode basic) ' +
    'and tokens (mode token) each replace their whole set; sent with another mode they are a 400. After the merge, mode basic needs ' +
    'a user and mode token a live token (a settings token or an endpoint API key). oauth/oidc need at least one enabled provider ' +
    '(/v1/endpoints/{id}/oauth/providers; mode oidc: of kind oidc) among enabled_auth_methods (empty: all). ' +
    'Each basic user has a password, stored as a bcrypt hash (cost ≥ 10), or a password_hash (bcrypt $2a$/$2b$/$2y$, cost 10-15) ' +
    'stored as sent, not both; tokens are stored as keyed digests. Effective on every edge from the next request. ' +
    'Needs endpoints:update; a paused endpoint is read-only (409 quota_paused). Answers the GET shape.',
  tags: TAGS,
  params: EndpointParams,
  body: SettingsBody,
  response: { 200: SettingsView, ...Errors409 },
};

export const PutJwtSettings = {
  operationId: 'setEndpointJwtSettings',
  summary: 'Configure the JWT layer',
  description:
    'Strict; omitted fields keep their stored value. enabled true needs a jwks_url (sent now or stored) and makes every request carry ' +
    '`Authorization: Bearer <jwt>`, verified against the JWKS, iss/aud checked when set, after the main mode succeeds. jwks_url must ' +
    'be https with a public address. claim_headers is a JSON-encoded object of claim → header name; headers the edge manages, ' +
    'hop-by-hop, framing and credential headers are refused. enabled false keeps the stored configuration. 200 with an empty body. ' +
    'Needs endpoints:update.',
  tags: TAGS,
  params: EndpointParams,
  body: JwtBody,
  response: { 200: Type.Null({ description: 'Empty body' }), ...Errors409 },
};

export const PutWebhookSettings = {
  operationId: 'setEndpointWebhookSettings',
  summary: 'Configure inbound webhook verification',
  description:
    'The edge computes the HMAC (algo) of the raw request body with the secret and compares it, in constant time, with the ' +
    'header’s value after the prefix (hex); a mismatch or a missing header is 401 before anything is forwarded. GitHub: ' +
    'header X-Hub-Signature-256, algo sha256, prefix "sha256=". Strict; omitted fields keep their stored value; enabled true needs ' +
    'header, algo and secret (sent now or stored); enabled false keeps the stored configuration. The secret is stored sealed ' +
    'and never returned. Needs endpoints:update. Answers the GET …/settings shape.',
  tags: TAGS,
  params: EndpointParams,
  body: WebhookBody,
  response: { 200: SettingsView, ...Errors409 },
};
