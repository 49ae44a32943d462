// Applications and git push-to-deploy under /v1/applications: CRUD, the webhook's URL and secret, deployments (list,
// get with log, deploy, rollback, cancel) and the report route edges call for deploying agents. The operations live
// in services/applications.ts; the provider-facing webhook is routes/git-webhooks.ts.
import type { AddressInfo } from 'node:net';
import { AgentEventsAnswerSchema, AgentEventsBodySchema } from '../../shared/deploy.ts';
import type { ControlApp, ControlDeps } from '../http.ts';
import {
  AppParams,
  ApplicationList,
  ApplicationView,
  CreateApplicationBody,
  DeployBody,
  DeploymentDetail,
  DeploymentList,
  DeploymentParams,
  DeploymentView,
  Errors409,
  PageQuery,
  RegeneratedWebhookView,
  UpdateApplicationBody,
  WebhookView,
  applicationView,
  deploymentDetail,
  deploymentView,
} from '../schemas/applications.ts';
import { applicationService } from '../services/applications.ts';
import { ErrorResponses } from '../views.ts';
import { Type } from '@sinclair/typebox';

const TAGS = ['applications'];
const Deleted = Type.Null({ description: 'Deleted' });

export function applicationRoutes(app: ControlApp, deps: ControlDeps): void {
  const apps = applicationService(deps);
  const listener = () => app.server.address() as AddressInfo | string | null;

  app.post(
    '/v1/applications',
    {
      config: { permission: 'endpoints:write' },
      schema: {
        operationId: 'createApplication',
        summary: 'Create an application',
        description:
          'An application built and run by the deploying agent of one endpoint of the active account (another account’s endpoint is 404; one application per endpoint, ' +
          'names unique per account: 409 already_exists). source git (the default) needs repository_url and provider and gets a webhook secret; manual takes neither.',
        tags: TAGS,
        body: CreateApplicationBody,
        response: { 201: ApplicationView, ...Errors409 },
      },
    },
    async (req, reply) => {
      const row = await apps.create(req.caller, req.body);
      return reply.status(201).header('location', `/v1/applications/${row.uuid}`).send(applicationView(row));
    },
  );

  app.get(
    '/v1/applications',
    {
      config: { permission: 'endpoints:read' },
      schema: { operationId: 'listApplications', summary: 'List applications', description: 'The active account’s, newest first, paged like endpoints.', tags: TAGS, querystring: PageQuery, response: { 200: ApplicationList, ...ErrorResponses } },
    },
    async (req) => {
      const { rows, total, page, pageSize } = await apps.list(req.caller, req.query);
      return { items: rows.map(applicationView), total, page, page_size: pageSize };
    },
  );

  app.get(
    '/v1/applications/:uuid',
    {
      config: { permission: 'endpoints:read' },
      schema: { operationId: 'getApplication', summary: 'Get an application', description: 'With the live deployment and the runtime state its agent last reported.', tags: TAGS, params: AppParams, response: { 200: ApplicationView, ...ErrorResponses } },
    },
    async (req) => applicationView(await apps.get(req.caller, req.params.uuid)),
  );

  app.patch(
    '/v1/applications/:uuid',
    {
      config: { permission: 'endpoints:update' },
      schema: {
        operationId: 'updateApplication',
        summary: 'Update an application',
        description: 'Omitted fields keep their values. Switching to manual drops the repository, provider and webhook secret; switching to git needs repository_url and provider.',
        tags: TAGS,
        params: AppParams,
        body: UpdateApplicationBody,
        response: { 200: ApplicationView, ...Errors409 },
      },
    },
    async (req) => applicationView(await apps.update(req.caller, req.params.uuid, req.body)),
  );

  app.delete(
    '/v1/applications/:uuid',
    {
      config: { permission: 'endpoints:delete' },
      schema: { operationId: 'deleteApplication', summary: 'Delete an application', description: 'With its deployments, logs and deliveries; its agents stop being given orders.', tags: TAGS, params: AppParams, response: { 204: Deleted, ...ErrorResponses } },
    },
    async (req, reply) => {
      await apps.remove(req.caller, req.params.uuid);
      return reply.status(204).send(null);
    },
  );

  // ---- the webhook: SPEC contract -----------------------------------------------------------------------------------

  app.get(
    '/v1/applications/:uuid/webhook',
    {
      config: { permission: 'endpoints:update' },
      schema: {
        operationId: 'getApplicationWebhook',
        summary: 'The application’s git webhook',
        description: 'SPEC contract: 200 {url, secret, provider, branch, auto_deploy}. 404 for an application that is not git-sourced. Needs endpoints:update (it shows the secret).',
        tags: TAGS,
        params: AppParams,
        response: { 200: WebhookView, ...ErrorResponses },
      },
    },
    async (req) => apps.webhook(req.caller, req.params.uuid, listener()),
  );

  app.post(
    '/v1/applications/:uuid/webhook/regenerate',
    {
      config: { permission: 'endpoints:update' },
      schema: {
        operationId: 'regenerateApplicationWebhook',
        summary: 'Regenerate the webhook secret',
        description: 'SPEC contract: no body; 200 {url, secret}. The url is unchanged; the old secret stops verifying at once. 404 for an application that is not git-sourced.',
        tags: TAGS,
        params: AppParams,
        response: { 200: RegeneratedWebhookView, ...ErrorResponses },
      },
    },
    async (req) => apps.regenerateWebhook(req.caller, req.params.uuid, listener()),
  );

  // ---- deployments --------------------------------------------------------------------------------------------------

  app.get(
    '/v1/applications/:uuid/deployments',
    {
      config: { permission: 'endpoints:read' },
      schema: { operationId: 'listDeployments', summary: 'List deployments', description: 'Newest first, paged.', tags: TAGS, params: AppParams, querystring: PageQuery, response: { 200: DeploymentList, ...ErrorResponses } },
    },
    async (req) => {
      const { rows, total, page, pageSize, app: row } = await apps.listDeployments(req.caller, req.params.uuid, req.query);
      return { items: rows.map((d) => deploymentView(row, d)), total, page, page_size: pageSize };
    },
  );

  app.get(
    '/v1/applications/:uuid/deployments/:id',
    {
      config: { permission: 'endpoints:read' },
      schema: { operationId: 'getDeployment', summary: 'Get a deployment with its log', description: 'The log keeps the newest 2000 lines.', tags: TAGS, params: DeploymentParams, response: { 200: DeploymentDetail, ...ErrorResponses } },
    },
    async (req) => {
      const { app: row, deployment, log } = await apps.getDeployment(req.caller, req.params.uuid, req.params.id);
      return deploymentDetail(row, deployment, log);
    },
  );

  app.post(
    '/v1/applications/:uuid/deployments',
    {
      config: { permission: 'endpoints:update' },
      schema: {
        operationId: 'createDeployment',
        summary: 'Deploy',
        description: '202 with the queued deployment (trigger manual). It supersedes every deployment still queued; one that runs finishes first.',
        tags: TAGS,
        params: AppParams,
        body: DeployBody,
        response: { 202: DeploymentView, ...ErrorResponses },
      },
    },
    async (req, reply) => {
      const { app: row, deployment } = await apps.deploy(req.caller, req.params.uuid, req.body);
      return reply.status(202).send(deploymentView(row, deployment));
    },
  );

  app.post(
    '/v1/applications/:uuid/deployments/:id/rollback',
    {
      config: { permission: 'endpoints:update' },
      schema: {
        operationId: 'rollbackDeployment',
        summary: 'Roll back to a deployment',
        description: '202 with a new deployment (trigger rollback) of that deployment’s commit. Only a deployment that was live with a known commit: else 409 not_rollbackable.',
        tags: TAGS,
        params: DeploymentParams,
        response: { 202: DeploymentView, ...Errors409 },
      },
    },
    async (req, reply) => {
      const { app: row, deployment } = await apps.rollback(req.caller, req.params.uuid, req.params.id);
      return reply.status(202).send(deploymentView(row, deployment));
    },
  );

  app.post(
    '/v1/applications/:uuid/deployments/:id/cancel',
    {
      config: { permission: 'endpoints:update' },
      schema: {
        operationId: 'cancelDeployment',
        summary: 'Cancel a deployment',
        description: '200 with the deployment, now cancelled (from queued, building or deploying; a running one’s agent stops it). 409 deployment_finished once it has finished.',
        tags: TAGS,
        params: DeploymentParams,
        response: { 200: DeploymentView, ...Errors409 },
      },
    },
    async (req) => {
      const { app: row, deployment } = await apps.cancel(req.caller, req.params.uuid, req.params.id);
      return deploymentView(row, deployment);
    },
  );

  // ---- the deploying agent's reports, relayed by an edge with the agent's own key ----------------------------------

  app.post(
    '/v1/applications/:uuid/agent-events',
    {
      config: { permission: 'tunnels:connect' },
      schema: {
        operationId: 'reportDeployAgentEvents',
        summary: 'Report a deploying agent’s events',
        description:
          'Called by an edge on behalf of the agent agent_id, with the agent’s own key (tunnels:connect in the application’s account). Events are judged in order; ' +
          'each result is ok, or refused with a code: deployment_cancelled, deployment_claimed, deployment_finished, not_found, invalid_transition.',
        tags: TAGS,
        params: AppParams,
        body: AgentEventsBodySchema,
        response: { 200: AgentEventsAnswerSchema, ...ErrorResponses },
      },
    },
    async (req) => apps.agentEvents(req.caller, req.params.uuid, req.body),
  );
}
