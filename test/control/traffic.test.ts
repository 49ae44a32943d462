// The traffic inspector API over real HTTP against rows in the store: recent errors with every docs/api.md query edge
// case, the logs list (filters, cursor pages stable under inserts), one log, replay refusals, metrics buckets, 403s
// and another account's rows as 404. Replay end to end lives in test/edge/traffic-replay.test.ts.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { createEndpoint, expectBody, orgWithMember, storeRows, type User } from '../helpers/endpoint-api.ts';

interface LogRow {
  accountId: number;
  endpoint?: { id: number | null; uuid: string; name: string };
  minutesAgo?: number;
  status?: number;
  method?: string;
  path?: string;
  query?: string;
  host?: string;
  sourceIp?: string;
  level?: 'metadata' | 'full';
  tls?: boolean;
  requestHeaders?: Record<string, string>;
  responseHeaders?: Record<string, string>;
  requestBody?: Buffer;
  responseBody?: Buffer;
  requestBodyTruncated?: boolean;
}

const RECENT_ROW_KEYS = ['created_at', 'endpoint_name', 'endpoint_uuid', 'host', 'id', 'method', 'path', 'source_ip', 'status_code'];

describe('traffic inspector API', () => {
  let t: TestNode;
  before(async () => {
    // The worker's retention pass would delete rows inserted older than a plan keeps; these tests place rows in time.
    t = await startTestNode({ EDGE_JANITOR_INTERVAL_MS: '3600000' });
  });
  after(() => t.close());

  const sql = storeRows(() => t);
  const get = (user: Pick<User, 'api_key'>, path: string, headers?: Record<string, string>) => t.api('GET', path, { key: user.api_key, headers });

  /** A traffic_logs row as the worker writes it; returns its id. */
  async function insertLog(row: LogRow): Promise<number> {
    const e = row.endpoint ?? { id: null, uuid: randomUUID(), name: '' };
    const [{ id }] = await sql<{ id: number }>(
      `INSERT INTO traffic_logs (record_key, created_at, account_id, endpoint_id, endpoint_uuid, endpoint_name, method, host, path, query,
         status_code, duration_ms, bytes_in, bytes_out, source_ip, user_agent, tls, edge_node, region, capture_level,
         request_headers, response_headers, request_body, response_body, request_body_truncated)
       VALUES ($1, now() - make_interval(secs => $2::float8), $3, $4, $5, $6, $7, $8, $9, $10, $11, 12.5, 10, 20, $12, 'curl/8', $13, 'edge-1', 'local', $14,
         $15, $16, $17, $18, $19)
       RETURNING id`,
      [
        randomUUID(),
        (row.minutesAgo ?? 1) * 60,
        row.accountId,
        e.id,
        e.uuid,
        e.name,
        row.method ?? 'GET',
        row.host ?? 'app.edge.test',
        row.path ?? '/',
        row.query ?? '',
        row.status ?? 200,
        row.sourceIp ?? '203.0.113.7',
        row.tls ?? false,
        row.level ?? 'metadata',
        row.requestHeaders ? JSON.stringify(row.requestHeaders) : null,
        row.responseHeaders ? JSON.stringify(row.responseHeaders) : null,
        row.requestBody ?? null,
        row.responseBody ?? null,
        row.requestBodyTruncated ?? false,
      ],
    );
    return id;
  }

  async function endpointOf(user: User) {
    const created = await createEndpoint(t, user);
    const [row] = await sql<{ id: number }>('SELECT id FROM endpoints WHERE uuid = $1', [created.uuid]);
    return { id: row.id, uuid: created.uuid as string, name: created.subdomain as string, hostname: created.hostname };
  }

  // ---- recent errors ----------------------------------------------------------------------------------------

  describe('GET /v1/traffic/errors/recent', () => {
    it('lists the account’s error responses newest first, in exactly the docs/api.md row shape, with hours', async () => {
      const user = await t.createUser('free');
      const other = await t.createUser('free');
      const ep = await endpointOf(user);
      await insertLog({ accountId: user.account_id, endpoint: ep, status: 200, minutesAgo: 1 });
      await insertLog({ accountId: user.account_id, endpoint: ep, status: 302, minutesAgo: 1 });
      await insertLog({ accountId: user.account_id, endpoint: ep, status: 0, minutesAgo: 1 });
      const older = await insertLog({ accountId: user.account_id, endpoint: ep, status: 404, minutesAgo: 10, method: 'POST', path: '/login', sourceIp: '' });
      const newer = await insertLog({ accountId: user.account_id, endpoint: ep, status: 502, minutesAgo: 2, host: ep.hostname });
      await insertLog({ accountId: other.account_id, status: 500, minutesAgo: 1 });

      const body = await expectBody(200, get(user, '/v1/traffic/errors/recent'));
      assert.equal(body.hours, 24);
      assert.deepEqual(
        body.errors.map((r: any) => r.id),
        [newer, older],
      );
      for (const row of body.errors) assert.deepEqual(Object.keys(row).sort(), RECENT_ROW_KEYS);
      const [first, second] = body.errors;
      assert.equal(first.status_code, 502);
      assert.equal(first.host, ep.hostname);
      assert.equal(first.endpoint_name, ep.name);
      assert.equal(first.endpoint_uuid, ep.uuid);
      assert.match(first.created_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      assert.deepEqual([second.method, second.path, second.source_ip, second.status_code], ['POST', '/login', '', 404]);
    });

    it('falls back to the kept subdomain label once the endpoint is deleted, with an empty endpoint_uuid; empty when none was kept', async () => {
      const user = await t.createUser('free');
      const ep = await endpointOf(user);
      const kept = await insertLog({ accountId: user.account_id, endpoint: ep, status: 500, minutesAgo: 1 });
      const nameless = await insertLog({ accountId: user.account_id, endpoint: { id: null, uuid: randomUUID(), name: '' }, status: 500, minutesAgo: 2 });
      await expectBody(204, t.api('DELETE', `/v1/endpoints/${ep.uuid}`, { key: user.api_key }));
      const { errors } = await expectBody(200, get(user, '/v1/traffic/errors/recent'));
      assert.deepEqual(
        errors.map((r: any) => [r.id, r.endpoint_name, r.endpoint_uuid]),
        [
          [kept, ep.name, ''],
          [nameless, '', ''],
        ],
      );
    });

    it('takes limit 1-100 (default 20) and falls back to 20 for 0, 101, -1, 5.5 and abc', async () => {
      const user = await t.createUser('free');
      for (let i = 0; i < 25; i++) await insertLog({ accountId: user.account_id, status: 500, minutesAgo: i + 1 });
      const count = async (query: string) => (await expectBody(200, get(user, `/v1/traffic/errors/recent${query}`))).errors.length;
      assert.equal(await count(''), 20);
      assert.equal(await count('?limit=5'), 5);
      assert.equal(await count('?limit=1'), 1);
      assert.equal(await count('?limit=100'), 25);
      for (const bad of ['0', '101', '-1', '5.5', 'abc', '', '1e1']) assert.equal(await count(`?limit=${bad}`), 20, `limit=${bad}`);
    });

    it('falls back to the defaults for parameters given more than once (not one number), never a 400', async () => {
      const user = await t.createUser('free');
      const ids = [await insertLog({ accountId: user.account_id, status: 503, minutesAgo: 1 }), await insertLog({ accountId: user.account_id, status: 404, minutesAgo: 2 })];
      for (let i = 0; i < 22; i++) await insertLog({ accountId: user.account_id, status: 500, minutesAgo: 3 + i });
      const body = await expectBody(200, get(user, '/v1/traffic/errors/recent?limit=1&limit=2&hours=1&hours=2&tier=5xx&tier=4xx'));
      assert.equal(body.hours, 24);
      assert.equal(body.errors.length, 20);
      assert.deepEqual(body.errors.slice(0, 2).map((r: any) => r.id), ids, 'every tier');
    });

    it('takes hours 1-720 (default 24) and falls back to 24 for 0, 721 and abc, echoing the resolved window', async () => {
      const user = await t.createUser('business');
      const ids = {
        halfHour: await insertLog({ accountId: user.account_id, status: 500, minutesAgo: 30 }),
        threeHours: await insertLog({ accountId: user.account_id, status: 500, minutesAgo: 180 }),
        thirtyHours: await insertLog({ accountId: user.account_id, status: 500, minutesAgo: 30 * 60 }),
        sevenHundred: await insertLog({ accountId: user.account_id, status: 500, minutesAgo: 700 * 60 }),
        beyond: await insertLog({ accountId: user.account_id, status: 500, minutesAgo: 730 * 60 }),
      };
      const read = async (query: string) => {
        const body = await expectBody(200, get(user, `/v1/traffic/errors/recent${query}`));
        return { hours: body.hours, ids: body.errors.map((r: any) => r.id) };
      };
      const day = { hours: 24, ids: [ids.halfHour, ids.threeHours] };
      assert.deepEqual(await read(''), day);
      assert.deepEqual(await read('?hours=1'), { hours: 1, ids: [ids.halfHour] });
      assert.deepEqual(await read('?hours=720'), { hours: 720, ids: [ids.halfHour, ids.threeHours, ids.thirtyHours, ids.sevenHundred] });
      for (const bad of ['0', '721', 'abc', '-3', '2.5']) assert.deepEqual(await read(`?hours=${bad}`), day, `hours=${bad}`);
    });

    it('filters by tier 4xx / 5xx in any case, and returns every error for any other tier', async () => {
      const user = await t.createUser('free');
      const c404 = await insertLog({ accountId: user.account_id, status: 404, minutesAgo: 3 });
      const c499 = await insertLog({ accountId: user.account_id, status: 499, minutesAgo: 4 });
      const c500 = await insertLog({ accountId: user.account_id, status: 500, minutesAgo: 1 });
      const c599 = await insertLog({ accountId: user.account_id, status: 599, minutesAgo: 2 });
      const ids = async (tier: string) => (await expectBody(200, get(user, `/v1/traffic/errors/recent?tier=${tier}`))).errors.map((r: any) => r.id);
      assert.deepEqual(await ids('4xx'), [c404, c499]);
      assert.deepEqual(await ids('4XX'), [c404, c499]);
      assert.deepEqual(await ids('5xx'), [c500, c599]);
      assert.deepEqual(await ids('5XX'), [c500, c599]);
      for (const other of ['weird', '', '3xx', '5x']) assert.deepEqual(await ids(other), [c500, c599, c404, c499], `tier=${other}`);
    });

    it('answers 401 without a key, and 403 without the permission, outside the account, or suspended', async () => {
      const owner = await t.createUser('business');
      const reader = await t.createUser('free');
      const writer = await t.createUser('free');
      const stranger = await t.createUser('free');
      const readerOrg = await orgWithMember(t, owner, reader, ['traffic:read']);
      const writerOrg = await orgWithMember(t, owner, writer, ['endpoints:read', 'endpoints:write']);
      const orgError = await insertLog({ accountId: readerOrg.id, status: 503 });
      await insertLog({ accountId: reader.account_id, status: 500 });

      assert.equal((await t.api('GET', '/v1/traffic/errors/recent', { key: null })).status, 401);
      const inOrg = await expectBody(200, get(reader, '/v1/traffic/errors/recent', readerOrg.headers));
      assert.deepEqual(
        inOrg.errors.map((r: any) => r.id),
        [orgError],
        'only the active account’s rows',
      );
      const denied = await get(writer, '/v1/traffic/errors/recent', writerOrg.headers);
      assert.equal(denied.status, 403);
      assert.equal(denied.body.code, 'permission_denied');
      assert.equal(denied.body.detail.permission, 'traffic:read');
      const outsider = await get(stranger, '/v1/traffic/errors/recent', readerOrg.headers);
      assert.equal(outsider.status, 403);
      assert.equal(outsider.body.code, 'not_a_member');
      const missing = await get(stranger, '/v1/traffic/errors/recent', { 'x-account-id': '999999999' });
      assert.equal(missing.status, 403, 'no such active account');
      // Owners hold the permission without listing it.
      assert.equal((await get(owner, '/v1/traffic/errors/recent', readerOrg.headers)).status, 200);
      await expectBody(200, t.api('POST', `/v1/admin/accounts/${stranger.account_id}/suspend`));
      const suspended = await get(stranger, '/v1/traffic/errors/recent');
      assert.equal(suspended.status, 403);
      assert.equal(suspended.body.code, 'account_suspended');
    });
  });

  // ---- logs -------------------------------------------------------------------------------------------------

  describe('GET /v1/traffic/logs', () => {
    it('filters by endpoint (uuid or id), status class or code, method, path prefix and time range', async () => {
      const user = await t.createUser('business');
      const a = await endpointOf(user);
      const b = await endpointOf(user);
      const rows = {
        aGet: await insertLog({ accountId: user.account_id, endpoint: a, status: 200, path: '/api/users', minutesAgo: 5 }),
        aPost: await insertLog({ accountId: user.account_id, endpoint: a, status: 201, method: 'POST', path: '/api/users', minutesAgo: 4 }),
        a404: await insertLog({ accountId: user.account_id, endpoint: a, status: 404, path: '/api%_x', minutesAgo: 3 }),
        b500: await insertLog({ accountId: user.account_id, endpoint: b, status: 500, path: '/health', minutesAgo: 2 }),
        bOld: await insertLog({ accountId: user.account_id, endpoint: b, status: 503, path: '/health', minutesAgo: 120 }),
      };
      const ids = async (query: string) => (await expectBody(200, get(user, `/v1/traffic/logs${query}`), query)).items.map((r: any) => r.id);
      assert.deepEqual(await ids(''), [rows.b500, rows.a404, rows.aPost, rows.aGet, rows.bOld]);
      assert.deepEqual(await ids(`?endpoint=${a.uuid}`), [rows.a404, rows.aPost, rows.aGet]);
      assert.deepEqual(await ids(`?endpoint=${a.uuid.toUpperCase()}`), [rows.a404, rows.aPost, rows.aGet]);
      assert.deepEqual(await ids(`?endpoint=${b.id}`), [rows.b500, rows.bOld]);
      assert.deepEqual(await ids('?status=2xx'), [rows.aPost, rows.aGet]);
      assert.deepEqual(await ids('?status=5XX'), [rows.b500, rows.bOld]);
      assert.deepEqual(await ids('?status=404'), [rows.a404]);
      assert.deepEqual(await ids('?method=post'), [rows.aPost]);
      assert.deepEqual(await ids('?path_prefix=/api/'), [rows.aPost, rows.aGet]);
      assert.deepEqual(await ids('?path_prefix=/api%25_'), [rows.a404], 'LIKE wildcards are literal');
      const from = new Date(Date.now() - 60 * 60_000).toISOString();
      assert.deepEqual(await ids(`?from=${from}`), [rows.b500, rows.a404, rows.aPost, rows.aGet]);
      assert.deepEqual(await ids(`?to=${from}`), [rows.bOld]);
      assert.deepEqual(await ids(`?endpoint=${b.uuid}&status=5xx&from=${from}`), [rows.b500]);

      const { items } = await expectBody(200, get(user, `/v1/traffic/logs?endpoint=${a.uuid}&limit=1`));
      const [row] = items;
      assert.equal(row.endpoint_uuid, a.uuid);
      assert.equal(row.endpoint_name, a.name);
      assert.equal(row.endpoint_exists, true);
      assert.equal(row.request, undefined, 'no headers or bodies in the list');
      assert.equal(row.capture_level, 'metadata');
    });

    it('pages newest first with an opaque cursor that stays stable when rows arrive in between', async () => {
      const user = await t.createUser('free');
      const ids: number[] = [];
      for (let i = 0; i < 7; i++) ids.unshift(await insertLog({ accountId: user.account_id, minutesAgo: 10 + i * 0 }));
      // Equal timestamps: the id breaks the tie, so the order is still total.
      const first = await expectBody(200, get(user, '/v1/traffic/logs?limit=3'));
      assert.equal(first.items.length, 3);
      assert.match(first.next_cursor, /^[A-Za-z0-9_-]+$/);
      // Newer rows arriving after the first page neither shift nor repeat what follows.
      await insertLog({ accountId: user.account_id, minutesAgo: 0 });
      await insertLog({ accountId: user.account_id, minutesAgo: 0 });
      const second = await expectBody(200, get(user, `/v1/traffic/logs?limit=3&cursor=${first.next_cursor}`));
      const third = await expectBody(200, get(user, `/v1/traffic/logs?limit=3&cursor=${second.next_cursor}`));
      assert.equal(third.next_cursor, null);
      const seen = [...first.items, ...second.items, ...third.items].map((r: any) => r.id);
      assert.deepEqual(
        seen,
        [...ids].sort((x, y) => y - x),
      );
      // A page exactly at the end says so.
      const exact = await expectBody(200, get(user, `/v1/traffic/logs?limit=9`));
      assert.equal(exact.items.length, 9);
      assert.equal(exact.next_cursor, null);
    });

    it('answers 400 for bad filters and cursors, 404 for another account’s numeric endpoint id', async () => {
      const user = await t.createUser('free');
      const other = await t.createUser('free');
      const theirs = await endpointOf(other);
      const bad = async (query: string) => {
        const res = await get(user, `/v1/traffic/logs${query}`);
        assert.equal(res.status, 400, `${query}: ${res.text}`);
        assert.equal(res.body.code, 'invalid_query', query);
      };
      for (const q of ['?limit=0', '?limit=101', '?limit=abc', '?status=6xx', '?status=20', '?status=2x', '?method=GE%20T', '?path_prefix=api']) await bad(q);
      for (const q of ['?from=yesterday', '?to=2026-13-01T00:00:00Z', '?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z', '?endpoint=abc']) await bad(q);
      const forged = Buffer.from(JSON.stringify(['not a time', 5])).toString('base64url');
      for (const cursor of ['!!', 'abc', forged, Buffer.from('[1,2,3]').toString('base64url')]) await bad(`?cursor=${cursor}`);
      // Refusals past the schema name the parameter and why, as every validation error does: {field, reason}.
      for (const [q, field] of [['?cursor=abc', 'cursor'], ['?endpoint=abc', 'endpoint'], ['?to=2026-02-31T00:00:00Z', 'to'], ['?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z', 'from']]) {
        const res = await get(user, `/v1/traffic/logs${q}`);
        assert.equal(res.body.detail?.field, field, `${q}: ${res.text}`);
        assert.equal(typeof res.body.detail.reason, 'string', q);
      }
      // Times JavaScript's parser rolls over or takes but the database refuses (these were 500s): 400 as any forged cursor.
      for (const at of ['2026-02-31T00:00:00.000000Z', '2026-04-31T10:00:00.000000Z', '0000-01-01T00:00:00.000000Z', '2026-01-01T25:00:00.000000Z']) {
        await bad(`?cursor=${Buffer.from(JSON.stringify([at, 5])).toString('base64url')}`);
      }
      // Dates the API's time filters take are checked the same way.
      for (const q of ['?from=2026-02-31T00:00:00Z', '?to=0000-01-01T00:00:00Z']) await bad(q);
      const res = await get(user, `/v1/traffic/logs?endpoint=${theirs.id}`);
      assert.equal(res.status, 404);
      // Another account's endpoint uuid is simply a filter that matches none of this account's rows.
      await insertLog({ accountId: other.account_id, endpoint: theirs });
      assert.deepEqual((await expectBody(200, get(user, `/v1/traffic/logs?endpoint=${theirs.uuid}`))).items, []);
    });
  });

  describe('GET /v1/traffic/logs/{id}', () => {
    it('returns a full capture with headers and bodies (UTF-8 as text, other bytes as base64), a metadata capture without', async () => {
      const user = await t.createUser('free');
      const ep = await endpointOf(user);
      const full = await insertLog({
        accountId: user.account_id,
        endpoint: ep,
        level: 'full',
        method: 'POST',
        path: '/upload',
        query: 'a=1',
        requestHeaders: { 'content-type': 'application/json', authorization: '[redacted]' },
        responseHeaders: { 'content-type': 'application/octet-stream' },
        requestBody: Buffer.from('{"name":"zoë"}'),
        responseBody: Buffer.from([0xff, 0x00, 0xfe]),
        requestBodyTruncated: false,
      });
      const meta = await insertLog({ accountId: user.account_id, endpoint: ep });
      const body = await expectBody(200, get(user, `/v1/traffic/logs/${full}`));
      assert.equal(body.id, full);
      assert.equal(body.query, 'a=1');
      assert.deepEqual(body.request, {
        headers: { 'content-type': 'application/json', authorization: '[redacted]' },
        body: { encoding: 'utf8', data: '{"name":"zoë"}', size: 15, truncated: false },
      });
      assert.deepEqual(body.response, {
        headers: { 'content-type': 'application/octet-stream' },
        body: { encoding: 'base64', data: Buffer.from([0xff, 0x00, 0xfe]).toString('base64'), size: 3, truncated: false },
      });
      const metadata = await expectBody(200, get(user, `/v1/traffic/logs/${meta}`));
      assert.equal(metadata.request, null);
      assert.equal(metadata.response, null);
    });

    it('answers 404 for another account’s log or a missing one, 400 for a malformed id, 403 without traffic:read', async () => {
      const user = await t.createUser('free');
      const other = await t.createUser('free');
      const theirs = await insertLog({ accountId: other.account_id, level: 'full', requestHeaders: {}, responseHeaders: {} });
      assert.equal((await get(user, `/v1/traffic/logs/${theirs}`)).status, 404);
      assert.equal((await get(user, '/v1/traffic/logs/999999999')).status, 404);
      assert.equal((await get(user, '/v1/traffic/logs/abc')).status, 400);
      assert.equal((await t.api('POST', `/v1/traffic/logs/${theirs}/replay`, { key: user.api_key })).status, 404);
      const owner = await t.createUser('business');
      const member = await t.createUser('free');
      const org = await orgWithMember(t, owner, member, ['endpoints:read']);
      const orgLog = await insertLog({ accountId: org.id });
      const denied = await get(member, `/v1/traffic/logs/${orgLog}`, org.headers);
      assert.equal(denied.status, 403);
      assert.equal((await get(owner, `/v1/traffic/logs/${orgLog}`, org.headers)).status, 200);
    });
  });

  describe('POST /v1/traffic/logs/{id}/replay refusals', () => {
    it('needs a full capture with its whole body and a live endpoint (409), force for unsafe methods (400), endpoints:write (403)', async () => {
      const user = await t.createUser('business');
      const ep = await endpointOf(user);
      const replay = (id: number, query = '', who: Pick<User, 'api_key'> = user, headers?: Record<string, string>) =>
        t.api('POST', `/v1/traffic/logs/${id}/replay${query}`, { key: who.api_key, headers });
      const meta = await insertLog({ accountId: user.account_id, endpoint: ep });
      let res = await replay(meta);
      assert.equal(res.status, 409);
      assert.equal(res.body.code, 'replay_not_captured');
      assert.equal(res.body.detail.reason, 'capture_level');
      const cut = await insertLog({ accountId: user.account_id, endpoint: ep, level: 'full', method: 'POST', requestHeaders: {}, responseHeaders: {}, requestBody: Buffer.alloc(10), requestBodyTruncated: true });
      res = await replay(cut, '?force=true');
      assert.equal(res.status, 409);
      assert.equal(res.body.detail.reason, 'request_body_truncated');
      const post = await insertLog({ accountId: user.account_id, endpoint: ep, level: 'full', method: 'POST', requestHeaders: {}, responseHeaders: {} });
      res = await replay(post);
      assert.equal(res.status, 400);
      assert.equal(res.body.code, 'invalid_query');
      assert.match(res.body.error, /force=true/);
      assert.equal(res.body.detail.field, 'force');
      assert.equal(res.body.detail.method, 'POST');
      assert.equal((await replay(post, '?force=false')).status, 400);
      assert.equal((await replay(post, '?force=yes')).status, 400);
      const gone = await endpointOf(user);
      const orphan = await insertLog({ accountId: user.account_id, endpoint: gone, level: 'full', requestHeaders: {}, responseHeaders: {} });
      await expectBody(204, t.api('DELETE', `/v1/endpoints/${gone.uuid}`, { key: user.api_key }));
      res = await replay(orphan);
      assert.equal(res.status, 409);
      assert.equal(res.body.detail.reason, 'endpoint_deleted');

      const owner = await t.createUser('business');
      const reader = await t.createUser('free');
      const org = await orgWithMember(t, owner, reader, ['traffic:read']);
      const orgLog = await insertLog({ accountId: org.id, level: 'full', requestHeaders: {}, responseHeaders: {} });
      res = await replay(orgLog, '', reader, org.headers);
      assert.equal(res.status, 403);
      assert.equal(res.body.detail.permission, 'endpoints:write');
    });
  });

  // ---- metrics ----------------------------------------------------------------------------------------------

  describe('GET /v1/traffic/metrics', () => {
    /** One minute of the rollup: `latencies` ms each counted in its histogram slot. */
    async function insertMinute(accountId: number, ep: { id: number; uuid: string }, minute: Date, m: { requests: number; e4: number; e5: number; latencies: number[] }) {
      const bounds = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000];
      const slots = new Array(bounds.length + 1).fill(0);
      for (const ms of m.latencies) {
        const i = bounds.findIndex((b) => ms <= b);
        slots[i === -1 ? bounds.length : i]++;
      }
      await sql(
        `INSERT INTO endpoint_traffic_minutely (endpoint_uuid, minute, account_id, endpoint_id, requests, errors_4xx, errors_5xx, bytes_in, bytes_out,
           duration_sum_ms, duration_max_ms, latency_buckets)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
        [ep.uuid, minute, accountId, ep.id, m.requests, m.e4, m.e5, m.requests * 100, m.requests * 1000, m.latencies.reduce((a, b) => a + b, 0), Math.max(...m.latencies), slots],
      );
    }

    it('sums the minute rollup per endpoint into minute, hour and day buckets with percentiles from the histogram', async () => {
      const user = await t.createUser('business');
      const other = await t.createUser('free');
      const a = await endpointOf(user);
      const b = await endpointOf(user);
      const theirs = await endpointOf(other);
      const hour = new Date(Date.UTC(2030, 0, 15, 10));
      const at = (minutes: number) => new Date(hour.getTime() + minutes * 60_000);
      // 100 requests in a's 10:05: 90 fast (<= 5 ms), 10 slow (in the 250-500 ms slot).
      await insertMinute(user.account_id, a, at(5), { requests: 100, e4: 3, e5: 1, latencies: [...Array(90).fill(4), ...Array(10).fill(400)] });
      await insertMinute(user.account_id, a, at(6), { requests: 2, e4: 0, e5: 2, latencies: [20, 20] });
      await insertMinute(user.account_id, a, at(70), { requests: 1, e4: 0, e5: 0, latencies: [7] });
      await insertMinute(user.account_id, b, at(10), { requests: 4, e4: 4, e5: 0, latencies: [40000, 1, 1, 1] });
      await insertMinute(other.account_id, theirs, at(5), { requests: 50, e4: 0, e5: 0, latencies: [1] });

      const read = (query: string) => expectBody(200, get(user, `/v1/traffic/metrics?${query}`), query);
      const window = `from=${hour.toISOString()}&to=${at(120).toISOString()}`;

      const minutes = await read(`bucket=minute&endpoint=${a.uuid}&${window}`);
      assert.equal(minutes.bucket, 'minute');
      assert.equal(minutes.from, hour.toISOString());
      assert.equal(minutes.series.length, 1);
      const [s] = minutes.series;
      assert.equal(s.endpoint_uuid, a.uuid);
      assert.equal(s.endpoint_name, a.name);
      assert.deepEqual(
        s.points.map((p: any) => [p.at, p.requests, p.errors_4xx, p.errors_5xx]),
        [
          [at(5).toISOString(), 100, 3, 1],
          [at(6).toISOString(), 2, 0, 2],
          [at(70).toISOString(), 1, 0, 0],
        ],
      );
      const busy = s.points[0];
      assert.equal(busy.bytes_in, 10000);
      assert.equal(busy.bytes_out, 100000);
      assert.ok(busy.latency_ms.p50 > 2 && busy.latency_ms.p50 <= 5, `p50 ${busy.latency_ms.p50}`);
      assert.ok(busy.latency_ms.p95 > 250 && busy.latency_ms.p95 <= 400, `p95 ${busy.latency_ms.p95}`);
      assert.ok(busy.latency_ms.p99 > 250 && busy.latency_ms.p99 <= 400, `p99 ${busy.latency_ms.p99}`);
      assert.equal(busy.latency_ms.max, 400);

      const hours = await read(`bucket=hour&${window}`);
      const byEndpoint = Object.fromEntries(hours.series.map((x: any) => [x.endpoint_uuid, x.points.map((p: any) => [p.at, p.requests, p.errors_5xx])]));
      assert.deepEqual(byEndpoint, {
        [a.uuid]: [
          [hour.toISOString(), 102, 3],
          [at(60).toISOString(), 1, 0],
        ],
        [b.uuid]: [[hour.toISOString(), 4, 0]],
      });
      // The overflow slot ends at the slowest exchange seen.
      const bPoint = hours.series.find((x: any) => x.endpoint_uuid === b.uuid).points[0];
      assert.ok(bPoint.latency_ms.p99 > 30000 && bPoint.latency_ms.p99 <= 40000, `p99 ${bPoint.latency_ms.p99}`);

      const days = await read(`bucket=day&from=2030-01-15T00:00:00Z&to=2030-01-16T00:00:00Z&endpoint=${a.id}`);
      assert.deepEqual(
        days.series.map((x: any) => x.points.map((p: any) => [p.at, p.requests])),
        [[['2030-01-15T00:00:00.000Z', 103]]],
      );
      // Another account's endpoint never shows up, even by uuid.
      assert.deepEqual((await read(`bucket=minute&endpoint=${theirs.uuid}&${window}`)).series, []);
    });

    it('defaults to hour buckets over the last day, and refuses windows of too many buckets or bad parameters', async () => {
      const user = await t.createUser('free');
      const body = await expectBody(200, get(user, '/v1/traffic/metrics'));
      assert.equal(body.bucket, 'hour');
      assert.equal(Date.parse(body.to) - Date.parse(body.from), 24 * 3_600_000);
      assert.deepEqual(body.series, []);
      const bad = async (query: string) => {
        const res = await get(user, `/v1/traffic/metrics?${query}`);
        assert.equal(res.status, 400, `${query}: ${res.text}`);
        assert.equal(res.body.code, 'invalid_query');
      };
      await bad('bucket=minute&from=2030-01-01T00:00:00Z&to=2030-01-02T00:01:00Z');
      await bad('bucket=day&from=2020-01-01T00:00:00Z&to=2030-01-01T00:00:00Z');
      await bad('bucket=week');
      await bad('from=2030-01-02T00:00:00Z&to=2030-01-01T00:00:00Z');
      await bad('from=soon');
      await bad('endpoint=-1');
      // A from after the default to (now) is an empty window turned inside out, not an empty answer.
      await bad(`from=${new Date(Date.now() + 7 * 86_400_000).toISOString()}`);
      // 1440 minute buckets is the most one call covers.
      assert.equal((await get(user, '/v1/traffic/metrics?bucket=minute&from=2030-01-01T00:00:00Z&to=2030-01-02T00:00:00Z')).status, 200);
      const owner = await t.createUser('business');
      const member = await t.createUser('free');
      const org = await orgWithMember(t, owner, member, ['endpoints:read']);
      assert.equal((await get(member, '/v1/traffic/metrics', org.headers)).status, 403);
    });
  });

  it('lists every traffic inspector operation in the OpenAPI document', async () => {
    const doc = await expectBody(200, t.api('GET', '/v1/openapi.json', { key: null }));
    assert.ok(doc.paths['/v1/traffic/errors/recent']?.get);
    assert.ok(doc.paths['/v1/traffic/logs']?.get);
    assert.ok(doc.paths['/v1/traffic/logs/{id}']?.get);
    assert.ok(doc.paths['/v1/traffic/logs/{id}/replay']?.post);
    assert.ok(doc.paths['/v1/traffic/metrics']?.get);
  });
});
