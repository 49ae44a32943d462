// The rate-limit condition language, shared by both planes: the control API validates and canonicalises a
// condition here (and the shadow analysis reads the parsed form), the edge compiles stored conditions into closures.
//
// Three steps, all pure:
// - `parseRateLimitCondition` turns (type, operator, value) into a typed form, or throws RateLimitConditionError
//   with a human `detail` (the API answers `{"error":"Bad request","detail":…}`, docs/api.md "Errors").
// - `canonicalRateLimitCondition` prints that form back as the one stored spelling (lists de-duplicated, case
//   folded where the type is case-insensitive, `AS` prefixes dropped…), so equal conditions are equal strings.
// - `compileRateLimitConditions` builds the per-request matcher once, from the stored conditions of one rule.
//
// Precedence: each condition's `logical_operator` joins it to the NEXT condition; AND binds tighter than OR, so
// `a AND b OR c AND d` is `(a ∧ b) ∨ (c ∧ d)`. The last condition's logical_operator joins nothing and is ignored.
// Zero conditions match every request. There are no parentheses: any boolean formula of conditions can be written as
// a disjunction of conjunctions, which is exactly this form.
//
// Negated operators (`not_in`, `not_exists`) are the exact complement of their positive form, including when the
// fact is unknown: `country not_in US` matches a request whose country cannot be determined.
import { MAX_GLOB_SEGMENTS } from '../match/condition.ts';
import { RATE_LIMIT_CONDITION_TYPES, type RateLimitConditionConfig, type RateLimitConditionType } from '../snapshot.ts';
import { parseCidr, type IpWords } from '../match/cidr.ts';
import { canonicalPathPattern, ConditionError, CONTROL_CHARS } from '../match/condition.ts';
import { canonicalReadings, looseForm } from '../match/canonical-path.ts';
import { compilePathGlob, compilePathPrefix, compileValueGlob, type StringMatcher } from '../match/glob.ts';

/** Longest stored condition_value, and most entries in one list. */
export const MAX_CONDITION_VALUE_LENGTH = 1024;
export const MAX_LIST_ITEMS = 64;
/** Most segments in a path `matches` glob: the bound routing and RBAC patterns have (src/shared/match/condition.ts). */
export { MAX_GLOB_SEGMENTS } from '../match/condition.ts';

export const RATE_LIMIT_OPERATORS = [
  'equals',
  'in',
  'not_in',
  'contains',
  'prefix',
  'matches',
  'exists',
  'not_exists',
  // `path` only: the same tests on the normalised path as it is, instead of its canonical readings (see below).
  'exact_equals',
  'exact_in',
  'exact_not_in',
  'exact_contains',
  'exact_prefix',
  'exact_matches',
] as const;
export type RateLimitOperator = (typeof RATE_LIMIT_OPERATORS)[number];

