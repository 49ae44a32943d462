// The rate-limit condition language: every type and operator against plain request facts, the canonical forms the
// API stores, the values it refuses (with their detail), and the AND-over-OR precedence.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  BROWSER_FAMILIES,
  OPERATORS_BY_TYPE,
  RateLimitConditionError,
  browserFamily,
  canonicalRateLimitCondition,
  compileRateLimitCondition,
  compileRateLimitConditions,
  conditionGroups,
  type RateLimitRequestFacts,
} from '../../../src/shared/rate-limit/conditions.ts';
import { parseIp } from '../../../src/shared/match/cidr.ts';
import { RATE_LIMIT_CONDITION_TYPES, type RateLimitConditionConfig } from '../../../src/shared/snapshot.ts';

interface FactsInit {
  ip?: string;
  country?: string | null;
  asn?: number | null;
  browser?: string | null;
  userAgent?: string;
  hostname?: string;
  endpointUuid?: string;
  path?: string;
  method?: string;
  protocol?: RateLimitRequestFacts['protocol'];
  port?: number;
  headers?: Record<string, string>;
  cookies?: Record<string, string>;
}

const ENDPOINT_UUID = '0b9e8a62-6f1c-4c57-9d4e-2f7a1c3e5b11';

function facts(init: FactsInit = {}): RateLimitRequestFacts {
  return {
    ip: parseIp(init.ip ?? '203.0.113.7'),
    country: () => (init.country === undefined ? 'US' : init.country),
    asn: () => (init.asn === undefined ? 13335 : init.asn),
    browser: () => (init.browser === undefined ? 'chrome' : init.browser),
    userAgent: init.userAgent ?? 'Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0',
    hostname: init.hostname ?? 'app.example.test',
    endpointUuid: init.endpointUuid ?? ENDPOINT_UUID,
    path: init.path ?? '/login',
    method: init.method ?? 'POST',
    protocol: init.protocol ?? 'https',
    port: init.port ?? 443,
    header: (name) => init.headers?.[name],
    cookie: (name) => init.cookies?.[name],
    anyHeader: () => Object.keys(init.headers ?? { host: 'app.example.test' }).length > 0,
    anyCookie: () => Object.keys(init.cookies ?? {}).length > 0,
  };
}

const match = (type: string, operator: string, value: string, init: FactsInit = {}): boolean =>
  compileRateLimitCondition(canonicalRateLimitCondition(type, operator, value))(facts(init));

const refuses = (type: string, operator: string, value: string | null, detail: RegExp) =>
  assert.throws(
    () => canonicalRateLimitCondition(type, operator, value),
    (err: unknown) => err instanceof RateLimitConditionError && detail.test(err.detail),
    `${type} ${operator} ${value}`,
  );

let seq = 0;
const cond = (type: RateLimitConditionConfig['type'], operator: string, value: string, logical_operator: 'AND' | 'OR' = 'AND'): RateLimitConditionConfig => ({
  uuid: `00000000-0000-4000-8000-${String(++seq).padStart(12, '0')}`,
  ...canonicalRateLimitCondition(type, operator, value),
  logical_operator,
});

