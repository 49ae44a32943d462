// Routing rules API: create, list (in evaluation order), get, replace and delete the rules that choose which of
// an endpoint's agents serves a request. Input is validated and canonicalised here; every write publishes the endpoint.
import { isIPv4, isIPv6 } from 'node:net';
import { Type } from '@sinclair/typebox';
import { fail } from '../../shared/errors.ts';
import type { Plan } from '../../shared/plans.ts';
import { Nullable, Strict, Timestamp } from '../../shared/schema.ts';
import { ROUTING_CONDITION_TYPES, ROUTING_PATH_MODES, type RoutingConditionConfig, type RoutingConditionType } from '../../shared/snapshot.ts';
import { AGENT_ID_PATTERN, MAX_AGENT_ID_LENGTH, MAX_TAG_LENGTH, MAX_TAGS, TAG_PATTERN } from '../../shared/tunnel/protocol.ts';
import { findAccountById } from '../../store/accounts.ts';
import type { Queryable } from '../../store/db.ts';
import type { EndpointRow } from '../../store/endpoints.ts';
import * as store from '../../store/routing-rules.ts';
import { MAX_CONDITIONS_PER_RULE, MAX_RULES_PER_ENDPOINT, type RoutingRuleInput, type RoutingRuleRow } from '../../store/routing-rules.ts';
import type { Caller } from '../caller.ts';
import { endpointForCaller } from '../endpoint-access.ts';
import { int64Param, type ControlApp, type ControlDeps } from '../http.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';

// ---------------------------------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------------------------------

const MAX_NAME_LENGTH = 100;
const MAX_KEY_LENGTH = 256;
const MAX_PATTERN_LENGTH = 1024;
const MAX_ADDRESSES = 64;
const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;

// ---------------------------------------------------------------------------------------------------------------
// Validation and canonical form. Edges compile exactly what is stored here, so anything an edge could not compile
// (or that could never match a normalised request) is refused now, with a 400 that names the condition.
// ---------------------------------------------------------------------------------------------------------------

class ConditionError extends Error {
  constructor(
    readonly field: 'condition_type' | 'condition_key' | 'pattern',
    message: string,
  ) {
    super(message);
  }
}

const TAG = new RegExp(TAG_PATTERN);
const AGENT_ID = new RegExp(AGENT_ID_PATTERN);
/** RFC 9110 §5.6.2 token: header field names, methods and (RFC 6265) cookie names. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const CONTROL_CHARS = /[\x00-\x08\x0a-\x1f\x7f]/;
/** RFC 3986 unreserved: what path normalisation decodes from percent-escapes. */
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
/** pchar (RFC 3986 §3.3) and `/`: every other ASCII character is refused in a path pattern. */
const PATH_ASCII = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/]$/;
const HOST_NAME = /^[a-z0-9*_-]+(\.[a-z0-9*_-]+)*$/;
const HOST_IPV6_LITERAL = /^\[[0-9a-f:.]+\]$/;

/** The comma-separated tag list of the API → lower-case, trimmed, duplicates and empty items dropped. */
export function normalizeTags(text: string): string[] {
  const tags = [
    ...new Set(
      text
        .split(',')
        .map((t) => t.trim().toLowerCase())
        .filter((t) => t !== ''),
    ),
  ];
  for (const tag of tags) {
    if (tag.length > MAX_TAG_LENGTH || !TAG.test(tag)) {
      throw fail.invalid_request(`Invalid tag "${tag}": tags are at most ${MAX_TAG_LENGTH} of a-z 0-9 _ . - and start with a letter or digit`, {
        field: 'target_agent_tags',
        tag,
      });
    }
  }
  if (tags.length > MAX_TAGS) throw fail.invalid_request(`At most ${MAX_TAGS} target tags`, { field: 'target_agent_tags', count: tags.length });
  return tags;
}

