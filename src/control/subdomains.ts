// Subdomains: the label an endpoint is served under, either chosen by the user or generated as word-word-word.
// User input is canonicalised to lowercase, then held to the DNS label rules; anything else is refused, not repaired.
import { randomInt } from 'node:crypto';
import { WORDS } from './words.ts';

/** `@` names the root of a domain: the endpoint is served at the bare domain. */
export const ROOT_SUBDOMAIN = '@';

/** RFC 1035 §2.3.1 / RFC 1123 §2.1: letters, digits and hyphens, 1-63 octets, no hyphen at either end. */
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** RFC 5891 §4.2.3.1: hyphens in positions 3 and 4 ("xn--") are reserved for IDNA; refusing them rules out
 *  punycode look-alikes of other endpoints' names. */
const RESERVED_LDH = /^..--/;

/** Longest FQDN in presentation form without the trailing dot (RFC 1035 §2.3.4, 255 octets on the wire). */
export const MAX_HOSTNAME_LENGTH = 253;

export type SubdomainCheck = { ok: true; subdomain: string } | { ok: false; reason: string };

/** Canonicalises a user-chosen subdomain (lowercase, `@` kept) or says why it is not one. */
export function canonicalSubdomain(input: string): SubdomainCheck {
  if (input === ROOT_SUBDOMAIN) return { ok: true, subdomain: ROOT_SUBDOMAIN };
  const label = input.toLowerCase();
  if (label.length === 0 || label.length > 63) return { ok: false, reason: 'a subdomain is 1 to 63 characters' };
  if (!LABEL.test(label)) {
    return { ok: false, reason: 'a subdomain is one DNS label: letters a-z, digits and hyphens, not starting or ending with a hyphen' };
  }
  if (RESERVED_LDH.test(label)) return { ok: false, reason: 'hyphens in the third and fourth positions are reserved (IDNA)' };
  return { ok: true, subdomain: label };
}

/** The public FQDN: `<subdomain>.<domain>`, or the bare domain for `@` (docs/api.md "Endpoints"). */
export function hostnameFor(subdomain: string, domain: string): string {
  return subdomain === ROOT_SUBDOMAIN ? domain.toLowerCase() : `${subdomain}.${domain.toLowerCase()}`;
}

/**
 * A fresh word-word-word name. Words come from a CSPRNG: ephemeral URLs are handed out without authentication in
 * front of them, so a name must not be predictable from the ones issued before it. Collisions are rare (8e9 names)
 * and the store retries them.
 */
export function generateSubdomain(pick: (max: number) => number = randomInt): string {
  return `${WORDS[pick(WORDS.length)]}-${WORDS[pick(WORDS.length)]}-${WORDS[pick(WORDS.length)]}`;
}
