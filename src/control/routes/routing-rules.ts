// Routing rules API: create, list (in evaluation order), get, replace and delete the rules that choose what serves
// a request (which agents, or an origin URL). Input is validated and canonicalised here; every write publishes the endpoint.
import { Type } from '@sinclair/typebox';
import { fail } from '../../shared/errors.ts';
import type { Entitlement, Plan } from '../../shared/plans.ts';
import { Nullable, Strict, Timestamp } from '../../shared/schema.ts';
import { canonicalCondition, ConditionError, CONTROL_CHARS, MAX_CONDITION_KEY_LENGTH, MAX_CONDITION_PATTERN_LENGTH } from '../../shared/match/condition.ts';
import { canonicalOriginUrl, OriginUrlError } from '../../shared/origin-url.ts';
import { ROUTING_CONDITION_TYPES, type RoutingConditionConfig } from '../../shared/snapshot.ts';
import { AGENT_ID_PATTERN, MAX_AGENT_ID_LENGTH, MAX_TAG_LENGTH, MAX_TAGS, TAG_PATTERN } from '../../shared/tunnel/protocol.ts';
import type { Queryable } from '../../store/db.ts';
import type { EndpointRow } from '../../store/endpoints.ts';
import * as store from '../../store/routing-rules.ts';
import { MAX_CONDITIONS_PER_RULE, MAX_RULES_PER_ENDPOINT, type RoutingRuleInput, type RoutingRuleRow } from '../../store/routing-rules.ts';
import type { Caller } from '../caller.ts';
import { endpointForCaller, requireEndpointEntitlement } from '../endpoint-access.ts';
import { int64Param, type ControlApp, type ControlDeps } from '../http.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';

// ---------------------------------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------------------------------

const MAX_NAME_LENGTH = 100;
const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;

// ---------------------------------------------------------------------------------------------------------------
// Validation and canonical form. Conditions are checked by src/shared/match/condition.ts, whose last step compiles
// them with the edge's own compiler: anything an edge could not compile is refused now, with a 400 naming it.
// ---------------------------------------------------------------------------------------------------------------

const TAG = new RegExp(TAG_PATTERN);
const AGENT_ID = new RegExp(AGENT_ID_PATTERN);

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
  target_origin_url?: string | null;
  conditions: ConditionInput[];
}

/** The rule's origin URL in canonical form, null for none ("" counts as none, as for target_agent_id). */
function targetOrigin(raw: string | null | undefined, allowPrivate: boolean): string | null {
  if (raw === undefined || raw === null || raw === '') return null;
  try {
    return canonicalOriginUrl(raw, allowPrivate);
  } catch (err) {
    if (!(err instanceof OriginUrlError)) throw err;
    throw fail.invalid_request(`Invalid target_origin_url: ${err.message}`, { field: 'target_origin_url', reason: err.message });
  }
}

/**
 * A request body → the stored form. Omitted fields are zeroed (docs/api.md, PUT) except `enabled` on create, which
 * defaults to true: a rule created without saying otherwise should take effect. A rule targets agents (an agent id,
 * tags, or both) or an origin URL, exactly one of the two; origin URLs are checked as endpoint origins are.
 */
export function normalizeRule(body: RuleBody, options: { enabled: boolean; allowPrivateOrigins: boolean }): RoutingRuleInput {
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
  const targetOriginUrl = targetOrigin(body.target_origin_url, options.allowPrivateOrigins);
  const targetsAgents = targetAgentId !== null || targetAgentTags.length > 0;
  if (targetsAgents && targetOriginUrl !== null) {
    throw fail.invalid_request('A rule targets agents or an origin, not both: set target_origin_url, or target_agent_id and/or target_agent_tags', {
      field: 'target_origin_url',
    });
  }
  if (!targetsAgents && targetOriginUrl === null) {
    throw fail.invalid_request('A rule must target agents (target_agent_id, target_agent_tags, or both) or an origin (target_origin_url)', {
      field: 'target_agent_id',
    });
  }
  if (body.conditions.length === 0) throw fail.invalid_request('conditions must not be empty', { field: 'conditions' });
  if (body.conditions.length > MAX_CONDITIONS_PER_RULE) {
    throw fail.invalid_request(`At most ${MAX_CONDITIONS_PER_RULE} conditions per rule`, { field: 'conditions', count: body.conditions.length });
  }
  return {
    name,
    priority: body.priority ?? 0,
    enabled: body.enabled ?? options.enabled,
    targetAgentId,
    targetAgentTags,
    targetOriginUrl,
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
    target_origin_url: Nullable(Type.String({ description: 'The origin URL the request is forwarded to, instead of agents' })),
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
        maxLength: MAX_CONDITION_KEY_LENGTH,
        description: 'path: prefix (default), exact or glob; header, query, cookie: the name; empty for the other types',
      }),
    ),
    pattern: Type.String({
      maxLength: MAX_CONDITION_PATTERN_LENGTH,
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
  target_origin_url: Type.Optional(
    Nullable(
      Type.String({
        maxLength: 2048,
        description:
          'Forward to this http/https origin instead of agents (as PUT /v1/endpoints/{id}/origin); null or empty for none. ' +
          'Exclusive with target_agent_id and target_agent_tags',
      }),
    ),
  ),
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
    target_origin_url: r.target_origin_url,
    conditions: r.conditions.map((c) => ({ condition_type: c.condition_type, condition_key: c.condition_key, pattern: c.pattern })),
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Access
// ---------------------------------------------------------------------------------------------------------------

const FEATURE: Entitlement = 'endpoint_routing_rules';

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
  await requireEndpointEntitlement(q, caller, plans, endpoint, FEATURE);
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
          'Rules choose what serves a request: the first enabled rule (ascending priority, then id) whose conditions all match ' +
          'sends the request to target_agent_id and/or agents carrying every target tag, or to target_origin_url (exactly one of ' +
          'agents or an origin; the origin is checked as for PUT /v1/endpoints/{id}/origin). enabled defaults ' +
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
      const rule = normalizeRule(req.body, { enabled: true, allowPrivateOrigins: config.originAllowPrivate });
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
          'agent id, no tags, no origin); conditions must be non-empty, and the rule must still target agents (an id or a tag) or ' +
          'an origin, not both. Effective from ' +
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
      const rule = normalizeRule(req.body, { enabled: false, allowPrivateOrigins: config.originAllowPrivate });
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
