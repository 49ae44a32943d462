// apiCall against a real control API: path templates and parameters, query, JSON bodies, answers by status, public
// operations, cancellation; and, checked by the type-checker, that calls off the document do not compile.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { apiCall, type ApiTarget } from '../../../src/shared/api/client.ts';
import { startTestNode, type TestNode } from '../../helpers/node.ts';

describe('apiCall', () => {
  let t: TestNode;
  let user: ApiTarget;

  before(async () => {
    t = await startTestNode();
    user = { baseUrl: `${t.controlUrl}/`, apiKey: (await t.createUser('free')).api_key };
  });
  after(() => t?.close());

  it('sends a JSON body and answers the declared status with its typed body', async () => {
    const created = await apiCall(user, 'post', '/v1/endpoints/ephemeral', { body: { tags: ['api-call'] } });
    assert.equal(created.status, 201);
    if (created.status !== 201) return;
    assert.deepEqual(created.body.tags, ['api-call']);
    assert.equal(created.body.ephemeral, true);
    assert.match(created.headers.get('content-type') ?? '', /application\/json/);
  });

  it('fills path parameters and sends the query', async () => {
    const created = await apiCall(user, 'post', '/v1/endpoints/ephemeral', { body: { tags: ['by-query'] } });
    assert.equal(created.status, 201);
    const uuid = created.status === 201 ? created.body.uuid : '';

    const one = await apiCall(user, 'get', '/v1/endpoints/{id}', { params: { id: uuid } });
    assert.equal(one.status, 200);
    assert.equal(one.status === 200 && one.body.uuid, uuid);

    const listed = await apiCall(user, 'get', '/v1/endpoints', { query: { tag: 'by-query', page_size: '5', q: undefined } });
    assert.equal(listed.status, 200);
    if (listed.status !== 200) return;
    assert.deepEqual(listed.body.items.map((e) => e.uuid), [uuid]);
    assert.equal(listed.body.page_size, 5);
  });

  it('answers the uniform error body for a declared error status', async () => {
    const bad = await apiCall(user, 'get', '/v1/endpoints', { query: { tag: 'Not A Tag!' } });
    assert.equal(bad.status, 400);
    assert.equal(bad.status === 400 && bad.body.code, 'invalid_query');

    const missing = await apiCall(user, 'get', '/v1/endpoints/{id}', { params: { id: '00000000-0000-4000-8000-000000000000' } });
    assert.equal(missing.status, 404);
    assert.equal(missing.status === 404 && missing.body.code, 'not_found');
  });

  it('encodes a path parameter, so it cannot reach another route', async () => {
    // Unencoded, `/v1/endpoints/../api-keys` would be the caller's API-key list (200); encoded, it is one bad endpoint id.
    const answer = await apiCall(user, 'get', '/v1/endpoints/{id}', { params: { id: '../api-keys' } });
    assert.equal(answer.status, 400);
    assert.deepEqual(answer.status === 400 && answer.body.detail, { field: 'id', reason: 'the endpoint id must be a UUID' });
  });

  it('answers an empty body as undefined (204)', async () => {
    const created = await apiCall(user, 'post', '/v1/endpoints/ephemeral', { body: {} });
    const uuid = created.status === 201 ? created.body.uuid : '';
    const deleted = await apiCall(user, 'delete', '/v1/endpoints/{id}', { params: { id: uuid } });
    assert.equal(deleted.status, 204);
    assert.equal(deleted.body, undefined);
  });

  it('calls a public operation without a key, and a keyed one without a key is 401', async () => {
    const anonymous = { baseUrl: t.controlUrl };
    const registration = await apiCall(anonymous, 'post', '/v1/rbac/registrations', { body: { endpoint_id: 'not-a-uuid' } });
    assert.notEqual(registration.status, 401);
    assert.equal(registration.status, 400);

    const keyed = await apiCall(anonymous, 'get', '/v1/endpoints', {});
    assert.equal(keyed.status, 401);
  });

  it('rejects when the signal aborts', async () => {
    await assert.rejects(apiCall(user, 'get', '/v1/endpoints', { signal: AbortSignal.abort() }), { name: 'AbortError' });
  });
});

/** Never run: the type-checker (`npm run typecheck`, CI) fails when one of these calls off the document compiles. */
export async function callsOffTheDocumentDoNotCompile(target: ApiTarget): Promise<void> {
  // @ts-expect-error a path parameter is missing
  await apiCall(target, 'get', '/v1/endpoints/{id}', {});
  // @ts-expect-error the path has no PUT
  await apiCall(target, 'put', '/v1/endpoints', {});
  // @ts-expect-error a field the body does not have
  await apiCall(target, 'post', '/v1/endpoints/ephemeral', { body: { nope: 1 } });
  // @ts-expect-error a body where the operation takes none
  await apiCall(target, 'get', '/v1/endpoints', { body: {} });
  // @ts-expect-error a query parameter the operation does not have
  await apiCall(target, 'get', '/v1/endpoints', { query: { pages: '1' } });
  // @ts-expect-error the required body is missing
  await apiCall(target, 'post', '/v1/applications/{uuid}/agent-events', { params: { uuid: 'x' } });
  const answer = await apiCall(target, 'post', '/v1/endpoints/ephemeral', { body: {} });
  // @ts-expect-error an undeclared status's body is unknown
  if (answer.status === 502) void answer.body.code;
  // @ts-expect-error the 201 body is the endpoint, not an error
  if (answer.status === 201) void answer.body.code;
}
