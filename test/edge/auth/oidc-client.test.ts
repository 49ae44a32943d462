// The pure parts of the relying party: who a provider's answer names, which identities the allow-lists admit, and
// which failures are the provider's outage (503) rather than a failed login.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ClientError } from 'openid-client';

/** openid-client's error as it builds them (its constructor's options type omits `code`). */
const clientError = (message: string, options: { cause?: unknown; code?: string }) => new ClientError(message, options as ErrorOptions);
import { identityFrom, isOutage, LoginFailedError, refusalOf } from '../../../src/edge/auth/oidc-client.ts';
import { FetchRefusedError } from '../../../src/edge/http/policy-fetch.ts';

const set = (...v: string[]) => new Set(v);

describe('relying party helpers', () => {
  it('reads the subject from sub, or an oauth2 provider’s id; the e-mail and its verified flag as given', () => {
    assert.deepEqual(identityFrom({ sub: 'abc', email: ' A@B.example ', email_verified: true }), { subject: 'abc', email: 'A@B.example', emailVerified: true });
    assert.deepEqual(identityFrom({ id: 12345, login: 'octocat', email: null }), { subject: '12345', email: '', emailVerified: undefined });
    assert.equal(identityFrom({ sub: 'x', email_verified: 'false' }).emailVerified, false);
    for (const bad of [{}, { sub: '' }, { sub: Infinity }, { id: { nested: 1 } }]) assert.throws(() => identityFrom(bad), LoginFailedError, JSON.stringify(bad));
  });

  it('admits anyone when both lists are empty; otherwise a verified, listed address or one at a listed domain', () => {
    const alice = { subject: 'a', email: 'Alice@Example.com', emailVerified: true };
    assert.equal(refusalOf({ subject: 'a', email: '', emailVerified: undefined }, set(), set()), null);
    assert.equal(refusalOf(alice, set('alice@example.com'), set()), null);
    assert.equal(refusalOf(alice, set(), set('example.com')), null);
    assert.match(refusalOf(alice, set(), set('sub.example.com'))!, /may not sign in/);
    assert.match(refusalOf({ ...alice, email: 'alice@sub.example.com' }, set(), set('example.com'))!, /may not sign in/, 'a subdomain is not the domain');
    assert.match(refusalOf({ ...alice, emailVerified: false }, set('alice@example.com'), set())!, /not verified/);
    assert.match(refusalOf({ ...alice, email: '' }, set(), set('example.com'))!, /did not share an e-mail/);
    assert.equal(refusalOf({ ...alice, emailVerified: undefined }, set('alice@example.com'), set()), null, 'a provider that says nothing is taken at its word');
    assert.match(refusalOf({ ...alice, email: 'alice@example.com@evil.test' }, set(), set('example.com'))!, /may not sign in/);
  });

  it('tells an outage (refused fetch, timeout, 5xx) from a failed login', () => {
    assert.ok(isOutage(clientError('something went wrong', { cause: new FetchRefusedError('https://idp.example/token', new Error('ECONNREFUSED')) })));
    assert.ok(isOutage(clientError('unexpected HTTP response status code', { cause: new Response('', { status: 502 }), code: 'OAUTH_RESPONSE_IS_NOT_CONFORM' })));
    assert.ok(isOutage(clientError('operation timed out', { code: 'OAUTH_TIMEOUT' })));
    assert.ok(!isOutage(clientError('unexpected HTTP response status code', { cause: new Response('', { status: 400 }), code: 'OAUTH_RESPONSE_IS_NOT_CONFORM' })));
    assert.ok(!isOutage(clientError('unexpected JWT claim value encountered', { code: 'OAUTH_JWT_CLAIM_COMPARISON_FAILED' })));
    assert.ok(!isOutage(new Error('invalid_grant')));
  });
});