/**
 * A path pattern as the edge compares it: paths reach stages normalised (ARCHITECTURE.md), so the pattern is put
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

/** Comma list of addresses and CIDRs, validated with node:net (which the edge parser matches; a test checks). */
function addressList(pattern: string): string {
  const entries = [
    ...new Set(
      pattern
        .split(',')
        .map((e) => e.trim().toLowerCase())
        .filter((e) => e !== ''),
    ),
  ];
  if (entries.length === 0) throw new ConditionError('pattern', 'list at least one IP address or CIDR');
  if (entries.length > MAX_ADDRESSES) throw new ConditionError('pattern', `at most ${MAX_ADDRESSES} addresses or CIDRs`);
  for (const entry of entries) {
    const slash = entry.indexOf('/');
    const address = slash === -1 ? entry : entry.slice(0, slash);
    const v4 = isIPv4(address);
    if (address.includes('%') || (!v4 && !isIPv6(address))) throw new ConditionError('pattern', `"${entry}" is not an IP address or CIDR`);
    if (slash !== -1) {
      const bits = entry.slice(slash + 1);
      const max = v4 ? 32 : 128;
      if (!/^[0-9]{1,3}$/.test(bits) || Number(bits) > max) throw new ConditionError('pattern', `"${entry}" has an invalid prefix length (0-${max})`);
    }
  }
  return entries.join(',');
}

