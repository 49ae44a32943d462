// Cluster-scope counting against a real Redis (a private redis-server): the Lua script with the clock passed in as
// ARGV agrees with the in-memory counter, two edges share one limit, NOSCRIPT falls back to EVAL, and with Redis
// stopped a rule fails open (local counts) or closed (503 rate_limit_unavailable).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { ClusterStore, RateLimitStoreUnavailable } from '../../../src/edge/rate-limit/cluster.ts';
import { SlidingWindowCounter, type RateLimitClock } from '../../../src/edge/rate-limit/window.ts';
import { rateLimit } from '../../../src/edge/stages/rate-limit.ts';
import type { RateLimitRuleConfig } from '../../../src/shared/snapshot.ts';
import { endpointConfig } from '../../helpers/endpoint-config.ts';
import { startRedisServer, type RedisServer } from '../../helpers/redis-server.ts';
import { serveStage } from '../../helpers/stage-server.ts';

function rule(over: Partial<RateLimitRuleConfig> = {}): RateLimitRuleConfig {
  return {
    uuid: '6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f',
    id: 1,
    name: 'cluster rule',
    requests_per_window: 3,
    window_size_seconds: 10,
    action: 'block',
    priority: 1,
    scope: 'cluster',
    fail_mode: 'open',
    conditions: [],
    ...over,
  };
}

/** A clock that stands still unless the test moves it. */
function fixedClock(start: number): RateLimitClock & { t: number } {
  const clock = { t: start, now: () => clock.t, setTimeout: (fn: () => void, ms: number) => setTimeout(fn, ms) };
  return clock;
}

describe('cluster-scope rate limits in Redis', () => {
  let server: RedisServer;
  const stores: ClusterStore[] = [];
  const store = async (timeoutMs = 500) => {
    const s = new ClusterStore({ url: server.url, prefix: `t${stores.length}:`, timeoutMs });
    stores.push(s);
    await s.ready();
    return s;
  };

  before(async () => {
    server = await startRedisServer();
  });
  after(async () => {
    for (const s of stores) s.close();
    await server.stop();
  });

  it('decides as the in-memory counter does, with the clock passed in', async () => {
    const s = await store();
    const local = new SlidingWindowCounter(7, 1000);
    // A deterministic irregular stream across a few windows, two visitors.
    let t = 5_000;
    for (let i = 0; i < 120; i++) {
      t += (i * 37) % 90;
      const key = i % 3 === 0 ? 'b' : 'a';
      const want = local.take(key, t);
      const got = await s.take('r1', key, 7, 1000, t);
      assert.deepEqual(got, want, `request ${i} at ${t}`);
    }
  });

  it('holds one limit across two edges on one Redis, and survives a script flush (NOSCRIPT → EVAL)', async () => {
    const a = await store();
    const b = new ClusterStore({ url: server.url, prefix: 't1:', timeoutMs: 500 });
    stores.push(b);
    await b.ready();
    let allowed = 0;
    for (let i = 0; i < 10; i++) if ((await (i % 2 ? a : b).take('r2', 'v', 5, 60_000, 1_000 + i)).allowed) allowed++;
    assert.equal(allowed, 5);
    const admin = new Redis(server.url);
    await admin.script('FLUSH');
    await admin.quit();
    const later = await a.take('r2', 'w', 5, 60_000, 1_000);
    assert.equal(later.allowed, true);
  });

  it('fails open to local counts, or closed with 503, when Redis is gone', async () => {
    const s = await store(200);
    const clock = fixedClock(1_000_000);
    const open = rateLimit.compile(endpointConfig({ uuid: '11111111-1111-4111-8111-111111111111', rate_limits: [rule({ fail_mode: 'open' })] }), {
      publicHttpsPort: () => 443,
      rateLimits: { cluster: s, clock },
    })!;
    const closed = rateLimit.compile(endpointConfig({ uuid: '22222222-2222-4222-8222-222222222222', rate_limits: [rule({ uuid: '7f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f', fail_mode: 'closed' })] }), {
      publicHttpsPort: () => 443,
      rateLimits: { cluster: s, clock },
    })!;
    const openServer = await serveStage(open, endpointConfig());
    const closedServer = await serveStage(closed, endpointConfig());
    try {
      // Up: both count in Redis.
      assert.equal((await openServer.request({ clientIp: '198.51.100.1' })).status, 200);
      assert.equal((await closedServer.request({ clientIp: '198.51.100.1' })).status, 200);
      await server.stop();
      const refused = await closedServer.request({ clientIp: '198.51.100.1' });
      assert.equal(refused.status, 503);
      assert.equal(refused.headers['x-edge-error'], 'rate_limit_unavailable');
      assert.equal(refused.headers['retry-after'], '1');
      // Open: the local counter takes over (its own count: 3 more, then 429).
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) statuses.push((await openServer.request({ clientIp: '198.51.100.1' })).status);
      assert.deepEqual(statuses, [200, 200, 200, 429]);
      await assert.rejects(s.take('r', 'k', 1, 1000, 0), RateLimitStoreUnavailable);
    } finally {
      await openServer.close();
      await closedServer.close();
      await server.restart();
    }
  });

  it('refuses a visitor the cluster blocked without asking Redis again until the wait is over', async () => {
    const s = await store();
    const clock = fixedClock(2_000_000);
    const stage = rateLimit.compile(endpointConfig({ rate_limits: [rule({ uuid: '8f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f', requests_per_window: 1 })] }), {
      publicHttpsPort: () => 443,
      rateLimits: { cluster: s, clock },
    })!;
    const srv = await serveStage(stage, endpointConfig());
    try {
      assert.equal((await srv.request({ clientIp: '203.0.113.5' })).status, 200);
      assert.equal((await srv.request({ clientIp: '203.0.113.5' })).status, 429);
      // Redis gone: a blocked visitor is still refused 429 (the local shortcut), not failed open.
      await server.stop();
      const again = await srv.request({ clientIp: '203.0.113.5' });
      assert.equal(again.status, 429);
      assert.equal(again.headers['ratelimit-policy'], '1;w=10');
    } finally {
      await srv.close();
      await server.restart();
    }
  });
});
