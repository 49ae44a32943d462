-- Endpoints and what hangs off them: custom domains, the certificate library, dedicated ports, capture, mTLS.

CREATE TABLE domains (
  id bigserial PRIMARY KEY,
  account_id bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  name text NOT NULL,
  verification_token text NOT NULL,
  verified_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Anyone may claim a name, but only one account can hold it verified.
CREATE UNIQUE INDEX domains_verified_name_key ON domains (lower(name)) WHERE verified_at IS NOT NULL;

CREATE UNIQUE INDEX domains_account_name_key ON domains (account_id, lower(name));

CREATE TABLE certificates (
  id bigserial PRIMARY KEY,
  account_id bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  name text NOT NULL,
  certificate_pem text NOT NULL,
  private_key_sealed text NOT NULL,
  subject text NOT NULL DEFAULT '',
  issuer text NOT NULL DEFAULT '',
  sans text[] NOT NULL DEFAULT '{}',
  fingerprint_sha256 text NOT NULL,
  not_before timestamptz NOT NULL,
  not_after timestamptz NOT NULL,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'revoked')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX certificates_account_idx ON certificates (account_id);

CREATE TABLE endpoints (
  id bigserial PRIMARY KEY,
  uuid uuid NOT NULL DEFAULT gen_random_uuid(),
  user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  account_id bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  domain_id bigint REFERENCES domains(id) ON DELETE RESTRICT,
  subdomain text NOT NULL,
  hostname text NOT NULL,
  protocol text NOT NULL DEFAULT 'unified' CHECK (protocol IN ('unified', 'http', 'tcp', 'udp')),
  is_custom boolean NOT NULL DEFAULT false,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'provisioning', 'error', 'disabled')),
  mtls_mode text NOT NULL DEFAULT 'disabled' CHECK (mtls_mode IN ('disabled', 'optional', 'required')),
  mtls_ca_pem text,
  ephemeral boolean NOT NULL DEFAULT false,
  device_fingerprint text,
  last_active_at timestamptz,
  dedicated_tcp_port integer CHECK (dedicated_tcp_port BETWEEN 1024 AND 65535),
  dedicated_udp_port integer CHECK (dedicated_udp_port BETWEEN 1024 AND 65535),
  certificate_id bigint REFERENCES certificates(id) ON DELETE RESTRICT,
  capture_enabled boolean NOT NULL DEFAULT true,
  capture_level text CHECK (capture_level IN ('full', 'metadata', 'off')),
  paused_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX endpoints_uuid_key ON endpoints (uuid);

CREATE UNIQUE INDEX endpoints_hostname_key ON endpoints (hostname);

-- A dedicated port belongs to one endpoint at a time; the constraint, not a lookup, is what refuses the second.
CREATE UNIQUE INDEX endpoints_dedicated_tcp_port_key ON endpoints (dedicated_tcp_port);

CREATE UNIQUE INDEX endpoints_dedicated_udp_port_key ON endpoints (dedicated_udp_port);

CREATE INDEX endpoints_user_idx ON endpoints (user_id, id);

CREATE INDEX endpoints_account_idx ON endpoints (account_id, id);

CREATE INDEX endpoints_domain_idx ON endpoints (domain_id);
