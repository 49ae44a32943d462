// The one list of request fields the edge owns: every spelling a CGI-style upstream reads as one of them is owned,
// and nothing else is.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EDGE_OWNED_HEADERS, headerKey, isEdgeOwnedHeader, isEdgeOwnedLower } from '../../src/shared/edge-headers.ts';

/** Every way to spell `name` with each `-` as `-` or `_`, in three cases (2^hyphens × 3 spellings). */
function spellings(name: string): string[] {
  let out = [''];
  for (const c of name) out = c === '-' ? out.flatMap((p) => [`${p}-`, `${p}_`]) : out.map((p) => p + c);
  return out.flatMap((s) => [s, s.toUpperCase(), s.replace(/(^|[-_])([a-z])/g, (_, sep: string, ch: string) => sep + ch.toUpperCase())]);
}

describe('edge-owned headers', () => {
  it('lists lower-case, hyphenated names only, each once', () => {
    for (const name of EDGE_OWNED_HEADERS) assert.match(name, /^[a-z0-9]+(-[a-z0-9]+)*$/, name);
    assert.equal(new Set(EDGE_OWNED_HEADERS).size, EDGE_OWNED_HEADERS.length);
  });

  it('includes the forwarding fields and the other client-address fields', () => {
    for (const name of ['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-forwarded-port', 'forwarded', 'x-real-ip', 'x-client-ip', 'true-client-ip', 'cf-connecting-ip', 'x-cluster-client-ip', 'client-ip']) {
      assert.ok(EDGE_OWNED_HEADERS.includes(name), name);
    }
  });

  it('owns every spelling CGI reads as an owned name: any case, "_" for any "-"', () => {
    for (const name of EDGE_OWNED_HEADERS) {
      for (const s of spellings(name)) {
        assert.equal(isEdgeOwnedHeader(s), true, s);
        assert.equal(isEdgeOwnedLower(s.toLowerCase()), true, s);
      }
    }
  });

  it('owns the X-Forwarded-* and X-Edge-* name spaces whole, in every spelling', () => {
    for (const name of ['x-forwarded-prefix', 'X-Forwarded-Server', 'x_forwarded_scheme', 'x-forwarded-for-x', 'X-Edge-Auth-Email', 'x_edge_anything', 'X-Edge_Future-Field']) {
      assert.equal(isEdgeOwnedHeader(name), true, name);
      assert.equal(isEdgeOwnedLower(name.toLowerCase()), true, name);
    }
  });

  it('owns nothing else', () => {
    for (const name of ['host', 'x-forwarded', 'x-edge', 'x-edgeless', 'xx-forwarded-for', 'xx-edge-auth-user', 'x-custom-x-edge-auth', 'forwarded_', '_forwarded', 'x__forwarded-for', 'x-custom', 'X_Custom', 'client', 'ip', '']) {
      assert.equal(isEdgeOwnedHeader(name), false, name);
      assert.equal(isEdgeOwnedLower(name.toLowerCase()), false, name);
    }
  });

  it('headerKey lower-cases and reads "_" as "-"', () => {
    assert.equal(headerKey('X_Forwarded-For'), 'x-forwarded-for');
    assert.equal(headerKey('Accept'), 'accept');
    assert.equal(headerKey('__'), '--');
  });
});
