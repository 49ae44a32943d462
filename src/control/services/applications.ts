// Applications and their deployments as domain operations (docs/api.md "Applications and deployments"): CRUD with the
// endpoints' ownership rules, the webhook secret, the deployment queue (manual deploys, rollback, cancel) and the
// agent's reports. Each operation is one transaction holding the application's row lock; the store writes publish.
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { fail, invalid } from '../../shared/errors.ts';
import { FINISHED_STATUSES, type AgentControlEvent, type AgentEventsAnswer, type AgentEventsBody, type DeploymentStatus } from '../../shared/deploy.ts';
import { isUuid } from '../../shared/schema.ts';
import * as apps from '../../store/applications.ts';
import type { ApplicationFields, ApplicationRow, ApplicationSource, GitProvider } from '../../store/applications.ts';
import { isUniqueViolation, type Queryable, type Transaction } from '../../store/db.ts';
import * as deployments from '../../store/deployments.ts';
import type { DeploymentRow } from '../../store/deployments.ts';
import type { Caller } from '../caller.ts';
import { canSee, endpointForCaller } from '../endpoint-access.ts';
import type { ControlDeps } from '../http.ts';

export const PAGE_SIZE_DEFAULT = 20;
export const PAGE_SIZE_MAX = 100;
/** Where a provider delivers pushes: `<public control URL>` + this + the application's uuid. */
export const WEBHOOK_PATH_PREFIX = '/api/webhooks/git/';

export interface ApplicationInput {
  name?: string;
  endpoint?: string;
  source?: ApplicationSource;
  repository_url?: string | null;
  provider?: GitProvider | null;
  branch?: string;
  auto_deploy?: boolean;
  build_command?: string | null;
  run_command?: string;
  health_path?: string;
}

export interface PageQuery {
  page?: string;
  page_size?: string;
}

function lenientPositiveInt(value: string | undefined, fallback: number): number {
  if (value === undefined || !/^[0-9]{1,20}$/.test(value)) return fallback;
  const n = Number(value);
  return n >= 1 ? n : fallback;
}

/**
 * Why a repository URL is refused, or null when the agent's `git` may fetch it: https (no credentials: the URL is
 * shown to agents and in the API), ssh:// or scp-like `user@host:path`, and file:// only where the operator allows it
 * (tests). Never another transport (`ext::`, `fd::`, git://, http://), whitespace, or a leading dash.
 */
