// The canonical form of a role's permissions (src/shared/rbac-permissions.ts) against plain inputs, and its path
// matcher against the edge's (src/edge/rbac/policy.ts): what the API accepted must match at the edge as documented.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  canonicalRbacPermissions,
  compileRbacPath,
  edgePermissions,
  isZeroPermissions,
  rbacPathKind,
  RbacPermissionsError,
} from '../../src/shared/rbac-permissions.ts';
import { compileRbacPathPattern, JudgedPath } from '../../src/edge/rbac/policy.ts';

const matches = (pattern: string, path: string): boolean => {
  const m = compileRbacPath(pattern);
  return m.needsSegments ? m.match(path.split('/')) : m.match(path);
};

describe('RBAC permissions, canonical form', () => {
  it('fills omitted sub-fields, drops duplicates in order, canonicalises paths and header names', () => {
    const p = canonicalRbacPermissions({
      allowed_methods: ['GET', '*', 'GET'],
      allowed_paths: ['/%61pi/*', '/é', '/api/*'],
      headers: { 'X-Role': 'a b' },
    });
    assert.deepEqual(p, {
      allowed_methods: ['GET', '*'],
      denied_methods: [],
      allowed_paths: ['/api/*', '/%C3%A9'],
      denied_paths: [],
      rate_limit_rps: 0,
      headers: { 'x-role': 'a b' },
      metadata: {},
    });
    assert.deepEqual(canonicalRbacPermissions(undefined), canonicalRbacPermissions({}));
    assert.equal(isZeroPermissions(canonicalRbacPermissions({ allowed_paths: [], rate_limit_rps: 0 })), true);
    assert.equal(isZeroPermissions(canonicalRbacPermissions({ metadata: { a: 'b' } })), false);
    assert.equal('metadata' in edgePermissions(canonicalRbacPermissions({ metadata: { a: 'b' } })), false);
  });

  it('throws RbacPermissionsError naming the field', () => {
    const cases: [unknown, string][] = [
      [{ allowed_methods: ['get'] }, 'permissions.allowed_methods.0'],
      [{ denied_methods: ['GET', '*'] }, 'permissions.denied_methods.1'],
      [{ allowed_paths: ['/ok', 'nope'] }, 'permissions.allowed_paths.1'],
      [{ denied_paths: ['/a/./b'] }, 'permissions.denied_paths.0'],
      [{ headers: { 'x-edge-rbac-roles': 'admin' } }, 'permissions.headers.x-edge-rbac-roles'],
      [{ headers: { 'Transfer-Encoding': 'chunked' } }, 'permissions.headers.Transfer-Encoding'],
      [{ rate_limit_rps: 1.5 }, 'permissions.rate_limit_rps'],
      [{ metadata: { '': 'x' } }, 'permissions.metadata.'],
      [{ colour: 'red' }, 'permissions.colour'],
      [[], 'permissions'],
    ];
    for (const [input, field] of cases) {
      assert.throws(
        () => canonicalRbacPermissions(input as never),
        (err: unknown) => err instanceof RbacPermissionsError && err.field === field,
        JSON.stringify(input),
      );
    }
  });
});

describe('RBAC path patterns', () => {
  it('tells the three kinds apart', () => {
    assert.equal(rbacPathKind('/admin'), 'exact');
    assert.equal(rbacPathKind('/api/*'), 'prefix');
    assert.equal(rbacPathKind('/*'), 'prefix');
    assert.equal(rbacPathKind('/api/*/export'), 'glob');
    assert.equal(rbacPathKind('/api/**'), 'glob');
    assert.equal(rbacPathKind('/files/*.pdf'), 'glob');
    assert.equal(rbacPathKind('/a/*/b/*'), 'glob');
  });

  const table: [string, string, boolean][] = [
    ['/admin', '/admin', true],
    ['/admin', '/ADMIN', false],
    ['/admin', '/admin/', false],
    ['/api/*', '/api', true],
    ['/api/*', '/api/', true],
    ['/api/*', '/api/v1/x', true],
    ['/api/*', '/apix', false],
    ['/*', '/anything/at/all', true],
    ['/api/*/export', '/api/v1/export', true],
    ['/api/*/export', '/api/v1/v2/export', false],
    ['/api/**/export', '/api/v1/v2/export', true],
    ['/api/**/export', '/api/export', true],
    ['/files/*.pdf', '/files/a.pdf', true],
    ['/files/*.pdf', '/files/a/b.pdf', false],
    ['/api/**', '/api', true],
    ['/api/**', '/apix', false],
  ];

  it('matches as documented (docs/rbac.md)', () => {
    for (const [pattern, path, expected] of table) assert.equal(matches(pattern, path), expected, `${pattern} vs ${path}`);
  });

  it('agrees with the edge’s compiler on every case', () => {
    for (const [pattern, path] of table) {
      assert.equal(compileRbacPathPattern(pattern)(new JudgedPath(path)), matches(pattern, path), `${pattern} vs ${path}`);
    }
  });
});
