// Plans: what an account may use (entitlements) and how much of it (quotas), as configured in config/plans.json.
// The control API consults them on writes; edges consult allowed_regions and protocols when a tunnel connects.
import { Type, type Static } from '@sinclair/typebox';

export const ENTITLEMENTS = [
  'rbac',
  'custom_ssl',
  'dedicated_ports',
  'dedicated_ips',
  'endpoint_routing_rules',
  'custom_rate_limits',
  'custom_subdomains',
] as const;
export type Entitlement = (typeof ENTITLEMENTS)[number];

export const VERIFICATION_FLAGS = ['email_verified', 'payment_method', 'identity_verified'] as const;
export type VerificationFlag = (typeof VERIFICATION_FLAGS)[number];

export const PROTOCOLS = ['http', 'tcp', 'udp', 'quic'] as const;

export const PlanSchema = Type.Object(
  {
    entitlements: Type.Object(
      Object.fromEntries(ENTITLEMENTS.map((e) => [e, Type.Boolean()])) as Record<Entitlement, ReturnType<typeof Type.Boolean>>,
      { additionalProperties: false },
    ),
    quotas: Type.Object(
      {
        permanent_endpoints: Type.Integer({ minimum: 0 }),
        organization_endpoints: Type.Integer({ minimum: 0 }),
        // 0 means unlimited, as docs/api.md defines for dedicated ports.
        dedicated_ports_max: Type.Integer({ minimum: 0 }),
      },
      { additionalProperties: false },
    ),
    // "*" allows every region.
    allowed_regions: Type.Array(Type.String({ minLength: 1 }), { minItems: 1 }),
    protocols: Type.Array(Type.Union(PROTOCOLS.map((p) => Type.Literal(p))), { minItems: 1 }),
    // feature -> verification flags the user must hold before using it.
    verification_gates: Type.Record(Type.String(), Type.Array(Type.Union(VERIFICATION_FLAGS.map((f) => Type.Literal(f))))),
    // Days captured traffic (traffic_logs) and its per-minute rollup are kept; the worker deletes older rows.
    traffic_retention_days: Type.Integer({ minimum: 1, maximum: 3650 }),
  },
  { additionalProperties: false },
);
export type Plan = Static<typeof PlanSchema>;

export function allowsRegion(plan: Plan, region: string): boolean {
  return plan.allowed_regions.includes('*') || plan.allowed_regions.includes(region);
}
