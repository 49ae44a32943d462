-- Routing rules: per-endpoint rules that choose which of the endpoint's agents serves a request.
-- Conditions live in a child table, one row per condition in its position, so the database itself refuses an
-- unknown condition type or an oversized value whatever wrote it (docs/routing-rules.md "Storage").

CREATE TABLE routing_rules (
  id bigserial PRIMARY KEY,
  endpoint_id bigint NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  name text NOT NULL DEFAULT '' CHECK (char_length(name) <= 100),
  -- Lower numbers are evaluated first; ties go to the lower id.
  priority integer NOT NULL DEFAULT 0,
  enabled boolean NOT NULL DEFAULT true,
  target_agent_id text CHECK (char_length(target_agent_id) BETWEEN 1 AND 64),
  -- Lower-case, without duplicates (the API normalises them).
  target_agent_tags text[] NOT NULL DEFAULT '{}' CHECK (cardinality(target_agent_tags) <= 16),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  -- A rule that names no agent and no tag would select every agent, which is what no rule at all does.
  CONSTRAINT routing_rules_target_check CHECK (target_agent_id IS NOT NULL OR cardinality(target_agent_tags) > 0)
);

-- Serves both the API's list and the feed's load, in evaluation order.
CREATE INDEX routing_rules_endpoint_order_idx ON routing_rules (endpoint_id, priority, id);

CREATE TABLE routing_rule_conditions (
  rule_id bigint NOT NULL REFERENCES routing_rules(id) ON DELETE CASCADE,
  position smallint NOT NULL CHECK (position BETWEEN 0 AND 19),
  condition_type text NOT NULL CHECK (condition_type IN ('path', 'method', 'header', 'query', 'cookie', 'source_ip', 'host')),
  condition_key text NOT NULL DEFAULT '' CHECK (char_length(condition_key) <= 256),
  pattern text NOT NULL CHECK (char_length(pattern) <= 2048),
  PRIMARY KEY (rule_id, position)
);
