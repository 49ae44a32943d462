-- Traffic storage (issue #13, docs/traffic.md "Storage"): captured exchanges, usage counters kept whatever the
-- capture setting, the per-minute rollup that metrics and alerts read, and the record keys the worker has applied.

-- One captured exchange. Written only by the worker from edge records (src/store/traffic.ts), never updated.
CREATE TABLE traffic_logs (
  id bigserial PRIMARY KEY,
  -- "<stream entry id>:<index in the entry>": a redelivered batch hits the unique index and writes nothing.
  record_key text NOT NULL,
  -- When the request reached the edge (the edge's clock).
  created_at timestamptz NOT NULL,
  account_id bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  -- The endpoint while it exists; its uuid and subdomain label stay when it is deleted (docs/api.md "Recent errors").
  endpoint_id bigint REFERENCES endpoints(id) ON DELETE SET NULL,
  endpoint_uuid uuid NOT NULL,
  endpoint_name text NOT NULL DEFAULT '',
  method text NOT NULL,
  host text NOT NULL,
  path text NOT NULL,
  query text NOT NULL DEFAULT '',
  -- 0 when the exchange ended before a response head was sent.
  status_code integer NOT NULL CHECK (status_code >= 0 AND status_code <= 999),
  duration_ms double precision NOT NULL CHECK (duration_ms >= 0),
  bytes_in bigint NOT NULL DEFAULT 0 CHECK (bytes_in >= 0),
  bytes_out bigint NOT NULL DEFAULT 0 CHECK (bytes_out >= 0),
  source_ip text NOT NULL DEFAULT '',
  -- ISO 3166 alpha-2 when the edge knew it (the rate-limit stage's GeoIP lookup), else NULL.
  country text,
  user_agent text NOT NULL DEFAULT '',
  tls boolean NOT NULL DEFAULT false,
  routing_rule text,
  edge_node text NOT NULL DEFAULT '',
  region text NOT NULL DEFAULT '',
  -- The edge's own error code when the edge answered (X-Edge-Error), else NULL.
  edge_error text,
  -- What visitor authentication decided (e.g. none, allowed, denied) and the RBAC client, when those stages ran.
  auth_outcome text,
  rbac_client_id text,
  -- False when the response did not finish (visitor gone, upstream cut mid-body).
  completed boolean NOT NULL DEFAULT true,
  capture_level text NOT NULL CHECK (capture_level IN ('metadata', 'full')),
  -- Full captures only: header name → value(s), secrets redacted at the edge; the first 10 KiB of each body.
  request_headers jsonb,
  response_headers jsonb,
  request_body bytea,
  response_body bytea,
  request_body_truncated boolean NOT NULL DEFAULT false,
  response_body_truncated boolean NOT NULL DEFAULT false
);

CREATE UNIQUE INDEX traffic_logs_record_key ON traffic_logs (record_key);
-- Logs of an account, newest first (GET /v1/traffic/logs), and retention by the account's plan.
CREATE INDEX traffic_logs_account_time_idx ON traffic_logs (account_id, created_at DESC, id DESC);
-- Recent errors (GET /v1/traffic/errors/recent, with or without a tier).
CREATE INDEX traffic_logs_account_errors_idx ON traffic_logs (account_id, status_code, created_at DESC) WHERE status_code >= 400;
-- Logs of one endpoint, newest first.
CREATE INDEX traffic_logs_endpoint_time_idx ON traffic_logs (endpoint_uuid, created_at DESC, id DESC);

-- Usage per endpoint and UTC day: every exchange counts, capture on or off (docs/api.md). Kept after the endpoint goes.
CREATE TABLE endpoint_usage_daily (
  endpoint_uuid uuid NOT NULL,
  day date NOT NULL,
  account_id bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  endpoint_id bigint REFERENCES endpoints(id) ON DELETE SET NULL,
  requests bigint NOT NULL DEFAULT 0 CHECK (requests >= 0),
  bytes_in bigint NOT NULL DEFAULT 0 CHECK (bytes_in >= 0),
  bytes_out bigint NOT NULL DEFAULT 0 CHECK (bytes_out >= 0),
  errors_4xx bigint NOT NULL DEFAULT 0 CHECK (errors_4xx >= 0),
  errors_5xx bigint NOT NULL DEFAULT 0 CHECK (errors_5xx >= 0),
  PRIMARY KEY (endpoint_uuid, day)
);

CREATE INDEX endpoint_usage_daily_account_idx ON endpoint_usage_daily (account_id, day);

-- Per endpoint and UTC minute: what GET /v1/traffic/metrics and the alert evaluator read instead of raw rows.
-- latency_buckets[i] counts exchanges with duration <= the i-th bound of TRAFFIC_LATENCY_BOUNDS_MS
-- (src/shared/records/types.ts: 1,2,5,10,25,50,100,250,500,1000,2500,5000,10000,30000 ms, then +inf), so
-- p50/p95/p99 come from the cumulative counts of any set of minutes.
CREATE TABLE endpoint_traffic_minutely (
  endpoint_uuid uuid NOT NULL,
  minute timestamptz NOT NULL,
  account_id bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  endpoint_id bigint REFERENCES endpoints(id) ON DELETE SET NULL,
  requests bigint NOT NULL DEFAULT 0 CHECK (requests >= 0),
  errors_4xx bigint NOT NULL DEFAULT 0 CHECK (errors_4xx >= 0),
  errors_5xx bigint NOT NULL DEFAULT 0 CHECK (errors_5xx >= 0),
  -- Answers the edge gave itself (X-Edge-Error: agent offline, upstream unreachable, auth refusals, ...).
  edge_errors bigint NOT NULL DEFAULT 0 CHECK (edge_errors >= 0),
  -- Exchanges that did not finish (no response head, or cut mid-body).
  aborted bigint NOT NULL DEFAULT 0 CHECK (aborted >= 0),
  bytes_in bigint NOT NULL DEFAULT 0 CHECK (bytes_in >= 0),
  bytes_out bigint NOT NULL DEFAULT 0 CHECK (bytes_out >= 0),
  duration_sum_ms double precision NOT NULL DEFAULT 0,
  duration_max_ms double precision NOT NULL DEFAULT 0,
  latency_buckets bigint[] NOT NULL,
  PRIMARY KEY (endpoint_uuid, minute)
);

CREATE INDEX endpoint_traffic_minutely_account_idx ON endpoint_traffic_minutely (account_id, minute);

-- Record batches (per kind) whose counts the worker has added, so a redelivered batch is not added twice. Pruned a
-- day after they were applied (a batch is redelivered within minutes, if ever).
CREATE TABLE applied_record_batches (
  record_key text PRIMARY KEY,
  applied_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX applied_record_batches_applied_idx ON applied_record_batches (applied_at);
