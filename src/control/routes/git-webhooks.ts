// The git providers' push webhook, POST /api/webhooks/git/{uuid}: no API key (the signature over the exact bytes is
// the credential), so it lives in a plugin of its own whose content-type parser keeps the raw body as a Buffer, up to
// EDGE_DEPLOY_WEBHOOK_MAX_BYTES. Order of answers: 404 (unknown, malformed, not git), 413, 415, 401, 429, 400.
import type { FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import { EdgeError, fail } from '../../shared/errors.ts';
import type { ApplicationRow } from '../../store/applications.ts';
import type { ControlApp, ControlDeps } from '../http.ts';
import { WEBHOOK_PATH_PREFIX } from '../services/applications.ts';
import { gitWebhookService } from '../services/git-webhooks.ts';
import { ErrorBody } from '../views.ts';

const Queued = Type.Object({ status: Type.Literal('queued'), deployment_id: Type.Integer() }, { description: 'A deployment was queued (trigger push)' });
const Ignored = Type.Object(
  {
    status: Type.Literal('ignored'),
    reason: Type.Union(['ping', 'unsupported_event', 'tag', 'other_branch', 'branch_deleted', 'auto_deploy_off'].map((r) => Type.Literal(r))),
  },
  { description: 'Nothing was queued, and why' },
);

export function gitWebhookRoutes(app: ControlApp, deps: ControlDeps): void {
  const hooks = gitWebhookService(deps);
  const found = new WeakMap<FastifyRequest, ApplicationRow>();
  const limit = deps.config.deploy.webhookMaxBytes;

  app.register(async (scope: ControlApp) => {
    // Any media type is read (as bytes, up to the limit), so a body too large is 413 whatever it claims to be; the
    // service answers 415 for one that is not JSON, after the size.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: limit }, (_req, body, done) => done(null, body));

    // The application first (404 before the body is read): a delivery for nothing learns nothing else.
    scope.addHook('onRequest', async (req) => {
      const uuid = (req.params as { uuid?: string }).uuid ?? '';
      const application = await hooks.find(uuid);
      if (!application) throw fail.not_found('No git application has this webhook');
      found.set(req, application);
    });

    scope.post(
      `${WEBHOOK_PATH_PREFIX}:uuid`,
      {
        bodyLimit: limit,
        config: { public: true, ownBody: true },
        schema: {
          operationId: 'receiveGitWebhook',
          summary: 'Receive a git push (GitHub or GitLab webhook)',
          description:
            'No API key. GitHub: X-Hub-Signature-256 = sha256=<hex HMAC-SHA256 of the raw body with the secret>, X-GitHub-Event, X-GitHub-Delivery. GitLab: X-Gitlab-Token = the secret, ' +
            'X-Gitlab-Event, X-Gitlab-Event-UUID. 202 {status: queued, deployment_id} for a push to the application’s branch with auto_deploy on; 200 {status: ignored, reason} otherwise. ' +
            'A redelivery (same delivery id) gets the same answer and queues nothing. 404 unknown or not git; 413 over EDGE_DEPLOY_WEBHOOK_MAX_BYTES; 415 not JSON; ' +
            '401 webhook_signature_invalid (one body whatever was wrong); 429 webhook_rate_limited (Retry-After); 400 invalid JSON.',
          tags: ['applications'],
          security: [],
          params: Type.Object({ uuid: Type.String({ description: 'The application uuid' }) }),
          response: { 200: Ignored, 202: Queued, 400: ErrorBody, 401: ErrorBody, 404: ErrorBody, 413: ErrorBody, 415: ErrorBody, 429: ErrorBody, 503: ErrorBody },
        },
      },
      async (req, reply) => {
        const application = found.get(req)!;
        const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        try {
          const answer = await hooks.deliver(application, req.headers, raw);
          return reply.status(answer.status).send(answer.body);
        } catch (err) {
          if (err instanceof EdgeError && err.code === 'webhook_rate_limited') reply.header('retry-after', String((err.detail as { retry_after: number }).retry_after));
          throw err;
        }
      },
    );
  });
}
