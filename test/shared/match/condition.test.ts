// Routing conditions in src/shared/match/condition.ts: the canonical form the control API stores, the refusals (with
// the field they name), and the guarantee that matters — whatever is accepted compiles, at the edge included.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalCondition, compileConditionMatcher, ConditionError } from '../../../src/shared/match/condition.ts';
import { compileCondition } from '../../../src/edge/stages/routing.ts';
import type { RoutingConditionConfig } from '../../../src/shared/snapshot.ts';
import { random } from '../../helpers/random.ts';

function refusal(type: string, key: string, pattern: string): ConditionError {
  try {
    canonicalCondition(type, key, pattern);
  } catch (err) {
    assert.ok(err instanceof ConditionError, String(err));
    return err;
  }
  assert.fail(`accepted ${type} ${JSON.stringify(key)} ${JSON.stringify(pattern)}`);
}

describe('canonicalCondition', () => {
  it('puts every type in canonical form', () => {
    const c = (type: string, key: string, pattern: string) => {
      const { condition_key, pattern: p } = canonicalCondition(type, key, pattern);
      return [condition_key, p];
    };
    assert.deepEqual(c('path', '', '/caf%c3%a9/%7euser'), ['prefix', '/caf%C3%A9/~user']);
    assert.deepEqual(c('path', 'GLOB', '/café/*'), ['glob', '/caf%C3%A9/*']);
    assert.deepEqual(c('method', '', 'get, head,GET'), ['', 'GET,HEAD']);
    assert.deepEqual(c('header', 'X-Canary', '*'), ['x-canary', '*']);
    assert.deepEqual(c('query', 'V', '2*'), ['V', '2*']);
    assert.deepEqual(c('cookie', 'beta', 'yes'), ['beta', 'yes']);
    assert.deepEqual(c('source_ip', '', ' 10.0.0.0/8, 2001:DB8::/32,10.0.0.0/8'), ['', '10.0.0.0/8,2001:db8::/32']);
    assert.deepEqual(c('host', '', ' API.Example.com '), ['', 'api.example.com']);
  });

  it('refuses what cannot match a normalised request, naming the field', () => {
    const cases: Array<[string, string, string, ConditionError['field'], RegExp]> = [
      ['country', '', 'FR', 'condition_type', /unknown condition_type/],
      ['path', '', 'api', 'pattern', /must start with/],
      ['path', 'regex', '/api', 'condition_key', /prefix, exact, glob/],
      ['path', '', '/a/../b', 'pattern', /dot segments/],
      ['path', '', '/a//b', 'pattern', /empty segments/],
      ['path', '', '/a%2', 'pattern', /malformed percent-escape/],
      ['path', '', '/a?b', 'pattern', /cannot appear/],
      // Glob matching costs pattern × path segments, and visitors choose the path.
      ['path', 'glob', `/**${'/a'.repeat(16)}`, 'pattern', /at most 16 segments/],
      ['method', '', ' , ', 'pattern', /at least one method/],
      ['method', 'x', 'GET', 'condition_key', /must be empty/],
      ['header', '', '*', 'condition_key', /header name/],
      ['header', 'x-a', 'a\nb', 'pattern', /control characters/],
      ['cookie', 'a;b', '1', 'condition_key', /not a valid cookie name/],
      // Address entries are judged by the edge's own parser: its messages reach the API caller.
      ['source_ip', '', '10.0.0.256', 'pattern', /"10.0.0.256" is not an IP address or CIDR/],
      ['source_ip', '', '2001:db8::/129', 'pattern', /invalid prefix length \(0-128\)/],
      ['source_ip', '', 'fe80::1%eth0', 'pattern', /not an IP address/],
      ['source_ip', '', Array.from({ length: 65 }, (_, i) => `10.0.0.${i}`).join(','), 'pattern', /at most 64/],
      ['host', '', 'example.com:8080', 'pattern', /without a port/],
    ];
    for (const [type, key, pattern, field, message] of cases) {
      const err = refusal(type, key, pattern);
      assert.equal(err.field, field, `${type} ${pattern}`);
      assert.match(err.message, message, `${type} ${pattern}`);
    }
  });
});

describe('compileConditionMatcher', () => {
  it('compiles stored rows leniently (an empty path key is prefix) and refuses what it cannot run', () => {
    const m = compileConditionMatcher({ condition_type: 'path', condition_key: '', pattern: '/api' });
    assert.ok(m.kind === 'path' && m.match('/api/x') && !m.match('/apix'));
    assert.throws(() => compileConditionMatcher({ condition_type: 'country' as never, condition_key: '', pattern: 'FR' }), /unknown condition type "country"/);
    assert.throws(() => compileConditionMatcher({ condition_type: 'path', condition_key: 'regex', pattern: '/a' }), /unknown path match mode/);
    assert.throws(() => compileConditionMatcher({ condition_type: 'source_ip', condition_key: '', pattern: ' , ' }), /empty address list/);
  });
});

describe('control validation and edge compilation agree', () => {
  it('every condition canonicalCondition accepts compiles at the edge, and is its own canonical form', () => {
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
      const key = keyed || rand(4) === 0 ? keys[rand(keys.length)] : '';
      const pattern = rand(2) === 0 ? pick(alphabets[type], 24) : mutate(seeds[type][rand(seeds[type].length)], alphabets[type]);
      const input = JSON.stringify({ type, key, pattern });
      let stored: RoutingConditionConfig;
      try {
        stored = canonicalCondition(type, key, pattern);
      } catch (err) {
        assert.ok(err instanceof ConditionError, `${input}: ${String(err)}`);
        continue;
      }
      // The edge's probe, built over the shared matcher, compiles it too.
      assert.doesNotThrow(() => compileCondition(stored), input);
      assert.deepEqual(canonicalCondition(stored.condition_type, stored.condition_key, stored.pattern), stored, input);
      accepted.push([type, stored.condition_key, stored.pattern]);
    }
    for (const type of types) {
      const n = accepted.filter(([t]) => t === type).length;
      assert.ok(n >= 50, `the corpus exercised only ${n} accepted ${type} conditions`);
    }
  });
});
