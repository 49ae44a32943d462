// The RBAC stage (`rbac`): after visitor auth, JWT and webhook verification, before routing. The visitor the auth stage
// admitted is mapped to one of the endpoint's clients, and the client's roles decide the method and path (the policy
// compiled once per snapshot in ../rbac/policy.ts; docs/rbac.md "Enforcement at the edge").
//
// Who is a client: a basic user or token with `client_id` (the auth stage checked the credential), or a login session
// whose provider and subject are a linked identity of a client, else whose verified e-mail is a client's e-mail.
// Anyone else (settings users and tokens, API keys, an unknown login, no visitor auth at all) is refused 403.
// Allowed: the deciding role's headers, X-Edge-Rbac-Client and X-Edge-Rbac-Roles set on the forwarded request (visitor
// copies are stripped by the X-Edge-* rule, src/shared/edge-headers.ts; those of every role's headers as dropHeaders). A role's rate_limit_rps is a token bucket
// per client and role on this edge, kept across recompiles while the client's roles and rates are unchanged.
import type { IncomingHttpHeaders } from 'node:http';
import { headerKey } from '../../shared/edge-headers.ts';
import type { EndpointConfig } from '../../shared/snapshot.ts';
import { asHeaderValue } from '../http/credentials.ts';
import { formDecode } from '../match/query.ts';
import { sendEdgeError } from '../http/pages.ts';
import { dropAppender } from '../http/proxy-headers.ts';
import { LazyLru } from '../pipeline/lazy-cache.ts';
import { clockOf, DEFAULT_STAGE_DEPS, type RequestContext, type StageDeps, type StageFactory, type VisitorIdentity } from '../pipeline/stage.ts';
import { compilePolicy, decide, identityKey, rbacEnabled, type CompiledClient, type CompiledPolicy } from '../rbac/policy.ts';

/** The fields the agent receives naming the client and its roles (edge-owned: the X-Edge-* namespace). */
export const RBAC_CLIENT_HEADER = 'x-edge-rbac-client';
export const RBAC_ROLES_HEADER = 'x-edge-rbac-roles';

/** Rate buckets kept per endpoint on this edge (client × role); the least recently used go first. */
export const RATE_LIMITED_CLIENTS = 10_000;

/** The edge's registration page for an endpoint (src/edge/stages/register.ts serves it). */
export function registrationHref(endpoint: EndpointConfig): string {
  return `/register?endpoint=${encodeURIComponent(endpoint.uuid)}`;
}

export interface RbacStageOptions {
  /** Milliseconds since the epoch; a test may move it. */
  now?: () => number;
}

/**
 * A token bucket of `rps` tokens refilled at `rps` a second: a client may send a burst of one second's worth, then
 * `rps` a second. `version` is what it was built for (the client's roles and rates): a change starts it full again.
 */
interface Bucket {
  version: string;
  tokens: number;
  at: number;
}

/**
 * Fields and the query parameter through which frameworks let a request name another method than its own: Express's
 * method-override, Rack, Laravel, Symfony, ASP.NET, Spring's HiddenHttpMethodFilter (mostly for POST). The edge
 * forwards them, so it judges them: every method they name must be allowed too (docs/rbac.md "Methods").
 */
export const METHOD_OVERRIDE_HEADERS = ['x-http-method-override', 'x-http-method', 'x-method-override'] as const;
const OVERRIDE_KEYS: ReadonlySet<string> = new Set(METHOD_OVERRIDE_HEADERS);
const METHOD_PARAM = '_method';
const NONE: readonly string[] = [];

/**
 * A query parameter name as the frameworks that honour `_method` read it: form-decoded (Node's querystring,
 * URLSearchParams, Python's parse_qs and Rack all read `%5Fmethod` and `_m%65thod` as `_method`), then as PHP
 * reads it into $_GET for Symfony and Laravel (leading spaces dropped, ` `, `.` and `[` as `_`).
 */
