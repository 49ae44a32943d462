// Traffic alert rules as domain operations (docs/traffic.md "Alerts"): channels validated and their secrets sealed,
// rules bounded per account, a throttled test notification, and the events of a rule.
import { canonicalWebhookUrl, WebhookUrlError, type AlertComparison, type AlertMetric, type AlertNotifier } from '../../shared/alerts.ts';
import { fail, invalid } from '../../shared/errors.ts';
import { CONTROL_CHARS } from '../../shared/match/condition.ts';
import { isUuid } from '../../shared/schema.ts';
import type { SecretBox } from '../../shared/secrets.ts';
import * as store from '../../store/alerts.ts';
import { ALERT_EVENTS_CAP, MAX_ALERT_RULES_PER_ACCOUNT, type AlertEventRow, type AlertRuleInput, type AlertRuleRow, type StoredChannel } from '../../store/alerts.ts';
import type { Queryable } from '../../store/db.ts';
import { ENDPOINT_COLUMNS, type EndpointRow } from '../../store/endpoints.ts';
import type { Caller } from '../caller.ts';
import { canSee } from '../endpoint-access.ts';
import type { ControlDeps } from '../http.ts';
import { secretFingerprint } from '../secret-fingerprint.ts';
import { iso } from '../views.ts';
import { uuidOrId } from '../validation.ts';

export const ALERT_LIMITS = {
  maxNameLength: 100,
  minWindowSeconds: 60,
  maxWindowSeconds: 86400,
  defaultWindowSeconds: 300,
  maxThreshold: 1e12,
  /** A webhook secret short enough to guess would sign nothing; long enough for any generated key. */
  minSecretLength: 16,
  maxSecretLength: 256,
} as const;

/**
 * One test notification per rule in this long, per control process: a test sends to every channel (up to 10 addresses
 * the user chose) at once, so unthrottled it would let anyone with a rule make the platform flood a third party.
 */
export const ALERT_TEST_COOLDOWN_MS = 30_000;

export interface RuleBody {
  name: string;
  endpoint_id?: string | number | null;
  metric: AlertMetric;
  comparison: AlertComparison;
  threshold: number;
  window_seconds?: number;
  channels: ChannelBody[];
  tags?: string[];
}
type ChannelBody = { type: 'webhook' | 'email'; url?: string; secret?: string | null; to?: string };

/** A webhook secret as stored: sealed for the sender, fingerprinted for the views. */
interface SealedSecret {
  sealed: string;
  fingerprint: string;
}

/** Why a webhook secret cannot be stored, or null. */
function secretRefusal(secret: string): string | null {
  if (secret.length < ALERT_LIMITS.minSecretLength) return `secret: at least ${ALERT_LIMITS.minSecretLength} characters`;
  if (CONTROL_CHARS.test(secret)) return 'secret: control characters are not allowed';
  return null;
}

/**
 * The new webhook secrets of a body, sealed and fingerprinted before any transaction (bcrypt takes tens of
 * milliseconds on libuv's pool): at most one per channel, and none for a secret channelInput will refuse anyway.
 */
async function sealWebhookSecrets(channels: readonly ChannelBody[], secrets: SecretBox): Promise<Map<string, SealedSecret>> {
  const wanted = new Set(channels.flatMap((c) => (c.type === 'webhook' && typeof c.secret === 'string' && c.secret !== '' && secretRefusal(c.secret) === null ? [c.secret] : [])));
  return new Map(await Promise.all([...wanted].map(async (s) => [s, { sealed: secrets.seal(s), fingerprint: await secretFingerprint(s) }] as const)));
}

// ---------------------------------------------------------------------------------------------------------------
// Validation and canonical form
// ---------------------------------------------------------------------------------------------------------------

interface ChannelOptions {
  allowPrivate: boolean;
  /** sealWebhookSecrets of the body. */
  sealed: ReadonlyMap<string, SealedSecret>;
  current: readonly StoredChannel[];
}

