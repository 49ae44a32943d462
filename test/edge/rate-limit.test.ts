// Firewall rate limits end to end: two real edges (startEdge) fed one endpoint snapshot with rules, a local service
// as its origin, visitors over HTTP. Time in the windows is a hand-driven clock, so accuracy does not depend on the
// machine's speed: steady streams at 0.5x, 1x and 2x the limit, a parallel burst, throttling, one cluster limit
// across both edges on one Redis, trusted-proxy addresses (country, ASN, IPv6 /64) and untrusted X-Forwarded-For.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEdge, type EdgeNode } from '../../src/edge/index.ts';
import type { RateLimitOutcome } from '../../src/edge/rate-limit/deps.ts';
import type { RateLimitClock } from '../../src/edge/rate-limit/window.ts';
import { loadConfig } from '../../src/shared/config.ts';
import { MemoryFeed } from '../../src/shared/feed/memory.ts';
import { createLogger } from '../../src/shared/log.ts';
import { MemoryPresence } from '../../src/shared/presence.ts';
import { SecretBox } from '../../src/shared/secrets.ts';
import { TOPICS, type RateLimitConditionConfig, type RateLimitRuleConfig } from '../../src/shared/snapshot.ts';
import { endpointConfig } from '../helpers/endpoint-config.ts';
import { eventually } from '../helpers/eventually.ts';
import { visit, type Reply } from '../helpers/http.ts';
import { sample } from '../helpers/metrics.ts';
import { startLocalService, type LocalService } from '../helpers/local-service.ts';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.ts';

const HOST = 'rl.edge.test';
const UUID = '5d0f7a8e-1c2b-4d3e-9f4a-6b5c7d8e9f01';

/** A clock the test moves: timers fire when it passes their time, never on their own. */
class HandClock implements RateLimitClock {
  t = 1_800_000_000_000;
  private timers: { at: number; fn: () => void }[] = [];
  now = () => this.t;
  setTimeout = (fn: () => void, ms: number) => {
    this.timers.push({ at: this.t + ms, fn });
    return {};
  };
  get pending(): number {
    return this.timers.length;
  }
  /** Moves time on by `ms` in 100 ms steps, firing due timers (and what they schedule) and letting their work run. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    while (this.t < end) {
      this.t = Math.min(end, this.t + 100);
      for (;;) {
        const due = this.timers.filter((x) => x.at <= this.t);
        if (due.length === 0) break;
        this.timers = this.timers.filter((x) => x.at > this.t);
        for (const x of due) x.fn();
        await new Promise((r) => setImmediate(r));
      }
    }
    // Let I/O run (answers of requests just admitted) before the caller looks or moves time again.
    await new Promise((r) => setTimeout(r, 1));
  }
}

let ruleId = 0;
function rule(name: string, limit: number, windowSeconds: number, conditions: [RateLimitConditionConfig['type'], string, string][], over: Partial<RateLimitRuleConfig> = {}): RateLimitRuleConfig {
  ruleId++;
  const hex = ruleId.toString(16).padStart(12, '0');
  return {
    uuid: `00000000-0000-4000-8000-${hex}`,
    id: ruleId,
    name,
    requests_per_window: limit,
    window_size_seconds: windowSeconds,
    action: 'block',
    priority: ruleId,
    scope: 'edge',
    fail_mode: 'open',
    conditions: conditions.map(([type, operator, value], i) => ({ uuid: `10000000-0000-4000-8000-${hex.slice(0, 10)}${String(i).padStart(2, '0')}`, type, operator, value, logical_operator: 'AND' })),
    ...over,
  };
}

const RULES: RateLimitRuleConfig[] = [
  rule('steady', 20, 60, [['path', 'prefix', '/steady']]),
  rule('burst', 100, 60, [['path', 'prefix', '/burst']]),
  rule('throttle', 5, 10, [['path', 'prefix', '/slow']], { action: 'throttle' }),
  rule('country', 1, 60, [['path', 'prefix', '/country'], ['country', 'in', 'US']]),
  rule('asn', 1, 60, [['path', 'prefix', '/asn'], ['asn', 'equals', '13335']]),
  rule('v6', 2, 60, [['path', 'prefix', '/v6']]),
  rule('rotate', 2, 60, [['path', 'prefix', '/rotate']]),
  rule('cluster', 4, 60, [['path', 'prefix', '/cluster']], { scope: 'cluster' }),
  rule('login', 5, 60, [['path', 'equals', '/login'], ['method', 'equals', 'POST']]),
  rule('head', 2, 60, [['path', 'prefix', '/head']]),
  rule('ws', 1, 60, [['path', 'prefix', '/ws']]),
  rule('signin', 5, 60, [['path', 'equals', '/signin'], ['method', 'equals', 'POST']]),
  rule('exact', 1, 60, [['path', 'exact_equals', '/Exact']]),
  rule('cookieless', 1, 60, [['path', 'prefix', '/nocookie'], ['cookie', 'not_exists', ''], ['header', 'exists', '']]),
];

describe('rate limits through the edge', () => {
  const clock = new HandClock();
  const outcomes: { rule: string; outcome: RateLimitOutcome }[] = [];
  const feed = new MemoryFeed();
  const dirs: string[] = [];
  let redis: RedisServer;
  let service: LocalService<{ url: string; xff: string | undefined }>;
  /** `trusted` believes X-Forwarded-For from 127.0.0.1 (a proxy in front); `plain` trusts nobody. */
  let trusted: EdgeNode;
  let plain: EdgeNode;

