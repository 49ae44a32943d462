// The control API's shared field checks (src/control/validation.ts) on their own: each answers a canonical value
// or a 400 invalid_request whose detail names the field and the reason.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { futureInstant, parseOriginUrl, SCOPE_TOKEN_PATTERN, TOKEN_PATTERN, uuidOrId } from '../../src/control/validation.ts';

const refusedAt = (field: string) => (err: any) => err.code === 'invalid_request' && err.status === 400 && err.detail?.field === field && typeof err.detail?.reason === 'string';

describe('shared field validation', () => {
  it('takes a future instant in canonical UTC and refuses a past, present or unreadable one by field', () => {
    const soon = new Date(Date.now() + 3_600_000);
    const offset = soon.toISOString().replace('Z', '+00:00');
    assert.equal(futureInstant('expires_at', offset), soon.toISOString());
    for (const raw of ['2000-01-01T00:00:00Z', new Date(Date.now() - 1000).toISOString(), 'tomorrow', '']) {
      assert.throws(() => futureInstant('tokens.0.expires_at', raw), refusedAt('tokens.0.expires_at'), raw);
    }
  });

  it('makes an origin URL canonical and refuses what the origin policy refuses, naming the url', () => {
    assert.equal(parseOriginUrl('https://Example.COM/app/', false), 'https://example.com/app');
    for (const raw of ['ftp://example.com/', 'https://u:p@example.com/', 'http://127.0.0.1:8080/', 'https://example.com/?q=1']) {
      assert.throws(() => parseOriginUrl(raw, false), (err: any) => err.code === 'invalid_request' && err.detail?.field === 'url' && typeof err.detail.reason === 'string', raw);
    }
    assert.equal(parseOriginUrl('http://127.0.0.1:8080/', true), 'http://127.0.0.1:8080', 'private origins with operator consent');
  });

  it('matches tokens and scopes by their RFC grammars', () => {
    const token = new RegExp(TOKEN_PATTERN);
    for (const ok of ['abcDEF0123456789', 'a-b.c_d~e+f/g==']) assert.ok(token.test(ok), ok);
    for (const bad of ['has space', 'quote"', 'pad=in-middle', 'ünï']) assert.ok(!token.test(bad), bad);
    const scope = new RegExp(SCOPE_TOKEN_PATTERN);
    for (const ok of ['openid', 'https://graph.example/read', 'user:email']) assert.ok(scope.test(ok), ok);
    for (const bad of ['two words', 'back\\slash', 'quo"te', '']) assert.ok(!scope.test(bad), bad);
  });

  it('reads a resource named by uuid (lower-cased) or positive int64 id, and nothing else', () => {
    assert.deepEqual(uuidOrId('6F1C3C52-2B5E-4D2A-9D3B-0A1B2C3D4E5F'), { uuid: '6f1c3c52-2b5e-4d2a-9d3b-0a1b2c3d4e5f' });
    assert.deepEqual(uuidOrId('42'), { id: 42 });
    assert.deepEqual(uuidOrId(42), { id: 42 });
    for (const bad of ['', 'x', '-1', '0', '1.5', '9223372036854775808', '6f1c3c52-2b5e-4d2a-9d3b'] as const) assert.equal(uuidOrId(bad), null, bad);
    for (const bad of [0, -1, 1.5, 2 ** 53]) assert.equal(uuidOrId(bad), null, String(bad));
  });
});
