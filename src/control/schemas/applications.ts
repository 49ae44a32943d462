// Request and response shapes of the applications API (routes/applications.ts): applications, their webhook,
// deployments and the agent's report route; the row → JSON views behind them. services/applications.ts checks the rest.
import { Type } from '@sinclair/typebox';
import { COMMIT_SHA_PATTERN, DEPLOYMENT_STATUSES, DEPLOYMENT_TRIGGERS, GIT_REF_PATTERN } from '../../shared/deploy.ts';
import { Nullable, Strict, Timestamp, Uuid } from '../../shared/schema.ts';
import type { ApplicationRow } from '../../store/applications.ts';
import type { DeploymentRow } from '../../store/deployments.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';

/** No NUL: the store refuses it, and a command never needs one. */
const NO_NUL = '^[^\\u0000]*$';
const Name = Type.String({ minLength: 1, maxLength: 100, pattern: '^[^\\u0000-\\u001f\\u007f]+$', description: 'Unique in the account' });
const Source = Type.Union([Type.Literal('git'), Type.Literal('manual')], { description: 'git: deployed from a repository, on push or by hand; manual: deployed only by hand' });
const Provider = Type.Union([Type.Literal('github'), Type.Literal('gitlab')], { description: 'How webhook deliveries are signed: X-Hub-Signature-256 (github) or X-Gitlab-Token (gitlab)' });
const RepositoryUrl = Type.String({
  minLength: 1,
  maxLength: 2048,
  description: 'https://host/path (no credentials), ssh://[user@]host[:port]/path or user@host:path; file:///path only with EDGE_DEPLOY_ALLOW_FILE_URLS (tests)',
});
const Branch = Type.String({ pattern: GIT_REF_PATTERN, maxLength: 255, description: 'The branch deployed (default main): pushes to it deploy' });
const Command = (description: string) => Type.String({ minLength: 1, maxLength: 4096, pattern: NO_NUL, description });
const HealthPath = Type.String({ minLength: 1, maxLength: 255, pattern: '^/[!-~]*$', description: 'Polled on the new process until it answers 2xx (default /)' });
const Literals = <T extends readonly string[]>(values: T) => Type.Union(values.map((v) => Type.Literal(v)));

export const AppParams = Type.Object({ uuid: Type.String({ description: 'The application uuid' }) });
export const DeploymentParams = Type.Object({ uuid: Type.String({ description: 'The application uuid' }), id: Type.String({ description: 'The deployment id' }) });
export const PageQuery = Type.Object({
  page: Type.Optional(Type.String({ description: 'Page number from 1 (not a positive integer: 1)' })),
  page_size: Type.Optional(Type.String({ description: 'Default 20, at most 100' })),
});

export const CreateApplicationBody = Strict({
  name: Name,
  endpoint: Type.String({ description: 'The uuid of an endpoint of the active account; it serves the application (one application per endpoint)' }),
  source: Type.Optional(Source),
  repository_url: Type.Optional(RepositoryUrl),
  provider: Type.Optional(Provider),
  branch: Type.Optional(Branch),
  auto_deploy: Type.Optional(Type.Boolean({ description: 'Deploy on every push to the branch (default true)' })),
  build_command: Type.Optional(Nullable(Command('Run once per deployment in the checkout before the run command; null: none'))),
  run_command: Command('The long-running process serving the endpoint'),
  health_path: Type.Optional(HealthPath),
});

export const UpdateApplicationBody = Strict({
  name: Type.Optional(Name),
  endpoint: Type.Optional(Type.String({ description: 'Another endpoint of the application’s account' })),
  source: Type.Optional(Source),
  repository_url: Type.Optional(Nullable(RepositoryUrl)),
  provider: Type.Optional(Nullable(Provider)),
  branch: Type.Optional(Branch),
  auto_deploy: Type.Optional(Type.Boolean()),
  build_command: Type.Optional(Nullable(Command('null clears it'))),
  run_command: Type.Optional(Command('The long-running process serving the endpoint')),
  health_path: Type.Optional(HealthPath),
});

const RuntimeView = Type.Object(
  {
    state: Type.Union([Type.Literal('running'), Type.Literal('restarting'), Type.Literal('stopped')]),
    restarts: Type.Integer(),
    message: Nullable(Type.String()),
    deployment_id: Nullable(Type.Integer({ description: 'The deployment whose release runs' })),
    agent_id: Nullable(Type.String()),
    reported_at: Timestamp(),
  },
  { description: 'The live process as its agent last reported it' },
);

