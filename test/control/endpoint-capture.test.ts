// The request-capture switch over real HTTP: JSON-only full writes, `off` forcing capture off, the errors docs/api.md
// lists (415, 400, 403, 404, 409 quota_paused) and the admin pause that makes an endpoint read-only.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { storeRows } from '../helpers/endpoint-api.ts';

type User = Awaited<ReturnType<TestNode['createUser']>>;

describe('PUT /v1/endpoints/{id}/settings/capture', () => {
  let t: TestNode;
  before(async () => {
    t = await startTestNode();
  });
  after(() => t.close());

  const sql = storeRows(() => t);
  const newEndpoint = async (user: User, headers?: Record<string, string>) => {
    const res = await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {}, headers });
    assert.equal(res.status, 201, res.text);
    return res.body.uuid as string;
  };
  const put = (user: Pick<User, 'api_key'>, uuid: string, body: unknown, headers?: Record<string, string>) =>
    t.api('PUT', `/v1/endpoints/${uuid}/settings/capture`, { key: user.api_key, body, headers });
  const capture = async (user: User, uuid: string) => {
    const res = await t.api('GET', `/v1/endpoints/${uuid}`, { key: user.api_key });
    return { enabled: res.body.capture_enabled, level: res.body.capture_level };
  };

  it('is on by default, and a write answers 200 with an empty body', async () => {
    const user = await t.createUser('free');
    const uuid = await newEndpoint(user);
    assert.deepEqual(await capture(user, uuid), { enabled: true, level: null });
    const res = await put(user, uuid, { capture_enabled: true, capture_level: 'metadata' });
    assert.equal(res.status, 200);
    assert.equal(res.text, '');
    assert.deepEqual(await capture(user, uuid), { enabled: true, level: 'metadata' });
    const [feed] = await sql("SELECT data FROM feed_entries WHERE topic = 'endpoint' AND key = $1", [uuid]);
    assert.equal(feed.data.capture_enabled, true);
    assert.equal(feed.data.capture_level, 'metadata');
  });

  it('is a full write: an omitted capture_enabled is false, an omitted or empty capture_level clears it', async () => {
    const user = await t.createUser('free');
    const uuid = await newEndpoint(user);
    await put(user, uuid, { capture_enabled: true, capture_level: 'full' });
    assert.equal((await put(user, uuid, { capture_level: 'full' })).status, 200);
    assert.deepEqual(await capture(user, uuid), { enabled: false, level: 'full' });
    await put(user, uuid, { capture_enabled: true, capture_level: 'full' });
    await put(user, uuid, { capture_enabled: true, capture_level: '' });
    assert.deepEqual(await capture(user, uuid), { enabled: true, level: null });
    await put(user, uuid, { capture_enabled: true, capture_level: 'full' });
    await put(user, uuid, { capture_enabled: true });
    assert.deepEqual(await capture(user, uuid), { enabled: true, level: null });
    // An empty JSON body is a full write of the defaults.
    assert.equal((await t.api('PUT', `/v1/endpoints/${uuid}/settings/capture`, { key: user.api_key, headers: { 'content-type': 'application/json' } })).status, 200);
    assert.deepEqual(await capture(user, uuid), { enabled: false, level: null });
  });

  it('turns capture off when capture_level is `off`, whatever capture_enabled says', async () => {
    const user = await t.createUser('free');
    const uuid = await newEndpoint(user);
    assert.equal((await put(user, uuid, { capture_enabled: true, capture_level: 'off' })).status, 200);
    assert.deepEqual(await capture(user, uuid), { enabled: false, level: 'off' });
  });

  it('answers 415 without Content-Type application/json, and changes nothing', async () => {
    const user = await t.createUser('free');
    const uuid = await newEndpoint(user);
    const path = `/v1/endpoints/${uuid}/settings/capture`;
    const none = await t.api('PUT', path, { key: user.api_key });
    assert.equal(none.status, 415);
    assert.equal(none.body.code, 'unsupported_media_type');
    const text = await t.api('PUT', path, { key: user.api_key, raw: '{"capture_enabled":false}', headers: { 'content-type': 'text/plain' } });
    assert.equal(text.status, 415);
    const missing = await t.api('PUT', path, { key: user.api_key, raw: '{"capture_enabled":false}' });
    assert.equal(missing.status, 415);
    assert.deepEqual(await capture(user, uuid), { enabled: true, level: null });
  });

  it('answers 400 for a capture_level outside full, metadata, off, for unknown fields and invalid JSON, and changes nothing', async () => {
    const user = await t.createUser('free');
    const uuid = await newEndpoint(user);
    for (const level of ['FULL', 'verbose', ' off']) {
      const res = await put(user, uuid, { capture_enabled: false, capture_level: level });
      assert.equal(res.status, 400, level);
      assert.equal(res.body.error, 'Invalid capture_level. Supported: full, metadata, off');
    }
    const unknown = await put(user, uuid, { capture_enabled: false, sample_rate: 1 });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.body.code, 'unknown_field');
    const typed = await put(user, uuid, { capture_enabled: 'no' });
    assert.equal(typed.status, 400);
    const json = await t.api('PUT', `/v1/endpoints/${uuid}/settings/capture`, { key: user.api_key, raw: '{', headers: { 'content-type': 'application/json' } });
    assert.equal(json.status, 400);
    assert.equal(json.body.code, 'invalid_json');
    assert.deepEqual(await capture(user, uuid), { enabled: true, level: null });
  });

  it('answers 403 without endpoints:update and 403 account_suspended, and changes nothing', async () => {
    const owner = await t.createUser('free');
    const member = await t.createUser('free');
    const org = await t.api('POST', '/v1/organizations', { key: owner.api_key, body: { name: 'Cap' } });
    await t.api('POST', `/v1/organizations/${org.body.id}/members`, { key: owner.api_key, body: { email: member.email, permissions: ['endpoints:read'] } });
    const headers = { 'x-account-id': String(org.body.id) };
    const uuid = await newEndpoint(owner, headers);
    const denied = await put(member, uuid, { capture_enabled: false }, headers);
    assert.equal(denied.status, 403);
    assert.equal(denied.body.code, 'permission_denied');

    const user = await t.createUser('free');
    const mine = await newEndpoint(user);
    await t.api('POST', `/v1/admin/accounts/${user.account_id}/suspend`);
    const suspended = await put(user, mine, { capture_enabled: false });
    assert.equal(suspended.status, 403);
    assert.equal(suspended.body.code, 'account_suspended');
    const [row] = await sql('SELECT capture_enabled FROM endpoints WHERE uuid = $1', [mine]);
    assert.equal(row.capture_enabled, true);
    const [orgRow] = await sql('SELECT capture_enabled FROM endpoints WHERE uuid = $1', [uuid]);
    assert.equal(orgRow.capture_enabled, true);
  });

  it('answers 403 to a caller who is not a member of the active account', async () => {
    const owner = await t.createUser('free');
    const outsider = await t.createUser('free');
    const uuid = await newEndpoint(owner);
    const res = await put(outsider, uuid, { capture_enabled: false }, { 'x-account-id': String(owner.account_id) });
    assert.equal(res.status, 403);
    assert.equal(res.body.code, 'not_a_member');
  });

  it('answers 404 for another account’s or a missing endpoint, 401 without a key', async () => {
    const a = await t.createUser('free');
    const b = await t.createUser('free');
    const uuid = await newEndpoint(a);
    assert.equal((await put(b, uuid, { capture_enabled: false })).status, 404);
    assert.equal((await put(b, '00000000-0000-4000-8000-000000000000', { capture_enabled: false })).status, 404);
    assert.equal((await t.api('PUT', `/v1/endpoints/${uuid}/settings/capture`, { key: null, body: {} })).status, 401);
    assert.deepEqual(await capture(a, uuid), { enabled: true, level: null });
  });

  describe('pause', () => {
    it('answers 409 quota_paused while an admin has paused the endpoint, and accepts writes again once unpaused', async () => {
      const user = await t.createUser('free');
      const uuid = await newEndpoint(user);
      const paused = await t.api('POST', `/v1/admin/endpoints/${uuid}/pause`);
      assert.equal(paused.status, 200);
      assert.ok(paused.body.paused_at);
      const [feed] = await sql("SELECT data FROM feed_entries WHERE topic = 'endpoint' AND key = $1", [uuid]);
      assert.equal(feed.data.paused, true);

      const res = await put(user, uuid, { capture_enabled: false });
      assert.equal(res.status, 409);
      assert.equal(res.body.code, 'quota_paused');
      assert.deepEqual(await capture(user, uuid), { enabled: true, level: null });

      // Pausing twice keeps the first timestamp.
      assert.equal((await t.api('POST', `/v1/admin/endpoints/${uuid}/pause`)).body.paused_at, paused.body.paused_at);
      const resumed = await t.api('POST', `/v1/admin/endpoints/${uuid}/unpause`);
      assert.equal(resumed.status, 200);
      assert.equal(resumed.body.paused_at, null);
      assert.equal((await put(user, uuid, { capture_enabled: false })).status, 200);
      const [after] = await sql("SELECT data FROM feed_entries WHERE topic = 'endpoint' AND key = $1", [uuid]);
      assert.equal(after.data.paused, false);
      assert.equal(after.data.capture_enabled, false);
    });

    it('is for admins only; 404 for a missing endpoint', async () => {
      const user = await t.createUser('free');
      const uuid = await newEndpoint(user);
      const denied = await t.api('POST', `/v1/admin/endpoints/${uuid}/pause`, { key: user.api_key });
      assert.equal(denied.status, 403);
      assert.equal(denied.body.code, 'admin_required');
      assert.equal((await t.api('POST', '/v1/admin/endpoints/00000000-0000-4000-8000-000000000000/pause')).status, 404);
      const [row] = await sql('SELECT paused_at FROM endpoints WHERE uuid = $1', [uuid]);
      assert.equal(row.paused_at, null);
    });
  });
});
