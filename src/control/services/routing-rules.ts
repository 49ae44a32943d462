// Routing rules as domain operations (docs/routing-rules.md): input validated and canonicalised (conditions with the
// edge's own compiler), the plan entitlement, the endpoint's row lock for writes; store writes publish the endpoint.
import { fail, invalid } from '../../shared/errors.ts';
import type { Entitlement, Plan } from '../../shared/plans.ts';
import { canonicalCondition, ConditionError, CONTROL_CHARS } from '../../shared/match/condition.ts';
import { canonicalOriginUrl, OriginUrlError } from '../../shared/origin-url.ts';
import type { RoutingConditionConfig } from '../../shared/snapshot.ts';
import { AGENT_ID_PATTERN, MAX_AGENT_ID_LENGTH, MAX_TAG_LENGTH, MAX_TAGS, TAG_PATTERN } from '../../shared/tunnel/protocol.ts';
import type { Queryable } from '../../store/db.ts';
import type { EndpointRow } from '../../store/endpoints.ts';
import * as store from '../../store/routing-rules.ts';
import { MAX_CONDITIONS_PER_RULE, MAX_RULES_PER_ENDPOINT, type RoutingRuleInput, type RoutingRuleRow } from '../../store/routing-rules.ts';
import type { Caller } from '../caller.ts';
import { endpointForCaller, requireEndpointEntitlement } from '../endpoint-access.ts';
import { int64Param, type ControlDeps } from '../http.ts';

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
      throw invalid('target_agent_tags', `tag "${tag}": tags are at most ${MAX_TAG_LENGTH} of a-z 0-9 _ . - and start with a letter or digit`, { tag });
    }
  }
  if (tags.length > MAX_TAGS) throw invalid('target_agent_tags', `at most ${MAX_TAGS} target tags`, { count: tags.length });
  return tags;
}

export interface ConditionInput {
  condition_type: string;
  condition_key?: string;
  pattern: string;
}

/**
 * One condition in canonical form; a 400 naming its index as well as the field, `{field, reason, condition}`, with the
 * index in the message too (a rule has up to MAX_CONDITIONS_PER_RULE conditions with the same field names).
 */
