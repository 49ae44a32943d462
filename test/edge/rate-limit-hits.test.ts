// Rate-limit hit statistics end to end in the real program: visitors' requests that match a rule are counted on the
// edge, travel as traffic records (a Redis Stream with REDIS_URL, in-process otherwise) to the worker, and show up in
// GET /v1/firewall/rate-limits/{uuid} as hit_count, last_matched and today's hits_daily bucket; other rules stay at 0.
// Then across nodes: an edge-only node's hits reach the worker of another node through Redis.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startNode, type NodeHandle } from '../../src/main.ts';
import { loadConfig } from '../../src/shared/config.ts';
import { createLogger } from '../../src/shared/log.ts';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { createEndpoint, edgeCaughtUp, expectBody, type User } from '../helpers/endpoint-api.ts';
import { eventually } from '../helpers/eventually.ts';
import { visit } from '../helpers/http.ts';
import { startLocalService, type LocalService } from '../helpers/local-service.ts';

const BASE = '/v1/firewall/rate-limits';

describe('rate-limit hit statistics, edge to API', () => {
  let t: TestNode;
  let user: User;
  let origin: LocalService<string>;
  let host: string;
  let login: { uuid: string };
  let other: { uuid: string };

  before(async () => {
    origin = await startLocalService<string>((req, res, record) => {
      record(req.url!);
      res.end('ok');
    }, () => {});
    // The origin is on loopback: allowed only as a development setting.
    t = await startTestNode({ EDGE_ORIGIN_ALLOW_PRIVATE: 'true' });
    user = await t.createUser('business');
    const endpoint = await createEndpoint(t, user);
    host = endpoint.hostname;
    await expectBody(200, t.api('PUT', `/v1/endpoints/${endpoint.uuid}/origin`, { key: user.api_key, body: { url: `http://127.0.0.1:${origin.port}` } }));
    const rule = (name: string, path: string, priority: number) => ({
      endpoint_id: endpoint.uuid,
      name,
      requests_per_window: 1000,
      window_size_seconds: 60,
      action: 'block',
      priority,
      conditions: [{ type: 'path', operator: 'prefix', value: path }],
    });
    login = await expectBody(201, t.api('POST', BASE, { key: user.api_key, body: rule('login', '/login', 1) }));
    other = await expectBody(201, t.api('POST', BASE, { key: user.api_key, body: rule('other', '/other', 2) }));
    await edgeCaughtUp(t);
  });
  after(async () => {
    await t?.close();
    await origin?.close();
  });

  it('counts the requests a rule matched into hit_count, last_matched and today\'s bucket', async () => {
    const fresh = await expectBody(200, t.api('GET', `${BASE}/${login.uuid}`, { key: user.api_key }));
    assert.equal(fresh.hit_count, 0);
    assert.equal(fresh.last_matched, null);
    assert.deepEqual(fresh.hits_daily, [0, 0, 0, 0, 0, 0, 0]);

    const started = Date.now();
    for (let i = 0; i < 5; i++) assert.equal((await visit(t.node.edge!.httpPort, host, `/login?try=${i}`)).status, 200);
    assert.equal((await visit(t.node.edge!.httpPort, host, '/elsewhere')).status, 200);
    assert.equal(origin.seen.length, 6, 'every request reached the origin');

    // The edge sends its counts every ~2 s and the worker writes them as they arrive: wait for them, no sleep.
    const counted = await eventually(async () => {
      const body = await expectBody(200, t.api('GET', `${BASE}/${login.uuid}`, { key: user.api_key }));
      return body.hit_count >= 5 ? body : undefined;
    });
    assert.equal(counted.hit_count, 5);
    const last = Date.parse(counted.last_matched);
    assert.ok(last >= started - 1000 && last <= Date.now() + 1000, `last_matched ${counted.last_matched}`);
    assert.deepEqual(counted.hits_daily, [0, 0, 0, 0, 0, 0, 5], '7 days, oldest first, today last');
    const untouched = await expectBody(200, t.api('GET', `${BASE}/${other.uuid}`, { key: user.api_key }));
    assert.equal(untouched.hit_count, 0);
    assert.deepEqual(untouched.hits_daily, [0, 0, 0, 0, 0, 0, 0]);
    // The edge's ops port shows the records it sent and that none were dropped.
    const metrics = await (await fetch(`http://127.0.0.1:${t.node.edge!.opsPort}/metrics`)).text();
    assert.match(metrics, /^edge_traffic_records_sent_total [1-9]/m);
    assert.match(metrics, /^edge_traffic_records_dropped_total 0$/m);
  });

  it('a deleted rule\'s late hits are ignored, and the others keep counting', async () => {
    const doomed = await expectBody(201, t.api('POST', BASE, {
      key: user.api_key,
      body: { endpoint_id: (await expectBody(200, t.api('GET', `${BASE}/${login.uuid}`, { key: user.api_key }))).endpoint_id, name: 'doomed', requests_per_window: 1000, window_size_seconds: 60, action: 'block', priority: 0, conditions: [{ type: 'path', operator: 'prefix', value: '/other' }] },
    }));
    await edgeCaughtUp(t);
    assert.equal((await visit(t.node.edge!.httpPort, host, '/other')).status, 200);
    // Deleted before the edge's interval ends: its count arrives for a rule that is gone.
    await expectBody(204, t.api('DELETE', `${BASE}/${doomed.uuid}`, { key: user.api_key }));
    const counted = await eventually(async () => {
      const body = await expectBody(200, t.api('GET', `${BASE}/${other.uuid}`, { key: user.api_key }));
      return body.hit_count >= 1 ? body : undefined;
    });
    assert.equal(counted.hit_count, 1);
    assert.equal((await t.api('GET', `${BASE}/${doomed.uuid}`, { key: user.api_key })).status, 404);
  });
});

