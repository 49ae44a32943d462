// Health checks as domain operations (docs/health-checks.md): the check's effective configuration and its partial
// update, and what the worker's prober found, with uptimes cached per endpoint in this control process.
import { fail } from '../../shared/errors.ts';
import { tunnelsOf, type AgentPresence } from '../../shared/presence.ts';
import { isUuid } from '../../shared/schema.ts';
import type { Queryable } from '../../store/db.ts';
import { findEndpointByUuid, type EndpointRow } from '../../store/endpoints.ts';
import {
  findHealthCheck,
  HEALTH_LIMITS,
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
import type { ControlDeps } from '../http.ts';

/**
 * Health operations answer 403 for another account's endpoint (docs/api.md's exception to the 404 rule), 404 only for a
 * missing one; admins see every endpoint.
 */
async function endpointForHealth(db: Queryable, caller: Caller, uuid: string, opts: { forUpdate?: boolean } = {}): Promise<EndpointRow> {
  if (!isUuid(uuid)) throw fail.invalid_id('Invalid endpoint id', { field: 'id', reason: 'the endpoint id must be a UUID' });
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

export interface CheckPatch {
  enabled?: boolean;
  path?: string | null;
  interval_seconds?: number;
}

/**
 * The PUT body's checks beyond its types, each a 400 with a message saying what to send instead. The health contract
 * (docs/api.md) answers these with one error string (routes/health.ts), so the message is the whole of what a client reads.
 */
function validatePatch(body: CheckPatch): void {
  if (body.enabled === undefined && body.path === undefined && body.interval_seconds === undefined) {
    throw fail.invalid_request('No fields to update: send at least one of enabled, path, interval_seconds', { field: '(body)', reason: 'send at least one of enabled, path, interval_seconds' });
  }
  const interval = body.interval_seconds;
  if (interval !== undefined && (interval < HEALTH_LIMITS.minIntervalSeconds || interval > HEALTH_LIMITS.maxIntervalSeconds)) {
    throw fail.invalid_request(`interval_seconds must be between ${HEALTH_LIMITS.minIntervalSeconds} and ${HEALTH_LIMITS.maxIntervalSeconds}, got ${interval}`, { field: 'interval_seconds', reason: `must be between ${HEALTH_LIMITS.minIntervalSeconds} and ${HEALTH_LIMITS.maxIntervalSeconds}` });
  }
  const path = body.path;
  if (typeof path === 'string' && path !== '') {
    if (!path.startsWith('/')) throw fail.invalid_request('path must start with "/"', { field: 'path', reason: 'must start with "/"' });
    if (path.length > HEALTH_LIMITS.maxPathLength) throw fail.invalid_request(`path must be at most ${HEALTH_LIMITS.maxPathLength} characters, got ${path.length}`, { field: 'path', reason: `must be at most ${HEALTH_LIMITS.maxPathLength} characters` });
    // Probes send the path as a request target: no fragment, and nothing a request line cannot carry. Characters
    // beyond ASCII are refused too (an HTTP client throws on them; the prober would have nothing to send).
    if (/[\s#\x00-\x1f\x7f]/.test(path)) throw fail.invalid_request('path must not contain spaces, control characters or "#"', { field: 'path', reason: 'must not contain spaces, control characters or "#"' });
    if (/[^\x21-\x7e]/.test(path)) throw fail.invalid_request('path must be ASCII: percent-encode other characters (/caf%C3%A9, not /café)', { field: 'path', reason: 'must be ASCII: percent-encode other characters' });
  }
}

/**
 * Uptime aggregates per endpoint, kept `ttlMs` in this control process (docs/api.md: cached about 5 minutes), since
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

/** A check as the API shows it: the endpoint, its stored settings (null when never set) and why it cannot be probed. */
export interface CheckState {
  endpoint: EndpointRow;
  check: Pick<HealthCheckRow, 'enabled' | 'path' | 'interval_seconds'> | null;
  rawOnly: string | null;
}

export interface HealthReport extends UptimeAggregates {
  endpointId: number;
  hasActiveAgent: boolean;
  last: ProbeRow | null;
  recent: ProbeRow[];
}

export function healthService({ db, presence, config }: Pick<ControlDeps, 'db' | 'presence' | 'config'>) {
  const uptimes = new UptimeCache(config.health.uptimeCacheSeconds * 1000);

  return {
    async check(caller: Caller, endpointUuid: string): Promise<CheckState> {
      const endpoint = await endpointForHealth(db, caller, endpointUuid);
      const [check, agents] = await Promise.all([findHealthCheck(db, endpoint.id), tunnelsOf(presence, endpoint.uuid)]);
      return { endpoint, check, rawOnly: rawOnlyProtocol(endpoint, agents) };
    },

    /** A partial update of the fields sent; enabling is refused for an endpoint that serves only raw TCP/UDP. */
    async configure(caller: Caller, endpointUuid: string, body: CheckPatch): Promise<CheckState> {
      // Existence and ownership are answered before the body's values are judged (404 and 403 say more than a 400).
      const endpoint = await endpointForHealth(db, caller, endpointUuid);
      validatePatch(body);
      const agents = await tunnelsOf(presence, endpoint.uuid);
      return db.transaction(async (tx) => {
        const locked = await endpointForHealth(tx, caller, endpoint.uuid, { forUpdate: true });
        const current = await findHealthCheck(tx, locked.id, { forUpdate: true });
        const next = {
          enabled: body.enabled ?? current?.enabled ?? false,
          path: body.path === undefined ? (current?.path ?? null) : body.path || null,
          interval_seconds: body.interval_seconds ?? current?.interval_seconds ?? null,
        };
        const rawOnly = rawOnlyProtocol(locked, agents);
        if (body.enabled === true && rawOnly !== null) {
          throw fail.invalid_request(`Health checks are supported for HTTP endpoints only; this endpoint serves ${rawOnly}`, { field: 'id', reason: 'health checks are supported for HTTP endpoints only' });
        }
        const saved = await saveHealthCheck(tx, locked.id, next);
        return { endpoint: locked, check: saved, rawOnly };
      });
    },

    /** Live agents, uptimes and latency (zero while checks are off), the last probe and the recent ones. */
    async report(caller: Caller, endpointUuid: string): Promise<HealthReport> {
      const endpoint = await endpointForHealth(db, caller, endpointUuid);
      // One snapshot for the settings, the recent probes and the last verdict: a probe recorded between two separate
      // reads would show as last_check while recent_checks still lacked it.
      const [{ check, recent, last }, agents] = await Promise.all([
        db.transaction(async (tx) => {
          await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
          const check = await findHealthCheck(tx, endpoint.id);
          const recent = await recentProbes(tx, endpoint.id);
          return { check, recent, last: check?.enabled ? await lastCheck(tx, endpoint.id) : null };
        }),
        tunnelsOf(presence, endpoint.uuid),
      ]);
      const enabled = check?.enabled ?? false;
      const aggregates = enabled ? await uptimes.get(endpoint.id, () => uptimeAggregates(db, endpoint.id)) : { uptime_24h: 0, uptime_7d: 0, uptime_30d: 0, avg_latency_ms: 0 };
      return { endpointId: endpoint.id, hasActiveAgent: agents.length > 0, ...aggregates, last, recent };
    },
  };
}