/**
 * The operators each condition type allows, and what its value is:
 * - source_ip  in, not_in — comma list of IPv4/IPv6 addresses and CIDRs (`10.0.0.0/8, 2001:db8::/32`), at most 64;
 *   IPv4 also matches a client the socket reports as IPv4-mapped IPv6.
 * - country    equals, in, not_in — ISO 3166-1 alpha-2 codes (`US`, `de` → `DE`), from the edge's GeoIP database.
 * - asn        equals, in, not_in — autonomous system numbers, `AS` prefix optional (`AS13335` → `13335`).
 * - browser    equals, in, not_in — browser families (BROWSER_FAMILIES, lower-case), from the edge's UA parser.
 * - user_agent equals, contains, prefix, matches — the User-Agent header, case-sensitive; `matches` is a glob
 *   where `*` is any run of characters. No lists: user agents contain commas.
 * - endpoint   equals, in, not_in, contains, prefix, matches — the request's host name (lower-case, no port) or the
 *   endpoint's uuid; either matching is a match. Globs: `*` any run of characters.
 * - path       equals, in, not_in, contains, prefix, matches — the path's canonical readings (canonicalReadings in
 *   src/shared/match/canonical-path.ts, the form RBAC denies use): case-folded, without a final `/`, and also with
 *   `;` parameters stripped and `%2F` read as `/`; any reading matching is a match, so `equals /login` limits
 *   `/LOGIN`, `/login/`, `/login/.`, `/login;jsessionid=1` and `/login%2F` too. Values are stored folded the same way.
 *   `exact_equals`, `exact_in`, … (each operator with `exact_`) test the normalised path as is, case-sensitively:
 *   the opt-in for a service that really serves `/Login` and `/login` apart.
 *   `prefix` is on segment boundaries (`/api` covers `/api` and `/api/x`, not `/apix`, as in routing rules);
 *   `matches` is the routing path glob (`*` within one segment, `**` any depth).
 * - method     equals, in, not_in — upper-case method tokens (`get` → `GET`).
 * - header     exists, not_exists — value `name` (or none: any header field); equals, contains, prefix, matches — value `name=value`. Names are
 *   case-insensitive (stored lower-case), values case-sensitive; `matches` is a glob over the value.
 * - cookie     as header, but the cookie name is case-sensitive (RFC 6265); exists without a name: any cookie.
 * - protocol   equals, in, not_in — `http`, `https`, `ws`, `wss` (ws/wss: WebSocket upgrades over http/https).
 * - port       equals, in, not_in — the port the request arrived on, 1-65535.
 * Globs are never regular expressions: visitors choose the input, and a regex can backtrack (src/shared/match/glob.ts).
 */
export const OPERATORS_BY_TYPE: Readonly<Record<RateLimitConditionType, readonly RateLimitOperator[]>> = {
  source_ip: ['in', 'not_in'],
  country: ['equals', 'in', 'not_in'],
  asn: ['equals', 'in', 'not_in'],
  browser: ['equals', 'in', 'not_in'],
  user_agent: ['equals', 'contains', 'prefix', 'matches'],
  endpoint: ['equals', 'in', 'not_in', 'contains', 'prefix', 'matches'],
  path: ['equals', 'in', 'not_in', 'contains', 'prefix', 'matches', 'exact_equals', 'exact_in', 'exact_not_in', 'exact_contains', 'exact_prefix', 'exact_matches'],
  method: ['equals', 'in', 'not_in'],
  header: ['exists', 'not_exists', 'equals', 'contains', 'prefix', 'matches'],
  cookie: ['exists', 'not_exists', 'equals', 'contains', 'prefix', 'matches'],
  protocol: ['equals', 'in', 'not_in'],
  port: ['equals', 'in', 'not_in'],
};

/**
 * Browser families a `browser` condition may name. The edge maps its user-agent parser's name onto these with
 * `browserFamily` (so `Mobile Safari` is `safari`, `Chrome Headless` is `headless chrome`); anything else is null.
 */
export const BROWSER_FAMILIES = [
  'chrome',
  'chromium',
  'firefox',
  'safari',
  'edge',
  'opera',
  'ie',
  'samsung internet',
  'yandex',
  'uc browser',
  'vivaldi',
  'brave',
  'android browser',
  'headless chrome',
  'webview',
  'electron',
  'facebook',
  'instagram',
] as const;

const BROWSER_ALIASES: Record<string, string> = {
  'mobile chrome': 'chrome',
  'chrome mobile': 'chrome',
  'chrome mobile ios': 'chrome',
  'chrome ios': 'chrome',
  'mobile firefox': 'firefox',
  'firefox mobile': 'firefox',
  'firefox ios': 'firefox',
  'firefox focus': 'firefox',
  'mobile safari': 'safari',
  'safari mobile': 'safari',
  'microsoft edge': 'edge',
  'edge mobile': 'edge',
  'edge ios': 'edge',
  'opera mini': 'opera',
  'opera mobi': 'opera',
  'opera mobile': 'opera',
  'opera touch': 'opera',
  'opera gx': 'opera',
  'opera coast': 'opera',
  'internet explorer': 'ie',
  iemobile: 'ie',
  'ie mobile': 'ie',
  'samsung browser': 'samsung internet',
  'samsung internet for android': 'samsung internet',
  'yandex browser': 'yandex',
  ucbrowser: 'uc browser',
  'chrome headless': 'headless chrome',
  'headlesschrome': 'headless chrome',
  'chrome webview': 'webview',
  'android webview': 'webview',
};

