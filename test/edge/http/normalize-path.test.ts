// Path normalisation: the one form every stage judges and the agent receives, so encodings, dot segments and
// doubled slashes cannot route a request past a rule written for the plain path.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { normalizePath, splitTarget } from '../../../src/edge/http/normalize-path.ts';

describe('normalizePath', () => {
  const cases: Array<[string, string | null]> = [
    ['/', '/'],
    ['/a/b', '/a/b'],
    ['/a//b', '/a/b'],
    ['//admin', '/admin'],
    ['/a/./b', '/a/b'],
    ['/a/../b', '/b'],
    ['/../a', '/a'],
    ['/api/../../etc', '/etc'],
    ['/a/b/..', '/a/'],
    ['/a/b/.', '/a/b/'],
    ['/a/b/', '/a/b/'],
    ['/%61dmin', '/admin'],
    ['/%2e%2e/admin', '/admin'],
    ['/%7euser', '/~user'],
    ['/a%2fb', '/a%2Fb'],
    ['/caf%c3%a9', '/caf%C3%A9'],
    ['/a%zz', null],
    ['/a%2', null],
    ['relative', null],
    ['', null],
  ];
  for (const [input, expected] of cases) {
    it(`${JSON.stringify(input)} → ${JSON.stringify(expected)}`, () => assert.equal(normalizePath(input), expected));
  }

  it('is idempotent', () => {
    for (const [input] of cases) {
      const once = normalizePath(input);
      if (once !== null) assert.equal(normalizePath(once), once);
    }
  });
});

describe('splitTarget', () => {
  it('splits origin-form targets at the first "?"', () => {
    assert.deepEqual(splitTarget('/a?b=1?c'), { path: '/a', query: 'b=1?c' });
    assert.deepEqual(splitTarget('/a'), { path: '/a', query: '' });
  });
  it('keeps only the path of absolute-form targets', () => {
    assert.deepEqual(splitTarget('http://evil.example/x?y'), { path: '/x', query: 'y' });
    assert.deepEqual(splitTarget('http://evil.example'), { path: '/', query: '' });
  });
});
