// The permissions the endpoint, visitor-auth, OAuth provider, API key, origin and domain routes declare
// (config.permission): who is refused with which, that a malformed request is still a 400 first, and the two
// checks kept where they were (capture judges its level first; the one-shot flow also needs tunnels:connect).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { TestNode } from '../helpers/node.ts';
import { createEndpoint, expectBody, nodeWithOwner, orgWithMember, type User } from '../helpers/endpoint-api.ts';

const PROVIDER = { kind: 'oidc', name: 'IdP', issuer: 'https://idp.example.com', client_id: 'client', client_secret: 'secret' };

describe('declared permissions of the endpoint routes', () => {
  let t: TestNode;
  let owner: User;
  let reader: User;
  let nobody: User;
  let headers: Record<string, string>;
  let uuid: string;
  before(async () => {
    ({ t, owner } = await nodeWithOwner());
    reader = await t.createUser('business');
    nobody = await t.createUser('business');
    const org = await orgWithMember(t, owner, reader, ['endpoints:read']);
    headers = org.headers;
    await expectBody(201, t.api('POST', `/v1/organizations/${org.id}/members`, { key: owner.api_key, body: { email: nobody.email, permissions: [] } }));
    uuid = (await createEndpoint(t, owner, headers)).uuid;
  });
  after(() => t.close());

  const call = (user: User, method: string, path: string, body?: unknown) => t.api(method, path, { key: user.api_key, body, headers });
  const refusedFor = async (user: User, permission: string, method: string, path: string, body?: unknown) => {
    const res = await call(user, method, path, body);
    assert.equal(res.status, 403, `${method} ${path}: ${res.text}`);
    assert.equal(res.body.code, 'permission_denied', `${method} ${path}`);
    assert.deepEqual(res.body.detail, { permission }, `${method} ${path}`);
  };

  it('refuses every write to a member holding endpoints:read only, naming the permission it lacks', async () => {
    const e = `/v1/endpoints/${uuid}`;
    const writes: Array<[string, string, string, unknown?]> = [
      ['endpoints:write', 'POST', '/v1/endpoints', {}],
      ['endpoints:write', 'POST', '/v1/endpoints/ephemeral', {}],
      ['endpoints:delete', 'DELETE', e],
      ['endpoints:update', 'POST', `${e}/promote`, {}],
      ['endpoints:update', 'PUT', `${e}/ports`, { dedicated_tcp_port: null }],
      ['endpoints:update', 'PUT', `${e}/origin`, { url: null }],
      ['endpoints:update', 'PUT', `${e}/settings`, { mode: 'none' }],
      ['endpoints:update', 'PUT', `${e}/settings/jwt`, { enabled: false }],
      ['endpoints:update', 'PUT', `${e}/settings/webhook`, { enabled: false }],
      ['endpoints:update', 'PUT', `${e}/settings/capture`, { capture_enabled: false }],
      ['endpoints:update', 'POST', `${e}/api-keys`, { name: 'k' }],
      ['endpoints:update', 'DELETE', `${e}/api-keys/1`],
      ['endpoints:update', 'POST', `${e}/oauth/providers`, PROVIDER],
      ['endpoints:update', 'PUT', `${e}/oauth/providers/1`, PROVIDER],
      ['endpoints:update', 'PUT', `${e}/oauth/providers/1/toggle`, {}],
      ['endpoints:update', 'DELETE', `${e}/oauth/providers/1`],
      ['domains:manage', 'POST', '/v1/domains', { name: 'example.com' }],
      ['domains:manage', 'DELETE', '/v1/domains/1'],
      ['domains:manage', 'POST', '/v1/domains/1/verify'],
    ];
    for (const [permission, method, path, body] of writes) await refusedFor(reader, permission, method, path, body);
    assert.equal((await expectBody(200, call(owner, 'GET', `${e}/settings`))).mode, 'none', 'nothing was written');
  });

  it('lets that member read, and refuses the reads to a member without endpoints:read', async () => {
    const e = `/v1/endpoints/${uuid}`;
    for (const path of ['/v1/endpoints', e, `${e}/settings`, `${e}/api-keys`, `${e}/oauth/providers`]) {
      await expectBody(200, call(reader, 'GET', path), path);
      await refusedFor(nobody, 'endpoints:read', 'GET', path);
    }
    await refusedFor(nobody, 'endpoints:read', 'GET', `${e}/api-keys/1`);
    await refusedFor(nobody, 'endpoints:read', 'GET', `${e}/oauth/providers/1`);
    // The account's domains are every member's to see.
    await expectBody(200, call(nobody, 'GET', '/v1/domains'));
  });

  it('answers a malformed request with its 400 before the missing permission', async () => {
    const unknown = await call(reader, 'PUT', `/v1/endpoints/${uuid}/settings`, { mode: 'none', extra: 1 });
    assert.equal(unknown.status, 400, unknown.text);
    assert.equal(unknown.body.code, 'unknown_field');
    const missing = await call(reader, 'POST', `/v1/endpoints/${uuid}/oauth/providers`, { kind: 'oidc' });
    assert.equal(missing.status, 400, missing.text);
    const badPort = await call(reader, 'PUT', `/v1/endpoints/${uuid}/ports`, { dedicated_tcp_port: 80 });
    assert.equal(badPort.status, 400, badPort.text);
  });

  it('judges a capture level before the permission, as it always has', async () => {
    const res = await call(reader, 'PUT', `/v1/endpoints/${uuid}/settings/capture`, { capture_level: 'everything' });
    assert.equal(res.status, 400, res.text);
    assert.equal(res.body.code, 'invalid_request');
    assert.deepEqual(res.body.detail, { field: 'capture_level', reason: 'supported: full, metadata, off', capture_level: 'everything' });
  });

  it('needs tunnels:connect besides endpoints:write for the one-shot flow’s ephemeral endpoint', async () => {
    const writer = await t.createUser('business');
    const org = await orgWithMember(t, owner, writer, ['endpoints:read', 'endpoints:write']);
    const res = await t.api('POST', '/v1/endpoints/ephemeral', { key: writer.api_key, body: {}, headers: org.headers });
    assert.equal(res.status, 403, res.text);
    assert.deepEqual(res.body.detail, { permission: 'tunnels:connect' });
    // The same member may create a permanent endpoint, which endpoints:write alone allows.
    await expectBody(201, t.api('POST', '/v1/endpoints', { key: writer.api_key, body: {}, headers: org.headers }));
  });

  it('keeps the admin operations for administrators', async () => {
    for (const [method, path, body] of [
      ['POST', '/v1/admin/endpoints/ephemeral', { user_id: owner.id }],
      ['POST', `/v1/admin/endpoints/${uuid}/pause`, undefined],
      ['POST', '/v1/admin/domains/1/verify', undefined],
    ] as const) {
      const res = await call(owner, method, path, body);
      assert.equal(res.status, 403, `${path}: ${res.text}`);
      assert.equal(res.body.code, 'admin_required', path);
    }
  });
});
