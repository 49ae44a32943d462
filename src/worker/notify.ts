// Alert notifications: a signed JSON POST to each webhook channel (timeout, three attempts with backoff, the address
// judged again at connect time) and an e-mail to each e-mail channel through the configured SMTP server (nodemailer).
//
// Webhook URLs were checked by the API on what they say; a name may resolve, or be rebound, to a private address
// later (DNS rebinding), so connections go through a lookup that refuses any answer the platform's address policy
// (src/shared/address-policy.ts) does not call public, as the edge's origin pools do, and IP literals are judged
// before connecting. Redirects are not followed: a public receiver could otherwise bounce the worker inside.
import { lookup as systemLookup } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import nodemailer from 'nodemailer';
import type { Transporter } from 'nodemailer';
import { Agent, request } from 'undici';
import { addressRefusal } from '../shared/address-policy.ts';
import { PrivateAddressError, publicOnlyLookup } from '../shared/public-lookup.ts';
import {
  DELIVERY_HEADER,
  SIGNATURE_HEADER,
  TIMESTAMP_HEADER,
  webhookSignature,
  type AlertChannel,
  type AlertNotice,
  type AlertNotifier,
  type NotificationOutcome,
} from '../shared/alerts.ts';
import type { Logger } from '../shared/log.ts';

export interface NotifierOptions {
  /** EDGE_ORIGIN_ALLOW_PRIVATE: webhooks may reach loopback and private addresses (development, tests). */
  allowPrivate: boolean;
  /** EDGE_SMTP_URL; empty = e-mail channels are reported as not notified. */
  smtpUrl: string;
  /** EDGE_SMTP_FROM; empty = "Edge alerts <alerts@{baseDomain}>". */
  smtpFrom: string;
  baseDomain: string;
  /** One webhook attempt's limit, connect to last byte. */
  webhookTimeoutMs: number;
  /** Attempts per channel (3). */
  attempts?: number;
  /** The wait before the second attempt, doubled before each later one (500 ms). */
  backoffMs?: number;
  /** How webhook names are resolved; the system resolver unless a test points it elsewhere. */
  lookup?: LookupFunction;
  logger: Logger;
}

export interface Notifier {
  notify: AlertNotifier;
  close(): Promise<void>;
}

/** A failed attempt, and whether another could succeed. */
class DeliveryError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

/** Runs `attempt` up to `attempts` times, waiting backoff, 2×backoff, … between; the last error is thrown. */
async function withRetries(attempts: number, backoffMs: number, attempt: () => Promise<void>): Promise<void> {
  for (let i = 1; ; i++) {
    try {
      return await attempt();
    } catch (err) {
      const retryable = !(err instanceof DeliveryError) || err.retryable;
      if (!retryable || i >= attempts) throw Object.assign(err as Error, { attempts: i });
      await sleep(backoffMs * 2 ** (i - 1));
    }
  }
}

/** The webhook body: what the original specification left open, as docs/traffic.md "Alerts" documents it. */
export function webhookBody(notice: AlertNotice): string {
  return JSON.stringify({
    rule: notice.rule,
    status: notice.status,
    value: notice.value,
    triggered_at: notice.triggered_at,
    ...(notice.endpoint ? { endpoint: notice.endpoint } : {}),
  });
}

const STATUS_WORD = { firing: 'FIRING', ok: 'RESOLVED', test: 'TEST' } as const;
const COMPARISON_SIGN = { gt: '>', lt: '<' } as const;

/** The e-mail's subject and text. The name was refused with control characters, so it cannot break a header. */
export function emailMessage(notice: AlertNotice): { subject: string; text: string } {
  const { rule } = notice;
  const where = notice.endpoint ? `endpoint ${notice.endpoint.name || notice.endpoint.uuid}` : 'all endpoints of the account';
  const subject = `[${STATUS_WORD[notice.status]}] ${rule.name}: ${rule.metric} ${notice.value} (threshold ${COMPARISON_SIGN[rule.comparison]} ${rule.threshold})`;
  const meaning =
    notice.status === 'firing'
      ? `The alert is firing: ${rule.metric} is ${notice.value}, ${rule.comparison === 'gt' ? 'above' : 'below'} the threshold ${rule.threshold}.`
      : notice.status === 'ok'
        ? `The alert is resolved: ${rule.metric} is back at ${notice.value} (threshold ${COMPARISON_SIGN[rule.comparison]} ${rule.threshold}).`
        : 'This is a test notification; the alert’s state is unchanged.';
  const text = [meaning, '', `Rule: ${rule.name} (${rule.uuid})`, `Watching: ${where}`, `At: ${notice.triggered_at}`, ''].join('\n');
  return { subject, text };
}

/** A URL for messages: without its query, which may hold a receiver's token. */
function shownUrl(raw: string): string {
  try {
    const u = new URL(raw);
    return `${u.origin}${u.pathname}`;
  } catch {
    return '(invalid URL)';
  }
}

