-- Accounts, users, memberships, API keys, and the versioned change feed.

CREATE TABLE accounts (
  id bigserial PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('personal', 'organization')),
  name text NOT NULL,
  plan text NOT NULL,
  suspended_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
  id bigserial PRIMARY KEY,
  email text NOT NULL,
  is_admin boolean NOT NULL DEFAULT false,
  personal_account_id bigint NOT NULL REFERENCES accounts(id),
  email_verified boolean NOT NULL DEFAULT false,
  payment_method boolean NOT NULL DEFAULT false,
  identity_verified boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX users_email_key ON users (lower(email));

CREATE TABLE memberships (
  account_id bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  is_owner boolean NOT NULL DEFAULT false,
  permissions text[] NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, user_id)
);

CREATE INDEX memberships_user_idx ON memberships (user_id);

CREATE TABLE api_keys (
  id bigserial PRIMARY KEY,
  key_id text NOT NULL,
  secret_hash bytea NOT NULL,
  user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  account_id bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  name text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at timestamptz
);

CREATE UNIQUE INDEX api_keys_key_id_key ON api_keys (key_id);

CREATE INDEX api_keys_user_idx ON api_keys (user_id);

-- The change feed. feed_state holds the one monotonic version: writers bump it with UPDATE, whose
-- row lock orders concurrent config transactions, so commit order equals version order.
CREATE TABLE feed_state (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  version bigint NOT NULL DEFAULT 0
);

INSERT INTO feed_state (id, version) VALUES (true, 0);

-- One row per change, published in version order and pruned once far behind the head.
CREATE TABLE feed_outbox (
  version bigint PRIMARY KEY,
  topic text NOT NULL,
  key text NOT NULL,
  data jsonb,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- The current value of every key: what a full resync (or a Redis that lost its data) is rebuilt from.
CREATE TABLE feed_entries (
  topic text NOT NULL,
  key text NOT NULL,
  version bigint NOT NULL,
  data jsonb NOT NULL,
  PRIMARY KEY (topic, key)
);
