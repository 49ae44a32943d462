// Custom domains: an account claims a name, proves control of its DNS with a TXT record (or an admin vouches
// for it), and only then may put endpoints and custom certificates on it. One account at a time holds a name verified.
import { randomBytes } from 'node:crypto';
import { domainToASCII } from 'node:url';
import { Type } from '@sinclair/typebox';
import { fail } from '../../shared/errors.ts';
import { Nullable, Strict, Timestamp } from '../../shared/schema.ts';
import { isDnsName } from '../../shared/x509.ts';
import { isUniqueViolation } from '../../store/db.ts';
import * as store from '../../store/domains.ts';
import { isForeignKeyViolation } from '../../store/db.ts';
import type { Caller } from '../caller.ts';
import { DnsLookupError, DnsVerifier } from '../dns-verifier.ts';
import { int64Param, type ControlApp, type ControlDeps } from '../http.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';

/** The label the TXT record lives under: _edge-challenge.<domain> (underscored, so it never clashes with a host). */
export const CHALLENGE_LABEL = '_edge-challenge';

// The challenge name must itself fit in 253 characters.
const MAX_DOMAIN_LENGTH = 253 - CHALLENGE_LABEL.length - 1;

const DomainView = Type.Object({
  id: Type.Integer(),
  name: Type.String({ description: 'Lower-case; internationalised names in their ASCII (xn--) form' }),
  verified: Type.Boolean(),
  verified_at: Nullable(Timestamp()),
  verification: Type.Object(
    {
      type: Type.Literal('TXT'),
      name: Type.String({ description: `${CHALLENGE_LABEL}.<domain>` }),
      value: Type.String(),
    },
    { description: 'Publish this TXT record, then call POST /v1/domains/{id}/verify' },
  ),
  created_at: Timestamp(),
});

const IdParams = Type.Object({ id: Type.String({ description: 'Domain id (int64)' }) });

export function domainView(d: store.DomainRow) {
  return {
    id: d.id,
    name: d.name,
    verified: d.verified_at !== null,
    verified_at: iso(d.verified_at),
    verification: { type: 'TXT' as const, name: `${CHALLENGE_LABEL}.${d.name}`, value: d.verification_token },
    created_at: iso(d.created_at),
  };
}

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

export function domainRoutes(app: ControlApp, { db, config }: ControlDeps): void {
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

  app.post(
    '/v1/domains',
    {
      schema: {
        summary: 'Claim a custom domain; the response names the TXT record that proves control of it',
        description:
          'Requires domains:manage. The name is canonicalised (lower-case, IDNA ASCII, no trailing dot). Several accounts may claim a name; ' +
          'only one can hold it verified. The platform base domain, its subdomains and its parents are refused.',
        tags: ['domains'],
        body: Strict({ name: Type.String({ minLength: 1, maxLength: 300 }) }),
        response: { 201: DomainView, 409: ErrorBody, ...ErrorResponses },
      },
    },
    async (req, reply) => {
      req.caller.requirePermission('domains:manage');
      const name = canonicalDomainName(req.body.name, config.baseDomain);
      // 128 random bits: unguessable, so a TXT record proves control of the zone, not luck.
      const token = `edge-verify=${randomBytes(16).toString('hex')}`;
      try {
        const row = await db.transaction((tx) =>
          store.insertDomain(tx, { accountId: req.caller.account.id, userId: req.caller.user.id, name, token }),
        );
        return reply.status(201).send(domainView(row));
      } catch (err) {
        if (isUniqueViolation(err, 'domains_account_name_key')) throw fail.already_exists(`${name} is already in this account`, { name });
        throw err;
      }
    },
  );

  app.get(
    '/v1/domains',
    {
      schema: {
        summary: "List the active account's domains, verified or not",
        tags: ['domains'],
        response: { 200: Type.Object({ items: Type.Array(DomainView) }), ...ErrorResponses },
      },
    },
    async (req) => ({ items: (await store.listDomains(db, req.caller.account.id)).map(domainView) }),
  );

  app.get(
    '/v1/domains/:id',
    {
      schema: {
        summary: 'Get a domain',
        description: "Another account's domain answers 404, the same as a missing one.",
        tags: ['domains'],
        params: IdParams,
        response: { 200: DomainView, ...ErrorResponses },
      },
    },
    async (req) => domainView(await domainFor(req.caller, req.params.id)),
  );

  app.delete(
    '/v1/domains/:id',
    {
      schema: {
        summary: 'Delete a domain; refused (409) while endpoints use it',
        description: 'Requires domains:manage. Deleting a verified domain releases the name for other accounts.',
        tags: ['domains'],
        params: IdParams,
        response: { 204: Type.Null(), 409: ErrorBody, ...ErrorResponses },
      },
    },
    async (req, reply) => {
      req.caller.requirePermission('domains:manage');
      const domain = await domainFor(req.caller, req.params.id);
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
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/v1/domains/:id/verify',
    {
      schema: {
        summary: 'Verify a domain by looking up its TXT challenge record',
        description:
          'Requires domains:manage. Looks up TXT at _edge-challenge.<domain> through the configured resolvers; a record equal to ' +
          'verification.value verifies the domain (idempotent once verified). 409 `conflict` (detail.reason `txt_record_not_found`) ' +
          'when no such record is published yet; 409 `already_exists` when another account holds the name verified; ' +
          '503 `unavailable` (detail.reason `dns_lookup_failed`) when the resolver fails or times out — retry later.',
        tags: ['domains'],
        params: IdParams,
        response: { 200: DomainView, 409: ErrorBody, 503: ErrorBody, ...ErrorResponses },
      },
    },
    async (req) => {
      req.caller.requirePermission('domains:manage');
      const domain = await domainFor(req.caller, req.params.id);
      if (domain.verified_at) return domainView(domain);
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
      return domainView(await markVerified(domain));
    },
  );

  app.post(
    '/v1/admin/domains/:id/verify',
    {
      schema: {
        summary: 'Mark any account’s domain verified without a DNS check (admin)',
        description: '409 `already_exists` when another account holds the name verified.',
        tags: ['admin', 'domains'],
        params: IdParams,
        response: { 200: DomainView, 409: ErrorBody, ...ErrorResponses },
      },
    },
    async (req) => {
      req.caller.requireAdmin();
      const domain = await store.findDomainById(db, int64Param(req.params.id));
      if (!domain) throw fail.not_found('Domain not found');
      return domainView(await markVerified(domain));
    },
  );
}