function channelInput(c: ChannelBody, i: number, opts: ChannelOptions): StoredChannel {
  const field = `channels.${i}`;
  if (c.type === 'email') {
    if (c.url !== undefined || c.secret !== undefined) throw invalid(field, 'an email channel takes only "to"');
    if (c.to === undefined) throw invalid(`${field}.to`, 'an email channel needs "to"');
    const to = c.to.trim();
    // The schema's e-mail check is loose on purpose; a header-breaking or list-valued recipient is refused outright.
    if (!/^[^\s@,;<>"()]{1,64}@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$/.test(to) || to.length > 254) throw invalid(`${field}.to`, `"${to}" is not an e-mail address`);
    return { type: 'email', to };
  }
  if (c.to !== undefined) throw invalid(field, 'a webhook channel takes "url" and "secret", not "to"');
  if (c.url === undefined) throw invalid(`${field}.url`, 'a webhook channel needs "url"');
  let url: string;
  try {
    url = canonicalWebhookUrl(c.url, opts.allowPrivate);
  } catch (err) {
    if (err instanceof WebhookUrlError) throw invalid(`${field}.url`, `url: ${err.message}`);
    throw err;
  }
  if (c.secret === undefined) {
    // PUT: the secret of the current webhook channel to the same URL stays, with its fingerprint (it is never shown,
    // so it cannot be resent).
    const same = opts.current.find((s): s is Extract<StoredChannel, { type: 'webhook' }> => s.type === 'webhook' && s.url === url);
    return { type: 'webhook', url, secret_sealed: same?.secret_sealed ?? null, secret_fingerprint: same?.secret_sealed ? (same.secret_fingerprint ?? null) : null };
  }
  if (c.secret === null || c.secret === '') return { type: 'webhook', url, secret_sealed: null, secret_fingerprint: null };
  const refusal = secretRefusal(c.secret);
  if (refusal !== null) throw invalid(`${field}.secret`, refusal);
  const secret = opts.sealed.get(c.secret)!;
  return { type: 'webhook', url, secret_sealed: secret.sealed, secret_fingerprint: secret.fingerprint };
}

function ruleInput(body: RuleBody, endpointId: number | null, opts: { allowPrivate: boolean; sealed: ReadonlyMap<string, SealedSecret>; current?: readonly StoredChannel[] }): AlertRuleInput {
  const name = body.name.trim();
  if (name === '') throw invalid('name', 'name must not be empty');
  if (CONTROL_CHARS.test(name) || name.includes('\t')) throw invalid('name', 'control characters are not allowed');
  if (body.metric === 'error_rate' && body.threshold > 1) throw invalid('threshold', 'error_rate is a fraction: the threshold is between 0 and 1 (0.05 = 5 %)');
  const channels = body.channels.map((c, i) => channelInput(c, i, { ...opts, current: opts.current ?? [] }));
  const keys = channels.map((c) => (c.type === 'webhook' ? `w ${c.url}` : `e ${c.to.toLowerCase()}`));
  const dup = keys.findIndex((k, i) => keys.indexOf(k) !== i);
  if (dup !== -1) throw invalid(`channels.${dup}`, 'the same destination is listed twice');
  return {
    name,
    endpointId,
    metric: body.metric,
    comparison: body.comparison,
    threshold: body.threshold,
    windowSeconds: body.window_seconds ?? ALERT_LIMITS.defaultWindowSeconds,
    channels,
    tags: body.tags ?? [],
  };
}

/**
 * The events list's `limit`: 0 or omitted is the cap, above the cap is the cap (docs/api.md); anything that is not a
 * non-negative integer is a 400, since silently reading it as another number would hide the caller's mistake.
 */
export function eventsLimit(raw: string | undefined): number {
  if (raw === undefined || raw === '') return ALERT_EVENTS_CAP;
  if (!/^[0-9]{1,20}$/.test(raw)) throw fail.invalid_query('Invalid query parameter limit', { field: 'limit', reason: 'a non-negative integer (0 = the default cap)' });
  const n = Number(raw);
  return n === 0 ? ALERT_EVENTS_CAP : Math.min(n, ALERT_EVENTS_CAP);
}

// ---------------------------------------------------------------------------------------------------------------
// Access
// ---------------------------------------------------------------------------------------------------------------

const ruleNotFound = () => fail.not_found('Alert rule not found');

/** A rule the caller may see; another account's reads as missing (docs/api.md: same status on purpose). */
async function visibleRule(q: Queryable, caller: Caller, uuid: string): Promise<AlertRuleRow> {
  if (!isUuid(uuid)) throw fail.invalid_id('Invalid alert rule id', { field: 'id', reason: 'the alert rule id must be a UUID' });
  const rule = await store.findAlertRule(q, uuid.toLowerCase());
  if (!rule || !canSee(caller, rule)) throw ruleNotFound();
  return rule;
}

/**
 * The endpoint a rule watches: a uuid or numeric id of an endpoint in the rule's account (404 otherwise, as for any
 * endpoint that is not the caller's); null for all endpoints.
 */
async function ruleEndpoint(q: Queryable, accountId: number, ref: string | number | null | undefined): Promise<EndpointRow | null> {
  if (ref === undefined || ref === null || ref === '') return null;
  // A number beyond 2^53 cannot be an id this API handed out: not found, as before, rather than a 400.
  if (typeof ref === 'number' && !Number.isSafeInteger(ref)) throw fail.not_found('Endpoint not found');
  const named = uuidOrId(ref);
  if (named === null) throw invalid('endpoint_id', 'an endpoint uuid or a positive integer id');
  const [where, value] = 'uuid' in named ? ['uuid = $1', named.uuid] : ['id = $1', named.id];
  const { rows } = await q.query<EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM endpoints WHERE ${where}`, [value]);
  const endpoint = rows[0];
  if (!endpoint || endpoint.account_id !== accountId) throw fail.not_found('Endpoint not found');
  return endpoint;
}

/** When each rule was last tested on this control process (bounded: entries past the cooldown are pruned). */
class TestCooldown {
  private readonly last = new Map<string, number>();
  constructor(private readonly now: () => number = Date.now) {}

  /** Seconds until `rule` may be tested again, or 0 (and the test is counted now). */
  take(rule: string): number {
    const t = this.now();
    const at = this.last.get(rule);
    if (at !== undefined && t - at < ALERT_TEST_COOLDOWN_MS) return Math.ceil((ALERT_TEST_COOLDOWN_MS - (t - at)) / 1000);
    if (this.last.size >= 10_000) for (const [k, v] of this.last) if (t - v >= ALERT_TEST_COOLDOWN_MS) this.last.delete(k);
    this.last.set(rule, t);
    return 0;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------------------------

export function trafficAlertService({ db, config, secrets, alertNotifier }: Pick<ControlDeps, 'db' | 'config' | 'secrets' | 'alertNotifier'>) {
  const cooldown = new TestCooldown();
  const allowPrivate = config.originAllowPrivate;
  const notifier: AlertNotifier | undefined = alertNotifier;

  return {
    /** A rule on one endpoint of the active account, or on all of them; at most MAX_ALERT_RULES_PER_ACCOUNT. */
    async create(caller: Caller, body: RuleBody): Promise<AlertRuleRow> {
      const sealed = await sealWebhookSecrets(body.channels, secrets);
      return db.transaction(async (tx) => {
        const endpoint = await ruleEndpoint(tx, caller.account.id, body.endpoint_id);
        const input = ruleInput(body, endpoint?.id ?? null, { allowPrivate, sealed });
        const count = await store.countAlertRulesLocked(tx, caller.account.id);
        if (count >= MAX_ALERT_RULES_PER_ACCOUNT) {
          throw fail.invalid_request(`An account has at most ${MAX_ALERT_RULES_PER_ACCOUNT} alert rules`, { field: 'alert_rules', reason: `at most ${MAX_ALERT_RULES_PER_ACCOUNT} per account`, limit: MAX_ALERT_RULES_PER_ACCOUNT, count });
        }
        return store.insertAlertRule(tx, caller.account.id, caller.user.id, input);
      });
    },

    list: (caller: Caller): Promise<AlertRuleRow[]> => store.listAlertRules(db, caller.account.id),

    get: (caller: Caller, uuid: string): Promise<AlertRuleRow> => visibleRule(db, caller, uuid),

    /** A full write; status and events stay, and a webhook sent without secret keeps the current one of its URL. */
    async replace(caller: Caller, uuid: string, body: RuleBody): Promise<AlertRuleRow> {
      const sealed = await sealWebhookSecrets(body.channels, secrets);
      const updated = await db.transaction(async (tx) => {
        const rule = await visibleRule(tx, caller, uuid);
        const endpoint = await ruleEndpoint(tx, rule.account_id, body.endpoint_id);
        const input = ruleInput(body, endpoint?.id ?? null, { allowPrivate, sealed, current: rule.channels });
        return store.replaceAlertRule(tx, rule.id, input);
      });
      if (!updated) throw ruleNotFound();
      return updated;
    },

    async remove(caller: Caller, uuid: string): Promise<void> {
      const rule = await visibleRule(db, caller, uuid);
      if (!(await store.deleteAlertRule(db, rule.id))) throw ruleNotFound();
    },

    /**
     * Records a test event and sends it to every channel now, once per rule per cooldown: sooner is 429
     * alert_test_too_soon, and `retryAfter` receives the seconds to wait (the route's Retry-After).
     */
    async test(caller: Caller, uuid: string, retryAfter: (seconds: number) => void): Promise<AlertEventRow> {
      const rule = await visibleRule(db, caller, uuid);
      const wait = cooldown.take(rule.uuid);
      if (wait > 0) {
        retryAfter(wait);
        throw fail.alert_test_too_soon(undefined, { retry_after_seconds: wait });
      }
      const event = await store.insertAlertEvent(db, rule.id, 'test', rule.last_value ?? 0);
      const channels = store.openAlertChannels(rule.channels, secrets);
      const outcome = !notifier
        ? { notified: false, error: 'notifications are not configured on this node' }
        : typeof channels === 'string'
          ? { notified: false, error: channels }
          : await notifier(channels, {
              rule: { uuid: rule.uuid, name: rule.name, metric: rule.metric, comparison: rule.comparison, threshold: rule.threshold },
              status: 'test',
              value: event.value,
              triggered_at: iso(event.triggered_at),
              ...(rule.endpoint_uuid ? { endpoint: { uuid: rule.endpoint_uuid, name: rule.endpoint_name ?? '' } } : {}),
              event_id: event.id,
            });
      const recorded = await store.recordNotification(db, event.id, outcome.notified, outcome.error);
      // The rule may have been deleted meanwhile (its events with it): the event is still what happened.
      return recorded ?? { ...event, notified: outcome.notified, notification_err: outcome.error };
    },

    /** A rule's events, most recent first; `limit` as eventsLimit reads it, judged before the rule is looked up. */
    async events(caller: Caller, uuid: string, rawLimit: string | undefined): Promise<AlertEventRow[]> {
      const limit = eventsLimit(rawLimit);
      const rule = await visibleRule(db, caller, uuid);
      return store.listAlertEvents(db, rule.id, limit);
    },
  };
}
