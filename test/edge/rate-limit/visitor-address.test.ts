// The visitor address behind trusted proxies (right-most untrusted X-Forwarded-For hop, never a visitor's own
// header) and the rate-limit key (IPv4, IPv4-mapped IPv6 as IPv4, other IPv6 by its /64).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { compileTrustedProxies, forwardedClient, rateLimitKey } from '../../../src/edge/rate-limit/visitor-address.ts';
import { loadConfig, ConfigError } from '../../../src/shared/config.ts';

describe('visitor address', () => {
  const trusted = compileTrustedProxies('10.0.0.0/8, 2001:db8:ffff::/48')!;

  it('takes the right-most X-Forwarded-For entry that is not a trusted proxy', () => {
    assert.equal(forwardedClient('10.0.0.1', '203.0.113.7', trusted), '203.0.113.7');
    // The visitor wrote 1.2.3.4 themselves; 198.51.100.2 reached the first trusted proxy.
    assert.equal(forwardedClient('10.0.0.1', '1.2.3.4, 198.51.100.2, 10.9.9.9', trusted), '198.51.100.2');
    assert.equal(forwardedClient('10.0.0.1', ['1.2.3.4', '198.51.100.2'], trusted), '198.51.100.2');
    assert.equal(forwardedClient('::ffff:10.0.0.1', '2001:db8::5', trusted), '2001:db8::5');
    // Every hop trusted: the left-most.
    assert.equal(forwardedClient('10.0.0.1', '10.1.1.1, 2001:db8:ffff::1', trusted), '10.1.1.1');
  });

  it('ignores X-Forwarded-For from an untrusted peer, and a malformed header from a trusted one', () => {
    assert.equal(forwardedClient('198.51.100.9', '1.2.3.4', trusted), '198.51.100.9');
    assert.equal(forwardedClient('10.0.0.1', 'unknown, 1.2.3.4', trusted), '1.2.3.4');
    assert.equal(forwardedClient('10.0.0.1', '1.2.3.4, nonsense', trusted), '10.0.0.1');
    assert.equal(forwardedClient('10.0.0.1', '1.2.3.4:80', trusted), '10.0.0.1');
    assert.equal(forwardedClient('10.0.0.1', 'fe80::1%eth0', trusted), '10.0.0.1');
    assert.equal(forwardedClient('10.0.0.1', undefined, trusted), '10.0.0.1');
    assert.equal(forwardedClient('10.0.0.1', ' , ', trusted), '10.0.0.1');
  });

  it('keys IPv4 as is, IPv4-mapped IPv6 as IPv4, other IPv6 by its /64', () => {
    assert.equal(rateLimitKey('203.0.113.7'), '203.0.113.7');
    assert.equal(rateLimitKey('::ffff:203.0.113.7'), '203.0.113.7');
    assert.equal(rateLimitKey('::ffff:cb00:7107'), '203.0.113.7');
    assert.equal(rateLimitKey('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64');
    assert.equal(rateLimitKey('2001:db8:1:2:ffff:ffff:ffff:ffff'), '2001:db8:1:2::/64');
    assert.notEqual(rateLimitKey('2001:db8:1:3::1'), rateLimitKey('2001:db8:1:2::1'));
  });

  it('refuses a malformed EDGE_TRUSTED_PROXIES at start, naming it', () => {
    assert.equal(compileTrustedProxies(''), null);
    assert.throws(() => loadConfig({ EDGE_TRUSTED_PROXIES: '10.0.0.0/8, nonsense' }), (err: Error) => err instanceof ConfigError && /EDGE_TRUSTED_PROXIES/.test(err.message) && /nonsense/.test(err.message));
    assert.throws(() => loadConfig({ EDGE_TRUSTED_PROXIES: '10.0.0.0/33' }), ConfigError);
    assert.equal(loadConfig({ EDGE_TRUSTED_PROXIES: '10.0.0.0/8,::1' }).edge.trustedProxies, '10.0.0.0/8,::1');
  });
});
