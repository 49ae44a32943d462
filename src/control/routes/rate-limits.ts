// Firewall rate-limit rules API (docs/api.md "Firewall rate limits", docs/rate-limits.md): the account-wide list, rules
// and their conditions by uuid (legacy integer ids until the sunset). The operations live in services/rate-limits.ts.
import { Type } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';
import { MAX_CONDITIONS_PER_RULE, MAX_RULES_PER_ENDPOINT } from '../../store/rate-limit-rules.ts';
import { requireJsonContentType, type ControlApp, type ControlDeps } from '../http.ts';
import {
  ConditionBody,
  ConditionParams,
  ConditionView,
  conditionView,
  CreateBody,
  Errors409,
  ListQuery,
  ListView,
  listView,
  ReplaceBody,
  RuleParams,
  RuleView,
  ruleView,
} from '../schemas/rate-limits.ts';
import { PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, rateLimitService, type RuleBody } from '../services/rate-limits.ts';
import { ErrorResponses } from '../views.ts';

/** A legacy integer id in the path earns the response Deprecation and Sunset headers, whatever the outcome. */
const deprecationOn = (reply: FastifyReply) => (headers: Record<string, string>) => void reply.headers(headers);

export function rateLimitRoutes(app: ControlApp, deps: ControlDeps): void {
  const rateLimits = rateLimitService(deps);
  const TAGS = ['rate-limits'];
  const BASE = '/v1/firewall/rate-limits';
  const WRITE_NOTE =
    'Needs rate_limits:update in the active account and the custom_rate_limits plan entitlement (403 with code entitlement_required); ' +
    'a suspended account is 403 account_suspended; a paused endpoint is 409 quota_paused. Edges in every region get the change ' +
    'when it is saved; the endpoint’s shadowed rules are recomputed.';
  const LEGACY_NOTE =
    'Legacy integer ids are accepted in the path until EDGE_RATE_LIMIT_ID_SUNSET, answered with Deprecation and Sunset headers; after it, ' +
    '400 integer_id_unsupported.';

  app.get(
    BASE,
    {
      config: { permission: 'endpoints:read' },
      schema: {
        operationId: 'listRateLimits',
        summary: 'List rate-limit rules',
        description:
          'The active account’s rules, by endpoint then evaluation order (priority, id). page and limit (alias page_size) that are ' +
          `not positive integers fall back to 1 and ${PAGE_SIZE_DEFAULT}; limit above ${PAGE_SIZE_MAX} is clamped. An endpoint_id that ` +
          'names no endpoint of the caller gives an empty page. Needs endpoints:read.',
        tags: TAGS,
        querystring: ListQuery,
        response: { 200: ListView, ...ErrorResponses },
      },
    },
    async (req) => listView(await rateLimits.list(req.caller, req.query), deps.config.baseDomain),
  );

  app.post(
    BASE,
    {
      preValidation: requireJsonContentType,
      config: { permission: 'rate_limits:update' },
      schema: {
        operationId: 'createRateLimit',
        summary: 'Create a rate-limit rule',
        description:
          'A rule for one endpoint (endpoint_id: uuid or numeric id). Defaults: status active, priority 0, scope edge, fail_mode ' +
          'open (meaningful for scope cluster only: what an edge does while Redis is unreachable), no conditions (every request). ' +
          'A condition failing validation is 400 with error "Bad request" and the reason in detail. The deprecated source_ip ' +
          `becomes a source_ip condition. At most ${MAX_RULES_PER_ENDPOINT} rules per endpoint, ${MAX_CONDITIONS_PER_RULE} conditions per rule. ` +
          WRITE_NOTE,
        tags: TAGS,
        body: CreateBody,
        response: { 201: RuleView, ...Errors409 },
      },
    },
    async (req, reply) => {
      const { rule, legacy } = await rateLimits.create(req.caller, req.body as RuleBody & { endpoint_id: string | number });
      return reply.status(201).header('location', `${BASE}/${rule.uuid}`).send(ruleView(rule, legacy));
    },
  );

  app.get(
    `${BASE}/:uuid`,
    {
      config: { permission: 'endpoints:read' },
      schema: {
        operationId: 'getRateLimit',
        summary: 'Get a rate-limit rule',
        description: `404 when missing or in another account. Needs endpoints:read. ${LEGACY_NOTE}`,
        tags: TAGS,
        params: RuleParams,
        response: { 200: RuleView, ...ErrorResponses },
      },
    },
    async (req, reply) => {
      const { rule, legacy } = await rateLimits.get(req.caller, { rule: req.params.uuid, notice: deprecationOn(reply) });
      return ruleView(rule, legacy);
    },
  );

  app.put(
    `${BASE}/:uuid`,
    {
      preValidation: requireJsonContentType,
      config: { permission: 'rate_limits:update' },
      schema: {
        operationId: 'replaceRateLimit',
        summary: 'Replace a rate-limit rule',
        description:
          'Full update with the fields of create: omitted optional fields take their defaults, and the conditions are replaced ' +
          '(new condition uuids). endpoint_id may be omitted; a rule cannot move to another endpoint (400). ' +
          `${WRITE_NOTE} ${LEGACY_NOTE}`,
        tags: TAGS,
        params: RuleParams,
        body: ReplaceBody,
        response: { 200: RuleView, ...Errors409 },
      },
    },
    async (req, reply) => {
      const { rule, legacy } = await rateLimits.replace(req.caller, { rule: req.params.uuid, notice: deprecationOn(reply) }, req.body as RuleBody);
      return ruleView(rule, legacy);
    },
  );

  app.delete(
    `${BASE}/:uuid`,
    {
      config: { permission: 'rate_limits:update' },
      schema: {
        operationId: 'deleteRateLimit',
        summary: 'Delete a rate-limit rule',
        description: `${WRITE_NOTE} ${LEGACY_NOTE}`,
        tags: TAGS,
        params: RuleParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...Errors409 },
      },
    },
    async (req, reply) => {
      await rateLimits.remove(req.caller, { rule: req.params.uuid, notice: deprecationOn(reply) });
      return reply.status(204).send(null);
    },
  );

  app.post(
    `${BASE}/:uuid/conditions`,
    {
      preValidation: requireJsonContentType,
      config: { permission: 'rate_limits:update' },
      schema: {
        operationId: 'createRateLimitCondition',
        summary: 'Add a condition to a rate-limit rule',
        description:
          'Appended last in the evaluation order. Body as for the condition PUT; validation failures are 400 with error "Bad request" ' +
          `and the reason in detail. ${WRITE_NOTE} ${LEGACY_NOTE}`,
        tags: TAGS,
        params: RuleParams,
        body: ConditionBody,
        response: { 201: ConditionView, ...Errors409 },
      },
    },
    async (req, reply) => {
      const { condition, legacy } = await rateLimits.addCondition(req.caller, { rule: req.params.uuid, notice: deprecationOn(reply) }, req.body);
      return reply
        .status(201)
        .header('location', `${BASE}/${condition.rule_uuid}/conditions/${condition.uuid}`)
        .send(conditionView(condition, legacy));
    },
  );

  app.put(
    `${BASE}/:uuid/conditions/:condition_uuid`,
    {
      preValidation: requireJsonContentType,
      config: { permission: 'rate_limits:update' },
      schema: {
        operationId: 'replaceRateLimitCondition',
        summary: 'Replace a rate-limit condition',
        description:
          'Full write of one condition: type and operator required, value required except for exists / not_exists (which take the ' +
          'header or cookie name), logical_operator AND (default) or OR. The condition keeps its uuid and position. A condition ' +
          'failing validation is 400 with error "Bad request" and the reason in detail; 404 when the condition is missing or ' +
          `belongs to another rule; 415 without Content-Type application/json. ${WRITE_NOTE} ${LEGACY_NOTE}`,
        tags: TAGS,
        params: ConditionParams,
        body: ConditionBody,
        response: { 200: ConditionView, ...Errors409 },
      },
    },
    async (req, reply) => {
      const path = { rule: req.params.uuid, condition: req.params.condition_uuid, notice: deprecationOn(reply) };
      const { condition, legacy } = await rateLimits.replaceCondition(req.caller, path, req.body);
      return conditionView(condition, legacy);
    },
  );

  app.delete(
    `${BASE}/:uuid/conditions/:condition_uuid`,
    {
      config: { permission: 'rate_limits:update' },
      schema: {
        operationId: 'deleteRateLimitCondition',
        summary: 'Delete a rate-limit condition',
        description: `The others keep their order. 404 when the condition is missing or belongs to another rule. ${WRITE_NOTE} ${LEGACY_NOTE}`,
        tags: TAGS,
        params: ConditionParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...Errors409 },
      },
    },
    async (req, reply) => {
      await rateLimits.removeCondition(req.caller, { rule: req.params.uuid, condition: req.params.condition_uuid, notice: deprecationOn(reply) });
      return reply.status(204).send(null);
    },
  );
}
