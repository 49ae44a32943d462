// Routing conditions as both planes handle them: the control API puts a condition in canonical form here, and the
// edge compiles the stored form into matchers here. Validation ends by compiling, so what is stored always compiles.
//
// Two steps, both pure: `canonicalCondition` is the stricter one (it refuses what could never match a normalised
// request and rewrites patterns into the form requests arrive in); `compileConditionMatcher` turns a stored
// condition into matchers over plain strings, which the edge wraps into probes over its request context.
import { ROUTING_CONDITION_TYPES, ROUTING_PATH_MODES, type RoutingConditionConfig, type RoutingConditionType } from '../snapshot.ts';
import { compileCidrList, parseCidr, type IpWords } from './cidr.ts';
import { compilePathGlob, compilePathPrefix, compileSegmentGlob, compileValueGlob, type StringMatcher } from './glob.ts';

export const MAX_CONDITION_KEY_LENGTH = 256;
export const MAX_CONDITION_PATTERN_LENGTH = 1024;
/** Entries of one `source_ip` list. */
export const MAX_ADDRESSES = 64;
/** Segments a path glob may have (routing, RBAC and rate-limit patterns alike): see canonicalPathPattern. */
export const MAX_GLOB_SEGMENTS = 16;

/** A condition the control API refuses; `field` names the part that is wrong. */
export class ConditionError extends Error {
  override name = 'ConditionError';
  constructor(
    readonly field: 'condition_type' | 'condition_key' | 'pattern',
    message: string,
  ) {
    super(message);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Compiling a stored condition (what the edge runs)
// ---------------------------------------------------------------------------------------------------------------

/** A matcher over a value split on its separator (path segments, host labels); the caller splits once per request. */
export type SegmentsMatcher = (segments: readonly string[]) => boolean;

/** A condition compiled into matchers over plain values; what each matcher reads from a request is said per kind. */
export type ConditionMatcher =
  /** The normalised path. */
  | { kind: 'path'; match: StringMatcher }
  /** The normalised path split on "/". */
  | { kind: 'path_segments'; match: SegmentsMatcher }
  /** The upper-case method. */
  | { kind: 'method'; methods: ReadonlySet<string> }
  /** Any value of header `name` (lower-case); `match` null means presence alone. */
  | { kind: 'header'; name: string; match: StringMatcher | null }
  /** Any decoded value of query parameter `name`. */
  | { kind: 'query'; name: string; match: StringMatcher }
  /** Any value of cookie `name`. */
  | { kind: 'cookie'; name: string; match: StringMatcher }
  /** The client address, parsed (null when it does not parse). */
  | { kind: 'source_ip'; match: (ip: IpWords | null) => boolean }
  /** The host, lower-case, without port. */
  | { kind: 'host'; match: StringMatcher }
  /** The host split on ".". */
  | { kind: 'host_labels'; match: SegmentsMatcher };

function compilePath(mode: string, pattern: string): ConditionMatcher {
  switch (mode) {
    case 'exact':
      return { kind: 'path', match: (p) => p === pattern };
    case 'prefix':
      return { kind: 'path', match: compilePathPrefix(pattern) };
    case 'glob': {
      const glob = compilePathGlob(pattern);
      return glob.needsSegments ? { kind: 'path_segments', match: glob.match } : { kind: 'path', match: glob.match };
    }
  }
  throw new RangeError(`unknown path match mode "${mode}" (expected ${ROUTING_PATH_MODES.join(', ')})`);
}

/** Comma list → trimmed items without empty ones. */
const items = (list: string): string[] =>
  list
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');

/**
 * Compiles a stored condition. Lenient where stored rows may predate canonical forms (an empty path key is
 * `prefix`, names and methods are case-folded again); throws a RangeError on anything it cannot compile.
 */
export function compileConditionMatcher(condition: RoutingConditionConfig): ConditionMatcher {
  const { condition_type: type, condition_key: key, pattern } = condition;
  switch (type) {
    case 'path':
      return compilePath(key === '' ? 'prefix' : key, pattern);
    case 'method': {
      const methods = new Set(items(pattern).map((m) => m.toUpperCase()));
      if (methods.size === 0) throw new RangeError('a method condition needs at least one method');
      return { kind: 'method', methods };
    }
    case 'header': {
      const name = key.toLowerCase();
      if (name === '') throw new RangeError('a header condition needs the header name in condition_key');
      // `*` is "present with any value"; the glob says so too, but presence skips even the value lookup.
      return { kind: 'header', name, match: pattern === '*' ? null : compileValueGlob(pattern) };
    }
    case 'query':
      if (key === '') throw new RangeError('a query condition needs the parameter name in condition_key');
      return { kind: 'query', name: key, match: compileValueGlob(pattern) };
    case 'cookie':
      if (key === '') throw new RangeError('a cookie condition needs the cookie name in condition_key');
      return { kind: 'cookie', name: key, match: compileValueGlob(pattern) };
    case 'source_ip':
      return { kind: 'source_ip', match: compileCidrList(pattern) };
    case 'host': {
      const glob = pattern.toLowerCase();
      if (!glob.includes('*')) return { kind: 'host', match: (h) => h === glob };
      return { kind: 'host_labels', match: compileSegmentGlob(glob, '.') };
    }
  }
  throw new RangeError(`unknown condition type "${String(type)}"`);
}

// ---------------------------------------------------------------------------------------------------------------
// Canonical form (what the control API stores)
// ---------------------------------------------------------------------------------------------------------------

/** RFC 9110 §5.6.2 token: header field names, methods and (RFC 6265) cookie names. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Control characters other than tab. */
export const CONTROL_CHARS = /[\x00-\x08\x0a-\x1f\x7f]/;
/** RFC 3986 unreserved: what path normalisation decodes from percent-escapes. */
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
/** pchar (RFC 3986 §3.3) and `/`: every other ASCII character is refused in a path pattern. */
const PATH_ASCII = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/]$/;
const HOST_NAME = /^[a-z0-9*_-]+(\.[a-z0-9*_-]+)*$/;
const HOST_IPV6_LITERAL = /^\[[0-9a-f:.]+\]$/;

/**
 * A path pattern as the edge compares it: paths reach stages normalised (docs/architecture.md), so the pattern is put
 * in the same form — escapes of unreserved characters decoded, other escapes upper-cased, non-ASCII characters
 * percent-encoded as UTF-8 the way browsers send them. Dot segments and `//` can never match and are refused.
 */
export function canonicalPathPattern(pattern: string): string {
  if (!pattern.startsWith('/')) throw new ConditionError('pattern', 'a path pattern must start with "/"');
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '%') {
      const hex = pattern.slice(i + 1, i + 3);
      if (!/^[0-9A-Fa-f]{2}$/.test(hex)) throw new ConditionError('pattern', `malformed percent-escape at offset ${i}`);
      const ch = String.fromCharCode(parseInt(hex, 16));
      out += UNRESERVED.test(ch) ? ch : `%${hex.toUpperCase()}`;
      i += 2;
    } else if (c.charCodeAt(0) > 0x7f) {
      const cp = pattern.codePointAt(i)!;
      const char = String.fromCodePoint(cp);
      out += encodeURIComponent(char);
      i += char.length - 1;
    } else if (PATH_ASCII.test(c)) {
      out += c;
    } else {
      throw new ConditionError('pattern', `character ${JSON.stringify(c)} cannot appear in a request path (percent-encode it, or drop the query)`);
    }
  }
  const segments = out.split('/').slice(1);
  // Glob matching costs up to pattern segments × path segments, and visitors choose the path: a `/**/a/…/b` of 500
  // segments took 16 ms against a 14 kB path. Exact patterns compare as strings whatever their length.
  if (out.includes('*') && segments.length > MAX_GLOB_SEGMENTS) {
    throw new ConditionError('pattern', `a path pattern with "*" has at most ${MAX_GLOB_SEGMENTS} segments`);
  }
  segments.forEach((segment, i) => {
    if (segment === '.' || segment === '..') throw new ConditionError('pattern', 'dot segments never reach routing (paths are normalised first)');
    if (segment === '' && i < segments.length - 1) throw new ConditionError('pattern', 'empty segments ("//") never reach routing (paths are normalised first)');
  });
  return out;
}

