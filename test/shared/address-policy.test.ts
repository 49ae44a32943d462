// The platform's one address policy (src/shared/address-policy.ts): only public unicast addresses, IPv6 forms that
// embed an IPv4 address judged by that address, and URL hosts judged by what they say.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { addressRefusal, hostRefusal, isPublicAddress, urlHostIsPrivate } from '../../src/shared/address-policy.ts';
import { random } from '../helpers/random.ts';

function refused(addresses: string[]): void {
  for (const a of addresses) assert.equal(isPublicAddress(a), false, `${a} should be refused`);
}
function allowed(addresses: string[]): void {
  for (const a of addresses) assert.equal(isPublicAddress(a), true, `${a} should be public: ${addressRefusal(a)}`);
}

/** The IPv4 address `v4` (dotted) as two IPv6 groups, optionally inverted (Teredo's client field). */
function groups(v4: string, invert = false): string {
  const n = v4.split('.').reduce((acc, o) => acc * 256 + Number(o), 0);
  const x = invert ? (~n >>> 0) : n;
  return `${(x >>> 16).toString(16)}:${(x & 0xffff).toString(16)}`;
}

describe('address policy', () => {
  describe('IPv4', () => {
    it('refuses loopback, unspecified, private, CGNAT and link-local addresses', () => {
      refused(['127.0.0.1', '127.255.0.9', '0.0.0.0', '0.1.2.3', '10.0.0.1', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '100.64.0.1', '100.127.255.255']);
    });

    it('refuses the other ranges that are not unicast: multicast, broadcast, reserved, benchmarking, documentation', () => {
      refused([
        '224.0.0.1', '239.255.255.250', // multicast (RFC 5771)
        '255.255.255.255', // limited broadcast
        '240.0.0.1', '250.1.2.3', // reserved class E (RFC 1112)
        '198.18.0.1', '198.19.255.255', // benchmarking (RFC 2544)
        '192.0.2.1', '198.51.100.7', '203.0.113.10', // documentation (RFC 5737)
        '192.0.0.8', // IETF protocol assignments (RFC 6890)
        '192.88.99.1', // 6to4 relay anycast (RFC 7526)
      ]);
    });

    it('allows public unicast, up to the edges of the refused ranges', () => {
      allowed(['8.8.8.8', '1.1.1.1', '9.255.255.255', '11.0.0.0', '172.15.255.255', '172.32.0.1', '100.63.255.255', '100.128.0.1', '192.167.255.255', '192.169.0.1', '198.17.255.255', '198.20.0.0', '223.255.255.254', '169.253.255.255']);
    });
  });

  describe('IPv6', () => {
    it('refuses unspecified, loopback, unique-local, site-local, link-local and multicast', () => {
      refused(['::', '::1', 'fc00::1', 'fdff::1', 'fe80::1', 'febf::1', 'fec0::1', 'ff02::1', 'ff0e::1']);
    });

    it('refuses documentation, benchmarking, discard and the other special ranges ipaddr.js knows', () => {
      refused(['2001:db8::1', '3fff::1', '2001:2::1', '100::1', '2001:3::1', '2001:10::1', '2001:20::1', '5f00::1', '2001:4:112::1']);
    });

    it('allows public unicast', () => {
      allowed(['2606:4700:4700::1111', '2a00:1450:4001:81b::200e', '2001:4860:4860::8888', 'fcd::1', '2003::1']);
    });

    it('accepts brackets and zone ids, and refuses what is not an address', () => {
      refused(['[::1]', 'fe80::1%eth0', '[fe80::1%25eth0]', 'example.com', '', '127.1', '2130706433', '1.2.3.4.5', '::ffff:01.2.3.4', '[8.8.8.8', 'gggg::1']);
      allowed(['[2606:4700::1111]', '2606:4700::1111%eth0']);
      assert.match(addressRefusal('example.com')!, /not an IP address/);
    });
  });

  // The regression of issue 8 item 8: each of these carried a private IPv4 address past the old range list.
  describe('IPv6 forms that embed an IPv4 address are judged by that address', () => {
    const cases: Array<{ form: string; make: (v4: string) => string }> = [
      { form: 'IPv4-mapped ::ffff:0:0/96', make: (v4) => `::ffff:${v4}` },
      { form: 'IPv4-translated ::ffff:0:0:0/96', make: (v4) => `::ffff:0:${v4}` },
      { form: 'IPv4-compatible ::/96', make: (v4) => `::${v4}` },
      { form: 'NAT64 64:ff9b::/96', make: (v4) => `64:ff9b::${v4}` },
      { form: '6to4 2002::/16', make: (v4) => `2002:${groups(v4)}::1` },
      { form: 'Teredo 2001::/32 (client, inverted, with a public server)', make: (v4) => `2001:0:808:808:8000:f227:${groups(v4, true)}` },
      { form: 'Teredo 2001::/32 (server, with a public client)', make: (v4) => `2001:0:${groups(v4)}:0:0:${groups('1.1.1.1', true)}` },
    ];
    for (const { form, make } of cases) {
      it(`${form}: refused around a private IPv4 address, allowed around a public one`, () => {
        for (const v4 of ['10.0.0.1', '127.0.0.1', '169.254.169.254', '192.168.1.1', '100.64.0.1', '0.0.0.0', '224.0.0.1', '203.0.113.5']) {
          const v6 = make(v4);
          assert.equal(isPublicAddress(v6), false, `${v6} (${form} of ${v4})`);
          assert.match(addressRefusal(v6)!, new RegExp(`embeds ${v4.replace(/\./g, '\\.')}\\b`), v6);
        }
        for (const v4 of ['8.8.8.8', '1.1.1.1', '93.184.215.14']) allowed([make(v4)]);
      });
    }

    it('reads the forms from their hexadecimal spelling too', () => {
      refused(['64:ff9b::a00:1', '64:ff9b::7f00:1', '::ffff:a00:1', '::ffff:0:a00:1', '::a00:1', '::7f00:1', '2002:a00:1::', '2002:c0a8:101:1::1']);
      allowed(['64:ff9b::808:808', '2002:808:808::1', '::ffff:808:808']);
    });

    it('judges both Teredo addresses: the server in bits 32-63 and the client XOR 0xffffffff in the last 32 bits', () => {
      // RFC 4380 §4's own example: server 65.54.227.120, client 192.0.2.45 (a documentation address, so refused).
      assert.match(addressRefusal('2001:0:4136:e378:8000:63bf:3fff:fdd2')!, /embeds 192\.0\.2\.45 \(Teredo client\)/);
      // Not inverted, the client field of 1.1.1.1 would read as 254.254.254.254 (reserved): it must be inverted.
      allowed([`2001:0:4136:e378:8000:63bf:${groups('1.1.1.1', true)}`]);
      refused([`2001:0:4136:e378:8000:63bf:${groups('1.1.1.1')}`]);
      assert.match(addressRefusal(`2001:0:a00:1::${groups('1.1.1.1', true)}`)!, /embeds 10\.0\.0\.1 \(Teredo server\)/);
    });

    it('refuses the whole local-use NAT64 prefix 64:ff9b:1::/48, whose embedding depends on a prefix length it does not carry', () => {
      // 8.8.8.8 under a /96 and under the /48 layout of RFC 6052 §2.2, and 10.0.0.1 likewise: all refused.
      refused(['64:ff9b:1::808:808', '64:ff9b:1:808:8:800::', '64:ff9b:1::a00:1', '64:ff9b:1:a00:1::', '64:ff9b:1:ffff:ffff:ffff:ffff:ffff']);
      assert.match(addressRefusal('64:ff9b:1::808:808')!, /RFC 8215/);
      // Outside both NAT64 prefixes, 64:ff9b::/32 space is ordinary unicast: no translator reads it.
      allowed(['64:ff9b:2::808:808']);
    });

    it('agrees with the IPv4 verdict for every embedded form over a seeded corpus', () => {
      const rand = random(0x8a64);
      const special = ['10.', '127.', '169.254.', '100.64.', '100.127.', '192.168.', '172.16.', '172.31.', '224.', '240.', '0.', '198.18.', '198.19.', '192.0.2.', '203.0.113.'];
      for (let i = 0; i < 2000; i++) {
        let v4: string;
        if (i % 2 === 0) {
          const prefix = special[rand(special.length)];
          const rest = 4 - (prefix.split('.').length - 1);
          v4 = prefix + Array.from({ length: rest }, () => rand(256)).join('.');
        } else {
          v4 = Array.from({ length: 4 }, () => rand(256)).join('.');
        }
        const expected = isPublicAddress(v4);
        for (const { form, make } of cases) assert.equal(isPublicAddress(make(v4)), expected, `${form} of ${v4}: ${make(v4)}`);
      }
    });
  });

  describe('URL hosts', () => {
    it('judges localhost names and IP literals by what they say, and leaves other names to the resolver', () => {
      for (const h of ['localhost', 'LOCALHOST', 'localhost.', 'app.localhost', '127.0.0.1', '[::1]', '[::ffff:7f00:1]', '[64:ff9b::a00:1]', '[2002:a00:1::]', '203.0.113.10', '[2001:db8::1]']) {
        assert.equal(urlHostIsPrivate(h), true, h);
      }
      for (const h of ['example.com', 'localhost.example.com', 'rebind.test', '8.8.8.8', '[2606:4700::1111]', '[64:ff9b::808:808]', '1e100.net']) {
        assert.equal(urlHostIsPrivate(h), false, `${h}: ${hostRefusal(h)}`);
      }
    });

    it('judges the numeric shorthands a resolver would read as IPv4 (inet_aton) as those addresses', () => {
      for (const h of ['127.1', '0x7f.0.0.1', '2130706433', '017700000001', '10.1', '0']) assert.equal(urlHostIsPrivate(h), true, h);
      assert.match(hostRefusal('127.1')!, /reads as 127\.0\.0\.1/);
      assert.equal(urlHostIsPrivate('134744072'), false, '8.8.8.8 as one number');
    });

    it('says why, naming the embedded address', () => {
      assert.match(hostRefusal('[64:ff9b::a00:1]')!, /64:ff9b::a00:1 embeds 10\.0\.0\.1 \(NAT64 64:ff9b::\/96\), and 10\.0\.0\.1 is in the private range/);
      assert.match(hostRefusal('app.localhost')!, /RFC 6761/);
    });
  });
});
