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
    // Several names at once (the login session's two cookies); a name that only starts the same is kept.
    assert.equal(withoutCookie('__Host-edge_session=s; app=1; __Host-edge_login=l; __Host-edge_sessionx=k', ['__Host-edge_session', '__Host-edge_login']), 'app=1; __Host-edge_sessionx=k');
    assert.equal(withoutCookie('__Host-edge_session=s', ['__Host-edge_session', '__Host-edge_login']), undefined);
    assert.equal(withoutCookie('token=keep; tok2=keep', 'tok'), 'token=keep; tok2=keep', 'names are compared whole');
    assert.equal(withoutCookie(undefined, 'tok'), undefined);
    assert.equal(withoutCookie('a=1;; ; b=2', 'tok'), 'a=1; b=2');
  });

  it('keeps printable ASCII as is and JSON-escapes anything else into one ASCII value', () => {
    assert.equal(asHeaderValue('alice@example.com'), 'alice@example.com');
    assert.equal(asHeaderValue('ci pipeline 2'), 'ci pipeline 2');
    assert.equal(asHeaderValue('42nd street'), '42nd street', 'only a whole JSON number reads as one');
    assert.equal(asHeaderValue('trueish'), 'trueish');
    assert.equal(asHeaderValue(''), '');
    assert.equal(asHeaderValue('José'), '"Jos\\u00e9"');
    assert.equal(asHeaderValue('a\r\nInjected: 1'), '"a\\r\\nInjected: 1"');
    assert.equal(asHeaderValue('日本'), '"\\u65e5\\u672c"');
    assert.equal(JSON.parse(asHeaderValue('José\u0000')), 'José\u0000', 'lossless');
  });

  /** The documented reading of a value the edge vouches for (docs/visitor-auth.md): JSON when it parses, else the text. */
  const readBack = (field: string): unknown => {
    try {
      return JSON.parse(field);
    } catch {
      return field;
    }
  };

  it('asHeaderValue ambiguity: a string that reads as JSON is JSON-encoded, so it never arrives as another value would', () => {
    // The review's cases: a string claim spelled like a JSON string or array reached the service as the escaped
    // string or the array itself would.
    assert.equal(asHeaderValue('"\\u0061dmin"'), '"\\"\\\\u0061dmin\\""');
    assert.notEqual(asHeaderValue('"\\u0061dmin"'), asHeaderValue('admin'));
    assert.equal(asHeaderValue('["admin"]'), '"[\\"admin\\"]"');
    assert.equal(asHeaderValue(['admin']), '["admin"]');
    assert.notEqual(asHeaderValue('["admin"]'), asHeaderValue(['admin']));
    assert.equal(asHeaderValue('{"role":"admin"}'), '"{\\"role\\":\\"admin\\"}"');
    // Scalars: a string that is a whole JSON literal is quoted, the value itself is not.
    assert.equal(asHeaderValue('5'), '"5"');
    assert.equal(asHeaderValue(5), '5');
    assert.equal(asHeaderValue('-1.5e3'), '"-1.5e3"');
    assert.equal(asHeaderValue('true'), '"true"');
    assert.equal(asHeaderValue(true), 'true');
    assert.equal(asHeaderValue('null'), '"null"');
    assert.equal(asHeaderValue(null), 'null');
    // Spaces at either end would be stripped as OWS (RFC 9110 §5.5): quoted, so they survive.
    assert.equal(asHeaderValue(' padded '), '" padded "');
  });

  it('asHeaderValue ambiguity: every value reads back as itself, and distinct values never share a field value', () => {
    const values: unknown[] = [
      'admin', '"admin"', '"\\u0061dmin"', '\\u0061dmin', '["admin"]', ['admin'], '{"a":1}', { a: 1 }, '{}', {}, '[]', [],
      '5', 5, '05', '-', '-5', -5, '1e3', 1000, '0.5', 0.5, 'true', true, 'false', false, 'null', null, '', ' ', ' a', 'a ',
      'bøb', '"b\\u00f8b"', 'b\\u00f8b', 'José\u0000', 'a\r\nInjected: 1', '日本', ['a', 'ß', 1, null], { nested: { x: ['y'] } }, 'x"y', "it's",
    ];
    const seen = new Map<string, unknown>();
    for (const value of values) {
      const field = asHeaderValue(value);
      assert.match(field, /^[\x20-\x7e]*$/, `${JSON.stringify(value)} as printable ASCII`);
      assert.ok(field === '' || (field.trim() === field), `${JSON.stringify(value)}: no space at either end`);
      assert.deepEqual(readBack(field), value, `${JSON.stringify(value)} read back from ${field}`);
      assert.ok(!seen.has(field), `${JSON.stringify(value)} and ${JSON.stringify(seen.get(field))} both sent as ${field}`);
      seen.set(field, value);
    }
  });
});
