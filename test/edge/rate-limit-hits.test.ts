// Rate-limit hit statistics end to end in the real program: visitors' requests that match a rule are counted on the
// edge, travel as traffic records (a Redis Stream with REDIS_URL, in-process otherwise) to the worker, and show up in
// GET /v1/firewall/rate-limits/{uuid} as hit_count, last_matched and today's hits_daily bucket; other rules stay at 0.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
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
