// Promoting ephemeral endpoints to permanent, over real HTTP: the state change, its errors, the plain-text quota
// body, and the race docs/api.md calls out: concurrent creates and promotes never push a user past the quota.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { storeRows } from '../helpers/endpoint-api.ts';

type User = Awaited<ReturnType<TestNode['createUser']>>;

describe('POST /v1/endpoints/{id}/promote', () => {
  let t: TestNode;
  before(async () => {
    t = await startTestNode();
  });
  after(() => t.close());

  const sql = storeRows(() => t);
  const permanentCount = async (userId: number) =>
    (await sql<{ n: number }>('SELECT count(*)::int AS n FROM endpoints WHERE user_id = $1 AND NOT ephemeral', [userId]))[0].n;
  const ephemeral = async (userId: number, fingerprint?: string) => {
    const res = await t.api('POST', '/v1/admin/endpoints/ephemeral', { body: { user_id: userId, ...(fingerprint ? { device_fingerprint: fingerprint } : {}) } });
    assert.equal(res.status, 201, res.text);
    return res.body as { uuid: string; id: number };
  };
  const promote = (user: Pick<User, 'api_key'> | null, uuid: string, opts: { body?: unknown; headers?: Record<string, string> } = {}) =>
    t.api('POST', `/v1/endpoints/${uuid}/promote`, { key: user ? user.api_key : t.adminKey, ...opts });

  it('makes an ephemeral endpoint permanent and clears its device fingerprint and idle tracking', async () => {
    const user = await t.createUser('free');
    const e = await ephemeral(user.id, 'device-abc');
    const res = await promote(user, e.uuid);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { endpoint_id: e.id, uuid: e.uuid, ephemeral: false });

    const get = await t.api('GET', `/v1/endpoints/${e.uuid}`, { key: user.api_key });
    assert.equal(get.body.ephemeral, false);
    assert.equal(get.body.last_active_at, null);
    const [row] = await sql('SELECT device_fingerprint FROM endpoints WHERE uuid = $1', [e.uuid]);
    assert.equal(row.device_fingerprint, null);
    const [feed] = await sql("SELECT data FROM feed_entries WHERE topic = 'endpoint' AND key = $1", [e.uuid]);
    assert.equal(feed.data.ephemeral, false);
  });

  it('accepts an empty object as the body and refuses unknown fields', async () => {
    const user = await t.createUser('pro');
    const a = await ephemeral(user.id);
    assert.equal((await promote(user, a.uuid, { body: {} })).status, 200);
    const b = await ephemeral(user.id);
    const bad = await promote(user, b.uuid, { body: { ephemeral: false } });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.code, 'unknown_field');
    assert.equal((await t.api('GET', `/v1/endpoints/${b.uuid}`, { key: user.api_key })).body.ephemeral, true);
  });

  it('answers 409 for an endpoint that is already permanent', async () => {
    const user = await t.createUser('pro');
    const created = await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} });
    const res = await promote(user, created.body.uuid);
    assert.equal(res.status, 409);
    assert.equal(res.body.code, 'conflict');
    const e = await ephemeral(user.id);
    assert.equal((await promote(user, e.uuid)).status, 200);
    assert.equal((await promote(user, e.uuid)).status, 409);
  });

  it('answers 403 with a plain-text body naming the limit when the permanent quota is reached, and changes nothing', async () => {
    const user = await t.createUser('free'); // permanent_endpoints: 1
    assert.equal((await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} })).status, 201);
    const e = await ephemeral(user.id);
    const res = await promote(user, e.uuid);
    assert.equal(res.status, 403);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
    assert.equal(res.text, 'Permanent endpoint limit reached: 1 of 1 (plan free)');
    assert.equal((await t.api('GET', `/v1/endpoints/${e.uuid}`, { key: user.api_key })).body.ephemeral, true);
    assert.equal(await permanentCount(user.id), 1);
  });

  it('answers 403 in plain text at the organization endpoint limit', async () => {
    const owner = await t.createUser('free');
    const member = await t.createUser('free');
    const org = await t.api('POST', '/v1/organizations', { key: owner.api_key, body: { name: 'Promo' } });
    await t.api('POST', `/v1/organizations/${org.body.id}/members`, { key: owner.api_key, body: { email: member.email, permissions: ['endpoints:write', 'endpoints:update', 'endpoints:read'] } });
    const headers = { 'x-account-id': String(org.body.id) };
    assert.equal((await t.api('POST', '/v1/endpoints', { key: owner.api_key, body: {}, headers })).status, 201);
    // An ephemeral endpoint of the member's, in the organization (agents create these; here straight in the store).
    const [row] = await sql<{ uuid: string }>(
      "INSERT INTO endpoints (user_id, account_id, subdomain, hostname, ephemeral, last_active_at) VALUES ($1, $2, 'org-eph', 'org-eph.edge.localhost', true, now()) RETURNING uuid::text AS uuid",
      [member.id, org.body.id],
    );
    const res = await promote(member, row.uuid, { headers });
    assert.equal(res.status, 403);
    assert.equal(res.text, 'Organization endpoint limit reached: 1 of 1 (plan free)');
  });

  it('answers 404 for an unknown or another user’s endpoint, 400 for a malformed or empty id, 401 without a key', async () => {
    const a = await t.createUser('pro');
    const b = await t.createUser('pro');
    const e = await ephemeral(a.id);
    assert.equal((await promote(b, e.uuid)).status, 404);
    assert.equal((await promote(b, '00000000-0000-4000-8000-000000000000')).status, 404);
    assert.equal((await promote(b, 'nope')).status, 400);
    const empty = await t.api('POST', '/v1/endpoints//promote', { key: b.api_key });
    assert.equal(empty.status, 400);
    assert.equal((await t.api('POST', `/v1/endpoints/${e.uuid}/promote`, { key: null })).status, 401);
    assert.equal((await t.api('GET', `/v1/endpoints/${e.uuid}`, { key: a.api_key })).body.ephemeral, true);
  });

  it('answers 403 without endpoints:update', async () => {
    const owner = await t.createUser('pro');
    const member = await t.createUser('pro');
    const org = await t.api('POST', '/v1/organizations', { key: owner.api_key, body: { name: 'RO' } });
    await t.api('POST', `/v1/organizations/${org.body.id}/members`, { key: owner.api_key, body: { email: member.email, permissions: ['endpoints:read'] } });
    const [row] = await sql<{ uuid: string }>(
      "INSERT INTO endpoints (user_id, account_id, subdomain, hostname, ephemeral) VALUES ($1, $2, 'ro-eph', 'ro-eph.edge.localhost', true) RETURNING uuid::text AS uuid",
      [owner.id, org.body.id],
    );
    const res = await promote(member, row.uuid, { headers: { 'x-account-id': String(org.body.id) } });
    assert.equal(res.status, 403);
    assert.equal(res.body.code, 'permission_denied');
  });

  it('lets an admin promote another user’s endpoint against that user’s quota', async () => {
    const user = await t.createUser('free');
    const e = await ephemeral(user.id);
    assert.equal((await promote(null, e.uuid)).status, 200);
    const f = await ephemeral(user.id);
    const res = await promote(null, f.uuid);
    assert.equal(res.status, 403);
    assert.equal(res.text, 'Permanent endpoint limit reached: 1 of 1 (plan free)');
  });

  describe('concurrency', () => {
    it('never lets concurrent creates and promotes exceed the permanent quota', async () => {
      const user = await t.createUser('pro'); // permanent_endpoints: 10
      for (let i = 0; i < 9; i++) assert.equal((await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} })).status, 201);
      const ephemerals = [];
      for (let i = 0; i < 10; i++) ephemerals.push(await ephemeral(user.id));

      // One below the quota: 10 creates and 10 promotes race for the last slot.
      const results = await Promise.all([
        ...Array.from({ length: 10 }, () => t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} })),
        ...ephemerals.map((e) => promote(user, e.uuid)),
      ]);
      const statuses = results.map((r) => r.status);
      const won = statuses.filter((s) => s === 200 || s === 201).length;
      assert.equal(won, 1, `statuses: ${statuses.join(',')}`);
      assert.equal(statuses.filter((s) => s === 403).length, 19, `statuses: ${statuses.join(',')}`);
      assert.equal(await permanentCount(user.id), 10);
    });

    it('never lets members creating at once exceed the organization limit', async () => {
      const owner = await t.createUser('free');
      const org = await t.api('POST', '/v1/organizations', { key: owner.api_key, body: { name: 'Race' } });
      // Free plan: organization_endpoints 1, and each member has a personal permanent slot of 1 as well, so only
      // the organization lock can stop five members from each taking "the last" organization slot.
      const members: User[] = [];
      for (let i = 0; i < 5; i++) {
        const m = await t.createUser('free');
        await t.api('POST', `/v1/organizations/${org.body.id}/members`, { key: owner.api_key, body: { email: m.email, permissions: ['endpoints:write'] } });
        members.push(m);
      }
      const headers = { 'x-account-id': String(org.body.id) };
      const results = await Promise.all(members.flatMap((m) => [0, 1].map(() => t.api('POST', '/v1/endpoints', { key: m.api_key, body: {}, headers }))));
      assert.equal(results.filter((r) => r.status === 201).length, 1, results.map((r) => r.status).join(','));
      const [{ n }] = await sql<{ n: number }>('SELECT count(*)::int AS n FROM endpoints WHERE account_id = $1', [org.body.id]);
      assert.equal(n, 1);
    });
  });
});