export const ApplicationView = Type.Object(
  {
    uuid: Uuid(),
    name: Type.String(),
    account_id: Type.Integer(),
    endpoint: Uuid({ description: 'The endpoint serving the application' }),
    source: Source,
    repository_url: Nullable(Type.String()),
    provider: Nullable(Provider),
    branch: Type.String(),
    auto_deploy: Type.Boolean(),
    build_command: Nullable(Type.String()),
    run_command: Type.String(),
    health_path: Type.String(),
    live_deployment_id: Nullable(Type.Integer({ description: 'The deployment live now' })),
    runtime: Nullable(RuntimeView),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { description: 'Application' },
);

export const ApplicationList = Type.Object({ items: Type.Array(ApplicationView), total: Type.Integer(), page: Type.Integer(), page_size: Type.Integer() });

export const WebhookView = Type.Object(
  {
    url: Type.String({ description: '<public control URL>/api/webhooks/git/{uuid}' }),
    secret: Type.String({ description: 'The webhook secret (GitHub: the HMAC key; GitLab: the token)' }),
    provider: Provider,
    branch: Type.String(),
    auto_deploy: Type.Boolean(),
  },
  { description: 'Where and how a git provider delivers pushes' },
);
export const RegeneratedWebhookView = Type.Object({ url: Type.String(), secret: Type.String({ description: 'The new secret; the old one no longer verifies' }) });

export const DeploymentView = Type.Object(
  {
    id: Type.Integer(),
    application: Uuid(),
    status: Literals(DEPLOYMENT_STATUSES),
    trigger: Literals(DEPLOYMENT_TRIGGERS),
    ref: Type.String({ description: 'The branch fetched' }),
    commit_sha: Nullable(Type.String({ description: 'The commit deployed: asked for, or resolved by the agent' })),
    agent_id: Nullable(Type.String({ description: 'The agent that claimed it' })),
    reason: Nullable(Type.String({ description: 'Why it failed, was cancelled or superseded' })),
    created_at: Timestamp(),
    started_at: Nullable(Timestamp()),
    finished_at: Nullable(Timestamp()),
    live_at: Nullable(Timestamp({ description: 'When it went live; stays set once superseded' })),
    rollback_of: Nullable(Type.Integer({ description: 'The deployment a rollback redeploys' })),
  },
  { description: 'Deployment' },
);
export const DeploymentDetail = Type.Object(
  {
    ...DeploymentView.properties,
    log: Type.Array(Type.String(), { description: 'The newest 2000 lines of the build and deploy output, oldest first' }),
    log_lines_dropped: Type.Integer({ description: 'Older lines no longer kept' }),
  },
  { description: 'Deployment with its log' },
);
export const DeploymentList = Type.Object({ items: Type.Array(DeploymentView), total: Type.Integer(), page: Type.Integer(), page_size: Type.Integer() });

export const DeployBody = Strict({
  ref: Type.Optional(Type.String({ pattern: GIT_REF_PATTERN, maxLength: 255, description: 'The branch to deploy (default the application’s)' })),
  commit: Type.Optional(Type.String({ pattern: COMMIT_SHA_PATTERN, description: 'One commit (40 or 64 hex digits); default the branch’s head' })),
});

export const Errors409 = { ...ErrorResponses, 409: ErrorBody };

export function applicationView(a: ApplicationRow) {
  return {
    uuid: a.uuid,
    name: a.name,
    account_id: a.account_id,
    endpoint: a.endpoint_uuid,
    source: a.source,
    repository_url: a.repository_url,
    provider: a.provider,
    branch: a.branch,
    auto_deploy: a.auto_deploy,
    build_command: a.build_command,
    run_command: a.run_command,
    health_path: a.health_path,
    live_deployment_id: a.live_deployment_id,
    runtime:
      a.runtime_state === null
        ? null
        : {
            state: a.runtime_state,
            restarts: a.runtime_restarts ?? 0,
            message: a.runtime_message,
            deployment_id: a.runtime_deployment_id,
            agent_id: a.runtime_agent_id,
            reported_at: iso(a.runtime_at!),
          },
    created_at: iso(a.created_at),
    updated_at: iso(a.updated_at),
  };
}

export function deploymentView(app: Pick<ApplicationRow, 'uuid'>, d: DeploymentRow) {
  return {
    id: d.id,
    application: app.uuid,
    status: d.status,
    trigger: d.trigger,
    ref: d.ref,
    commit_sha: d.commit_sha,
    agent_id: d.agent_id,
    reason: d.reason,
    created_at: iso(d.created_at),
    started_at: iso(d.started_at),
    finished_at: iso(d.finished_at),
    live_at: iso(d.live_at),
    rollback_of: d.rollback_of,
  };
}

export function deploymentDetail(app: Pick<ApplicationRow, 'uuid'>, d: DeploymentRow, log: string[]) {
  return { ...deploymentView(app, d), log, log_lines_dropped: Math.max(0, d.log_lines - log.length) };
}
