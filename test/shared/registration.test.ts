// The edge's identity assertion (src/shared/registration.ts): what one node signs every node sharing EDGE_SECRET_KEY
// verifies, for that endpoint only and until it expires; anything altered or foreign verifies as nothing.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SecretBox } from '../../src/shared/secrets.ts';
import { signVisitorIdentity, verifyVisitorIdentity } from '../../src/shared/registration.ts';

const box = new SecretBox('registration-test-secret');
const endpoint = '6f1c2a7e-1b0f-4a57-9c1d-2f3e4a5b6c7d';
const claims = { endpoint, provider: '12', subject: 'user-1', email: 'Ann@Example.com', exp: 2_000 };

describe('visitor identity assertion', () => {
  it('verifies on another node with the same secret, e-mail lower-cased', () => {
    const token = signVisitorIdentity(box, claims);
    assert.deepEqual(verifyVisitorIdentity(new SecretBox('registration-test-secret'), token, endpoint, 1_000), {
      ...claims,
      email: 'ann@example.com',
    });
  });

  it('carries a null e-mail', () => {
    const token = signVisitorIdentity(box, { ...claims, email: null });
    assert.equal(verifyVisitorIdentity(box, token, endpoint, 1_000)?.email, null);
  });

  it('is nothing once expired, for another endpoint, under another secret, or altered', () => {
    const token = signVisitorIdentity(box, claims);
    assert.equal(verifyVisitorIdentity(box, token, endpoint, 2_000), null);
    assert.equal(verifyVisitorIdentity(box, token, '00000000-0000-4000-8000-000000000000', 1_000), null);
    assert.equal(verifyVisitorIdentity(new SecretBox('other'), token, endpoint, 1_000), null);
    const [payload, mac] = token.split('.');
    const forged = Buffer.from(JSON.stringify({ ...claims, subject: 'admin' })).toString('base64url');
    assert.equal(verifyVisitorIdentity(box, `${forged}.${mac}`, endpoint, 1_000), null);
    assert.equal(verifyVisitorIdentity(box, `${payload}.${mac}x`, endpoint, 1_000), null);
    for (const junk of ['', '.', 'abc', `${payload}.${mac}.x`, `.${mac}`]) {
      assert.equal(verifyVisitorIdentity(box, junk, endpoint, 1_000), null, junk);
    }
  });
});
