// The authority a request names (its Host, or an absolute-form target's), parsed once in the resolver: the edge
// routes on it and forwards it, so it must be exactly one host the edge can serve plus, at most, a valid port.
//
// Policy (README "Request validation", docs/request-validation.md): RFC 9112 §3.2 asks for `uri-host [ ":" port ]`.
// Of RFC 3986's uri-host the edge accepts only what it can serve: DNS names in LDH syntax (RFC 1123 §2.1), dotted
// IPv4 and bracketed IPv6. A reg-name with pct-encoded or sub-delim characters names nothing in DNS and would be
// read differently by every upstream that builds links from Host, so it is refused like any other malformed Host.
import { isIPv4, isIPv6 } from 'node:net';

export interface Authority {
  /**
   * Lower case, without the final dot of a fully qualified name (`Name.` and `name` are the same host to DNS), IPv6
   * literals in brackets: the form endpoints are looked up by, usable as it is in a URL.
   */
  host: string;
  /** The port the visitor named, or null when it named none (an empty port, `name:`, counts as none). */
  port: number | null;
}

/** RFC 1035 §2.3.4: 255 octets on the wire, so 253 characters in text without the final dot. */
export const MAX_HOST_NAME = 253;
/** `[` + the longest IPv6 text (45: an IPv4 tail) + `]` + `:65535`, and a margin: anything longer is refused unread. */
const MAX_AUTHORITY = MAX_HOST_NAME + 1 + 1 + 5;

/**
 * Parses a Host field value (or an absolute-form target's authority) into the lower-case host and its port, or null
 * when it is not one `host [ ":" port ]` the edge serves. Refused, among others: userinfo (`a@b`, `a:80@b`), a port
 * that is not 1-5 digits naming 1-65535 (`a:abc`, `a:99999`, `a:0`), two ports (`a:80:81`), whitespace or a comma
 * anywhere (a field joined from two Host lines), empty labels (`a..b`, `.a`), labels over 63 characters or with a
 * hyphen at either end, names over 253 characters, IPv6 zone identifiers (RFC 6874) and IPvFuture literals.
 */
export function parseAuthority(value: string): Authority | null {
  if (value.length === 0 || value.length > MAX_AUTHORITY) return null;
  const lower = value.toLowerCase();
  let host: string;
  let rest: number; // index of the ":" before the port, or the length when there is none
  if (lower.charCodeAt(0) === 91 /* [ */) {
    const close = lower.indexOf(']');
    if (close === -1) return null;
    const literal = lower.slice(1, close);
    // isIPv6 accepts a zone ("fe80::1%eth0"); a zone names an interface of the sender and means nothing here.
    if (literal.indexOf('%') !== -1 || !isIPv6(literal)) return null;
    host = lower.slice(0, close + 1);
    rest = close + 1;
    if (rest < lower.length && lower.charCodeAt(rest) !== 58 /* : */) return null;
  } else {
    const colon = lower.indexOf(':');
    rest = colon === -1 ? lower.length : colon;
    host = lower.slice(0, rest);
    if (host.charCodeAt(host.length - 1) === 46 /* . */) host = host.slice(0, -1);
    if (!isServableName(host)) return null;
  }
  const port = rest === lower.length ? null : parsePort(lower, rest + 1);
  if (port === undefined) return null;
  return { host, port };
}

/** The authority as a Host field value: what the edge forwards, and what parseAuthority reads back unchanged. */
export function formatAuthority(a: Authority): string {
  return a.port === null ? a.host : `${a.host}:${a.port}`;
}

/** Digits after the colon: null when there are none (RFC 3986 §6.2.3 drops an empty port), undefined when bad. */
function parsePort(s: string, from: number): number | null | undefined {
  const digits = s.length - from;
  if (digits === 0) return null;
  if (digits > 5) return undefined;
  let port = 0;
  for (let i = from; i < s.length; i++) {
    const c = s.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return undefined;
    port = port * 10 + c;
  }
  // Port 0 is no port anyone can have connected to.
  return port >= 1 && port <= 65535 ? port : undefined;
}

/**
 * A lower-case LDH name of 1-63 character labels, or a dotted IPv4 address. A name whose last label is a number
 * (`1.2.3.010`, `a.0x7f`) is parsed by WHATWG URL as IPv4, in octal or hex, so it must be an RFC 3986 dotted-quad
 * (no leading zeros) or nothing: an upstream must never read a different address than the edge routed.
 */
function isServableName(name: string): boolean {
  if (name.length === 0 || name.length > MAX_HOST_NAME) return false;
  let start = 0;
  for (let i = 0; i <= name.length; i++) {
    const c = i === name.length ? 46 /* . */ : name.charCodeAt(i);
    if (c === 46) {
      const length = i - start;
      if (length === 0 || length > 63) return false;
      if (name.charCodeAt(start) === 45 /* - */ || name.charCodeAt(i - 1) === 45) return false;
      start = i + 1;
    } else if (!((c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 45)) {
      return false;
    }
  }
  const last = name.slice(name.lastIndexOf('.') + 1);
  if (/^(?:[0-9]+|0x[0-9a-f]*)$/.test(last)) return isIPv4(name);
  return true;
}
