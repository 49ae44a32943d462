// Schema building blocks shared by the control API and config: TypeBox schemas are JSON Schema, so the same
// definitions validate requests and describe them in the OpenAPI document.
import { FormatRegistry, Type, type TSchema } from '@sinclair/typebox';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;
// Deliberately loose (one @, a dot in the domain): mailbox validity is the mail server's call, not ours.
const EMAIL = /^[^\s@]{1,64}@[^\s@]+\.[^\s@]+$/;

if (!FormatRegistry.Has('uuid')) FormatRegistry.Set('uuid', (v) => UUID.test(v));
if (!FormatRegistry.Has('date-time')) FormatRegistry.Set('date-time', (v) => DATE_TIME.test(v) && !Number.isNaN(Date.parse(v)));
if (!FormatRegistry.Has('email')) FormatRegistry.Set('email', (v) => v.length <= 254 && EMAIL.test(v));

export const INT64_MAX = 9223372036854775807n;

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/** A positive int64 written in decimal, as in a path segment; rejects "1e3", "+1", "01" padding tricks stay exact. */
export function parseInt64(value: string): number | null {
  if (!/^[0-9]{1,19}$/.test(value)) return null;
  const big = BigInt(value);
  if (big < 1n || big > INT64_MAX) return null;
  // Ids are bigserial values far below 2^53. A valid int64 beyond that cannot name a row: it becomes 0, which no
  // row has, so lookups answer 404 instead of sending a rounded number to SQL.
  return big > BigInt(Number.MAX_SAFE_INTEGER) ? 0 : Number(big);
}

export const Uuid = (options: object = {}) => Type.String({ format: 'uuid', ...options });
export const Timestamp = (options: object = {}) => Type.String({ format: 'date-time', ...options });
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
/** A strict object: unknown fields are a 400 naming the field (docs/api.md "Conventions"). */
export const Strict = <T extends Parameters<typeof Type.Object>[0]>(properties: T, options: object = {}) =>
  Type.Object(properties, { additionalProperties: false, ...options });
