// The endpoint lifecycle as domain operations: create (quota, domain, custom name), list, delete, promote, dedicated
// ports, capture, ephemeral creation and the admin pause. Each runs its own transaction; the store writes publish.
import { reservedDnsName } from '../../shared/config.ts';
import type { Plan } from '../../shared/plans.ts';
import { parseInt64 } from '../../shared/schema.ts';
import { findUserById } from '../../store/accounts.ts';
import { isUniqueViolation, type Queryable } from '../../store/db.ts';
import { findUsableDomain, type DomainRow } from '../../store/domains.ts';
import * as store from '../../store/endpoints.ts';
import { CAPTURE_LEVELS, type CaptureLevel, type EndpointRow, type EndpointStatus } from '../../store/endpoints.ts';
import type { Caller } from '../caller.ts';
import { endpointAccountPlan, endpointForCaller, type PlanAccount } from '../endpoint-access.ts';
import { fail, quotaExceededAsText, verificationRequired } from '../../shared/errors.ts';
import type { ControlDeps } from '../http.ts';
import { canonicalSubdomain, generateSubdomain, hostnameFor, MAX_HOSTNAME_LENGTH, ROOT_SUBDOMAIN } from '../subdomains.ts';

export const PAGE_SIZE_DEFAULT = 20;
export const PAGE_SIZE_MAX = 100;

export interface CreateEndpointInput {
  subdomain?: string;
  is_custom?: boolean;
  domain_id?: number | null;
  tags?: string[];
}

export interface ListEndpointsQuery {
  page?: string;
  page_size?: string;
  q?: string;
  domain_id?: number;
  status?: EndpointStatus;
  ephemeral_only?: string;
  user_id?: string;
  tag?: string;
}

export interface PortsInput {
  dedicated_tcp_port?: number | null;
  dedicated_udp_port?: number | null;
}

export interface CaptureInput {
  capture_enabled?: boolean;
  capture_level?: string;
}

/**
 * page and page_size are forgiving: anything that is not a positive decimal integer falls back to the default,
 * as docs/api.md specifies for the other listings that say what happens (recent errors). A too-large page_size is
 * clamped; only a page beyond the resource-protection cap is an error, because it names data we will not scan.
 */
function lenientPositiveInt(value: string | undefined, fallback: number): number {
  if (value === undefined || !/^[0-9]{1,20}$/.test(value)) return fallback;
  const n = Number(value);
  return n >= 1 ? n : fallback;
}

const truthy = (value: string | undefined) => value === '1' || value === 'true';

/** Takes the rows every quota-checked endpoint write locks, in the one order they all use (user, then account). */
async function lockQuotaHolders(tx: Queryable, userId: number, account: PlanAccount): Promise<void> {
  if (!(await store.lockUserForQuota(tx, userId))) throw fail.not_found('User not found');
  if (account.kind === 'organization') await store.lockAccountForQuota(tx, account.id);
}

/**
 * The two endpoint quotas docs/api.md checks on create and on promote: the owner's permanent endpoints (in any account)
 * against the plan's permanent_endpoints, and an organization's permanent endpoints against organization_endpoints.
 * Call with the locks of lockQuotaHolders held. `plainText` gives promote's plain-text body (docs/api.md).
 */
