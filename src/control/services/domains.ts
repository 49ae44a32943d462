// Custom domains as domain operations: an account claims a name, proves control of its DNS with a TXT record (or
// an admin vouches for it), and deletes it once no endpoint uses it. One account at a time holds a name verified.
import { randomBytes } from 'node:crypto';
import { domainToASCII } from 'node:url';
import { fail } from '../../shared/errors.ts';
import { isDnsName } from '../../shared/x509.ts';
import { isForeignKeyViolation, isUniqueViolation } from '../../store/db.ts';
import * as store from '../../store/domains.ts';
import type { Caller } from '../caller.ts';
import { DnsLookupError, DnsVerifier } from '../dns-verifier.ts';
import { int64Param, type ControlDeps } from '../http.ts';

/** The label the TXT record lives under: _edge-challenge.<domain> (underscored, so it never clashes with a host). */
export const CHALLENGE_LABEL = '_edge-challenge';

// The challenge name must itself fit in 253 characters.
const MAX_DOMAIN_LENGTH = 253 - CHALLENGE_LABEL.length - 1;

function invalidName(message: string, reason: string) {
  return fail.invalid_request(message, { field: 'name', reason });
}

/**
 * The canonical form of a user-supplied domain name: IDNA to ASCII (which also lower-cases), no trailing dot,
 * at least two labels, not an IP address, and outside the platform's own namespace. The base domain, its
 * subdomains and its parents are refused: an endpoint on any of them could take hostnames the platform hands out.
 */
export function canonicalDomainName(input: string, baseDomain: string): string {
  const trimmed = input.trim().replace(/\.$/, '');
  const name = domainToASCII(trimmed);
  if (!name || !isDnsName(name)) throw invalidName(`"${input}" is not a valid domain name`, 'invalid_domain');
  if (name.length > MAX_DOMAIN_LENGTH) throw invalidName(`domain names may have at most ${MAX_DOMAIN_LENGTH} characters`, 'invalid_domain');
  const labels = name.split('.');
  if (labels.length < 2) throw invalidName('a domain needs at least two labels (example.com)', 'invalid_domain');
  // An all-numeric top label is an IPv4 address, never a registrable domain.
  if (/^[0-9]+$/.test(labels[labels.length - 1])) throw invalidName(`"${input}" is an IP address, not a domain name`, 'invalid_domain');
  const base = baseDomain.toLowerCase();
  if (name === base || name.endsWith(`.${base}`) || base.endsWith(`.${name}`)) {
    throw invalidName(`${name} is part of the platform domain ${base}; use endpoints on it directly`, 'platform_domain');
  }
  return name;
}

function visible(caller: Caller, d: store.DomainRow): boolean {
  return caller.isAdmin || d.account_id === caller.account.id;
}

export function domainService({ db, config }: Pick<ControlDeps, 'db' | 'config'>) {
  // Built once: a malformed EDGE_DNS_RESOLVERS fails the start rather than the first verification.
  const dns = new DnsVerifier({ resolvers: config.dnsResolvers });

  async function domainFor(caller: Caller, rawId: string): Promise<store.DomainRow> {
    const domain = await store.findDomainById(db, int64Param(rawId));
    if (!domain || !visible(caller, domain)) throw fail.not_found('Domain not found');
    return domain;
  }

  /** Marks verified inside a transaction; the partial unique index decides who owns a contested name. */
  async function markVerified(domain: store.DomainRow): Promise<store.DomainRow> {
    try {
      const row = await db.transaction((tx) => store.markDomainVerified(tx, domain.id));
      if (!row) throw fail.not_found('Domain not found');
      return row;
    } catch (err) {
      if (isUniqueViolation(err, 'domains_verified_name_key')) {
        throw fail.already_exists(`${domain.name} is already verified by another account`, { reason: 'verified_elsewhere', name: domain.name });
      }
      throw err;
    }
  }

  return {
    /** Claims `name` for the caller's account with a fresh verification value; several accounts may claim one name. */
    async claim(caller: Caller, rawName: string): Promise<store.DomainRow> {
      const name = canonicalDomainName(rawName, config.baseDomain);
      // 128 random bits: unguessable, so a TXT record proves control of the zone, not luck.
      const token = `edge-verify=${randomBytes(16).toString('hex')}`;
      try {
        return await db.transaction((tx) => store.insertDomain(tx, { accountId: caller.account.id, userId: caller.user.id, name, token }));
      } catch (err) {
        if (isUniqueViolation(err, 'domains_account_name_key')) throw fail.already_exists(`${name} is already in this account`, { name });
        throw err;
      }
    },

    list(caller: Caller): Promise<store.DomainRow[]> {
      return store.listDomains(db, caller.account.id);
    },

    get: domainFor,

    /** Refused (409) while endpoints use the domain; deleting a verified one releases the name. */
    async remove(caller: Caller, rawId: string): Promise<void> {
      const domain = await domainFor(caller, rawId);
      try {
        await db.transaction(async (tx) => {
          const inUse = await store.countEndpointsOnDomain(tx, domain.id);
          if (inUse > 0) throw fail.conflict(`${domain.name} is used by ${inUse} endpoint(s); delete them first`, { reason: 'domain_in_use', endpoints: inUse });
          if (!(await store.deleteDomain(tx, domain.id))) throw fail.not_found('Domain not found');
        });
      } catch (err) {
        // An endpoint created between the count and the delete: the RESTRICT reference has the last word.
        if (isForeignKeyViolation(err)) throw fail.conflict(`${domain.name} is used by an endpoint; delete it first`, { reason: 'domain_in_use' });
        throw err;
      }
    },

    /** Looks the TXT challenge up (idempotent once verified): 409 while it is not published, 503 when DNS fails. */
    async verify(caller: Caller, rawId: string): Promise<store.DomainRow> {
      const domain = await domainFor(caller, rawId);
      if (domain.verified_at) return domain;
      const recordName = `${CHALLENGE_LABEL}.${domain.name}`;
      // The lookup runs outside any transaction: no row lock is held across network I/O.
      let found: string[];
      try {
        found = await dns.lookupTxt(recordName);
      } catch (err) {
        if (err instanceof DnsLookupError) {
          throw fail.unavailable(`The DNS lookup of ${recordName} failed; try again shortly`, { reason: 'dns_lookup_failed', dns_error: err.code });
        }
        throw err;
      }
      if (!found.some((value) => value.trim() === domain.verification_token)) {
        throw fail.conflict(`No TXT record at ${recordName} holds the verification value yet`, {
          reason: 'txt_record_not_found',
          expected: { type: 'TXT', name: recordName, value: domain.verification_token },
          // What the resolver saw, capped, so a typo in the published record is visible in the answer.
          found: found.slice(0, 10).map((v) => v.slice(0, 255)),
        });
      }
      return markVerified(domain);
    },

    /** An admin vouching for any account's domain, without a DNS check. */
    async verifyWithoutDns(rawId: string): Promise<store.DomainRow> {
      const domain = await store.findDomainById(db, int64Param(rawId));
      if (!domain) throw fail.not_found('Domain not found');
      return markVerified(domain);
    },
  };
}
