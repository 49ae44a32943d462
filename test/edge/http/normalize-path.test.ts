// Path normalisation: the one form every stage judges and the agent receives, so encodings, dot segments and
// doubled slashes cannot route a request past a rule written for the plain path.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { normalizePath, splitTarget } from '../../../src/edge/http/normalize-path.ts';

// Backslash regression: `/p/..\admin` and `/\evil.example/x` reached the agent raw, where a WHATWG URL parser reads
// `\` as `/` (and Windows servers read a decoded %5C so): a rule on /admin could be passed under /p.
const backslashes: Array<[string, string | null]> = [
  ['/p/..\\admin', '/admin'],
  ['/p/..%5Cadmin', '/admin'],
  ['/p/..%5cadmin', '/admin'],
  ['/\\evil.example/x', '/evil.example/x'],
  ['/%5Cevil.example/x', '/evil.example/x'],
  ['/\\', '/'],
  ['/%5C', '/'],
  ['/a\\', '/a/'],
  ['/a%5C', '/a/'],
  ['/a\\b', '/a/b'],
  ['/a%5Cb', '/a/b'],
  ['/a\\\\b', '/a/b'],
  ['/a%5C%5Cb', '/a/b'],
  ['/a/\\/b', '/a/b'],
  ['/a\\..\\b', '/b'],
  ['/a%5C..%5Cb', '/b'],
  ['/a\\.\\b', '/a/b'],
  ['/a/b\\..', '/a/'],
  ['/a/b%5C.', '/a/b/'],
  ['/a/.\\', '/a/'],
  ['/a/%2e%2e%5cadmin', '/admin'],
  ['/..\\..\\etc', '/etc'],
  ['/a%5C%2Fb', '/a/%2Fb'],
  ['/a%255Cb', '/a%255Cb'],
  ['\\admin', null],
  ['%5Cadmin', null],
];

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
    for (const [input] of [...cases, ...backslashes]) {
      const once = normalizePath(input);
      if (once !== null) assert.equal(normalizePath(once), once);
    }
  });
});

describe('normalizePath: backslashes and %5C read as "/", in every position', () => {
  for (const [input, expected] of backslashes) {
    it(`${JSON.stringify(input)} → ${JSON.stringify(expected)}`, () => assert.equal(normalizePath(input), expected));
  }
  it('keeps %2F encoded, never a separator, so "..%2F" is one segment', () => {
    assert.equal(normalizePath('/p/..%2fadmin'), '/p/..%2Fadmin');
    assert.equal(normalizePath('/a%2F..%2Fb'), '/a%2F..%2Fb');
  });
});

// Path-parameter regression: `/public/..;/admin` passed unchanged (RFC 3986 sees `..;` as a plain segment) while
// Tomcat, Jetty and Spring strip `;` parameters before resolving dots and serve /admin.
describe('normalizePath: `;` path parameters on a dot segment are refused', () => {
  const refused = [
    '/public/..;/admin', '/public/.;/admin', '/public/..;x=1/admin', '/public/..;', '/..;/admin', '/a/.;', '/a/..;jsessionid=1',
    '/public/%2e%2e;/admin', '/public/%2E%2E;/admin', '/public/.%2e;/admin', '/public/%2e;/admin', '/public/..%3B/admin', '/public/..%3b/admin',
    '/public/%2e%2e%3b/admin', '/%2e%2e%3bx', '/public\\..;\\admin', '/public%5C..;%5Cadmin', '//..;//admin',
  ];
  for (const input of refused) it(`${JSON.stringify(input)} → null`, () => assert.equal(normalizePath(input), null));

  const kept: Array<[string, string]> = [
    ['/cars;color=red/x', '/cars;color=red/x'],
    ['/a;/b', '/a;/b'],
    ['/...;/admin', '/...;/admin'],
    ['/.x;/admin', '/.x;/admin'],
    ['/a/..x;/b', '/a/..x;/b'],
    ['/a/;/b', '/a/;/b'],
    ['/a/b;..', '/a/b;..'],
    ['/a;b/../c', '/c'],
    ['/a%3B/b', '/a%3B/b'],
  ];
  for (const [input, expected] of kept) {
    it(`${JSON.stringify(input)} → ${JSON.stringify(expected)} (parameters elsewhere are the service's business)`, () => assert.equal(normalizePath(input), expected));
  }
});

describe('splitTarget', () => {
  it('splits origin-form targets at the first "?"', () => {
    assert.deepEqual(splitTarget('/a?b=1?c'), { authority: null, path: '/a', query: 'b=1?c' });
    assert.deepEqual(splitTarget('/a'), { authority: null, path: '/a', query: '' });
  });
  it('takes the authority of absolute-form targets apart from their path (RFC 9112 §3.2.2)', () => {
    assert.deepEqual(splitTarget('http://evil.example/x?y'), { authority: 'evil.example', path: '/x', query: 'y' });
    assert.deepEqual(splitTarget('HTTPS://App.Example:8443/x'), { authority: 'App.Example:8443', path: '/x', query: '' });
    assert.deepEqual(splitTarget('http://evil.example'), { authority: 'evil.example', path: '/', query: '' });
    assert.deepEqual(splitTarget('http://evil.example?q'), { authority: 'evil.example', path: '/', query: 'q' });
    assert.deepEqual(splitTarget('http://u@evil.example/x'), { authority: 'u@evil.example', path: '/x', query: '' });
  });
  it('refuses fragments, other schemes, and the asterisk and authority forms', () => {
    for (const target of ['/admin#x', '/a?b#c', 'http://a/#', 'ftp://a/x', 'http:/a/x', 'http:a', '*', 'app.example:443', '\\admin', '']) {
      assert.equal(splitTarget(target), null, target);
    }
  });
});
