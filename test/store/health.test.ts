// Health checks in the store (docs/health-checks.md): saving a configuration and its schedule reset, the cached last
// verdict and its 7-day age-out (what the alert evaluator reads), uptime windows, recent probes, leases, pruning.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import * as accounts from '../../src/store/accounts.ts';
import { insertEndpoint } from '../../src/store/endpoints.ts';
import * as health from '../../src/store/health.ts';
import { openTestDatabase, type TestDatabase } from '../helpers/db.ts';

describe(`health checks in the store (${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite'})`, () => {
  let t: TestDatabase;
  let user: { id: number; account: number };
  before(async () => {
    t = await openTestDatabase();
    const created = await t.db.transaction((tx) => accounts.createUser(tx, { email: 'health-store@example.test', plan: 'pro' }));
    user = { id: created.user.id, account: created.account.id };
  });
  after(() => t.close());

  async function newEndpoint(): Promise<{ id: number; uuid: string; hostname: string }> {
    const sub = `health-${randomBytes(4).toString('hex')}`;
    const row = await t.db.transaction((tx) =>
      insertEndpoint(tx, { userId: user.id, accountId: user.account, domainId: null, subdomain: sub, hostname: `${sub}.example.test`, isCustom: false }),
    );
    assert.ok(row);
    return { id: row.id, uuid: row.uuid, hostname: row.hostname };
  }

  /** A probe row `ageSeconds` old, written as the prober writes it. */
  async function probe(endpointId: number, status: health.HealthStatus, ageSeconds = 0, latency = 10): Promise<void> {
    await health.recordProbe(t.db, endpointId, 'test-worker', {
      status,
      status_code: status === 'healthy' ? 200 : status === 'unhealthy' ? 502 : null,
      latency_ms: latency,
      error_message: status === 'error' ? 'connection refused' : null,
      checked_at: new Date(Date.now() - ageSeconds * 1000),
    });
  }

  it('an endpoint never configured has no row; saving writes it and keeps nulls for defaults', async () => {
    const e = await newEndpoint();
    assert.equal(await health.findHealthCheck(t.db, e.id), null);
    const saved = await t.db.transaction((tx) => health.saveHealthCheck(tx, e.id, { enabled: true, path: null, interval_seconds: null }));
    assert.deepEqual({ enabled: saved.enabled, path: saved.path, interval: saved.interval_seconds }, { enabled: true, path: null, interval: null });
  });

  it('the database refuses a path or interval the API would refuse', async () => {
    const e = await newEndpoint();
    await assert.rejects(t.db.transaction((tx) => health.saveHealthCheck(tx, e.id, { enabled: false, path: 'no-slash', interval_seconds: null })));
    await assert.rejects(t.db.transaction((tx) => health.saveHealthCheck(tx, e.id, { enabled: false, path: null, interval_seconds: 59 })));
    await assert.rejects(t.db.transaction((tx) => health.saveHealthCheck(tx, e.id, { enabled: false, path: '/' + 'a'.repeat(255), interval_seconds: null })));
  });

  it('lastVerdicts: the newest verdict per endpoint, none for endpoints without, none once older than 7 days', async () => {
    const [a, b, c, d] = [await newEndpoint(), await newEndpoint(), await newEndpoint(), await newEndpoint()];
    for (const e of [a, b, c]) await t.db.transaction((tx) => health.saveHealthCheck(tx, e.id, { enabled: true, path: null, interval_seconds: null }));
    await probe(a.id, 'healthy', 120);
    await probe(a.id, 'unhealthy', 60);
    await probe(b.id, 'timeout');
    await probe(c.id, 'healthy', 8 * 86400);
    const verdicts = await health.lastVerdicts(t.db, [a.id, b.id, c.id, d.id]);
    assert.deepEqual([...verdicts.keys()].sort(), [a.id, b.id].sort());
    assert.equal(verdicts.get(a.id)!.status, 'unhealthy');
    assert.equal(verdicts.get(b.id)!.status, 'timeout');
    assert.ok(verdicts.get(a.id)!.checked_at instanceof Date);
    assert.deepEqual(await health.lastVerdicts(t.db, []), new Map());
    // Disabling keeps the verdict (it ages out; docs/api.md "Health checks" states).
    await t.db.transaction((tx) => health.saveHealthCheck(tx, a.id, { enabled: false, path: null, interval_seconds: null }));
    const after = await health.lastVerdicts(t.db, [a.id]);
    assert.equal(after.get(a.id)!.status, 'unhealthy');
    assert.equal(after.get(a.id)!.enabled, false);
  });

  it('uptime: healthy probes over all probes per window, 2 decimals; latency of healthy probes over 24 h', async () => {
    const e = await newEndpoint();
    await t.db.transaction((tx) => health.saveHealthCheck(tx, e.id, { enabled: true, path: null, interval_seconds: null }));
    assert.deepEqual(await health.uptimeAggregates(t.db, e.id), { uptime_24h: 0, uptime_7d: 0, uptime_30d: 0, avg_latency_ms: 0 });
    await probe(e.id, 'healthy', 60, 10);
    await probe(e.id, 'healthy', 120, 21);
    await probe(e.id, 'unhealthy', 180, 500);
    await probe(e.id, 'healthy', 2 * 86400, 99); // 7 d and 30 d only
    await probe(e.id, 'error', 10 * 86400); // 30 d only
    await probe(e.id, 'healthy', 31 * 86400); // outside every window
    assert.deepEqual(await health.uptimeAggregates(t.db, e.id), { uptime_24h: 66.67, uptime_7d: 75, uptime_30d: 60, avg_latency_ms: 15.5 });
    const recent = await health.recentProbes(t.db, e.id, 3);
    assert.deepEqual(recent.map((p) => p.status), ['healthy', 'healthy', 'unhealthy']);
    assert.equal(recent[0].latency_ms, 10);
  });

  it('claims: a due check is claimed by one worker, not again within its interval, and its lease is released by the probe', async () => {
    const e = await newEndpoint();
    await t.db.transaction((tx) => health.saveHealthCheck(tx, e.id, { enabled: true, path: '/ping', interval_seconds: 120 }));
    // Scheduled first (spread over at most 30 s; here forced due), then claimed.
    await health.scheduleNewChecks(t.db, 1);
    await t.db.query('UPDATE health_checks SET next_probe_at = now() - interval \'1 second\' WHERE endpoint_id = $1', [e.id]);
    const [first, second] = await Promise.all([health.claimDueChecks(t.db, 'w1', { limit: 100, leaseSeconds: 30, scale: 1 }), health.claimDueChecks(t.db, 'w2', { limit: 100, leaseSeconds: 30, scale: 1 })]);
    const mine = [...first, ...second].filter((c) => c.endpoint_id === e.id);
    assert.equal(mine.length, 1, 'claimed once');
    assert.deepEqual({ uuid: mine[0].uuid, hostname: mine[0].hostname, path: mine[0].path, interval: mine[0].interval_seconds }, { uuid: e.uuid, hostname: e.hostname, path: '/ping', interval: 120 });
    const { rows } = await t.db.query<{ ahead: number; lease_owner: string }>('SELECT extract(epoch FROM next_probe_at - now())::float8 AS ahead, lease_owner FROM health_checks WHERE endpoint_id = $1', [e.id]);
    assert.ok(rows[0].ahead >= 119, `next probe a whole interval on (${rows[0].ahead} s)`);
    const owner = first.some((c) => c.endpoint_id === e.id) ? 'w1' : 'w2';
    assert.equal(rows[0].lease_owner, owner);
    await health.recordProbe(t.db, e.id, owner, { status: 'healthy', status_code: 204, latency_ms: 3, error_message: null });
    const released = await t.db.query<{ lease_owner: string | null }>('SELECT lease_owner FROM health_checks WHERE endpoint_id = $1', [e.id]);
    assert.equal(released.rows[0].lease_owner, null);
  });

  it('a disabled check is never claimed, and enabling or a new interval reschedules it', async () => {
    const e = await newEndpoint();
    await t.db.transaction((tx) => health.saveHealthCheck(tx, e.id, { enabled: false, path: null, interval_seconds: null }));
    await health.scheduleNewChecks(t.db, 1);
    const claimed = await health.claimDueChecks(t.db, 'w1', { limit: 1000, leaseSeconds: 30, scale: 1 });
    assert.ok(!claimed.some((c) => c.endpoint_id === e.id));
    await t.db.transaction((tx) => health.saveHealthCheck(tx, e.id, { enabled: true, path: null, interval_seconds: null }));
    const scheduled = await health.scheduleNewChecks(t.db, 1);
    assert.ok(scheduled >= 1);
    const { rows } = await t.db.query<{ ahead: number }>('SELECT extract(epoch FROM next_probe_at - now())::float8 AS ahead FROM health_checks WHERE endpoint_id = $1', [e.id]);
    assert.ok(rows[0].ahead <= 30, 'first probe within 30 s');
  });

  it('pruning removes probe rows older than 30 days and clears verdicts older than 7 days', async () => {
    const e = await newEndpoint();
    await t.db.transaction((tx) => health.saveHealthCheck(tx, e.id, { enabled: true, path: null, interval_seconds: null }));
    await probe(e.id, 'healthy', 31 * 86400);
    await probe(e.id, 'unhealthy', 8 * 86400);
    const pruned = await health.pruneHealth(t.db);
    assert.ok(pruned.probes >= 1 && pruned.verdicts >= 1);
    assert.equal((await health.recentProbes(t.db, e.id)).length, 1);
    const { rows } = await t.db.query<{ last_status: string | null }>('SELECT last_status FROM health_checks WHERE endpoint_id = $1', [e.id]);
    assert.equal(rows[0].last_status, null);
    assert.equal(await health.lastCheck(t.db, e.id), null);
  });

  it('an endpoint removed takes its check and probes with it', async () => {
    const e = await newEndpoint();
    await t.db.transaction((tx) => health.saveHealthCheck(tx, e.id, { enabled: true, path: null, interval_seconds: null }));
    await probe(e.id, 'healthy');
    await t.db.query('DELETE FROM endpoints WHERE id = $1', [e.id]);
    assert.equal(await health.findHealthCheck(t.db, e.id), null);
    assert.equal((await health.recentProbes(t.db, e.id)).length, 0);
  });
});
