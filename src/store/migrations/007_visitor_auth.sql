-- Visitor authentication (docs/api.md "Visitor authentication", docs/visitor-auth.md): the main mode and its settings,
-- basic users, visitor tokens (settings tokens and endpoint API keys in one table), the JWT layer and webhook checks.
-- Secrets are never stored in clear: passwords as bcrypt hashes, tokens as keyed digests, the webhook secret sealed.

-- One row per endpoint once any of its auth settings were written; no row reads as mode none.
CREATE TABLE endpoint_auth_settings (
  endpoint_id bigint PRIMARY KEY REFERENCES endpoints(id) ON DELETE CASCADE,
  mode text NOT NULL DEFAULT 'none' CHECK (mode IN ('none', 'basic', 'token', 'oauth', 'oidc')),
  -- Per write mode, that mode's validated `config` ({"basic": {"realm": …}, "token": {"header": …}}), so switching
  -- modes and back keeps what each mode was given.
  mode_config jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(mode_config) = 'object'),
  -- NULL: the platform default applies (docs/api.md: omitted when unset).
  session_ttl_seconds integer CHECK (session_ttl_seconds > 0),
  -- OAuth/OIDC provider ids offered on the login page.
  enabled_auth_methods text[] NOT NULL DEFAULT '{}',
  -- Bumped whenever a basic user or a token changes, so edges know to flush their credential verdict caches.
  credentials_version bigint NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE endpoint_basic_users (
  id bigserial PRIMARY KEY,
  endpoint_id bigint NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  -- RFC 7617 §2: a user-id cannot contain a colon.
  username text NOT NULL CHECK (char_length(username) BETWEEN 1 AND 128 AND position(':' in username) = 0),
  -- bcrypt, cost >= 10 (checked by the API: the cost is the two digits after the version).
  password_hash text NOT NULL CHECK (password_hash ~ '^\$2[aby]\$[0-9]{2}\$.{53}$' AND substring(password_hash from 5 for 2)::int >= 10),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz
);

CREATE UNIQUE INDEX endpoint_basic_users_username_key ON endpoint_basic_users (endpoint_id, username);

-- Token mode's tokens: those PUT settings manages (source 'settings', replaced as a set, never revoked) and the
-- endpoint API keys (source 'api_key', created one by one with a generated secret, revoked but kept listed).
CREATE TABLE endpoint_visitor_tokens (
  id bigserial PRIMARY KEY,
  endpoint_id bigint NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  source text NOT NULL CHECK (source IN ('settings', 'api_key')),
  label text NOT NULL CHECK (char_length(label) BETWEEN 1 AND 100),
  -- HMAC-SHA256 under a key derived from EDGE_SECRET_KEY, base64url (src/shared/visitor-credentials.ts).
  digest text NOT NULL CHECK (char_length(digest) = 43),
  expires_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at timestamptz,
  CONSTRAINT endpoint_visitor_tokens_revoke_check CHECK (source = 'api_key' OR revoked_at IS NULL)
);

-- One live token per value on an endpoint: the edge finds a token by its digest.
CREATE UNIQUE INDEX endpoint_visitor_tokens_digest_key ON endpoint_visitor_tokens (endpoint_id, digest) WHERE revoked_at IS NULL;

CREATE INDEX endpoint_visitor_tokens_endpoint_idx ON endpoint_visitor_tokens (endpoint_id, id);

-- The JWT layer (PUT …/settings/jwt). Disabling keeps the row, so enabling again needs no re-entry.
CREATE TABLE endpoint_jwt_settings (
  endpoint_id bigint PRIMARY KEY REFERENCES endpoints(id) ON DELETE CASCADE,
  enabled boolean NOT NULL DEFAULT false,
  jwks_url text CHECK (char_length(jwks_url) <= 2048),
  -- Empty: not enforced (docs/api.md).
  issuer text NOT NULL DEFAULT '',
  audience text NOT NULL DEFAULT '',
  -- Claim name → lower-case header name, validated by the API.
  claim_headers jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(claim_headers) = 'object'),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT endpoint_jwt_settings_enabled_check CHECK (NOT enabled OR jwks_url IS NOT NULL)
);

-- Inbound webhook verification (PUT …/settings/webhook): an HMAC of the raw body checked at the edge.
CREATE TABLE endpoint_webhook_verification (
  endpoint_id bigint PRIMARY KEY REFERENCES endpoints(id) ON DELETE CASCADE,
  enabled boolean NOT NULL DEFAULT false,
  -- Lower-case field name.
  header text CHECK (char_length(header) BETWEEN 1 AND 256),
  algo text CHECK (algo IN ('sha256', 'sha1')),
  -- Sealed with SecretBox (EDGE_SECRET_KEY), as certificate keys are.
  secret_sealed text,
  prefix text NOT NULL DEFAULT '' CHECK (char_length(prefix) <= 32),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT endpoint_webhook_verification_enabled_check CHECK (NOT enabled OR (header IS NOT NULL AND algo IS NOT NULL AND secret_sealed IS NOT NULL))
);