function valueGlob(pattern: string): string {
  if (CONTROL_CHARS.test(pattern)) throw new ConditionError('pattern', 'control characters cannot appear in a value');
  return pattern;
}

function token(key: string, what: string): string {
  if (key === '') throw new ConditionError('condition_key', `condition_key must name the ${what}`);
  if (!TOKEN.test(key)) throw new ConditionError('condition_key', `"${key}" is not a valid ${what}`);
  return key;
}

function noKey(type: RoutingConditionType, key: string): void {
  if (key !== '') throw new ConditionError('condition_key', `condition_key must be empty for a ${type} condition`);
}

/** A comma list, trimmed, case-folded by `fold`, without empty items or duplicates, in the order given. */
const uniqueItems = (list: string, fold: (s: string) => string): string[] => [...new Set(items(list).map(fold))];

/** Comma list of addresses and CIDRs, each checked by the parser the edge matches with. */
function addressList(pattern: string): string {
  const entries = uniqueItems(pattern, (e) => e.toLowerCase());
  if (entries.length === 0) throw new ConditionError('pattern', 'list at least one IP address or CIDR');
  if (entries.length > MAX_ADDRESSES) throw new ConditionError('pattern', `at most ${MAX_ADDRESSES} addresses or CIDRs`);
  for (const entry of entries) {
    try {
      parseCidr(entry);
    } catch (err) {
      throw new ConditionError('pattern', (err as Error).message);
    }
  }
  return entries.join(',');
}

