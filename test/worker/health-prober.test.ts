// The health prober against a real HTTP server standing in for the edge's public listener, and the store: what a
// probe sends (Host, User-Agent, a signature the edge can verify), each verdict, leases across two workers, config
// changes and the test interval scale.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { PROBE_HEADER, PROBE_USER_AGENT, PROBE_VALIDITY_SECONDS, signProbe, verifyProbe } from '../../src/shared/health-probe.ts';
import * as accounts from '../../src/store/accounts.ts';
import { insertEndpoint } from '../../src/store/endpoints.ts';
import { recentProbes, saveHealthCheck } from '../../src/store/health.ts';
import { HealthProber, probeOnce, verdictOf } from '../../src/worker/health-prober.ts';
import { openTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { eventually } from '../helpers/eventually.ts';
import { capturedLogger } from '../helpers/logger.ts';

const KEY = randomBytes(32);

interface Seen {
  host: string;
  url: string;
  method: string;
  userAgent: string;
  signature: string | undefined;
}

describe('probe signatures', () => {
  const uuid = '6f1c1f7e-8d3a-4a8e-9a59-0d1f0e0b7c11';
  it('verify for exactly the endpoint, method and target signed, within the validity window', () => {
    const now = Date.now();
    const value = signProbe(KEY, uuid, 'GET', '/health?x=1', now);
    assert.equal(verifyProbe(KEY, value, uuid, 'GET', '/health?x=1', now), true);
    assert.equal(verifyProbe(KEY, value, uuid, 'GET', '/health?x=1', now + PROBE_VALIDITY_SECONDS * 1000 - 1000), true);
    assert.equal(verifyProbe(KEY, value, uuid, 'GET', '/health?x=1', now + (PROBE_VALIDITY_SECONDS + 2) * 1000), false, 'stale');
    assert.equal(verifyProbe(KEY, value, uuid, 'GET', '/health?x=1', now - (PROBE_VALIDITY_SECONDS + 2) * 1000), false, 'from the future');
    assert.equal(verifyProbe(KEY, value, uuid, 'GET', '/health?x=2', now), false, 'other target');
    assert.equal(verifyProbe(KEY, value, uuid, 'HEAD', '/health?x=1', now), false, 'other method');
    assert.equal(verifyProbe(KEY, value, '00000000-0000-4000-8000-000000000000', 'GET', '/health?x=1', now), false, 'other endpoint');
    assert.equal(verifyProbe(randomBytes(32), value, uuid, 'GET', '/health?x=1', now), false, 'other key');
    for (const bad of [undefined, '', '.', 'x.y', `${Math.floor(now / 1000)}.`, `${Math.floor(now / 1000)}.AAAA`, ['a', 'b'], value + 'A']) {
      assert.equal(verifyProbe(KEY, bad as never, uuid, 'GET', '/health?x=1', now), false, `malformed ${String(bad)}`);
    }
    assert.throws(() => signProbe(KEY, uuid, 'POST', '/'), /GET or HEAD/);
    assert.equal(verifyProbe(KEY, value, uuid, 'POST', '/health?x=1', now), false);
  });
});

describe('verdicts', () => {
  it('2xx and 3xx are healthy, everything else unhealthy', () => {
    for (const s of [200, 204, 299, 301, 304, 399]) assert.equal(verdictOf(s), 'healthy', String(s));
    for (const s of [100, 400, 401, 404, 429, 500, 502, 503]) assert.equal(verdictOf(s), 'unhealthy', String(s));
  });
});

describe(`the prober (${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite'})`, () => {
  let t: TestDatabase;
  let edge: http.Server;
  let edgeUrl: string;
  const seen: Seen[] = [];
  /** What the stand-in edge answers, by path. */
  let answer: (req: http.IncomingMessage, res: http.ServerResponse) => void = (_req, res) => res.end('ok');
  let user: { id: number; account: number };
  const probers: HealthProber[] = [];

  before(async () => {
    t = await openTestDatabase();
    const created = await t.db.transaction((tx) => accounts.createUser(tx, { email: 'prober@example.test', plan: 'pro' }));
    user = { id: created.user.id, account: created.account.id };
    edge = http.createServer((req, res) => {
      seen.push({ host: req.headers.host ?? '', url: req.url ?? '', method: req.method ?? '', userAgent: req.headers['user-agent'] ?? '', signature: req.headers[PROBE_HEADER] as string | undefined });
      answer(req, res);
    });
    await new Promise<void>((r) => edge.listen(0, '127.0.0.1', r));
    edgeUrl = `http://127.0.0.1:${(edge.address() as AddressInfo).port}`;
  });
  after(async () => {
    for (const p of probers) await p.stop();
    edge.closeAllConnections();
    edge.close();
    await t.close();
  });

  function prober(over: Partial<ConstructorParameters<typeof HealthProber>[1]> = {}): HealthProber {
    const p = new HealthProber(t.db, { edgeUrl: () => edgeUrl, probeKey: KEY, timeoutMs: 2000, minIntervalSeconds: 60, concurrency: 10, node: 'test', logger: capturedLogger().logger, ...over });
    probers.push(p);
    return p;
  }

  async function newCheck(check: { path?: string | null; interval?: number | null; enabled?: boolean } = {}): Promise<{ id: number; uuid: string; hostname: string }> {
    const sub = `probe-${randomBytes(4).toString('hex')}`;
    const row = await t.db.transaction((tx) =>
      insertEndpoint(tx, { userId: user.id, accountId: user.account, domainId: null, subdomain: sub, hostname: `${sub}.example.test`, isCustom: false }),
    );
    assert.ok(row);
    await t.db.transaction((tx) => saveHealthCheck(tx, row.id, { enabled: check.enabled ?? true, path: check.path ?? null, interval_seconds: check.interval ?? null }));
    return { id: row.id, uuid: row.uuid, hostname: row.hostname };
  }

  /** Makes the check due now (its first probe would otherwise be spread over up to 25 s). */
  const due = (id: number) => t.db.query("UPDATE health_checks SET next_probe_at = now() - interval '1 second' WHERE endpoint_id = $1", [id]);
  const probesOf = (hostname: string) => seen.filter((s) => s.host === hostname);

  it('probes the path with the endpoint’s hostname as Host, its User-Agent and a signature the edge verifies', async () => {
    const e = await newCheck({ path: '/status?full=1' });
    const p = prober();
    await p.pass(); // schedules
    await due(e.id);
    assert.equal(await p.pass(), 1);
    await p.idle();
    const [probe] = probesOf(e.hostname);
    assert.deepEqual([probe.method, probe.url, probe.userAgent], ['GET', '/status?full=1', PROBE_USER_AGENT]);
    assert.equal(verifyProbe(KEY, probe.signature, e.uuid, 'GET', '/status?full=1'), true);
    const [row] = await recentProbes(t.db, e.id);
    assert.deepEqual([row.status, row.status_code, row.error_message], ['healthy', 200, null]);
    assert.ok(row.latency_ms >= 0);
  });

  it('records unhealthy (with the edge’s error code), error and timeout verdicts', async () => {
    const p = prober({ timeoutMs: 300 });
    answer = (req, res) => {
      if (req.url === '/502') {
        res.writeHead(502, { 'x-edge-error': 'no_agent' });
        return res.end('no agent');
      }
      if (req.url === '/redirect') {
        res.writeHead(302, { location: '/' });
        return res.end();
      }
      if (req.url === '/slow') return; // never answers: the probe times out
      res.end('ok');
    };
    const unhealthy = await newCheck({ path: '/502' });
    const redirect = await newCheck({ path: '/redirect' });
    const slow = await newCheck({ path: '/slow' });
    await p.pass();
    for (const e of [unhealthy, redirect, slow]) await due(e.id);
    await p.pass();
    await p.idle();
    const [u] = await recentProbes(t.db, unhealthy.id);
    assert.deepEqual([u.status, u.status_code], ['unhealthy', 502]);
    assert.match(u.error_message!, /^HTTP 502 no_agent/);
    const [r] = await recentProbes(t.db, redirect.id);
    assert.deepEqual([r.status, r.status_code], ['healthy', 302]);
    const [s] = await recentProbes(t.db, slow.id);
    assert.deepEqual([s.status, s.status_code, s.error_message], ['timeout', null, 'no response within 300 ms']);
    answer = (_req, res) => res.end('ok');
  });

  it('records a connection failure as error', async () => {
    // A port that was just free: nothing listens there.
    const spare = net.createServer();
    await new Promise<void>((r) => spare.listen(0, '127.0.0.1', r));
    const port = (spare.address() as AddressInfo).port;
    await new Promise<void>((r) => spare.close(() => r()));
    const result = await probeOnce(new URL(`http://127.0.0.1:${port}`), { uuid: '6f1c1f7e-8d3a-4a8e-9a59-0d1f0e0b7c11', hostname: 'x.example.test', path: '/' }, KEY, 2000);
    assert.equal(result.status, 'error');
    assert.equal(result.status_code, null);
    assert.match(result.error_message!, /ECONNREFUSED/);
  });

  it('a path no request line can carry (stored before the API refused it) is an error verdict, not a crashed worker', async () => {
    // Node's client throws synchronously on characters above U+00FF in a path; unhandled, that ended the process.
    const result = await probeOnce(new URL(edgeUrl), { uuid: '6f1c1f7e-8d3a-4a8e-9a59-0d1f0e0b7c11', hostname: 'x.example.test', path: '/\u20ac' }, KEY, 2000);
    assert.deepEqual([result.status, result.status_code], ['error', null]);
    assert.match(result.error_message!, /ERR_UNESCAPED_CHARACTERS/);
    const e = await newCheck({ path: '/caf\u00e9/\u65e5\u672c' });
    const p = prober();
    await p.pass();
    await due(e.id);
    assert.equal(await p.pass(), 1);
    await p.idle();
    const [row] = await recentProbes(t.db, e.id);
    assert.deepEqual([row.status, row.status_code], ['error', null]);
    assert.equal(probesOf(e.hostname).length, 0);
  });

  it('two workers never probe one endpoint twice within its interval', async () => {
    const e = await newCheck({ interval: 60 });
    const [a, b] = [prober({ node: 'a' }), prober({ node: 'b' })];
    await a.pass();
    await due(e.id);
    for (let i = 0; i < 5; i++) await Promise.all([a.pass(), b.pass()]);
    await Promise.all([a.idle(), b.idle()]);
    assert.equal(probesOf(e.hostname).length, 1);
    assert.equal((await recentProbes(t.db, e.id)).length, 1);
  });

  it('a disabled check is not probed; enabling it again is picked up at the next round', async () => {
    const e = await newCheck({ enabled: false });
    const p = prober({ minIntervalSeconds: 1 });
    await p.pass();
    await p.idle();
    assert.equal(probesOf(e.hostname).length, 0);
    await t.db.transaction((tx) => saveHealthCheck(tx, e.id, { enabled: true, path: null, interval_seconds: null }));
    // The test scale (1 s for the 60 s minimum) spreads the first probe over at most a second.
    await eventually(async () => {
      await p.pass();
      await p.idle();
      return probesOf(e.hostname).length > 0 ? true : undefined;
    });
    await t.db.transaction((tx) => saveHealthCheck(tx, e.id, { enabled: false, path: null, interval_seconds: null }));
    const before = probesOf(e.hostname).length;
    await due(e.id);
    await p.pass();
    await p.idle();
    assert.equal(probesOf(e.hostname).length, before);
  });

  it('the test scale makes a 60 s check probe about every second, through the timer', async () => {
    const e = await newCheck();
    const p = prober({ minIntervalSeconds: 1 });
    p.start();
    await eventually(async () => (probesOf(e.hostname).length >= 3 ? true : undefined));
    await p.stop();
  });

  it('with more checks due than its concurrency, a freed slot claims the next at once rather than at the next poll', async () => {
    // Two slots and a poll of an hour: only claiming again as probes finish gets through six due checks. Waiting for
    // the poll capped a worker at concurrency probes per poll (20 per 5 s: 240 checks a minute, whatever the edge).
    const checks: { id: number; hostname: string }[] = [];
    for (let i = 0; i < 6; i++) checks.push(await newCheck());
    const p = prober({ concurrency: 2, pollMs: 3_600_000 });
    await p.pass(); // schedules
    for (const e of checks) await due(e.id);
    p.start();
    await eventually(async () => (checks.every((e) => probesOf(e.hostname).length === 1) ? true : undefined));
    await p.stop();
  });

  it('without an edge to probe through, a round does nothing', async () => {
    const e = await newCheck();
    const p = prober({ edgeUrl: () => null });
    await due(e.id);
    assert.equal(await p.pass(), 0);
    assert.equal(probesOf(e.hostname).length, 0);
  });
});