describe('rate-limit conditions', () => {
  it('names operators for every condition type', () => {
    assert.deepEqual(Object.keys(OPERATORS_BY_TYPE).sort(), [...RATE_LIMIT_CONDITION_TYPES].sort());
    assert.ok(OPERATORS_BY_TYPE.header.includes('exists') && OPERATORS_BY_TYPE.cookie.includes('not_exists'));
  });

  it('source_ip: in / not_in over IPv4 and IPv6 CIDRs, IPv4-mapped clients included', () => {
    assert.equal(match('source_ip', 'in', '203.0.113.0/24'), true);
    assert.equal(match('source_ip', 'in', '203.0.113.0/24', { ip: '::ffff:203.0.113.9' }), true);
    assert.equal(match('source_ip', 'in', '10.0.0.0/8, 2001:db8::/32', { ip: '2001:db8::1' }), true);
    assert.equal(match('source_ip', 'in', '10.0.0.0/8'), false);
    assert.equal(match('source_ip', 'not_in', '10.0.0.0/8'), true);
    assert.equal(match('source_ip', 'not_in', '203.0.113.7'), false);
    assert.equal(canonicalRateLimitCondition('source_ip', 'in', ' 10.0.0.0/8 ,2001:DB8::/32,10.0.0.0/8').value, '10.0.0.0/8,2001:db8::/32');
    refuses('source_ip', 'in', '10.0.0.0/33', /invalid prefix length/);
    refuses('source_ip', 'in', 'not-an-ip', /not an IP address/);
    refuses('source_ip', 'in', ' , ', /needs IP addresses or CIDRs/);
    refuses('source_ip', 'equals', '10.0.0.1', /operator "equals" is not allowed for source_ip; expected one of in, not_in/);
    refuses('source_ip', 'in', Array.from({ length: 65 }, (_, i) => `10.0.0.${i}`).join(','), /at most 64/);
  });

  it('country: ISO codes upper-cased; unknown country is not in any list', () => {
    assert.equal(canonicalRateLimitCondition('country', 'in', 'us, de,US').value, 'US,DE');
    assert.equal(match('country', 'equals', 'us'), true);
    assert.equal(match('country', 'in', 'DE,FR'), false);
    assert.equal(match('country', 'not_in', 'DE,FR'), true);
    assert.equal(match('country', 'in', 'US', { country: null }), false);
    assert.equal(match('country', 'not_in', 'US', { country: null }), true);
    refuses('country', 'in', 'USA', /not an ISO 3166-1 alpha-2/);
    refuses('country', 'equals', 'US,DE', /equals takes one/);
  });

  it('asn: numbers with an optional AS prefix', () => {
    assert.equal(canonicalRateLimitCondition('asn', 'in', 'AS13335, as15169, 13335').value, '13335,15169');
    assert.equal(match('asn', 'equals', 'AS13335'), true);
    assert.equal(match('asn', 'not_in', '15169'), true);
    assert.equal(match('asn', 'in', '13335', { asn: null }), false);
    refuses('asn', 'in', 'ASX', /not an AS number/);
    refuses('asn', 'in', '4294967296', /not an AS number/);
  });

  it('browser: known families only, lower-cased; parser names map onto them', () => {
    assert.equal(canonicalRateLimitCondition('browser', 'in', 'Chrome, FIREFOX').value, 'chrome,firefox');
    assert.equal(match('browser', 'equals', 'chrome'), true);
    assert.equal(match('browser', 'not_in', 'chrome'), false);
    assert.equal(match('browser', 'in', 'safari', { browser: null }), false);
    refuses('browser', 'in', 'netscape', /unknown browser "netscape"; known: chrome/);
    assert.equal(browserFamily('Mobile Safari'), 'safari');
    assert.equal(browserFamily('Chrome Headless'), 'headless chrome');
    assert.equal(browserFamily('Microsoft Edge'), 'edge');
    assert.equal(browserFamily('Firefox'), 'firefox');
    assert.equal(browserFamily('Lynx'), null);
    assert.equal(browserFamily(undefined), null);
    assert.equal(browserFamily('constructor'), null);
    assert.equal(browserFamily('toString'), null);
    for (const b of BROWSER_FAMILIES) assert.equal(browserFamily(b), b);
  });

  it('user_agent: equals, contains, prefix, matches (glob, not regex), case-sensitive', () => {
    const userAgent = 'curl/8.5.0';
    assert.equal(match('user_agent', 'equals', 'curl/8.5.0', { userAgent }), true);
    assert.equal(match('user_agent', 'contains', 'url/8', { userAgent }), true);
    assert.equal(match('user_agent', 'prefix', 'curl/', { userAgent }), true);
    assert.equal(match('user_agent', 'prefix', 'Curl/', { userAgent }), false);
    assert.equal(match('user_agent', 'matches', 'curl/*.0', { userAgent }), true);
    assert.equal(match('user_agent', 'matches', 'curl/(.*)', { userAgent }), false);
    refuses('user_agent', 'contains', '', /non-empty value/);
    refuses('user_agent', 'in', 'a,b', /not allowed for user_agent/);
    refuses('user_agent', 'equals', 'a\nb', /control characters/);
    refuses('user_agent', 'equals', 'x'.repeat(1025), /at most 1024 characters/);
  });

  it('path: exact lists, segment prefixes and routing globs over the normalised path', () => {
    assert.equal(match('path', 'equals', '/login'), true);
    assert.equal(match('path', 'in', '/login,/signup', { path: '/signup' }), true);
    assert.equal(match('path', 'not_in', '/login,/signup'), false);
    assert.equal(match('path', 'prefix', '/api', { path: '/api/v1' }), true);
    assert.equal(match('path', 'prefix', '/api', { path: '/api' }), true);
    assert.equal(match('path', 'prefix', '/api', { path: '/apix' }), false);
    assert.equal(match('path', 'contains', 'log'), true);
    assert.equal(match('path', 'matches', '/api/*/users', { path: '/api/v1/users' }), true);
    assert.equal(match('path', 'matches', '/api/*/users', { path: '/api/v1/x/users' }), false);
    assert.equal(match('path', 'matches', '/api/**', { path: '/api/v1/x/users' }), true);
    assert.equal(canonicalRateLimitCondition('path', 'exact_equals', '/caf%c3%a9').value, '/caf%C3%A9');
    // Canonical conditions are stored in the form they compare in: case-folded, without a final `/`.
    assert.equal(canonicalRateLimitCondition('path', 'equals', '/Caf%C3%A9/').value, '/caf%c3%a9');
    refuses('path', 'equals', 'login', /must start with "\/"/);
    refuses('path', 'prefix', '/a/../b', /dot segments/);
    // A glob's per-request cost grows with its segments times the visitor's: bounded at 16 segments.
    const sixteen = '/**/' + Array(14).fill('a').join('/') + '/b';
    assert.equal(match('path', 'matches', sixteen, { path: '/x/' + Array(14).fill('a').join('/') + '/b' }), true);
    refuses('path', 'matches', '/**/' + Array(500).fill('a').join('/') + '/b', /at most 16 segments/);
    // Without a wildcard it is an equality, whatever its length.
    assert.equal(match('path', 'matches', '/' + Array(40).fill('a').join('/'), { path: '/' + Array(40).fill('a').join('/') }), true);
  });

  it('endpoint: host name or endpoint uuid', () => {
    assert.equal(match('endpoint', 'equals', 'APP.example.test'), true);
    assert.equal(match('endpoint', 'equals', ENDPOINT_UUID.toUpperCase()), true);
    assert.equal(match('endpoint', 'in', 'other.example.test'), false);
    assert.equal(match('endpoint', 'not_in', 'other.example.test'), true);
    assert.equal(match('endpoint', 'prefix', 'app.'), true);
    assert.equal(match('endpoint', 'contains', 'example'), true);
    assert.equal(match('endpoint', 'matches', '*.example.test'), true);
    refuses('endpoint', 'in', 'has space.example', /neither a host name nor an endpoint uuid/);
  });

  it('method: upper-case tokens', () => {
    assert.equal(canonicalRateLimitCondition('method', 'in', 'post, get,POST').value, 'POST,GET');
    assert.equal(match('method', 'equals', 'post'), true);
    assert.equal(match('method', 'not_in', 'GET,HEAD'), true);
    refuses('method', 'in', 'GE T', /not an HTTP method/);
    refuses('method', 'contains', 'PO', /not allowed for method/);
  });

  it('header and cookie: exists / not_exists by name, name=value for the value operators', () => {
    const headers = { authorization: 'Bearer abc', 'x-empty': '' };
    const cookies = { Session: 'id-123' };
    assert.equal(match('header', 'exists', 'Authorization', { headers }), true);
    assert.equal(match('header', 'not_exists', 'authorization', { headers }), false);
    assert.equal(match('header', 'not_exists', 'x-api-key', { headers }), true);
    assert.equal(match('header', 'equals', 'X-Empty=', { headers }), true);
    assert.equal(match('header', 'prefix', 'authorization=Bearer ', { headers }), true);
    assert.equal(match('header', 'contains', 'authorization=abc', { headers }), true);
    assert.equal(match('header', 'matches', 'authorization=Basic *', { headers }), false);
    assert.equal(match('header', 'equals', 'x-missing=', { headers }), false);
    assert.equal(canonicalRateLimitCondition('header', 'equals', 'X-Api-Key=a=b').value, 'x-api-key=a=b');
    assert.equal(match('cookie', 'exists', 'Session', { cookies }), true);
    assert.equal(match('cookie', 'exists', 'session', { cookies }), false, 'cookie names are case-sensitive');
    assert.equal(match('cookie', 'matches', 'Session=id-*', { cookies }), true);
    refuses('header', 'equals', 'authorization', /takes "name=value"/);
    refuses('header', 'exists', 'a=b', /only the header name/);
    refuses('header', 'contains', 'x-a=', /non-empty value after "="/);
    refuses('cookie', 'equals', 'bad name=1', /not a valid cookie name/);
  });

  it('protocol and port', () => {
    assert.equal(match('protocol', 'equals', 'HTTPS'), true);
    assert.equal(match('protocol', 'in', 'ws,wss'), false);
    assert.equal(match('protocol', 'not_in', 'http'), true);
    refuses('protocol', 'equals', 'ftp', /unknown protocol "ftp"/);
    assert.equal(canonicalRateLimitCondition('port', 'in', '443, 8443,443').value, '443,8443');
    assert.equal(match('port', 'equals', '443'), true);
    assert.equal(match('port', 'not_in', '80'), true);
    refuses('port', 'equals', '0', /not a port/);
    refuses('port', 'in', '65536', /not a port/);
    refuses('port', 'in', '4.5', /not a port/);
  });

  it('refuses unknown types and operators, naming what is allowed', () => {
    refuses('referrer', 'equals', 'x', /unknown condition type "referrer"; expected one of source_ip/);
    refuses('path', 'regex', '.*', /operator "regex" is not allowed for path; expected one of/);
    assert.equal(canonicalRateLimitCondition('path', 'EQUALS', '/x').operator, 'equals');
  });

  it('AND binds tighter than OR; the last logical_operator is ignored; zero conditions match all', () => {
    assert.equal(compileRateLimitConditions([])(facts()), true);
    // a AND b OR c: (a ∧ b) ∨ c
    const rule = compileRateLimitConditions([
      cond('method', 'equals', 'POST', 'AND'),
      cond('path', 'equals', '/login', 'OR'),
      cond('country', 'equals', 'DE', 'OR'),
    ]);
    assert.equal(rule(facts()), true, 'a ∧ b');
    assert.equal(rule(facts({ method: 'GET' })), false, '¬a, ¬c');
    assert.equal(rule(facts({ method: 'GET', country: 'DE' })), true, 'c alone');
    assert.equal(rule(facts({ path: '/other', country: 'DE' })), true);
    // a OR b AND c: a ∨ (b ∧ c), not (a ∨ b) ∧ c
    const rule2 = compileRateLimitConditions([
      cond('method', 'equals', 'GET', 'OR'),
      cond('path', 'equals', '/login', 'AND'),
      cond('country', 'equals', 'DE'),
    ]);
    assert.equal(rule2(facts({ method: 'GET', path: '/x', country: 'US' })), true);
    assert.equal(rule2(facts({ method: 'POST', path: '/login', country: 'US' })), false);
    assert.equal(rule2(facts({ method: 'POST', path: '/login', country: 'DE' })), true);
    assert.deepEqual(
      conditionGroups([{ logical_operator: 'AND' }, { logical_operator: 'OR' }, { logical_operator: 'AND' }, { logical_operator: 'OR' }]).map((g) => g.length),
      [2, 2],
    );
  });

  it('looks up costly facts only when an earlier condition has not decided', () => {
    let lookups = 0;
    const f = facts({ method: 'GET' });
    f.country = () => {
      lookups++;
      return 'US';
    };
    const rule = compileRateLimitConditions([cond('method', 'equals', 'POST'), cond('country', 'equals', 'US')]);
    assert.equal(rule(f), false);
    assert.equal(lookups, 0);
  });
});

