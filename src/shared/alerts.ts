// Traffic alerts as the control API and the worker both see them: metrics, comparisons, channels, the notice a
// notification carries and its signature. The API validates rules with these; the worker evaluates and notifies.
import { createHmac } from 'node:crypto';
import { hostRefusal } from './address-policy.ts';

export const ALERT_METRICS = ['error_rate', 'errors_5xx', 'requests', 'latency_p95_ms', 'endpoint_down'] as const;
export type AlertMetric = (typeof ALERT_METRICS)[number];

export const ALERT_COMPARISONS = ['gt', 'lt'] as const;
export type AlertComparison = (typeof ALERT_COMPARISONS)[number];

/** docs/api.md "Traffic alerts": never `test`. */
export const ALERT_RULE_STATUSES = ['unknown', 'ok', 'firing'] as const;
export type AlertRuleStatus = (typeof ALERT_RULE_STATUSES)[number];

export const ALERT_EVENT_STATUSES = ['firing', 'ok', 'test'] as const;
export type AlertEventStatus = (typeof ALERT_EVENT_STATUSES)[number];

/** A channel as the sender uses it: the webhook secret opened (null when the channel has none). */
export type AlertChannel = { type: 'webhook'; url: string; secret: string | null } | { type: 'email'; to: string };

/** What a notification says: the webhook body, and the facts an e-mail is written from. */
export interface AlertNotice {
  rule: { uuid: string; name: string; metric: AlertMetric; comparison: AlertComparison; threshold: number };
  status: AlertEventStatus;
  value: number;
  triggered_at: string;
  /** The endpoint a rule watches; absent for a rule over all of the account's endpoints. */
  endpoint?: { uuid: string; name: string };
  /** The event's id, also sent as X-Edge-Delivery so a receiver can drop a retried delivery it already has. */
  event_id: number;
}

/** What became of one notification: notified only when every channel took it; the error names those that did not. */
export interface NotificationOutcome {
  notified: boolean;
  error: string | null;
}

/** Sends one notice to every channel of a rule. Built by the composition root (src/worker/notify.ts). */
export type AlertNotifier = (channels: readonly AlertChannel[], notice: AlertNotice) => Promise<NotificationOutcome>;

/** Whether `value` is on the firing side of the threshold: strictly above for gt, strictly below for lt. */
export function thresholdCrossed(comparison: AlertComparison, value: number, threshold: number): boolean {
  return comparison === 'gt' ? value > threshold : value < threshold;
}

export const SIGNATURE_HEADER = 'x-edge-signature';
export const TIMESTAMP_HEADER = 'x-edge-timestamp';
export const DELIVERY_HEADER = 'x-edge-delivery';

/**
 * The X-Edge-Signature value of a webhook delivery: `sha256=` and the hex HMAC-SHA256, under the channel secret, of
 * `<X-Edge-Timestamp>.<raw body>`. The timestamp is inside the MAC so a captured delivery cannot be replayed later
 * with a fresh timestamp; receivers compare in constant time and refuse timestamps older than a few minutes.
 */
export function webhookSignature(secret: string, timestamp: string, rawBody: string | Buffer): string {
  return 'sha256=' + createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest('hex');
}

export const MAX_WEBHOOK_URL_LENGTH = 2048;

/** Why a URL cannot be a webhook channel; the message is the reason, without the field's name. */
export class WebhookUrlError extends Error {
  override name = 'WebhookUrlError';
}

/**
 * A webhook URL as stored (the WHATWG serialisation, without a fragment), or a WebhookUrlError. The address rule is
 * the one origin URLs follow (src/shared/origin-url.ts): what the URL says is judged here, and what a name resolves
 * to is judged again when the worker connects (src/worker/notify.ts), so a rebound name cannot reach inside.
 * Unlike an origin, a webhook may carry a query (receivers often put a token there).
 */
export function canonicalWebhookUrl(raw: string, allowPrivate: boolean): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new WebhookUrlError('not a valid absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new WebhookUrlError('only http and https URLs are supported');
  if (url.username || url.password) throw new WebhookUrlError('credentials in the URL are not allowed; use the channel secret');
  if (!allowPrivate) {
    const refusal = hostRefusal(url.hostname);
    if (refusal !== null) throw new WebhookUrlError(`webhooks must have a public address (private, loopback and link-local addresses are not allowed on this platform): ${refusal}`);
  }
  url.hash = '';
  const out = url.toString();
  if (out.length > MAX_WEBHOOK_URL_LENGTH) throw new WebhookUrlError(`longer than ${MAX_WEBHOOK_URL_LENGTH} characters`);
  return out;
}
