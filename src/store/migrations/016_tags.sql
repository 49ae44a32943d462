-- Tags (docs/api.md "Tags"): free labels a user puts on endpoints, rate-limit rules, routing rules and alert rules,
-- for configuration as code to tell its own resources apart. The edge never sees them; they are not in the feed.
-- Each is 1-32 of a-z 0-9 . _ - starting with a letter or digit, at most 16 per resource: the API refuses anything
-- else with a 400, and these CHECKs hold it whatever wrote the row (tags contain no space, so joining them with one
-- and matching the whole string judges each tag).

ALTER TABLE endpoints ADD COLUMN tags text[] NOT NULL DEFAULT '{}'
  CONSTRAINT endpoints_tags_check CHECK (cardinality(tags) <= 16 AND array_to_string(tags, ' ') ~ '^([a-z0-9][a-z0-9._-]{0,31}( |$))*$');

-- GET /v1/endpoints?tag=x: containment (tags @> ARRAY[x]) through the index, whatever the account's size.
CREATE INDEX endpoints_tags_idx ON endpoints USING gin (tags);

ALTER TABLE rate_limit_rules ADD COLUMN tags text[] NOT NULL DEFAULT '{}'
  CONSTRAINT rate_limit_rules_tags_check CHECK (cardinality(tags) <= 16 AND array_to_string(tags, ' ') ~ '^([a-z0-9][a-z0-9._-]{0,31}( |$))*$');

ALTER TABLE routing_rules ADD COLUMN tags text[] NOT NULL DEFAULT '{}'
  CONSTRAINT routing_rules_tags_check CHECK (cardinality(tags) <= 16 AND array_to_string(tags, ' ') ~ '^([a-z0-9][a-z0-9._-]{0,31}( |$))*$');

ALTER TABLE alert_rules ADD COLUMN tags text[] NOT NULL DEFAULT '{}'
  CONSTRAINT alert_rules_tags_check CHECK (cardinality(tags) <= 16 AND array_to_string(tags, ' ') ~ '^([a-z0-9][a-z0-9._-]{0,31}( |$))*$');