describe('header or cookie exists without a value is accepted (issue 20 item 8)', () => {
  it('header exists without a value: any header field; not_exists: none', () => {
    for (const value of [null, undefined, '', '  ']) {
      assert.deepEqual(canonicalRateLimitCondition('header', 'exists', value), { type: 'header', operator: 'exists', value: '' });
    }
    assert.equal(match('header', 'exists', '', { headers: { host: 'a.example.test' } }), true);
    assert.equal(match('header', 'exists', '', { headers: {} }), false);
    assert.equal(match('header', 'not_exists', '', { headers: {} }), true);
    assert.equal(match('header', 'not_exists', '', { headers: { host: 'a.example.test' } }), false);
  });

  it('cookie exists without a value: any cookie; not_exists: a cookie-less request', () => {
    assert.deepEqual(canonicalRateLimitCondition('cookie', 'not_exists', null), { type: 'cookie', operator: 'not_exists', value: '' });
    assert.equal(match('cookie', 'exists', '', { cookies: { sid: '1' } }), true);
    assert.equal(match('cookie', 'exists', '', { cookies: {} }), false);
    assert.equal(match('cookie', 'not_exists', '', { cookies: {} }), true);
  });

  it('still refuses a missing value for the value operators', () => {
    refuses('header', 'equals', null, /takes "name=value"/);
    refuses('cookie', 'contains', '', /takes "name=value"/);
  });
});

