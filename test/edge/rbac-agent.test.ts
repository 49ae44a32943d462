// RBAC end to end with a real agent: the program configured through its control API (two roles, read-only and admin,
// and clients with basic credentials, memberships), a real agent in front of a local service, visitors checked with
// plain requests on the edge's HTTP listener. What the roles decide (methods, paths, priority, normalised paths), what
// the agent receives (the role's headers, X-Edge-Rbac-*), changes from the next request, the per-role rate limit.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import { edgeCaughtUp, expectBody, type User } from '../helpers/endpoint-api.ts';
import { visit, type Reply } from '../helpers/http.ts';
import { startEchoService, type Echoed, type LocalService } from '../helpers/local-service.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const codeOf = (r: Reply) => r.headers['x-edge-error'];
const PASSWORD = { reader: 'reader-password-1', admin: 'admin-password-1', metered: 'metered-password-1' } as const;

describe('RBAC with a real agent: two roles, clients, memberships', () => {
  let t: TestNode;
  let user: User;
  let agent: Agent;
  let service: LocalService<Echoed>;
  let host: string;
  let uuid: string;
  let httpPort: number;
  const roles: Record<'readOnly' | 'admin' | 'metered', number> = {} as never;
  const clients: Record<'reader' | 'admin' | 'metered', number> = {} as never;

  const api = (method: string, path: string, body?: unknown, expect = 200) => expectBody(expect, t.api(method, path, { key: user.api_key, body }), `${method} ${path}`);
  const as = (who: keyof typeof PASSWORD, path: string, method = 'GET', headers: Record<string, string> = {}) =>
    visit(httpPort, host, path, { method, headers: { accept: 'application/json', authorization: basic(who, PASSWORD[who]), ...headers }, body: method === 'POST' ? '{}' : undefined });
  const membership = (method: 'POST' | 'DELETE', client: number, role: number) => api(method, `/v1/endpoints/${uuid}/rbac/memberships`, { client_id: client, role_id: role });

  before(async () => {
    service = await startEchoService();
    t = await startTestNode();
    user = await t.createUser('business');
    httpPort = t.node.edge!.httpPort;
    const endpoint = await api('POST', '/v1/endpoints', {}, 201);
    uuid = endpoint.uuid;
    host = endpoint.hostname;
    // Basic mode needs one settings user; with RBAC on it reaches nothing (it is no client).
    await api('PUT', `/v1/endpoints/${uuid}/settings`, { mode: 'basic', basic_users: [{ username: 'owner', password: 'owner-password-1' }] });
    const role = async (body: unknown) => ((await api('POST', `/v1/endpoints/${uuid}/rbac/roles`, body, 201)) as { id: number }).id;
    roles.readOnly = await role({
      name: 'read-only',
      priority: 10,
      permissions: { allowed_methods: ['GET', 'HEAD'], allowed_paths: ['/*'], denied_paths: ['/admin/*'], headers: { 'x-team-role': 'read-only' } },
    });
    roles.admin = await role({ name: 'admin', priority: 100, permissions: { allowed_methods: ['*'], allowed_paths: ['/*'], headers: { 'x-team-role': 'admin' } } });
    roles.metered = await role({ name: 'metered', priority: 5, permissions: { allowed_methods: ['GET'], allowed_paths: ['/*'], rate_limit_rps: 1 } });
    for (const who of ['reader', 'admin', 'metered'] as const) {
      const c = await api('POST', `/v1/endpoints/${uuid}/rbac/clients`, { identifier: `${who}@example.com`, username: who, password: PASSWORD[who] });
      clients[who] = c.id;
    }
    await membership('POST', clients.reader, roles.readOnly);
    // The admin client holds both roles: admin's higher priority decides wherever both have an opinion.
    await membership('POST', clients.admin, roles.readOnly);
    await membership('POST', clients.admin, roles.admin);
    await membership('POST', clients.metered, roles.metered);
    await edgeCaughtUp(t);
    agent = await startAgent({ edgeUrl: `http://127.0.0.1:${httpPort}`, apiKey: user.api_key, endpoint: uuid, protocol: 'http', target: service.port });
  });
  after(async () => {
    await agent?.stop();
    await t?.close();
    await service?.close();
  });

  it('lets the reader GET, stamping the role’s headers and the client and roles for the agent (visitor copies stripped)', async () => {
    const r = await as('reader', '/reports?week=3', 'GET', { 'x-edge-rbac-client': 'admin@example.com', 'X-Edge-Rbac-Roles': 'admin' });
    assert.equal(r.status, 200, r.body);
    const seen = JSON.parse(r.body) as Echoed;
    assert.equal(seen.url, '/reports?week=3');
    assert.equal(seen.headers['x-team-role'], 'read-only');
    assert.equal(seen.headers['x-edge-rbac-client'], 'reader@example.com');
    assert.equal(seen.headers['x-edge-rbac-roles'], 'read-only');
    assert.equal(seen.headers.authorization, undefined, 'the credential is not forwarded');
  });

  it('refuses the reader a POST and /admin (also spelled /%61dmin, /x/../admin, //admin), with 403 rbac_forbidden', async () => {
    const before = service.seen.length;
    const post = await as('reader', '/reports', 'POST');
    assert.equal(post.status, 403);
    assert.equal(codeOf(post), 'rbac_forbidden');
    for (const path of ['/admin/users', '/%61dmin/users', '/x/../admin/users', '//admin/users']) {
      const r = await as('reader', path);
      assert.equal(r.status, 403, path);
      assert.equal(JSON.parse(r.body).code, 'rbac_forbidden');
    }
    const html = await visit(httpPort, host, '/admin/users', { headers: { accept: 'text/html', authorization: basic('reader', PASSWORD.reader) } });
    assert.equal(html.status, 403);
    assert.match(String(html.headers['content-type']), /text\/html/);
    assert.equal(service.seen.length, before, 'nothing reached the agent');
  });

  it('lets the admin POST and reach /admin: the higher-priority role decides over the read-only one', async () => {
    const post = await as('admin', '/reports', 'POST');
    assert.equal(post.status, 200, post.body);
    const seen = JSON.parse(post.body) as Echoed;
    assert.equal(seen.method, 'POST');
    assert.equal(seen.headers['x-team-role'], 'admin');
    assert.equal(seen.headers['x-edge-rbac-roles'], 'admin,read-only');
    const adminPath = await as('admin', '/x/../admin/users');
    assert.equal(adminPath.status, 200);
    assert.equal((JSON.parse(adminPath.body) as Echoed).url, '/admin/users', 'the agent receives the path that was judged');
  });

  it('refuses a settings user (no client) and a wrong password', async () => {
    const owner = await visit(httpPort, host, '/', { headers: { accept: 'application/json', authorization: basic('owner', 'owner-password-1') } });
    assert.equal(owner.status, 403);
    assert.equal(codeOf(owner), 'rbac_not_a_client');
    const wrong = await visit(httpPort, host, '/', { headers: { accept: 'application/json', authorization: basic('reader', 'nope') } });
    assert.equal(wrong.status, 401);
  });

  it('applies a removed membership from the next request: the client still authenticates, with no grants (403)', async () => {
    assert.equal((await as('admin', '/reports', 'POST')).status, 200);
    const list = (await membership('DELETE', clients.admin, roles.admin)) as Array<{ client_id: number; role_id: number }>;
    assert.ok(!list.some((m) => m.client_id === clients.admin && m.role_id === roles.admin));
    await edgeCaughtUp(t);
    const post = await as('admin', '/reports', 'POST');
    assert.equal(post.status, 403);
    assert.equal(codeOf(post), 'rbac_forbidden');
    assert.equal((await as('admin', '/reports')).status, 200, 'what read-only allows still works');
    // Removing the last one leaves no grant at all; removing a missing pair is still 200 with the list unchanged.
    await membership('DELETE', clients.admin, roles.readOnly);
    const unchanged = await membership('DELETE', clients.admin, roles.readOnly);
    assert.ok(Array.isArray(unchanged));
    await edgeCaughtUp(t);
    const none = await as('admin', '/reports');
    assert.equal(none.status, 403);
    assert.equal(codeOf(none), 'rbac_forbidden');
    await membership('POST', clients.admin, roles.admin);
    await edgeCaughtUp(t);
    assert.equal((await as('admin', '/reports', 'POST')).status, 200, 'given back, admitted again');
  });

  it('refuses a revoked client from the next request (403 rbac_client_inactive)', async () => {
    const extra = await api('POST', `/v1/endpoints/${uuid}/rbac/clients`, { identifier: 'temp@example.com', username: 'temp', password: 'temp-password-1' });
    await membership('POST', extra.id, roles.readOnly);
    await edgeCaughtUp(t);
    const ok = await visit(httpPort, host, '/', { headers: { accept: 'application/json', authorization: basic('temp', 'temp-password-1') } });
    assert.equal(ok.status, 200, ok.body);
    await api('PUT', `/v1/endpoints/${uuid}/rbac/clients/${extra.id}`, { status: 'revoked' });
    await edgeCaughtUp(t);
    const refused = await visit(httpPort, host, '/', { headers: { accept: 'application/json', authorization: basic('temp', 'temp-password-1') } });
    assert.equal(refused.status, 403);
    assert.equal(codeOf(refused), 'rbac_client_inactive');
  });

  it('limits a client to its deciding role’s rate_limit_rps: 429 with Retry-After past the burst', async () => {
    // rate_limit_rps 1: a burst of one, then one a second. Six at once cannot all fit.
    const replies = await Promise.all(Array.from({ length: 6 }, () => as('metered', '/feed')));
    const limited = replies.filter((r) => r.status === 429);
    assert.ok(replies.some((r) => r.status === 200), 'the burst gets through');
    assert.ok(limited.length >= 1, `statuses: ${replies.map((r) => r.status).join(',')}`);
    assert.equal(codeOf(limited[0]), 'rbac_rate_limited');
    assert.ok(Number(limited[0].headers['retry-after']) >= 1);
    // Another client is not held back by it.
    assert.equal((await as('reader', '/feed')).status, 200);
  });
});
