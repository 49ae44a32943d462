// An application's deployments (docs/api.md "Applications and deployments"): the queue, the status moves, the bounded
// log, and the webhook deliveries that remember their answers. Callers hold the application's row lock
// (findApplicationByUuid forUpdate) for every write here; a write that changes the order touches the application.
import type { Queryable } from './db.ts';
import { touchApplication } from './applications.ts';
import type { DeploymentStatus, DeploymentTrigger } from '../shared/deploy.ts';

/** The newest lines of a deployment's log kept; older ones are dropped as new ones arrive. */
export const MAX_LOG_LINES_KEPT = 2000;

export interface DeploymentRow {
  id: number;
  application_id: number;
  status: DeploymentStatus;
  trigger: DeploymentTrigger;
  ref: string;
  commit_sha: string | null;
  agent_id: string | null;
  reason: string | null;
  rollback_of: number | null;
  log_lines: number;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  live_at: Date | null;
}

const COLUMNS = 'id, application_id, status, trigger, ref, commit_sha, agent_id, reason, rollback_of, log_lines, created_at, started_at, finished_at, live_at';

type App = { id: number; uuid: string };

export async function findDeployment(db: Queryable, applicationId: number, id: number): Promise<DeploymentRow | null> {
  const { rows } = await db.query<DeploymentRow>(`SELECT ${COLUMNS} FROM deployments WHERE id = $1 AND application_id = $2`, [id, applicationId]);
  return rows[0] ?? null;
}

/** Newest first. */
export async function listDeployments(db: Queryable, applicationId: number, limit: number, offset: number): Promise<{ rows: DeploymentRow[]; total: number }> {
  const [{ rows }, count] = await Promise.all([
    db.query<DeploymentRow>(`SELECT ${COLUMNS} FROM deployments WHERE application_id = $1 ORDER BY id DESC LIMIT ${limit} OFFSET ${offset}`, [applicationId]),
    db.query<{ n: number }>('SELECT count(*)::int AS n FROM deployments WHERE application_id = $1', [applicationId]),
  ]);
  return { rows, total: count.rows[0].n };
}

/** The deployment running now (building or deploying), if any. */
export async function runningDeployment(db: Queryable, applicationId: number): Promise<DeploymentRow | null> {
  const { rows } = await db.query<DeploymentRow>(`SELECT ${COLUMNS} FROM deployments WHERE application_id = $1 AND status IN ('building', 'deploying')`, [applicationId]);
  return rows[0] ?? null;
}

/**
 * Queues a deployment. Every one still queued is superseded by it (the running one is left alone: it finishes, then
 * this one runs). The application's order changes only when nothing was running or queued, but its entry is
 * republished either way (one version per commit).
 */
export async function enqueueDeployment(
  tx: Queryable,
  app: App,
  d: { trigger: DeploymentTrigger; ref: string; commit: string | null; rollbackOf?: number | null },
): Promise<DeploymentRow> {
  await tx.query(
    `UPDATE deployments SET status = 'superseded', finished_at = now(), reason = 'superseded by a newer deployment'
     WHERE application_id = $1 AND status = 'queued'`,
    [app.id],
  );
  const { rows } = await tx.query<DeploymentRow>(
    `INSERT INTO deployments (application_id, trigger, ref, commit_sha, rollback_of) VALUES ($1, $2, $3, $4, $5) RETURNING ${COLUMNS}`,
    [app.id, d.trigger, d.ref, d.commit, d.rollbackOf ?? null],
  );
  touchApplication(tx, app.uuid);
  return rows[0];
}

/**
 * Moves a deployment to `status` (the caller judged the transition). `agentId` claims it (building); `commit` sets the
 * sha when given; `reason` is kept for failed and cancelled. Going live supersedes the release live before it.
 */
