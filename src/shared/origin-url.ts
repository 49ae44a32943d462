// What an origin URL may be and which addresses an origin may not have: the control API checks URLs with it (endpoint
// and routing-rule origins), the edge checks every address an origin name resolves to when it connects.
//
// The API can only judge what the URL says (an IP literal, a `localhost` name); a name is judged when the edge
// resolves it, so a name that resolves to 10.0.0.5 today, or is rebound to 127.0.0.1 later, is refused all the same.
import { compileCidrList, parseIp } from './match/cidr.ts';

/**
 * Unspecified and "this network" (0.0.0.0 reaches the local host), RFC 1918, CGNAT, loopback, link-local (cloud
 * metadata lives there), and their IPv6 counterparts: ::/96 holds ::, ::1 and the deprecated IPv4-compatible
 * form; unique-local, site-local and link-local. IPv4-mapped IPv6 (::ffff:a.b.c.d) is compared as the IPv4.
 */
const PRIVATE_RANGES = compileCidrList(
  [
    '0.0.0.0/8',
    '10.0.0.0/8',
    '100.64.0.0/10',
    '127.0.0.0/8',
    '169.254.0.0/16',
    '172.16.0.0/12',
    '192.168.0.0/16',
    '::/96',
    'fc00::/7',
    'fec0::/10',
    'fe80::/10',
  ].join(','),
);

/**
 * Whether the edge must not connect to this address (as a resolver returns it, or an IP literal, brackets allowed)
 * unless private origins are allowed. Anything that does not parse as an IP address counts as private.
 */
export function isPrivateAddress(address: string): boolean {
  const words = parseIp(address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address);
  return words === null || PRIVATE_RANGES(words);
}

/**
 * Whether a URL's host is private by what it says: a private IP literal, or a `localhost` name (RFC 6761 reserves
 * them for loopback). Other names are for the resolver to answer, and the edge checks its answers.
 */
export function isPrivateHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, '');
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  const literal = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  return parseIp(literal) !== null && isPrivateAddress(literal);
}

/** Why a URL cannot be an origin; the message is the reason, without the field's name. */
export class OriginUrlError extends Error {
  override name = 'OriginUrlError';
}

/**
 * An origin URL in canonical form — scheme, host (with port when not the default) and path without a trailing
 * slash, since the path prefixes every forwarded path — or an OriginUrlError saying what is wrong with it.
 */
export function canonicalOriginUrl(raw: string, allowPrivate: boolean): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new OriginUrlError('not a valid absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new OriginUrlError('only http and https origins are supported');
  if (url.username || url.password) throw new OriginUrlError('credentials in the URL are not allowed');
  if (url.search || url.hash) throw new OriginUrlError('an origin has no query or fragment');
  if (!allowPrivate && isPrivateHost(url.hostname)) throw new OriginUrlError('private, loopback and link-local origins are not allowed on this platform');
  return `${url.protocol}//${url.host}${url.pathname.replace(/\/$/, '')}`;
}
