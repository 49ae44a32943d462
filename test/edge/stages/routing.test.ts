// The routing stage on plain RequestContext objects: every condition type, evaluation order, disabled rules, first
// match wins, no match → no selector. Plus the matchers (glob, CIDR, cookies) and a check that whatever the control
// API accepts, the edge compiles — so a stored rule can never take an endpoint down at the edge.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { BlockList, isIP } from 'node:net';
import type { IncomingHttpHeaders } from 'node:http';
import { routing, compileCondition, compileRoutingRules, selectAgents } from '../../../src/edge/stages/routing.ts';
import { compileCidrList, parseIp } from '../../../src/edge/match/cidr.ts';
import { compilePathGlob, compileSegmentGlob, compileValueGlob } from '../../../src/edge/match/glob.ts';
import { cookieValues } from '../../../src/edge/match/cookies.ts';
import { queryValues } from '../../../src/edge/match/query.ts';
import { normalizeCondition } from '../../../src/control/routes/routing-rules.ts';
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
  return { id, name: `r${id}`, priority: 0, enabled: true, target_agent_id: null, target_agent_tags: ['t'], conditions, ...over };
}

const cond = (condition_type: RoutingConditionConfig['condition_type'], pattern: string, condition_key = ''): RoutingConditionConfig => ({
  condition_type,
  condition_key,
  pattern,
});

/** Whether a rule with this one condition matches the request (through the compiled rule, which supplies the facts). */
const hits = (c: RoutingConditionConfig, r: Req) => selectAgents(compileRoutingRules([rule([c])]), ctx(r)) !== undefined;
const matches = hits;

/** A small seeded PRNG (mulberry32): reproducible fuzzing, with good low bits (an LCG's correlate). */
function random(seed: number): (n: number) => number {
  let a = seed >>> 0;
  return (n) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) / 4294967296) * n | 0;
  };
}

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
      routing.compile(endpoint([rule([cond('path', '/api')])]))!.run(c);
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
      stage.run(a);
      stage.run(b);
      assert.deepEqual(a.selector, { rule: '#9', agentId: 'a-1' });
      assert.equal(a.selector, b.selector, 'shared, not rebuilt per request');
      assert.ok(Object.isFrozen(a.selector));
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
    it('matches adversarial globs in linear time (no RegExp backtracking)', () => {
      const path = '/' + 'a/'.repeat(4000) + 'c';
      const glob = compileSegmentGlob('/**/a/**/a/**/a/**/b', '/');
      const value = compileValueGlob('*a*a*a*a*a*b');
      const long = 'a'.repeat(16_000);
      const start = process.hrtime.bigint();
      assert.equal(glob(path.split('/')), false);
      assert.equal(value(long), false);
      const ms = Number(process.hrtime.bigint() - start) / 1e6;
      assert.ok(ms < 200, `took ${ms} ms`);
    });

    it('uses plain string compares for literal and trailing-`/**` path globs', () => {
      assert.equal(compilePathGlob('/exact').needsSegments, false);
      assert.equal(compilePathGlob('/api/**').needsSegments, false);
      assert.equal(compilePathGlob('/api/*/x').needsSegments, true);
    });

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

describe('matchers', () => {
  it('value globs: literal, prefix, suffix, infix, presence', () => {
    const g = (p: string, v: string) => compileValueGlob(p)(v);
    assert.ok(g('abc', 'abc') && !g('abc', 'abcd'));
    assert.ok(g('ab*', 'abc') && !g('ab*', 'xab'));
    assert.ok(g('*bc', 'abc') && !g('*bc', 'bcx'));
    assert.ok(g('a*c', 'ac') && g('a*c', 'abbbc') && !g('a*c', 'ab'));
    assert.ok(g('a*b*c', 'a-b-c') && !g('a*b*c', 'a-c-b'));
    assert.ok(g('*', '') && g('**', 'anything'));
    assert.ok(!g('aa*aa', 'aaa'), 'prefix and suffix may not overlap');
  });

  it('cookies: one name’s values, in order, quotes removed, bare tokens ignored', () => {
    const header = 'a=1; b="two"; a=3; flag; =x; c=; d';
    assert.deepEqual(cookieValues(header, 'a'), ['1', '3']);
    assert.deepEqual(cookieValues(header, 'b'), ['two']);
    assert.deepEqual(cookieValues(header, 'c'), ['']);
    assert.equal(cookieValues(header, 'flag'), undefined);
    assert.equal(cookieValues(header, 'd'), undefined);
    assert.equal(cookieValues(header, 'x'), undefined);
    assert.deepEqual(cookieValues(['a=1', 'a=2'], 'a'), ['1', '2']);
    assert.equal(cookieValues(undefined, 'a'), undefined);
  });

  it('query values decode exactly as URLSearchParams does', () => {
    const rand = random(5);
    const alphabet = 'ab=&+%2Fc3A9é ';
    const names = ['a', 'b', 'a b', 'é', '', 'ab'];
    const cases = ['a=1&a=2', 'a', 'a=', '=1', '&&a=1&', 'a%20b=1', 'a+b=x+y', '%C3%A9=%E2%82%AC', 'a=%zz', 'a=%C3', 'a=1=2'];
    for (let i = 0; i < 5000; i++) cases.push(Array.from({ length: rand(16) }, () => alphabet[rand(alphabet.length)]).join(''));
    for (const query of cases) {
      const params = new URLSearchParams(query);
      for (const name of names) {
        const want = params.getAll(name);
        assert.deepEqual(queryValues(query, name) ?? [], want, `${JSON.stringify(query)} ${JSON.stringify(name)}`);
      }
    }
  });

  it('parseIp accepts exactly what node:net accepts', () => {
    const corpus = [
      '0.0.0.0', '255.255.255.255', '1.2.3.4', '01.2.3.4', '1.2.3', '1.2.3.4.5', '256.1.1.1', '1..2.3', ' 1.2.3.4', '1.2.3.4 ',
      '::', '::1', '1::', '1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7::', '::2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8:9', '1::2::3', ':1::2', '1::2:',
      '::ffff:1.2.3.4', '::1.2.3.4', '1:2:3:4:5:6:1.2.3.4', '1:2:3:4:5:6:7:1.2.3.4', '1.2.3.4::', '::ffff:1.2.3', 'fffff::',
      'ABCD:ef01::', 'g::1', '2001:db8::', '::ffff:01.2.3.4', '1:2:3:4:5::1.2.3.4', ':', ':::', '', 'localhost',
    ];
    for (const s of corpus) assert.equal(parseIp(s) !== null, isIP(s) !== 0, s);
    // And random strings over the address alphabet.
    const alphabet = '0123456789abcdef:.';
    const rand = random(7);
    for (let i = 0; i < 20_000; i++) {
      const s = Array.from({ length: 2 + rand(20) }, () => alphabet[rand(alphabet.length)]).join('');
      assert.equal(parseIp(s) !== null, isIP(s) !== 0, s);
    }
  });

  it('CIDR matching agrees with node:net BlockList', () => {
    const rand = random(11);
    const v4 = () => Array.from({ length: 4 }, () => rand(256)).join('.');
    const v6 = () => Array.from({ length: 8 }, () => rand(4) === 0 ? '0' : rand(65536).toString(16)).join(':');
    for (let i = 0; i < 2000; i++) {
      const six = rand(2) === 0;
      const base = six ? v6() : v4();
      const prefix = rand(six ? 129 : 33);
      const list = new BlockList();
      list.addSubnet(base, prefix, six ? 'ipv6' : 'ipv4');
      const match = compileCidrList(`${base}/${prefix}`);
      for (let j = 0; j < 5; j++) {
        // Half the probes share the base's leading bits, so both outcomes are exercised.
        const probe = rand(2) === 0 ? base : six ? v6() : v4();
        const fam = probe.includes(':') ? 'ipv6' : 'ipv4';
        assert.equal(match(parseIp(probe)), list.check(probe, fam), `${base}/${prefix} vs ${probe}`);
      }
    }
  });
});

