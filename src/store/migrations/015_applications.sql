-- Applications and git push-to-deploy (docs/api.md "Applications and deployments"): an application is what a deploying
-- agent builds and runs behind one endpoint; deployments are its queue and history; webhook deliveries remember each
-- provider delivery's answer so a redelivery gets the same one. Rows are deleted outright, as endpoints are.

CREATE TABLE applications (
  id bigserial PRIMARY KEY,
  uuid uuid NOT NULL DEFAULT gen_random_uuid(),
  account_id bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  -- The endpoint the application serves; it goes with the endpoint (store/endpoints.ts withdraws its feed entry).
  endpoint_id bigint NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
  source text NOT NULL CHECK (source IN ('git', 'manual')),
  repository_url text CHECK (char_length(repository_url) BETWEEN 1 AND 2048),
  provider text CHECK (provider IN ('github', 'gitlab')),
  branch text NOT NULL DEFAULT 'main' CHECK (char_length(branch) BETWEEN 1 AND 255 AND branch !~ '^-' AND branch !~ '\.\.'),
  auto_deploy boolean NOT NULL DEFAULT true,
  build_command text CHECK (char_length(build_command) BETWEEN 1 AND 4096),
  run_command text NOT NULL CHECK (char_length(run_command) BETWEEN 1 AND 4096),
  health_path text NOT NULL DEFAULT '/' CHECK (char_length(health_path) BETWEEN 1 AND 255 AND left(health_path, 1) = '/'),
  -- The webhook secret, sealed with the node's secret key (src/shared/secrets.ts); git applications only.
  webhook_secret_sealed text,
  -- The supervised live process as the deploying agent last reported it (a `process` event).
  runtime_state text CHECK (runtime_state IN ('running', 'restarting', 'stopped')),
  runtime_restarts integer CHECK (runtime_restarts >= 0),
  runtime_message text CHECK (char_length(runtime_message) <= 1024),
  runtime_deployment_id bigint,
  runtime_agent_id text,
  runtime_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  -- A git application has a repository, a provider and a webhook secret; a manual one has none of them.
  CONSTRAINT applications_source_fields CHECK (
    (source = 'git' AND repository_url IS NOT NULL AND provider IS NOT NULL AND webhook_secret_sealed IS NOT NULL)
    OR (source = 'manual' AND repository_url IS NULL AND provider IS NULL AND webhook_secret_sealed IS NULL)
  )
);

CREATE UNIQUE INDEX applications_uuid_key ON applications (uuid);

-- One application per endpoint: the endpoint's agents run one release of one application.
CREATE UNIQUE INDEX applications_endpoint_key ON applications (endpoint_id);

CREATE UNIQUE INDEX applications_account_name_key ON applications (account_id, name);

CREATE TABLE deployments (
  id bigserial PRIMARY KEY,
  application_id bigint NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  status text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'building', 'deploying', 'live', 'failed', 'superseded', 'cancelled')),
  trigger text NOT NULL CHECK (trigger IN ('push', 'manual', 'rollback')),
  ref text NOT NULL CHECK (char_length(ref) BETWEEN 1 AND 255 AND ref !~ '^-' AND ref !~ '\.\.'),
  commit_sha text CHECK (commit_sha ~ '^([0-9a-f]{40}|[0-9a-f]{64})$'),
  -- The agent that claimed it (its first `building` event); every later event for it must come from that agent.
  agent_id text CHECK (char_length(agent_id) BETWEEN 1 AND 128),
  reason text CHECK (char_length(reason) <= 1024),
  rollback_of bigint REFERENCES deployments(id) ON DELETE SET NULL,
  -- Lines appended so far (the log keeps the newest 2000 of them).
  log_lines bigint NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now(),
  started_at timestamptz,
  finished_at timestamptz,
  live_at timestamptz,
  CONSTRAINT deployments_finished_at CHECK ((status IN ('live', 'failed', 'superseded', 'cancelled')) = (finished_at IS NOT NULL)),
  CONSTRAINT deployments_running_claimed CHECK (status NOT IN ('building', 'deploying') OR (agent_id IS NOT NULL AND started_at IS NOT NULL)),
  CONSTRAINT deployments_live_at CHECK (status <> 'live' OR live_at IS NOT NULL)
);

CREATE INDEX deployments_application_idx ON deployments (application_id, id);

-- One deploy runs at a time per application.
CREATE UNIQUE INDEX deployments_one_running_key ON deployments (application_id) WHERE status IN ('building', 'deploying');

-- A new deployment supersedes every queued one, so at most one waits.
CREATE UNIQUE INDEX deployments_one_queued_key ON deployments (application_id) WHERE status = 'queued';

-- One release is live; a deployment going live supersedes the one before it.
CREATE UNIQUE INDEX deployments_one_live_key ON deployments (application_id) WHERE status = 'live';

CREATE TABLE deployment_logs (
  deployment_id bigint NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
  seq bigint NOT NULL CHECK (seq >= 1),
  line text NOT NULL CHECK (char_length(line) <= 4096),
  PRIMARY KEY (deployment_id, seq)
);

CREATE TABLE webhook_deliveries (
  id bigserial PRIMARY KEY,
  application_id bigint NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  -- X-GitHub-Delivery or X-Gitlab-Event-UUID.
  delivery_id text NOT NULL CHECK (char_length(delivery_id) BETWEEN 1 AND 200),
  deployment_id bigint REFERENCES deployments(id) ON DELETE SET NULL,
  -- The answer given: 202 queued or 200 ignored, with the reason of an ignored one.
  answer_status text NOT NULL CHECK (answer_status IN ('queued', 'ignored')),
  reason text CHECK (char_length(reason) <= 64),
  created_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((answer_status = 'queued') = (reason IS NULL))
);

-- The same delivery to the same application is answered once: the index, not a lookup, refuses the second.
CREATE UNIQUE INDEX webhook_deliveries_key ON webhook_deliveries (application_id, delivery_id);

CREATE INDEX webhook_deliveries_age_idx ON webhook_deliveries (application_id, created_at);
