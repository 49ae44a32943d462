// An RBAC role's permissions in canonical form (docs/rbac.md "Roles"): the control API validates and stores this form,
// and the edge compiles the same form with the matchers below, so a pattern the API accepted is one the edge runs.
//
// Pure and shared: no store, no edge. `canonicalRbacPermissions` throws RbacPermissionsError naming the field.
import { claimHeaderRefusal } from './visitor-credentials.ts';
import { canonicalPathPattern, ConditionError, CONTROL_CHARS, MAX_CONDITION_PATTERN_LENGTH } from './match/condition.ts';
import { compilePathGlob, compilePathPrefix, type StringMatcher } from './match/glob.ts';
import type { RbacPermissionsConfig } from './snapshot.ts';

/** Entries of one list or map (methods, paths, headers, metadata): each is compiled into every holder's decision. */
export const MAX_RBAC_ENTRIES = 64;
export const MAX_RBAC_METHOD_LENGTH = 32;
export const MAX_RBAC_PATH_LENGTH = MAX_CONDITION_PATTERN_LENGTH;
export const MAX_RBAC_HEADER_VALUE_LENGTH = 1024;
export const MAX_RBAC_METADATA_KEY_LENGTH = 100;
export const MAX_RBAC_METADATA_VALUE_LENGTH = 1000;
export const MAX_RBAC_RATE_LIMIT_RPS = 1_000_000;

/** `*` in allowed_methods: any method. */
export const ANY_METHOD = '*';

/** The permissions fields, in the order the API documents and stores them. */
export const RBAC_PERMISSION_FIELDS = ['allowed_methods', 'denied_methods', 'allowed_paths', 'denied_paths', 'rate_limit_rps', 'headers', 'metadata'] as const;

export type CanonicalRbacPermissions = RbacPermissionsConfig & { metadata: Record<string, string> };

/** What a request body may carry; every field optional (docs/api.md: omitted sub-fields default to empty). */
export interface RbacPermissionsInput {
  allowed_methods?: unknown;
  denied_methods?: unknown;
  allowed_paths?: unknown;
  denied_paths?: unknown;
  rate_limit_rps?: unknown;
  headers?: unknown;
  metadata?: unknown;
}

/** Permissions the API refuses; `field` is the dotted path inside the role body (`permissions.allowed_paths.2`). */
export class RbacPermissionsError extends Error {
  override name = 'RbacPermissionsError';
  constructor(
    readonly field: string,
    readonly reason: string,
  ) {
    super(`Invalid ${field}: ${reason}`);
  }
}

