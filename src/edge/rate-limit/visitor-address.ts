// The visitor's address as every stage, log and forwarded X-Forwarded-For sees it (the socket's peer, or what a
// trusted proxy says), and the key a rate-limit rule counts it under (IPv4 as is, IPv6 by its /64).
import type { IncomingMessage } from 'node:http';
import { compileCidrList, parseIp, type IpWords } from '../../shared/match/cidr.ts';

/** EDGE_TRUSTED_PROXIES compiled: whether an address is one of them. */
export type TrustedProxies = (ip: IpWords | null) => boolean;

/**
 * Compiles EDGE_TRUSTED_PROXIES (comma-separated addresses and CIDRs); null when empty, the default: then no
 * visitor-sent header ever changes the address. Throws a RangeError naming a malformed entry (checked at start).
 */
export function compileTrustedProxies(list: string): TrustedProxies | null {
  if (list.trim() === '') return null;
  return compileCidrList(list);
}

/**
 * The client address of a request: the socket's peer, unless the peer is a trusted proxy; then the right-most
 * X-Forwarded-For entry that is not itself a trusted proxy (each trusted hop appended the address it saw; entries
 * left of the first untrusted one are the visitor's to forge). All entries trusted: the left-most. A malformed
 * entry on the way (not an IP address) makes the header worthless: the peer is used.
 */
export function clientAddress(req: IncomingMessage, trusted: TrustedProxies | null): string {
  const peer = req.socket.remoteAddress ?? '';
  if (trusted === null) return peer;
  return forwardedClient(peer, req.headers['x-forwarded-for'], trusted);
}

/** clientAddress's decision from the peer and the X-Forwarded-For field(s) (Node joins repeated lines with ", "). */
export function forwardedClient(peer: string, forwardedFor: string | string[] | undefined, trusted: TrustedProxies): string {
  if (forwardedFor === undefined || !trusted(parseIp(peer))) return peer;
  const entries = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor).split(',');
  let leftmost = peer;
  for (let i = entries.length - 1; i >= 0; i--) {
    const entry = entries[i].trim();
    // An empty element (RFC 9110 §5.6.1 lists may have them) is skipped, anything else must be an address.
    if (entry === '') continue;
    const ip = parseIp(entry);
    if (ip === null || entry.includes('%')) return peer;
    if (!trusted(ip)) return entry;
    leftmost = entry;
  }
  return leftmost;
}

const hex = (n: number) => n.toString(16);

/**
 * The key a rate-limit rule counts a visitor under: an IPv4 address as is (IPv4-mapped IPv6 too, so a dual-stack
 * socket's `::ffff:a.b.c.d` is the same visitor), any other IPv6 address by its /64 (one subscriber's allocation:
 * rotating addresses inside it gets no new bucket). Not an address (cannot happen from a socket): the text itself.
 */
export function rateLimitKey(address: string): string {
  const w = parseIp(address);
  if (w === null) return address;
  if (w[0] === 0 && w[1] === 0 && w[2] === 0xffff) return `${w[3] >>> 24}.${(w[3] >>> 16) & 255}.${(w[3] >>> 8) & 255}.${w[3] & 255}`;
  return `${hex(w[0] >>> 16)}:${hex(w[0] & 0xffff)}:${hex(w[1] >>> 16)}:${hex(w[1] & 0xffff)}::/64`;
}