function canonicalCondition(type: string, key: string, pattern: string): RoutingConditionConfig {
  if (!(ROUTING_CONDITION_TYPES as readonly string[]).includes(type)) {
    throw new ConditionError('condition_type', `unknown condition_type "${type}"; expected one of ${ROUTING_CONDITION_TYPES.join(', ')}`);
  }
  if (pattern.length > MAX_PATTERN_LENGTH) throw new ConditionError('pattern', `a pattern is at most ${MAX_PATTERN_LENGTH} characters`);
  if (key.length > MAX_KEY_LENGTH) throw new ConditionError('condition_key', `condition_key is at most ${MAX_KEY_LENGTH} characters`);
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
      const methods = [
        ...new Set(
          pattern
            .split(',')
            .map((m) => m.trim().toUpperCase())
            .filter((m) => m !== ''),
        ),
      ];
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

export interface ConditionInput {
  condition_type: string;
  condition_key?: string;
  pattern: string;
}

/** One condition in canonical form; a 400 naming its index (and the field) when it is not valid. */
export function normalizeCondition(input: ConditionInput, index: number): RoutingConditionConfig {
  try {
    return canonicalCondition(input.condition_type, input.condition_key ?? '', input.pattern);
  } catch (err) {
    if (!(err instanceof ConditionError)) throw err;
    throw fail.invalid_request(`Invalid condition ${index}: ${err.message}`, { condition: index, field: err.field, reason: err.message });
  }
}

export interface RuleBody {
  name?: string;
  priority?: number;
  enabled?: boolean;
  target_agent_id?: string | null;
  target_agent_tags?: string;
  conditions: ConditionInput[];
}

/**
 * A request body → the stored form. Omitted fields are zeroed (SPEC.md, PUT) except `enabled` on create, which
 * defaults to true: a rule created without saying otherwise should take effect.
 */
export function normalizeRule(body: RuleBody, defaults: { enabled: boolean }): RoutingRuleInput {
  const name = body.name ?? '';
  if (CONTROL_CHARS.test(name) || name.includes('\t')) throw fail.invalid_request('Invalid name: control characters are not allowed', { field: 'name' });
  const rawId = body.target_agent_id ?? '';
  if (rawId !== '' && (rawId.length > MAX_AGENT_ID_LENGTH || !AGENT_ID.test(rawId))) {
    throw fail.invalid_request(`Invalid target_agent_id: at most ${MAX_AGENT_ID_LENGTH} of A-Z a-z 0-9 _ . : @ -, starting with a letter or digit`, {
      field: 'target_agent_id',
    });
  }
  const targetAgentTags = normalizeTags(body.target_agent_tags ?? '');
  const targetAgentId = rawId === '' ? null : rawId;
  if (targetAgentId === null && targetAgentTags.length === 0) {
    throw fail.invalid_request('A rule must target an agent: set target_agent_id, target_agent_tags, or both', { field: 'target_agent_id' });
  }
  if (body.conditions.length === 0) throw fail.invalid_request('conditions must not be empty', { field: 'conditions' });
  if (body.conditions.length > MAX_CONDITIONS_PER_RULE) {
    throw fail.invalid_request(`At most ${MAX_CONDITIONS_PER_RULE} conditions per rule`, { field: 'conditions', count: body.conditions.length });
  }
  return {
    name,
    priority: body.priority ?? 0,
    enabled: body.enabled ?? defaults.enabled,
    targetAgentId,
    targetAgentTags,
    conditions: body.conditions.map(normalizeCondition),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------------------------------------------

const ConditionView = Type.Object({
  condition_type: Type.String({ enum: [...ROUTING_CONDITION_TYPES] }),
  condition_key: Type.String(),
  pattern: Type.String(),
});

const RuleView = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    priority: Type.Integer({ description: 'Lower numbers are evaluated first; ties by id' }),
    enabled: Type.Boolean(),
    target_agent_id: Nullable(Type.String({ description: 'The agent id the request must go to' })),
    target_agent_tags: Type.String({ description: 'Comma-separated, lower-case: the agent must carry every tag' }),
    conditions: Type.Array(ConditionView, { description: 'ANDed; in the order given' }),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { description: 'Routing rule' },
);

const ConditionBody = Strict(
  {
    condition_type: Type.String({
      enum: [...ROUTING_CONDITION_TYPES],
      description: 'path, method, header, query, cookie, source_ip or host (docs/routing-rules.md)',
    }),
    condition_key: Type.Optional(
      Type.String({
        maxLength: MAX_KEY_LENGTH,
        description: 'path: prefix (default), exact or glob; header, query, cookie: the name; empty for the other types',
      }),
    ),
    pattern: Type.String({
      maxLength: MAX_PATTERN_LENGTH,
      description:
        'path: the path or glob (`*` one segment, `**` any depth); method: comma list; header/query/cookie: a glob on the value ' +
        '(`*` any characters; `*` alone = present); source_ip: comma list of addresses/CIDRs (IPv4, IPv6); host: a glob on the host',
    }),
  },
  { description: 'A condition; every condition of a rule must match' },
);

const RuleBodySchema = Strict({
  name: Type.Optional(Type.String({ maxLength: MAX_NAME_LENGTH, description: 'Shown in logs and in the edge’s 502 page when no agent matches' })),
  priority: Type.Optional(Type.Integer({ minimum: INT32_MIN, maximum: INT32_MAX, description: 'Lower first; default 0' })),
  enabled: Type.Optional(Type.Boolean()),
  target_agent_id: Type.Optional(Nullable(Type.String({ maxLength: MAX_AGENT_ID_LENGTH, description: 'An agent id (`--agent-id`); null or empty for none' }))),
  target_agent_tags: Type.Optional(Type.String({ maxLength: 2048, description: `Comma-separated tags (at most ${MAX_TAGS}); the agent must carry all` })),
  conditions: Type.Array(ConditionBody, { minItems: 1, maxItems: MAX_CONDITIONS_PER_RULE }),
});

const EndpointParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }) });
const RuleParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }), rule_id: Type.String({ description: 'Rule id (int64)' }) });
const Errors409 = { ...ErrorResponses, 409: ErrorBody };

