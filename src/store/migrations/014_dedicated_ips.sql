-- Dedicated IPs and per-region groups (docs/dedicated-ips.md): operator-managed addresses, each announced by the edges
-- of one region and owned by one account; a group gathers addresses across regions behind one GeoDNS name.

CREATE TABLE dedicated_ip_groups (
  id bigserial PRIMARY KEY,
  account_id bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
  -- pending: being provisioned (not bindable); active: bindable and answered; retired: answered by nobody.
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'active', 'retired')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX dedicated_ip_groups_account_idx ON dedicated_ip_groups (account_id, id);

CREATE TABLE dedicated_ips (
  id bigserial PRIMARY KEY,
  -- Canonical text of one IPv4 or IPv6 address (the API canonicalises; inet would keep a prefix length).
  address text NOT NULL CHECK (char_length(address) BETWEEN 2 AND 45),
  family smallint NOT NULL CHECK (family IN (4, 6)),
  region text NOT NULL CHECK (region ~ '^[a-z0-9][a-z0-9-]{0,31}$'),
  account_id bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  -- The group this address serves in, if any; an address in a group cannot also be bound to one endpoint.
  group_id bigint REFERENCES dedicated_ip_groups(id) ON DELETE SET NULL,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'retired')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK (status = 'active' OR group_id IS NULL)
);

-- One live row per address; a retired row keeps its history and frees the address for a new one.
CREATE UNIQUE INDEX dedicated_ips_address_key ON dedicated_ips (address) WHERE status = 'active';

CREATE INDEX dedicated_ips_account_idx ON dedicated_ips (account_id, id);

CREATE INDEX dedicated_ips_group_idx ON dedicated_ips (group_id) WHERE group_id IS NOT NULL;

-- An endpoint is bound to at most one of: a single dedicated IP, or a group (SPEC: "at most one of").
ALTER TABLE endpoints
  ADD COLUMN dedicated_ip_id bigint REFERENCES dedicated_ips(id) ON DELETE RESTRICT,
  ADD COLUMN dedicated_ip_group_id bigint REFERENCES dedicated_ip_groups(id) ON DELETE RESTRICT,
  ADD CONSTRAINT endpoints_one_dedicated_ip_binding CHECK (dedicated_ip_id IS NULL OR dedicated_ip_group_id IS NULL);

-- A single dedicated IP serves one endpoint: the index, not a lookup, refuses the second.
CREATE UNIQUE INDEX endpoints_dedicated_ip_key ON endpoints (dedicated_ip_id);

CREATE INDEX endpoints_dedicated_ip_group_idx ON endpoints (dedicated_ip_group_id) WHERE dedicated_ip_group_id IS NOT NULL;
