// The rbac stage and its compiled policy from plain endpoint configs: the decision (methods, paths, priorities both
// ways, deny over allow in one role, empty roles, no opinion, `*`, `;` parameters, case), who is a client (basic and
// token credentials through the real auth stage, login sessions by identity or verified e-mail), inactive clients, the
// per-role rate limit on an injected clock, the headers stamped, and the refusal pages.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import bcrypt from 'bcrypt';
import { SessionKeys, SESSION_COOKIE, sealSession, newSessionId } from '../../../src/edge/auth/session.ts';
import { compileEndpoint } from '../../../src/edge/compile.ts';
import { runStages } from '../../../src/edge/pipeline/pipeline.ts';
import { StageMemory } from '../../../src/edge/pipeline/stage-memory.ts';
import type { Stage, StageDeps, VisitorIdentity } from '../../../src/edge/pipeline/stage.ts';
import { compilePolicy, compileRbacPathPattern, decide, JudgedPath, otherReadings, withoutPathParameters } from '../../../src/edge/rbac/policy.ts';
import { authStage } from '../../../src/edge/stages/auth.ts';
import { overriddenMethods, rbac, rbacStage, RBAC_CLIENT_HEADER, RBAC_ROLES_HEADER } from '../../../src/edge/stages/rbac.ts';
import { isEdgeOwnedHeader } from '../../../src/shared/edge-headers.ts';
import { SecretBox } from '../../../src/shared/secrets.ts';
import type { EndpointConfig, RbacConfig, RbacRoleConfig } from '../../../src/shared/snapshot.ts';
import { tokenDigest, visitorTokenKey } from '../../../src/shared/visitor-credentials.ts';
import { rbacClient as client, rbacConfig, rbacRole as role, visitorAuthConfig as authConfig } from '../../helpers/endpoint-config.ts';
import { baseEndpoint, serveStage, type StageServer } from '../../helpers/stage-server.ts';

/** One client's decision for a method and path: the deciding role's name when allowed, else `deny:<role>` / `deny`. */
function judge(roles: RbacRoleConfig[], method: string, path: string): string {
  const policy = compilePolicy(rbacConfig(roles, [client(1, 'c', roles.map((r) => r.id))]));
  const d = decide(policy.byId.get(1)!, method, path);
  return d.allowed ? d.role.name : d.role === null ? 'deny' : `deny:${d.role.name}`;
}

/** A stage that admits whoever the test names in X-Test-Visitor (JSON), then runs `next`: the rbac stage alone. */
function asVisitor(next: Stage): Stage {
  return {
    name: 'test-visitor',
    run(ctx) {
      const v = ctx.req.headers['x-test-visitor'];
      if (typeof v === 'string') ctx.visitor = JSON.parse(v) as VisitorIdentity;
      return next.run(ctx);
    },
  };
}

const visitorHeader = (v: VisitorIdentity) => ({ 'x-test-visitor': JSON.stringify(v) });
const codeOf = (r: { headers: Record<string, unknown> }) => r.headers['x-edge-error'];

