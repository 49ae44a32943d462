-- Firewall rate limits (docs/api.md "Firewall rate limits", docs/rate-limits.md): per-endpoint rules, their ordered
-- conditions (canonical form, src/shared/rate-limit/conditions.ts) and the daily hit buckets the worker rolls up.
-- The bigserial ids are the deprecated legacy integer ids docs/api.md still shows; paths and clients use the uuids.

CREATE TABLE rate_limit_rules (
  id bigserial PRIMARY KEY,
  uuid uuid NOT NULL DEFAULT gen_random_uuid(),
  endpoint_id bigint NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  -- The user who created the rule (docs/api.md shows user_id in the list).
  user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
  description text NOT NULL DEFAULT '' CHECK (char_length(description) <= 1000),
  requests_per_window integer NOT NULL CHECK (requests_per_window > 0 AND requests_per_window <= 1000000000),
  -- A day at most: longer windows would need day-long per-visitor state on every edge for no practical rule.
  window_size_seconds integer NOT NULL CHECK (window_size_seconds > 0 AND window_size_seconds <= 86400),
  action text NOT NULL CHECK (action IN ('block', 'throttle')),
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive', 'disabled')),
  priority integer NOT NULL DEFAULT 0,
  scope text NOT NULL DEFAULT 'edge' CHECK (scope IN ('edge', 'cluster')),
  fail_mode text NOT NULL DEFAULT 'open' CHECK (fail_mode IN ('open', 'closed')),
  -- Hit statistics, best effort (the worker adds shipped edge counts; src/store/rate-limit-hits.ts).
  hit_count bigint NOT NULL DEFAULT 0,
  last_matched timestamptz,
  -- Recomputed for the whole endpoint on every rule write (src/shared/rate-limit/shadow.ts).
  shadowed boolean NOT NULL DEFAULT false,
  shadow_reason text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX rate_limit_rules_uuid_key ON rate_limit_rules (uuid);
-- Evaluation order within an endpoint, and what the snapshot loader and the shadow analysis read.
CREATE INDEX rate_limit_rules_endpoint_idx ON rate_limit_rules (endpoint_id, priority, id);

CREATE TABLE rate_limit_conditions (
  id bigserial PRIMARY KEY,
  uuid uuid NOT NULL DEFAULT gen_random_uuid(),
  rule_id bigint NOT NULL REFERENCES rate_limit_rules(id) ON DELETE CASCADE,
  -- Evaluation order within the rule; gaps after deletes are harmless (only the order counts).
  position integer NOT NULL CHECK (position >= 0),
  condition_type text NOT NULL CHECK (condition_type IN ('source_ip', 'country', 'asn', 'browser', 'user_agent', 'endpoint', 'path', 'method', 'header', 'cookie', 'protocol', 'port')),
  operator text NOT NULL CHECK (char_length(operator) BETWEEN 1 AND 20),
  -- Canonical value (src/shared/rate-limit/conditions.ts); for header/cookie exists / not_exists, the field's name.
  condition_value text NOT NULL DEFAULT '' CHECK (char_length(condition_value) <= 4096),
  logical_operator text NOT NULL DEFAULT 'AND' CHECK (logical_operator IN ('AND', 'OR')),
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX rate_limit_conditions_uuid_key ON rate_limit_conditions (uuid);
CREATE UNIQUE INDEX rate_limit_conditions_position_key ON rate_limit_conditions (rule_id, position);

-- One row per rule and UTC day with at least one hit; rows older than 7 days carry no meaning for the API.
CREATE TABLE rate_limit_hits_daily (
  rule_id bigint NOT NULL REFERENCES rate_limit_rules(id) ON DELETE CASCADE,
  day date NOT NULL,
  hits bigint NOT NULL DEFAULT 0 CHECK (hits >= 0),
  PRIMARY KEY (rule_id, day)
);
