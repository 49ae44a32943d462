// Response shapes shared by several route modules, and the row -> JSON conversions behind them.
// Timestamps leave the API as RFC 3339 UTC strings (docs/api.md conventions).
import { Type } from '@sinclair/typebox';
import { Nullable, Timestamp } from '../shared/schema.ts';
import type { AccountRow } from '../store/accounts.ts';
import type { RbacClientRow } from '../store/rbac.ts';

export function iso(value: Date | string): string;
export function iso(value: Date | string | null | undefined): string | null;
export function iso(value: Date | string | null | undefined): string | null {
  if (value === null || value === undefined) return null;
  return (value instanceof Date ? value : new Date(value)).toISOString();
}

export const ErrorBody = Type.Object(
  {
    error: Type.String(),
    code: Type.String(),
    detail: Type.Optional(
      Type.Unknown({ description: 'Specifics. A validation error (400) has `{field, reason}`; rate-limit condition validation alone a reason string (docs/errors.md)' }),
    ),
  },
  { additionalProperties: true, description: 'The uniform error body' },
);

/** Documented on every operation; the error handler produces them. */
export const ErrorResponses = {
  400: ErrorBody,
  401: ErrorBody,
  403: ErrorBody,
  404: ErrorBody,
  // store_unavailable (with Retry-After): any operation that reaches the database while it cannot be reached.
  503: ErrorBody,
} as const;

export const AccountView = Type.Object({
  id: Type.Integer(),
  kind: Type.Union([Type.Literal('personal'), Type.Literal('organization')]),
  name: Type.String(),
  plan: Type.String(),
  suspended: Type.Boolean(),
  suspended_at: Nullable(Timestamp()),
});

export function accountView(a: Pick<AccountRow, 'id' | 'kind' | 'name' | 'plan' | 'suspended_at'>) {
  return { id: a.id, kind: a.kind, name: a.name, plan: a.plan, suspended: a.suspended_at !== null, suspended_at: iso(a.suspended_at) };
}

/**
 * An RBAC client (docs/api.md "Clients and invites"), for every route that shows one (overview, clients API). The original specification leaves
 * open whether username, identities and metadata are read back; they are (docs/rbac.md): an admin needs to see
 * which login a client has. Password hashes and token digests never leave the store.
 */
export const RbacClientView = Type.Object(
  {
    id: Type.Integer(),
    identifier: Type.String({ description: 'Lower-case; unique per endpoint' }),
    display_name: Type.String(),
    email: Nullable(Type.String()),
    username: Nullable(Type.String()),
    status: Type.Union([Type.Literal('active'), Type.Literal('invited'), Type.Literal('disabled'), Type.Literal('revoked')]),
    has_password: Type.Boolean(),
    has_token: Type.Boolean(),
    has_oauth: Type.Boolean({ description: 'At least one linked OAuth/OIDC identity' }),
    identities: Type.Array(Type.Object({ provider: Type.String(), subject: Type.String() })),
    registration_source: Type.Union([Type.Literal('admin'), Type.Literal('self'), Type.Literal('invite'), Type.Literal('sso')]),
    metadata: Type.Record(Type.String(), Type.Unknown()),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { description: 'RBAC client' },
);

export function rbacClientView(c: RbacClientRow) {
  return {
    id: c.id,
    identifier: c.identifier,
    display_name: c.display_name,
    email: c.email,
    username: c.username,
    status: c.status,
    has_password: c.has_password,
    has_token: c.has_token,
    has_oauth: c.has_oauth,
    identities: c.identities,
    registration_source: c.registration_source,
    metadata: c.metadata,
    created_at: iso(c.created_at),
    updated_at: iso(c.updated_at),
  };
}
