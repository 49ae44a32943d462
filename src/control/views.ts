// Response shapes shared by several route modules, and the row -> JSON conversions behind them.
// Timestamps leave the API as RFC 3339 UTC strings (SPEC.md conventions).
import { Type } from '@sinclair/typebox';
import { Nullable, Timestamp } from '../shared/schema.ts';
import type { AccountRow } from '../store/accounts.ts';

export function iso(value: Date | string): string;
export function iso(value: Date | string | null | undefined): string | null;
export function iso(value: Date | string | null | undefined): string | null {
  if (value === null || value === undefined) return null;
  return (value instanceof Date ? value : new Date(value)).toISOString();
}

export const ErrorBody = Type.Object(
  { error: Type.String(), code: Type.String(), detail: Type.Optional(Type.Unknown()) },
  { additionalProperties: true, description: 'The uniform error body' },
);

/** Documented on every operation; the error handler produces them. */
export const ErrorResponses = {
  400: ErrorBody,
  401: ErrorBody,
  403: ErrorBody,
  404: ErrorBody,
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
