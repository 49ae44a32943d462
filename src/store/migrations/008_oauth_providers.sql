-- OAuth/OIDC identity providers of an endpoint (docs/visitor-auth.md "OAuth providers"): what the edge logs visitors
-- in with in modes oauth and oidc. The client secret is sealed with SecretBox, as certificate keys are; never in clear.

CREATE TABLE endpoint_oauth_providers (
  id bigserial PRIMARY KEY,
  endpoint_id bigint NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  -- oidc: discovery and an ID token; oauth2: explicit endpoints and the userinfo answer.
  kind text NOT NULL CHECK (kind IN ('oidc', 'oauth2')),
  -- Shown on the edge's login page; unique per endpoint so the page never lists two alike.
  name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
  -- oidc: compared with the ID token's iss as a string (OpenID Connect Core §3.1.3.7), so stored as sent.
  issuer text NOT NULL CHECK (char_length(issuer) BETWEEN 1 AND 2048),
  client_id text NOT NULL CHECK (char_length(client_id) BETWEEN 1 AND 512),
  client_secret_sealed text NOT NULL,
  -- RFC 6749 §3.3 scope tokens, validated by the API; empty: the default (openid email profile for oidc).
  scopes text[] NOT NULL DEFAULT '{}',
  -- Lower-case; both empty: any verified address may log in.
  allowed_emails text[] NOT NULL DEFAULT '{}',
  allowed_domains text[] NOT NULL DEFAULT '{}',
  authorization_url text CHECK (char_length(authorization_url) <= 2048),
  token_url text CHECK (char_length(token_url) <= 2048),
  userinfo_url text CHECK (char_length(userinfo_url) <= 2048),
  -- PUT …/toggle sets it (docs/api.md "OAuth/OIDC providers"); the configuration stays stored either way.
  enabled boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT endpoint_oauth_providers_urls_check CHECK (
    (kind = 'oidc' AND authorization_url IS NULL AND token_url IS NULL AND userinfo_url IS NULL)
    OR (kind = 'oauth2' AND authorization_url IS NOT NULL AND token_url IS NOT NULL AND userinfo_url IS NOT NULL))
);

CREATE UNIQUE INDEX endpoint_oauth_providers_name_key ON endpoint_oauth_providers (endpoint_id, name);