export function repositoryUrlProblem(url: string, allowFile: boolean): string | null {
  if (url.length === 0 || url.length > 2048) return 'must be 1-2048 characters';
  if (/[\s\u0000-\u001f\u007f]/.test(url)) return 'may not contain whitespace or control characters';
  if (url.startsWith('-')) return 'may not start with a dash';
  if (/^[A-Za-z][A-Za-z0-9+.-]*::/.test(url)) return 'remote helper transports (ext::, fd::) are not allowed';
  const scp = /^([A-Za-z0-9][A-Za-z0-9._-]*)@([A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):([^\s]+)$/.exec(url);
  if (scp && !url.includes('://')) {
    if (scp[3].startsWith('-')) return 'the path may not start with a dash';
    return null;
  }
  if (!URL.canParse(url)) return 'must be an https://, ssh:// or user@host:path URL';
  const parsed = new URL(url);
  switch (parsed.protocol) {
    case 'https:':
      if (parsed.username || parsed.password) return 'may not carry credentials (the agent machine’s own credential helper or keys are used)';
      if (!parsed.hostname || parsed.pathname === '/' || parsed.pathname === '') return 'must name a host and a repository path';
      return null;
    case 'ssh:':
      if (parsed.password) return 'may not carry a password';
      if (!parsed.hostname || parsed.pathname === '/' || parsed.pathname === '') return 'must name a host and a repository path';
      if (parsed.hostname.startsWith('-') || parsed.username.startsWith('-')) return 'may not start a host or user with a dash';
      return null;
    case 'file:':
      if (!allowFile) return 'file:// repositories are not allowed on this server (EDGE_DEPLOY_ALLOW_FILE_URLS)';
      if (parsed.host !== '' || !parsed.pathname.startsWith('/') || parsed.pathname === '/') return 'must be file:///absolute/path';
      return null;
    default:
      return 'must be an https://, ssh:// or user@host:path URL';
  }
}

/** A fresh webhook secret: 32 random bytes, base64url. */
export function newWebhookSecret(): string {
  return randomBytes(32).toString('base64url');
}

export interface WebhookView {
  url: string;
  secret: string;
  provider: GitProvider;
  branch: string;
  auto_deploy: boolean;
}

/** One event's result for the agent-events answer. */
type EventResult = AgentEventsAnswer['results'][number];
const refused = (code: string, message: string): EventResult => ({ ok: false, code, message });

/** The moves an agent may report, from → to (failed and cancelled from any unfinished status). */
const AGENT_MOVES: Record<string, readonly DeploymentStatus[]> = {
  building: ['queued'],
  deploying: ['building'],
  live: ['deploying'],
  failed: ['queued', 'building', 'deploying'],
  cancelled: ['queued', 'building', 'deploying'],
};

export function applicationService({ db, config, secrets }: Pick<ControlDeps, 'db' | 'config' | 'secrets'>) {
  /** Loads the application a path names: 400 for a malformed uuid, 404 when missing or another account's. */
  async function appForCaller(q: Queryable, caller: Caller, uuid: string, opts: { forUpdate?: boolean } = {}): Promise<ApplicationRow> {
    if (!isUuid(uuid)) throw fail.invalid_id('Invalid application id', { field: 'uuid', reason: 'the application id must be a UUID' });
    const app = await apps.findApplicationByUuid(q, uuid.toLowerCase(), opts);
    if (!app || !canSee(caller, app)) throw fail.not_found('Application not found');
    return app;
  }

  function deploymentId(raw: string): number {
    if (!/^[1-9][0-9]{0,15}$/.test(raw) || !Number.isSafeInteger(Number(raw))) throw fail.invalid_id('Invalid deployment id', { field: 'id', reason: 'must be a positive integer' });
    return Number(raw);
  }

  async function deploymentOf(q: Queryable, app: ApplicationRow, rawId: string): Promise<DeploymentRow> {
    const d = await deployments.findDeployment(q, app.id, deploymentId(rawId));
    if (!d) throw fail.not_found('Deployment not found');
    return d;
  }

  /**
   * The fields an application will have: `input` over `current` (none for a create), checked as a whole. A git
   * application gets a webhook secret the first time it is git; a manual one keeps none.
   */
  async function resolveFields(q: Queryable, caller: Caller, input: ApplicationInput, current: ApplicationRow | null): Promise<ApplicationFields & { accountId: number }> {
    let endpointId = current?.endpoint_id;
    let accountId = current?.account_id;
    if (input.endpoint !== undefined) {
      if (!isUuid(input.endpoint)) throw invalid('endpoint', 'must be an endpoint uuid');
      const endpoint = await endpointForCaller(q, caller, input.endpoint);
      // An application stays in its account: another account's endpoint is as invisible as a missing one.
      if (current && endpoint.account_id !== current.account_id) throw fail.not_found('Endpoint not found');
      endpointId = endpoint.id;
      accountId = endpoint.account_id;
    }
    const source = input.source ?? current?.source ?? 'git';
    const name = input.name ?? current?.name;
    const runCommand = input.run_command ?? current?.run_command;
    if (name === undefined) throw invalid('name', 'missing required field');
    if (endpointId === undefined || accountId === undefined) throw invalid('endpoint', 'missing required field');
    if (runCommand === undefined) throw invalid('run_command', 'missing required field');

    let repositoryUrl: string | null = null;
    let provider: GitProvider | null = null;
    let sealed: string | null = null;
    if (source === 'git') {
      repositoryUrl = input.repository_url === undefined ? (current?.repository_url ?? null) : input.repository_url;
      provider = input.provider === undefined ? (current?.provider ?? null) : input.provider;
      if (repositoryUrl === null) throw invalid('repository_url', 'missing required field');
      if (provider === null) throw invalid('provider', 'missing required field');
      const problem = repositoryUrlProblem(repositoryUrl, config.deploy.allowFileUrls);
      if (problem) throw invalid('repository_url', problem);
      sealed = current?.webhook_secret_sealed ?? secrets.seal(newWebhookSecret());
    } else {
      for (const field of ['repository_url', 'provider'] as const) {
        if (input[field] !== undefined && input[field] !== null) throw invalid(field, 'only a git application has one');
      }
    }
    return {
      accountId,
      endpointId,
      name,
      source,
      repositoryUrl,
      provider,
      branch: input.branch ?? current?.branch ?? 'main',
      autoDeploy: input.auto_deploy ?? current?.auto_deploy ?? true,
      buildCommand: input.build_command === undefined ? (current?.build_command ?? null) : input.build_command,
      runCommand,
      healthPath: input.health_path ?? current?.health_path ?? '/',
      webhookSecretSealed: sealed,
    };
  }

  function conflict(which: 'name' | 'endpoint', f: Pick<ApplicationFields, 'name'>): never {
    if (which === 'endpoint') throw fail.already_exists('The endpoint already serves an application', { field: 'endpoint' });
    throw fail.already_exists(`An application named ${JSON.stringify(f.name)} already exists in the account`, { field: 'name' });
  }

  function requireGit(app: ApplicationRow): asserts app is ApplicationRow & { webhook_secret_sealed: string; provider: GitProvider } {
    if (app.source !== 'git' || app.webhook_secret_sealed === null || app.provider === null) throw fail.not_found('The application is not git-sourced: it has no webhook');
  }

  /** The public base URL of this control API: EDGE_PUBLIC_CONTROL_URL, else the listener's own address. */
  function publicBase(listener: AddressInfo | string | null): string {
    if (config.publicControlUrl) return config.publicControlUrl.replace(/\/+$/, '');
    const port = listener && typeof listener === 'object' ? listener.port : config.controlPort;
    let host = config.bindHost;
    if (host === '0.0.0.0') host = '127.0.0.1';
    if (host === '::') host = '::1';
    return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  }

  /** Judges one agent event inside the batch's transaction (the application's row lock held). */
  async function applyEvent(tx: Transaction, app: ApplicationRow, agentId: string, event: AgentControlEvent): Promise<EventResult> {
    if (event.type === 'process') {
      if (event.deployment_id !== null && !(await deployments.findDeployment(tx, app.id, event.deployment_id))) return refused('not_found', 'No such deployment of this application');
      await apps.setRuntime(tx, app.id, { state: event.state, restarts: event.restarts, message: event.message ?? null, deploymentId: event.deployment_id, agentId });
      return { ok: true };
    }
    const d = await deployments.findDeployment(tx, app.id, event.deployment_id);
    if (!d) return refused('not_found', 'No such deployment of this application');
    if (event.type === 'log') {
      if (d.agent_id === null) {
        return d.status === 'cancelled' ? refused('deployment_cancelled', 'The deployment was cancelled') : refused('invalid_transition', 'Report building before sending its log');
      }
      if (d.agent_id !== agentId) return refused('deployment_claimed', `The deployment is claimed by agent ${d.agent_id}`);
      await deployments.appendLog(tx, d.id, event.lines);
      return { ok: true };
    }
    // A status event.
    if (d.agent_id !== null && d.agent_id !== agentId) return refused('deployment_claimed', `The deployment is claimed by agent ${d.agent_id}`);
    // The same report again from the agent that made it (an edge retrying a batch): accepted, nothing moves.
    if (d.status === event.status && d.agent_id === agentId) {
      if (event.commit && d.commit_sha === null) await deployments.setDeploymentCommit(tx, d.id, event.commit);
      return { ok: true };
    }
    if (d.status === 'cancelled') return refused('deployment_cancelled', 'The deployment was cancelled');
    if (FINISHED_STATUSES.has(d.status)) return refused('deployment_finished', `The deployment has finished (${d.status})`);
    if (!AGENT_MOVES[event.status].includes(d.status)) return refused('invalid_transition', `A deployment cannot go from ${d.status} to ${event.status}`);
    if (event.status === 'building') {
      const running = await deployments.runningDeployment(tx, app.id);
      if (running) return refused('invalid_transition', `Deployment ${running.id} is running; one deploy runs at a time`);
    }
    const reason = event.status === 'failed' || event.status === 'cancelled' ? (event.reason ?? null) : null;
    await deployments.moveDeployment(tx, app, d, event.status, { agentId: event.status === 'building' ? agentId : undefined, commit: event.commit, reason });
    return { ok: true };
  }

  return {
    async create(caller: Caller, input: ApplicationInput): Promise<ApplicationRow> {
      return db.transaction(async (tx) => {
        const f = await resolveFields(tx, caller, input, null);
        const row = await apps.insertApplication(tx, f.accountId, f);
        if ('conflict' in row) conflict(row.conflict, f);
        return row;
      });
    },

    async list(caller: Caller, q: PageQuery): Promise<{ rows: ApplicationRow[]; total: number; page: number; pageSize: number }> {
      const { page, pageSize } = pageOf(q);
      const { rows, total } = await apps.listApplications(db, { accountId: caller.account.id }, pageSize, (page - 1) * pageSize);
      return { rows, total, page, pageSize };
    },

    get(caller: Caller, uuid: string): Promise<ApplicationRow> {
      return appForCaller(db, caller, uuid);
    },

    async update(caller: Caller, uuid: string, input: ApplicationInput): Promise<ApplicationRow> {
      return db.transaction(async (tx) => {
        const app = await appForCaller(tx, caller, uuid, { forUpdate: true });
        const f = await resolveFields(tx, caller, input, app);
        try {
          return await apps.updateApplication(tx, app, f);
        } catch (err) {
          if (isUniqueViolation(err, 'applications_endpoint_key')) conflict('endpoint', f);
          if (isUniqueViolation(err, 'applications_account_name_key')) conflict('name', f);
          throw err;
        }
      });
    },

    async remove(caller: Caller, uuid: string): Promise<void> {
      await db.transaction(async (tx) => {
        const app = await appForCaller(tx, caller, uuid, { forUpdate: true });
        await apps.deleteApplication(tx, app);
      });
    },

    /** The webhook's URL and secret; 404 for a manual application. */
    async webhook(caller: Caller, uuid: string, listener: AddressInfo | string | null): Promise<WebhookView> {
      const app = await appForCaller(db, caller, uuid);
      requireGit(app);
      return { url: `${publicBase(listener)}${WEBHOOK_PATH_PREFIX}${app.uuid}`, secret: secrets.open(app.webhook_secret_sealed), provider: app.provider, branch: app.branch, auto_deploy: app.auto_deploy };
    },

    /** A new secret; the old one stops working when this commits. */
    async regenerateWebhook(caller: Caller, uuid: string, listener: AddressInfo | string | null): Promise<{ url: string; secret: string }> {
      return db.transaction(async (tx) => {
        const app = await appForCaller(tx, caller, uuid, { forUpdate: true });
        requireGit(app);
        const secret = newWebhookSecret();
        await apps.setWebhookSecret(tx, app.id, secrets.seal(secret));
        return { url: `${publicBase(listener)}${WEBHOOK_PATH_PREFIX}${app.uuid}`, secret };
      });
    },

    async listDeployments(caller: Caller, uuid: string, q: PageQuery): Promise<{ rows: DeploymentRow[]; total: number; page: number; pageSize: number; app: ApplicationRow }> {
      const app = await appForCaller(db, caller, uuid);
      const { page, pageSize } = pageOf(q);
      const { rows, total } = await deployments.listDeployments(db, app.id, pageSize, (page - 1) * pageSize);
      return { rows, total, page, pageSize, app };
    },

    async getDeployment(caller: Caller, uuid: string, id: string): Promise<{ app: ApplicationRow; deployment: DeploymentRow; log: string[] }> {
      const app = await appForCaller(db, caller, uuid);
      const deployment = await deploymentOf(db, app, id);
      return { app, deployment, log: await deployments.readLog(db, deployment.id) };
    },

    /** A manual deploy of a branch (default the application's), optionally of one commit. */
    async deploy(caller: Caller, uuid: string, input: { ref?: string; commit?: string }): Promise<{ app: ApplicationRow; deployment: DeploymentRow }> {
      return db.transaction(async (tx) => {
        const app = await appForCaller(tx, caller, uuid, { forUpdate: true });
        const deployment = await deployments.enqueueDeployment(tx, app, { trigger: 'manual', ref: input.ref ?? app.branch, commit: input.commit ?? null });
        return { app, deployment };
      });
    },

    /** Deploys again the commit of a deployment that was live; 409 not_rollbackable for any other. */
    async rollback(caller: Caller, uuid: string, id: string): Promise<{ app: ApplicationRow; deployment: DeploymentRow }> {
      return db.transaction(async (tx) => {
        const app = await appForCaller(tx, caller, uuid, { forUpdate: true });
        const target = await deploymentOf(tx, app, id);
        if (target.live_at === null || target.commit_sha === null) throw fail.not_rollbackable(undefined, { deployment_id: target.id, status: target.status });
        const deployment = await deployments.enqueueDeployment(tx, app, { trigger: 'rollback', ref: target.ref, commit: target.commit_sha, rollbackOf: target.id });
        return { app, deployment };
      });
    },

    /** Cancels a queued or running deployment; 409 deployment_finished for a finished one. */
    async cancel(caller: Caller, uuid: string, id: string): Promise<{ app: ApplicationRow; deployment: DeploymentRow }> {
      return db.transaction(async (tx) => {
        const app = await appForCaller(tx, caller, uuid, { forUpdate: true });
        const target = await deploymentOf(tx, app, id);
        if (FINISHED_STATUSES.has(target.status)) throw fail.deployment_finished(`The deployment has finished (${target.status})`, { deployment_id: target.id, status: target.status });
        const deployment = await deployments.moveDeployment(tx, app, target, 'cancelled', { reason: 'cancelled through the API' });
        return { app, deployment };
      });
    },

    /** A batch of a deploying agent's events, judged in order in one transaction: one result per event. */
    async agentEvents(caller: Caller, uuid: string, body: AgentEventsBody): Promise<AgentEventsAnswer> {
      return db.transaction(async (tx) => {
        const app = await appForCaller(tx, caller, uuid, { forUpdate: true });
        const results: EventResult[] = [];
        for (const event of body.events) results.push(await applyEvent(tx, app, body.agent_id, event));
        return { results };
      });
    },
  };

  function pageOf(q: PageQuery): { page: number; pageSize: number } {
    const page = lenientPositiveInt(q.page, 1);
    const pageSize = Math.min(lenientPositiveInt(q.page_size, PAGE_SIZE_DEFAULT), PAGE_SIZE_MAX);
    if (page * pageSize > config.listMaxOffset) {
      throw fail.pagination_too_deep(`page × page_size may not exceed ${config.listMaxOffset}`, { page, page_size: pageSize, max: config.listMaxOffset });
    }
    return { page, pageSize };
  }
}

export type ApplicationService = ReturnType<typeof applicationService>;