describe('rbac policy', () => {
  it('is off (no stage) without rbac, with rbac null, or with no roles; on with one role', () => {
    assert.equal(rbac.compile(baseEndpoint()), null);
    assert.equal(rbac.compile(baseEndpoint({ rbac: null })), null);
    assert.equal(rbac.compile(baseEndpoint({ rbac: rbacConfig([], [client(1, 'a', [])]) })), null);
    assert.equal(rbac.compile(baseEndpoint({ rbac: rbacConfig([role(1, 'r', 0)], []) }))?.name, 'rbac');
  });

  it('fails closed on a pattern it cannot compile: the endpoint answers 503 auth_unavailable, not unguarded', () => {
    const compiled = compileEndpoint(baseEndpoint({ rbac: rbacConfig([role(1, 'r', 0, { allowed_paths: ['admin'] })], []) }));
    assert.match(compiled.failure!, /^rbac: /);
    assert.equal(compiled.stages.length, 1);
  });

  it('patterns: exact, the prefix form /x/*, globs with * and **; case-sensitive; on segment boundaries', () => {
    const m = (pattern: string, path: string) => compileRbacPathPattern(pattern)(new JudgedPath(path));
    assert.ok(m('/admin', '/admin'));
    assert.ok(!m('/admin', '/admin/'));
    assert.ok(!m('/admin', '/ADMIN'), 'case-sensitive');
    for (const p of ['/api', '/api/', '/api/v1', '/api/v1/x']) assert.ok(m('/api/*', p), p);
    assert.ok(!m('/api/*', '/apix'));
    assert.ok(!m('/api/*', '/ap'));
    assert.ok(m('/*', '/anything/at/all'));
    assert.ok(m('/files/*/raw', '/files/a.txt/raw'));
    assert.ok(!m('/files/*/raw', '/files/a/b/raw'));
    assert.ok(m('/a/**/b', '/a/b') && m('/a/**/b', '/a/x/y/b') && !m('/a/**/b', '/a/x/c'));
    assert.ok(m('/api/**', '/api') && m('/api/**', '/api/x/y') && !m('/api/**', '/apix'));
    assert.ok(m('/v*/users', '/v2/users') && !m('/v*/users', '/x2/users'));
    // The canonical form: an escape of an unreserved character decoded, as the judged path is.
    assert.ok(m('/%61dmin', '/admin'));
    assert.throws(() => compileRbacPathPattern('admin'), /must start with/);
    assert.throws(() => compileRbacPathPattern('/a/../b'), /dot segments/);
  });

  it('allows what a role allows: methods and paths together, or either alone when the other list is empty', () => {
    const both = [role(1, 'both', 0, { allowed_methods: ['GET', 'HEAD'], allowed_paths: ['/api/*'] })];
    assert.equal(judge(both, 'GET', '/api/x'), 'both');
    assert.equal(judge(both, 'POST', '/api/x'), 'deny', 'method outside the list: no opinion');
    assert.equal(judge(both, 'GET', '/admin'), 'deny', 'path outside the list: no opinion');
    const methodsOnly = [role(1, 'reader', 0, { allowed_methods: ['GET'] })];
    assert.equal(judge(methodsOnly, 'GET', '/anything'), 'reader');
    assert.equal(judge(methodsOnly, 'PUT', '/anything'), 'deny');
    const pathsOnly = [role(1, 'docs', 0, { allowed_paths: ['/docs/*'] })];
    assert.equal(judge(pathsOnly, 'DELETE', '/docs/a'), 'docs');
    assert.equal(judge(pathsOnly, 'GET', '/doc'), 'deny');
    const any = [role(1, 'any', 0, { allowed_methods: ['*'], allowed_paths: ['/x'] })];
    assert.equal(judge(any, 'PURGE', '/x'), 'any', '`*` is any method');
    assert.equal(judge(any, 'GET', '/y'), 'deny');
  });

  it('denies what a role denies: a denied method on every path, a denied path for every method', () => {
    const r = [role(1, 'ops', 0, { allowed_methods: ['*'], denied_methods: ['DELETE'], denied_paths: ['/admin/*'] })];
    assert.equal(judge(r, 'GET', '/x'), 'ops');
    assert.equal(judge(r, 'DELETE', '/x'), 'deny:ops');
    assert.equal(judge(r, 'GET', '/admin'), 'deny:ops');
    assert.equal(judge(r, 'GET', '/admin/users'), 'deny:ops');
    assert.equal(judge([role(1, 'nothing-but', 0, { denied_methods: ['*'] })], 'GET', '/'), 'deny:nothing-but');
  });

  it('a deny beats an allow in the same role', () => {
    const r = [role(1, 'mixed', 0, { allowed_methods: ['GET'], allowed_paths: ['/api/*'], denied_paths: ['/api/secret'] })];
    assert.equal(judge(r, 'GET', '/api/public'), 'mixed');
    assert.equal(judge(r, 'GET', '/api/secret'), 'deny:mixed');
  });

  it('the higher-priority role with an opinion decides, both ways; ties go to the lower role id', () => {
    const admin = (priority: number) => role(1, 'admin', priority, { allowed_methods: ['*'], allowed_paths: ['/*'] });
    const noAdmin = (priority: number) => role(2, 'no-admin', priority, { denied_paths: ['/admin/*'] });
    // The allow ranks higher: it decides.
    assert.equal(judge([noAdmin(10), admin(20)], 'GET', '/admin/x'), 'admin');
    // The deny ranks higher: it decides.
    assert.equal(judge([admin(10), noAdmin(20)], 'GET', '/admin/x'), 'deny:no-admin');
    // A role without an opinion on the request is passed over, whatever its priority.
    assert.equal(judge([admin(10), noAdmin(20)], 'GET', '/public'), 'admin');
    // Equal priorities: the lower id first (here the allow, id 1).
    assert.equal(judge([noAdmin(5), admin(5)], 'GET', '/admin/x'), 'admin');
    assert.equal(judge([role(3, 'deny-first', 5, { denied_paths: ['/*'] }), role(4, 'allow-second', 5, { allowed_paths: ['/*'] })], 'GET', '/a'), 'deny:deny-first');
  });

  it('an empty role grants nothing; no role with an opinion, or no role at all, is a refusal', () => {
    assert.equal(judge([role(1, 'empty', 100)], 'GET', '/'), 'deny');
    assert.equal(judge([role(1, 'empty', 100), role(2, 'reader', 1, { allowed_methods: ['GET'] })], 'GET', '/'), 'reader', 'passed over: no opinion');
    assert.equal(judge([], 'GET', '/'), 'deny');
    assert.equal(judge([role(1, 'reader', 1, { allowed_methods: ['GET'] })], 'POST', '/'), 'deny');
  });

  it('paths with ; parameters: the path without them is judged too, and both must be allowed', () => {
    assert.equal(withoutPathParameters('/admin;x/y'), '/admin/y');
    assert.equal(withoutPathParameters('/a;b=c'), '/a');
    assert.equal(withoutPathParameters('/;jsessionid=1/admin'), '/admin', 'a segment that was only parameters leaves no empty segment');
    assert.equal(withoutPathParameters('/plain'), null);
    assert.equal(withoutPathParameters('/a;b;c/d;e/f'), '/a/d/f');
    assert.equal(withoutPathParameters('/a/b;x/'), '/a/b/');
    const r = [role(1, 'public', 0, { allowed_methods: ['GET'] }), role(2, 'no-admin', 10, { denied_paths: ['/admin/*'] })];
    assert.equal(judge(r, 'GET', '/admin;x/users'), 'deny:no-admin', 'Tomcat reads /admin/users');
    assert.equal(judge(r, 'GET', '/;x/admin'), 'deny:no-admin');
    assert.equal(judge(r, 'GET', '/cars;color=red'), 'public', 'matrix parameters elsewhere pass');
    // Allowed only with the parameters: the bare path is not allowed, so neither is the request.
    assert.equal(judge([role(1, 'odd', 0, { allowed_paths: ['/a;b'] })], 'GET', '/a;b'), 'deny');
  });

  it('denied paths match without regard to case or a final slash (routers serve /ADMIN and /admin/ as /admin); allowed paths stay exact', () => {
    const r = [role(1, 'public', 0, { allowed_methods: ['GET'] }), role(2, 'no-admin', 10, { denied_paths: ['/admin/*', '/files/*.PDF', '/caf%C3%A9'] })];
    for (const path of ['/ADMIN', '/Admin/users', '/aDmIn/x/y', '/files/report.pdf', '/FILES/x.Pdf', '/CAF%C3%A9']) assert.equal(judge(r, 'GET', path), 'deny:no-admin', path);
    assert.equal(judge(r, 'GET', '/administrator'), 'public', 'still on segment boundaries');
    // A final slash too (Express and most routers serve /admin/ as /admin unless told to be strict), both ways.
    const exact = [role(1, 'public', 0, { allowed_methods: ['GET'] }), role(2, 'no-admin', 10, { denied_paths: ['/admin', '/settings/'] })];
    for (const path of ['/admin', '/admin/', '/ADMIN/', '/settings', '/settings/']) assert.equal(judge(exact, 'GET', path), 'deny:no-admin', path);
    for (const path of ['/', '/admin/x', '/adminx']) assert.equal(judge(exact, 'GET', path), 'public', path);
    assert.equal(judge([role(1, 'root', 0, { allowed_methods: ['GET'] }), role(2, 'no-root', 10, { denied_paths: ['/'] })], 'GET', '/x'), 'root', '/ denies / only');
    const allow = [role(1, 'api', 0, { allowed_paths: ['/api/*'] })];
    assert.equal(judge(allow, 'GET', '/api/x'), 'api');
    assert.equal(judge(allow, 'GET', '/API/x'), 'deny', 'an allowed pattern grants the case written only');
  });

  it('a role that denies GET denies HEAD too (servers answer HEAD with the GET handler)', () => {
    const r = [role(1, 'all', 0, { allowed_methods: ['*'] }), role(2, 'no-get', 10, { denied_methods: ['GET'] })];
    assert.equal(judge(r, 'GET', '/x'), 'deny:no-get');
    assert.equal(judge(r, 'HEAD', '/x'), 'deny:no-get');
    assert.equal(judge(r, 'POST', '/x'), 'all');
    // Denying HEAD alone leaves GET alone.
    assert.equal(judge([role(1, 'all', 0, { allowed_methods: ['*'] }), role(2, 'no-head', 10, { denied_methods: ['HEAD'] })], 'GET', '/x'), 'all');
  });

  it('paths with %2F: the path with it read as / is judged too (Go, WSGI and CGI servers decode it before routing); both must be allowed', () => {
    assert.deepEqual(otherReadings('/plain/path'), []);
    assert.deepEqual(otherReadings('/admin%2Fusers'), ['/admin/users']);
    assert.deepEqual(otherReadings('/public/..%2Fadmin'), ['/admin'], 'dot segments resolved after decoding');
    assert.deepEqual(otherReadings('/a%2F;x/b'), ['/a/;x/b', '/a%2F/b', '/a/b']);
    const r = [role(1, 'public', 0, { allowed_methods: ['GET'] }), role(2, 'no-admin', 10, { denied_paths: ['/admin/*'] })];
    assert.equal(judge(r, 'GET', '/admin%2Fusers'), 'deny:no-admin');
    assert.equal(judge(r, 'GET', '/public/..%2Fadmin'), 'deny:no-admin');
    assert.equal(judge(r, 'GET', '/%2Fadmin'), 'deny:no-admin');
    assert.equal(judge(r, 'GET', '/repos/group%2Fproject'), 'public', 'an encoded slash elsewhere passes');
    // Allowed only as one segment: the decoded reading is not allowed, so neither is the request.
    assert.equal(judge([role(1, 'files', 0, { allowed_paths: ['/files/*'] }), role(2, 'x', 5, { denied_paths: ['/files/*/*'] })], 'GET', '/files/a%2Fb'), 'deny:x');
  });

  it('compiles each role once for every client that holds it; roles a client names that do not exist grant nothing', () => {
    const policy = compilePolicy(
      rbacConfig(
        [role(1, 'reader', 1, { allowed_methods: ['GET'] }), role(2, 'writer', 2, { allowed_methods: ['POST'] })],
        [client(1, 'a', [1, 2]), client(2, 'b', [2, 1, 99])],
      ),
    );
    const [a, b] = [policy.byId.get(1)!, policy.byId.get(2)!];
    assert.equal(a.roles[0], b.roles[0], 'the same compiled role');
    assert.deepEqual(b.roles.map((r) => r.name), ['writer', 'reader']);
    assert.equal(b.roleNames, 'writer,reader');
  });
});

