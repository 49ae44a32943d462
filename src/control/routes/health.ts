// Health checks in the control API (docs/api.md "Health checks"): the check's effective configuration, and what the prober found
// (verdicts, uptime, latency). The worker's prober does the probing (src/worker/health-prober.ts, docs/health-checks.md).
import { Type } from '@sinclair/typebox';
import { Nullable, Strict, Timestamp } from '../../shared/schema.ts';
import { HEALTH_LIMITS, HEALTH_STATUSES, type ProbeRow } from '../../store/health.ts';
import { errorStringOn400, type ControlApp, type ControlDeps } from '../http.ts';
import { healthService, type CheckState } from '../services/health.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';

const HealthCheckView = Type.Object({
  endpoint_id: Type.Integer({ description: 'The numeric endpoint id' }),
  protocol: Type.String({ description: 'The endpoint’s protocol: `unified` for endpoints created now; legacy rows `http`, `tcp`, `udp`' }),
  supported: Type.Boolean({ description: 'False when the endpoint serves only raw TCP/UDP (legacy tcp/udp rows, or only tcp/udp agents or dedicated ports)' }),
  enabled: Type.Boolean(),
  path: Type.String({ description: 'The path probed; `/` when none is set' }),
  interval_seconds: Type.Integer({ description: 'Seconds between probes; 60 when none is set' }),
  min_interval_seconds: Type.Integer(),
  max_interval_seconds: Type.Integer(),
});

const ProbeView = Type.Object({
  id: Type.Integer(),
  status: Type.Union(HEALTH_STATUSES.map((s) => Type.Literal(s))),
  status_code: Nullable(Type.Integer({ description: 'Null on error and timeout' })),
  latency_ms: Type.Number(),
  error_message: Nullable(Type.String()),
  checked_at: Timestamp(),
});

const HealthView = Type.Object({
  endpoint_id: Type.Integer(),
  has_active_agent: Type.Boolean({ description: 'An agent of the endpoint is connected to a live edge now' }),
  uptime_24h: Type.Number({ description: 'Percent of healthy probes among all probes of the last 24 h (2 decimals; cached about 5 minutes)' }),
  uptime_7d: Type.Number(),
  uptime_30d: Type.Number(),
  avg_latency_ms: Type.Number({ description: 'Mean latency of the healthy probes of the last 24 h (cached with the uptimes)' }),
  last_check: Nullable(ProbeView),
  recent_checks: Type.Array(ProbeView, { description: `Up to ${HEALTH_LIMITS.recentChecks} probes, newest first` }),
});

/** docs/api.md fixes this operation's 400 body: an object with one error string. */
const HealthCheckErrorResponses = { ...ErrorResponses, 400: Type.Object({ error: Type.String() }, { description: 'The health-check validation error: one error string' }) };

function checkView({ endpoint, check, rawOnly }: CheckState) {
  return {
    endpoint_id: endpoint.id,
    protocol: endpoint.protocol,
    supported: rawOnly === null,
    enabled: check?.enabled ?? false,
    path: check?.path || HEALTH_LIMITS.defaultPath,
    interval_seconds: check?.interval_seconds ?? HEALTH_LIMITS.defaultIntervalSeconds,
    min_interval_seconds: HEALTH_LIMITS.minIntervalSeconds,
    max_interval_seconds: HEALTH_LIMITS.maxIntervalSeconds,
  };
}

function probeView(p: ProbeRow) {
  return { id: p.id, status: p.status, status_code: p.status_code, latency_ms: p.latency_ms, error_message: p.error_message, checked_at: iso(p.checked_at) };
}

/**
 * docs/api.md gives the health-check operations' 400 its own body, an object with one `error` string; every other status
 * keeps the uniform body. Both come from the registry's error (src/control/http.ts, errorStringOn400).
 */
const healthCheckErrors = errorStringOn400;

export function healthRoutes(app: ControlApp, deps: ControlDeps): void {
  const health = healthService(deps);

  app.get(
    '/v1/endpoints/:id/health-check',
    {
      errorHandler: healthCheckErrors,
      config: { permission: 'endpoints:read' },
      schema: {
        operationId: 'getEndpointHealthCheck',
        summary: 'The endpoint’s health-check configuration, with defaults for unset values',
        tags: ['health'],
        params: Type.Object({ id: Type.String() }),
        response: { 200: HealthCheckView, ...HealthCheckErrorResponses },
      },
    },
    async (req) => checkView(await health.check(req.caller, req.params.id)),
  );

  app.put(
    '/v1/endpoints/:id/health-check',
    {
      errorHandler: healthCheckErrors,
      config: { permission: 'endpoints:update' },
      schema: {
        operationId: 'updateEndpointHealthCheck',
        summary: 'Configure the endpoint’s health check (a partial update of the fields sent)',
        description:
          `All fields optional, at least one required. enabled: probe the endpoint through the edge, as a visitor, every interval (refused for endpoints serving only TCP/UDP). ` +
          `path: starts with "/", at most ${HEALTH_LIMITS.maxPathLength} characters; null or "" returns to "/". interval_seconds: ${HEALTH_LIMITS.minIntervalSeconds} to ${HEALTH_LIMITS.maxIntervalSeconds}. ` +
          'Changes reach the prober within about 30 seconds. A 400 answers an object with one error string.',
        tags: ['health'],
        params: Type.Object({ id: Type.String() }),
        body: Strict({
          enabled: Type.Optional(Type.Boolean()),
          path: Type.Optional(Nullable(Type.String())),
          interval_seconds: Type.Optional(Type.Integer()),
        }),
        response: { 200: HealthCheckView, ...HealthCheckErrorResponses },
      },
    },
    async (req) => checkView(await health.configure(req.caller, req.params.id, req.body)),
  );

  app.get(
    '/v1/endpoints/:id/health',
    {
      config: { permission: 'endpoints:read' },
      schema: {
        operationId: 'getEndpointHealth',
        summary: 'What the health checks found: live agents, uptime over 24 h / 7 d / 30 d, latency, the last and recent probes',
        description:
          'With checks disabled it still answers: uptimes and latency 0, last_check null (recent_checks keeps the probes stored, up to 30 days). ' +
          'Uptimes and latency are cached about 5 minutes; last_check and recent_checks are read fresh.',
        tags: ['health'],
        params: Type.Object({ id: Type.String() }),
        response: { 200: HealthView, ...ErrorResponses, 400: ErrorBody },
      },
    },
    async (req) => {
      const { endpointId, hasActiveAgent, last, recent, ...aggregates } = await health.report(req.caller, req.params.id);
      return {
        endpoint_id: endpointId,
        has_active_agent: hasActiveAgent,
        ...aggregates,
        last_check: last ? probeView(last) : null,
        recent_checks: recent.map(probeView),
      };
    },
  );
}