export async function moveDeployment(
  tx: Queryable,
  app: App,
  d: Pick<DeploymentRow, 'id'>,
  status: DeploymentStatus,
  extra: { agentId?: string; commit?: string; reason?: string | null } = {},
): Promise<DeploymentRow> {
  if (status === 'live') {
    await tx.query(
      `UPDATE deployments SET status = 'superseded', reason = 'superseded by deployment ' || $2::bigint WHERE application_id = $1 AND status = 'live' AND id <> $2`,
      [app.id, d.id],
    );
  }
  const { rows } = await tx.query<DeploymentRow>(
    `UPDATE deployments SET
       status = $2,
       agent_id = COALESCE($3, agent_id),
       commit_sha = COALESCE($4, commit_sha),
       reason = CASE WHEN $5::text IS NULL THEN reason ELSE $5::text END,
       started_at = CASE WHEN $2 IN ('building', 'deploying') THEN COALESCE(started_at, now()) ELSE started_at END,
       finished_at = CASE WHEN $2 IN ('live', 'failed', 'superseded', 'cancelled') THEN COALESCE(finished_at, now()) ELSE NULL END,
       live_at = CASE WHEN $2 = 'live' THEN now() ELSE live_at END
     WHERE id = $1 RETURNING ${COLUMNS}`,
    [d.id, status, extra.agentId ?? null, extra.commit ?? null, extra.reason ?? null],
  );
  touchApplication(tx, app.uuid);
  return rows[0];
}

/** Sets the resolved sha of a deployment without moving it (a repeated status event that names its commit). */
export async function setDeploymentCommit(tx: Queryable, id: number, commit: string): Promise<void> {
  await tx.query('UPDATE deployments SET commit_sha = $2 WHERE id = $1', [id, commit]);
}

/** Appends lines in order, keeping the newest MAX_LOG_LINES_KEPT; the caller has bounded each line's length. */
export async function appendLog(tx: Queryable, deploymentId: number, lines: readonly string[]): Promise<void> {
  if (lines.length === 0) return;
  const { rows } = await tx.query<{ log_lines: number }>('UPDATE deployments SET log_lines = log_lines + $2 WHERE id = $1 RETURNING log_lines', [deploymentId, lines.length]);
  const last = rows[0].log_lines;
  const first = last - lines.length + 1;
  await tx.query(
    `INSERT INTO deployment_logs (deployment_id, seq, line)
     SELECT $1, $2::bigint + t.ord - 1, t.line FROM unnest($3::text[]) WITH ORDINALITY AS t(line, ord)`,
    [deploymentId, first, lines],
  );
  if (last > MAX_LOG_LINES_KEPT) await tx.query('DELETE FROM deployment_logs WHERE deployment_id = $1 AND seq <= $2', [deploymentId, last - MAX_LOG_LINES_KEPT]);
}

/** The kept lines, oldest first. */
export async function readLog(db: Queryable, deploymentId: number): Promise<string[]> {
  const { rows } = await db.query<{ line: string }>('SELECT line FROM deployment_logs WHERE deployment_id = $1 ORDER BY seq', [deploymentId]);
  return rows.map((r) => r.line);
}

// ---------------------------------------------------------------------------------------------------------------
// Webhook deliveries
// ---------------------------------------------------------------------------------------------------------------

/** Deliveries are remembered this long: a provider's redelivery of an older one is judged afresh. */
export const DELIVERY_RETENTION_DAYS = 7;

export interface DeliveryRow {
  delivery_id: string;
  deployment_id: number | null;
  answer_status: 'queued' | 'ignored';
  reason: string | null;
}

export async function findDelivery(db: Queryable, applicationId: number, deliveryId: string): Promise<DeliveryRow | null> {
  const { rows } = await db.query<DeliveryRow>(
    'SELECT delivery_id, deployment_id, answer_status, reason FROM webhook_deliveries WHERE application_id = $1 AND delivery_id = $2',
    [applicationId, deliveryId],
  );
  return rows[0] ?? null;
}

/**
 * Records the answer given to a delivery, and forgets the application's deliveries older than the retention. The
 * caller holds the application's lock, so a concurrent copy of the same delivery waits and then finds this row; the
 * unique index stands behind that.
 */
export async function recordDelivery(tx: Queryable, applicationId: number, row: DeliveryRow): Promise<void> {
  await tx.query(`DELETE FROM webhook_deliveries WHERE application_id = $1 AND created_at < now() - make_interval(days => $2)`, [applicationId, DELIVERY_RETENTION_DAYS]);
  await tx.query('INSERT INTO webhook_deliveries (application_id, delivery_id, deployment_id, answer_status, reason) VALUES ($1, $2, $3, $4, $5)', [
    applicationId,
    row.delivery_id,
    row.deployment_id,
    row.answer_status,
    row.reason,
  ]);
}
