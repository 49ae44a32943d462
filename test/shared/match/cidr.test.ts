// The address parser and CIDR matcher shared by control validation and edge matching, cross-checked against
// node:net on fixed corpora and seeded random ones.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { BlockList, isIP } from 'node:net';
import { compileCidrList, parseCidr, parseIp } from '../../../src/shared/match/cidr.ts';
import { random } from '../../helpers/random.ts';

describe('addresses and CIDRs', () => {
  it('parseIp accepts exactly what node:net accepts', () => {
    const corpus = [
      '0.0.0.0', '255.255.255.255', '1.2.3.4', '01.2.3.4', '1.2.3', '1.2.3.4.5', '256.1.1.1', '1..2.3', ' 1.2.3.4', '1.2.3.4 ',
      '::', '::1', '1::', '1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7::', '::2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8:9', '1::2::3', ':1::2', '1::2:',
      '::ffff:1.2.3.4', '::1.2.3.4', '1:2:3:4:5:6:1.2.3.4', '1:2:3:4:5:6:7:1.2.3.4', '1.2.3.4::', '::ffff:1.2.3', 'fffff::',
      'ABCD:ef01::', 'g::1', '2001:db8::', '::ffff:01.2.3.4', '1:2:3:4:5::1.2.3.4', ':', ':::', '', 'localhost',
    ];
    for (const s of corpus) assert.equal(parseIp(s) !== null, isIP(s) !== 0, s);
    // And random strings over the address alphabet.
    const alphabet = '0123456789abcdef:.';
    const rand = random(7);
    for (let i = 0; i < 20_000; i++) {
      const s = Array.from({ length: 2 + rand(20) }, () => alphabet[rand(alphabet.length)]).join('');
      assert.equal(parseIp(s) !== null, isIP(s) !== 0, s);
    }
  });

  it('parseCidr refuses zone ids and out-of-range prefix lengths, naming the entry', () => {
    assert.throws(() => parseCidr('fe80::1%eth0'), /"fe80::1%eth0" is not an IP address or CIDR/);
    assert.throws(() => parseCidr('10.0.0.0/33'), /invalid prefix length \(0-32\)/);
    assert.throws(() => parseCidr('::/129'), /invalid prefix length \(0-128\)/);
    assert.throws(() => parseCidr('10.0.0.0/'), /invalid prefix length/);
    assert.doesNotThrow(() => parseCidr('10.1.2.3/8'));
  });

  it('CIDR matching agrees with node:net BlockList', () => {
    const rand = random(11);
    const v4 = () => Array.from({ length: 4 }, () => rand(256)).join('.');
    const v6 = () => Array.from({ length: 8 }, () => (rand(4) === 0 ? '0' : rand(65536).toString(16))).join(':');
    for (let i = 0; i < 2000; i++) {
      const six = rand(2) === 0;
      const base = six ? v6() : v4();
      const prefix = rand(six ? 129 : 33);
      const list = new BlockList();
      list.addSubnet(base, prefix, six ? 'ipv6' : 'ipv4');
      const match = compileCidrList(`${base}/${prefix}`);
      for (let j = 0; j < 5; j++) {
        // Half the probes share the base's leading bits, so both outcomes are exercised.
        const probe = rand(2) === 0 ? base : six ? v6() : v4();
        const fam = probe.includes(':') ? 'ipv6' : 'ipv4';
        assert.equal(match(parseIp(probe)), list.check(probe, fam), `${base}/${prefix} vs ${probe}`);
      }
    }
  });
});
