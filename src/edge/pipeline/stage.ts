// The shape of the edge's per-request pipeline: a stage is compiled from an endpoint's config when the config
// enters the cache (or is absent when the endpoint does not use it), then run per request with a small context.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Clock } from '../../shared/clock.ts';
import type { Logger } from '../../shared/log.ts';
import type { SecretBox } from '../../shared/secrets.ts';
import type { RegistrationRequest } from '../../shared/registration.ts';
import type { EndpointConfig } from '../../shared/snapshot.ts';
import type { SessionKeys } from '../auth/session.ts';
import type { CredentialUse } from '../credential-use.ts';
import type { AuthOutcome } from '../metrics.ts';
import type { RateLimitDeps } from '../rate-limit/deps.ts';
import type { StageMemory } from './stage-memory.ts';
import type { Span } from '../../shared/tracing.ts';

/**
 * What may serve a request, as a routing rule chose it: some of the endpoint's agents, or an origin URL. No
 * selector means the endpoint's default (its origin URL when it has one, else any of its agents).
 */
export interface AgentSelector {
  agentId?: string;
  /** The agent must carry every one of these tags (lower-case). */
  tags?: readonly string[];
  /** Forward to this origin URL instead of agents (set without agentId and tags). */
  origin?: string;
  /** The routing rule that chose this selector, for logs and capture. */
  rule?: string;
}

/** What a stage sees of one request. Fields are filled once by the server; stages add decisions to it. */
export interface RequestContext {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly endpoint: EndpointConfig;
  /** The request method, upper-case. */
  readonly method: string;
  /**
   * The host the request names (its Host, or an absolute-form target's authority), validated: lower-case, no port,
   * no final dot, IPv6 literals in brackets (src/edge/http/host.ts). The endpoint was looked up by it.
   */
  readonly host: string;
  /** `host` plus the port the visitor named, if any: the Host (`:authority`) the agent or origin receives. */
  readonly authority: string;
  /**
   * The normalised path (percent-decoded unreserved characters, dot segments and duplicate slashes resolved),
   * without the query: what every stage judges and what the agent receives.
   */
  readonly path: string;
  /** The raw query string without "?", or "". */
  readonly query: string;
  /** The visitor's address, from the socket (or a trusted proxy's header). */
  readonly clientIp: string;
  readonly secure: boolean;
  /**
   * Set by the auth stage when it admits a visitor: who they proved to be. The rbac stage maps it to a client.
   * Absent: mode none, or no stage authenticated the visitor.
   */
  visitor?: VisitorIdentity;
  /** Set by routing: the agents (or the origin) that may serve this request. */
  selector?: AgentSelector;
  /** Headers to set on the forwarded request (identity, claims), after the visitor's copies are stripped. */
  readonly upstreamHeaders: Record<string, string>;
  /**
   * Visitor fields not to forward (lower-case, hyphenated; any spelling CGI reads as the same is dropped too): the
   * credential a stage consumed, the names a stage owns on this endpoint. Replaced, never mutated: stages share
   * compiled arrays. Absent: none.
   */
  dropHeaders?: readonly string[];
  /** Cookies a stage consumed (token mode's, the login session's): left out of the forwarded Cookie field. */
  dropCookie?: string | readonly string[];
  /** The request body, when a stage had to read it whole (webhook verification): forwarded instead of the stream. */
  body?: Buffer;
  /** Set by the rate-limit stage when a rule's condition looked the visitor's country up (null: unknown); for capture. */
  country?: string | null;
  /** Set by the rbac stage when the visitor is one of the endpoint's RBAC clients; for capture. */
  rbacClientId?: number;
  /**
   * A health probe whose signature the edge verified (src/shared/health-probe.ts): it skips rate limits and visitor
   * auth and is not captured as visitor traffic (docs/health-checks.md).
   */
  readonly probe?: boolean;
  /** The stage that answered the request itself (refused it, redirected it), by name; absent: none did. */
  decidedBy?: string;
  /** The request's span (src/edge/pipeline/trace.ts) when tracing is on; absent otherwise. */
  span?: Span;
}

/** Who the auth stage admitted a visitor as (docs/rbac.md maps each kind to an RBAC client). */
export type VisitorIdentity =
  /** A basic-auth user or token; `clientId` set when the credential is an RBAC client's. */
  | { kind: 'basic' | 'token'; name: string; clientId?: number }
  /** An OAuth/OIDC login session: the endpoint's provider id (decimal), the subject, and the e-mail when verified. */
  | { kind: 'session'; provider: string; subject: string; email: string | null };

/** `next` continues the pipeline; `done` means the stage answered the request itself. */
export type Verdict = 'next' | 'done';

export interface Stage {
  /** The stage's config id, also its module's file name (src/edge/stages/<name>.ts). */
  readonly name: string;
  run(ctx: RequestContext): Verdict | Promise<Verdict>;
}

