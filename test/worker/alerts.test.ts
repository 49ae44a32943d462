// The alert evaluator against the store (PostgreSQL when DATABASE_URL is set, PGlite otherwise) with rows written
// into the per-minute rollup and the health verdicts: the state machine (unknown, ok, firing; steady states record
// nothing), each metric, the lease (two evaluators never notify twice), and notifications to a real webhook receiver
// (signature, retries, address policy at connect time) and a real SMTP server.
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { LookupFunction } from 'node:net';
import type { AlertMetric } from '../../src/shared/alerts.ts';
import { createLogger } from '../../src/shared/log.ts';
import { TRAFFIC_LATENCY_BOUNDS_MS } from '../../src/shared/records/types.ts';
import { SecretBox } from '../../src/shared/secrets.ts';
import * as accounts from '../../src/store/accounts.ts';
import { findAlertRule, insertAlertRule, listAlertEvents, type StoredChannel } from '../../src/store/alerts.ts';
import { insertEndpoint } from '../../src/store/endpoints.ts';
import { alertLeaseMs, evaluateAlerts, nextStatus, p95FromHistogram, type EvaluatorOptions } from '../../src/worker/alerts.ts';
import { createNotifier, type Notifier } from '../../src/worker/notify.ts';
import { openTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { eventually } from '../helpers/eventually.ts';
import { startSmtpServer, type TestSmtpServer } from '../helpers/smtp-server.ts';
import { signatureValid, startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

const logger = createLogger(process.env.EDGE_TEST_LOG_LEVEL ?? 'silent');
const SECRET = 'receiver-secret-0123456789';
const SLOTS = TRAFFIC_LATENCY_BOUNDS_MS.length + 1;

describe('alert evaluator: pure parts', () => {
  it('p95 is the upper bound of the bucket holding the 95th percentile, capped by the longest duration; null without data', () => {
    const counts = new Array(SLOTS).fill(0);
    assert.equal(p95FromHistogram(counts, 0), null);
    counts[3] = 94; // <= 10 ms
    counts[8] = 6; // <= 500 ms
    assert.equal(p95FromHistogram(counts, 480), 480);
    assert.equal(p95FromHistogram(counts, 900), 500);
    counts[3] = 95;
    counts[8] = 5;
    assert.equal(p95FromHistogram(counts, 480), 10);
    const slow = new Array(SLOTS).fill(0);
    slow[SLOTS - 1] = 1;
    assert.equal(p95FromHistogram(slow, 45000), 45000);
  });

  it('holds a rule past three webhook attempts at the longest timeout, two intervals, and at least 2 minutes', () => {
    assert.equal(alertLeaseMs({ evaluationIntervalMs: 60_000, webhookTimeoutMs: 5_000 }), 120_000);
    assert.equal(alertLeaseMs({ evaluationIntervalMs: 300_000, webhookTimeoutMs: 5_000 }), 600_000);
    // 60 s attempts: three of them and the backoff outlast 2 minutes.
    assert.ok(alertLeaseMs({ evaluationIntervalMs: 60_000, webhookTimeoutMs: 60_000 }) > 3 * 60_000 + 1_500);
  });

  it('leaves unknown on the first value; ok ↔ firing on crossings; nothing on steady states', () => {
    assert.deepEqual(nextStatus('unknown', false), { to: 'ok', event: null });
    assert.deepEqual(nextStatus('unknown', true), { to: 'firing', event: 'firing' });
    assert.deepEqual(nextStatus('ok', true), { to: 'firing', event: 'firing' });
    assert.deepEqual(nextStatus('firing', false), { to: 'ok', event: 'ok' });
    assert.equal(nextStatus('ok', false), null);
    assert.equal(nextStatus('firing', true), null);
  });
});

describe(`alert evaluator (${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite'})`, () => {
  let t: TestDatabase;
  let receiver: WebhookReceiver;
  let smtp: TestSmtpServer;
  let notifier: Notifier;
  const secrets = new SecretBox('alert-test-key');
  let user: { id: number; account: number };
  let endpoint: { id: number; uuid: string; subdomain: string };

  before(async () => {
    t = await openTestDatabase();
    receiver = await startWebhookReceiver();
    smtp = await startSmtpServer();
    notifier = createNotifier({ allowPrivate: true, smtpUrl: smtp.url, smtpFrom: '', baseDomain: 'edge.test', webhookTimeoutMs: 2000, backoffMs: 5, logger });
  });
  after(async () => {
    await notifier.close();
    await receiver.close();
    await smtp.close();
    await t.close();
  });
  beforeEach(async () => {
    // Each test has its own account and endpoint, so rollup rows and rules of other tests never count.
    const created = await t.db.transaction((tx) => accounts.createUser(tx, { email: `alerts-${randomBytes(4).toString('hex')}@example.test`, plan: 'pro' }));
    user = { id: created.user.id, account: created.account.id };
    const sub = `al-${randomBytes(4).toString('hex')}`;
    const row = await t.db.transaction((tx) =>
      insertEndpoint(tx, { userId: user.id, accountId: user.account, domainId: null, subdomain: sub, hostname: `${sub}.example.test`, isCustom: false }),
    );
    endpoint = { id: row!.id, uuid: row!.uuid, subdomain: sub };
    receiver.deliveries.length = 0;
    smtp.messages.length = 0;
  });

  const sql = async <R = any>(text: string, params: unknown[] = []) => (await t.db.query<R>(text, params)).rows;
  const options = (over: Partial<EvaluatorOptions> = {}): EvaluatorOptions => ({ owner: 'evaluator-a', leaseMs: 60_000, notifier: notifier.notify, secrets, logger, ...over });
  /** One pass over this test's account only: other tests' rules are leased away first. */
  const evaluate = (over: Partial<EvaluatorOptions> = {}) => evaluateAlerts(t.db, options(over));
  const webhook = (url = receiver.url, secret: string | null = SECRET): StoredChannel => ({ type: 'webhook', url, secret_sealed: secret === null ? null : secrets.seal(secret) });

  async function newRule(metric: AlertMetric, comparison: 'gt' | 'lt', threshold: number, over: { endpointId?: number | null; windowSeconds?: number; channels?: StoredChannel[] } = {}) {
    // Rules left by earlier tests are parked under a long foreign lease so each pass judges this test's rules only.
    await sql(`UPDATE alert_rules SET lease_owner = 'parked', lease_until = now() + interval '1 hour' WHERE account_id <> $1`, [user.account]);
    return t.db.transaction((tx) =>
      insertAlertRule(tx, user.account, user.id, {
        name: `${metric} ${comparison} ${threshold}`,
        endpointId: over.endpointId === undefined ? endpoint.id : over.endpointId,
        metric,
        comparison,
        threshold,
        windowSeconds: over.windowSeconds ?? 300,
        channels: over.channels ?? [webhook()],
      }),
    );
  }

  /** Adds exchanges to the endpoint's rollup row `minutesAgo` minutes back (0 = the current minute). */
  async function traffic(requests: number, e5xx: number, opts: { minutesAgo?: number; e4xx?: number; latency?: Record<number, number>; maxMs?: number; endpointId?: number; endpointUuid?: string } = {}) {
    const buckets = new Array(SLOTS).fill(0);
    for (const [slot, n] of Object.entries(opts.latency ?? { 0: requests })) buckets[Number(slot)] = n;
    await sql(
      `INSERT INTO endpoint_traffic_minutely (endpoint_uuid, minute, account_id, endpoint_id, requests, errors_4xx, errors_5xx, duration_max_ms, latency_buckets)
       VALUES ($1, date_trunc('minute', now()) - make_interval(mins => $2), $3, $4, $5, $6, $7, $8, $9::bigint[])
       ON CONFLICT (endpoint_uuid, minute) DO UPDATE SET requests = endpoint_traffic_minutely.requests + EXCLUDED.requests,
         errors_4xx = endpoint_traffic_minutely.errors_4xx + EXCLUDED.errors_4xx, errors_5xx = endpoint_traffic_minutely.errors_5xx + EXCLUDED.errors_5xx,
         duration_max_ms = GREATEST(endpoint_traffic_minutely.duration_max_ms, EXCLUDED.duration_max_ms),
         latency_buckets = (SELECT array_agg(a + b ORDER BY i) FROM unnest(endpoint_traffic_minutely.latency_buckets, EXCLUDED.latency_buckets) WITH ORDINALITY AS u(a, b, i))`,
      [opts.endpointUuid ?? endpoint.uuid, opts.minutesAgo ?? 0, user.account, opts.endpointId ?? endpoint.id, requests, opts.e4xx ?? 0, e5xx, opts.maxMs ?? 1, buckets],
    );
  }

  const events = async (ruleId: number) => (await listAlertEvents(t.db, ruleId, 100)).reverse();
  const ruleNow = async (uuid: string) => (await findAlertRule(t.db, uuid))!;

  it('error_rate: unknown without data, ok, firing with a signed notification, steady, then resolved', async () => {
    const rule = await newRule('error_rate', 'gt', 0.5);
    await evaluate();
    let r = await ruleNow(rule.uuid);
    assert.equal(r.status, 'unknown', 'no requests: no data');
    assert.equal(r.last_value, null);
    assert.ok(r.last_evaluated_at);

    await traffic(10, 1, { e4xx: 5 });
    await evaluate();
    r = await ruleNow(rule.uuid);
    assert.equal(r.status, 'ok');
    assert.equal(r.last_value, 0.1, '5xx share only: 4xx answers are the client’s');
    assert.deepEqual(await events(rule.id), [], 'unknown → ok records nothing');

    await traffic(10, 10, { minutesAgo: 1 });
    const report = await evaluate();
    assert.deepEqual(report.fired, [rule.uuid]);
    r = await ruleNow(rule.uuid);
    assert.equal(r.status, 'firing');
    assert.equal(r.last_value, 11 / 20);
    let list = await events(rule.id);
    assert.equal(list.length, 1);
    assert.equal(list[0].status, 'firing');
    assert.equal(list[0].value, 11 / 20);
    assert.equal(list[0].notified, true);
    assert.equal(list[0].notification_err, null);
    assert.equal(receiver.deliveries.length, 1);
    const d = receiver.deliveries[0];
    assert.ok(signatureValid(d, SECRET), 'X-Edge-Signature verifies with the channel secret');
    assert.ok(!signatureValid(d, 'another-secret-entirely'));
    assert.ok(Math.abs(Number(d.headers['x-edge-timestamp']) - Date.now() / 1000) < 300);
    assert.equal(d.headers['x-edge-delivery'], String(list[0].id));
    assert.equal(d.headers['content-type'], 'application/json');
    assert.deepEqual(d.body, {
      rule: { uuid: rule.uuid, name: rule.name, metric: 'error_rate', comparison: 'gt', threshold: 0.5 },
      status: 'firing',
      value: 0.55,
      triggered_at: new Date(list[0].triggered_at).toISOString(),
      endpoint: { uuid: endpoint.uuid, name: endpoint.subdomain },
    });

    await traffic(5, 5);
    await evaluate();
    assert.equal((await events(rule.id)).length, 1, 'steady firing records nothing');
    assert.equal(receiver.deliveries.length, 1);

    await traffic(100, 0);
    const resolved = await evaluate();
    assert.deepEqual(resolved.resolved, [rule.uuid]);
    list = await events(rule.id);
    assert.deepEqual(list.map((e) => e.status), ['firing', 'ok']);
    assert.equal(list[1].notified, true);
    assert.equal(receiver.deliveries.length, 2);
    assert.equal(receiver.deliveries[1].body.status, 'ok');
    assert.ok(signatureValid(receiver.deliveries[1], SECRET));
    await evaluate();
    assert.equal((await events(rule.id)).length, 2, 'steady ok records nothing');
  });

  it('counts only the window (rounded out to whole minutes) and only the rule’s endpoint; without an endpoint, all of them', async () => {
    const only = await newRule('errors_5xx', 'gt', 3, { windowSeconds: 120 });
    const all = await newRule('errors_5xx', 'gt', 3, { endpointId: null, windowSeconds: 120 });
    const sub = `al2-${randomBytes(4).toString('hex')}`;
    const second = (await t.db.transaction((tx) =>
      insertEndpoint(tx, { userId: user.id, accountId: user.account, domainId: null, subdomain: sub, hostname: `${sub}.example.test`, isCustom: false }),
    ))!;
    await traffic(10, 10, { minutesAgo: 5 }); // outside a 2-minute window
    await traffic(2, 2, { minutesAgo: 2 });
    await traffic(2, 2, { endpointId: second.id, endpointUuid: second.uuid });
    await evaluate();
    assert.equal((await ruleNow(only.uuid)).last_value, 2);
    assert.equal((await ruleNow(only.uuid)).status, 'ok');
    assert.equal((await ruleNow(all.uuid)).last_value, 4);
    assert.equal((await ruleNow(all.uuid)).status, 'firing');
  });

  it('requests lt: silence is a value (0), so a rule on silence fires from unknown; traffic resolves it', async () => {
    const rule = await newRule('requests', 'lt', 1);
    await evaluate();
    assert.equal((await ruleNow(rule.uuid)).status, 'firing');
    assert.deepEqual((await events(rule.id)).map((e) => [e.status, e.value]), [['firing', 0]]);
    await traffic(3, 0);
    await evaluate();
    assert.equal((await ruleNow(rule.uuid)).status, 'ok');
    assert.deepEqual((await events(rule.id)).map((e) => [e.status, e.value]), [['firing', 0], ['ok', 3]]);
  });

  it('latency_p95_ms from the histogram buckets', async () => {
    const rule = await newRule('latency_p95_ms', 'gt', 200);
    await evaluate();
    assert.equal((await ruleNow(rule.uuid)).status, 'unknown');
    await traffic(100, 0, { latency: { 3: 100 }, maxMs: 9 });
    await evaluate();
    assert.equal((await ruleNow(rule.uuid)).last_value, 9);
    assert.equal((await ruleNow(rule.uuid)).status, 'ok');
    await traffic(100, 0, { latency: { 8: 100 }, maxMs: 420 }, );
    await evaluate();
    assert.equal((await ruleNow(rule.uuid)).last_value, 420);
    assert.equal((await ruleNow(rule.uuid)).status, 'firing');
  });

  it('endpoint_down from the last health verdicts of enabled checks', async () => {
    const rule = await newRule('endpoint_down', 'gt', 0);
    await evaluate();
    assert.equal((await ruleNow(rule.uuid)).status, 'unknown', 'no verdict: no data');
    const verdict = (status: string, enabled = true) =>
      sql(
        `INSERT INTO health_checks (endpoint_id, enabled, last_status, last_checked_at) VALUES ($1, $2, $3, now())
         ON CONFLICT (endpoint_id) DO UPDATE SET enabled = EXCLUDED.enabled, last_status = EXCLUDED.last_status, last_checked_at = now()`,
        [endpoint.id, enabled, status],
      );
    await verdict('unhealthy', false);
    await evaluate();
    assert.equal((await ruleNow(rule.uuid)).status, 'unknown', 'a disabled check says nothing now');
    await verdict('healthy');
    await evaluate();
    assert.equal((await ruleNow(rule.uuid)).status, 'ok');
    await verdict('timeout');
    await evaluate();
    assert.equal((await ruleNow(rule.uuid)).status, 'firing');
    await verdict('healthy');
    await evaluate();
    assert.deepEqual((await events(rule.id)).map((e) => [e.status, e.value]), [['firing', 1], ['ok', 0]]);
  });

  it('lease: a rule another evaluator holds is skipped; two evaluators racing notify once', async () => {
    const rule = await newRule('error_rate', 'gt', 0.5);
    await traffic(1, 1);
    receiver.hold();
    const first = evaluate({ owner: 'evaluator-a' });
    await eventually(async () => (receiver.deliveries.length === 1 ? true : undefined));
    // A is notifying while it holds the lease: B finds nothing due.
    const second = await evaluate({ owner: 'evaluator-b' });
    assert.equal(second.evaluated, 0);
    receiver.release();
    assert.deepEqual((await first).fired, [rule.uuid]);
    // Both at once, many times over: the transition is a compare-and-set under the lease, so one event, one delivery.
    await traffic(1000, 0);
    const races = await Promise.all(['c', 'd', 'e'].map((o) => evaluate({ owner: `evaluator-${o}` })));
    assert.equal(races.flatMap((r) => r.resolved).length, 1);
    assert.deepEqual((await events(rule.id)).map((e) => e.status), ['firing', 'ok']);
    assert.equal(receiver.deliveries.length, 2);
    assert.deepEqual(await sql('SELECT lease_owner FROM alert_rules WHERE id = $1', [rule.id]), [{ lease_owner: null }], 'released');
  });

  it('a pass judges every rule exactly once across batches, and a rule another evaluator holds is left to it', async () => {
    const rules = [];
    for (let i = 0; i < 7; i++) rules.push(await newRule('requests', 'gt', 1_000_000));
    await sql(`UPDATE alert_rules SET lease_owner = 'other', lease_until = now() + interval '1 minute' WHERE id = $1`, [rules[3].id]);
    const report = await evaluate({ batch: 3 });
    assert.equal(report.evaluated, 6);
    const judged = await sql<{ id: number; status: string }>('SELECT id, status FROM alert_rules WHERE account_id = $1 ORDER BY id', [user.account]);
    assert.deepEqual(judged.map((r) => r.status), rules.map((_, i) => (i === 3 ? 'unknown' : 'ok')));
  });

  it('webhook retries: 500, 503 then 200 is notified after 3 attempts; 500 throughout is not; a 4xx is not retried', async () => {
    const rule = await newRule('error_rate', 'gt', 0.5);
    receiver.answer(500, 503, 200);
    await traffic(1, 1);
    await evaluate();
    assert.equal(receiver.deliveries.length, 3);
    assert.deepEqual(new Set(receiver.deliveries.map((d) => d.headers['x-edge-delivery'])).size, 1, 'one delivery id across attempts');
    assert.ok(receiver.deliveries.every((d) => signatureValid(d, SECRET)));
    assert.equal((await events(rule.id))[0].notified, true);

    receiver.answer(500, 500, 500);
    await traffic(1000, 0);
    await evaluate();
    const failed = (await events(rule.id))[1];
    assert.equal(failed.status, 'ok');
    assert.equal(failed.notified, false);
    assert.match(failed.notification_err!, /^webhook http:\/\/127\.0\.0\.1:\d+\/hooks\/alerts: HTTP 500 after 3 attempts$/);
    assert.equal(receiver.deliveries.length, 6);

    receiver.answer(410);
    await traffic(5000, 5000);
    await evaluate();
    assert.equal(receiver.deliveries.length, 7);
    assert.match((await events(rule.id))[2].notification_err!, /HTTP 410$/);
  });

  it('webhook address policy at connect time: a name resolving to loopback and a private literal are refused', async () => {
    const toLoopback: LookupFunction = (_host, options, callback) => {
      if ((options as { all?: boolean }).all) (callback as any)(null, [{ address: '127.0.0.1', family: 4 }]);
      else (callback as any)(null, '127.0.0.1', 4);
    };
    const strict = createNotifier({ allowPrivate: false, smtpUrl: '', smtpFrom: '', baseDomain: 'edge.test', webhookTimeoutMs: 2000, backoffMs: 5, lookup: toLoopback, logger });
    try {
      const rule = await newRule('errors_5xx', 'gt', 0, { channels: [webhook(`http://hooks.rebound.example:${receiver.port}/x`), webhook(receiver.url, null)] });
      await traffic(1, 1);
      await evaluate({ notifier: strict.notify });
      const [event] = await events(rule.id);
      assert.equal(event.notified, false);
      assert.match(event.notification_err!, /hooks\.rebound\.example resolves to 127\.0\.0\.1, which is not a public address/);
      assert.match(event.notification_err!, /127\.0\.0\.1 is in the loopback range/);
      assert.equal(receiver.deliveries.length, 0, 'nothing reached the receiver');
    } finally {
      await strict.close();
    }
  });

  it('e-mail through a real SMTP server; a permanent refusal is not retried; without SMTP, "no SMTP server configured"', async () => {
    const rule = await newRule('error_rate', 'gt', 0.5, { channels: [{ type: 'email', to: 'oncall@example.com' }] });
    await traffic(1, 1);
    await evaluate();
    const [fired] = await events(rule.id);
    assert.equal(fired.notified, true, fired.notification_err ?? '');
    assert.equal(smtp.messages.length, 1);
    const mail = smtp.messages[0];
    assert.deepEqual(mail.to, ['oncall@example.com']);
    assert.equal(mail.from, 'alerts@edge.test');
    assert.match(mail.raw, /Subject: \[FIRING\] error_rate gt 0\.5: error_rate 1 \(threshold > 0\.5\)/);
    assert.match(mail.raw, new RegExp(rule.uuid));
    assert.match(mail.raw, new RegExp(`X-Edge-Delivery: ${fired.id}`, 'i'));

    smtp.refuse(550);
    await traffic(1000, 0);
    await evaluate();
    const [, resolved] = await events(rule.id);
    assert.equal(resolved.notified, false);
    assert.match(resolved.notification_err!, /^email to oncall@example\.com: .*550/);
    assert.equal(smtp.messages.length, 1);

    const none = createNotifier({ allowPrivate: true, smtpUrl: '', smtpFrom: '', baseDomain: 'edge.test', webhookTimeoutMs: 2000, logger });
    try {
      const outcome = await none.notify([{ type: 'email', to: 'oncall@example.com' }, { type: 'webhook', url: receiver.url, secret: null }], {
        rule: { uuid: rule.uuid, name: rule.name, metric: 'errors_5xx', comparison: 'gt', threshold: 0 },
        status: 'test',
        value: 0,
        triggered_at: new Date().toISOString(),
        event_id: 1,
      });
      assert.deepEqual(outcome, { notified: false, error: 'email to oncall@example.com: no SMTP server configured' });
      assert.equal(receiver.deliveries.length, 1, 'the webhook channel was still notified');
      assert.equal(receiver.deliveries[0].headers['x-edge-signature'], undefined, 'no secret, no signature');
    } finally {
      await none.close();
    }
  });
});