const BROWSER_SET: ReadonlySet<string> = new Set(BROWSER_FAMILIES);

/** A UA parser's browser name as a BROWSER_FAMILIES entry, or null when it is none of them. */
export function browserFamily(parserName: string | null | undefined): string | null {
  if (!parserName) return null;
  const name = parserName.trim().toLowerCase();
  if (BROWSER_SET.has(name)) return name;
  return Object.hasOwn(BROWSER_ALIASES, name) ? BROWSER_ALIASES[name] : null;
}

/** A condition the API refuses; `detail` is the human reason the 400 body carries. */
export class RateLimitConditionError extends Error {
  override name = 'RateLimitConditionError';
  constructor(readonly detail: string) {
    super(detail);
  }
}

/**
 * What the edge knows about a request, as the conditions read it. Costly facts are functions, called only when a
 * condition needs them (and cached by the edge for the request).
 */
export interface RateLimitRequestFacts {
  /** The visitor address (trusted-proxy rules applied), parsed; null when it does not parse. */
  ip: IpWords | null;
  /** ISO 3166-1 alpha-2, upper-case; null when unknown. */
  country(): string | null;
  asn(): number | null;
  /** A BROWSER_FAMILIES entry (see browserFamily), null when unknown. */
  browser(): string | null;
  /** "" when the request has none. */
  userAgent: string;
  /** Lower-case, without port. */
  hostname: string;
  endpointUuid: string;
  /** Normalised as every stage sees it (docs/architecture.md), without the query. */
  path: string;
  /** Upper-case. */
  method: string;
  protocol: 'http' | 'https' | 'ws' | 'wss';
  port: number;
  /** `name` is lower-case; repeated fields come joined with ", ". */
  header(name: string): string | undefined;
  cookie(name: string): string | undefined;
  /** Whether the request carries any header field (`header exists` without a name). */
  anyHeader(): boolean;
  /** Whether the request sends any cookie, a `name=value` pair in Cookie (`cookie exists` without a name). */
  anyCookie(): boolean;
}

export type RateLimitMatcher = (facts: RateLimitRequestFacts) => boolean;

type Cidr = ReturnType<typeof parseCidr>;

/**
 * A validated condition in a form both the compiler and the shadow analysis read. `equals` on a list type and on
 * path/endpoint is `in` with one item; `not_*` are `negated` forms of the positive base.
 */
export type ParsedRateLimitCondition = {
  type: RateLimitConditionType;
  /** As stored. */
  operator: RateLimitOperator;
  negated: boolean;
  /** A `path` condition with an `exact_` operator: tested on the path as is, not on its canonical readings. */
  exact: boolean;
} & (
  | { base: 'cidrs'; cidrs: Cidr[]; entries: string[] }
  | { base: 'in'; items: string[] }
  | { base: 'numbers'; numbers: number[] }
  | { base: 'exists'; name: string }
  | { base: 'text'; op: 'equals' | 'contains' | 'prefix' | 'matches'; name: string | null; text: string }
);

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const COUNTRY = /^[A-Z]{2}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const HOST_NAME = /^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/;
const PROTOCOLS = ['http', 'https', 'ws', 'wss'];

const bad = (detail: string): never => {
  throw new RateLimitConditionError(detail);
};

/** Comma list → trimmed, folded, de-duplicated items in the order given; 1 to MAX_LIST_ITEMS of them. */
function listItems(type: string, operator: string, value: string, fold: (s: string) => string, what: string): string[] {
  const items = [...new Set(value.split(',').map((e) => fold(e.trim())).filter((e) => e !== ''))];
  if (items.length === 0) bad(`a ${type} condition needs ${what} in value`);
  if (operator === 'equals' && items.length > 1) bad(`${type} equals takes one ${what.replace(/s$/, '')}; use "in" for a list`);
  if (items.length > MAX_LIST_ITEMS) bad(`a ${type} list holds at most ${MAX_LIST_ITEMS} entries`);
  return items;
}

