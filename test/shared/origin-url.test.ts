// Origin URLs: their canonical form and what the control API refuses, by what the URL says, with the platform's address
// policy (src/shared/address-policy.ts, tested on its own in address-policy.test.ts).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalOriginUrl, OriginUrlError } from '../../src/shared/origin-url.ts';

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

  // Issue 8 item 8: IPv6 literals that embed a private IPv4 address were accepted as origins.
  it('refuses IPv6 literals that embed a private IPv4 address, naming it, and allows them around a public one', () => {
    const embedded: Array<[string, string]> = [
      ['http://[64:ff9b::a00:1]/', '10.0.0.1'],
      ['http://[64:ff9b::7f00:1]:8080', '127.0.0.1'],
      ['https://[64:ff9b::a9fe:a9fe]/latest', '169.254.169.254'],
      ['http://[2002:c0a8:101::1]/', '192.168.1.1'],
      ['http://[2001:0:808:808::f5ff:fffe]/', '10.0.0.1'],
      ['http://[2001:0:a00:1::fefe:fefe]/', '10.0.0.1'],
      ['http://[::a00:1]/', '10.0.0.1'],
      ['http://[::ffff:0:a00:1]/', '10.0.0.1'],
      ['http://[::ffff:10.0.0.1]/', '10.0.0.1'],
    ];
    for (const [raw, v4] of embedded) {
      assert.throws(
        () => canonicalOriginUrl(raw, false),
        (err: unknown) => err instanceof OriginUrlError && /private, loopback and link-local/.test(err.message) && err.message.includes(`embeds ${v4}`),
        raw,
      );
      assert.equal(new URL(canonicalOriginUrl(raw, true)).host, new URL(raw).host, `${raw} with private origins allowed`);
    }
    assert.throws(() => canonicalOriginUrl('http://[64:ff9b:1::808:808]/', false), /RFC 8215/);
    assert.equal(canonicalOriginUrl('http://[64:ff9b::808:808]/app', false), 'http://[64:ff9b::808:808]/app');
    assert.equal(canonicalOriginUrl('http://[2002:808:808::1]', false), 'http://[2002:808:808::1]');
    assert.equal(canonicalOriginUrl('https://[2606:4700::1111]:8443/', false), 'https://[2606:4700::1111]:8443');
  });

  it('refuses every other range that is not public unicast: documentation, benchmarking, multicast, broadcast, reserved', () => {
    for (const raw of ['http://203.0.113.10', 'http://198.51.100.1', 'http://192.0.2.1', 'http://[2001:db8::1]', 'http://198.18.0.1', 'http://224.0.0.1', 'http://255.255.255.255', 'http://240.0.0.1', 'http://[ff02::1]', 'http://100.64.0.1']) {
      assert.throws(() => canonicalOriginUrl(raw, false), (err: unknown) => err instanceof OriginUrlError && /is in the \w+ range/.test(err.message), raw);
    }
    for (const raw of ['http://8.8.8.8', 'http://172.32.0.1', 'http://100.128.0.1', 'http://198.20.0.1']) assert.equal(canonicalOriginUrl(raw, false), raw);
  });
});
