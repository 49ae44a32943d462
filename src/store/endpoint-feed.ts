// Publishes an endpoint's data-plane view to the change feed: everything an edge needs to serve it, nothing else.
// Every write that changes what an edge must do calls this inside its transaction (or publishes a deletion).
import type { Queryable } from './db.ts';
import { recordChange } from './feed.ts';
import { TOPICS, type EndpointConfig, type RoutingRuleConfig } from '../shared/snapshot.ts';

export const ENDPOINT_TOPIC = TOPICS.endpoint;

/**
 * The routing rules an edge evaluates for one endpoint, enabled and disabled, in evaluation order (ascending
 * priority, then id; docs/routing-rules.md). Conditions come in their stored position order.
 */
export async function loadRoutingRules(tx: Queryable, endpointId: number): Promise<RoutingRuleConfig[]> {
  const { rows } = await tx.query<Omit<RoutingRuleConfig, 'conditions'> & { conditions: RoutingRuleConfig['conditions'] | string }>(
    `SELECT r.id, r.name, r.priority, r.enabled, r.target_agent_id, r.target_agent_tags, r.target_origin_url,
            COALESCE((SELECT json_agg(json_build_object('condition_type', c.condition_type, 'condition_key', c.condition_key, 'pattern', c.pattern)
                                      ORDER BY c.position)
                      FROM routing_rule_conditions c WHERE c.rule_id = r.id), '[]'::json) AS conditions
     FROM routing_rules r WHERE r.endpoint_id = $1 ORDER BY r.priority, r.id`,
    [endpointId],
  );
  return rows.map((r) => ({ ...r, conditions: typeof r.conditions === 'string' ? JSON.parse(r.conditions) : r.conditions }));
}

export async function publishEndpoint(tx: Queryable, endpointId: number): Promise<void> {
  const { rows } = await tx.query<Omit<EndpointConfig, 'paused' | 'routing_rules'> & { paused_at: Date | null }>(
    `SELECT id, uuid::text AS uuid, user_id, account_id, hostname, status, ephemeral, dedicated_tcp_port, dedicated_udp_port,
            certificate_id, mtls_mode, mtls_ca_pem, capture_enabled, capture_level, enforce_https, origin_url, paused_at
     FROM endpoints WHERE id = $1`,
    [endpointId],
  );
  const row = rows[0];
  if (!row) return;
  const { paused_at, ...record } = row;
  const config: EndpointConfig = { ...record, paused: paused_at !== null, routing_rules: await loadRoutingRules(tx, endpointId) };
  await recordChange(tx, ENDPOINT_TOPIC, row.uuid, config);
}

export async function publishEndpointDeleted(tx: Queryable, uuid: string): Promise<void> {
  await recordChange(tx, ENDPOINT_TOPIC, uuid, null);
}