export function normalizeCondition(input: ConditionInput, index: number): RoutingConditionConfig {
  try {
    return canonicalCondition(input.condition_type, input.condition_key ?? '', input.pattern);
  } catch (err) {
    if (!(err instanceof ConditionError)) throw err;
    throw fail.invalid_request(`Invalid condition ${index}: ${err.message}`, { field: err.field, reason: err.message, condition: index });
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
  tags?: string[];
}

/** The rule's origin URL in canonical form, null for none ("" counts as none, as for target_agent_id). */
function targetOrigin(raw: string | null | undefined, allowPrivate: boolean): string | null {
  if (raw === undefined || raw === null || raw === '') return null;
  try {
    return canonicalOriginUrl(raw, allowPrivate);
  } catch (err) {
    if (!(err instanceof OriginUrlError)) throw err;
    throw invalid('target_origin_url', err.message);
  }
}

/**
 * A request body → the stored form. Omitted fields are zeroed (docs/api.md, PUT) except `enabled` on create, which
 * defaults to true: a rule created without saying otherwise should take effect. A rule targets agents (an agent id,
 * tags, or both) or an origin URL, exactly one of the two; origin URLs are checked as endpoint origins are.
 */
export function normalizeRule(body: RuleBody, options: { enabled: boolean; allowPrivateOrigins: boolean }): RoutingRuleInput {
  const name = body.name ?? '';
  if (CONTROL_CHARS.test(name) || name.includes('\t')) throw invalid('name', 'control characters are not allowed');
  const rawId = body.target_agent_id ?? '';
  if (rawId !== '' && (rawId.length > MAX_AGENT_ID_LENGTH || !AGENT_ID.test(rawId))) {
    throw invalid('target_agent_id', `at most ${MAX_AGENT_ID_LENGTH} of A-Z a-z 0-9 _ . : @ -, starting with a letter or digit`);
  }
  const targetAgentTags = normalizeTags(body.target_agent_tags ?? '');
  const targetAgentId = rawId === '' ? null : rawId;
  const targetOriginUrl = targetOrigin(body.target_origin_url, options.allowPrivateOrigins);
  const targetsAgents = targetAgentId !== null || targetAgentTags.length > 0;
  if (targetsAgents && targetOriginUrl !== null) {
    throw invalid('target_origin_url', 'a rule targets agents or an origin, not both: set target_origin_url, or target_agent_id and/or target_agent_tags');
  }
  if (!targetsAgents && targetOriginUrl === null) {
    throw invalid('target_agent_id', 'a rule must target agents (target_agent_id, target_agent_tags, or both) or an origin (target_origin_url)');
  }
  if (body.conditions.length === 0) throw invalid('conditions', 'must not be empty');
  if (body.conditions.length > MAX_CONDITIONS_PER_RULE) {
    throw invalid('conditions', `at most ${MAX_CONDITIONS_PER_RULE} conditions per rule`, { count: body.conditions.length });
  }
  return {
    name,
    priority: body.priority ?? 0,
    enabled: body.enabled ?? options.enabled,
    targetAgentId,
    targetAgentTags,
    targetOriginUrl,
    tags: body.tags ?? [],
    conditions: body.conditions.map(normalizeCondition),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Access
// ---------------------------------------------------------------------------------------------------------------

export const ROUTING_FEATURE: Entitlement = 'endpoint_routing_rules';

/**
 * What can be refused without the database beyond the route's declared permission: the entitlement of the caller's
 * own plan. Admins may act on endpoints of other accounts, whose plan decides once the endpoint is known.
 */
function precheck(caller: Caller): void {
  if (!caller.isAdmin) caller.requireEntitlement(ROUTING_FEATURE);
}

/**
 * The endpoint named in the path, once the caller may use routing rules on it: the plan of the endpoint's account
 * (the caller's own, except for admins acting on another account), then 400/404.
 */
async function ruleEndpoint(q: Queryable, caller: Caller, uuid: string, plans: Record<string, Plan>, forUpdate = false): Promise<EndpointRow> {
  precheck(caller);
  const endpoint = await endpointForCaller(q, caller, uuid, { forUpdate });
  await requireEndpointEntitlement(q, caller, plans, endpoint, ROUTING_FEATURE);
  return endpoint;
}

/** Writes go through the endpoint's row lock and refuse a paused endpoint (read-only over plan limits). */
async function writableEndpoint(tx: Queryable, caller: Caller, uuid: string, plans: Record<string, Plan>): Promise<EndpointRow> {
  const endpoint = await ruleEndpoint(tx, caller, uuid, plans, true);
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
// Operations
// ---------------------------------------------------------------------------------------------------------------

/** An endpoint's rule as the path names it: the endpoint uuid and the rule id, both as sent. */
export interface RulePath {
  endpoint: string;
  rule: string;
}

export function routingRuleService({ db, config }: Pick<ControlDeps, 'db' | 'config'>) {
  const plans = config.plans;
  const allowPrivateOrigins = config.originAllowPrivate;

  return {
    /** A rule on the endpoint (enabled unless it says otherwise), at most MAX_RULES_PER_ENDPOINT per endpoint. */
    async create(caller: Caller, endpointUuid: string, body: RuleBody): Promise<{ endpoint: EndpointRow; rule: RoutingRuleRow }> {
      precheck(caller);
      const input = normalizeRule(body, { enabled: true, allowPrivateOrigins });
      return db.transaction(async (tx) => {
        const endpoint = await writableEndpoint(tx, caller, endpointUuid, plans);
        const count = await store.countRoutingRules(tx, endpoint.id);
        if (count >= MAX_RULES_PER_ENDPOINT) {
          throw fail.invalid_request(`An endpoint has at most ${MAX_RULES_PER_ENDPOINT} routing rules`, { field: 'rules', reason: `at most ${MAX_RULES_PER_ENDPOINT} per endpoint`, limit: MAX_RULES_PER_ENDPOINT, count });
        }
        return { endpoint, rule: await store.insertRoutingRule(tx, endpoint.id, input) };
      });
    },

    /** The endpoint's rules in evaluation order, disabled ones included. */
    async list(caller: Caller, endpointUuid: string): Promise<RoutingRuleRow[]> {
      const endpoint = await ruleEndpoint(db, caller, endpointUuid, plans);
      return store.listRoutingRules(db, endpoint.id);
    },

    async get(caller: Caller, path: RulePath): Promise<RoutingRuleRow> {
      precheck(caller);
      const ruleId = ruleIdParam(path.rule);
      const endpoint = await ruleEndpoint(db, caller, path.endpoint, plans);
      const rule = await store.findRoutingRule(db, endpoint.id, ruleId);
      if (!rule) throw notFound();
      return rule;
    },

    /** A full replacement: omitted fields are zeroed, `enabled` included. */
    async replace(caller: Caller, path: RulePath, body: RuleBody): Promise<RoutingRuleRow> {
      precheck(caller);
      const ruleId = ruleIdParam(path.rule);
      const input = normalizeRule(body, { enabled: false, allowPrivateOrigins });
      const updated = await db.transaction(async (tx) => {
        const endpoint = await writableEndpoint(tx, caller, path.endpoint, plans);
        return store.replaceRoutingRule(tx, endpoint.id, ruleId, input);
      });
      if (!updated) throw notFound();
      return updated;
    },

    async remove(caller: Caller, path: RulePath): Promise<void> {
      precheck(caller);
      const ruleId = ruleIdParam(path.rule);
      const deleted = await db.transaction(async (tx) => {
        const endpoint = await writableEndpoint(tx, caller, path.endpoint, plans);
        return store.deleteRoutingRule(tx, endpoint.id, ruleId);
      });
      if (!deleted) throw notFound();
    },
  };
}