function ruleView(r: RoutingRuleRow) {
  return {
    id: r.id,
    name: r.name,
    priority: r.priority,
    enabled: r.enabled,
    target_agent_id: r.target_agent_id,
    target_agent_tags: r.target_agent_tags.join(','),
    conditions: r.conditions.map((c) => ({ condition_type: c.condition_type, condition_key: c.condition_key, pattern: c.pattern })),
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Access
// ---------------------------------------------------------------------------------------------------------------

const FEATURE = 'endpoint_routing_rules';

/** What can be refused without the database: the permission, and the entitlement of the caller's own plan. */
function precheck(caller: Caller, permission: 'endpoints:read' | 'endpoints:update'): void {
  caller.requirePermission(permission);
  // Admins may act on endpoints of other accounts, whose plan decides (checked once the endpoint is known).
  if (!caller.isAdmin) caller.requireEntitlement(FEATURE);
}

/**
 * The endpoint named in the path, once the caller may use routing rules on it: the permission, then the plan of
 * the endpoint's account (the caller's own, except for admins acting on another account), then 400/404.
 */
async function ruleEndpoint(
  q: Queryable,
  caller: Caller,
  uuid: string,
  plans: Record<string, Plan>,
  permission: 'endpoints:read' | 'endpoints:update',
  forUpdate = false,
): Promise<EndpointRow> {
  precheck(caller, permission);
  const endpoint = await endpointForCaller(q, caller, uuid, { forUpdate });
  if (endpoint.account_id === caller.account.id) {
    caller.requireEntitlement(FEATURE);
  } else {
    const account = await findAccountById(q, endpoint.account_id);
    const plan = account ? plans[account.plan] : undefined;
    if (!plan?.entitlements[FEATURE]) throw fail.entitlement_required(`Plan "${account?.plan ?? '?'}" of the endpoint's account does not include ${FEATURE}`, { feature: FEATURE });
  }
  return endpoint;
}

/** Writes go through the endpoint's row lock and refuse a paused endpoint (read-only over plan limits). */
async function writableEndpoint(tx: Queryable, caller: Caller, uuid: string, plans: Record<string, Plan>): Promise<EndpointRow> {
  const endpoint = await ruleEndpoint(tx, caller, uuid, plans, 'endpoints:update', true);
  if (endpoint.paused_at) throw fail.quota_paused();
  return endpoint;
}

const notFound = () => fail.not_found('Routing rule not found');

/**
 * The rule id of the path; 400 when it is not a positive int64. parseInt64 rounds values above 2^53, which can
 * exceed the int64 range once rounded (9223372036854775807 → 2^63) and fail in SQL; no such id can exist, so it is
 * replaced by 0, which no row has, and the lookup answers 404 like any other missing rule.
 */
function ruleIdParam(value: string): number {
  const id = int64Param(value, 'rule_id');
  return Number.isSafeInteger(id) ? id : 0;
}

// ---------------------------------------------------------------------------------------------------------------
// Routes
// ---------------------------------------------------------------------------------------------------------------

export function routingRuleRoutes(app: ControlApp, { db, config }: ControlDeps): void {
  const plans = config.plans;
  const TAGS = ['routing-rules'];
  const ENTITLEMENT_NOTE = 'Needs the endpoint_routing_rules plan entitlement (403 entitlement_required).';

  app.post(
    '/v1/endpoints/:id/routing-rules',
    {
      schema: {
        summary: 'Create a routing rule',
        description:
          'Rules choose which of the endpoint’s agents serves a request: the first enabled rule (ascending priority, then id) whose ' +
          'conditions all match sends the request to target_agent_id and/or agents carrying every target tag. enabled defaults ' +
          `to true; other omitted fields are zeroed. At most ${MAX_RULES_PER_ENDPOINT} rules per endpoint and ${MAX_CONDITIONS_PER_RULE} ` +
          `conditions per rule. Effective from the next request. Needs endpoints:update. ${ENTITLEMENT_NOTE}`,
        tags: TAGS,
        params: EndpointParams,
        body: RuleBodySchema,
        response: { 201: RuleView, ...Errors409 },
      },
    },
    async (req, reply) => {
      precheck(req.caller, 'endpoints:update');
      const rule = normalizeRule(req.body, { enabled: true });
      const { endpoint, created } = await db.transaction(async (tx) => {
        const endpoint = await writableEndpoint(tx, req.caller, req.params.id, plans);
        const count = await store.countRoutingRules(tx, endpoint.id);
        if (count >= MAX_RULES_PER_ENDPOINT) {
          throw fail.invalid_request(`An endpoint has at most ${MAX_RULES_PER_ENDPOINT} routing rules`, { limit: MAX_RULES_PER_ENDPOINT, count });
        }
        return { endpoint, created: await store.insertRoutingRule(tx, endpoint.id, rule) };
      });
      return reply
        .status(201)
        .header('location', `/v1/endpoints/${endpoint.uuid}/routing-rules/${created.id}`)
        .send(ruleView(created));
    },
  );

  app.get(
    '/v1/endpoints/:id/routing-rules',
    {
      schema: {
        summary: 'List routing rules in evaluation order',
        description: `Ascending priority, ties by ascending id; disabled rules included. Needs endpoints:read. ${ENTITLEMENT_NOTE}`,
        tags: TAGS,
        params: EndpointParams,
        response: { 200: Type.Object({ items: Type.Array(RuleView) }), ...ErrorResponses },
      },
    },
    async (req) => {
      const endpoint = await ruleEndpoint(db, req.caller, req.params.id, plans, 'endpoints:read');
      return { items: (await store.listRoutingRules(db, endpoint.id)).map(ruleView) };
    },
  );

  app.get(
    '/v1/endpoints/:id/routing-rules/:rule_id',
    {
      schema: {
        summary: 'Get a routing rule',
        description: `404 when the endpoint or the rule is missing, not the caller’s, or the rule belongs to another endpoint. Needs endpoints:read. ${ENTITLEMENT_NOTE}`,
        tags: TAGS,
        params: RuleParams,
        response: { 200: RuleView, ...ErrorResponses },
      },
    },
    async (req) => {
      precheck(req.caller, 'endpoints:read');
      const ruleId = ruleIdParam(req.params.rule_id);
      const endpoint = await ruleEndpoint(db, req.caller, req.params.id, plans, 'endpoints:read');
      const rule = await store.findRoutingRule(db, endpoint.id, ruleId);
      if (!rule) throw notFound();
      return ruleView(rule);
    },
  );

  app.put(
    '/v1/endpoints/:id/routing-rules/:rule_id',
    {
      schema: {
        summary: 'Replace a routing rule',
        description:
          'Full replacement with the fields of create: omitted fields are zeroed (name "", priority 0, enabled false, no target ' +
          'agent id, no tags); conditions must be non-empty, and the rule must still target an agent id or a tag. Effective from ' +
          `the next request. Needs endpoints:update. ${ENTITLEMENT_NOTE}`,
        tags: TAGS,
        params: RuleParams,
        body: RuleBodySchema,
        response: { 200: RuleView, ...Errors409 },
      },
    },
    async (req) => {
      precheck(req.caller, 'endpoints:update');
      const ruleId = ruleIdParam(req.params.rule_id);
      const rule = normalizeRule(req.body, { enabled: false });
      const updated = await db.transaction(async (tx) => {
        const endpoint = await writableEndpoint(tx, req.caller, req.params.id, plans);
        return store.replaceRoutingRule(tx, endpoint.id, ruleId, rule);
      });
      if (!updated) throw notFound();
      return ruleView(updated);
    },
  );

  app.delete(
    '/v1/endpoints/:id/routing-rules/:rule_id',
    {
      schema: {
        summary: 'Delete a routing rule',
        description: `Effective from the next request. Needs endpoints:update. ${ENTITLEMENT_NOTE}`,
        tags: TAGS,
        params: RuleParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...Errors409 },
      },
    },
    async (req, reply) => {
      precheck(req.caller, 'endpoints:update');
      const ruleId = ruleIdParam(req.params.rule_id);
      const deleted = await db.transaction(async (tx) => {
        const endpoint = await writableEndpoint(tx, req.caller, req.params.id, plans);
        return store.deleteRoutingRule(tx, endpoint.id, ruleId);
      });
      if (!deleted) throw notFound();
      return reply.status(204).send(null);
    },
  );
}
