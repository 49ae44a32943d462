-- Traffic alerts (docs/api.md "Traffic alerts", docs/traffic.md "Alerts"): rules an account sets on its
-- endpoints' traffic or health, the evaluator's state and lease on each, and the events recorded on transitions and tests.

CREATE TABLE alert_rules (
  id bigserial PRIMARY KEY,
  uuid uuid NOT NULL DEFAULT gen_random_uuid(),
  account_id bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  -- Who created the rule.
  user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
  -- One endpoint of the account, or NULL for all of them. A rule about an endpoint goes with it: turning it into an
  -- account-wide rule (SET NULL) would alert on traffic its owner never asked about.
  endpoint_id bigint REFERENCES endpoints(id) ON DELETE CASCADE,
  metric text NOT NULL CHECK (metric IN ('error_rate', 'errors_5xx', 'requests', 'latency_p95_ms', 'endpoint_down')),
  comparison text NOT NULL CHECK (comparison IN ('gt', 'lt')),
  threshold double precision NOT NULL CHECK (threshold >= 0),
  window_seconds integer NOT NULL CHECK (window_seconds BETWEEN 60 AND 86400),
  -- [{type: "webhook", url, secret_sealed} | {type: "email", to}]: webhook secrets sealed with the node's SecretBox.
  channels jsonb NOT NULL,
  status text NOT NULL DEFAULT 'unknown' CHECK (status IN ('unknown', 'ok', 'firing')),
  last_value double precision,
  last_evaluated_at timestamptz,
  -- The evaluator holding the rule (src/worker/alerts.ts): taken by UPDATE … WHERE lease_until < now(), so one
  -- worker at a time evaluates a rule and sends its notifications.
  lease_owner text,
  lease_until timestamptz NOT NULL DEFAULT '-infinity',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX alert_rules_uuid_key ON alert_rules (uuid);
CREATE INDEX alert_rules_account_idx ON alert_rules (account_id, id);
CREATE INDEX alert_rules_endpoint_idx ON alert_rules (endpoint_id) WHERE endpoint_id IS NOT NULL;
CREATE INDEX alert_rules_lease_idx ON alert_rules (lease_until);

CREATE TABLE alert_events (
  id bigserial PRIMARY KEY,
  rule_id bigint NOT NULL REFERENCES alert_rules(id) ON DELETE CASCADE,
  status text NOT NULL CHECK (status IN ('firing', 'ok', 'test')),
  -- The observed metric (for a test, the rule's last value, 0 before its first evaluation).
  value double precision NOT NULL,
  triggered_at timestamptz NOT NULL DEFAULT now(),
  notified boolean NOT NULL DEFAULT false,
  -- Why not every channel was reached; "notification pending" until the sender reports.
  notification_err text
);

-- GET /v1/traffic/alerts/{uuid}/events: newest first.
CREATE INDEX alert_events_rule_idx ON alert_events (rule_id, triggered_at DESC, id DESC);
