// IP addresses and CIDR lists, parsed once into 128-bit words and compared with masks: `source_ip` routing conditions
// (the control API validates them with this parser, the edge matches with it). Which addresses origins may use is
// src/shared/address-policy.ts's business, not this module's.
//
// Every address lives in IPv6 space, IPv4 as IPv4-mapped (::ffff:a.b.c.d, RFC 4291 §2.5.5.2), so one rule covers a
// client whether a dual-stack socket reports `10.0.0.1` or `::ffff:10.0.0.1`.
//
// Hand-written rather than net.BlockList: BlockList.check costs about 5 µs per call here (it builds a SocketAddress
// each time); this costs a parse and four integer compares. Accepts exactly what net.isIPv4 / net.isIPv6 accept
// (a test cross-checks).

/** An address as four unsigned 32-bit words, most significant first. */
export type IpWords = readonly [number, number, number, number];

/** Strict dotted quad as net.isIPv4 accepts it: four decimal octets, no leading zeros. Returns the uint32 or -1. */
function parseIPv4(s: string): number {
  let value = 0;
  let octets = 0;
  let i = 0;
  while (octets < 4) {
    const start = i;
    let octet = 0;
    while (i < s.length) {
      const c = s.charCodeAt(i);
      if (c < 48 || c > 57) break;
      octet = octet * 10 + (c - 48);
      i++;
    }
    const digits = i - start;
    if (digits === 0 || digits > 3 || octet > 255 || (digits > 1 && s.charCodeAt(start) === 48)) return -1;
    value = value * 256 + octet;
    octets++;
    if (octets < 4) {
      if (s.charCodeAt(i) !== 46 /* . */) return -1;
      i++;
    }
  }
  return i === s.length ? value : -1;
}

/** Up to four hex digits of one IPv6 group, or -1. */
function parseGroup(s: string): number {
  if (s.length === 0 || s.length > 4) return -1;
  let v = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    let d: number;
    if (c >= 48 && c <= 57) d = c - 48;
    else if (c >= 97 && c <= 102) d = c - 87;
    else if (c >= 65 && c <= 70) d = c - 55;
    else return -1;
    v = v * 16 + d;
  }
  return v;
}

/** Groups of one side of `::` (or of a whole address), with an IPv4 tail allowed last; null when malformed. */
function parseGroups(s: string, allowV4Tail: boolean): number[] | null {
  if (s === '') return [];
  const pieces = s.split(':');
  const out: number[] = [];
  for (let i = 0; i < pieces.length; i++) {
    const piece = pieces[i];
    if (allowV4Tail && i === pieces.length - 1 && piece.includes('.')) {
      const v4 = parseIPv4(piece);
      if (v4 < 0) return null;
      out.push(Math.floor(v4 / 65536), v4 & 0xffff);
    } else {
      const g = parseGroup(piece);
      if (g < 0) return null;
      out.push(g);
    }
  }
  return out;
}

function parseIPv6(s: string): IpWords | null {
  const gap = s.indexOf('::');
  let groups: number[] | null;
  if (gap === -1) {
    groups = parseGroups(s, true);
    if (groups === null || groups.length !== 8) return null;
  } else {
    if (s.indexOf('::', gap + 1) !== -1) return null;
    const head = parseGroups(s.slice(0, gap), false);
    const tail = parseGroups(s.slice(gap + 2), true);
    // `::` stands for at least one zero group (RFC 4291 §2.2; node accepts `1:2:3:4:5:6:7::` too).
    if (head === null || tail === null || head.length + tail.length > 7) return null;
    groups = [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
  }
  return [
    (groups[0] * 65536 + groups[1]) >>> 0,
    (groups[2] * 65536 + groups[3]) >>> 0,
    (groups[4] * 65536 + groups[5]) >>> 0,
    (groups[6] * 65536 + groups[7]) >>> 0,
  ];
}

/**
 * Parses an IPv4 or IPv6 address as a socket reports it (a zone id such as `%eth0` is ignored). IPv4 comes back
 * IPv4-mapped. Returns null for anything else.
 */
export function parseIp(text: string): IpWords | null {
  if (text.includes(':')) {
    const zone = text.indexOf('%');
    return parseIPv6(zone === -1 ? text : text.slice(0, zone));
  }
  const v4 = parseIPv4(text);
  return v4 < 0 ? null : [0, 0, 0xffff, v4];
}

interface Cidr {
  network: IpWords;
  mask: IpWords;
}

function maskWords(prefix: number): IpWords {
  const word = (i: number) => {
    const bits = Math.min(32, Math.max(0, prefix - 32 * i));
    return bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  };
  return [word(0), word(1), word(2), word(3)];
}

/**
 * One `address` or `address/prefix` (0-32 for IPv4, 0-128 for IPv6). Host bits are ignored, as in Go's
 * net.ParseCIDR: `10.1.2.3/8` is `10.0.0.0/8`. Throws a RangeError naming the entry when it is malformed.
 */
export function parseCidr(entry: string): Cidr {
  const slash = entry.indexOf('/');
  const address = slash === -1 ? entry : entry.slice(0, slash);
  const isV6 = address.includes(':');
  const words = address.includes('%') ? null : parseIp(address);
  if (words === null) throw new RangeError(`"${entry}" is not an IP address or CIDR`);
  const max = isV6 ? 128 : 32;
  let prefix = max;
  if (slash !== -1) {
    const bits = entry.slice(slash + 1);
    if (!/^[0-9]{1,3}$/.test(bits) || Number(bits) > max) throw new RangeError(`"${entry}" has an invalid prefix length (0-${max})`);
    prefix = Number(bits);
  }
  const mask = maskWords(isV6 ? prefix : prefix + 96);
  const network: IpWords = [(words[0] & mask[0]) >>> 0, (words[1] & mask[1]) >>> 0, (words[2] & mask[2]) >>> 0, (words[3] & mask[3]) >>> 0];
  return { network, mask };
}

/** Compiles a comma-separated list of addresses and CIDRs into one matcher (any entry matching is a match). */
export function compileCidrList(list: string): (ip: IpWords | null) => boolean {
  const cidrs = list
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '')
    .map(parseCidr);
  if (cidrs.length === 0) throw new RangeError('an empty address list matches nothing');
  return (ip) => {
    if (ip === null) return false;
    for (const { network: n, mask: m } of cidrs) {
      if ((ip[0] & m[0]) >>> 0 === n[0] && (ip[1] & m[1]) >>> 0 === n[1] && (ip[2] & m[2]) >>> 0 === n[2] && (ip[3] & m[3]) >>> 0 === n[3]) return true;
    }
    return false;
  };
}