/** What stages may need of the edge itself, beyond the endpoint's config. */
export interface StageDeps {
  /** The HTTPS port visitors reach this edge on (redirects name it; read per use, as it is known only after listen). */
  publicHttpsPort(): number;
  /**
   * The node's SecretBox (EDGE_SECRET_KEY): opens sealed webhook secrets, derives the visitor token digest key.
   * Absent outside a running edge: stages that need it refuse to compile.
   */
  secrets?: SecretBox;
  logger?: Logger;
  /**
   * Where stages read the time (token and session expiry, form tokens, failure budgets, caches' lifetimes). Absent:
   * the wall clock; a test passes a clock it sets, and moves time instead of waiting for it.
   */
  clock?: Clock;
  /** Counts a visitor-auth stage's outcome for one request (EdgeMetrics.authOutcome); read per use. */
  authOutcome?: (endpoint: string, stage: string, outcome: AuthOutcome) => void;
  /** Where accepted visitor credentials are noted for the heartbeat's credential_use. */
  credentialUse?: CredentialUse;
  /** State stages keep across recompiles while what it derives from is unchanged; absent: rebuilt at each compile. */
  memory?: StageMemory;
  /** EDGE_ORIGIN_ALLOW_PRIVATE: JWKS fetches may reach loopback and private addresses (development). */
  allowPrivate?: boolean;
  /** JWKS fetching (src/edge/stages/jwt.ts): timeout, refetch cooldown for unknown kids, key set lifetime, in ms. */
  jwks?: { timeoutMs: number; cooldownMs: number; cacheMaxAgeMs: number };
  /**
   * OAuth/OIDC login sessions (src/edge/auth/session.ts): the HMAC keys (EDGE_SESSION_KEYS, else derived from
   * EDGE_SECRET_KEY) and the lifetime when an endpoint sets none (EDGE_SESSION_TTL_SECONDS). Absent: keys derived
   * from `secrets`, a day.
   */
  sessions?: { keys: SessionKeys; ttlSeconds: number };
  /**
   * The control API's public registration route (POST REGISTRATION_PATH, src/shared/registration.ts), as the edge
   * reaches it (EDGE_CONTROL_URL or the embedded control port): its status and parsed JSON body; rejects when the
   * control plane cannot be reached. Absent: the registration pages (src/edge/stages/register.ts) answer 503.
   */
  register?: (body: RegistrationRequest) => Promise<{ status: number; body: unknown }>;
  /** Resolves true once this edge has applied config version `version` (at once if it has), false after `timeoutMs`. */
  applied?: (version: number, timeoutMs: number) => Promise<boolean>;
  /**
   * Firewall rate limits (src/edge/stages/rate-limit.ts): clock, GeoIP databases, the cluster store, the per-rule
   * key bound, where rule matches are reported. Absent: wall clock, shipped databases, local counts only.
   */
  rateLimits?: RateLimitDeps;
}

/** Stage deps for compiling outside a running edge (unit tests, tools): redirects name HTTPS's default port. */
export const DEFAULT_STAGE_DEPS: StageDeps = { publicHttpsPort: () => 443 };

/**
 * Builds a stage from an endpoint's config, or returns null when the endpoint does not use it (zero cost per
 * request). `deps` is absent only outside a running edge; stages that need it fall back to DEFAULT_STAGE_DEPS.
 */
export interface StageFactory {
  readonly id: string;
  /**
   * A security stage (client certificates, visitor auth, JWT, webhook verification): when it fails to compile, the
   * endpoint answers 503 `auth_unavailable` until a config compiles (fail closed, src/edge/compile.ts), rather than
   * keeping the previous config in force, which would leave a tightening (none → basic) silently unapplied.
   */
  readonly failClosed?: boolean;
  /**
   * What a verified health probe (src/shared/health-probe.ts) does at this stage (docs/health-checks.md): `skips` it
   * (the probe is the platform's own GET or HEAD of the configured path: not counted by rate limits, past the
   * visitor-auth family, so protected endpoints can be monitored) or `runs` it (routing, and what only answers paths
   * a probe never asks for), so it sees what visitors see there. Required: every new stage decides, in its own file.
   */
  readonly healthProbe: 'skips' | 'runs';
  compile(endpoint: EndpointConfig, deps?: StageDeps): Stage | null;
}

/** The time as a stage reads it: `deps.clock`, else the wall clock; milliseconds since the epoch. */
export function clockOf(deps: StageDeps): () => number {
  const clock = deps.clock;
  return clock === undefined ? Date.now : () => clock.now();
}

/**
 * The trace of a request whose span is recording, for its log lines (`trace_id`; pino leaves an undefined field out).
 * Passed by hand rather than through an async-local scope read by every logger: on Node 20 entering one turns on
 * async hooks for the rest of the process's life, every role in it included (docs/operations.md "Traces").
 */
export function traceIdOfRequest(ctx: RequestContext): string | undefined {
  return ctx.span === undefined ? undefined : ctx.span.spanContext().traceId;
}