function pathValue(text: string): string {
  try {
    return canonicalPathPattern(text);
  } catch (err) {
    if (err instanceof ConditionError) bad(`path "${text}": ${err.message}`);
    throw err;
  }
}

function plainText(type: string, text: string): string {
  if (text === '') bad(`a ${type} condition needs a non-empty value`);
  if (CONTROL_CHARS.test(text)) bad(`control characters cannot appear in a ${type} value`);
  return text;
}

/** `name` or `name=value` of a header or cookie condition. */
function fieldName(type: 'header' | 'cookie', raw: string): string {
  const name = raw.trim();
  if (name === '') bad(`a ${type} condition needs the ${type} name in value ("name" or "name=value")`);
  if (!TOKEN.test(name)) bad(`"${name}" is not a valid ${type} name`);
  return type === 'header' ? name.toLowerCase() : name;
}

/** Validates one condition; throws RateLimitConditionError naming what is wrong. */
export function parseRateLimitCondition(type: string, operator: string, value: string | null | undefined): ParsedRateLimitCondition {
  if (!(RATE_LIMIT_CONDITION_TYPES as readonly string[]).includes(type)) {
    bad(`unknown condition type "${type}"; expected one of ${RATE_LIMIT_CONDITION_TYPES.join(', ')}`);
  }
  const t = type as RateLimitConditionType;
  const allowed = OPERATORS_BY_TYPE[t];
  const stored = String(operator).toLowerCase() as RateLimitOperator;
  if (!allowed.includes(stored)) bad(`operator "${operator}" is not allowed for ${t}; expected one of ${allowed.join(', ')}`);
  const exact = stored.startsWith('exact_');
  // The test itself; `exact_` only says which reading of the path it runs on.
  const op = (exact ? stored.slice('exact_'.length) : stored) as RateLimitOperator;
  const v = value ?? '';
  if (v.length > MAX_CONDITION_VALUE_LENGTH) bad(`a condition value is at most ${MAX_CONDITION_VALUE_LENGTH} characters`);
  const negated = op === 'not_in' || op === 'not_exists';
  const head = { type: t, operator: stored, negated, exact };

  switch (t) {
    case 'source_ip': {
      const entries = listItems(t, op, v, (e) => e.toLowerCase(), 'IP addresses or CIDRs');
      const cidrs = entries.map((e) => {
        try {
          return parseCidr(e);
        } catch (err) {
          return bad((err as Error).message);
        }
      });
      return { ...head, base: 'cidrs', cidrs, entries };
    }
    case 'country': {
      const items = listItems(t, op, v, (e) => e.toUpperCase(), 'ISO 3166-1 alpha-2 country codes');
      const wrong = items.find((c) => !COUNTRY.test(c));
      if (wrong !== undefined) bad(`"${wrong}" is not an ISO 3166-1 alpha-2 country code (two letters, e.g. US)`);
      return { ...head, base: 'in', items };
    }
    case 'asn': {
      const items = listItems(t, op, v, (e) => e.toUpperCase(), 'AS numbers');
      const numbers = items.map((e) => {
        const digits = e.startsWith('AS') ? e.slice(2) : e;
        const n = /^[0-9]{1,10}$/.test(digits) ? Number(digits) : NaN;
        if (!(n >= 0 && n <= 4_294_967_295)) bad(`"${e}" is not an AS number (0-4294967295, "AS" prefix optional)`);
        return n;
      });
      return { ...head, base: 'numbers', numbers: [...new Set(numbers)] };
    }
    case 'browser': {
      const items = listItems(t, op, v, (e) => e.toLowerCase(), 'browser names');
      const wrong = items.find((b) => !BROWSER_SET.has(b));
      if (wrong !== undefined) bad(`unknown browser "${wrong}"; known: ${BROWSER_FAMILIES.join(', ')}`);
      return { ...head, base: 'in', items };
    }
    case 'method': {
      const items = listItems(t, op, v, (e) => e.toUpperCase(), 'methods');
      const wrong = items.find((m) => !TOKEN.test(m));
      if (wrong !== undefined) bad(`"${wrong}" is not an HTTP method`);
      return { ...head, base: 'in', items };
    }
    case 'protocol': {
      const items = listItems(t, op, v, (e) => e.toLowerCase(), 'protocols');
      const wrong = items.find((p) => !PROTOCOLS.includes(p));
      if (wrong !== undefined) bad(`unknown protocol "${wrong}"; expected ${PROTOCOLS.join(', ')}`);
      return { ...head, base: 'in', items };
    }
    case 'port': {
      const items = listItems(t, op, v, (e) => e, 'ports');
      const numbers = items.map((e) => {
        const n = /^[0-9]{1,5}$/.test(e) ? Number(e) : NaN;
        if (!(n >= 1 && n <= 65535)) bad(`"${e}" is not a port (1-65535)`);
        return n;
      });
      return { ...head, base: 'numbers', numbers: [...new Set(numbers)] };
    }
    case 'path':
    case 'endpoint': {
      const fold = t === 'endpoint' ? (s: string) => s.toLowerCase() : (s: string) => s;
      // A canonical path condition compares canonical readings: its values are folded the same way (looseForm).
      const pathForm = exact ? pathValue : (e: string) => looseForm(pathValue(e));
      if (op === 'equals' || op === 'in' || op === 'not_in') {
        const what = t === 'path' ? 'paths' : 'host names or endpoint uuids';
        const items = listItems(t, op, v, fold, what).map((e) => (t === 'path' ? pathForm(e) : endpointItem(e)));
        return { ...head, base: 'in', items: [...new Set(items)] };
      }
      let text = plainText(t, fold(v.trim()));
      if (t === 'path' && (op === 'prefix' || op === 'matches')) text = pathForm(text);
      else if (t === 'path' && !exact) text = text.toLowerCase();
      // A segment glob costs up to (its segments × the path's) per request, and visitors choose the path (up to the
      // head size): `/**/a/a/…/b` of 500 segments took 16 ms on a 14 kB path. Bounded like routing patterns stay.
      if (t === 'path' && op === 'matches' && text.includes('*') && text.split('/').length - 1 > MAX_GLOB_SEGMENTS) {
        bad(`a path matches pattern has at most ${MAX_GLOB_SEGMENTS} segments`);
      }
      return { ...head, base: 'text', op: op as 'contains' | 'prefix' | 'matches', name: null, text };
    }
    case 'user_agent':
      return { ...head, base: 'text', op: op as 'equals' | 'contains' | 'prefix' | 'matches', name: null, text: plainText(t, v) };
    case 'header':
    case 'cookie': {
      if (op === 'exists' || op === 'not_exists') {
        if (v.includes('=')) bad(`${t} ${op} takes only the ${t} name as value, without "="`);
        // No name (docs/api.md: value is optional for these operators): any field of the kind. `header exists`
        // holds for a request with any header field at all, `cookie exists` for one sending any cookie.
        if (v.trim() === '') return { ...head, base: 'exists', name: '' };
        return { ...head, base: 'exists', name: fieldName(t, v) };
      }
      const eq = v.indexOf('=');
      if (eq === -1) bad(`${t} ${op} takes "name=value" as value`);
      const name = fieldName(t, v.slice(0, eq));
      const text = v.slice(eq + 1);
      if (CONTROL_CHARS.test(text)) bad(`control characters cannot appear in a ${t} value`);
      // An empty `equals` is meaningful (present and empty); an empty contains/prefix/matches would be `exists`.
      if (text === '' && op !== 'equals') bad(`${t} ${op} needs a non-empty value after "="; use exists for presence`);
      return { ...head, base: 'text', op: op as 'equals' | 'contains' | 'prefix' | 'matches', name, text };
    }
  }
}

