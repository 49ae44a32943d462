// Endpoint API keys over real HTTP: created with a token shown once, listed without secrets, revoked but kept listed;
// what edges receive (live keys only, as keyed digests), refusals that change nothing, and who may do what.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { TestNode } from '../helpers/node.ts';
import { createEndpoint, edgeEndpoint as edgeEndpointOf, expectBody, feedVersion, nodeWithOwner, orgWithMember, storeRows, type User } from '../helpers/endpoint-api.ts';
import { SecretBox } from '../../src/shared/secrets.ts';
import { tokenDigest, visitorTokenKey } from '../../src/shared/visitor-credentials.ts';

const SECRET_KEY = `api-keys-test-${randomBytes(16).toString('hex')}`;
const digestOf = (token: string) => tokenDigest(visitorTokenKey(new SecretBox(SECRET_KEY)), token);

describe('endpoint API keys', () => {
  let t: TestNode;
  let owner: User;
  before(async () => ({ t, owner } = await nodeWithOwner({ EDGE_SECRET_KEY: SECRET_KEY })));
  after(() => t.close());

  const sql = storeRows(() => t);
  const newEndpoint = async (user: User = owner, headers?: Record<string, string>) => (await createEndpoint(t, user, headers)).uuid;
  const keys = (id: string) => `/v1/endpoints/${id}/api-keys`;
  const create = (id: string, body: unknown, user: User = owner, headers?: Record<string, string>) => t.api('POST', keys(id), { key: user.api_key, body, headers });
  const createOk = (id: string, body: unknown = { name: 'robot' }) => expectBody(201, create(id, body));
  const list = async (id: string, user: User = owner, headers?: Record<string, string>) =>
    (await expectBody(200, t.api('GET', keys(id), { key: user.api_key, headers }))).items as any[];
  const state = async (id: string, user: User = owner, headers?: Record<string, string>) => ({
    keys: await list(id, user, headers),
    rows: await sql('SELECT v.* FROM endpoint_visitor_tokens v JOIN endpoints e ON e.id = v.endpoint_id WHERE e.uuid = $1 ORDER BY v.id', [id]),
    feed: await feedVersion(t),
  });
  const edgeEndpoint = (id: string) => edgeEndpointOf(t, id);

  it('creates a key: 201, Location, the token once; lists and gets it without the secret; stores only a keyed digest', async () => {
    const id = await newEndpoint();
    const expires = new Date(Date.now() + 3_600_000).toISOString();
    const res = await create(id, { name: 'CI robot', expires_at: expires });
    assert.equal(res.status, 201, res.text);
    const key = res.body;
    assert.deepEqual(Object.keys(key).sort(), ['created_at', 'expires_at', 'id', 'label', 'token']);
    assert.equal(res.headers.get('location'), `/v1/endpoints/${id}/api-keys/${key.id}`);
    assert.equal(key.label, 'CI robot');
    assert.equal(key.expires_at, expires);
    assert.match(key.token, /^evk_[A-Za-z0-9_-]{43}$/);

    const listed = await list(id);
    assert.deepEqual(listed, [{ id: key.id, label: 'CI robot', created_at: key.created_at, expires_at: expires, last_used_at: null, revoked_at: null }]);
    const one = await t.api('GET', `${keys(id)}/${key.id}`, { key: owner.api_key });
    assert.equal(one.status, 200, one.text);
    assert.deepEqual(one.body, listed[0]);
    const [row] = await sql('SELECT source, digest FROM endpoint_visitor_tokens WHERE id = $1', [key.id]);
    assert.deepEqual(row, { source: 'api_key', digest: digestOf(key.token) });
    const dump = JSON.stringify(await sql('SELECT * FROM endpoint_visitor_tokens'));
    assert.ok(!dump.includes(key.token), 'the token is not stored');

    const settings = await t.api('GET', `/v1/endpoints/${id}/settings`, { key: owner.api_key });
    assert.deepEqual(settings.body.tokens, [{ id: key.id, label: 'CI robot', source: 'api_key', created_at: key.created_at, expires_at: expires }]);
  });

  it('lets token mode rest on API keys alone, publishes live keys as digests, and drops a revoked key from the next snapshot', async () => {
    const id = await newEndpoint();
    const refused = await t.api('PUT', `/v1/endpoints/${id}/settings`, { key: owner.api_key, body: { mode: 'token' } });
    assert.equal(refused.status, 400, 'no tokens and no API keys yet');
    const a = await createOk(id, { name: 'a' });
    const b = await createOk(id, { name: 'b' });
    // Not in token mode: keys are stored and listed, edges get none.
    assert.deepEqual((await edgeEndpoint(id)).auth?.tokens, []);
    const on = await t.api('PUT', `/v1/endpoints/${id}/settings`, { key: owner.api_key, body: { mode: 'token' } });
    assert.equal(on.status, 200, on.text);
    assert.equal(on.body.mode, 'token');
    const edge = await edgeEndpoint(id);
    assert.deepEqual(edge.auth?.tokens, [
      { id: String(a.id), label: 'a', digest: digestOf(a.token), expires_at: null },
      { id: String(b.id), label: 'b', digest: digestOf(b.token), expires_at: null },
    ]);
    assert.ok(!JSON.stringify(edge).includes(a.token));
    const version = edge.auth!.credentials_version;

    const del = await t.api('DELETE', `${keys(id)}/${a.id}`, { key: owner.api_key });
    assert.equal(del.status, 204, del.text);
    assert.equal(del.text, '');
    const after = await edgeEndpoint(id);
    assert.deepEqual(
      after.auth?.tokens.map((x) => x.label),
      ['b'],
      'edges refuse a revoked key from the config that follows',
    );
    assert.ok(after.auth!.credentials_version > version);
    const listed = await list(id);
    assert.equal(listed.length, 2, 'a revoked key stays listed');
    const revokedAt = listed[0].revoked_at;
    assert.ok(revokedAt);
    // Revoking again changes nothing, and keeps the first time.
    assert.equal((await t.api('DELETE', `${keys(id)}/${a.id}`, { key: owner.api_key })).status, 204);
    assert.equal((await list(id))[0].revoked_at, revokedAt);
    const settings = await t.api('GET', `/v1/endpoints/${id}/settings`, { key: owner.api_key });
    assert.equal(settings.body.tokens[0].revoked_at, revokedAt);
  });

  it('leaves expired keys out of the snapshot', async () => {
    const id = await newEndpoint();
    const live = await createOk(id, { name: 'live' });
    const old = await createOk(id, { name: 'old', expires_at: new Date(Date.now() + 3_600_000).toISOString() });
    // Time is moved by rewriting the expiry, since the API refuses expiries in the past.
    await sql("UPDATE endpoint_visitor_tokens SET expires_at = now() - interval '1 second' WHERE id = $1", [old.id]);
    assert.equal((await t.api('PUT', `/v1/endpoints/${id}/settings`, { key: owner.api_key, body: { mode: 'token' } })).status, 200);
    assert.deepEqual(
      (await edgeEndpoint(id)).auth?.tokens.map((x) => x.id),
      [String(live.id)],
    );
  });

  it('refuses bad input with a 400 that changes nothing', async () => {
    const id = await newEndpoint();
    const existing = await createOk(id);
    // Ids that are not this endpoint's API key: another endpoint's, and a settings token.
    const other = await newEndpoint();
    const otherKey = await createOk(other);
    const withSettings = await newEndpoint();
    const set = await t.api('PUT', `/v1/endpoints/${withSettings}/settings`, { key: owner.api_key, body: { mode: 'token', tokens: [{ name: 's', token: 'settings-token-0123456789' }] } });
    assert.equal(set.status, 200, set.text);
    const before = await state(id);
    for (const [name, body, code] of [
      ['no name', {}, 'invalid_request'],
      ['empty name', { name: '' }, 'invalid_request'],
      ['name with a newline', { name: 'a\nb' }, 'invalid_request'],
      ['name not a string', { name: 5 }, 'invalid_request'],
      ['unknown field', { name: 'x', scopes: ['all'] }, 'unknown_field'],
      ['a token of the caller’s choosing', { name: 'x', token: 'mine-mine-mine-mine' }, 'unknown_field'],
      ['expiry in the past', { name: 'x', expires_at: '2000-01-01T00:00:00Z' }, 'invalid_request'],
      ['expiry not a timestamp', { name: 'x', expires_at: 'next week' }, 'invalid_request'],
      ['expiry a number', { name: 'x', expires_at: 1 }, 'invalid_request'],
    ] as const) {
      const res = await create(id, body);
      assert.equal(res.status, 400, `${name}: ${res.text}`);
      assert.equal(res.body.code, code, name);
    }
    for (const keyId of ['abc', '0', '-1', '1.5']) {
      for (const method of ['GET', 'DELETE']) {
        const res = await t.api(method, `${keys(id)}/${keyId}`, { key: owner.api_key });
        assert.equal(res.status, 400, `${method} ${keyId}`);
        assert.equal(res.body.code, 'invalid_id');
      }
    }
    for (const [endpoint, keyId] of [
      [id, 999999999],
      [id, otherKey.id],
      [withSettings, set.body.tokens[0].id],
    ]) {
      for (const method of ['GET', 'DELETE']) {
        const res = await t.api(method, `${keys(endpoint)}/${keyId}`, { key: owner.api_key });
        assert.equal(res.status, 404, `${method} ${endpoint}/${keyId}`);
      }
    }
    assert.deepEqual(await state(id), before);
    assert.equal((await list(other))[0].revoked_at, null);
    assert.equal(existing.label, 'robot');
  });

  it('answers 404 for another account’s endpoint, 401 without a key, 403 for a reader; a paused endpoint is read-only', async () => {
    const id = await newEndpoint();
    const key = await createOk(id);
    const stranger = await t.createUser('business');
    const before = await state(id);
    for (const [method, path, body] of [
      ['POST', keys(id), { name: 'x' }],
      ['GET', keys(id), undefined],
      ['GET', `${keys(id)}/${key.id}`, undefined],
      ['DELETE', `${keys(id)}/${key.id}`, undefined],
    ] as const) {
      const res = await t.api(method, path, { key: stranger.api_key, body });
      assert.equal(res.status, 404, `${method} ${path}`);
      assert.equal((await t.api(method, path, { key: null, body })).status, 401, `${method} ${path}`);
    }
    assert.deepEqual(await state(id), before);

    const orgOwner = await t.createUser('business');
    const reader = await t.createUser('business');
    const { headers } = await orgWithMember(t, orgOwner, reader, ['endpoints:read']);
    const orgEndpoint = await newEndpoint(orgOwner, headers);
    const orgKey = await create(orgEndpoint, { name: 'k' }, orgOwner, headers);
    assert.equal(orgKey.status, 201);
    const orgBefore = await state(orgEndpoint, orgOwner, headers);
    assert.equal((await list(orgEndpoint, reader, headers)).length, 1, 'endpoints:read lists');
    for (const [method, path, body] of [
      ['POST', keys(orgEndpoint), { name: 'x' }],
      ['DELETE', `${keys(orgEndpoint)}/${orgKey.body.id}`, undefined],
    ] as const) {
      const res = await t.api(method, path, { key: reader.api_key, body, headers });
      assert.equal(res.status, 403, `${method} ${path}`);
      assert.equal(res.body.detail.permission, 'endpoints:update');
    }
    assert.deepEqual(await state(orgEndpoint, orgOwner, headers), orgBefore);

    assert.equal((await t.api('POST', `/v1/admin/endpoints/${id}/pause`)).status, 200);
    const paused = await state(id);
    for (const [method, path, body] of [
      ['POST', keys(id), { name: 'x' }],
      ['DELETE', `${keys(id)}/${key.id}`, undefined],
    ] as const) {
      const res = await t.api(method, path, { key: owner.api_key, body });
      assert.equal(res.status, 409, `${method} ${path}`);
      assert.equal(res.body.code, 'quota_paused');
    }
    assert.deepEqual(await state(id), paused);
    assert.equal((await t.api('POST', `/v1/admin/endpoints/${id}/unpause`)).status, 200);
  });
});
