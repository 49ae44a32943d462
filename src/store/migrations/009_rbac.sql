-- Per-endpoint RBAC (docs/api.md "RBAC", docs/rbac.md): roles with permissions, clients (the visitors an
-- endpoint admits, with their credentials and linked identities), memberships, invites and self-registration.
-- Uniqueness (role names, identifiers, e-mails, usernames, identities, pairs) is the constraints' job, not JavaScript's.

CREATE TABLE rbac_roles (
  id bigserial PRIMARY KEY,
  endpoint_id bigint NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
  description text NOT NULL DEFAULT '' CHECK (char_length(description) <= 1000),
  priority integer NOT NULL DEFAULT 0,
  is_default boolean NOT NULL DEFAULT false,
  -- Canonical RbacPermissionsConfig (src/shared/snapshot.ts) plus `metadata`, validated by the API.
  permissions jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(permissions) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX rbac_roles_name_key ON rbac_roles (endpoint_id, name);

CREATE TABLE rbac_clients (
  id bigserial PRIMARY KEY,
  endpoint_id bigint NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  -- Canonicalised to lower case by the API.
  identifier text NOT NULL CHECK (char_length(identifier) BETWEEN 1 AND 255 AND identifier = lower(identifier)),
  display_name text NOT NULL DEFAULT '' CHECK (char_length(display_name) <= 255),
  email text CHECK (email IS NULL OR (char_length(email) BETWEEN 3 AND 320 AND email = lower(email))),
  -- RFC 7617 §2: a user-id cannot contain a colon.
  username text CHECK (username IS NULL OR (char_length(username) BETWEEN 1 AND 128 AND position(':' in username) = 0)),
  -- bcrypt, cost >= 10, as endpoint_basic_users.
  password_hash text CHECK (password_hash IS NULL OR (password_hash ~ '^\$2[aby]\$[0-9]{2}\$.{53}$' AND substring(password_hash from 5 for 2)::int >= 10)),
  -- tokenDigest(visitorTokenKey, token), as endpoint_visitor_tokens.digest.
  token_digest text CHECK (token_digest IS NULL OR char_length(token_digest) = 43),
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'invited', 'disabled', 'revoked')),
  registration_source text NOT NULL DEFAULT 'admin' CHECK (registration_source IN ('admin', 'self', 'invite', 'sso')),
  metadata jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  CONSTRAINT rbac_clients_password_check CHECK ((username IS NULL) = (password_hash IS NULL))
);

CREATE UNIQUE INDEX rbac_clients_identifier_key ON rbac_clients (endpoint_id, identifier);
CREATE UNIQUE INDEX rbac_clients_email_key ON rbac_clients (endpoint_id, email) WHERE email IS NOT NULL;
CREATE UNIQUE INDEX rbac_clients_username_key ON rbac_clients (endpoint_id, username) WHERE username IS NOT NULL;
CREATE UNIQUE INDEX rbac_clients_token_key ON rbac_clients (endpoint_id, token_digest) WHERE token_digest IS NOT NULL;

-- Linked OAuth/OIDC identities: the endpoint's provider id (decimal, as sessions name it) and the provider's subject.
CREATE TABLE rbac_client_identities (
  client_id bigint NOT NULL REFERENCES rbac_clients(id) ON DELETE CASCADE,
  endpoint_id bigint NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  provider text NOT NULL CHECK (provider ~ '^[1-9][0-9]{0,18}$'),
  subject text NOT NULL CHECK (char_length(subject) BETWEEN 1 AND 255),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (client_id, provider, subject)
);

CREATE UNIQUE INDEX rbac_client_identities_key ON rbac_client_identities (endpoint_id, provider, subject);

CREATE TABLE rbac_memberships (
  id bigserial PRIMARY KEY,
  endpoint_id bigint NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  client_id bigint NOT NULL REFERENCES rbac_clients(id) ON DELETE CASCADE,
  role_id bigint NOT NULL REFERENCES rbac_roles(id) ON DELETE CASCADE,
  -- The user who assigned it; NULL for default roles given on creation or registration.
  assigned_by bigint REFERENCES users(id) ON DELETE SET NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX rbac_memberships_pair_key ON rbac_memberships (client_id, role_id);
CREATE INDEX rbac_memberships_endpoint_idx ON rbac_memberships (endpoint_id, id);

-- One invite per placeholder client; the token is single use (redeemed_at) and stored only as a keyed digest.
CREATE TABLE rbac_invites (
  id bigserial PRIMARY KEY,
  endpoint_id bigint NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  client_id bigint NOT NULL UNIQUE REFERENCES rbac_clients(id) ON DELETE CASCADE,
  token_digest text NOT NULL CHECK (char_length(token_digest) = 43),
  expires_at timestamptz NOT NULL,
  redeemed_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX rbac_invites_token_key ON rbac_invites (endpoint_id, token_digest);

-- Self-registration (docs/rbac.md): off unless a row turns it on.
CREATE TABLE endpoint_rbac_settings (
  endpoint_id bigint PRIMARY KEY REFERENCES endpoints(id) ON DELETE CASCADE,
  self_registration_enabled boolean NOT NULL DEFAULT false,
  -- Lower-case domains; empty: any verified e-mail.
  self_registration_domains text[] NOT NULL DEFAULT '{}',
  updated_at timestamptz NOT NULL DEFAULT now()
);
