// The one HMAC-signed token format (sessions, registration forms, identity assertions, health probes): what opens,
// what does not, and that session cookies issued before the format was shared still open after it.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { MAC_TEXT_LENGTH, openToken, signToken } from '../../src/shared/signed-token.ts';
import { SessionKeys } from '../../src/edge/auth/session.ts';

const KEY = randomBytes(32);

describe('signed tokens', () => {
  it('open to their fields under the key, purpose and bound values they were made with', () => {
    const token = signToken(KEY, 'form', ['1800000000', 'abc_-'], ['endpoint-1', 'GET', '/a.b?c=d\n']);
    assert.match(token, new RegExp(`^1800000000\\.abc_-\\.[A-Za-z0-9_-]{${MAC_TEXT_LENGTH}}$`));
    assert.deepEqual(openToken(KEY, 'form', token, 2, ['endpoint-1', 'GET', '/a.b?c=d\n']), ['1800000000', 'abc_-']);
    assert.deepEqual(openToken(() => KEY, 'form', token, 2, ['endpoint-1', 'GET', '/a.b?c=d\n']), ['1800000000', 'abc_-']);
  });

  it('refuse another key, purpose, field count or bound values, and any tampering', () => {
    const bound = ['endpoint-1'];
    const token = signToken(KEY, 'probe', ['1800000000'], bound);
    assert.equal(openToken(randomBytes(32), 'probe', token, 1, bound), null, 'another key');
    assert.equal(openToken(() => undefined, 'probe', token, 1, bound), null, 'no key for it');
    assert.equal(openToken(KEY, 'session', token, 1, bound), null, 'another purpose');
    assert.equal(openToken(KEY, 'probe', token, 2, bound), null, 'another field count');
    assert.equal(openToken(KEY, 'probe', token, 1, ['endpoint-2']), null, 'other bound values');
    assert.equal(openToken(KEY, 'probe', token, 1), null, 'bound values left out');
    assert.equal(openToken(KEY, 'probe', `1800000001${token.slice(10)}`, 1, bound), null, 'a field changed');
    const last = token.at(-1) === 'A' ? 'B' : 'A';
    assert.equal(openToken(KEY, 'probe', token.slice(0, -1) + last, 1, bound), null, 'the MAC changed');
  });

  it('bound values cannot be smuggled into a field: a newline is refused, a field that is not base64url is never signed', () => {
    const unbound = signToken(KEY, 'p', ['a']);
    assert.equal(openToken(KEY, 'p', unbound, 1, []), null);
    assert.equal(openToken(KEY, 'p', `a\n[].${unbound.split('.')[1]}`, 1, []), null);
    for (const bad of ['a.b', 'a\nb', 'é', ' ']) assert.throws(() => signToken(KEY, 'p', [bad]), /base64url/);
  });

  it('bad inputs are null, never a throw', () => {
    for (const bad of ['', '.', '..', 'a', 'a.b.c.d', `a.${'x'.repeat(43)}.`, `a.${'é'.repeat(43)}`, '\u0000'.repeat(100), undefined as unknown as string]) {
      assert.equal(openToken(KEY, 'p', bad, 1), null, JSON.stringify(bad));
    }
  });

  it('a session cookie made by the format sessions had before the shared helper still opens', () => {
    const key = randomBytes(32);
    const keys = new SessionKeys([{ id: 'k1', key }]);
    const body = Buffer.from(JSON.stringify([1, 2, 'subject', '', 'id', 10, 20, 0])).toString('base64url');
    const before = `k1.${body}.${createHmac('sha256', key).update(`session.k1.${body}`, 'latin1').digest('base64url')}`;
    assert.deepEqual(keys.open('session', before), [1, 2, 'subject', '', 'id', 10, 20, 0]);
    assert.equal(keys.sign('session', [1, 2, 'subject', '', 'id', 10, 20, 0]), before, 'and is what sessions are still signed as');
    assert.equal(keys.open('login', before), undefined, 'never read as a login attempt');
  });
});
