// Health checks in the control API (SPEC.md "Health"): the check's effective configuration, and what the prober found
// (verdicts, uptime, latency). The worker's prober does the probing (src/worker/health-prober.ts, docs/health-checks.md).
import { Type } from '@sinclair/typebox';
import { fail } from '../../shared/errors.ts';
import { tunnelsOf, type AgentPresence, type PresenceStore } from '../../shared/presence.ts';
import { isUuid, Nullable, Strict, Timestamp } from '../../shared/schema.ts';
import type { Queryable } from '../../store/db.ts';
import { findEndpointByUuid, type EndpointRow } from '../../store/endpoints.ts';
import {
  findHealthCheck,
  HEALTH_LIMITS,
  HEALTH_STATUSES,
  lastCheck,
  recentProbes,
  saveHealthCheck,
  uptimeAggregates,
  type HealthCheckRow,
  type ProbeRow,
  type UptimeAggregates,
} from '../../store/health.ts';
import type { Caller } from '../caller.ts';
import { canSee } from '../endpoint-access.ts';
import { errorStringOn400, type ControlApp, type ControlDeps } from '../http.ts';
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

/** SPEC.md fixes this operation's 400 body: an object with one error string. */
const HealthCheckErrorResponses = { ...ErrorResponses, 400: Type.Object({ error: Type.String() }, { description: 'The health-check validation error: one error string' }) };

/**
 * Health operations answer 403 for another account's endpoint (SPEC.md's exception to the 404 rule), 404 only for a
 * missing one; admins see every endpoint.
 */
async function endpointForHealth(db: Queryable, caller: Caller, uuid: string, opts: { forUpdate?: boolean } = {}): Promise<EndpointRow> {
  if (!isUuid(uuid)) throw fail.invalid_id('Invalid endpoint id', 'the endpoint id must be a UUID');
  const endpoint = await findEndpointByUuid(db, uuid.toLowerCase(), opts);
  if (!endpoint) throw fail.not_found('Endpoint not found');
  if (!canSee(caller, endpoint)) throw fail.forbidden('The endpoint belongs to another user');
  return endpoint;
}

/**
 * Why the endpoint cannot be probed over HTTP, or null when it can. Probes are HTTP requests through the edge, so an
 * endpoint that serves only raw TCP/UDP cannot be: a legacy `tcp`/`udp` row; or one whose live agents are all tcp/udp
 * agents; or, with no agent connected, one that has dedicated TCP/UDP ports and no origin. An origin URL or any http
 * agent makes it HTTP; an endpoint with nothing attached yet is supported (unified endpoints serve HTTP by default).
 */
export function rawOnlyProtocol(endpoint: Pick<EndpointRow, 'protocol' | 'origin_url' | 'dedicated_tcp_port' | 'dedicated_udp_port'>, agents: readonly Pick<AgentPresence, 'protocol'>[]): string | null {
  if (endpoint.protocol === 'tcp' || endpoint.protocol === 'udp') return endpoint.protocol;
  if (endpoint.origin_url) return null;
  if (agents.length > 0) {
    if (agents.some((a) => a.protocol !== 'tcp' && a.protocol !== 'udp')) return null;
    return [...new Set(agents.map((a) => a.protocol))].sort().join('/');
  }
  const ports = [endpoint.dedicated_tcp_port !== null ? 'tcp' : '', endpoint.dedicated_udp_port !== null ? 'udp' : ''].filter(Boolean);
  return ports.length > 0 ? ports.join('/') : null;
}

