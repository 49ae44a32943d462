-- A routing rule may send its requests to an origin URL instead of agents (docs/routing-rules.md "Targets").
-- A rule targets agents (an agent id, tags, or both) or an origin, never both and never nothing.
ALTER TABLE routing_rules ADD COLUMN IF NOT EXISTS target_origin_url text
  CHECK (target_origin_url IS NULL OR char_length(target_origin_url) BETWEEN 1 AND 2048);

ALTER TABLE routing_rules DROP CONSTRAINT IF EXISTS routing_rules_target_check;

ALTER TABLE routing_rules ADD CONSTRAINT routing_rules_target_check
  CHECK ((target_origin_url IS NOT NULL) <> (target_agent_id IS NOT NULL OR cardinality(target_agent_tags) > 0));