/** RFC 9110 §9.1: a method is a token (§5.6.2). Upper case is this API's rule (methods are case-sensitive). */
const METHOD_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const LOWER = /[a-z]/;
/** Header values the edge can set as they are: visible ASCII, space and tab inside, nothing Node would refuse. */
const HEADER_VALUE = /^(?:[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?)?$/;

function list(input: unknown, field: string): unknown[] {
  if (input === undefined || input === null) return [];
  if (!Array.isArray(input)) throw new RbacPermissionsError(field, 'must be an array of strings');
  if (input.length > MAX_RBAC_ENTRIES) throw new RbacPermissionsError(field, `at most ${MAX_RBAC_ENTRIES} entries`);
  return input;
}

function map(input: unknown, field: string): [string, unknown][] {
  if (input === undefined || input === null) return [];
  if (typeof input !== 'object' || Array.isArray(input)) throw new RbacPermissionsError(field, 'must be an object of strings');
  const entries = Object.entries(input);
  if (entries.length > MAX_RBAC_ENTRIES) throw new RbacPermissionsError(field, `at most ${MAX_RBAC_ENTRIES} entries`);
  return entries;
}

/** Methods: upper-case tokens, each once, in the order given; `*` only where `allowAny`. */
function methods(input: unknown, field: string, allowAny: boolean): string[] {
  const out = new Set<string>();
  list(input, field).forEach((m, i) => {
    const at = `${field}.${i}`;
    if (typeof m !== 'string' || m === '') throw new RbacPermissionsError(at, 'must be a method name');
    if (m === ANY_METHOD) {
      if (!allowAny) throw new RbacPermissionsError(at, '"*" (any method) is only allowed in allowed_methods');
    } else {
      if (m.length > MAX_RBAC_METHOD_LENGTH || !METHOD_TOKEN.test(m)) throw new RbacPermissionsError(at, `"${m}" is not an HTTP method token (RFC 9110 §9.1)`);
      if (LOWER.test(m)) throw new RbacPermissionsError(at, `methods are case-sensitive and written upper-case ("${m.toUpperCase()}", not "${m}")`);
    }
    out.add(m);
  });
  return [...out];
}

export type RbacPathKind = 'exact' | 'prefix' | 'glob';

/**
 * How a canonical pattern matches: ending in `/*` with no other `*` is a prefix, any other `*` makes a glob (`*` one
 * segment or part of one, `**` any depth, as routing rules' globs), no `*` is exact.
 */
export function rbacPathKind(pattern: string): RbacPathKind {
  const star = pattern.indexOf('*');
  if (star === -1) return 'exact';
  if (star === pattern.length - 1 && pattern.endsWith('/*')) return 'prefix';
  return 'glob';
}

/** A compiled path pattern: over the whole normalised path, or over its segments (split on "/", the leading "" kept). */
export type RbacPathMatcher = { needsSegments: false; match: StringMatcher } | { needsSegments: true; match: (segments: readonly string[]) => boolean };

/**
 * Compiles a canonical pattern into the matcher the edge runs. A prefix `/api/*` matches `/api` itself and every
 * path below it on segment boundaries (not `/apix`): a deny on `/admin/*` must cover `/admin` too; `/*` matches all.
 */
export function compileRbacPath(pattern: string): RbacPathMatcher {
  switch (rbacPathKind(pattern)) {
    case 'exact':
      return { needsSegments: false, match: (p) => p === pattern };
    case 'prefix':
      return { needsSegments: false, match: compilePathPrefix(pattern.slice(0, -2) || '/') };
    case 'glob':
      return compilePathGlob(pattern);
  }
}

/** Paths: canonical (routing's canonicalPathPattern: escapes as normalised requests carry them), compiled, each once. */
function paths(input: unknown, field: string): string[] {
  const out = new Set<string>();
  list(input, field).forEach((p, i) => {
    const at = `${field}.${i}`;
    if (typeof p !== 'string' || p === '') throw new RbacPermissionsError(at, 'must be a path pattern starting with "/"');
    if (p.length > MAX_RBAC_PATH_LENGTH) throw new RbacPermissionsError(at, `a path pattern is at most ${MAX_RBAC_PATH_LENGTH} characters`);
    let canonical: string;
    try {
      canonical = canonicalPathPattern(p);
    } catch (err) {
      if (err instanceof ConditionError) throw new RbacPermissionsError(at, err.message);
      throw err;
    }
    try {
      compileRbacPath(canonical);
    } catch (err) {
      throw new RbacPermissionsError(at, `cannot be compiled: ${(err as Error).message}`);
    }
    out.add(canonical);
  });
  return [...out];
}

function rateLimit(input: unknown, field: string): number {
  if (input === undefined || input === null) return 0;
  if (typeof input !== 'number' || !Number.isInteger(input) || input < 0 || input > MAX_RBAC_RATE_LIMIT_RPS) {
    throw new RbacPermissionsError(field, `must be an integer from 0 (no limit) to ${MAX_RBAC_RATE_LIMIT_RPS}`);
  }
  return input;
}

/** Headers stamped on the forwarded request: lower-case names the edge may set, values it can send unchanged. */
function headers(input: unknown, field: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of map(input, field)) {
    const at = `${field}.${name}`;
    const refusal = claimHeaderRefusal(name);
    if (refusal !== null) throw new RbacPermissionsError(at, refusal);
    const lower = name.toLowerCase();
    if (Object.hasOwn(out, lower)) throw new RbacPermissionsError(at, `"${lower}" is named twice (header names are case-insensitive)`);
    if (typeof value !== 'string') throw new RbacPermissionsError(at, 'must be a string');
    if (value.length > MAX_RBAC_HEADER_VALUE_LENGTH) throw new RbacPermissionsError(at, `a header value is at most ${MAX_RBAC_HEADER_VALUE_LENGTH} characters`);
    if (!HEADER_VALUE.test(value)) {
      throw new RbacPermissionsError(at, 'a header value is visible ASCII with inner spaces or tabs: no control characters, no leading or trailing whitespace, nothing above U+007E');
    }
    out[lower] = value;
  }
  return out;
}