describe('rate-limit path equals /login is bypassed by other spellings (issue 20 item 12)', () => {
  const spellings = ['/login', '/LOGIN', '/Login', '/login/', '/login;jsessionid=1', '/login%2F', '/LOGIN;x=1/', '/a/..%2Flogin'];
  it('path equals /login matches every spelling a service serves as /login (as normalised by the edge)', () => {
    // The stage sees the normalised path: `/login/.` arrives as `/login/`, `/a/..%2Flogin` keeps its `%2F`.
    for (const path of spellings) assert.equal(match('path', 'equals', '/login', { path }), true, path);
    assert.equal(match('path', 'in', '/signup,/LOGIN/', { path: '/Login;jsessionid=1' }), true);
    assert.equal(match('path', 'prefix', '/api', { path: '/API/v1' }), true);
    assert.equal(match('path', 'prefix', '/api', { path: '/api;x/v1' }), true);
    assert.equal(match('path', 'matches', '/api/*/login', { path: '/Api/V1/Login/' }), true);
    assert.equal(match('path', 'contains', 'LOGIN', { path: '/x/login' }), true);
    assert.equal(match('path', 'equals', '/login', { path: '/loginx' }), false);
    assert.equal(match('path', 'equals', '/login', { path: '/log/in' }), false);
  });

  it('not_in stays the exact complement of in', () => {
    for (const path of spellings) assert.equal(match('path', 'not_in', '/login', { path }), false, path);
    assert.equal(match('path', 'not_in', '/login', { path: '/signup' }), true);
  });

  it('exact_ operators are the opt-in for matching the normalised path as is', () => {
    assert.equal(match('path', 'exact_equals', '/login', { path: '/login' }), true);
    for (const path of spellings.slice(1)) assert.equal(match('path', 'exact_equals', '/login', { path }), false, path);
    assert.equal(match('path', 'exact_in', '/Login', { path: '/Login' }), true);
    assert.equal(match('path', 'exact_not_in', '/login', { path: '/LOGIN' }), true);
    assert.equal(match('path', 'exact_prefix', '/api', { path: '/API/v1' }), false);
    assert.equal(canonicalRateLimitCondition('path', 'EXACT_Equals', '/Login/').operator, 'exact_equals');
    assert.equal(canonicalRateLimitCondition('path', 'exact_equals', '/Login/').value, '/Login/');
    refuses('header', 'exact_equals', 'a=b', /not allowed for header/);
  });
});

