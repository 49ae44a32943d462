// What control and edge share about visitor credentials: the keyed token digest and its derived key, the mode GET
// settings reports, where token mode reads the token, and which header names a claim or a credential may use.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { SecretBox } from '../../src/shared/secrets.ts';
import {
  claimHeaderRefusal,
  credentialHeaderRefusal,
  isFieldName,
  reportedAuthMode,
  tokenDigest,
  tokenSourceOf,
  visitorTokenKey,
} from '../../src/shared/visitor-credentials.ts';

describe('SecretBox.derive', () => {
  it('gives every node with the same secret the same 256-bit key per purpose, and unrelated keys across purposes and secrets', () => {
    const a = new SecretBox('one secret');
    assert.equal(a.derive('x').length, 32);
    assert.deepEqual(a.derive('x'), new SecretBox('one secret').derive('x'));
    assert.notDeepEqual(a.derive('x'), a.derive('y'));
    assert.notDeepEqual(a.derive('x'), new SecretBox('another secret').derive('x'));
    assert.throws(() => a.derive(''), /purpose/);
  });

  it('leaves sealing untouched: what was sealed still opens', () => {
    const box = new SecretBox('k');
    box.derive('anything');
    assert.equal(box.open(box.seal('hello')), 'hello');
  });
});

describe('tokenDigest', () => {
  it('is HMAC-SHA256 under the derived key, base64url, 43 characters', () => {
    const key = visitorTokenKey(new SecretBox('k'));
    const digest = tokenDigest(key, 'my-token-0123456789');
    assert.equal(digest, createHmac('sha256', key).update('my-token-0123456789').digest('base64url'));
    assert.match(digest, /^[A-Za-z0-9_-]{43}$/);
  });

  it('differs per token and per platform key', () => {
    const key = visitorTokenKey(new SecretBox('k'));
    assert.notEqual(tokenDigest(key, 'a'.repeat(20)), tokenDigest(key, 'a'.repeat(19) + 'b'));
    assert.notEqual(tokenDigest(key, 'a'.repeat(20)), tokenDigest(visitorTokenKey(new SecretBox('other')), 'a'.repeat(20)));
  });
});

describe('reportedAuthMode', () => {
  const bearer = { kind: 'bearer' } as const;
  it('maps every write mode as docs/visitor-auth.md says', () => {
    assert.equal(reportedAuthMode('none', bearer, false), 'none');
    assert.equal(reportedAuthMode('none', bearer, true), 'jwt');
    assert.equal(reportedAuthMode('basic', bearer, false), 'basic');
    assert.equal(reportedAuthMode('basic', bearer, true), 'basic');
    assert.equal(reportedAuthMode('token', bearer, false), 'token');
    assert.equal(reportedAuthMode('token', { kind: 'header', name: 'x-api-token' }, true), 'header');
    assert.equal(reportedAuthMode('token', { kind: 'cookie', name: 'tok' }, false), 'cookie');
    assert.equal(reportedAuthMode('oauth', bearer, false), 'sso');
    assert.equal(reportedAuthMode('oidc', bearer, true), 'sso');
  });

  it('ignores a stored token source outside token mode', () => {
    assert.equal(reportedAuthMode('basic', { kind: 'header', name: 'x-api-token' }, false), 'basic');
  });
});

describe('tokenSourceOf', () => {
  it('reads a header (lower-cased), a cookie, or defaults to Authorization: Bearer', () => {
    assert.deepEqual(tokenSourceOf(undefined), { kind: 'bearer' });
    assert.deepEqual(tokenSourceOf({}), { kind: 'bearer' });
    assert.deepEqual(tokenSourceOf({ header: 'X-Api-Token' }), { kind: 'header', name: 'x-api-token' });
    assert.deepEqual(tokenSourceOf({ cookie: 'Tok' }), { kind: 'cookie', name: 'Tok' });
    assert.deepEqual(tokenSourceOf({ header: 5 }), { kind: 'bearer' });
  });
});

describe('header names', () => {
  it('accepts RFC 9110 tokens as field names and nothing else', () => {
    for (const ok of ['x-user', 'X_User', "a!#$%&'*+-.^_`|~z", 'X1']) assert.ok(isFieldName(ok), ok);
    for (const bad of ['', 'x user', 'x:y', 'x(y)', 'x"y', 'é', 'x\ny', 'x/y']) assert.ok(!isFieldName(bad), bad);
  });

  it('refuses claim headers that are hop-by-hop, framing, credentials, edge-owned or X-Edge-*, in any spelling', () => {
    for (const name of [
      'host',
      'Content-Length',
      'transfer-encoding',
      'connection',
      'Keep-Alive',
      'TE',
      'Trailer',
      'Upgrade',
      'Proxy-Authorization',
      'proxy_connection',
      'Authorization',
      'cookie',
      'x-forwarded-for',
      'X_Forwarded_For',
      'X-FORWARDED-HOST',
      'x-forwarded-anything',
      'Forwarded',
      'X-Real-IP',
      'x_real_ip',
      'True-Client-IP',
      'X-Edge-Auth-User',
      'x_edge_claim',
      'bad header',
      '',
    ]) {
      assert.notEqual(claimHeaderRefusal(name), null, name);
    }
    for (const name of ['X-User', 'x-user-email', 'X_Tenant', 'Remote-User']) assert.equal(claimHeaderRefusal(name), null, name);
  });

  it('lets a credential be read from Authorization or a custom header, never from hop-by-hop, framing or edge-owned ones', () => {
    for (const name of ['Authorization', 'X-Api-Token', 'x-hub-signature-256']) assert.equal(credentialHeaderRefusal(name), null, name);
    for (const name of ['Host', 'Connection', 'Content-Length', 'X-Forwarded-For', 'X-Edge-Auth-User', 'x y']) {
      assert.notEqual(credentialHeaderRefusal(name), null, name);
    }
  });
});