function methodParamName(raw: string): string {
  let name = raw.indexOf('%') === -1 && raw.indexOf('+') === -1 ? raw : formDecode(raw);
  if (name.charCodeAt(0) === 32 /* space */) name = name.trimStart();
  return /[ .[]/.test(name) ? name.replace(/[ .[]/g, '_') : name;
}

/** Adds the methods every `_method` parameter of a raw query names, in any spelling a framework reads as it. */
function addParamMethods(out: string[] | undefined, query: string): string[] | undefined {
  let start = 0;
  while (start < query.length) {
    // `;` separates parameters too for older parse_qs and some servlet containers: judged as a separator as well.
    let end = start;
    while (end < query.length && query.charCodeAt(end) !== 38 /* & */ && query.charCodeAt(end) !== 59 /* ; */) end++;
    let eq = query.indexOf('=', start);
    if (eq === -1 || eq > end) eq = end;
    if (eq > start && methodParamName(query.slice(start, eq)) === METHOD_PARAM) out = addMethods(out, formDecode(query.slice(Math.min(eq + 1, end), end)));
    start = end + 1;
  }
  return out;
}

/** Adds each item of an override field's value, upper-cased, to `out` (made on the first one). */
function addMethods(out: string[] | undefined, value: string): string[] | undefined {
  // Node joins repeated fields with ", "; frameworks read the first item or the whole: each item is judged.
  for (const item of value.split(',')) {
    const m = item.trim().toUpperCase();
    if (m !== '') (out ??= []).push(m);
  }
  return out;
}

/**
 * The methods a request's override fields and `_method` query parameter name, upper-cased; empty when none. A module
 * function with no closure: it runs on every request of an RBAC endpoint, almost always finding nothing, and a named
 * closure made per call costs a property definition under tsx (esbuild keepNames) besides its allocation.
 */
export function overriddenMethods(headers: IncomingHttpHeaders, query: string): readonly string[] {
  let out: string[] | undefined;
  // By folded name (headerKey): WSGI, Rack and PHP read `X_HTTP_Method_Override` as HTTP_X_HTTP_METHOD_OVERRIDE and
  // act on it (the CVE-2024-45614 class), so every spelling Node hands over lower-cased is judged.
  for (const name in headers) {
    if (name.charCodeAt(0) !== 120 /* x */ || name.length < 13 || !OVERRIDE_KEYS.has(headerKey(name))) continue;
    const v = headers[name];
    if (v === undefined) continue;
    if (typeof v === 'string') out = addMethods(out, v);
    else for (const item of v) out = addMethods(out, item);
  }
  // Any `%` or `+` may spell `_method` (`%5Fmethod`, `_m%65thod`); without either, the plain name must appear.
  if (query !== '' && (query.includes('method') || query.includes('%'))) out = addParamMethods(out, query);
  return out ?? NONE;
}

/** The client a visitor is, or undefined when the visitor is none of the endpoint's clients. */
function clientOf(policy: CompiledPolicy, visitor: VisitorIdentity | undefined): CompiledClient | undefined {
  if (visitor === undefined) return undefined;
  if (visitor.kind === 'session') {
    const linked = policy.byIdentity.get(identityKey(visitor.provider, visitor.subject));
    if (linked !== undefined) return linked;
    return visitor.email === null ? undefined : policy.byEmail.get(visitor.email.toLowerCase());
  }
  return visitor.clientId === undefined ? undefined : policy.byId.get(visitor.clientId);
}

/** The stage with test hooks (a clock). */
export function rbacStage(options: RbacStageOptions = {}): StageFactory {
  return {
    id: 'rbac',
    healthProbe: 'skips',
    failClosed: true,
    compile(endpoint, deps: StageDeps = DEFAULT_STAGE_DEPS) {
      const rbac = endpoint.rbac;
      if (!rbacEnabled(rbac)) return null;
      const policy = compilePolicy(rbac);
      const now = options.now ?? clockOf(deps);
      const makeBuckets = () => new LazyLru<string, Bucket>({ max: RATE_LIMITED_CLIENTS });
      const buckets = deps.memory ? deps.memory.keep('rbac:rate', endpoint.uuid, 'v1', makeBuckets) : makeBuckets();
      const register = rbac.self_registration.enabled ? registrationHref(endpoint) : null;
      const owned = policy.headerNames;
      const dropOwned = dropAppender(owned);
      // Precomputed per client: the identity fields (sent as is on every request the client makes).
      const identity = new Map<number, string>();
      for (const c of policy.byId.values()) identity.set(c.id, asHeaderValue(c.identifier));

      /** Seconds until the client may send again under `rps`, or 0 when this request is within it (and counted). */
      const overRate = (client: CompiledClient, roleId: number, rps: number): number => {
        const key = `${client.id}:${roleId}`;
        const t = now();
        let b = buckets.get(key);
        if (b === undefined || b.version !== client.rateVersion) {
          b = { version: client.rateVersion, tokens: rps, at: t };
          buckets.set(key, b);
        } else {
          b.tokens = Math.min(rps, b.tokens + ((t - b.at) * rps) / 1000);
          b.at = t;
        }
        if (b.tokens < 1) return Math.max(1, Math.ceil((1 - b.tokens) / rps));
        b.tokens -= 1;
        return 0;
      };

      const notAClient = (ctx: RequestContext): 'done' => {
        const link = register !== null && ctx.visitor?.kind === 'session' ? { href: register, text: 'Register as a client of this endpoint' } : undefined;
        sendEdgeError(ctx.res, 'rbac_not_a_client', ctx.req.headers.accept, undefined, link);
        return 'done';
      };

      return {
        name: 'rbac',
        run(ctx) {
          const client = clientOf(policy, ctx.visitor);
          if (client === undefined) return notAClient(ctx);
          // For capture: whose request this was, refused or not (a session names no client id of its own).
          ctx.rbacClientId = client.id;
          if (!client.active) {
            sendEdgeError(ctx.res, 'rbac_client_inactive', ctx.req.headers.accept);
            return 'done';
          }
          const also = overriddenMethods(ctx.req.headers, ctx.query);
          const d = decide(client, ctx.method, ctx.path, also);
          if (!d.allowed) {
            const why = d.role === null ? 'no role of this client allows it' : `role ${JSON.stringify(d.role.name)} denies it`;
            const overriding = also.length === 0 ? '' : ` (overridden as ${also.join(', ')})`;
            sendEdgeError(ctx.res, 'rbac_forbidden', ctx.req.headers.accept, `${ctx.method}${overriding} ${ctx.path}: ${why}`);
            return 'done';
          }
          const role = d.role;
          if (role.rps > 0) {
            const wait = overRate(client, role.id, role.rps);
            if (wait > 0) {
              ctx.res.setHeader('retry-after', String(wait));
              sendEdgeError(ctx.res, 'rbac_rate_limited', ctx.req.headers.accept, `role ${JSON.stringify(role.name)} allows ${role.rps} requests a second`);
              return 'done';
            }
          }
          const h = ctx.upstreamHeaders;
          for (const [name, value] of role.headers) h[name] = value;
          if (owned.length > 0) ctx.dropHeaders = dropOwned(ctx.dropHeaders);
          h[RBAC_CLIENT_HEADER] = identity.get(client.id)!;
          h[RBAC_ROLES_HEADER] = client.roleNames;
          return 'next';
        },
      };
    },
  };
}

export const rbac: StageFactory = rbacStage();
