// The custom domain API's shapes: the domain view with the TXT record that proves control of it, and one schema
// object per operation.
import { Type } from '@sinclair/typebox';
import { Nullable, Strict, Timestamp } from '../../shared/schema.ts';
import type { DomainRow } from '../../store/domains.ts';
import { CHALLENGE_LABEL } from '../services/domains.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';

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

export function domainView(d: DomainRow) {
  return {
    id: d.id,
    name: d.name,
    verified: d.verified_at !== null,
    verified_at: iso(d.verified_at),
    verification: { type: 'TXT' as const, name: `${CHALLENGE_LABEL}.${d.name}`, value: d.verification_token },
    created_at: iso(d.created_at),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------------------------

export const ClaimDomain = {
  operationId: 'createDomain',
  summary: 'Claim a custom domain; the response names the TXT record that proves control of it',
  description:
    'Requires domains:manage. The name is canonicalised (lower-case, IDNA ASCII, no trailing dot). Several accounts may claim a name; ' +
    'only one can hold it verified. The platform base domain, its subdomains and its parents are refused.',
  tags: ['domains'],
  body: Strict({ name: Type.String({ minLength: 1, maxLength: 300 }) }),
  response: { 201: DomainView, 409: ErrorBody, ...ErrorResponses },
};

export const ListDomains = {
  operationId: 'listDomains',
  summary: "List the active account's domains, verified or not",
  tags: ['domains'],
  response: { 200: Type.Object({ items: Type.Array(DomainView) }), ...ErrorResponses },
};

export const GetDomain = {
  operationId: 'getDomain',
  summary: 'Get a domain',
  description: "Another account's domain answers 404, the same as a missing one.",
  tags: ['domains'],
  params: IdParams,
  response: { 200: DomainView, ...ErrorResponses },
};

export const DeleteDomain = {
  operationId: 'deleteDomain',
  summary: 'Delete a domain; refused (409) while endpoints use it',
  description: 'Requires domains:manage. Deleting a verified domain releases the name for other accounts.',
  tags: ['domains'],
  params: IdParams,
  response: { 204: Type.Null(), 409: ErrorBody, ...ErrorResponses },
};

export const VerifyDomain = {
  operationId: 'verifyDomain',
  summary: 'Verify a domain by looking up its TXT challenge record',
  description:
    'Requires domains:manage. Looks up TXT at _edge-challenge.<domain> through the configured resolvers; a record equal to ' +
    'verification.value verifies the domain (idempotent once verified). 409 `conflict` (detail.reason `txt_record_not_found`) ' +
    'when no such record is published yet; 409 `already_exists` when another account holds the name verified; ' +
    '503 `unavailable` (detail.reason `dns_lookup_failed`) when the resolver fails or times out — retry later.',
  tags: ['domains'],
  params: IdParams,
  response: { 200: DomainView, 409: ErrorBody, ...ErrorResponses },
};

export const AdminVerifyDomain = {
  operationId: 'markDomainVerified',
  summary: 'Mark any account’s domain verified without a DNS check (admin)',
  description: '409 `already_exists` when another account holds the name verified.',
  tags: ['admin', 'domains'],
  params: IdParams,
  response: { 200: DomainView, 409: ErrorBody, ...ErrorResponses },
};
