// The rate-limit stage against plain requests (serveStage): absent without rules, every matching rule counts and
// reports a hit while the first over its limit acts, counts kept across recompiles of an unchanged rule, browser
// conditions, and a GeoIP database that cannot be read failing the compile instead of a request.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { StageMemory } from '../../../src/edge/pipeline/stage-memory.ts';
import http from 'node:http';
import type { RateLimitOutcome } from '../../../src/edge/rate-limit/deps.ts';
import { HeldRequests, RateLimitCounters } from '../../../src/edge/rate-limit/visitors.ts';
import { eventually } from '../../helpers/eventually.ts';
import { capturedLogger } from '../../helpers/logger.ts';
import type { StageDeps } from '../../../src/edge/pipeline/stage.ts';
import { browserOf } from '../../../src/edge/rate-limit/browser.ts';
import { GeoDatabases } from '../../../src/shared/geo.ts';
import { rateLimit, throttleQueueBound } from '../../../src/edge/stages/rate-limit.ts';
import type { RateLimitRuleConfig } from '../../../src/shared/snapshot.ts';
import { endpointConfig } from '../../helpers/endpoint-config.ts';
import { serveStage } from '../../helpers/stage-server.ts';

const clock = { now: () => 1_800_000_000_000, setTimeout: (fn: () => void, ms: number) => setTimeout(fn, ms) };

function rule(id: number, limit: number, conditions: [RateLimitRuleConfig['conditions'][number]['type'], string, string][] = [], over: Partial<RateLimitRuleConfig> = {}): RateLimitRuleConfig {
  return {
    uuid: `00000000-0000-4000-8000-${String(id).padStart(12, '0')}`,
    id,
    name: `rule ${id}`,
    requests_per_window: limit,
    window_size_seconds: 60,
    action: 'block',
    priority: id,
    scope: 'edge',
    fail_mode: 'open',
    conditions: conditions.map(([type, operator, value]) => ({ uuid: '10000000-0000-4000-8000-000000000000', type, operator, value, logical_operator: 'AND' })),
    ...over,
  };
}

