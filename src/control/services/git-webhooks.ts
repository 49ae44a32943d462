// Git push webhooks (POST /api/webhooks/git/{uuid}, docs/api.md "Git webhooks"): the provider's signature over the raw
// body, the per-application delivery rate, what a push means for the application, and redeliveries answered as the
// first time. The secrets and signature headers are never logged.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { COMMIT_SHA_PATTERN } from '../../shared/deploy.ts';
import { fail } from '../../shared/errors.ts';
import { isUuid } from '../../shared/schema.ts';
import * as apps from '../../store/applications.ts';
import type { ApplicationRow } from '../../store/applications.ts';
import * as deployments from '../../store/deployments.ts';
import type { ControlDeps } from '../http.ts';

export type WebhookAnswer = { status: 202; body: { status: 'queued'; deployment_id: number } } | { status: 200; body: { status: 'ignored'; reason: IgnoredReason } };

/** Why a delivery queued nothing (docs/api.md "Git webhooks"). */
export type IgnoredReason = 'ping' | 'unsupported_event' | 'tag' | 'other_branch' | 'branch_deleted' | 'auto_deploy_off';

const COMMIT = new RegExp(COMMIT_SHA_PATTERN);
const ZERO_SHA = /^0+$/;
const MAX_DELIVERY_ID_LENGTH = 200;
const WINDOW_MS = 60_000;

/** What a delivery asks of the application, before the application's settings are applied. */
type Push = { kind: 'ignore'; reason: IgnoredReason } | { kind: 'push'; ref: string; after: string | null; deleted: boolean };

const header = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const v = headers[name];
  return typeof v === 'string' ? v : undefined;
};

/** Deliveries per application in the last minute, per control node: a sliding log of instants. */
class DeliveryRate {
  private readonly seen = new Map<string, number[]>();

  constructor(private readonly perMinute: number) {}

  /** Counts one delivery; null when it is allowed, else the seconds until one more would be. */
  take(key: string, now = Date.now()): number | null {
    const since = now - WINDOW_MS;
    const times = (this.seen.get(key) ?? []).filter((t) => t > since);
    if (times.length >= this.perMinute) {
      this.seen.set(key, times);
      return Math.max(1, Math.ceil((times[0] + WINDOW_MS - now) / 1000));
    }
    times.push(now);
    this.seen.set(key, times);
    // Keys of applications that went quiet are dropped now and then, so the map stays as large as the active ones.
    if (this.seen.size > 10_000) for (const [k, v] of this.seen) if (v[v.length - 1] <= since) this.seen.delete(k);
    return null;
  }
}

function payloadObject(raw: Buffer): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw fail.invalid_json('Invalid JSON body', { field: '(body)', reason: (err as Error).message });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw fail.invalid_request('Invalid request body', { field: '(body)', reason: 'must be a JSON object' });
  return parsed as Record<string, unknown>;
}

function stringField(payload: Record<string, unknown>, field: string, required: boolean): string | null {
  const v = payload[field];
  if (v === undefined || v === null) {
    if (required) throw fail.invalid_request('Invalid request body', { field, reason: 'missing required field' });
    return null;
  }
  if (typeof v !== 'string') throw fail.invalid_request('Invalid request body', { field, reason: 'Expected string' });
  return v;
}

/** A GitHub delivery: `ping`, or a `push` with `ref`, `after` and `deleted`. */
function githubPush(headers: IncomingHttpHeaders, raw: Buffer): Push {
  const event = header(headers, 'x-github-event');
  const payload = payloadObject(raw);
  if (event === 'ping') return { kind: 'ignore', reason: 'ping' };
  if (event !== 'push') return { kind: 'ignore', reason: 'unsupported_event' };
  return { kind: 'push', ref: stringField(payload, 'ref', true)!, after: stringField(payload, 'after', false), deleted: payload.deleted === true };
}

/** A GitLab delivery: `Push Hook` (object_kind push) with `ref`, `after`, `checkout_sha`; `Tag Push Hook` is a tag. */
function gitlabPush(headers: IncomingHttpHeaders, raw: Buffer): Push {
  const event = header(headers, 'x-gitlab-event');
  const payload = payloadObject(raw);
  if (event === 'Tag Push Hook') return { kind: 'ignore', reason: 'tag' };
  if (event !== 'Push Hook' || payload.object_kind !== 'push') return { kind: 'ignore', reason: 'unsupported_event' };
  const after = stringField(payload, 'after', false);
  const checkout = stringField(payload, 'checkout_sha', false);
  const deleted = (after !== null && ZERO_SHA.test(after)) || (payload.checkout_sha === null && 'checkout_sha' in payload);
  return { kind: 'push', ref: stringField(payload, 'ref', true)!, after: after !== null && COMMIT.test(after) ? after : checkout, deleted };
}

