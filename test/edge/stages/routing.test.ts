// The routing stage on plain RequestContext objects: every condition type, evaluation order, disabled rules, first
// match wins, no match → no selector. The matchers themselves are tested in test/shared/match and test/edge/match.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import { routing, compileRoutingRules, selectAgents } from '../../../src/edge/stages/routing.ts';
import type { RequestContext } from '../../../src/edge/pipeline/stage.ts';
import type { EndpointConfig, RoutingConditionConfig, RoutingRuleConfig } from '../../../src/shared/snapshot.ts';

interface Req {
  method?: string;
  host?: string;
  path?: string;
  query?: string;
  clientIp?: string;
  headers?: IncomingHttpHeaders;
}

function ctx(r: Req = {}): RequestContext {
  return {
    req: { headers: r.headers ?? {} } as RequestContext['req'],
    res: {} as RequestContext['res'],
    endpoint: {} as EndpointConfig,
    method: r.method ?? 'GET',
    host: r.host ?? 'app.example.com',
    authority: r.host ?? 'app.example.com',
    path: r.path ?? '/',
    query: r.query ?? '',
    clientIp: r.clientIp ?? '192.0.2.1',
    secure: false,
    upstreamHeaders: {},
  };
}

let nextId = 1;
function rule(conditions: RoutingConditionConfig[], over: Partial<RoutingRuleConfig> = {}): RoutingRuleConfig {
  const id = over.id ?? nextId++;
  return { id, name: `r${id}`, priority: 0, enabled: true, target_agent_id: null, target_agent_tags: ['t'], target_origin_url: null, conditions, ...over };
}

const cond = (condition_type: RoutingConditionConfig['condition_type'], pattern: string, condition_key = ''): RoutingConditionConfig => ({
  condition_type,
  condition_key,
  pattern,
});

/** Whether a rule with this one condition matches the request (through the compiled rule, which supplies the facts). */
const hits = (c: RoutingConditionConfig, r: Req) => selectAgents(compileRoutingRules([rule([c])]), ctx(r)) !== undefined;
const matches = hits;

function endpoint(rules: RoutingRuleConfig[]): EndpointConfig {
  return { routing_rules: rules } as EndpointConfig;
}

/** Runs the stage the way the pipeline does and returns what it left on the context. */
function route(rules: RoutingRuleConfig[], r: Req) {
  const stage = routing.compile(endpoint(rules));
  assert.ok(stage, 'expected a routing stage');
  const c = ctx(r);
  assert.equal(stage.run(c), 'next');
  return c.selector;
}