function checkView(endpoint: EndpointRow, check: Pick<HealthCheckRow, 'enabled' | 'path' | 'interval_seconds'> | null, rawOnly: string | null) {
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

/** The PUT body's checks beyond its types, each a 400 with a message saying what to send instead. */
function validatePatch(body: { enabled?: boolean; path?: string | null; interval_seconds?: number }): void {
  if (body.enabled === undefined && body.path === undefined && body.interval_seconds === undefined) {
    throw fail.invalid_request('No fields to update: send at least one of enabled, path, interval_seconds');
  }
  const interval = body.interval_seconds;
  if (interval !== undefined && (interval < HEALTH_LIMITS.minIntervalSeconds || interval > HEALTH_LIMITS.maxIntervalSeconds)) {
    throw fail.invalid_request(`interval_seconds must be between ${HEALTH_LIMITS.minIntervalSeconds} and ${HEALTH_LIMITS.maxIntervalSeconds}, got ${interval}`);
  }
  const path = body.path;
  if (typeof path === 'string' && path !== '') {
    if (!path.startsWith('/')) throw fail.invalid_request('path must start with "/"');
    if (path.length > HEALTH_LIMITS.maxPathLength) throw fail.invalid_request(`path must be at most ${HEALTH_LIMITS.maxPathLength} characters, got ${path.length}`);
    // Probes send the path as a request target: no fragment, and nothing a request line cannot carry. Characters
    // beyond ASCII are refused too (an HTTP client throws on them; the prober would have nothing to send).
    if (/[\s#\x00-\x1f\x7f]/.test(path)) throw fail.invalid_request('path must not contain spaces, control characters or "#"');
    if (/[^\x21-\x7e]/.test(path)) throw fail.invalid_request('path must be ASCII: percent-encode other characters (/caf%C3%A9, not /café)');
  }
}

/**
 * The API contract gives the health-check operations' 400 its own body (docs/errors.md), an object with one `error` string; every other status
 * keeps the uniform body. Both come from the registry's error (src/control/http.ts, errorStringOn400).
 */
const healthCheckErrors = errorStringOn400;

/**
 * Uptime aggregates per endpoint, kept `ttlMs` in this control process (SPEC.md: cached about 5 minutes), since
 * each is a scan of up to 30 days of probe rows. Bounded: past `max` entries, expired ones go first, then the oldest.
 */
class UptimeCache {
  private readonly entries = new Map<number, { at: number; value: UptimeAggregates }>();
  constructor(
    private readonly ttlMs: number,
    private readonly max = 10_000,
  ) {}

  async get(endpointId: number, compute: () => Promise<UptimeAggregates>): Promise<UptimeAggregates> {
    const now = Date.now();
    const hit = this.entries.get(endpointId);
    if (hit && now - hit.at < this.ttlMs) return hit.value;
    const value = await compute();
    if (this.ttlMs <= 0) return value;
    this.entries.delete(endpointId);
    if (this.entries.size >= this.max) {
      for (const [id, e] of this.entries) if (now - e.at >= this.ttlMs) this.entries.delete(id);
      if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value!);
    }
    this.entries.set(endpointId, { at: now, value });
    return value;
  }
}

async function liveAgents(presence: PresenceStore, uuid: string): Promise<AgentPresence[]> {
  return tunnelsOf(presence, uuid);
}

export function healthRoutes(app: ControlApp, { db, presence, config }: ControlDeps): void {
  const uptimes = new UptimeCache(config.health.uptimeCacheSeconds * 1000);

  app.get(
    '/v1/endpoints/:id/health-check',
    {
      errorHandler: healthCheckErrors,
      schema: {
        summary: 'The endpoint’s health-check configuration, with defaults for unset values',
        tags: ['health'],
        params: Type.Object({ id: Type.String() }),
        response: { 200: HealthCheckView, ...HealthCheckErrorResponses },
      },
    },
    async (req) => {
      req.caller.requirePermission('endpoints:read');
      const endpoint = await endpointForHealth(db, req.caller, req.params.id);
      const [check, agents] = await Promise.all([findHealthCheck(db, endpoint.id), liveAgents(presence, endpoint.uuid)]);
      return checkView(endpoint, check, rawOnlyProtocol(endpoint, agents));
    },
  );

  app.put(
    '/v1/endpoints/:id/health-check',
    {
      errorHandler: healthCheckErrors,
      schema: {
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
    async (req) => {
      req.caller.requirePermission('endpoints:update');
      const body = req.body;
      // Existence and ownership are answered before the body's values are judged (404 and 403 say more than a 400).
      const endpoint = await endpointForHealth(db, req.caller, req.params.id);
      validatePatch(body);
      const agents = await liveAgents(presence, endpoint.uuid);
      return db.transaction(async (tx) => {
        const locked = await endpointForHealth(tx, req.caller, endpoint.uuid, { forUpdate: true });
        const current = await findHealthCheck(tx, locked.id, { forUpdate: true });
        const next = {
          enabled: body.enabled ?? current?.enabled ?? false,
          path: body.path === undefined ? (current?.path ?? null) : body.path || null,
          interval_seconds: body.interval_seconds ?? current?.interval_seconds ?? null,
        };
        const rawOnly = rawOnlyProtocol(locked, agents);
        if (body.enabled === true && rawOnly !== null) {
          throw fail.invalid_request(`Health checks are supported for HTTP endpoints only; this endpoint serves ${rawOnly}`);
        }
        const saved = await saveHealthCheck(tx, locked.id, next);
        return checkView(locked, saved, rawOnly);
      });
    },
  );

  app.get(
    '/v1/endpoints/:id/health',
    {
      schema: {
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
      req.caller.requirePermission('endpoints:read');
      const endpoint = await endpointForHealth(db, req.caller, req.params.id);
      const [check, agents, recent] = await Promise.all([findHealthCheck(db, endpoint.id), liveAgents(presence, endpoint.uuid), recentProbes(db, endpoint.id)]);
      const enabled = check?.enabled ?? false;
      const aggregates = enabled ? await uptimes.get(endpoint.id, () => uptimeAggregates(db, endpoint.id)) : { uptime_24h: 0, uptime_7d: 0, uptime_30d: 0, avg_latency_ms: 0 };
      const last = enabled ? await lastCheck(db, endpoint.id) : null;
      return {
        endpoint_id: endpoint.id,
        has_active_agent: agents.length > 0,
        ...aggregates,
        last_check: last ? probeView(last) : null,
        recent_checks: recent.map(probeView),
      };
    },
  );
}
