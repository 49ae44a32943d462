// Origin URLs and the addresses an origin may not have: what the control API checks on the URL and the edge checks
// on every resolved address, both from src/shared/origin-url.ts.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalOriginUrl, isPrivateAddress, isPrivateHost, OriginUrlError } from '../../src/shared/origin-url.ts';

describe('origin addresses', () => {
  it('counts loopback, unspecified, private, CGNAT and link-local addresses (IPv4, IPv6, IPv4-mapped) as private', () => {
    const priv = [
      '127.0.0.1', '127.255.0.9', '0.0.0.0', '0.1.2.3', '10.0.0.1', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254',
      '100.64.0.1', '100.127.255.255', '::', '::1', '::127.0.0.1', 'fc00::1', 'fdff::1', 'fe80::1', 'febf::1', 'fec0::1',
      '::ffff:127.0.0.1', '::ffff:10.1.2.3', '[::1]', 'fe80::1%eth0',
    ];
    for (const a of priv) assert.equal(isPrivateAddress(a), true, a);
    const pub = ['8.8.8.8', '172.15.255.255', '172.32.0.1', '100.63.255.255', '100.128.0.1', '192.169.0.1', '203.0.113.10', '2001:db8::1', '2606:4700::1111', '::ffff:8.8.8.8', 'fcd::1'];
    for (const a of pub) assert.equal(isPrivateAddress(a), false, a);
    // Whatever is not an address is never connected to.
    assert.equal(isPrivateAddress('example.com'), true);
    assert.equal(isPrivateAddress(''), true);
  });

  it('judges a URL host by what it says: private literals and localhost names; other names are left to resolution', () => {
    for (const h of ['localhost', 'LOCALHOST', 'localhost.', 'app.localhost', '127.0.0.1', '[::1]', '[::ffff:7f00:1]']) assert.equal(isPrivateHost(h), true, h);
    for (const h of ['example.com', 'localhost.example.com', 'rebind.test', '8.8.8.8', '[2001:db8::1]']) assert.equal(isPrivateHost(h), false, h);
  });
});

describe('canonicalOriginUrl', () => {
  it('keeps scheme, host, port and path, without a trailing slash or default port', () => {
    assert.equal(canonicalOriginUrl('https://Example.COM/app/', false), 'https://example.com/app');
    assert.equal(canonicalOriginUrl('https://example.com:443', false), 'https://example.com');
    assert.equal(canonicalOriginUrl('http://example.com:8080/', false), 'http://example.com:8080');
    assert.equal(canonicalOriginUrl('http://example.com/?', false), 'http://example.com');
    assert.equal(canonicalOriginUrl('http://127.0.0.1:3000/', true), 'http://127.0.0.1:3000');
    // Numeric shorthands are normalised by the URL parser before they are judged.
    assert.throws(() => canonicalOriginUrl('http://2130706433/', false), /private/);
    assert.throws(() => canonicalOriginUrl('http://0x7f.1/', false), /private/);
  });

  it('refuses what cannot be an origin, saying why', () => {
    const reasons: Array<[string, RegExp]> = [
      ['not a url', /not a valid absolute URL/],
      ['ftp://example.com', /only http and https/],
      ['http://u:p@example.com', /credentials/],
      ['http://example.com/?q=1', /no query or fragment/],
      ['http://example.com/#x', /no query or fragment/],
      ['http://localhost:3000', /private, loopback and link-local/],
      ['http://[fe80::1]/', /private, loopback and link-local/],
    ];
    for (const [raw, reason] of reasons) {
      assert.throws(() => canonicalOriginUrl(raw, false), (err: unknown) => err instanceof OriginUrlError && reason.test(err.message), raw);
    }
  });
});