function endpointItem(item: string): string {
  if (UUID.test(item) || (item.length <= 253 && HOST_NAME.test(item))) return item;
  return bad(`"${item}" is neither a host name nor an endpoint uuid`);
}

/** The stored spelling of a parsed condition's value. */
export function formatRateLimitValue(c: ParsedRateLimitCondition): string {
  switch (c.base) {
    case 'cidrs':
      return c.entries.join(',');
    case 'in':
      return c.items.join(',');
    case 'numbers':
      return c.numbers.join(',');
    case 'exists':
      return c.name;
    case 'text':
      return c.name === null ? c.text : `${c.name}=${c.text}`;
  }
}

/**
 * A condition in canonical form, or a RateLimitConditionError with the reason. The result is compiled before it is
 * returned, with the edge's compiler: a condition this accepts can never fail to compile at the edge.
 */
export function canonicalRateLimitCondition(
  type: string,
  operator: string,
  value: string | null | undefined,
): { type: RateLimitConditionType; operator: RateLimitOperator; value: string } {
  const parsed = parseRateLimitCondition(type, operator, value);
  const out = { type: parsed.type, operator: parsed.operator, value: formatRateLimitValue(parsed) };
  compileRateLimitCondition(out);
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Compiling (what the edge runs per request)
// ---------------------------------------------------------------------------------------------------------------

function textMatcher(type: RateLimitConditionType, op: 'equals' | 'contains' | 'prefix' | 'matches', text: string): StringMatcher {
  switch (op) {
    case 'equals':
      return (s) => s === text;
    case 'contains':
      return (s) => s.includes(text);
    case 'prefix':
      return type === 'path' ? compilePathPrefix(text) : (s) => s.startsWith(text);
    case 'matches': {
      if (type !== 'path') return compileValueGlob(text);
      const glob = compilePathGlob(text);
      if (!glob.needsSegments) return glob.match;
      const segments = glob.match;
      return (p) => segments(p.split('/'));
    }
  }
}

// The readings of the path tested last: every path condition of every rule tests the same request's path in a row,
// so they are worked out once per request, not once per condition (the edge runs one request at a time).
let lastPath = '';
let lastReadings: readonly string[] = ['/'];

/** Whether `test` holds for any canonical reading of a normalised path. */
function anyReading(path: string, test: (p: string) => boolean): boolean {
  if (path !== lastPath) {
    lastReadings = canonicalReadings(path);
    lastPath = path;
  }
  const readings = lastReadings;
  for (let i = 0; i < readings.length; i++) if (test(readings[i])) return true;
  return false;
}

function positiveMatcher(c: ParsedRateLimitCondition): RateLimitMatcher {
  switch (c.base) {
    case 'cidrs': {
      const cidrs = c.cidrs;
      return ({ ip }) => {
        if (ip === null) return false;
        for (const { network: n, mask: m } of cidrs) {
          if ((ip[0] & m[0]) >>> 0 === n[0] && (ip[1] & m[1]) >>> 0 === n[1] && (ip[2] & m[2]) >>> 0 === n[2] && (ip[3] & m[3]) >>> 0 === n[3]) return true;
        }
        return false;
      };
    }
    case 'numbers': {
      const set = new Set(c.numbers);
      if (c.type === 'asn') {
        return (f) => {
          const asn = f.asn();
          return asn !== null && set.has(asn);
        };
      }
      return (f) => set.has(f.port);
    }
    case 'in': {
      const set: ReadonlySet<string> = new Set(c.items);
      switch (c.type) {
        case 'country':
          return (f) => {
            const country = f.country();
            return country !== null && set.has(country);
          };
        case 'browser':
          return (f) => {
            const browser = f.browser();
            return browser !== null && set.has(browser);
          };
        case 'method':
          return (f) => set.has(f.method);
        case 'protocol':
          return (f) => set.has(f.protocol);
        case 'path': {
          if (c.exact) return (f) => set.has(f.path);
          // Made once here: a closure per request would cost an allocation on every path test.
          const inSet = (p: string) => set.has(p);
          return (f) => anyReading(f.path, inSet);
        }
        case 'endpoint':
          return (f) => set.has(f.hostname) || set.has(f.endpointUuid);
      }
      break;
    }
    case 'exists': {
      const name = c.name;
      if (name === '') return c.type === 'header' ? (f) => f.anyHeader() : (f) => f.anyCookie();
      return c.type === 'header' ? (f) => f.header(name) !== undefined : (f) => f.cookie(name) !== undefined;
    }
    case 'text': {
      const match = textMatcher(c.type, c.op, c.text);
      const name = c.name;
      switch (c.type) {
        case 'user_agent':
          return (f) => match(f.userAgent);
        case 'path':
          return c.exact ? (f) => match(f.path) : (f) => anyReading(f.path, match);
        case 'endpoint':
          return (f) => match(f.hostname) || match(f.endpointUuid);
        case 'header':
          return (f) => {
            const v = f.header(name!);
            return v !== undefined && match(v);
          };
        case 'cookie':
          return (f) => {
            const v = f.cookie(name!);
            return v !== undefined && match(v);
          };
      }
      break;
    }
  }
  throw new RangeError(`cannot compile a ${c.type} ${c.operator} condition`);
}

/** One stored condition as a closure. Throws (RateLimitConditionError) on a value that does not validate. */
export function compileRateLimitCondition(condition: Pick<RateLimitConditionConfig, 'type' | 'operator' | 'value'>): RateLimitMatcher {
  const parsed = parseRateLimitCondition(condition.type, condition.operator, condition.value);
  const positive = positiveMatcher(parsed);
  return parsed.negated ? (f) => !positive(f) : positive;
}

/**
 * The conditions as a disjunction of conjunctions: a new group starts after each condition joined by OR. Shared by
 * the compiler and the shadow analysis, so both read the precedence the same way.
 */
export function conditionGroups<T extends Pick<RateLimitConditionConfig, 'logical_operator'>>(conditions: readonly T[]): T[][] {
  const groups: T[][] = [];
  let current: T[] = [];
  conditions.forEach((c, i) => {
    current.push(c);
    if (c.logical_operator === 'OR' && i < conditions.length - 1) {
      groups.push(current);
      current = [];
    }
  });
  if (current.length > 0) groups.push(current);
  return groups;
}

const matchEverything: RateLimitMatcher = () => true;

/**
 * One rule's conditions compiled into a single matcher, built once per cache load. AND binds tighter than OR (see
 * the module comment); zero conditions match everything; conditions of a type in `assumeMet` always hold; evaluation stops at the first deciding condition, so
 * costly facts (GeoIP, UA parsing) are looked up only when an earlier condition did not already decide.
 */
export function compileRateLimitConditions(conditions: readonly RateLimitConditionConfig[], assumeMet?: ReadonlySet<RateLimitConditionType>): RateLimitMatcher {
  if (conditions.length === 0) return matchEverything;
  const compile = (c: RateLimitConditionConfig): RateLimitMatcher => {
    const matcher = compileRateLimitCondition(c);
    // A fact this edge cannot establish (its GeoIP database unreadable): the condition is taken as met, whichever
    // way it tests, so the rule limits at least every visitor it was written for (docs/rate-limits.md).
    return assumeMet?.has(c.type) ? matchEverything : matcher;
  };
  const groups = conditionGroups(conditions).map((group) => group.map(compile));
  const conjunction = (all: RateLimitMatcher[]): RateLimitMatcher => {
    if (all.length === 1) return all[0];
    if (all.length === 2) {
      const [a, b] = all;
      return (f) => a(f) && b(f);
    }
    return (f) => {
      for (let i = 0; i < all.length; i++) if (!all[i](f)) return false;
      return true;
    };
  };
  const disjuncts = groups.map(conjunction);
  if (disjuncts.length === 1) return disjuncts[0];
  return (f) => {
    for (let i = 0; i < disjuncts.length; i++) if (disjuncts[i](f)) return true;
    return false;
  };
}
