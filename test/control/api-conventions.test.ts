// The control API's shared conventions, exercised over HTTP against the real program: authentication,
// the uniform error body, strict decoding, body limits, hostile JSON and the OpenAPI document.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestNode, type TestNode } from '../helpers/node.ts';

describe('control API conventions', () => {
  let t: TestNode;
  before(async () => {
    t = await startTestNode({ EDGE_BODY_LIMIT_BYTES: '4096' });
  });
  after(() => t.close());

  describe('authentication', () => {
    it('answers 401 with the uniform body when X-API-KEY is missing', async () => {
      const res = await t.api('GET', '/v1/me', { key: null });
      assert.equal(res.status, 401);
      assert.deepEqual(res.body, { error: 'Missing or invalid API key', code: 'unauthorized' });
    });

    it('answers 401 for an unknown key, a malformed key and an absurdly long key', async () => {
      for (const key of ['edge_0123456789abcdef_' + 'A'.repeat(43), 'nonsense', 'x'.repeat(5000)]) {
        const res = await t.api('GET', '/v1/me', { key });
        assert.equal(res.status, 401, key.slice(0, 30));
        assert.equal(res.body.code, 'unauthorized');
      }
    });

    it('checks the key before reading the body, so a bad body from a stranger is still a 401', async () => {
      const res = await t.api('POST', '/v1/api-keys', { key: null, raw: '{not json', headers: { 'content-type': 'application/json' } });
      assert.equal(res.status, 401);
    });

    it('accepts the configured admin key from the first start on', async () => {
      const res = await t.api('GET', '/v1/me');
      assert.equal(res.status, 200);
      assert.equal(res.body.user.is_admin, true);
    });
  });

  describe('request bodies', () => {
    it('rejects invalid JSON with 400 invalid_json', async () => {
      const res = await t.api('POST', '/v1/admin/users', { raw: '{"email": ', headers: { 'content-type': 'application/json' } });
      assert.equal(res.status, 400);
      assert.equal(res.body.code, 'invalid_json');
    });

    it('rejects an unknown field with 400 naming the field, and creates nothing', async () => {
      const email = 'strict@example.test';
      const res = await t.api('POST', '/v1/admin/users', { body: { email, plan: 'free', surprise: 1 } });
      assert.equal(res.status, 400);
      assert.equal(res.body.code, 'unknown_field');
      assert.deepEqual(res.body.detail, { field: 'surprise', reason: 'unknown field' });
      const list = await t.api('GET', '/v1/admin/users?page_size=100');
      assert.ok(!list.body.items.some((u: { email: string }) => u.email === email));
    });

    it('rejects __proto__ and constructor keys at any depth', async () => {
      for (const raw of ['{"__proto__": {"is_admin": true}, "email": "p@example.test", "plan": "free"}', '{"email": "c@example.test", "plan": "free", "x": {"constructor": {}}}']) {
        const res = await t.api('POST', '/v1/admin/users', { raw, headers: { 'content-type': 'application/json' } });
        assert.equal(res.status, 400, raw);
        assert.equal(res.body.detail.reason, 'forbidden key');
      }
    });

    it('answers 413 for a body over the limit before parsing it', async () => {
      const res = await t.api('POST', '/v1/admin/users', { raw: `{"email": "${'a'.repeat(8000)}"}`, headers: { 'content-type': 'application/json' } });
      assert.equal(res.status, 413);
      assert.equal(res.body.code, 'body_too_large');
    });

    it('answers 415 for a body that is not JSON', async () => {
      const res = await t.api('POST', '/v1/admin/users', { raw: 'email=a@b.c', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
      assert.equal(res.status, 415);
      assert.equal(res.body.code, 'unsupported_media_type');
    });

    it('names a missing required field and a wrongly typed one', async () => {
      const missing = await t.api('POST', '/v1/admin/users', { body: { email: 'm@example.test' } });
      assert.equal(missing.status, 400);
      assert.deepEqual(missing.body.detail, { field: 'plan', reason: 'missing required field' });
      const typed = await t.api('POST', '/v1/admin/users', { body: { email: 'm@example.test', plan: 7 } });
      assert.equal(typed.status, 400);
      assert.equal(typed.body.detail.field, 'plan');
    });
  });

  describe('identifiers in paths', () => {
    it('answers 400 invalid_id for ids that are not positive int64', async () => {
      for (const id of ['abc', '0', '-1', '1.5', '99999999999999999999', '1e3']) {
        const res = await t.api('GET', `/v1/admin/users/${id}`);
        assert.equal(res.status, 400, id);
        assert.equal(res.body.code, 'invalid_id');
      }
    });

    it('answers 404 for a well-formed id that does not exist, up to the largest int64', async () => {
      for (const id of ['987654321', '9223372036854775807']) {
        const res = await t.api('GET', `/v1/admin/users/${id}`);
        assert.equal(res.status, 404, id);
        assert.equal(res.body.code, 'not_found');
      }
    });
  });

  it('answers unknown routes with the uniform 404 body', async () => {
    const res = await t.api('GET', '/v1/nothing-here');
    assert.equal(res.status, 404);
    assert.equal(res.body.code, 'route_not_found');
  });

  it('serves an OpenAPI document describing the operations', async () => {
    const res = await t.api('GET', '/v1/openapi.json', { key: null });
    assert.equal(res.status, 200);
    assert.equal(res.body.openapi, '3.0.3');
    assert.ok(res.body.paths['/v1/admin/users'].post);
    assert.ok(res.body.paths['/v1/api-keys'].get);
    assert.deepEqual(res.body.components.securitySchemes.apiKey, { type: 'apiKey', in: 'header', name: 'X-API-KEY' });
  });

  describe('operations endpoints', () => {
    it('reports liveness and readiness', async () => {
      assert.equal((await t.api('GET', '/healthz', { key: null })).status, 200);
      const ready = await t.api('GET', '/readyz', { key: null });
      assert.equal(ready.status, 200);
      assert.equal(ready.body.checks.store, true);
      if (process.env.REDIS_URL) assert.equal(ready.body.checks.redis, true);
    });

    it('exposes Prometheus metrics including request counts', async () => {
      await t.api('GET', '/v1/me');
      const res = await t.api('GET', '/metrics', { key: null });
      assert.equal(res.status, 200);
      assert.match(res.text, /edge_control_requests_total\{method="GET",route="\/v1\/me",status="200"\} \d+/);
    });
  });
});
