// Reading visitor credentials (Authorization schemes, Basic's user-id:password) and removing a consumed cookie from
// the forwarded Cookie field; and the one rule for values the edge vouches for as field values.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { asHeaderValue, basicCredentials, credentialsOf, withoutCookie } from '../../../src/edge/http/credentials.ts';

describe('visitor credentials', () => {
  it('reads the credentials of one scheme, case-insensitively, after one or more spaces', () => {
    assert.equal(credentialsOf('Bearer abc.def', 'bearer'), 'abc.def');
    assert.equal(credentialsOf('BEARER    abc', 'bearer'), 'abc');
    assert.equal(credentialsOf('basic dXNlcjpwdw==', 'basic'), 'dXNlcjpwdw==');
    for (const field of [undefined, '', 'Bearer', 'Bearer ', 'Bearerabc', 'Basic abc', 'Token abc', 'Bearer\tabc']) {
      assert.equal(credentialsOf(field, 'bearer'), undefined, String(field));
    }
  });

  it('splits Basic credentials at the first colon (RFC 7617: the password may hold colons), as UTF-8', () => {
    const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
    assert.deepEqual(basicCredentials(b64('alice:pa:ss'))?.username, 'alice');
    assert.deepEqual(basicCredentials(b64('alice:pa:ss'))?.password, 'pa:ss');
    assert.deepEqual(basicCredentials(b64('jörg:pässwörd')), { username: 'jörg', password: 'pässwörd', raw: Buffer.from('jörg:pässwörd') });
    assert.equal(basicCredentials(b64(':'))?.username, '');
    assert.equal(basicCredentials(b64('no colon')), undefined);
    assert.equal(basicCredentials('not base64!'), undefined);
    assert.equal(basicCredentials(''), undefined);
  });

  it('removes every pair of one cookie and keeps the others byte for byte', () => {
    assert.equal(withoutCookie('a=1; tok=secret; b="2"', 'tok'), 'a=1; b="2"');
    assert.equal(withoutCookie('tok=1;tok=2; c=3', 'tok'), 'c=3');
    assert.equal(withoutCookie(['a=1', 'tok=x'], 'tok'), 'a=1');
    assert.equal(withoutCookie('tok=only', 'tok'), undefined);
    assert.equal(withoutCookie('token=keep; tok2=keep', 'tok'), 'token=keep; tok2=keep', 'names are compared whole');
    assert.equal(withoutCookie(undefined, 'tok'), undefined);
    assert.equal(withoutCookie('a=1;; ; b=2', 'tok'), 'a=1; b=2');
  });

  it('keeps printable ASCII as is and JSON-escapes anything else into one ASCII value', () => {
    assert.equal(asHeaderValue('alice@example.com'), 'alice@example.com');
    assert.equal(asHeaderValue('["a","b"]'), '["a","b"]');
    assert.equal(asHeaderValue('José'), '"Jos\\u00e9"');
    assert.equal(asHeaderValue('a\r\nInjected: 1'), '"a\\r\\nInjected: 1"');
    assert.equal(asHeaderValue('日本'), '"\\u65e5\\u672c"');
    assert.equal(JSON.parse(asHeaderValue('José\u0000')), 'José\u0000', 'lossless');
  });
});