  async function edge(trustedProxies: string): Promise<EdgeNode> {
    const dir = await mkdtemp(join(tmpdir(), 'edge-rl-'));
    dirs.push(dir);
    const settings = loadConfig({
      EDGE_HTTP_PORT: '0',
      EDGE_HTTPS_PORT: '0',
      EDGE_OPS_PORT: '0',
      EDGE_RELAY_PORT: '0',
      EDGE_DNS_PORT: '0',
      EDGE_BIND_HOST: '127.0.0.1',
      EDGE_DATA_DIR: dir,
      EDGE_LOG_LEVEL: 'silent',
      EDGE_ORIGIN_ALLOW_PRIVATE: 'true',
      EDGE_TRUSTED_PROXIES: trustedProxies,
      REDIS_URL: redis.url,
      EDGE_REDIS_PREFIX: 'rl-e2e:',
      EDGE_RATE_LIMIT_REDIS_TIMEOUT_MS: '1000',
    });
    return startEdge({
      settings,
      source: feed,
      secrets: new SecretBox('rate limit test secret'),
      presence: new MemoryPresence(60_000),
      logger: createLogger('silent'),
      createEphemeral: async () => {
        throw new Error('not in this test');
      },
      rateLimitClock: clock,
      rateLimitObserve: (_endpoint, ruleUuid, outcome) => outcomes.push({ rule: RULES.find((r) => r.uuid === ruleUuid)?.name ?? '', outcome }),
    });
  }

  before(async () => {
    redis = await startRedisServer();
    service = await startLocalService(
      (req, res, record) => {
        record({ url: req.url!, xff: req.headers['x-forwarded-for'] as string | undefined });
        req.resume();
        req.on('end', () => res.end('ok'));
      },
      () => {},
    );
    trusted = await edge('127.0.0.1');
    plain = await edge('');
    const config = endpointConfig({ uuid: UUID, hostname: HOST, origin_url: `http://127.0.0.1:${service.port}`, rate_limits: RULES });
    await feed.reset({ version: 1, entries: [{ topic: TOPICS.endpoint, key: UUID, version: 1, data: config }] });
    for (const e of [trusted, plain]) await eventually(async () => (e.config.lookup(HOST)?.stages.some((s) => s.name === 'rate-limit') ? true : undefined));
  });

