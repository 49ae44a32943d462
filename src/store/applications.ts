// Applications (git push-to-deploy, docs/api.md "Applications and deployments"): the application rows, the webhook
// secret (sealed by the caller), the runtime state agents report, and the application's feed entry. Every write that
// changes what a deploying agent sees touches the entry; it is built at commit (docs/feed.md), order included.
import type { Queryable } from './db.ts';
import { touch } from './feed-changes.ts';
import { APPLICATION_TOPIC, type ApplicationConfig, type DeploymentOrder } from '../shared/deploy.ts';

export type ApplicationSource = 'git' | 'manual';
export type GitProvider = 'github' | 'gitlab';
export type RuntimeState = 'running' | 'restarting' | 'stopped';

export interface ApplicationRow {
  id: number;
  uuid: string;
  account_id: number;
  endpoint_id: number;
  endpoint_uuid: string;
  name: string;
  source: ApplicationSource;
  repository_url: string | null;
  provider: GitProvider | null;
  branch: string;
  auto_deploy: boolean;
  build_command: string | null;
  run_command: string;
  health_path: string;
  webhook_secret_sealed: string | null;
  runtime_state: RuntimeState | null;
  runtime_restarts: number | null;
  runtime_message: string | null;
  runtime_deployment_id: number | null;
  runtime_agent_id: string | null;
  runtime_at: Date | null;
  /** The deployment live now, if any. */
  live_deployment_id: number | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = `a.id, a.uuid::text AS uuid, a.account_id, a.endpoint_id, e.uuid::text AS endpoint_uuid, a.name, a.source, a.repository_url,
  a.provider, a.branch, a.auto_deploy, a.build_command, a.run_command, a.health_path, a.webhook_secret_sealed, a.runtime_state,
  a.runtime_restarts, a.runtime_message, a.runtime_deployment_id, a.runtime_agent_id, a.runtime_at, a.created_at, a.updated_at,
  (SELECT d.id FROM deployments d WHERE d.application_id = a.id AND d.status = 'live') AS live_deployment_id`;
const FROM = 'FROM applications a JOIN endpoints e ON e.id = a.endpoint_id';

/** The fields a create or an update writes; the caller has validated them and sealed the secret. */
export interface ApplicationFields {
  name: string;
  endpointId: number;
  source: ApplicationSource;
  repositoryUrl: string | null;
  provider: GitProvider | null;
  branch: string;
  autoDeploy: boolean;
  buildCommand: string | null;
  runCommand: string;
  healthPath: string;
  webhookSecretSealed: string | null;
}

/** Publishes the application's entry at commit: its config and order as they stand then, or its removal when gone. */
export function touchApplication(tx: Queryable, uuid: string): void {
  touch(tx, { topic: APPLICATION_TOPIC, key: uuid, build: (q) => applicationConfig(q, uuid) });
}

/**
 * What agents run next (shared/deploy.ts DeploymentOrder): the application's oldest unfinished deployment, the one
 * running first, else the oldest queued; null when none.
 */
export async function deploymentOrder(db: Queryable, applicationId: number): Promise<DeploymentOrder | null> {
  const { rows } = await db.query<{ id: number; trigger: DeploymentOrder['trigger']; ref: string; commit_sha: string | null }>(
    `SELECT id, trigger, ref, commit_sha FROM deployments WHERE application_id = $1 AND status IN ('queued', 'building', 'deploying')
     ORDER BY (status <> 'queued') DESC, id LIMIT 1`,
    [applicationId],
  );
  const d = rows[0];
  return d ? { deployment_id: d.id, trigger: d.trigger, ref: d.ref, commit: d.commit_sha } : null;
}

/** The application's feed value (no secrets); null when it is gone. */
export async function applicationConfig(db: Queryable, uuid: string): Promise<ApplicationConfig | null> {
  const app = await findApplicationByUuid(db, uuid);
  if (!app) return null;
  return {
    uuid: app.uuid,
    name: app.name,
    account_id: app.account_id,
    endpoint_uuid: app.endpoint_uuid,
    source: app.source,
    repository_url: app.repository_url,
    build_command: app.build_command,
    run_command: app.run_command,
    health_path: app.health_path,
    order: await deploymentOrder(db, app.id),
  };
}

/**
 * One application by uuid. `forUpdate` locks its row first, in a statement of its own: every deployment write of an
 * application holds this lock, so the queue rules are judged on a stable queue.
 */
export async function findApplicationByUuid(db: Queryable, uuid: string, opts: { forUpdate?: boolean } = {}): Promise<ApplicationRow | null> {
  if (opts.forUpdate) await db.query('SELECT 1 FROM applications WHERE uuid = $1 FOR UPDATE', [uuid]);
  const { rows } = await db.query<ApplicationRow>(`SELECT ${COLUMNS} ${FROM} WHERE a.uuid = $1`, [uuid]);
  return rows[0] ?? null;
}

export async function listApplications(db: Queryable, filter: { accountId?: number }, limit: number, offset: number): Promise<{ rows: ApplicationRow[]; total: number }> {
  const params: unknown[] = [];
  const where = filter.accountId !== undefined ? `WHERE a.account_id = $${params.push(filter.accountId)}` : '';
  const [{ rows }, count] = await Promise.all([
    db.query<ApplicationRow>(`SELECT ${COLUMNS} ${FROM} ${where} ORDER BY a.id DESC LIMIT ${limit} OFFSET ${offset}`, params),
    db.query<{ n: number }>(`SELECT count(*)::int AS n FROM applications a ${where}`, params),
  ]);
  return { rows, total: count.rows[0].n };
}

/** The uuids of an endpoint's applications (deleting the endpoint deletes them: their entries are withdrawn). */
export async function applicationUuidsOfEndpoint(db: Queryable, endpointId: number): Promise<string[]> {
  const { rows } = await db.query<{ uuid: string }>('SELECT uuid::text AS uuid FROM applications WHERE endpoint_id = $1', [endpointId]);
  return rows.map((r) => r.uuid);
}

/**
 * Inserts an application; null when its name is taken in the account or its endpoint already has one (the unique
 * indexes decide, so concurrent creates cannot both win). `conflict` then says which.
 */
export async function insertApplication(tx: Queryable, accountId: number, f: ApplicationFields): Promise<ApplicationRow | { conflict: 'name' | 'endpoint' }> {
  const { rows } = await tx.query<{ uuid: string }>(
    `INSERT INTO applications (account_id, endpoint_id, name, source, repository_url, provider, branch, auto_deploy, build_command, run_command, health_path, webhook_secret_sealed)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT DO NOTHING RETURNING uuid::text AS uuid`,
    [accountId, f.endpointId, f.name, f.source, f.repositoryUrl, f.provider, f.branch, f.autoDeploy, f.buildCommand, f.runCommand, f.healthPath, f.webhookSecretSealed],
  );
  if (!rows[0]) {
    const taken = await tx.query('SELECT 1 FROM applications WHERE endpoint_id = $1', [f.endpointId]);
    return { conflict: taken.rowCount > 0 ? 'endpoint' : 'name' };
  }
  touchApplication(tx, rows[0].uuid);
  return (await findApplicationByUuid(tx, rows[0].uuid))!;
}

/** Rewrites every field (the caller merged the patch over the row). A taken name or endpoint throws the unique violation. */
export async function updateApplication(tx: Queryable, app: Pick<ApplicationRow, 'id' | 'uuid'>, f: ApplicationFields): Promise<ApplicationRow> {
  await tx.query(
    `UPDATE applications SET endpoint_id = $2, name = $3, source = $4, repository_url = $5, provider = $6, branch = $7, auto_deploy = $8,
       build_command = $9, run_command = $10, health_path = $11, webhook_secret_sealed = $12, updated_at = now() WHERE id = $1`,
    [app.id, f.endpointId, f.name, f.source, f.repositoryUrl, f.provider, f.branch, f.autoDeploy, f.buildCommand, f.runCommand, f.healthPath, f.webhookSecretSealed],
  );
  touchApplication(tx, app.uuid);
  return (await findApplicationByUuid(tx, app.uuid))!;
}

/** A new webhook secret (sealed): the old one stops working at commit. Agents do not see it, so the feed is not touched. */
export async function setWebhookSecret(tx: Queryable, id: number, sealed: string): Promise<void> {
  await tx.query('UPDATE applications SET webhook_secret_sealed = $2, updated_at = now() WHERE id = $1', [id, sealed]);
}

/** Deletes the application with its deployments, logs and deliveries; its feed entry is removed. */
export async function deleteApplication(tx: Queryable, app: Pick<ApplicationRow, 'id' | 'uuid'>): Promise<boolean> {
  const { rowCount } = await tx.query('DELETE FROM applications WHERE id = $1', [app.id]);
  if (rowCount > 0) touchApplication(tx, app.uuid);
  return rowCount > 0;
}

/** The live process as an agent reported it (a `process` event). Shown on GET; agents do not need it back. */
export async function setRuntime(
  tx: Queryable,
  id: number,
  runtime: { state: RuntimeState; restarts: number; message: string | null; deploymentId: number | null; agentId: string },
): Promise<void> {
  await tx.query(
    `UPDATE applications SET runtime_state = $2, runtime_restarts = $3, runtime_message = $4, runtime_deployment_id = $5, runtime_agent_id = $6,
       runtime_at = now() WHERE id = $1`,
    [id, runtime.state, runtime.restarts, runtime.message, runtime.deploymentId, runtime.agentId],
  );
}
