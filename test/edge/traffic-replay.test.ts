// Traffic replay end to end: the real program, a real agent in front of a local service, an endpoint capturing in
// full. A replay leaves the control API as an HTTP request to the node's own edge listener (HTTP, or HTTPS for an
// exchange made over TLS), meets the endpoint as it is now, and reaches the service again with the captured method,
// path, headers (redacted ones left out) and body; the answer comes back bounded to 1 MiB.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import { edgeCaughtUp, expectBody, storeRows, type User } from '../helpers/endpoint-api.ts';
import { eventually } from '../helpers/eventually.ts';
import { visit } from '../helpers/http.ts';
import { startLocalService } from '../helpers/local-service.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

const BIG = 2 * 1024 * 1024;
/** Answers the service keeps back (path /hold) until a test lets them go. */
const held: http.ServerResponse[] = [];

describe('traffic replay through the edge', () => {
  let t: TestNode;
  let user: User;
  let agent: Agent;
  let service: Awaited<ReturnType<typeof startLocalService<Seen>>>;
  let endpoint: { id: number; uuid: string; subdomain: string; hostname: string };

  const sql = storeRows(() => t);
  const replay = (id: number, query = '') => t.api('POST', `/v1/traffic/logs/${id}/replay${query}`, { key: user.api_key });

  /** A full capture of this endpoint as the worker stores it. */
  async function captured(over: { method?: string; path?: string; query?: string; tls?: boolean; headers?: Record<string, string>; body?: Buffer }): Promise<number> {
    const [{ id }] = await sql<{ id: number }>(
      `INSERT INTO traffic_logs (record_key, created_at, account_id, endpoint_id, endpoint_uuid, endpoint_name, method, host, path, query,
         status_code, duration_ms, tls, capture_level, request_headers, response_headers, request_body, response_body)
       VALUES ($1, now(), $2, $3, $4, $5, $6, $7, $8, $9, 200, 3, $10, 'full', $11, '{}', $12, NULL) RETURNING id`,
      [
        randomUUID(),
        user.account_id,
        endpoint.id,
        endpoint.uuid,
        endpoint.subdomain,
        over.method ?? 'GET',
        endpoint.hostname,
        over.path ?? '/',
        over.query ?? '',
        over.tls ?? false,
        JSON.stringify(over.headers ?? {}),
        over.body ?? null,
      ],
    );
    return id;
  }

  before(async () => {
    service = await startLocalService<Seen>(
      (req, res, record) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const entry = { method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
          record(entry);
          if (req.url === '/status-503') return void res.writeHead(503, { 'content-type': 'text/plain' }).end('down');
          if (req.url === '/hold') return void held.push(res);
          if (req.url === '/big') {
            res.writeHead(200, { 'content-type': 'application/octet-stream' });
            return void res.end(Buffer.alloc(BIG, 0x61));
          }
          res.writeHead(req.url?.startsWith('/created') ? 201 : 200, { 'content-type': 'application/json', 'x-service': 'local' });
          res.end(req.method === 'HEAD' ? undefined : JSON.stringify({ method: entry.method, url: entry.url, body: entry.body }));
        });
      },
      () => {},
    );
    t = await startTestNode();
    user = await t.createUser('business');
    const created = await expectBody(201, t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} }));
    const [row] = await sql<{ id: number }>('SELECT id FROM endpoints WHERE uuid = $1', [created.uuid]);
    endpoint = { id: row.id, uuid: created.uuid, subdomain: created.subdomain, hostname: created.hostname };
    await expectBody(200, t.api('PUT', `/v1/endpoints/${endpoint.uuid}/settings/capture`, { key: user.api_key, body: { capture_enabled: true, capture_level: 'full' } }));
    await edgeCaughtUp(t);
    agent = await startAgent({ edgeUrl: `http://127.0.0.1:${t.node.edge!.httpPort}`, apiKey: user.api_key, endpoint: endpoint.uuid, protocol: 'http', target: service.port });
    // The agent is serving once a visitor gets the service's answer.
    await eventually(async () => ((await visit(t.node.edge!.httpPort, endpoint.hostname, '/ready')).status === 200 ? true : undefined));
  });
  after(async () => {
    await agent?.stop();
    await t?.close();
    await service?.close();
  });

  it('re-sends a captured GET through the edge to the agent’s service, without redacted or hop-by-hop headers', async () => {
    const id = await captured({
      path: '/items',
      query: 'page=2&q=a%20b',
      headers: {
        accept: 'application/json',
        'x-trace': 'abc-123',
        authorization: '[redacted]',
        cookie: '[redacted]',
        'x-api-secret': '[redacted]',
        connection: 'keep-alive',
        host: 'stale.example',
        'content-length': '99',
      },
    });
    const before = service.seen.length;
    const body = await expectBody(200, replay(id));
    assert.equal(service.seen.length, before + 1, 'the service was reached once more');
    const seen = service.seen.at(-1)!;
    assert.equal(seen.method, 'GET');
    assert.equal(seen.url, '/items?page=2&q=a%20b');
    assert.equal(seen.headers['x-trace'], 'abc-123');
    assert.equal(seen.headers.accept, 'application/json');
    assert.equal(seen.headers['x-replay-of'], String(id));
    for (const name of ['authorization', 'cookie', 'x-api-secret']) assert.equal(seen.headers[name], undefined, name);
    assert.equal(seen.headers['x-forwarded-proto'], 'http');

    assert.equal(body.replayed_from, id);
    assert.deepEqual(body.request, { method: 'GET', url: `http://${endpoint.hostname}/items?page=2&q=a%20b` });
    assert.equal(body.status, 200);
    assert.equal(body.headers['x-service'], 'local');
    assert.equal(body.body.encoding, 'utf8');
    assert.equal(body.body.truncated, false);
    assert.deepEqual(JSON.parse(body.body.data), { method: 'GET', url: '/items?page=2&q=a%20b', body: '' });
    assert.equal(typeof body.duration_ms, 'number');
  });

  it('re-sends a POST with its captured body only with force=true', async () => {
    const payload = Buffer.from(JSON.stringify({ name: 'zoë', n: 1 }));
    const id = await captured({ method: 'POST', path: '/created', headers: { 'content-type': 'application/json' }, body: payload });
    const before = service.seen.length;
    assert.equal((await replay(id)).status, 400);
    assert.equal(service.seen.length, before, 'nothing sent without force');
    const body = await expectBody(200, replay(id, '?force=true'));
    assert.equal(body.status, 201);
    const seen = service.seen.at(-1)!;
    assert.equal(seen.method, 'POST');
    assert.equal(seen.body, payload.toString('utf8'));
    assert.equal(seen.headers['content-length'], String(payload.length));
    assert.equal(seen.headers['content-type'], 'application/json');
  });

  it('replays HEAD, and bounds a large answer at 1 MiB marked truncated', async () => {
    const head = await expectBody(200, replay(await captured({ method: 'HEAD', path: '/h' })));
    assert.equal(head.status, 200);
    assert.equal(head.body.size, 0);
    assert.equal(service.seen.at(-1)!.method, 'HEAD');
    const big = await expectBody(200, replay(await captured({ path: '/big' })));
    assert.equal(big.status, 200);
    assert.equal(big.body.truncated, true);
    assert.equal(big.body.size, 1024 * 1024);
    assert.equal(big.body.data.length, 1024 * 1024);
  });

  it('holds at most 4 replays of an account in flight: a fifth is 429 replay_busy and sends nothing', async () => {
    // Each replay holds a control-plane socket for up to 30 s and buffers up to 1 MiB: unbounded, one account could
    // pile up as many as it liked against its own slow endpoint.
    const id = await captured({ path: '/hold' });
    const pending = [1, 2, 3, 4].map(() => replay(id));
    await eventually(async () => (held.length === 4 ? true : undefined));
    const busy = await replay(id);
    assert.equal(busy.status, 429, busy.text);
    assert.equal(busy.body.code, 'replay_busy');
    assert.equal(held.length, 4, 'the fifth was not sent');
    for (const res of held.splice(0)) res.end('released');
    for (const res of await Promise.all(pending)) assert.equal(res.status, 200, res.text);
    // The slots are free again.
    const again = replay(id);
    await eventually(async () => (held.length === 1 ? true : undefined));
    held.splice(0)[0].end('released');
    assert.equal((await again).status, 200);
  });

  it('sends an exchange made over TLS through the edge’s HTTPS listener', async () => {
    const body = await expectBody(200, replay(await captured({ path: '/secure', tls: true })));
    assert.equal(body.status, 200);
    assert.equal(body.request.url, `https://${endpoint.hostname}/secure`);
    assert.equal(service.seen.at(-1)!.headers['x-forwarded-proto'], 'https');
  });

  it('captures real traffic through the program, lists its error among recent errors and in metrics, and replays it', async () => {
    const visitor = await visit(t.node.edge!.httpPort, endpoint.hostname, '/real/fail?x=1', {
      method: 'PUT',
      body: 'payload-1',
      headers: { 'content-type': 'text/plain', 'x-trace': 'real-1', authorization: 'Bearer secret-token' },
    });
    assert.equal(visitor.status, 200);
    // The edge ships the exchange; the worker writes it (with the rollup) shortly after.
    const row = await eventually(async () => (await sql<{ id: number }>("SELECT id FROM traffic_logs WHERE path = '/real/fail' AND method = 'PUT'"))[0]);
    const log = await expectBody(200, t.api('GET', `/v1/traffic/logs/${row.id}`, { key: user.api_key }));
    assert.equal(log.capture_level, 'full');
    assert.equal(log.query, 'x=1');
    assert.equal(log.request.headers.authorization, '[redacted]');
    assert.deepEqual(log.request.body, { encoding: 'utf8', data: 'payload-1', size: 9, truncated: false });
    const listed = await expectBody(200, t.api('GET', `/v1/traffic/logs?endpoint=${endpoint.uuid}&method=put&path_prefix=/real/`, { key: user.api_key }));
    assert.deepEqual(
      listed.items.map((r: any) => r.id),
      [row.id],
    );

    const before = service.seen.length;
    const replayed = await expectBody(200, replay(row.id, '?force=true'));
    assert.equal(replayed.status, 200);
    const seen = service.seen.at(-1)!;
    assert.equal(service.seen.length, before + 1);
    assert.deepEqual([seen.method, seen.url, seen.body, seen.headers['x-trace'], seen.headers.authorization], ['PUT', '/real/fail?x=1', 'payload-1', 'real-1', undefined]);

    // A 5xx from the service: an error row for recent errors, and a count in the minute rollup.
    const failing = await visit(t.node.edge!.httpPort, endpoint.hostname, '/status-503');
    assert.equal(failing.status, 503);
    const recent = await eventually(async () => {
      const body = await expectBody(200, t.api('GET', '/v1/traffic/errors/recent?tier=5XX', { key: user.api_key }));
      return body.errors.find((r: any) => r.path === '/status-503');
    });
    assert.deepEqual([recent.status_code, recent.method, recent.host, recent.endpoint_uuid, recent.endpoint_name], [503, 'GET', endpoint.hostname, endpoint.uuid, endpoint.subdomain]);
    const metrics = await eventually(async () => {
      const body = await expectBody(200, t.api('GET', `/v1/traffic/metrics?bucket=minute&endpoint=${endpoint.uuid}`, { key: user.api_key }));
      const points = body.series[0]?.points ?? [];
      return points.some((p: any) => p.errors_5xx > 0) ? points : undefined;
    });
    assert.ok(metrics.reduce((n: number, p: any) => n + p.requests, 0) >= 2);
  });

  it('meets the endpoint as it is now: with basic auth turned on, the edge refuses the replay before the service', async () => {
    const id = await captured({ path: '/after-auth' });
    await expectBody(200, t.api('PUT', `/v1/endpoints/${endpoint.uuid}/settings`, { key: user.api_key, body: { mode: 'basic', basic_users: [{ username: 'u', password: 'password-123' }] } }));
    await edgeCaughtUp(t);
    const before = service.seen.length;
    const body = await expectBody(200, replay(id));
    assert.equal(body.status, 401);
    assert.equal(body.headers['x-edge-error'], 'auth_required');
    assert.equal(service.seen.length, before);
    await expectBody(200, t.api('PUT', `/v1/endpoints/${endpoint.uuid}/settings`, { key: user.api_key, body: { mode: 'none' } }));
    await edgeCaughtUp(t);
    assert.equal((await expectBody(200, replay(id))).status, 200);
  });
});

describe('traffic replay with an unreachable edge', () => {
  it('answers 502 replay_failed naming the reason, when EDGE_REPLAY_EDGE_URL points nowhere', async (ctx) => {
    const t = await startTestNode({ EDGE_REPLAY_EDGE_URL: 'http://127.0.0.1:1' });
    ctx.after(() => t.close());
    const user = await t.createUser('free');
    const created = await expectBody(201, t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} }));
    const [{ id }] = (
      await t.node.db!.query<{ id: number }>(
        `INSERT INTO traffic_logs (record_key, created_at, account_id, endpoint_id, endpoint_uuid, endpoint_name, method, host, path, status_code, duration_ms, capture_level, request_headers, response_headers)
         SELECT $1, now(), account_id, id, uuid, subdomain, 'GET', hostname, '/', 200, 1, 'full', '{}', '{}' FROM endpoints WHERE uuid = $2 RETURNING id`,
        [randomUUID(), created.uuid],
      )
    ).rows;
    const res = await t.api('POST', `/v1/traffic/logs/${id}/replay`, { key: user.api_key });
    assert.equal(res.status, 502, res.text);
    assert.equal(res.body.code, 'replay_failed');
    assert.equal(res.body.detail.reason, 'ECONNREFUSED');
  });
});