describe('rbac stage', () => {
  const servers: StageServer[] = [];
  after(() => Promise.all(servers.map((s) => s.close())));
  const serve = async (stage: Stage, endpoint: EndpointConfig) => {
    const s = await serveStage(stage, endpoint);
    servers.push(s);
    return s;
  };

  const reader = role(1, 'reader', 10, { allowed_methods: ['GET', 'HEAD'], headers: { 'x-role': 'reader' } });
  const admin = role(2, 'admin', 20, { allowed_methods: ['*'], allowed_paths: ['/admin/*'], headers: { 'x-role': 'admin', 'x-admin': '1' }, rate_limit_rps: 0 });
  const clients = [
    client(1, 'alice', [1, 2], { email: 'alice@example.com', identities: [{ provider: '7', subject: 'sub-alice' }] }),
    client(2, 'bob', [1], { email: 'bob@example.com' }),
    client(3, 'carol', [1], { status: 'disabled' }),
    client(4, 'dave', []),
    client(5, 'eve', [1], { status: 'revoked' }),
  ];
  const endpoint = (over: Partial<RbacConfig> = {}, roles = [reader, admin]) => baseEndpoint({ rbac: rbacConfig(roles, clients, over) });

  it('stamps the deciding role headers, the client and its roles by priority; refuses what no role allows', async () => {
    const e = endpoint();
    const s = await serve(asVisitor(rbac.compile(e)!), e);
    const alice = visitorHeader({ kind: 'basic', name: 'alice', clientId: 1 });
    const r = await s.request({ path: '/reports', headers: alice });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.passed!.upstreamHeaders, { 'x-role': 'reader', [RBAC_CLIENT_HEADER]: 'alice', [RBAC_ROLES_HEADER]: 'admin,reader' });
    const a = await s.request({ method: 'DELETE', path: '/admin/users/3', headers: alice });
    assert.deepEqual(a.passed!.upstreamHeaders, { 'x-role': 'admin', 'x-admin': '1', [RBAC_CLIENT_HEADER]: 'alice', [RBAC_ROLES_HEADER]: 'admin,reader' });
    const bob = visitorHeader({ kind: 'token', name: 'bob token', clientId: 2 });
    const denied = await s.request({ method: 'DELETE', path: '/admin/users/3', headers: bob });
    assert.equal(denied.status, 403);
    assert.equal(codeOf(denied), 'rbac_forbidden');
    assert.equal(JSON.parse(denied.text).code, 'rbac_forbidden');
    assert.match(JSON.parse(denied.text).detail, /no role of this client allows it/);
    const html = await s.request({ method: 'POST', path: '/x', headers: { ...bob, accept: 'text/html' } });
    assert.equal(html.status, 403);
    assert.match(String(html.headers['content-type']), /^text\/html/);
    assert.match(html.text, /rbac_forbidden/);
    assert.equal(codeOf(html), 'rbac_forbidden');
  });

  it('judges the methods that override fields and a _method parameter name: each must be allowed too', async () => {
    assert.deepEqual(overriddenMethods({}, ''), []);
    assert.deepEqual(overriddenMethods({ 'x-http-method-override': 'delete', 'x-http-method': ' PUT , patch', 'x-method-override': 'GET' }, 'a=1&_method=post'), [
      'DELETE',
      'PUT',
      'PATCH',
      'GET',
      'POST',
    ]);
    const e = endpoint();
    const s = await serve(asVisitor(rbac.compile(e)!), e);
    const bob = visitorHeader({ kind: 'basic', name: 'bob', clientId: 2 });
    for (const [name, headers, path] of [
      ['X-HTTP-Method-Override', { 'x-http-method-override': 'DELETE' }, '/reports'],
      ['X-HTTP-Method, lower case', { 'x-http-method': 'delete' }, '/reports'],
      ['X-Method-Override, second item', { 'x-method-override': 'GET, DELETE' }, '/reports'],
      ['_method in the query', {}, '/reports?_method=DELETE'],
    ] as const) {
      const r = await s.request({ method: 'GET', path, headers: { ...bob, ...headers } });
      assert.equal(r.status, 403, `${name}: ${r.text}`);
      assert.equal(codeOf(r), 'rbac_forbidden', name);
      assert.match(JSON.parse(r.text).detail, /overridden as/, name);
    }
    // Overrides naming allowed methods pass, and reach the service as sent.
    const ok = await s.request({ method: 'GET', path: '/reports?_method=HEAD', headers: { ...bob, 'x-http-method-override': 'GET' } });
    assert.equal(ok.status, 200, ok.text);
    const alice = visitorHeader({ kind: 'basic', name: 'alice', clientId: 1 });
    assert.equal((await s.request({ method: 'POST', path: '/admin/x', headers: { ...alice, 'x-http-method-override': 'DELETE' } })).status, 200);
    assert.equal((await s.request({ method: 'GET', path: '/reports', headers: { ...alice, 'x-http-method-override': 'DELETE' } })).status, 403);
  });

  it('names the client a session maps to in ctx.rbacClientId, for capture', async () => {
    const e = endpoint();
    const inner = rbac.compile(e)!;
    const noting: Stage = {
      name: 'noting',
      run(ctx) {
        const v = inner.run(ctx) as 'next' | 'done';
        if (v === 'next') ctx.upstreamHeaders['x-test-client-id'] = String(ctx.rbacClientId);
        return v;
      },
    };
    const s = await serve(asVisitor(noting), e);
    const r = await s.request({ path: '/reports', headers: visitorHeader({ kind: 'session', provider: '7', subject: 'sub-alice', email: null }) });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.passed!.upstreamHeaders['x-test-client-id'], '1');
  });

  it('a client with no roles left still authenticates but is granted nothing (403)', async () => {
    const e = endpoint();
    const s = await serve(asVisitor(rbac.compile(e)!), e);
    const r = await s.request({ headers: visitorHeader({ kind: 'basic', name: 'dave', clientId: 4 }) });
    assert.equal(r.status, 403);
    assert.equal(codeOf(r), 'rbac_forbidden');
  });

  it('refuses clients that are not active: rbac_client_inactive', async () => {
    const e = endpoint();
    const s = await serve(asVisitor(rbac.compile(e)!), e);
    for (const id of [3, 5]) {
      const r = await s.request({ headers: visitorHeader({ kind: 'basic', name: 'x', clientId: id }) });
      assert.equal(r.status, 403);
      assert.equal(codeOf(r), 'rbac_client_inactive');
    }
  });

  it('refuses visitors that are no client: none, settings users and tokens, an unknown client, an unknown login', async () => {
    const e = endpoint();
    const s = await serve(asVisitor(rbac.compile(e)!), e);
    const visitors: Array<VisitorIdentity | null> = [
      null,
      { kind: 'basic', name: 'settings-user' },
      { kind: 'token', name: 'api key' },
      { kind: 'basic', name: 'ghost', clientId: 404 },
      { kind: 'session', provider: '7', subject: 'nobody', email: null },
      { kind: 'session', provider: '8', subject: 'sub-alice', email: null },
      { kind: 'session', provider: '7', subject: 'x', email: 'stranger@example.com' },
    ];
    for (const v of visitors) {
      const r = await s.request({ headers: v === null ? {} : visitorHeader(v) });
      assert.equal(r.status, 403, JSON.stringify(v));
      assert.equal(codeOf(r), 'rbac_not_a_client', JSON.stringify(v));
      assert.equal(JSON.parse(r.text).link, undefined, 'self-registration is off: no link');
    }
  });

  it('with self-registration on, a logged-in visitor who is no client is offered the registration page', async () => {
    const e = endpoint({ self_registration: { enabled: true, allowed_email_domains: [] } });
    const s = await serve(asVisitor(rbac.compile(e)!), e);
    const stranger = visitorHeader({ kind: 'session', provider: '7', subject: 'x', email: 'stranger@example.com' });
    const html = await s.request({ headers: { ...stranger, accept: 'text/html' } });
    assert.equal(html.status, 403);
    assert.ok(html.text.includes(`<a href="/register?endpoint=${e.uuid}">`), html.text);
    const json = await s.request({ headers: stranger });
    assert.equal(JSON.parse(json.text).link, `/register?endpoint=${e.uuid}`);
    // A basic visitor cannot register through a login: no link.
    const basic = await s.request({ headers: { ...visitorHeader({ kind: 'basic', name: 'u' }), accept: 'text/html' } });
    assert.ok(!basic.text.includes('/register'));
  });

  it('maps a login session by its linked identity first, else by its verified e-mail (any case)', async () => {
    const e = endpoint();
    const s = await serve(asVisitor(rbac.compile(e)!), e);
    const client = async (v: VisitorIdentity) => (await s.request({ headers: visitorHeader(v) })).passed?.upstreamHeaders[RBAC_CLIENT_HEADER];
    assert.equal(await client({ kind: 'session', provider: '7', subject: 'sub-alice', email: null }), 'alice');
    // The identity wins over an e-mail that names another client.
    assert.equal(await client({ kind: 'session', provider: '7', subject: 'sub-alice', email: 'bob@example.com' }), 'alice');
    assert.equal(await client({ kind: 'session', provider: '9', subject: 'whoever', email: 'Bob@Example.COM' }), 'bob');
  });

  it('limits a client to the deciding role rate on an injected clock: 429 with Retry-After, then allowed once time moves', async () => {
    let now = 1_000_000;
    const limited = role(1, 'limited', 10, { allowed_methods: ['GET'], rate_limit_rps: 2 });
    const unlimited = role(2, 'writer', 5, { allowed_methods: ['POST'] });
    const e = baseEndpoint({ rbac: rbacConfig([limited, unlimited], [client(1, 'alice', [1, 2]), client(2, 'bob', [1])]) });
    const memory = new StageMemory();
    const deps: StageDeps = { publicHttpsPort: () => 443, memory };
    const factory = rbacStage({ now: () => now });
    const s = await serve(asVisitor(factory.compile(e, deps)!), e);
    const alice = visitorHeader({ kind: 'basic', name: 'alice', clientId: 1 });
    const bob = visitorHeader({ kind: 'basic', name: 'bob', clientId: 2 });
    assert.equal((await s.request({ headers: alice })).status, 200);
    assert.equal((await s.request({ headers: alice })).status, 200);
    const over = await s.request({ headers: alice });
    assert.equal(over.status, 429);
    assert.equal(codeOf(over), 'rbac_rate_limited');
    assert.equal(over.headers['retry-after'], '1');
    assert.equal((await s.request({ method: 'POST', headers: alice })).status, 200, 'a request another role decides is not limited by this one');
    assert.equal((await s.request({ headers: bob })).status, 200, 'another client has its own bucket');
    // A recompile with the client's roles unchanged keeps the bucket (no reset by touching the config).
    s.stage = asVisitor(factory.compile(baseEndpoint({ ...e, rbac: { ...e.rbac!, invites: [] } }), deps)!);
    assert.equal((await s.request({ headers: alice })).status, 429);
    now += 500;
    assert.equal((await s.request({ headers: alice })).status, 200, 'half a second refills one request at 2/s');
    assert.equal((await s.request({ headers: alice })).status, 429);
    now += 1000;
    assert.equal((await s.request({ headers: alice })).status, 200);
    assert.equal((await s.request({ headers: alice })).status, 200);
    assert.equal((await s.request({ headers: alice })).status, 429);
    // A new rate for the role: the client's bucket starts afresh at the new rate.
    const faster = baseEndpoint({ rbac: rbacConfig([role(1, 'limited', 10, { allowed_methods: ['GET'], rate_limit_rps: 3 }), unlimited], e.rbac!.clients) });
    s.stage = asVisitor(factory.compile(faster, deps)!);
    for (let i = 0; i < 3; i++) assert.equal((await s.request({ headers: alice })).status, 200, `request ${i} at 3/s`);
    assert.equal((await s.request({ headers: alice })).status, 429);
  });

  it('leaves out role headers the edge owns or that frame the request, so X-Edge-Rbac-* always say what the edge decided', async () => {
    const sneaky = role(1, 'sneaky', 0, {
      allowed_methods: ['GET'],
      headers: { 'x-edge-rbac-client': 'root', 'x_edge_rbac_roles': 'admin', host: 'evil', 'content-length': '0', 'x-ok': 'yes', 'x-bad': 'a\r\nb' },
    });
    const e = baseEndpoint({ rbac: rbacConfig([sneaky], [client(1, 'alice', [1])]) });
    const s = await serve(asVisitor(rbac.compile(e)!), e);
    const r = await s.request({ headers: visitorHeader({ kind: 'basic', name: 'alice', clientId: 1 }) });
    assert.deepEqual(r.passed!.upstreamHeaders, { 'x-ok': 'yes', [RBAC_CLIENT_HEADER]: 'alice', [RBAC_ROLES_HEADER]: 'sneaky' });
    // Visitor copies of the fields are stripped in every spelling by the edge-owned namespace rule.
    for (const name of ['X-Edge-Rbac-Client', 'x_edge_rbac_roles', 'X-EDGE-RBAC-ROLES']) assert.ok(isEdgeOwnedHeader(name), name);
  });

  it('role names outside printable ASCII, or with a comma, are percent-encoded in X-Edge-Rbac-Roles', async () => {
    const e = baseEndpoint({ rbac: rbacConfig([role(1, 'lecteur, été', 1, { allowed_methods: ['GET'] }), role(2, 'ops team', 2)], [client(1, 'zoë@example.com', [1, 2])]) });
    const s = await serve(asVisitor(rbac.compile(e)!), e);
    const r = await s.request({ headers: visitorHeader({ kind: 'basic', name: 'z', clientId: 1 }) });
    assert.equal(r.passed!.upstreamHeaders[RBAC_ROLES_HEADER], `ops team,${encodeURIComponent('lecteur, été')}`);
    assert.equal(r.passed!.upstreamHeaders[RBAC_CLIENT_HEADER], '"zo\\u00eb@example.com"', 'the identifier as the auth fields carry non-ASCII');
  });

  describe('behind the real auth stage', () => {
    const box = new SecretBox('rbac-stage-test-secret');
    /** auth then rbac, compiled as the edge compiles them. */
    const pipeline = (e: EndpointConfig, deps: StageDeps): Stage => {
      const stages = [authStage().compile(e, deps)!, rbacStage().compile(e, deps)!];
      return { name: 'auth+rbac', run: (ctx) => runStages(stages, ctx) };
    };
    const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

    it('basic: a client user is its client; a settings user is no client', async () => {
      const hash = await bcrypt.hash('pw-123456', 10);
      const e = baseEndpoint({
        auth: authConfig({ mode: 'basic', basic_users: [{ id: 'rbac-client:1', client_id: 1, username: 'alice', password_hash: hash }, { id: '9', username: 'ops', password_hash: hash }] }),
        rbac: rbacConfig([reader], [client(1, 'alice', [1])]),
      });
      const s = await serve(pipeline(e, { publicHttpsPort: () => 443, memory: new StageMemory() }), e);
      const ok = await s.request({ headers: { authorization: basic('alice', 'pw-123456') } });
      assert.equal(ok.status, 200, ok.text);
      assert.equal(ok.passed!.upstreamHeaders['x-edge-auth-user'], 'alice');
      assert.equal(ok.passed!.upstreamHeaders[RBAC_CLIENT_HEADER], 'alice');
      const settingsUser = await s.request({ headers: { authorization: basic('ops', 'pw-123456') } });
      assert.equal(settingsUser.status, 403);
      assert.equal(codeOf(settingsUser), 'rbac_not_a_client');
      assert.equal((await s.request({ method: 'POST', headers: { authorization: basic('alice', 'pw-123456') } })).status, 403);
      assert.equal((await s.request({})).status, 401, 'auth decides first');
    });

    it('token: a client token is its client; an API key is no client', async () => {
      const key = visitorTokenKey(box);
      const e = baseEndpoint({
        auth: authConfig({
          mode: 'token',
          tokens: [
            { id: 'rbac-client:2', client_id: 2, label: 'bob', digest: tokenDigest(key, 'evk_bob-token-0123456789'), expires_at: null },
            { id: 'key-1', label: 'deploy key', digest: tokenDigest(key, 'evk_api-key-0123456789'), expires_at: null },
          ],
        }),
        rbac: rbacConfig([reader], clients),
      });
      const s = await serve(pipeline(e, { publicHttpsPort: () => 443, secrets: box }), e);
      const ok = await s.request({ headers: { authorization: 'Bearer evk_bob-token-0123456789' } });
      assert.equal(ok.status, 200, ok.text);
      assert.equal(ok.passed!.upstreamHeaders[RBAC_CLIENT_HEADER], 'bob');
      const apiKey = await s.request({ headers: { authorization: 'Bearer evk_api-key-0123456789' } });
      assert.equal(codeOf(apiKey), 'rbac_not_a_client');
    });

    it('sessions: the e-mail maps to a client only when the provider said it is verified; older sessions count as unverified', async () => {
      const keys = SessionKeys.fromSettings('', box);
      const e = baseEndpoint({
        id: 77,
        auth: authConfig({
          mode: 'oidc',
          providers: [
            {
              id: 7,
              kind: 'oidc',
              name: 'OP',
              issuer: 'https://op.example',
              client_id: 'edge',
              client_secret_sealed: box.seal('secret-0123456789'),
              scopes: ['openid'],
              allowed_emails: [],
              allowed_domains: [],
              authorization_url: null,
              token_url: null,
              userinfo_url: null,
            },
          ],
          allowed_redirects: [],
        }),
        rbac: rbacConfig([reader], clients),
      });
      const s = await serve(pipeline(e, { publicHttpsPort: () => 443, secrets: box, sessions: { keys, ttlSeconds: 3600 } }), e);
      const t = Math.floor(Date.now() / 1000);
      const base = { endpoint: 77, provider: 7, subject: 'sub-bob', email: 'bob@example.com', issuedAt: t, expiresAt: t + 3600 };
      const endpointKeys = keys.forEndpoint(e.uuid);
      const cookie = (value: string) => ({ cookie: `${SESSION_COOKIE}=${value}` });
      const verified = sealSession(endpointKeys, { ...base, id: newSessionId(), emailVerified: true });
      const unknown = sealSession(endpointKeys, { ...base, id: newSessionId(), emailVerified: false });
      const old = endpointKeys.sign('session', [77, 7, 'sub-bob', 'bob@example.com', newSessionId(), t, t + 3600]);
      const ok = await s.request({ headers: cookie(verified) });
      assert.equal(ok.status, 200, ok.text);
      assert.equal(ok.passed!.upstreamHeaders[RBAC_CLIENT_HEADER], 'bob');
      for (const [name, value] of [['unverified', unknown], ['issued before verification was recorded', old]]) {
        const r = await s.request({ headers: cookie(value) });
        assert.equal(r.status, 403, name);
        assert.equal(codeOf(r), 'rbac_not_a_client', name);
      }
      // The linked identity needs no e-mail at all.
      const linked = sealSession(endpointKeys, { ...base, subject: 'sub-alice', email: '', id: newSessionId() });
      assert.equal((await s.request({ headers: cookie(linked) })).passed?.upstreamHeaders[RBAC_CLIENT_HEADER], 'alice');
    });
  });
});