async function checkEndpointQuota(tx: Queryable, userId: number, account: PlanAccount, plan: Plan, plainText: boolean): Promise<void> {
  const refuse = (message: string, detail: Record<string, unknown>) => (plainText ? quotaExceededAsText(message, detail) : fail.quota_exceeded(message, detail));
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

export function endpointService({ db, config }: Pick<ControlDeps, 'db' | 'config'>) {
  const newEphemeral = (tx: Queryable, userId: number, accountId: number, deviceFingerprint: string | undefined, tags?: readonly string[]) =>
    store.createEphemeralEndpoint(tx, {
      userId,
      accountId,
      deviceFingerprint: deviceFingerprint ?? null,
      tags,
      baseDomain: config.baseDomain,
      generateSubdomain: () => generateSubdomain(),
    });

  return {
    /** A permanent endpoint in the caller's account: a custom name when asked, allowed and entitled; otherwise generated. */
    async create(caller: Caller, input: CreateEndpointInput): Promise<EndpointRow> {
      let requested: string | null = null;
      if (input.subdomain !== undefined && input.subdomain !== '') {
        const check = canonicalSubdomain(input.subdomain);
        if (!check.ok) throw fail.invalid_request('Invalid subdomain format', { field: 'subdomain', reason: check.reason });
        requested = check.subdomain;
      }
      const wantsCustom = input.is_custom === true && requested !== null;
      const domainId = input.domain_id ?? null;

      return db.transaction(async (tx) => {
        // Quota first (docs/api.md), under the locks that make count-then-insert safe against concurrent creates.
        await lockQuotaHolders(tx, caller.user.id, caller.account);
        await checkEndpointQuota(tx, caller.user.id, caller.account, caller.plan, false);

        let domain: DomainRow | null = null;
        if (domainId !== null) {
          domain = await findUsableDomain(tx, caller.account.id, domainId);
          if (!domain) throw fail.not_found('Domain not found', { domain_id: domainId });
        }
        const domainName = domain?.name ?? config.baseDomain;
        const base = { userId: caller.user.id, accountId: caller.account.id, domainId, tags: input.tags };

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
          if (hostname.length > MAX_HOSTNAME_LENGTH) throw fail.invalid_request('Invalid subdomain format', { field: 'subdomain', reason: `the hostname ${hostname} is longer than ${MAX_HOSTNAME_LENGTH} characters` });
          if (reservedDnsName(config, hostname)) throw fail.already_exists(`The hostname ${hostname} is reserved for the platform's DNS`, { hostname });
          const row = await store.insertEndpoint(tx, { ...base, subdomain: requested!, hostname, isCustom: true });
          if (!row) throw fail.already_exists(`The hostname ${hostname} is already taken`, { hostname });
          return row;
        }
        return store.insertWithGeneratedName(tx, base, () => generateSubdomain(), (sub) => hostnameFor(sub, domainName));
      });
    },

    /** One page, newest first: the active account's endpoints, or (admins) everyone's, optionally one owner's. */
    async list(caller: Caller, q: ListEndpointsQuery): Promise<{ rows: EndpointRow[]; total: number; page: number; pageSize: number }> {
      const page = lenientPositiveInt(q.page, 1);
      const pageSize = Math.min(lenientPositiveInt(q.page_size, PAGE_SIZE_DEFAULT), PAGE_SIZE_MAX);
      if (page * pageSize > config.listMaxOffset) {
        throw fail.pagination_too_deep(`page × page_size may not exceed ${config.listMaxOffset}`, { page, page_size: pageSize, max: config.listMaxOffset });
      }
      let userId: number | undefined;
      if (caller.isAdmin && q.user_id !== undefined && q.user_id !== '') {
        userId = parseInt64(q.user_id) ?? undefined;
        if (userId === undefined) throw fail.invalid_query('Invalid query parameter user_id', { field: 'user_id', reason: 'must be a positive int64' });
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
          tag: q.tag,
        },
        pageSize,
        (page - 1) * pageSize,
      );
      return { rows, total, page, pageSize };
    },

    get(caller: Caller, uuid: string): Promise<EndpointRow> {
      return endpointForCaller(db, caller, uuid);
    },

    /** Removes the endpoint and everything attached to it; edges drop it through the change feed. */
    async remove(caller: Caller, uuid: string): Promise<void> {
      await db.transaction(async (tx) => {
        const endpoint = await endpointForCaller(tx, caller, uuid, { forUpdate: true });
        await store.deleteEndpoint(tx, endpoint);
      });
    },

    /** Ephemeral to permanent, within the quotas of the endpoint's account (a plain-text 403 over them). */
    async promote(caller: Caller, uuid: string): Promise<EndpointRow> {
      // Unlocked read first: it answers 400/404 cheaply and tells which owner's row to lock. The owner never
      // changes, and the locked re-read below catches a concurrent delete.
      const seen = await endpointForCaller(db, caller, uuid);
      return db.transaction(async (tx) => {
        const { account, plan } = await endpointAccountPlan(tx, caller, config.plans, seen.account_id);
        await lockQuotaHolders(tx, seen.user_id, account);
        const endpoint = await endpointForCaller(tx, caller, uuid, { forUpdate: true });
        if (!endpoint.ephemeral) throw fail.conflict('Endpoint is already permanent');
        await checkEndpointQuota(tx, endpoint.user_id, account, plan, true);
        return store.promoteEndpoint(tx, endpoint.id);
      });
    },

    /** Assigns or clears dedicated ports; taking a new one is gated by entitlement, verification and the plan's count. */
    async setPorts(caller: Caller, uuid: string, body: PortsInput): Promise<EndpointRow> {
      const seen = await endpointForCaller(db, caller, uuid);
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
          throw verificationRequired(unmet, 'dedicated_ports', `Dedicated ports need ${unmet.replace(/_/g, ' ')} on your user before they can be assigned`);
        }
      }

      try {
        return await db.transaction(async (tx) => {
          // The owner's row serialises port-count checks across their endpoints; the endpoint's row this write.
          if (!(await store.lockUserForQuota(tx, seen.user_id))) throw fail.not_found('Endpoint not found');
          const endpoint = await endpointForCaller(tx, caller, uuid, { forUpdate: true });
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

    /**
     * A full write of the capture settings. The level is judged before the permission, as it always was (a bad
     * level is a 400 even for a caller who may not write), so this operation checks endpoints:update itself.
     */
    async setCapture(caller: Caller, uuid: string, body: CaptureInput): Promise<void> {
      const level = body.capture_level ?? '';
      if (level !== '' && !(CAPTURE_LEVELS as readonly string[]).includes(level)) {
        throw fail.invalid_request('Invalid capture_level. Supported: full, metadata, off', { field: 'capture_level', reason: 'supported: full, metadata, off', capture_level: level });
      }
      caller.requirePermission('endpoints:update');
      const capture = { enabled: level === 'off' ? false : (body.capture_enabled ?? false), level: level === '' ? null : (level as CaptureLevel) };
      await db.transaction(async (tx) => {
        const endpoint = await endpointForCaller(tx, caller, uuid, { writable: true });
        await store.setCapture(tx, endpoint.id, capture);
      });
    },

    /** The agent one-shot flow: an ephemeral endpoint in the caller's account, for an agent of this key. */
    createEphemeral(caller: Caller, deviceFingerprint: string | undefined, tags?: readonly string[]): Promise<EndpointRow> {
      return db.transaction((tx) => newEphemeral(tx, caller.user.id, caller.account.id, deviceFingerprint, tags));
    },

    /** Replaces the endpoint's tags (validated by the schema: pattern, count, no duplicates). */
    setTags(caller: Caller, uuid: string, tags: readonly string[]): Promise<EndpointRow> {
      return db.transaction(async (tx) => {
        const endpoint = await endpointForCaller(tx, caller, uuid, { writable: true });
        return store.setTags(tx, endpoint.id, tags);
      });
    },

    /** An admin's ephemeral endpoint for a user, in the user's personal account. */
    async createEphemeralFor(userId: number, deviceFingerprint: string | undefined): Promise<EndpointRow> {
      const user = await findUserById(db, userId);
      if (!user) throw fail.not_found('User not found');
      return db.transaction((tx) => newEphemeral(tx, user.id, user.personal_account_id, deviceFingerprint));
    },

    setPaused(caller: Caller, uuid: string, paused: boolean): Promise<EndpointRow> {
      return db.transaction(async (tx) => {
        const found = await endpointForCaller(tx, caller, uuid, { forUpdate: true });
        return store.setPaused(tx, found.id, paused);
      });
    },
  };
}
