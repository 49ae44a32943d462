-- Health checks (docs/api.md "Health checks", docs/health-checks.md): the per-endpoint configuration with the prober's schedule
-- and lease, the cached last verdict, and the probe rows uptime is computed from.

-- One row per endpoint that has ever been configured; an endpoint without one has the defaults (disabled, `/`, 60 s).
CREATE TABLE health_checks (
  endpoint_id bigint PRIMARY KEY REFERENCES endpoints(id) ON DELETE CASCADE,
  enabled boolean NOT NULL DEFAULT false,
  -- NULL: the prober uses `/` (docs/api.md: null or empty clears). The API refuses anything else; the CHECK backs it.
  path text CHECK (path IS NULL OR (char_length(path) BETWEEN 1 AND 255 AND left(path, 1) = '/')),
  -- NULL: 60 s.
  interval_seconds integer CHECK (interval_seconds IS NULL OR interval_seconds BETWEEN 60 AND 86400),
  -- The prober's schedule: the next probe is due at next_probe_at. Claiming a probe moves it a whole interval on in
  -- the same statement, so no worker can claim the endpoint again within the interval.
  next_probe_at timestamptz,
  -- The lease: which worker is probing now and until when; a probe outliving its lease (a dead worker) frees it.
  lease_owner text,
  lease_until timestamptz,
  -- The cached last verdict (what GET health's last_check and the alert evaluator read): overwritten by every
  -- probe, ignored after 7 days and cleared by the worker's pruning.
  last_probe_id bigint,
  last_status text CHECK (last_status IN ('healthy', 'unhealthy', 'error', 'timeout')),
  last_status_code integer,
  last_latency_ms integer,
  last_error_message text,
  last_checked_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- What the prober's claim scans: enabled checks in due order.
CREATE INDEX health_checks_due_idx ON health_checks (next_probe_at) WHERE enabled;

CREATE TABLE health_probes (
  id bigserial PRIMARY KEY,
  endpoint_id bigint NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  status text NOT NULL CHECK (status IN ('healthy', 'unhealthy', 'error', 'timeout')),
  -- NULL on error and timeout (no response head arrived).
  status_code integer CHECK (status_code IS NULL OR status_code BETWEEN 100 AND 999),
  latency_ms integer NOT NULL CHECK (latency_ms >= 0),
  error_message text CHECK (error_message IS NULL OR char_length(error_message) <= 500),
  checked_at timestamptz NOT NULL DEFAULT now()
);

-- recent_checks and the uptime windows of one endpoint.
CREATE INDEX health_probes_endpoint_idx ON health_probes (endpoint_id, checked_at DESC, id DESC);
-- The 30-day pruning.
CREATE INDEX health_probes_checked_idx ON health_probes (checked_at);