describe('routing stage', () => {
  describe('compile', () => {
    it('is absent (null) when the endpoint has no rules or only disabled ones', () => {
      assert.equal(routing.id, 'routing');
      assert.equal(routing.compile(endpoint([])), null);
      assert.equal(routing.compile(endpoint([rule([cond('method', 'GET')], { enabled: false })])), null);
      const stage = routing.compile(endpoint([rule([cond('method', 'GET')])]));
      assert.equal(stage?.name, 'routing');
    });

    it('throws, naming the rule, on a condition the control API would never store', () => {
      assert.throws(() => routing.compile(endpoint([rule([cond('country' as never, 'FR')], { id: 77 })])), /routing rule 77.*unknown condition type "country"/);
      assert.throws(() => routing.compile(endpoint([rule([cond('source_ip', '10.0.0.0/33')])])), /invalid prefix length/);
      assert.throws(() => routing.compile(endpoint([rule([cond('path', '/a', 'regex')])])), /unknown path match mode/);
      assert.throws(() => routing.compile(endpoint([rule([])])), /no conditions/);
    });
  });

  describe('order and selection', () => {
    it('evaluates ascending priority, ties by id, whatever order the rules arrive in', () => {
      const any = [cond('path', '/', 'prefix')];
      const rules = [
        rule(any, { id: 30, name: 'late', priority: 5 }),
        rule(any, { id: 20, name: 'tie-b', priority: 1 }),
        rule(any, { id: 10, name: 'tie-a', priority: 1 }),
        rule(any, { id: 40, name: 'negative', priority: -1, enabled: false }),
      ];
      assert.equal(route(rules, {})?.rule, 'tie-a');
      assert.equal(route(rules.slice(0, 2), {})?.rule, 'tie-b');
    });

    it('skips disabled rules, and the first matching rule wins', () => {
      const rules = [
        rule([cond('path', '/api')], { id: 1, name: 'off', priority: 0, enabled: false, target_agent_id: 'off' }),
        rule([cond('method', 'POST')], { id: 2, name: 'posts', priority: 1, target_agent_id: 'writer', target_agent_tags: [] }),
        rule([cond('path', '/api')], { id: 3, name: 'api', priority: 2, target_agent_tags: ['API', 'eu'] }),
        rule([cond('path', '/')], { id: 4, name: 'rest', priority: 3, target_agent_tags: ['rest'] }),
      ];
      assert.deepEqual(route(rules, { method: 'POST', path: '/api/x' }), { rule: 'posts', agentId: 'writer' });
      assert.deepEqual(route(rules, { path: '/api/x' }), { rule: 'api', tags: ['api', 'eu'] });
      assert.deepEqual(route(rules, { path: '/other' }), { rule: 'rest', tags: ['rest'] });
    });

    it('leaves the selector unset when no rule matches', () => {
      const c = ctx({ path: '/web' });
      assert.equal(routing.compile(endpoint([rule([cond('path', '/api')])]))!.run(c), 'next');
      assert.equal(c.selector, undefined);
      assert.ok(!('selector' in c));
    });

    it('ANDs the conditions of a rule', () => {
      const both = [rule([cond('method', 'GET'), cond('header', 'yes', 'x-beta')], { name: 'beta' })];
      assert.equal(route(both, { headers: { 'x-beta': 'yes' } })?.rule, 'beta');
      assert.equal(route(both, { method: 'POST', headers: { 'x-beta': 'yes' } }), undefined);
      assert.equal(route(both, { headers: { 'x-beta': 'no' } }), undefined);
    });

    it('builds the selector once: agent id and/or lower-cased tags, the rule name (or #id when unnamed)', () => {
      const r = rule([cond('method', 'GET')], { id: 9, name: '', target_agent_id: 'a-1', target_agent_tags: [] });
      const stage = routing.compile(endpoint([r]))!;
      const [a, b] = [ctx(), ctx()];
      assert.equal(stage.run(a), 'next');
      assert.equal(stage.run(b), 'next');
      assert.deepEqual(a.selector, { rule: '#9', agentId: 'a-1' });
      assert.equal(a.selector, b.selector, 'shared, not rebuilt per request');
      assert.ok(Object.isFrozen(a.selector));
    });
    it('sends a rule with target_origin_url to its origin: the selector names the origin and no agents', () => {
      const rules = [
        rule([cond('path', '/api/**', 'glob')], { id: 1, name: 'api', target_agent_tags: [], target_origin_url: 'https://api.example.com/v2' }),
        rule([cond('path', '/')], { id: 2, name: 'rest', target_agent_tags: ['web'] }),
      ];
      assert.deepEqual(route(rules, { path: '/api/users' }), { rule: 'api', origin: 'https://api.example.com/v2' });
      assert.deepEqual(route(rules, { path: '/apiary' }), { rule: 'rest', tags: ['web'] });
      // Snapshots from before origin targets have no such field: agents, as before.
      const { target_origin_url: _absent, ...old } = rule([cond('method', 'GET')], { name: 'old', target_agent_id: 'a-1', target_agent_tags: [] });
      assert.deepEqual(route([old as RoutingRuleConfig], {}), { rule: 'old', agentId: 'a-1' });
    });

    it('refuses to compile a rule whose origin is malformed or that targets both agents and an origin', () => {
      const origin = (target_origin_url: string, over: Partial<RoutingRuleConfig> = {}) => endpoint([rule([cond('method', 'GET')], { id: 5, target_agent_tags: [], target_origin_url, ...over })]);
      assert.throws(() => routing.compile(origin('ftp://example.com')), /routing rule 5 .*target_origin_url: only http and https/);
      assert.throws(() => routing.compile(origin('https://example.com', { target_agent_tags: ['web'] })), /routing rule 5 targets both agents and an origin/);
      // Whether its address may be reached is decided when the edge connects, not here.
      assert.ok(routing.compile(origin('http://127.0.0.1:3000')));
    });
  });

  describe('conditions', () => {
    it('path prefix matches on segment boundaries', () => {
      const p = cond('path', '/api', 'prefix');
      assert.ok(matches(p, { path: '/api' }));
      assert.ok(matches(p, { path: '/api/' }));
      assert.ok(matches(p, { path: '/api/v1/users' }));
      assert.ok(!matches(p, { path: '/apix' }));
      assert.ok(!matches(p, { path: '/' }));
      assert.ok(matches(cond('path', '/api/', 'prefix'), { path: '/api/x' }));
      assert.ok(!matches(cond('path', '/api/', 'prefix'), { path: '/api' }));
      assert.ok(matches(cond('path', '/', 'prefix'), { path: '/anything/at/all' }));
      // An empty key is prefix (the control API stores it as "prefix", older rows may not).
      assert.ok(matches(cond('path', '/api'), { path: '/api/x' }));
    });

    it('path exact compares the whole normalised path, `*` included literally', () => {
      assert.ok(matches(cond('path', '/a/b', 'exact'), { path: '/a/b' }));
      assert.ok(!matches(cond('path', '/a/b', 'exact'), { path: '/a/b/' }));
      assert.ok(matches(cond('path', '/a/*', 'exact'), { path: '/a/*' }));
      assert.ok(!matches(cond('path', '/a/*', 'exact'), { path: '/a/x' }));
    });

    it('path glob: `*` is one segment’s characters, a `**` segment any depth', () => {
      const g = (pattern: string, path: string) => hits(cond('path', pattern, 'glob'), { path });
      assert.ok(g('/api/*/users', '/api/v1/users'));
      assert.ok(!g('/api/*/users', '/api/v1/x/users'));
      assert.ok(g('/api/*', '/api/'));
      assert.ok(g('/static/*.js', '/static/app.js'));
      assert.ok(!g('/static/*.js', '/static/js/app.js'));
      assert.ok(g('/static/**/*.js', '/static/app.js'));
      assert.ok(g('/static/**/*.js', '/static/js/vendor/app.js'));
      assert.ok(!g('/static/**/*.js', '/static/app.css'));
      assert.ok(g('/api/**', '/api'));
      assert.ok(g('/api/**', '/api/a/b/c'));
      assert.ok(!g('/api/**', '/apix/a'));
      assert.ok(g('/**', '/'));
      assert.ok(g('/**/health', '/health'));
      assert.ok(g('/**/health', '/a/b/health'));
      assert.ok(!g('/**/health', '/a/healthz'));
      assert.ok(g('/a/**/b/**/c', '/a/x/b/y/z/c'));
      assert.ok(!g('/a/**/b/**/c', '/a/x/c/b'));
      assert.ok(g('/v*/**/x', '/v2/q/x'));
      // `**` inside a segment is `*`: it does not cross "/".
      assert.ok(g('/a**b', '/a-x-b'));
      assert.ok(!g('/a**b', '/a/x/b'));
      assert.ok(g('/users/*/posts/*', '/users/42/posts/7'));
      assert.ok(!g('/users/*/posts/*', '/users/42/posts'));
    });

    it('method matches a comma list, upper-case', () => {
      const m = cond('method', 'GET,HEAD');
      assert.ok(matches(m, { method: 'GET' }));
      assert.ok(matches(m, { method: 'HEAD' }));
      assert.ok(!matches(m, { method: 'POST' }));
      assert.ok(matches(cond('method', 'delete'), { method: 'DELETE' }));
    });

    it('header: `*` is presence, otherwise a glob on the value; repeated values match if any does', () => {
      assert.ok(matches(cond('header', '*', 'x-canary'), { headers: { 'x-canary': '' } }));
      assert.ok(!matches(cond('header', '*', 'x-canary'), { headers: {} }));
      assert.ok(matches(cond('header', '*mobile*', 'User-Agent'), { headers: { 'user-agent': 'Foo mobile/1' } }));
      assert.ok(!matches(cond('header', '*mobile*', 'user-agent'), { headers: { 'user-agent': 'Desktop' } }));
      assert.ok(!matches(cond('header', 'v2', 'x-version'), { headers: {} }));
      assert.ok(matches(cond('header', 'b=*', 'x-multi'), { headers: { 'x-multi': ['a=1', 'b=2'] as never } }));
      assert.ok(matches(cond('header', '', 'x-empty'), { headers: { 'x-empty': '' } }));
      assert.ok(!matches(cond('header', 'V2', 'x-version'), { headers: { 'x-version': 'v2' } }), 'values are case-sensitive');
    });

    it('query: a glob on the decoded parameter value; any occurrence; `*` is presence', () => {
      const q = (pattern: string, key: string, query: string) => hits(cond('query', pattern, key), { query });
      assert.ok(q('2*', 'v', 'a=1&v=2.1'));
      assert.ok(!q('2*', 'v', 'v=1'));
      assert.ok(q('beta', 'v', 'v=stable&v=beta'));
      assert.ok(q('*', 'debug', 'debug'));
      assert.ok(!q('*', 'debug', ''));
      assert.ok(!q('*', 'debug', 'debugx=1'));
      assert.ok(q('a b', 'q', 'q=a+b'));
      assert.ok(q('é', 'q', 'q=%C3%A9'));
      assert.ok(q('1', 'a b', 'a%20b=1'));
    });

    it('cookie: a glob on the named cookie’s value; quotes removed; absent cookie never matches', () => {
      const c = (pattern: string, key: string, cookie?: string) => hits(cond('cookie', pattern, key), { headers: cookie === undefined ? {} : { cookie } });
      assert.ok(c('yes', 'beta', 'a=1; beta=yes; c=3'));
      assert.ok(c('yes', 'beta', 'beta="yes"'));
      assert.ok(!c('yes', 'beta', 'xbeta=yes'));
      assert.ok(!c('*', 'beta', 'a=1'));
      assert.ok(!c('*', 'beta'));
      assert.ok(c('v2*', 'ver', 'ver=v1; ver=v2.3'));
    });

    it('source_ip: IPv4 and IPv6 CIDRs and addresses, IPv4-mapped clients and rules alike', () => {
      const ip = (pattern: string, clientIp: string) => hits(cond('source_ip', pattern), { clientIp });
      assert.ok(ip('10.0.0.0/8', '10.20.30.40'));
      assert.ok(!ip('10.0.0.0/8', '11.0.0.1'));
      assert.ok(ip('10.0.0.0/8', '::ffff:10.1.2.3'), 'dual-stack sockets report IPv4 as mapped');
      assert.ok(ip('::ffff:10.0.0.0/104', '10.9.9.9'), 'a mapped rule covers plain IPv4');
      assert.ok(ip('2001:db8::/32', '2001:db8:1234::1'));
      assert.ok(!ip('2001:db8::/32', '2001:db9::1'));
      assert.ok(ip('2001:db8:0:0:8000::/65', '2001:db8::8000:0:0:1'));
      assert.ok(!ip('2001:db8:0:0:8000::/65', '2001:db8::7fff:0:0:1'));
      assert.ok(ip('fe80::/10', 'fe80::1%eth0'), 'the zone of a link-local client is ignored');
      assert.ok(ip('192.0.2.7', '192.0.2.7'));
      assert.ok(!ip('192.0.2.7', '192.0.2.8'));
      assert.ok(ip('::1', '::1'));
      assert.ok(ip('192.0.2.0/24, 2001:db8::/32', '2001:db8::5'));
      assert.ok(ip('0.0.0.0/0', '203.0.113.9'));
      assert.ok(!ip('0.0.0.0/0', '2001:db8::1'));
      assert.ok(ip('10.1.2.3/8', '10.200.0.1'), 'host bits are ignored');
      assert.ok(!ip('10.0.0.0/8', ''), 'an unknown client address never matches');
    });

    it('host: `*` is one label, `**` any number of labels, compared lower-case', () => {
      const h = (pattern: string, host: string) => hits(cond('host', pattern), { host });
      assert.ok(h('api.example.com', 'api.example.com'));
      assert.ok(h('API.example.com', 'api.example.com'));
      assert.ok(h('*.example.com', 'eu.example.com'));
      assert.ok(!h('*.example.com', 'example.com'));
      assert.ok(!h('*.example.com', 'a.eu.example.com'));
      assert.ok(h('**.example.com', 'example.com'));
      assert.ok(h('**.example.com', 'a.eu.example.com'));
      assert.ok(!h('**.example.com', 'example.org'));
      assert.ok(h('api-*.example.com', 'api-eu.example.com'));
    });
  });

  describe('cost', () => {
    it('parses the client address and splits the path at most once per request, whatever the number of rules', () => {
      let ipReads = 0;
      let pathReads = 0;
      const c = ctx();
      Object.defineProperty(c, 'clientIp', { get: () => (ipReads++, '10.0.0.1') });
      Object.defineProperty(c, 'path', { get: () => (pathReads++, '/a/b/c') });
      // Every rule's path matches and its address list does not, so every rule reaches both facts.
      const rules = compileRoutingRules(['11', '12', '13'].map((net) => rule([cond('source_ip', `${net}.0.0.0/8`), cond('path', '/a/*/c', 'glob')])));
      assert.equal(selectAgents(rules, c), undefined);
      assert.equal(ipReads, 1);
      assert.equal(pathReads, 1);
    });
  });
});