function metadata(input: unknown, field: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of map(input, field)) {
    const at = `${field}.${key}`;
    if (key === '' || key.length > MAX_RBAC_METADATA_KEY_LENGTH || CONTROL_CHARS.test(key)) {
      throw new RbacPermissionsError(at, `a metadata key is 1-${MAX_RBAC_METADATA_KEY_LENGTH} characters without control characters`);
    }
    if (typeof value !== 'string') throw new RbacPermissionsError(at, 'must be a string');
    if (value.length > MAX_RBAC_METADATA_VALUE_LENGTH) throw new RbacPermissionsError(at, `a metadata value is at most ${MAX_RBAC_METADATA_VALUE_LENGTH} characters`);
    out[key] = value;
  }
  return out;
}

/**
 * A role's permissions → the canonical stored form, every sub-field present (omitted ones empty). Refuses unknown
 * fields too, so a caller without a strict schema (or a stored row from elsewhere) gets the same answer.
 * `prefix` names the field in errors (`permissions` in a role body).
 */
export function canonicalRbacPermissions(input: RbacPermissionsInput | null | undefined, prefix = 'permissions'): CanonicalRbacPermissions {
  if (input === undefined || input === null) input = {};
  if (typeof input !== 'object' || Array.isArray(input)) throw new RbacPermissionsError(prefix, 'must be an object');
  for (const key of Object.keys(input)) {
    if (!(RBAC_PERMISSION_FIELDS as readonly string[]).includes(key)) throw new RbacPermissionsError(`${prefix}.${key}`, 'unknown field');
  }
  return {
    allowed_methods: methods(input.allowed_methods, `${prefix}.allowed_methods`, true),
    denied_methods: methods(input.denied_methods, `${prefix}.denied_methods`, false),
    allowed_paths: paths(input.allowed_paths, `${prefix}.allowed_paths`),
    denied_paths: paths(input.denied_paths, `${prefix}.denied_paths`),
    rate_limit_rps: rateLimit(input.rate_limit_rps, `${prefix}.rate_limit_rps`),
    headers: headers(input.headers, `${prefix}.headers`),
    metadata: metadata(input.metadata, `${prefix}.metadata`),
  };
}

/** Stored permissions may predate a sub-field (or be `{}`, the column's default): every sub-field, empty where missing. */
export function fillRbacPermissions(p: Partial<CanonicalRbacPermissions> | null | undefined): CanonicalRbacPermissions {
  return {
    allowed_methods: p?.allowed_methods ?? [],
    denied_methods: p?.denied_methods ?? [],
    allowed_paths: p?.allowed_paths ?? [],
    denied_paths: p?.denied_paths ?? [],
    rate_limit_rps: p?.rate_limit_rps ?? 0,
    headers: p?.headers ?? {},
    metadata: p?.metadata ?? {},
  };
}

/** Whether canonical permissions say nothing at all (docs/api.md PUT: an empty or zeroed object keeps the stored ones). */
export function isZeroPermissions(p: CanonicalRbacPermissions): boolean {
  return (
    p.allowed_methods.length === 0 &&
    p.denied_methods.length === 0 &&
    p.allowed_paths.length === 0 &&
    p.denied_paths.length === 0 &&
    p.rate_limit_rps === 0 &&
    Object.keys(p.headers).length === 0 &&
    Object.keys(p.metadata).length === 0
  );
}

/** The edge's view: the canonical form without `metadata`, which is for the API alone. */
export function edgePermissions(p: RbacPermissionsConfig & { metadata?: unknown }): RbacPermissionsConfig {
  const { metadata: _metadata, ...edge } = p;
  return edge;
}