describe('control validation and edge compilation agree', () => {
  it('every condition the control API accepts compiles at the edge, in canonical form', () => {
    const accepted: Array<[string, string, string]> = [];
    const rand = random(3);
    const pick = (alphabet: string, max: number) => Array.from({ length: rand(max) }, () => alphabet[rand(alphabet.length)]).join('');
    const types = ['path', 'method', 'header', 'query', 'cookie', 'source_ip', 'host'];
    const keys = ['', 'prefix', 'exact', 'glob', 'x-a', 'Q', 'bad key', 'a;b'];
    const alphabets: Record<string, string> = {
      path: '/*.%a2Fz-é ?',
      method: 'GETpos, ',
      header: 'ab*\t\n ',
      query: 'ab*=',
      cookie: 'ab*"',
      source_ip: '0123456789abcdef:./,% ',
      host: 'ab.*-:[]',
    };
    const seeds: Record<string, string[]> = {
      path: ['/api', '/a/*/b', '/**/x', '/caf%c3%a9', '/a/b/'],
      method: ['GET', 'get,post', 'PUT, DELETE'],
      header: ['*', 'v2*', '*mobile*'],
      query: ['1', 'beta*', '*'],
      cookie: ['yes', '"q"', '*'],
      source_ip: ['10.0.0.0/8', '2001:db8::/32', '::ffff:1.2.3.4/128', '192.0.2.1, ::1', '1:2:3:4:5:6:7::/64'],
      host: ['*.example.com', '**.a.b', 'x.y', '[::1]'],
    };
    /** A seed with a few random edits, so the corpus sits on the boundary between valid and invalid. */
    const mutate = (seed: string, alphabet: string) => {
      let out = seed;
      for (let n = rand(4); n > 0; n--) {
        const at = rand(out.length + 1);
        const op = rand(3);
        const ch = alphabet[rand(alphabet.length)];
        out = op === 0 ? out.slice(0, at) + ch + out.slice(at) : op === 1 ? out.slice(0, at) + out.slice(at + 1) : out.slice(0, at) + ch + out.slice(at + 1);
      }
      return out;
    };
    for (let i = 0; i < 20_000; i++) {
      const type = types[rand(types.length)];
      const keyed = ['header', 'query', 'cookie', 'path'].includes(type);
      const condition_key = keyed || rand(4) === 0 ? keys[rand(keys.length)] : '';
      const pattern = rand(2) === 0 ? pick(alphabets[type], 24) : mutate(seeds[type][rand(seeds[type].length)], alphabets[type]);
      const input = { condition_type: type, condition_key, pattern };
      let stored: RoutingConditionConfig;
      try {
        stored = normalizeCondition(input, 0);
      } catch (err) {
        assert.equal((err as { code?: string }).code, 'invalid_request');
        continue;
      }
      assert.doesNotThrow(() => compileCondition(stored), JSON.stringify(input));
      // Canonical: validating the stored form again changes nothing.
      assert.deepEqual(normalizeCondition(stored, 0), stored, JSON.stringify(input));
      accepted.push([type, stored.condition_key, stored.pattern]);
    }
    for (const type of types) {
      const n = accepted.filter(([t]) => t === type).length;
      assert.ok(n >= 50, `the corpus exercised only ${n} accepted ${type} conditions`);
    }
  });
});
