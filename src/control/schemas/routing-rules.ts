// Request and response shapes of the routing rules API (routes/routing-rules.ts), and the row → JSON view behind
// them. Bodies are typed here; what types cannot say (targets, conditions) services/routing-rules.ts checks.
import { Type } from '@sinclair/typebox';
import { MAX_CONDITION_KEY_LENGTH, MAX_CONDITION_PATTERN_LENGTH } from '../../shared/match/condition.ts';
import { Nullable, Strict, Timestamp } from '../../shared/schema.ts';
import { ROUTING_CONDITION_TYPES } from '../../shared/snapshot.ts';
import { MAX_AGENT_ID_LENGTH, MAX_TAGS } from '../../shared/tunnel/protocol.ts';
import { MAX_CONDITIONS_PER_RULE, type RoutingRuleRow } from '../../store/routing-rules.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';
import { tagsBody, TagsView } from './tags.ts';

const MAX_NAME_LENGTH = 100;
const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;

const ConditionView = Type.Object({
  condition_type: Type.String({ enum: [...ROUTING_CONDITION_TYPES] }),
  condition_key: Type.String(),
  pattern: Type.String(),
});

export const RuleView = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    priority: Type.Integer({ description: 'Lower numbers are evaluated first; ties by id' }),
    enabled: Type.Boolean(),
    target_agent_id: Nullable(Type.String({ description: 'The agent id the request must go to' })),
    target_agent_tags: Type.String({ description: 'Comma-separated, lower-case: the agent must carry every tag' }),
    target_origin_url: Nullable(Type.String({ description: 'The origin URL the request is forwarded to, instead of agents' })),
    tags: TagsView,
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

export const RuleBodySchema = Strict({
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
  tags: Type.Optional(tagsBody(' (not target_agent_tags, which choose agents). A full replacement: omitted on PUT means none')),
});

export const EndpointParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }) });
export const RuleParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }), rule_id: Type.String({ description: 'Rule id (int64)' }) });
export const Errors409 = { ...ErrorResponses, 409: ErrorBody };

export function ruleView(r: RoutingRuleRow) {
  return {
    id: r.id,
    name: r.name,
    priority: r.priority,
    enabled: r.enabled,
    target_agent_id: r.target_agent_id,
    target_agent_tags: r.target_agent_tags.join(','),
    target_origin_url: r.target_origin_url,
    tags: r.tags,
    conditions: r.conditions.map((c) => ({ condition_type: c.condition_type, condition_key: c.condition_key, pattern: c.pattern })),
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
  };
}