function canonicalForm(type: string, key: string, pattern: string): RoutingConditionConfig {
  if (!(ROUTING_CONDITION_TYPES as readonly string[]).includes(type)) {
    throw new ConditionError('condition_type', `unknown condition_type "${type}"; expected one of ${ROUTING_CONDITION_TYPES.join(', ')}`);
  }
  if (pattern.length > MAX_CONDITION_PATTERN_LENGTH) throw new ConditionError('pattern', `a pattern is at most ${MAX_CONDITION_PATTERN_LENGTH} characters`);
  if (key.length > MAX_CONDITION_KEY_LENGTH) throw new ConditionError('condition_key', `condition_key is at most ${MAX_CONDITION_KEY_LENGTH} characters`);
  const condition_type = type as RoutingConditionType;
  const out = (condition_key: string, canonical: string): RoutingConditionConfig => ({ condition_type, condition_key, pattern: canonical });
  switch (condition_type) {
    case 'path': {
      const mode = key === '' ? 'prefix' : key.toLowerCase();
      if (!(ROUTING_PATH_MODES as readonly string[]).includes(mode)) {
        throw new ConditionError('condition_key', `a path condition_key is one of ${ROUTING_PATH_MODES.join(', ')} (empty means prefix)`);
      }
      return out(mode, canonicalPathPattern(pattern));
    }
    case 'method': {
      noKey(condition_type, key);
      const methods = uniqueItems(pattern, (m) => m.toUpperCase());
      if (methods.length === 0) throw new ConditionError('pattern', 'list at least one method, e.g. "GET,HEAD"');
      const bad = methods.find((m) => !TOKEN.test(m));
      if (bad !== undefined) throw new ConditionError('pattern', `"${bad}" is not an HTTP method`);
      return out('', methods.join(','));
    }
    case 'header':
      return out(token(key, 'header name').toLowerCase(), valueGlob(pattern));
    case 'query':
      if (key === '') throw new ConditionError('condition_key', 'condition_key must name the query parameter');
      if (CONTROL_CHARS.test(key)) throw new ConditionError('condition_key', 'control characters cannot appear in a parameter name');
      return out(key, valueGlob(pattern));
    case 'cookie':
      return out(token(key, 'cookie name'), valueGlob(pattern));
    case 'source_ip':
      noKey(condition_type, key);
      return out('', addressList(pattern));
    case 'host': {
      noKey(condition_type, key);
      const host = pattern.trim().toLowerCase();
      if (host.length > 253 || !(HOST_NAME.test(host) || HOST_IPV6_LITERAL.test(host))) {
        throw new ConditionError('pattern', 'a host pattern is a host name (labels of a-z 0-9 - _, `*` for one label, `**` for any) without a port');
      }
      return out('', host);
    }
  }
}

/**
 * A condition in canonical form, or a ConditionError saying which field is wrong. The result is compiled before it
 * is returned, with the edge's compiler: a condition this accepts can never fail to compile at the edge.
 */
export function canonicalCondition(type: string, key: string, pattern: string): RoutingConditionConfig {
  const condition = canonicalForm(type, key, pattern);
  try {
    compileConditionMatcher(condition);
  } catch (err) {
    // Unreachable while the canonical checks above are at least as strict as the compiler; kept so they cannot drift.
    throw new ConditionError('pattern', (err as Error).message);
  }
  return condition;
}
