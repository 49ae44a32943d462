// The glob matchers the control API validates with and the edge matches with: value globs, segment globs (paths
// and hosts) and the fast paths the path compiler picks; adversarial patterns stay linear.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { compilePathGlob, compilePathPrefix, compileSegmentGlob, compileValueGlob } from '../../../src/shared/match/glob.ts';

describe('value globs', () => {
  it('literal, prefix, suffix, infix, presence', () => {
    const g = (p: string, v: string) => compileValueGlob(p)(v);
    assert.ok(g('abc', 'abc') && !g('abc', 'abcd'));
    assert.ok(g('ab*', 'abc') && !g('ab*', 'xab'));
    assert.ok(g('*bc', 'abc') && !g('*bc', 'bcx'));
    assert.ok(g('a*c', 'ac') && g('a*c', 'abbbc') && !g('a*c', 'ab'));
    assert.ok(g('a*b*c', 'a-b-c') && !g('a*b*c', 'a-c-b'));
    assert.ok(g('*', '') && g('**', 'anything'));
    assert.ok(!g('aa*aa', 'aaa'), 'prefix and suffix may not overlap');
  });
});

describe('segment globs', () => {
  it('`*` stays within a segment, a `**` segment spans any number, with "/" or "." as the separator', () => {
    const path = (p: string, v: string) => compileSegmentGlob(p, '/')(v.split('/'));
    assert.ok(path('/a/*/c', '/a/b/c') && !path('/a/*/c', '/a/b/x/c'));
    assert.ok(path('/a/**/c', '/a/c') && path('/a/**/c', '/a/b/x/c'));
    assert.ok(path('/**/**/c', '/c'), 'consecutive `**` segments are one');
    const host = (p: string, v: string) => compileSegmentGlob(p, '.')(v.split('.'));
    assert.ok(host('*.example.com', 'eu.example.com') && !host('*.example.com', 'a.eu.example.com'));
    assert.ok(host('**.example.com', 'example.com') && host('**.example.com', 'a.eu.example.com'));
  });

  it('prefixes match on segment boundaries', () => {
    assert.ok(compilePathPrefix('/api')('/api/x') && !compilePathPrefix('/api')('/apix'));
    assert.ok(compilePathPrefix('/api/')('/api/') && !compilePathPrefix('/api/')('/api'));
    assert.ok(compilePathPrefix('/')('/anything'));
  });

  it('uses plain string compares for literal and trailing-`/**` path globs', () => {
    assert.equal(compilePathGlob('/exact').needsSegments, false);
    assert.equal(compilePathGlob('/api/**').needsSegments, false);
    assert.equal(compilePathGlob('/api/*/x').needsSegments, true);
  });

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
});
