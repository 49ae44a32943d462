// Which addresses the platform may connect to on a user's behalf: origin URLs at the control API and at the edge's
// connect time today, and every other user-supplied URL it fetches (JWKS, issuers, webhooks) as those arrive.
//
// One rule, classified by ipaddr.js's ranges rather than a list kept by hand: an address is public only when its
// range is `unicast`, so loopback, RFC 1918, CGNAT, link-local, multicast, broadcast, benchmarking, documentation,
// reserved and the rest are refused together. IPv6 forms that carry an IPv4 address (mapped, translated, NAT64,
// 6to4, Teredo, IPv4-compatible) reach that IPv4 address through some translator or tunnel, so the embedded address
// is decoded and judged as well; the form itself is no reason to refuse or to accept.
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

type IPv4 = ipaddr.IPv4;
type IPv6 = ipaddr.IPv6;

/** The IPv4 address held in two 16-bit groups of an IPv6 address. */
function v4From(hi: number, lo: number): IPv4 {
  return new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
}

/** Why an IPv4 address is not public, or null when it is. */
function v4Refusal(v4: IPv4): string | null {
  const range = v4.range();
  return range === 'unicast' ? null : `${v4.toString()} is in the ${range} range`;
}

/** An embedded IPv4 address judged in the name of the IPv6 address that carries it. */
function embedded(v6: IPv6, form: string, v4: IPv4): string | null {
  const why = v4Refusal(v4);
  return why === null ? null : `${v6.toString()} embeds ${v4.toString()} (${form}), and ${why}`;
}

// RFC 6052 §2.1: the well-known NAT64 prefix is exactly 64:ff9b::/96; the rest of ipaddr's `rfc6052` range is the
// local-use 64:ff9b:1::/48 of RFC 8215.
const NAT64_WELL_KNOWN = ipaddr.IPv6.parseCIDR('64:ff9b::/96');

function v6Refusal(v6: IPv6): string | null {
  const p = v6.parts;
  const range = v6.range();
  switch (range) {
    case 'ipv4Mapped': // ::ffff:a.b.c.d, RFC 4291 §2.5.5.2: a socket API's name for the IPv4 address itself
      return embedded(v6, 'IPv4-mapped', v4From(p[6], p[7]));
    case 'rfc6145': // ::ffff:0:a.b.c.d, RFC 6145 (SIIT) IPv4-translated
      return embedded(v6, 'IPv4-translated', v4From(p[6], p[7]));
    case 'rfc6052':
      if (v6.match(NAT64_WELL_KNOWN)) return embedded(v6, 'NAT64 64:ff9b::/96', v4From(p[6], p[7]));
      // RFC 8215 leaves the prefix length (/48 to /96) to the operator, and RFC 6052 §2.2 places the IPv4 address
      // at an offset that depends on it, so which IPv4 address this reaches cannot be read from the address. A
      // local-use prefix also means a translator inside the edge's own network: refused whole.
      return `${v6.toString()} is in the local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215), whose embedded IPv4 address depends on the operator's prefix length`;
    case '6to4': // 2002:AABB:CCDD::/48, RFC 3056 §2: the IPv4 address is bits 16-47
      return embedded(v6, '6to4', v4From(p[1], p[2]));
    case 'teredo': {
      // RFC 4380 §4: 2001:0:SSSS:SSSS:flags:port:CCCC:CCCC, the server's IPv4 address in bits 32-63 and the client's
      // in the last 32 bits, inverted. Traffic reaches the client's address through a relay and the server's during
      // qualification, so both must be public.
      return (
        embedded(v6, 'Teredo server', v4From(p[2], p[3])) ??
        embedded(v6, 'Teredo client', v4From(p[6] ^ 0xffff, p[7] ^ 0xffff))
      );
    }
    case 'unicast':
      // ::a.b.c.d, RFC 4291 §2.5.5.1 (deprecated IPv4-compatible): ipaddr calls it unicast, but stacks that still
      // tunnel it reach the IPv4 address. (:: and ::1 are classified as unspecified and loopback before this.)
      if (p[0] === 0 && p[1] === 0 && p[2] === 0 && p[3] === 0 && p[4] === 0 && p[5] === 0) return embedded(v6, 'IPv4-compatible', v4From(p[6], p[7]));
      return null;
    default:
      return `${v6.toString()} is in the ${range} range`;
  }
}

/**
 * Why the platform must not connect to `address`, or null when it may. `address` is an IP address as a resolver
 * returns it or a URL writes it: IPv4 dotted quad, IPv6 with or without brackets and a zone id. Anything else is
 * not an address and is refused.
 */
export function addressRefusal(address: string): string | null {
  const bare = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  const zone = bare.indexOf('%');
  const ip = zone === -1 ? bare : bare.slice(0, zone);
  switch (isIP(ip)) {
    case 4:
      return v4Refusal(ipaddr.IPv4.parse(ip));
    case 6:
      return v6Refusal(ipaddr.IPv6.parse(ip));
    default:
      return `${JSON.stringify(address)} is not an IP address`;
  }
}

/** Whether the platform may connect to this address (see addressRefusal for what counts as one). */
export function isPublicAddress(address: string): boolean {
  return addressRefusal(address) === null;
}

/**
 * Why a URL's host is not public by what it says, or null. A `localhost` name is loopback by RFC 6761 §6.3, and an
 * IP literal is judged as above; other names say nothing about their address and pass here, so whoever connects
 * must check what they resolve to (the edge's `publicOnlyLookup` does).
 *
 * Hosts that are neither a strict address nor a name but that inet_aton reads as IPv4 (`127.1`, `0x7f.0.0.1`,
 * `2130706433`) are judged as that address, since a resolver would return it. A WHATWG URL parser has already
 * turned them into dotted quads; this guards callers handed a host by other means.
 */
export function hostRefusal(hostname: string): string | null {
  const host = hostname.toLowerCase().replace(/\.$/, '');
  if (host === 'localhost' || host.endsWith('.localhost')) return `${hostname} is a localhost name, which resolves to loopback (RFC 6761)`;
  const literal = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  if (isIP(literal.split('%')[0]) !== 0) return addressRefusal(literal);
  if (ipaddr.IPv4.isValid(literal)) {
    const v4 = ipaddr.IPv4.parse(literal);
    const why = v4Refusal(v4);
    return why === null ? null : `${hostname} reads as ${why}`;
  }
  return null;
}

/** Whether a URL's host names a non-public address by what it says (see hostRefusal). */
export function urlHostIsPrivate(hostname: string): boolean {
  return hostRefusal(hostname) !== null;
}