  after(async () => {
    await trusted?.close();
    await plain?.close();
    await service?.close();
    await redis?.stop();
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  const get = (e: EdgeNode, path: string, visitor?: string, method = 'GET'): Promise<Reply> =>
    visit(e.httpPort, HOST, path, { method, headers: { accept: 'application/json', ...(visitor ? { 'x-forwarded-for': visitor } : {}) } });

  for (const [factor, visitor] of [[0.5, '198.51.100.1'], [1, '198.51.100.2'], [2, '198.51.100.3']] as const) {
    it(`admits a steady stream at ${factor}x the limit within 5 % of the ideal, refusing nothing below the limit`, async () => {
      const limit = 20;
      const windowMs = 60_000;
      const windows = 4;
      const gap = windowMs / (limit * factor);
      let allowed = 0;
      let sent = 0;
      await clock.advance(gap / 2);
      for (let elapsed = 0; elapsed < windows * windowMs; elapsed += gap) {
        const reply = await get(trusted, '/steady', visitor);
        sent++;
        if (reply.status === 200) allowed++;
        else {
          assert.equal(reply.status, 429);
          assert.ok(factor > 1, `refused at ${factor}x, below the limit (request ${sent})`);
        }
        await clock.advance(gap);
      }
      const ideal = Math.min(sent, limit * windows);
      assert.ok(Math.abs(allowed - ideal) / ideal <= 0.05, `allowed ${allowed} of ${sent}, ideal ${ideal}`);
    });
  }

  it('admits exactly 100 of 200 parallel requests against a limit of 100, and says why it refused the rest', async () => {
    const replies = await Promise.all(Array.from({ length: 200 }, () => get(trusted, '/burst', '198.51.100.50')));
    const ok = replies.filter((r) => r.status === 200).length;
    assert.equal(ok, 100);
    const refused = replies.find((r) => r.status === 429)!;
    assert.equal(refused.headers['x-edge-error'], 'rate_limited');
    assert.equal(refused.headers['ratelimit-limit'], '100');
    assert.equal(refused.headers['ratelimit-remaining'], '0');
    assert.equal(refused.headers['ratelimit-policy'], '100;w=60');
    assert.ok(Number(refused.headers['retry-after']) >= 1);
    assert.equal(refused.headers['ratelimit-reset'], refused.headers['retry-after']);
    assert.equal(JSON.parse(refused.body).code, 'rate_limited');
    // Admitted requests carry no RateLimit-* fields (only refusals do, docs/rate-limits.md).
    assert.equal(replies.find((r) => r.status === 200)!.headers['ratelimit-limit'], undefined);
    const html = await visit(trusted.httpPort, HOST, '/burst', { headers: { accept: 'text/html', 'x-forwarded-for': '198.51.100.50' } });
    assert.equal(html.status, 429);
    assert.match(String(html.headers['content-type']), /text\/html/);
  });

  it('throttle spreads a burst over the window instead of refusing it', async () => {
    const visitor = '198.51.100.60';
    const throttledBefore = outcomes.filter((o) => o.rule === 'throttle' && o.outcome === 'throttled').length;
    const answeredAt: number[] = [];
    const start = clock.now();
    const all = Promise.all(
      Array.from({ length: 9 }, () =>
        get(trusted, '/slow', visitor).then((r) => {
          answeredAt.push(clock.now());
          return r;
        }),
      ),
    );
    // Five fit at once; four wait in the visitor's queue (the bound is the limit, 5).
    await eventually(async () => (answeredAt.length === 5 && outcomes.filter((o) => o.rule === 'throttle' && o.outcome === 'throttled').length - throttledBefore === 4 ? true : undefined));
    while (answeredAt.length < 9) await clock.advance(1_000);
    const replies = await all;
    assert.deepEqual(replies.map((r) => r.status), Array(9).fill(200));
    assert.ok(answeredAt.slice(5).every((t) => t > start), 'the held requests were answered later, as the window let them');
    // The queue is bounded: with it full, a further request is refused.
    const full = Promise.all(Array.from({ length: 11 }, () => get(trusted, '/slow', '198.51.100.61')));
    await eventually(async () => (outcomes.filter((o) => o.rule === 'throttle' && o.outcome === 'blocked').length > 0 ? true : undefined));
    let done = false;
    const statuses = full.then((replies) => {
      done = true;
      return replies.map((r) => r.status);
    });
    while (!done) await clock.advance(1_000);
    assert.equal((await statuses).filter((s) => s === 429).length, 1);
  });

  it('holds one cluster-scope limit across two edges on one Redis', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await get(i % 2 ? plain : trusted, '/cluster', i % 2 ? undefined : '127.0.0.1')).status);
    assert.equal(statuses.filter((s) => s === 200).length, 4, String(statuses));
    assert.deepEqual(statuses.slice(4), [429, 429, 429, 429]);
  });

  it('gives a visitor rotating X-Forwarded-For through an untrusted peer no new bucket, and forwards the peer', async () => {
    const before = service.seen.length;
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await get(plain, '/rotate', `203.0.113.${i + 1}`)).status);
    assert.deepEqual(statuses, [200, 200, 429, 429]);
    assert.equal(service.seen[before].xff, '127.0.0.1');
  });

  it('gives addresses inside one IPv6 /64 one bucket, another /64 its own', async () => {
    const statuses: number[] = [];
    for (const ip of ['2001:db8:5:6::1', '2001:db8:5:6:aaaa::2', '2001:db8:5:6:ffff:1:2:3', '2001:db8:5:7::1']) statuses.push((await get(trusted, '/v6', ip)).status);
    assert.deepEqual(statuses, [200, 200, 429, 200]);
  });

  it('matches country and ASN conditions on the address a trusted proxy names', async () => {
    // The shipped DB-IP Lite maps 8.8.8.8 to US; ip-location-db's ASN table maps 1.1.1.1 to AS13335 (Cloudflare).
    const before = service.seen.length;
    assert.equal((await get(trusted, '/country', '8.8.8.8')).status, 200);
    assert.equal(service.seen[before].xff, '8.8.8.8');
    assert.equal((await get(trusted, '/country', '8.8.8.8')).status, 429);
    for (let i = 0; i < 3; i++) assert.equal((await get(trusted, '/country', '1.1.1.1')).status, 200);
    assert.equal((await get(trusted, '/asn', '1.1.1.1')).status, 200);
    assert.equal((await get(trusted, '/asn', '1.1.1.1')).status, 429);
    for (let i = 0; i < 3; i++) assert.equal((await get(trusted, '/asn', '8.8.8.8')).status, 200);
    // Through an untrusted peer the header is ignored: 127.0.0.1 has no country, the rule never matches.
    for (let i = 0; i < 3; i++) assert.equal((await get(plain, '/country', '8.8.8.8')).status, 200);
  });

  it('limits POST /login to 5 per minute per visitor (the README example)', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) statuses.push((await get(trusted, '/login', '192.0.2.77', 'POST')).status);
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429, 429]);
    assert.equal((await get(trusted, '/login', '192.0.2.77')).status, 200, 'GET is not limited');
    await clock.advance(120_000);
    assert.equal((await get(trusted, '/login', '192.0.2.77', 'POST')).status, 200);
  });
  it('a rate-limit rule with path equals /signin is bypassed by /SIGNIN, /Signin, /signin/, /signin/., /signin;jsessionid=1 and /signin%2F', async () => {
    // Express, Rails, Tomcat and WSGI serve each of these as /signin: one budget of password guesses for all.
    const spellings = ['/signin', '/SIGNIN', '/Signin', '/signin/', '/signin/.', '/signin;jsessionid=1', '/signin%2F'];
    const statuses: number[] = [];
    for (const path of spellings) statuses.push((await get(trusted, path, '192.0.2.78', 'POST')).status);
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429, 429]);
    assert.equal((await get(trusted, '/signinx', '192.0.2.78', 'POST')).status, 200, 'another path is not limited');
  });

  it('exact_equals is the opt-in for matching the path as it is: /Exact is limited, /exact and /Exact/ are not', async () => {
    assert.equal((await get(trusted, '/Exact', '192.0.2.79')).status, 200);
    assert.equal((await get(trusted, '/Exact', '192.0.2.79')).status, 429);
    assert.equal((await get(trusted, '/exact', '192.0.2.79')).status, 200);
    assert.equal((await get(trusted, '/Exact/', '192.0.2.79')).status, 200);
  });

  it('cookie not_exists and header exists without a value: a cookie-less request is limited, one sending any cookie is not', async () => {
    const send = (cookie?: string) =>
      visit(trusted.httpPort, HOST, '/nocookie', { headers: { accept: 'application/json', 'x-forwarded-for': '192.0.2.80', ...(cookie ? { cookie } : {}) } });
    assert.equal((await send()).status, 200);
    assert.equal((await send()).status, 429);
    for (let i = 0; i < 3; i++) assert.equal((await send('sid=1')).status, 200);
    assert.equal((await send('; =x')).status, 429, 'a Cookie field without a named cookie sends none');
  });

  it('counts HEAD requests and WebSocket upgrades like any other request', async () => {
    const heads: number[] = [];
    for (let i = 0; i < 3; i++) heads.push((await get(trusted, '/head', '192.0.2.90', 'HEAD')).status);
    assert.deepEqual(heads, [200, 200, 429]);
    assert.equal((await get(trusted, '/head', '192.0.2.90')).status, 429, 'GET shares the count');
    /** The status line the edge answers a raw upgrade with (or "closed" when it answers nothing before closing). */
    const upgrade = (visitor: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = net.connect(trusted.httpPort, '127.0.0.1', () => {
          socket.write(
            `GET /ws HTTP/1.1\r\nHost: ${HOST}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n` +
              `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nX-Forwarded-For: ${visitor}\r\nAccept: application/json\r\n\r\n`,
          );
        });
        let text = '';
        socket.on('data', (d) => {
          text += d.toString('latin1');
          if (text.includes('\r\n')) {
            resolve(text.slice(0, text.indexOf('\r\n')));
            socket.destroy();
          }
        });
        socket.on('close', () => resolve(text === '' ? 'closed' : text));
        socket.on('error', reject);
      });
    assert.doesNotMatch(await upgrade('192.0.2.91'), / 429 /);
    assert.match(await upgrade('192.0.2.91'), /^HTTP\/1\.1 429 /);
    assert.doesNotMatch(await upgrade('192.0.2.92'), / 429 /, 'another visitor has their own count');
  });

  it('exports rate-limit outcomes on the ops port, per endpoint and for the node', async () => {
    const text = await (await fetch(`http://127.0.0.1:${trusted.opsPort}/metrics`)).text();
    for (const outcome of ['allowed', 'blocked', 'throttled']) {
      assert.ok((sample(text, 'edge_rate_limit_outcomes_total', { endpoint: UUID, outcome }) ?? 0) > 0, `endpoint ${outcome}`);
      assert.ok((sample(text, 'edge_node_rate_limit_outcomes_total', { outcome }) ?? 0) > 0, `node ${outcome}`);
    }
    // Every outcome has a node-wide series from the start, zero until it happens.
    assert.equal(sample(text, 'edge_node_rate_limit_outcomes_total', { outcome: 'unavailable' }), 0);
    assert.equal(sample(text, 'edge_node_rate_limit_outcomes_total', { outcome: 'fail_open' }), 0);
  });
});
