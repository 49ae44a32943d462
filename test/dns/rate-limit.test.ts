// The DNS role's response rate limiter on a fake clock: the burst, the refill, slip, networks grouped by /24 and /56,
// and a table that stays bounded whatever the number of sources.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { networkOf, ResponseRateLimiter, type RateLimitAction } from '../../src/dns/rate-limit.ts';

function limiter(slip: number, maxNetworks?: number): { rrl: ResponseRateLimiter; advance(ms: number): void } {
  let now = 1_000;
  const rrl = new ResponseRateLimiter({ responsesPerSecond: 5, slip, maxNetworks, now: () => now });
  return { rrl, advance: (ms) => (now += ms) };
}

function take(rrl: ResponseRateLimiter, address: string, count: number): RateLimitAction[] {
  return Array.from({ length: count }, () => rrl.take(address));
}

describe('ResponseRateLimiter', () => {
  it('sends a burst of one second, then drops, slipping every slip-th', () => {
    const { rrl } = limiter(2);
    assert.deepEqual(take(rrl, '192.0.2.1', 9), ['send', 'send', 'send', 'send', 'send', 'drop', 'slip', 'drop', 'slip']);
  });

  it('drops everything over the limit with slip 0', () => {
    const { rrl } = limiter(0);
    assert.deepEqual(take(rrl, '192.0.2.1', 8).slice(5), ['drop', 'drop', 'drop']);
  });

  it('refills at the configured rate, never beyond one second of burst', () => {
    const { rrl, advance } = limiter(0);
    take(rrl, '192.0.2.1', 5);
    advance(400); // two responses' worth
    assert.deepEqual(take(rrl, '192.0.2.1', 3), ['send', 'send', 'drop']);
    advance(60_000);
    assert.deepEqual(take(rrl, '192.0.2.1', 6), ['send', 'send', 'send', 'send', 'send', 'drop']);
  });

  it('shares a bucket within an IPv4 /24 and an IPv6 /56, not across them', () => {
    const { rrl } = limiter(0);
    take(rrl, '192.0.2.1', 5);
    assert.equal(rrl.take('192.0.2.200'), 'drop');
    assert.equal(rrl.take('::ffff:192.0.2.7'), 'drop', 'IPv4-mapped is the same network');
    assert.equal(rrl.take('192.0.3.1'), 'send');
    take(rrl, '2001:db8:0:1::1', 5);
    assert.equal(rrl.take('2001:db8:0:ff::2'), 'drop');
    assert.equal(rrl.take('2001:db8:0:100::1'), 'send');
  });

  it('forgets the least recently seen networks past its size', () => {
    const { rrl } = limiter(0, 100);
    for (let i = 0; i < 1000; i++) rrl.take(`10.${i >> 8}.${i & 0xff}.1`);
    assert.equal(rrl.size, 100);
  });
});

describe('networkOf', () => {
  it('names the /24 or /56 a client is in', () => {
    assert.equal(networkOf('198.51.100.77'), '198.51.100.0/24');
    assert.equal(networkOf('::ffff:198.51.100.77'), '198.51.100.0/24');
    assert.equal(networkOf('2001:db8:aa:bbcc::1'), '20010db800aabb/56');
  });
});