export function createNotifier(options: NotifierOptions): Notifier {
  const attempts = options.attempts ?? 3;
  const backoffMs = options.backoffMs ?? 500;
  const resolve = options.lookup ?? (systemLookup as unknown as LookupFunction);
  const agent = new Agent({ connect: { lookup: options.allowPrivate ? resolve : publicOnlyLookup(resolve) }, keepAliveTimeout: 1_000 });
  const from = options.smtpFrom || `Edge alerts <alerts@${options.baseDomain}>`;
  let mailer: Transporter | null = null;

  async function postOnce(url: string, secret: string | null, body: string, notice: AlertNotice): Promise<void> {
    const timestamp = String(Math.floor(Date.now() / 1000));
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': 'edge-alerts/1',
      [TIMESTAMP_HEADER]: timestamp,
      [DELIVERY_HEADER]: String(notice.event_id),
    };
    if (secret !== null) headers[SIGNATURE_HEADER] = webhookSignature(secret, timestamp, body);
    let res;
    try {
      res = await request(url, { method: 'POST', body, headers, dispatcher: agent, signal: AbortSignal.timeout(options.webhookTimeoutMs) });
    } catch (err) {
      const e = err as Error & { cause?: unknown };
      const cause = e.cause instanceof PrivateAddressError ? e.cause : err instanceof PrivateAddressError ? err : null;
      if (cause) throw new DeliveryError(cause.message, false);
      if (e.name === 'TimeoutError' || e.name === 'AbortError') throw new DeliveryError(`no answer within ${options.webhookTimeoutMs} ms`, true);
      throw new DeliveryError((e.cause as Error | undefined)?.message ?? e.message, true);
    }
    await res.body.dump().catch(() => {});
    if (res.statusCode >= 200 && res.statusCode < 300) return;
    const retryable = res.statusCode >= 500 || res.statusCode === 429 || res.statusCode === 408;
    const why = res.statusCode >= 300 && res.statusCode < 400 ? ' (redirects are not followed)' : '';
    throw new DeliveryError(`HTTP ${res.statusCode}${why}`, retryable);
  }

  async function webhook(channel: Extract<AlertChannel, { type: 'webhook' }>, notice: AlertNotice): Promise<void> {
    if (!options.allowPrivate) {
      const host = new URL(channel.url).hostname.replace(/^\[(.*)\]$/, '$1');
      // Sockets skip the lookup for IP literals, so those are judged here; the API refused them too, unless the
      // platform allowed private addresses when the rule was saved.
      if (isIP(host) !== 0) {
        const why = addressRefusal(host);
        if (why !== null) throw new DeliveryError(`${why} (EDGE_ORIGIN_ALLOW_PRIVATE is off)`, false);
      }
    }
    const body = webhookBody(notice);
    await withRetries(attempts, backoffMs, () => postOnce(channel.url, channel.secret, body, notice));
  }

  async function email(channel: Extract<AlertChannel, { type: 'email' }>, notice: AlertNotice): Promise<void> {
    if (!options.smtpUrl) throw new DeliveryError('no SMTP server configured', false);
    mailer ??= nodemailer.createTransport({ url: options.smtpUrl, connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 20_000 });
    const { subject, text } = emailMessage(notice);
    const transport = mailer;
    await withRetries(attempts, backoffMs, async () => {
      try {
        await transport.sendMail({ from, to: channel.to, subject, text, headers: { [DELIVERY_HEADER]: String(notice.event_id) } });
      } catch (err) {
        const e = err as Error & { responseCode?: number };
        // A 5xx reply is the server's final word (RFC 5321 §4.2.1); anything else (4xx, a dropped connection) may pass later.
        throw new DeliveryError(e.message, !(typeof e.responseCode === 'number' && e.responseCode >= 500));
      }
    });
  }

  const notify: AlertNotifier = async (channels, notice): Promise<NotificationOutcome> => {
    const results = await Promise.allSettled(channels.map((c) => (c.type === 'webhook' ? webhook(c, notice) : email(c, notice))));
    const errors: string[] = [];
    results.forEach((r, i) => {
      if (r.status === 'fulfilled') return;
      const c = channels[i];
      const err = r.reason as Error & { attempts?: number };
      const tries = err.attempts && err.attempts > 1 ? ` after ${err.attempts} attempts` : '';
      errors.push(`${c.type === 'webhook' ? `webhook ${shownUrl(c.url)}` : `email to ${c.to}`}: ${err.message}${tries}`);
    });
    if (errors.length > 0) options.logger.warn({ rule: notice.rule.uuid, status: notice.status, errors }, 'alert notification not delivered everywhere');
    return errors.length === 0 ? { notified: true, error: null } : { notified: false, error: errors.join('; ') };
  };

  return {
    notify,
    async close() {
      mailer?.close();
      await agent.close();
    },
  };
}