export function gitWebhookService({ db, config, secrets }: Pick<ControlDeps, 'db' | 'config' | 'secrets'>) {
  const rate = new DeliveryRate(config.deploy.webhookRatePerMinute);
  // Tokens are compared as HMACs under a key of this process, so the comparison takes the same time whatever their lengths.
  const compareKey = randomBytes(32);
  const digest = (value: string) => createHmac('sha256', compareKey).update(value).digest();

  /** Whether the delivery carries the provider's proof of the secret: one answer for every way it can be wrong. */
  function signed(app: ApplicationRow, headers: IncomingHttpHeaders, raw: Buffer): boolean {
    const secret = secrets.open(app.webhook_secret_sealed!);
    if (app.provider === 'github') {
      const m = /^sha256=([0-9a-fA-F]{64})$/.exec(header(headers, 'x-hub-signature-256') ?? '');
      if (!m) return false;
      const expected = createHmac('sha256', secret).update(raw).digest();
      return timingSafeEqual(Buffer.from(m[1], 'hex'), expected);
    }
    const token = header(headers, 'x-gitlab-token');
    if (token === undefined) return false;
    return timingSafeEqual(digest(token), digest(secret));
  }

  /** What the push means for this application now. */
  function judge(app: ApplicationRow, push: Push): { queue: string | null } | { ignore: IgnoredReason } {
    if (push.kind === 'ignore') return { ignore: push.reason };
    if (push.ref.startsWith('refs/tags/')) return { ignore: 'tag' };
    if (push.ref !== `refs/heads/${app.branch}`) return { ignore: 'other_branch' };
    if (push.deleted || (push.after !== null && ZERO_SHA.test(push.after))) return { ignore: 'branch_deleted' };
    if (!app.auto_deploy) return { ignore: 'auto_deploy_off' };
    if (push.after !== null && !COMMIT.test(push.after)) throw fail.invalid_request('Invalid request body', { field: 'after', reason: 'not a commit sha' });
    return { queue: push.after };
  }

  return {
    /** The application a delivery is for: null (404) when the uuid is malformed, unknown, or not a git application. */
    async find(uuid: string): Promise<ApplicationRow | null> {
      if (!isUuid(uuid)) return null;
      const app = await apps.findApplicationByUuid(db, uuid.toLowerCase());
      return app && app.source === 'git' && app.webhook_secret_sealed !== null ? app : null;
    },

    /** Checks the media type, the signature and the rate, then answers the delivery (the application already found). */
    async deliver(app: ApplicationRow, headers: IncomingHttpHeaders, raw: Buffer): Promise<WebhookAnswer> {
      if (!/^application\/json\s*(;|$)/i.test(header(headers, 'content-type') ?? '')) throw fail.unsupported_media_type();
      if (!signed(app, headers, raw)) throw fail.webhook_signature_invalid();
      const wait = rate.take(app.uuid);
      if (wait !== null) throw fail.webhook_rate_limited(undefined, { retry_after: wait });
      const push = app.provider === 'github' ? githubPush(headers, raw) : gitlabPush(headers, raw);
      const deliveryId = header(headers, app.provider === 'github' ? 'x-github-delivery' : 'x-gitlab-event-uuid');
      if (deliveryId !== undefined && (deliveryId.length === 0 || deliveryId.length > MAX_DELIVERY_ID_LENGTH)) {
        throw fail.bad_request('Invalid delivery id header', { field: app.provider === 'github' ? 'x-github-delivery' : 'x-gitlab-event-uuid', reason: `must be 1-${MAX_DELIVERY_ID_LENGTH} characters` });
      }

      return db.transaction(async (tx): Promise<WebhookAnswer> => {
        // The application's lock orders deliveries (and every other queue write) of this application.
        const locked = await apps.findApplicationByUuid(tx, app.uuid, { forUpdate: true });
        if (!locked || locked.source !== 'git') throw fail.not_found('Application not found');
        if (deliveryId !== undefined) {
          const seen = await deployments.findDelivery(tx, locked.id, deliveryId);
          if (seen) return seen.answer_status === 'queued' ? { status: 202, body: { status: 'queued', deployment_id: seen.deployment_id! } } : { status: 200, body: { status: 'ignored', reason: seen.reason as IgnoredReason } };
        }
        const decision = judge(locked, push);
        let answer: WebhookAnswer;
        if ('ignore' in decision) {
          answer = { status: 200, body: { status: 'ignored', reason: decision.ignore } };
        } else {
          const d = await deployments.enqueueDeployment(tx, locked, { trigger: 'push', ref: locked.branch, commit: decision.queue });
          answer = { status: 202, body: { status: 'queued', deployment_id: d.id } };
        }
        if (deliveryId !== undefined) {
          await deployments.recordDelivery(tx, locked.id, {
            delivery_id: deliveryId,
            deployment_id: answer.status === 202 ? answer.body.deployment_id : null,
            answer_status: answer.body.status,
            reason: answer.status === 200 ? answer.body.reason : null,
          });
        }
        return answer;
      });
    },
  };
}
