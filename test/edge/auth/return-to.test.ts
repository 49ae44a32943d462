// Where a visitor is sent after login or logout: local paths and allowed targets pass, everything that could leave
// the endpoint's host becomes "/" (RFC 9700 §4.11, open redirectors). Fuzzed with a fixed seed.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { isLocalPath, safeReturnTo } from '../../../src/edge/auth/return-to.ts';
import { random } from '../../helpers/random.ts';

const HOST = 'app.edge.test';
const none = new Set<string>();

describe('return_to', () => {
  it('keeps paths on the host', () => {
    for (const raw of ['/', '/a', '/a/b?c=d&e=%2F%2F', '/%2F%2Fencoded', '/a//b', '/.well-known/x', '/a#frag']) assert.equal(safeReturnTo(raw, none), raw);
  });

  it('replaces anything that could leave the host, or split a header, by "/"', () => {
    for (const raw of [
      '//evil.example',
      '//evil.example/path',
      '/\\evil.example',
      '\\\\evil.example',
      '/a\\b',
      'https://evil.example/',
      'http://app.edge.test/',
      `https://${HOST}/not-listed`,
      'javascript:alert(1)',
      'relative/path',
      '/\t/evil.example',
      '/\n/evil.example',
      '/a\r\nSet-Cookie: x=1',
      '/café',
      ' /a',
      '',
      null,
      undefined,
      `/${'a'.repeat(3000)}`,
    ]) {
      assert.equal(safeReturnTo(raw, none), '/', String(raw));
    }
  });

  it('accepts the allowed targets exactly, absolute ones in canonical form', () => {
    const allowed = new Set([`https://${HOST}/after`, `https://${HOST}:8443/x`]);
    assert.equal(safeReturnTo(`https://${HOST}/after`, allowed), `https://${HOST}/after`);
    assert.equal(safeReturnTo(`https://APP.edge.test:443/after`, allowed), `https://${HOST}/after`);
    assert.equal(safeReturnTo(`https://${HOST}:8443/x`, allowed), `https://${HOST}:8443/x`);
    assert.equal(safeReturnTo(`https://${HOST}/after/more`, allowed), '/');
    assert.equal(safeReturnTo(`https://${HOST}@evil.example/after`, allowed), '/');
  });

  it('never leaves the host, whatever the input (fuzz, fixed seed)', () => {
    const rand = random(0x7e7);
    const pieces = ['/', '\\', '//', '/\\', '.', '..', '@', ':', '?', '#', '%2F', '%5C', '\t', '\n', '\r', ' ', 'evil.example', 'https:', 'http:', 'javascript:', HOST, '\u0000', '\u3002', '\uff0f', 'a', '%', '%09', '%0a', ';'];
    const allowed = new Set([`https://${HOST}/after`]);
    for (let i = 0; i < 20_000; i++) {
      let raw = '';
      const n = 1 + rand(8);
      for (let j = 0; j < n; j++) raw += pieces[rand(pieces.length)];
      const out = safeReturnTo(raw, allowed);
      // What a browser does with the Location, relative to the callback URL.
      const resolved = new URL(out, `https://${HOST}/.edge/auth/callback?code=x`);
      assert.equal(resolved.host, HOST, `${JSON.stringify(raw)} → ${JSON.stringify(out)}`);
      assert.equal(resolved.protocol, 'https:');
      assert.ok(/^[\x21-\x7e]+$/.test(out), `${JSON.stringify(out)} is a valid field value`);
      if (out !== '/' && !allowed.has(out)) assert.ok(isLocalPath(out));
    }
  });
});
