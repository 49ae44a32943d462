// Response rate limiting for the DNS role's UDP answers, in the style of BIND's RRL: a spoofed-source flood must
// not turn this server into an amplifier aimed at a victim network, while genuine clients there can still get through.
import ipaddr from 'ipaddr.js';
import { LRUCache } from 'lru-cache';

/** send: answer as usual; drop: stay silent; slip: send an empty TC=1 answer so a real client retries over TCP. */
export type RateLimitAction = 'send' | 'drop' | 'slip';

export interface ResponseRateLimitOptions {
  /** Responses per second per client network; the burst is one second's worth. */
  responsesPerSecond: number;
  /** Every slip-th response over the limit is sent truncated instead of dropped; 0 drops them all. */
  slip: number;
  /** Networks tracked at once; the least recently seen is forgotten first. */
  maxNetworks?: number;
  /** Milliseconds on a monotonic clock (tests pass their own). */
  now?: () => number;
}

interface Bucket {
  tokens: number;
  /** When `tokens` was last brought up to date. */
  at: number;
  /** Responses refused while over the limit, for choosing which one slips. */
  refused: number;
}

/**
 * One token bucket per client network (IPv4 /24, IPv6 /56, as BIND's RRL groups them): a source address is easily
 * spoofed within a network, and a victim network is what a reflection attack aims at. The table is an LRU of
 * bounded size, so a flood from millions of spoofed sources costs a fixed amount of memory; a network evicted and
 * seen again starts with a full bucket, which errs towards answering.
 */
export class ResponseRateLimiter {
  private readonly buckets: LRUCache<string, Bucket>;
  private readonly rate: number;
  private readonly slip: number;
  private readonly now: () => number;

  constructor(options: ResponseRateLimitOptions) {
    this.rate = options.responsesPerSecond;
    this.slip = Math.max(0, Math.floor(options.slip));
    this.now = options.now ?? (() => performance.now());
    this.buckets = new LRUCache({ max: options.maxNetworks ?? 100_000 });
  }

  /** Spends one response of `address`'s network and says what to do with it. */
  take(address: string): RateLimitAction {
    const key = networkOf(address);
    const now = this.now();
    const bucket = this.buckets.get(key) ?? { tokens: this.rate, at: now, refused: 0 };
    bucket.tokens = Math.min(this.rate, bucket.tokens + ((now - bucket.at) / 1000) * this.rate);
    bucket.at = now;
    this.buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 'send';
    }
    bucket.refused += 1;
    return this.slip > 0 && bucket.refused % this.slip === 0 ? 'slip' : 'drop';
  }

  /** Networks currently tracked. */
  get size(): number {
    return this.buckets.size;
  }
}

/** The /24 of an IPv4 address (IPv4-mapped IPv6 included), the /56 of an IPv6 one. */
export function networkOf(address: string): string {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.process(address);
  } catch {
    return address;
  }
  const bytes = parsed.toByteArray();
  return parsed.kind() === 'ipv4' ? `${bytes.slice(0, 3).join('.')}.0/24` : `${Buffer.from(bytes.slice(0, 7)).toString('hex')}/56`;
}