describe('rate-limit hit statistics from an edge-only node, through Redis', () => {
  let redis: RedisServer | undefined;
  let t: TestNode;
  let edge: NodeHandle;
  let edgeDir: string;
  let origin: LocalService<string>;

  before(async () => {
    // Redis is what separate nodes share: the CI's, or a private one when REDIS_URL is not set.
    if (!process.env.REDIS_URL) redis = await startRedisServer();
    const shared = {
      REDIS_URL: process.env.REDIS_URL ?? redis!.url,
      EDGE_REDIS_PREFIX: `test:${randomBytes(6).toString('hex')}:`,
      EDGE_SECRET_KEY: randomBytes(24).toString('hex'),
      EDGE_ORIGIN_ALLOW_PRIVATE: 'true',
    };
    origin = await startLocalService<string>((req, res, record) => {
      record(req.url!);
      res.end('ok');
    }, () => {});
    // Control, worker (and an edge of its own) in one node; a second node runs only the edge role.
    t = await startTestNode(shared);
    edgeDir = await mkdtemp(join(tmpdir(), 'edge-only-'));
    const config = loadConfig({
      ...shared,
      EDGE_ROLE: 'edge',
      EDGE_NODE_ID: 'edge-only-1',
      EDGE_DATA_DIR: edgeDir,
      EDGE_HTTP_PORT: '0',
      EDGE_HTTPS_PORT: '0',
      EDGE_OPS_PORT: '0',
      EDGE_RELAY_PORT: '0',
      EDGE_DNS_PORT: '0',
      EDGE_BIND_HOST: '127.0.0.1',
      EDGE_CONTROL_URL: t.controlUrl,
      EDGE_LOG_LEVEL: process.env.EDGE_TEST_LOG_LEVEL ?? 'silent',
    });
    edge = await startNode(config, createLogger(config.logLevel));
  });
  after(async () => {
    await edge?.close();
    await t?.close();
    await origin?.close();
    await redis?.stop();
    if (edgeDir) await rm(edgeDir, { recursive: true, force: true });
  });

  it('counts requests served by the other node into the rule\'s statistics', async () => {
    const user = await t.createUser('business');
    const endpoint = await createEndpoint(t, user);
    await expectBody(200, t.api('PUT', `/v1/endpoints/${endpoint.uuid}/origin`, { key: user.api_key, body: { url: `http://127.0.0.1:${origin.port}` } }));
    const rule = await expectBody(201, t.api('POST', BASE, {
      key: user.api_key,
      body: { endpoint_id: endpoint.uuid, name: 'all', requests_per_window: 1000, window_size_seconds: 60, action: 'block', conditions: [] },
    }));
    // The edge-only node learns the rule from the feed in Redis.
    await eventually(async () => ((edge.edge!.config.endpoint(endpoint.uuid)?.rate_limits?.length ?? 0) > 0 ? true : undefined));
    for (let i = 0; i < 3; i++) assert.equal((await visit(edge.edge!.httpPort, endpoint.hostname, `/page/${i}`)).status, 200);
    const counted = await eventually(async () => {
      const body = await expectBody(200, t.api('GET', `${BASE}/${rule.uuid}`, { key: user.api_key }));
      return body.hit_count >= 3 ? body : undefined;
    });
    assert.equal(counted.hit_count, 3);
    assert.deepEqual(counted.hits_daily, [0, 0, 0, 0, 0, 0, 3]);
  });
});
