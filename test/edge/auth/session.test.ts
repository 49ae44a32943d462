// The session and login-attempt cookies' signer: values open under the key that signed them and any key still
// configured (rotation), never under a removed key, never for the other purpose, never once a byte is changed.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  clearCookie,
  newSessionId,
  openLogin,
  openSession,
  parseSessionSecrets,
  sealLogin,
  sealSession,
  SESSION_COOKIE,
  SessionKeys,
  setCookie,
  type LoginAttempt,
  type Session,
} from '../../../src/edge/auth/session.ts';
import { loadConfig } from '../../../src/shared/config.ts';
import { SecretBox } from '../../../src/shared/secrets.ts';
import { random } from '../../helpers/random.ts';

const OLD = 'old-session-secret-0123456789abcdef';
const NEW = 'new-session-secret-0123456789abcdef';

const session = (over: Partial<Session> = {}): Session => ({
  endpoint: 42,
  provider: 7,
  subject: 'user-1',
  email: 'user@example.com',
  id: newSessionId(),
  issuedAt: 1_700_000_000,
  expiresAt: 1_700_086_400,
  ...over,
});

describe('session keys', () => {
  it('opens what it sealed, with every field as it was', () => {
    const keys = SessionKeys.fromSettings(OLD, undefined);
    const s = session({ subject: 'bøb "quoted" \\ ; =', email: '', emailVerified: false });
    assert.deepEqual(openSession(keys, sealSession(keys, s)), s);
    const verified = session({ emailVerified: true });
    assert.deepEqual(openSession(keys, sealSession(keys, verified)), verified);
    const a: LoginAttempt = { endpoint: s.endpoint, provider: 3, state: 's', nonce: '', verifier: 'v', returnTo: '/x?y=1', expiresAt: 5 };
    assert.deepEqual(openLogin(keys, sealLogin(keys, a)), a);
  });

  it('reads a session issued before e-mail verification was recorded (7 items) as valid with an unverified e-mail', () => {
    const keys = SessionKeys.fromSettings(OLD, undefined);
    const s = session();
    const old = keys.sign('session', [s.endpoint, s.provider, s.subject, s.email, s.id, s.issuedAt, s.expiresAt]);
    assert.deepEqual(openSession(keys, old), { ...s, emailVerified: false });
    assert.equal(openSession(keys, sealSession(keys, s))?.emailVerified, false, 'absent when sealed: unverified');
    // Anything but 0 or 1 in the verification slot is not a session of ours.
    assert.equal(openSession(keys, keys.sign('session', [s.endpoint, s.provider, s.subject, s.email, s.id, s.issuedAt, s.expiresAt, true])), undefined);
  });

  it('rotates: the first key signs, every configured key verifies, a removed key no longer does', () => {
    const before = SessionKeys.fromSettings(OLD, undefined);
    const during = SessionKeys.fromSettings(`${NEW}, ${OLD}`, undefined);
    const after = SessionKeys.fromSettings(NEW, undefined);
    const old = sealSession(before, session());
    const fresh = sealSession(during, session());
    assert.ok(openSession(during, old), 'sessions signed with the old key keep working while it is listed');
    assert.ok(openSession(after, fresh), 'new sessions are signed with the new key');
    assert.equal(openSession(after, old), undefined, 'the old key removed: its sessions end');
    assert.equal(openSession(before, fresh), undefined);
  });

  it('derives its key from EDGE_SECRET_KEY when no keys are configured: equal boxes agree, others do not', () => {
    const a = SessionKeys.fromSettings('', new SecretBox('cluster-secret'));
    const b = SessionKeys.fromSettings('', new SecretBox('cluster-secret'));
    const c = SessionKeys.fromSettings('', new SecretBox('another-secret'));
    const value = sealSession(a, session());
    assert.ok(openSession(b, value));
    assert.equal(openSession(c, value), undefined);
    assert.throws(() => SessionKeys.fromSettings('', undefined), /EDGE_SESSION_KEYS or the edge secret key/);
  });

  it('binds values to an endpoint: keys derived for one endpoint open nothing made for another', () => {
    const keys = SessionKeys.fromSettings(`${NEW},${OLD}`, undefined);
    const a = keys.forEndpoint('0b7d4c8e-2a61-4f3b-9f0e-6d1c2b3a4e5f');
    const b = keys.forEndpoint('7c1e0f3a-9d2b-4e5f-8a6b-1c2d3e4f5a6b');
    const value = sealSession(a, session());
    assert.ok(openSession(keys.forEndpoint('0b7d4c8e-2a61-4f3b-9f0e-6d1c2b3a4e5f'), value), 'derived again: the same keys');
    assert.equal(openSession(b, value), undefined);
    assert.equal(openSession(keys, value), undefined, 'nor under the keys they were derived from');
    // Rotation carries over: a value made under the old key's derivation opens once the new key signs.
    const old = sealSession(SessionKeys.fromSettings(OLD, undefined).forEndpoint('0b7d4c8e-2a61-4f3b-9f0e-6d1c2b3a4e5f'), session());
    assert.ok(openSession(a, old));
  });

  it('never opens a value for the other purpose', () => {
    const keys = SessionKeys.fromSettings(OLD, undefined);
    const login = keys.sign('login', [42, 7, 'user-1', 'user@example.com', 'id', 1, 2]);
    assert.equal(openSession(keys, login), undefined, 'a login attempt shaped like a session is still not one');
    assert.equal(openLogin(keys, sealSession(keys, session())), undefined);
  });

  it('refuses any changed character (fuzzed with a fixed seed), and values that are not ours', () => {
    const keys = SessionKeys.fromSettings(OLD, undefined);
    const value = sealSession(keys, session());
    const rand = random(0x5e55);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.';
    for (let i = 0; i < 2000; i++) {
      const at = rand(value.length);
      const c = alphabet[rand(alphabet.length)];
      if (c === value[at]) continue;
      const changed = value.slice(0, at) + c + value.slice(at + 1);
      // base64url's last character may carry unused bits: a change there can decode to the same bytes.
      const same = Buffer.from(changed.split('.')[2] ?? '', 'base64url').equals(Buffer.from(value.split('.')[2], 'base64url')) && changed.split('.').slice(0, 2).join('.') === value.split('.').slice(0, 2).join('.');
      if (same) continue;
      assert.equal(openSession(keys, changed), undefined, changed);
    }
    for (const bad of ['', '.', '..', 'a.b.c', `${value}.x`, value.split('.').slice(0, 2).join('.'), randomBytes(40).toString('base64url')]) {
      assert.equal(openSession(keys, bad), undefined, bad);
    }
    // A payload of the wrong shape under a valid MAC is refused too.
    assert.equal(openSession(keys, keys.sign('session', { endpoint: 'x' })), undefined);
    assert.equal(openSession(keys, keys.sign('session', [42, '7', 's', 'e', 'i', 1, 2])), undefined, 'provider must be a number');
    assert.equal(openSession(keys, keys.sign('session', ['42', 7, 's', 'e', 'i', 1, 2])), undefined, 'endpoint must be a number');
  });

  it('compares the MAC as text, and a refusal leaves nothing behind for the next value (the compare reuses two buffers)', () => {
    const keys = SessionKeys.fromSettings(OLD, undefined);
    const value = sealSession(keys, session({ subject: 'user-a' }));
    const other = sealSession(keys, session({ subject: 'user-b' }));
    const [kid, body, mac] = value.split('.');
    assert.equal(mac.length, 43);
    // The last of 43 characters carries 4 bits; its neighbour in the alphabet decodes to the same 32 bytes.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const sibling = mac.slice(0, 42) + alphabet[alphabet.indexOf(mac[42]) + 1];
    assert.ok(Buffer.from(sibling, 'base64url').equals(Buffer.from(mac, 'base64url')));
    const near = [`${kid}.${body}.${sibling}`, `${kid}.${body}.${mac}=`, `${kid}.${body}.${mac.slice(0, 42)}`, `${kid}.${body}.${other.split('.')[2]}`];
    for (const bad of near) {
      assert.equal(openSession(keys, bad), undefined, bad);
      assert.equal(openSession(keys, value)?.subject, 'user-a');
      assert.equal(openSession(keys, other)?.subject, 'user-b');
    }
  });

  it('takes EDGE_SESSION_KEYS as comma-separated secrets of 32 characters or more', () => {
    assert.deepEqual(parseSessionSecrets(''), []);
    assert.deepEqual(parseSessionSecrets(` ${NEW} ,${OLD},`), [NEW, OLD]);
    assert.throws(() => parseSessionSecrets(`${NEW},short`), /at least 32 characters/);
  });

  it('reads EDGE_SESSION_KEYS and EDGE_SESSION_TTL_SECONDS at start, refusing bad values without quoting a secret', () => {
    const defaults = loadConfig({});
    assert.equal(defaults.edge.sessionKeys, '');
    assert.equal(defaults.edge.sessionTtlSeconds, 86400);
    const set = loadConfig({ EDGE_SESSION_KEYS: `${NEW},${OLD}`, EDGE_SESSION_TTL_SECONDS: '3600' });
    assert.equal(set.edge.sessionKeys, `${NEW},${OLD}`);
    assert.equal(set.edge.sessionTtlSeconds, 3600);
    assert.throws(
      () => loadConfig({ EDGE_SESSION_KEYS: `${NEW},too-short-secret` }),
      (err: Error) => err.message.includes('EDGE_SESSION_KEYS') && !err.message.includes('too-short-secret'),
    );
    for (const ttl of ['0', '59', '31622401', 'day']) assert.throws(() => loadConfig({ EDGE_SESSION_TTL_SECONDS: ttl }), /EDGE_SESSION_TTL_SECONDS/, ttl);
  });

  it('writes __Host- cookies: Secure, HttpOnly, SameSite=Lax, Path=/, no Domain; clearing uses the same attributes', () => {
    assert.equal(setCookie(SESSION_COOKIE, 'v', 86400.7), '__Host-edge_session=v; Max-Age=86400; Path=/; Secure; HttpOnly; SameSite=Lax');
    assert.equal(clearCookie(SESSION_COOKIE), '__Host-edge_session=; Max-Age=0; Path=/; Secure; HttpOnly; SameSite=Lax');
    assert.notEqual(newSessionId(), newSessionId());
  });
});