describe('rate-limit stage', () => {
  it('is absent for an endpoint without active rules', () => {
    assert.equal(rateLimit.compile(endpointConfig()), null);
    assert.equal(rateLimit.compile(endpointConfig({ rate_limits: [] })), null);
  });

  it('counts the request on every matching rule, reports each hit, and lets the first rule over its limit act', async () => {
    const hits: string[] = [];
    const deps: StageDeps = { publicHttpsPort: () => 443, rateLimits: { clock, hits: { hit: (u) => hits.push(u) } } };
    // Listed out of order: priority decides. Rule 1 (limit 3) on /api, rule 2 (limit 2) on everything, rule 3 never matches.
    const endpoint = endpointConfig({ rate_limits: [rule(2, 2), rule(3, 1, [['method', 'equals', 'DELETE']]), rule(1, 3, [['path', 'prefix', '/api']])] });
    const srv = await serveStage(rateLimit.compile(endpoint, deps)!, endpoint);
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) statuses.push((await srv.request({ path: '/api/x', clientIp: '192.0.2.1' })).status);
      // Rule 2 refuses the third; rule 1 counted it (3 of 3) and refuses the fourth as the first in order over its limit.
      assert.deepEqual(statuses, [200, 200, 429, 429]);
      const last = await srv.request({ path: '/api/x', clientIp: '192.0.2.1' });
      assert.equal(last.headers['ratelimit-limit'], '3');
      assert.equal(last.headers['ratelimit-policy'], '3;w=60');
      assert.equal(hits.filter((h) => h.endsWith('1')).length, 5);
      assert.equal(hits.filter((h) => h.endsWith('2')).length, 5);
      assert.equal(hits.filter((h) => h.endsWith('3')).length, 0);
      // Another visitor, another count; the mapped form of an IPv4 address is the same visitor.
      assert.equal((await srv.request({ path: '/other', clientIp: '192.0.2.2' })).status, 200);
      assert.equal((await srv.request({ path: '/other', clientIp: '::ffff:192.0.2.1' })).status, 429);
    } finally {
      await srv.close();
    }
  });

  it('windows follow the stages\' clock (StageDeps.clock) when the rate limits are given none of their own', async () => {
    let now = 1_800_000_000_000;
    const deps: StageDeps = { publicHttpsPort: () => 443, clock: { now: () => now } };
    const endpoint = endpointConfig({ rate_limits: [rule(1, 1)] });
    const srv = await serveStage(rateLimit.compile(endpoint, deps)!, endpoint);
    try {
      assert.equal((await srv.request({ clientIp: '192.0.2.5' })).status, 200);
      assert.equal((await srv.request({ clientIp: '192.0.2.5' })).status, 429);
      now += 120_000; // two windows on: the count is gone, with no waiting
      assert.equal((await srv.request({ clientIp: '192.0.2.5' })).status, 200);
    } finally {
      await srv.close();
    }
  });

  it('keeps counts across recompiles while the rule counts the same, and starts afresh when its limit changes', async () => {
    const counters = new RateLimitCounters({ maxKeysPerRule: 1000 });
    const deps: StageDeps = { publicHttpsPort: () => 443, rateLimits: { clock, counters } };
    const first = endpointConfig({ rate_limits: [rule(1, 2)] });
    const srv = await serveStage(rateLimit.compile(first, deps)!, first);
    try {
      assert.equal((await srv.request({ clientIp: '192.0.2.9' })).status, 200);
      assert.equal((await srv.request({ clientIp: '192.0.2.9' })).status, 200);
      // Renamed and turned to throttle: same counts.
      srv.stage = rateLimit.compile(endpointConfig({ rate_limits: [rule(1, 2, [], { name: 'renamed' })] }), deps)!;
      assert.equal((await srv.request({ clientIp: '192.0.2.9' })).status, 429);
      srv.stage = rateLimit.compile(endpointConfig({ rate_limits: [rule(1, 3)] }), deps)!;
      assert.equal((await srv.request({ clientIp: '192.0.2.9' })).status, 200);
    } finally {
      await srv.close();
    }
  });

  it('matches browser conditions on the User-Agent, parsed only for rules that ask', async () => {
    const chrome = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36';
    const firefox = 'Mozilla/5.0 (X11; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0';
    assert.equal(browserOf(chrome), 'chrome');
    assert.equal(browserOf(firefox), 'firefox');
    assert.equal(browserOf('Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0'), 'edge');
    assert.equal(browserOf('Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/126.0.0.0 Safari/537.36'), 'headless chrome');
    assert.equal(browserOf('curl/8.5.0'), null);
    assert.equal(browserOf(''), null);
    const endpoint = endpointConfig({ rate_limits: [rule(1, 1, [['browser', 'in', 'firefox']])] });
    const srv = await serveStage(rateLimit.compile(endpoint, { publicHttpsPort: () => 443, rateLimits: { clock } })!, endpoint);
    try {
      for (let i = 0; i < 3; i++) assert.equal((await srv.request({ clientIp: '192.0.2.20', headers: { 'user-agent': chrome } })).status, 200);
      assert.equal((await srv.request({ clientIp: '192.0.2.20', headers: { 'user-agent': firefox } })).status, 200);
      assert.equal((await srv.request({ clientIp: '192.0.2.20', headers: { 'user-agent': firefox } })).status, 429);
    } finally {
      await srv.close();
    }
  });

  it('keeps the endpoint up when a GeoIP database cannot be read, taking its conditions as met (logged once)', async () => {
    const geo = new GeoDatabases({ countryDb: '/nonexistent/country.mmdb', asnDb: '/nonexistent/asn.mmdb' });
    const { logger, lines } = capturedLogger('error');
    const deps: StageDeps = { publicHttpsPort: () => 443, logger, rateLimits: { clock, geo } };
    // A promise kept in the strict direction: `country in US` and `asn not_in 13335` both hold for every visitor.
    const endpoint = endpointConfig({
      rate_limits: [rule(1, 1, [['path', 'prefix', '/c'], ['country', 'in', 'US']]), rule(2, 1, [['path', 'prefix', '/a'], ['asn', 'not_in', '13335']]), rule(3, 1, [['path', 'prefix', '/p']])],
    });
    const stage = rateLimit.compile(endpoint, deps);
    assert.notEqual(stage, null);
    rateLimit.compile(endpoint, deps);
    const logs = lines.map((l) => String(l.msg));
    assert.equal(logs.filter((l) => /country GeoIP database cannot be read/.test(l)).length, 1);
    assert.equal(logs.filter((l) => /asn GeoIP database cannot be read/.test(l)).length, 1);
    const srv = await serveStage(stage!, endpoint);
    try {
      for (const path of ['/c', '/a', '/p']) {
        assert.equal((await srv.request({ path, clientIp: '192.0.2.50' })).status, 200, path);
        assert.equal((await srv.request({ path, clientIp: '192.0.2.50' })).status, 429, path);
      }
      // Other paths match no rule: served.
      assert.equal((await srv.request({ path: '/other', clientIp: '192.0.2.50' })).status, 200);
    } finally {
      await srv.close();
    }
  });

  it('bounds a throttle queue by the limit, at most 100', () => {
    assert.equal(throttleQueueBound(1), 1);
    assert.equal(throttleQueueBound(5), 5);
    assert.equal(throttleQueueBound(100_000), 100);
  });
  it('keeps a rule’s counts whatever other endpoints and stages churn through the stage cache', async () => {
    // A one-entry StageMemory (EDGE_CACHE_SIZE shared by every stage of every endpoint) once held the counts: any
    // other compile evicted them, and the next recompile gave every visitor a fresh window.
    const memory = new StageMemory(1);
    const counters = new RateLimitCounters({ maxKeysPerRule: 1000 });
    const deps: StageDeps = { publicHttpsPort: () => 443, memory, rateLimits: { clock, counters } };
    const target = endpointConfig({ uuid: '20000000-0000-4000-8000-000000000001', rate_limits: [rule(1, 2)] });
    const srv = await serveStage(rateLimit.compile(target, deps)!, target);
    try {
      assert.equal((await srv.request({ clientIp: '192.0.2.30' })).status, 200);
      assert.equal((await srv.request({ clientIp: '192.0.2.30' })).status, 200);
      for (let i = 2; i < 50; i++) {
        const other = endpointConfig({ uuid: `20000000-0000-4000-8000-${String(i).padStart(12, '0')}`, rate_limits: [rule(100 + i, 5)] });
        rateLimit.compile(other, deps);
        memory.keep('auth', other.uuid, 'v', () => ({}));
      }
      srv.stage = rateLimit.compile(target, deps)!;
      assert.equal((await srv.request({ clientIp: '192.0.2.30' })).status, 429);
    } finally {
      await srv.close();
    }
  });

  it('frees a held request’s place the moment its visitor disconnects, and bounds held requests per edge', async () => {
    const outcomes: RateLimitOutcome[] = [];
    const held = new HeldRequests(2);
    const deps: StageDeps = { publicHttpsPort: () => 443, rateLimits: { clock, held, observe: (_e, _r, o) => outcomes.push(o) } };
    const endpoint = endpointConfig({ rate_limits: [rule(1, 1, [], { action: 'throttle' })] });
    const srv = await serveStage(rateLimit.compile(endpoint, deps)!, endpoint);
    /** A request held by the throttle rule (its window is 60 s of a still clock): resolves once held. */
    const holdOne = async (ip: string) => {
      const before = outcomes.filter((o) => o === 'throttled').length;
      const req = http.request({ host: '127.0.0.1', port: srv.port, path: '/', headers: { 'x-test-client-ip': ip }, agent: false });
      req.on('error', () => {});
      req.end();
      await eventually(async () => (outcomes.filter((o) => o === 'throttled').length > before ? true : undefined));
      return req;
    };
    try {
      assert.equal((await srv.request({ clientIp: '192.0.2.40' })).status, 200);
      const first = await holdOne('192.0.2.40');
      assert.equal(held.count, 1);
      // The visitor's queue (bound 1) is full: refused.
      assert.equal((await srv.request({ clientIp: '192.0.2.40' })).status, 429);
      first.destroy();
      await eventually(async () => (held.count === 0 ? true : undefined));
      // Its place is free again at once (not when the rule's timer next fires, a window later).
      const again = await holdOne('192.0.2.40');
      assert.equal(held.count, 1);
      // The edge-wide bound: a second visitor is held, a third refused although its own queue is empty.
      assert.equal((await srv.request({ clientIp: '192.0.2.41' })).status, 200);
      const second = await holdOne('192.0.2.41');
      assert.equal(held.count, 2);
      assert.equal((await srv.request({ clientIp: '192.0.2.42' })).status, 200);
      const refused = await srv.request({ clientIp: '192.0.2.42' });
      assert.equal(refused.status, 429);
      assert.equal(refused.headers['retry-after'] !== undefined, true);
      again.destroy();
      second.destroy();
      await eventually(async () => (held.count === 0 ? true : undefined));
      assert.ok(outcomes.includes('allowed'));
    } finally {
      await srv.close();
    }
  });
});
