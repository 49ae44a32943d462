// The endpoint lifecycle API: create, list, get, delete, promote, dedicated ports, request capture, and the admin
// operations around them (ephemeral creation, pause). Every write publishes to the change feed in its transaction.
import { Type, type TLiteral, type TUnion } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';
import { EdgeError, fail } from '../../shared/errors.ts';
import type { Plan } from '../../shared/plans.ts';
import { Nullable, parseInt64, Strict, Timestamp, Uuid } from '../../shared/schema.ts';
import { findUserById } from '../../store/accounts.ts';
import { isUniqueViolation, type Queryable } from '../../store/db.ts';
import { findUsableDomain, type DomainRow } from '../../store/domains.ts';
import * as store from '../../store/endpoints.ts';
import { CAPTURE_LEVELS, ENDPOINT_STATUSES, type CaptureLevel, type EndpointRow } from '../../store/endpoints.ts';
import { endpointAccountPlan, endpointForCaller, readableEndpoint, type PlanAccount } from '../endpoint-access.ts';
import { requireJsonContentType, type ControlApp, type ControlDeps } from '../http.ts';
import { canonicalSubdomain, generateSubdomain, hostnameFor, MAX_HOSTNAME_LENGTH, ROOT_SUBDOMAIN } from '../subdomains.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';

// ---------------------------------------------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------------------------------------------

const literals = <T extends readonly string[]>(values: T) => Type.Union(values.map((v) => Type.Literal(v))) as unknown as TUnion<TLiteral<T[number]>[]>;

/** The Endpoint resource of SPEC.md, plus the capture settings SPEC.md says are readable on Get. */
const EndpointView = Type.Object(
  {
    id: Type.Integer({ description: 'Internal numeric id; prefer uuid in API references' }),
    uuid: Uuid({ description: 'Stable identifier used in every endpoint URL' }),
    user_id: Type.Integer({ description: 'Owner' }),
    domain_id: Nullable(Type.Integer({ description: 'Domain anchoring the endpoint; null = the platform default domain' })),
    subdomain: Type.String({ description: '`@` means the root of the domain' }),
    hostname: Type.String({ description: 'Public FQDN' }),
    public_url: Type.String({ description: 'Same as hostname: a bare FQDN with no scheme' }),
    protocol: literals(['unified', 'http', 'tcp', 'udp'] as const),
    is_custom: Type.Boolean({ description: 'True when the subdomain was chosen by the user' }),
    status: literals(ENDPOINT_STATUSES),
    mtls_mode: literals(['disabled', 'optional', 'required'] as const),
    ephemeral: Type.Boolean(),
    last_active_at: Nullable(Timestamp({ description: 'Tracked for ephemeral endpoints only' })),
    dedicated_tcp_port: Nullable(Type.Integer()),
    dedicated_udp_port: Nullable(Type.Integer()),
    capture_enabled: Type.Boolean(),
    capture_level: Nullable(literals(CAPTURE_LEVELS)),
    origin_url: Nullable(Type.String({ description: 'Requests go to this origin instead of agents (PUT /v1/endpoints/{id}/origin)' })),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { description: 'Endpoint' },
);

/** SPEC.md's create response: a subset of the resource (no user_id, last_active_at or ports). */
const CreatedView = Type.Pick(EndpointView, [
  'id',
  'uuid',
  'subdomain',
  'hostname',
  'public_url',
  'protocol',
  'is_custom',
  'domain_id',
  'status',
  'mtls_mode',
  'created_at',
  'ephemeral',
  'updated_at',
]);

const AdminEndpointView = Type.Object({ ...EndpointView.properties, paused_at: Nullable(Timestamp({ description: 'Set while paused over plan limits' })) });

const IdParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }) });
const Port = Type.Integer({ minimum: 1024, maximum: 65535 });
const PortsBody = Strict({
  dedicated_tcp_port: Type.Optional(Nullable(Port)),
  dedicated_udp_port: Type.Optional(Nullable(Port)),
});
const PortsView = Type.Object({ ok: Type.Literal(true), dedicated_tcp_port: Nullable(Type.Integer()), dedicated_udp_port: Nullable(Type.Integer()) });

const Errors409 = { ...ErrorResponses, 409: ErrorBody };

function endpointView(e: EndpointRow) {
  return {
    id: e.id,
    uuid: e.uuid,
    user_id: e.user_id,
    domain_id: e.domain_id,
    subdomain: e.subdomain,
    hostname: e.hostname,
    public_url: e.hostname,
    protocol: e.protocol,
    is_custom: e.is_custom,
    status: e.status,
    mtls_mode: e.mtls_mode,
    ephemeral: e.ephemeral,
    last_active_at: iso(e.last_active_at),
    dedicated_tcp_port: e.dedicated_tcp_port,
    dedicated_udp_port: e.dedicated_udp_port,
    capture_enabled: e.capture_enabled,
    capture_level: e.capture_level,
    origin_url: e.origin_url,
    created_at: iso(e.created_at),
    updated_at: iso(e.updated_at),
  };
}

function createdView(e: EndpointRow) {
  const v = endpointView(e);
  return {
    id: v.id,
    uuid: v.uuid,
    subdomain: v.subdomain,
    hostname: v.hostname,
    public_url: v.public_url,
    protocol: v.protocol,
    is_custom: v.is_custom,
    domain_id: v.domain_id,
    status: v.status,
    mtls_mode: v.mtls_mode,
    created_at: v.created_at,
    ephemeral: v.ephemeral,
    updated_at: v.updated_at,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Listing parameters
// ---------------------------------------------------------------------------------------------------------------

const PAGE_SIZE_DEFAULT = 20;
const PAGE_SIZE_MAX = 100;

/**
 * page and page_size are forgiving: anything that is not a positive decimal integer falls back to the default,
 * as SPEC.md specifies for the other listings that say what happens (recent errors). A too-large page_size is
 * clamped; only a page beyond the resource-protection cap is an error, because it names data we will not scan.
 */
function lenientPositiveInt(value: string | undefined, fallback: number): number {
  if (value === undefined || !/^[0-9]{1,20}$/.test(value)) return fallback;
  const n = Number(value);
  return n >= 1 ? n : fallback;
}

const truthy = (value: string | undefined) => value === '1' || value === 'true';

// ---------------------------------------------------------------------------------------------------------------
// Quotas
// ---------------------------------------------------------------------------------------------------------------

type QuotaAccount = PlanAccount;

/** Takes the rows every quota-checked endpoint write locks, in the one order they all use (user, then account). */
async function lockQuotaHolders(tx: Queryable, userId: number, account: QuotaAccount): Promise<void> {
  if (!(await store.lockUserForQuota(tx, userId))) throw fail.not_found('User not found');
  if (account.kind === 'organization') await store.lockAccountForQuota(tx, account.id);
}

/**
 * The two endpoint quotas SPEC.md checks on create and on promote: the owner's permanent endpoints (in any account)
 * against the plan's permanent_endpoints, and an organization's permanent endpoints against organization_endpoints.
 * Call with the locks of lockQuotaHolders held. `plainText` gives promote's plain-text body (SPEC.md).
 */
async function checkEndpointQuota(tx: Queryable, userId: number, account: QuotaAccount, plan: Plan, plainText: boolean): Promise<void> {
  const refuse = (message: string, detail: Record<string, unknown>) =>
    plainText ? new EdgeError(403, 'quota_exceeded', message, detail, message) : fail.quota_exceeded(message, detail);
  const limit = plan.quotas.permanent_endpoints;
  const used = await store.countPermanentEndpoints(tx, userId);
  if (used >= limit) {
    throw refuse(`Permanent endpoint limit reached: ${used} of ${limit} (plan ${account.plan})`, { quota: 'permanent_endpoints', limit, used });
  }
  if (account.kind === 'organization') {
    const orgLimit = plan.quotas.organization_endpoints;
    const orgUsed = await store.countPermanentAccountEndpoints(tx, account.id);
    if (orgUsed >= orgLimit) {
      throw refuse(`Organization endpoint limit reached: ${orgUsed} of ${orgLimit} (plan ${account.plan})`, {
        quota: 'organization_endpoints',
        limit: orgLimit,
        used: orgUsed,
      });
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Routes
// ---------------------------------------------------------------------------------------------------------------

export function endpointRoutes(app: ControlApp, { db, config }: ControlDeps): void {
  app.post(
    '/v1/endpoints',
    {
      schema: {
        summary: 'Create an endpoint',
        description:
          'subdomain is honoured only when is_custom is true, the plan includes custom_subdomains and the caller owns the domain ' +
          '(a verified domain of the active account; the platform domain when domain_id is omitted); otherwise a word-word-word ' +
          'name is generated and is_custom is false. `@` claims the domain root and needs the strict domain owner (or an admin). ' +
          'The permanent-endpoint quota and the organization endpoint limit are checked first.',
        tags: ['endpoints'],
        body: Strict({
          subdomain: Type.Optional(Type.String({ maxLength: 253, description: 'One DNS label (lowercased), or `@` for the domain root' })),
          is_custom: Type.Optional(Type.Boolean()),
          domain_id: Type.Optional(Nullable(Type.Integer({ minimum: 1, description: 'A verified domain of the active account; omitted = platform domain' }))),
          protocol: Type.Optional(Type.Unknown({ deprecated: true, description: 'Retired: accepted and ignored (endpoints are unified)' })),
          region: Type.Optional(Type.Unknown({ deprecated: true, description: 'Retired: accepted and ignored (endpoints are region-less)' })),
        }),
        response: { 201: CreatedView, ...Errors409 },
      },
    },
    async (req, reply) => {
      const { caller } = req;
      caller.requirePermission('endpoints:write');
      let requested: string | null = null;
      if (req.body.subdomain !== undefined && req.body.subdomain !== '') {
        const check = canonicalSubdomain(req.body.subdomain);
        if (!check.ok) throw fail.invalid_request('Invalid subdomain format', check.reason);
        requested = check.subdomain;
      }
      const wantsCustom = req.body.is_custom === true && requested !== null;
      const domainId = req.body.domain_id ?? null;

      const endpoint = await db.transaction(async (tx) => {
        // Quota first (SPEC.md), under the locks that make count-then-insert safe against concurrent creates.
        await lockQuotaHolders(tx, caller.user.id, caller.account);
        await checkEndpointQuota(tx, caller.user.id, caller.account, caller.plan, false);

        let domain: DomainRow | null = null;
        if (domainId !== null) {
          domain = await findUsableDomain(tx, caller.account.id, domainId);
          if (!domain) throw fail.not_found('Domain not found', { domain_id: domainId });
        }
        const domainName = domain?.name ?? config.baseDomain;
        const base = { userId: caller.user.id, accountId: caller.account.id, domainId };

        // The root is the domain itself, so only its strict owner (the user who holds it, not any account member)
        // may claim it; nobody but an admin owns the platform domain. Refused even where the name would then be
        // ignored for want of the entitlement: asking for someone else's root is never silently rewritten.
        if (wantsCustom && requested === ROOT_SUBDOMAIN && !caller.isAdmin && domain?.user_id !== caller.user.id) {
          throw fail.forbidden('Only the domain owner may claim the domain root (@)', { subdomain: ROOT_SUBDOMAIN });
        }
        // Ownership is settled above (a usable domain is the account's own and verified; the platform domain is
        // everyone's to put custom names under); what remains is the entitlement, which downgrades silently.
        if (wantsCustom && caller.entitled('custom_subdomains')) {
          const hostname = hostnameFor(requested!, domainName);
          if (hostname.length > MAX_HOSTNAME_LENGTH) throw fail.invalid_request('Invalid subdomain format', `the hostname ${hostname} is longer than ${MAX_HOSTNAME_LENGTH} characters`);
          const row = await store.insertEndpoint(tx, { ...base, subdomain: requested!, hostname, isCustom: true });
          if (!row) throw fail.already_exists(`The hostname ${hostname} is already taken`, { hostname });
          return row;
        }
        return store.insertWithGeneratedName(tx, base, () => generateSubdomain(), (sub) => hostnameFor(sub, domainName));
      });
      return reply.status(201).header('location', `/v1/endpoints/${endpoint.uuid}`).send(createdView(endpoint));
    },
  );

  app.get(
    '/v1/endpoints',
    {
      schema: {
        summary: 'List endpoints, newest first',
        description:
          'Non-admins see the active account’s endpoints; admins see all and may filter by user_id. Ephemeral endpoints are ' +
          'included. page and page_size that are not positive integers fall back to their defaults; page_size above 100 is ' +
          'clamped; page × page_size beyond the resource-protection cap is 400 pagination_too_deep.',
        tags: ['endpoints'],
        querystring: Type.Object({
          page: Type.Optional(Type.String({ description: 'Integer, 1-indexed; default 1' })),
          page_size: Type.Optional(Type.String({ description: `Integer; default ${PAGE_SIZE_DEFAULT}, max ${PAGE_SIZE_MAX} (larger is clamped)` })),
          q: Type.Optional(Type.String({ maxLength: 253, description: 'Substring of the subdomain, matched literally' })),
          domain_id: Type.Optional(Type.Integer({ minimum: 1 })),
          status: Type.Optional(literals(ENDPOINT_STATUSES)),
          include_ephemeral: Type.Optional(Type.String({ description: 'Accepted for compatibility; ephemerals are always included' })),
          ephemeral_only: Type.Optional(Type.String({ description: '`1` returns only ephemeral endpoints' })),
          user_id: Type.Optional(Type.String({ description: 'Admins only: one owner’s endpoints. Ignored for everyone else.' })),
        }),
        response: {
          200: Type.Object({ items: Type.Array(EndpointView), total: Type.Integer(), page: Type.Integer(), page_size: Type.Integer() }),
          ...ErrorResponses,
        },
      },
    },
    async (req) => {
      const { caller } = req;
      caller.requirePermission('endpoints:read');
      const q = req.query;
      const page = lenientPositiveInt(q.page, 1);
      const pageSize = Math.min(lenientPositiveInt(q.page_size, PAGE_SIZE_DEFAULT), PAGE_SIZE_MAX);
      if (page * pageSize > config.listMaxOffset) {
        throw fail.pagination_too_deep(`page × page_size may not exceed ${config.listMaxOffset}`, { page, page_size: pageSize, max: config.listMaxOffset });
      }
      let userId: number | undefined;
      if (caller.isAdmin && q.user_id !== undefined && q.user_id !== '') {
        userId = parseInt64(q.user_id) ?? undefined;
        if (userId === undefined) throw fail.invalid_query('Invalid query parameter user_id', 'user_id must be a positive int64');
      }
      const { rows, total } = await store.listEndpoints(
        db,
        {
          accountId: caller.isAdmin ? undefined : caller.account.id,
          userId,
          domainId: q.domain_id,
          status: q.status,
          q: q.q?.toLowerCase(),
          ephemeralOnly: truthy(q.ephemeral_only),
        },
        pageSize,
        (page - 1) * pageSize,
      );
      return { items: rows.map(endpointView), total, page, page_size: pageSize };
    },
  );

  app.get(
    '/v1/endpoints/:id',
    {
      schema: {
        summary: 'Get an endpoint',
        description: 'Another account’s endpoint is 404, the same as a missing one; admins can fetch any.',
        tags: ['endpoints'],
        params: IdParams,
        response: { 200: EndpointView, ...ErrorResponses },
      },
    },
    async (req) => {
      return endpointView(await readableEndpoint(db, req.caller, req.params.id));
    },
  );

  app.delete(
    '/v1/endpoints/:id',
    {
      schema: {
        summary: 'Delete an endpoint',
        description: 'Removes the endpoint and everything attached to it and frees its hostname and dedicated ports. Edges drop it through the change feed.',
        tags: ['endpoints'],
        params: IdParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...ErrorResponses },
      },
    },
    async (req, reply) => {
      req.caller.requirePermission('endpoints:delete');
      await db.transaction(async (tx) => {
        const endpoint = await endpointForCaller(tx, req.caller, req.params.id, { forUpdate: true });
        await store.deleteEndpoint(tx, endpoint);
      });
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/v1/endpoints/:id/promote',
    {
      schema: {
        summary: 'Promote an ephemeral endpoint to permanent',
        description:
          'No body (or {}). Clears the ephemeral flag, the device fingerprint and idle tracking; the endpoint then counts against ' +
          'the permanent quota. Transactional with row locks on the owner and the endpoint, so concurrent creates and promotes ' +
          'cannot exceed the quota. Over the quota the 403 body is a plain-text message naming the limit.',
        tags: ['endpoints'],
        params: IdParams,
        body: Strict({}),
        response: {
          200: Type.Object({ endpoint_id: Type.Integer(), uuid: Uuid(), ephemeral: Type.Literal(false) }),
          ...Errors409,
          // SPEC.md fixes a plain-text body for the quota refusal; the other 403s keep the uniform JSON body.
          403: {
            description: 'Missing permission or suspended account (JSON), or the permanent quota reached (plain text naming the limit)',
            content: {
              'application/json': { schema: ErrorBody },
              'text/plain': { schema: Type.String({ example: 'Permanent endpoint limit reached: 10 of 10 (plan pro)' }) },
            },
          },
        },
      },
    },
    async (req) => {
      const { caller } = req;
      caller.requirePermission('endpoints:update');
      // Unlocked read first: it answers 400/404 cheaply and tells which owner's row to lock. The owner never
      // changes, and the locked re-read below catches a concurrent delete.
      const seen = await endpointForCaller(db, caller, req.params.id);
      const promoted = await db.transaction(async (tx) => {
        const { account, plan } = await endpointAccountPlan(tx, caller, config.plans, seen.account_id);
        await lockQuotaHolders(tx, seen.user_id, account);
        const endpoint = await endpointForCaller(tx, caller, req.params.id, { forUpdate: true });
        if (!endpoint.ephemeral) throw fail.conflict('Endpoint is already permanent');
        await checkEndpointQuota(tx, endpoint.user_id, account, plan, true);
        return store.promoteEndpoint(tx, endpoint.id);
      });
      return { endpoint_id: promoted.id, uuid: promoted.uuid, ephemeral: false as const };
    },
  );

  app.put(
    '/v1/endpoints/:id/ports',
    {
      schema: {
        summary: 'Assign or clear dedicated TCP/UDP ports',
        description:
          'A port (1024-65535) is stored exactly as requested, never reassigned; null clears it; an omitted field keeps its ' +
          'current value. Assigning a new port needs the dedicated_ports entitlement, room under the plan’s dedicated_ports_max ' +
          '(0 = unlimited; each TCP or UDP port counts one across the owner’s endpoints) and the plan’s verification gate; ' +
          'the endpoint then turns `provisioning` until an edge has bound the port. Clearing ports is always allowed.',
        tags: ['endpoints'],
        params: IdParams,
        body: PortsBody,
        response: { 200: PortsView, ...Errors409 },
      },
    },
    async (req) => {
      const { caller } = req;
      caller.requirePermission('endpoints:update');
      const body = req.body;
      const seen = await endpointForCaller(db, caller, req.params.id);
      const { account, plan } = await endpointAccountPlan(db, caller, config.plans, seen.account_id);

      const wanted = (e: EndpointRow) => ({
        tcp: body.dedicated_tcp_port !== undefined ? body.dedicated_tcp_port : e.dedicated_tcp_port,
        udp: body.dedicated_udp_port !== undefined ? body.dedicated_udp_port : e.dedicated_udp_port,
      });
      const isNew = (e: EndpointRow) => {
        const w = wanted(e);
        return (w.tcp !== null && w.tcp !== e.dedicated_tcp_port) || (w.udp !== null && w.udp !== e.dedicated_udp_port);
      };

      // Gates apply to taking a new port only: an account that lost the entitlement can still release its ports.
      if (isNew(seen)) {
        if (!plan.entitlements.dedicated_ports) {
          throw fail.entitlement_required(`Plan "${account.plan}" does not include dedicated_ports`, { feature: 'dedicated_ports' });
        }
        // Admins are exempt: they are the ones who verify users, and act on others' behalf.
        const unmet = caller.isAdmin ? undefined : (plan.verification_gates.dedicated_ports ?? []).find((flag) => !caller.user[flag]);
        if (unmet) {
          const message = `Dedicated ports need ${unmet.replace(/_/g, ' ')} on your user before they can be assigned`;
          throw new EdgeError(403, 'verification_required', message, undefined, {
            error: 'verification_required',
            gate_type: unmet,
            feature: 'dedicated_ports',
            message,
          });
        }
      }

      try {
        const updated = await db.transaction(async (tx) => {
          // The owner's row serialises port-count checks across their endpoints; the endpoint's row this write.
          if (!(await store.lockUserForQuota(tx, seen.user_id))) throw fail.not_found('Endpoint not found');
          const endpoint = await endpointForCaller(tx, caller, req.params.id, { forUpdate: true });
          const next = wanted(endpoint);
          const assigning = isNew(endpoint);
          const max = plan.quotas.dedicated_ports_max;
          if (assigning && max > 0) {
            const total = (await store.countDedicatedPorts(tx, endpoint.user_id, endpoint.id)) + (next.tcp !== null ? 1 : 0) + (next.udp !== null ? 1 : 0);
            if (total > max) {
              throw fail.quota_exceeded(`Dedicated port limit reached: ${total} of ${max} (plan ${account.plan})`, { quota: 'dedicated_ports_max', limit: max, requested: total });
            }
          }
          // A newly bound port is not serving until an edge has opened its listener; the worker's port activator
          // turns the endpoint active once heartbeats show it bound. With no ports left there is nothing to provision.
          let status = endpoint.status;
          if (assigning) status = 'provisioning';
          else if (status === 'provisioning' && next.tcp === null && next.udp === null) status = 'active';
          return store.setDedicatedPorts(tx, endpoint.id, { ...next, status });
        });
        return { ok: true as const, dedicated_tcp_port: updated.dedicated_tcp_port, dedicated_udp_port: updated.dedicated_udp_port };
      } catch (err) {
        // The unique indexes are the arbiter; a port taken between our read and our write lands here too.
        for (const [proto, field] of [['tcp', 'dedicated_tcp_port'], ['udp', 'dedicated_udp_port']] as const) {
          if (isUniqueViolation(err, `endpoints_${field}_key`)) {
            throw fail.conflict(`${proto.toUpperCase()} port ${body[field]} is in use by another endpoint`, { [field]: body[field] });
          }
        }
        throw err;
      }
    },
  );

  app.put(
    '/v1/endpoints/:id/settings/capture',
    {
      preValidation: requireJsonContentType,
      schema: {
        summary: 'Set request capture',
        description:
          'A full write: capture_enabled is false when omitted; capture_level `full`, `metadata` or `off` (empty or omitted ' +
          'clears it) is advisory, except that `off` also turns capture_enabled off. 200 with an empty body. A paused ' +
          'endpoint is read-only (409 quota_paused).',
        tags: ['endpoints'],
        params: IdParams,
        body: Strict({
          capture_enabled: Type.Optional(Type.Boolean()),
          capture_level: Type.Optional(Type.String({ description: '`full`, `metadata`, `off`, or empty to clear' })),
        }),
        response: { 200: Type.Null({ description: 'Empty body' }), ...Errors409, 415: ErrorBody },
      },
    },
    async (req, reply) => {
      const level = req.body.capture_level ?? '';
      if (level !== '' && !(CAPTURE_LEVELS as readonly string[]).includes(level)) {
        throw fail.invalid_request('Invalid capture_level. Supported: full, metadata, off', { capture_level: level });
      }
      req.caller.requirePermission('endpoints:update');
      const capture = { enabled: level === 'off' ? false : (req.body.capture_enabled ?? false), level: level === '' ? null : (level as CaptureLevel) };
      await db.transaction(async (tx) => {
        const endpoint = await endpointForCaller(tx, req.caller, req.params.id, { writable: true });
        await store.setCapture(tx, endpoint.id, capture);
      });
      // SPEC.md: 200 with an empty body. send() without a payload skips the serializer, which would write "null".
      return (reply as FastifyReply).status(200).send();
    },
  );

  // ---- Admin ----------------------------------------------------------------------------------------------------

  app.post(
    '/v1/endpoints/ephemeral',
    {
      schema: {
        summary: 'Create an ephemeral endpoint in the active account (the agent one-shot flow)',
        description:
          'What an edge calls, with the agent’s own API key, when an agent connects without naming an endpoint. The endpoint has a ' +
          'generated name on the platform domain, counts against no quota until promoted, and is removed by the janitor once its ' +
          'agents have been gone for the idle window.',
        tags: ['endpoints'],
        body: Strict({ device_fingerprint: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })) }),
        response: { 201: EndpointView, ...ErrorResponses },
      },
    },
    async (req, reply) => {
      req.caller.requirePermission('endpoints:write');
      // The endpoint exists to carry this key's agent, so the key must be allowed to attach one (as edges check).
      req.caller.requirePermission('tunnels:connect');
      const endpoint = await db.transaction((tx) =>
        store.createEphemeralEndpoint(tx, {
          userId: req.caller.user.id,
          accountId: req.caller.account.id,
          deviceFingerprint: req.body.device_fingerprint ?? null,
          baseDomain: config.baseDomain,
          generateSubdomain: () => generateSubdomain(),
        }),
      );
      return reply.status(201).header('location', `/v1/endpoints/${endpoint.uuid}`).send(endpointView(endpoint));
    },
  );

  app.post(
    '/v1/admin/endpoints/ephemeral',
    {
      schema: {
        summary: 'Create an ephemeral endpoint for a user (as an agent’s one-shot flow does)',
        description: 'In the user’s personal account, on the platform domain, with a generated name. No quota applies until it is promoted.',
        tags: ['admin'],
        body: Strict({ user_id: Type.Integer({ minimum: 1 }), device_fingerprint: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })) }),
        response: { 201: EndpointView, ...ErrorResponses },
      },
    },
    async (req, reply) => {
      req.caller.requireAdmin();
      const user = await findUserById(db, req.body.user_id);
      if (!user) throw fail.not_found('User not found');
      const endpoint = await db.transaction((tx) =>
        store.createEphemeralEndpoint(tx, {
          userId: user.id,
          accountId: user.personal_account_id,
          deviceFingerprint: req.body.device_fingerprint ?? null,
          baseDomain: config.baseDomain,
          generateSubdomain: () => generateSubdomain(),
        }),
      );
      return reply.status(201).header('location', `/v1/endpoints/${endpoint.uuid}`).send(endpointView(endpoint));
    },
  );

  for (const [action, paused] of [['pause', true], ['unpause', false]] as const) {
    app.post(
      `/v1/admin/endpoints/:id/${action}`,
      {
        schema: {
          summary: paused ? 'Pause an endpoint over plan limits: its settings become read-only (409 quota_paused)' : 'Lift an endpoint’s pause',
          tags: ['admin'],
          params: IdParams,
          response: { 200: AdminEndpointView, ...ErrorResponses },
        },
      },
      async (req) => {
        req.caller.requireAdmin();
        const endpoint = await db.transaction(async (tx) => {
          const found = await endpointForCaller(tx, req.caller, req.params.id, { forUpdate: true });
          return store.setPaused(tx, found.id, paused);
        });
        return { ...endpointView(endpoint), paused_at: iso(endpoint.paused_at) };
      },
    );
  }
}
