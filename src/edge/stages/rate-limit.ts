// The firewall rate-limit stage, first of the policy stages (docs/architecture.md): an endpoint's active rules compiled
// once; per request every matching rule counts it, and the first rule over its limit blocks (429) or throttles it.
//
// docs/rate-limits.md "Enforcement at the edge" is the user-facing account: keys, the estimate, headers, throttling
// bounds, cluster scope and its failure modes.
import type { IncomingHttpHeaders } from 'node:http';
import { parseIp, type IpWords } from '../../shared/match/cidr.ts';
import { compileRateLimitConditions, type RateLimitMatcher, type RateLimitRequestFacts } from '../../shared/rate-limit/conditions.ts';
import type { EndpointConfig, RateLimitConditionType, RateLimitRuleConfig } from '../../shared/snapshot.ts';
import { sendEdgeError } from '../http/pages.ts';
import { cookieValues, hasCookies } from '../match/cookies.ts';
import { DEFAULT_STAGE_DEPS, type RequestContext, type Stage, type StageDeps, type StageFactory, type Verdict } from '../pipeline/stage.ts';
import { browserOf } from '../rate-limit/browser.ts';
import { BlockedUntil, RateLimitStoreUnavailable, type ClusterStore } from '../rate-limit/cluster.ts';
import type { RateLimitDeps, RateLimitOutcome } from '../rate-limit/deps.ts';
import { GeoDatabases } from '../../shared/geo.ts';
import { rateLimitKey } from '../rate-limit/visitor-address.ts';
import { HeldRequests, type KeptRuleState, type VisitorBudget } from '../rate-limit/visitors.ts';
import { DEFAULT_MAX_KEYS, SYSTEM_CLOCK, SlidingWindowCounter, type RateLimitClock, type WindowDecision } from '../rate-limit/window.ts';

/** Shipped GeoIP databases for edges built without deps (tests, tools): loaded on first need, once per process. */
let defaultGeo: GeoDatabases | undefined;

/**
 * Requests of one visitor a throttle rule holds at once: its limit, at most 100. Beyond it the visitor is refused
 * (429): a queue is memory and a held socket per request, and a visitor sending more than a window's worth ahead
 * is not slowing down. With the queue full the last one waits about a window.
 */
export function throttleQueueBound(limit: number): number {
  return Math.max(1, Math.min(limit, 100));
}

/** A request a throttle rule holds until it fits. */
interface Waiting {
  ctx: RequestContext;
  resolve(verdict: Verdict): void;
  /** Drops the request from its queue when its visitor disconnects (removed once it leaves the queue). */
  onClose: () => void;
}

/** Held requests of edges built without deps (tests, tools). */
const defaultHeld = new HeldRequests();

/**
 * One rule's state on this edge, kept across recompiles while what it counts is unchanged (RateLimitCounters): the
 * local counts (edge scope, or cluster scope without Redis or failing open), the cluster "blocked until" shortcut,
 * and throttled requests per visitor.
 */
class RuleState implements KeptRuleState {
  readonly local: SlidingWindowCounter;
  readonly blocked: BlockedUntil;
  /** Made when the rule first holds a request (a throttle rule over its limit): most rules never do. */
  queues: Map<string, Waiting[]> | null = null;

  constructor(
    limit: number,
    windowMs: number,
    maxKeys: number,
    budget: VisitorBudget | undefined,
    private readonly keptAt: number,
  ) {
    this.local = new SlidingWindowCounter(limit, windowMs, maxKeys, budget);
    this.blocked = new BlockedUntil(maxKeys, budget);
  }

  lastUse(): number {
    return Math.max(this.keptAt, this.local.lastUse);
  }

  release(): void {
    this.local.release();
    this.blocked.release();
  }
}

/** What a rule says of one request: counted or not (with the numbers for headers), or its store could not say. */
type Take = WindowDecision | 'unavailable';

/** A rule compiled: its matcher, its numbers, and how it takes a request (locally or through Redis). */
interface CompiledRule {
  readonly config: RateLimitRuleConfig;
  readonly match: RateLimitMatcher;
  readonly windowMs: number;
  readonly state: RuleState;
  /** RateLimit-Policy (draft-ietf-httpapi-ratelimit-headers-07 §5.1): quota and window in seconds. */
  readonly policy: string;
  /** Set when the rule always counts on this edge (edge scope, or cluster scope without Redis): the hot path. */
  readonly local: SlidingWindowCounter | null;
  take(key: string, now: number): Take | Promise<Take>;
}

/** A request a rule refused, as a decision (a refusal's estimate is at the limit: nothing remains). */
const refused = (retryAfterMs: number): WindowDecision => ({ allowed: false, remaining: 0, retryAfterMs });

/**
 * The facts conditions read, each computed on first use and shared by every rule for the request: the address
 * parsed once, country/ASN looked up and the User-Agent parsed only when a condition asks.
 */
class RequestFacts implements RateLimitRequestFacts {
  private ip_?: IpWords | null;
  private country_?: string | null;
  private asn_?: number | null;
  private browser_?: string | null;

  constructor(
    private readonly ctx: RequestContext,
    private readonly geo: () => GeoDatabases,
  ) {}

  get ip(): IpWords | null {
    if (this.ip_ === undefined) this.ip_ = parseIp(this.ctx.clientIp);
    return this.ip_;
  }
  country(): string | null {
    // Left on the context too, so capture records the country without a lookup of its own.
    if (this.country_ === undefined) this.country_ = this.ctx.country = this.geo().country(this.ctx.clientIp, this.ip);
    return this.country_;
  }
  asn(): number | null {
    if (this.asn_ === undefined) this.asn_ = this.geo().asn(this.ctx.clientIp, this.ip);
    return this.asn_;
  }
  browser(): string | null {
    if (this.browser_ === undefined) this.browser_ = browserOf(this.userAgent);
    return this.browser_;
  }
  get userAgent(): string {
    return this.ctx.req.headers['user-agent'] ?? '';
  }
  get hostname(): string {
    return this.ctx.host;
  }
  get endpointUuid(): string {
    return this.ctx.endpoint.uuid;
  }
  get path(): string {
    return this.ctx.path;
  }
  get method(): string {
    return this.ctx.method;
  }
  get protocol(): 'http' | 'https' | 'ws' | 'wss' {
    // Node sets `upgrade` on a request it hands to the 'upgrade' event (the pipeline's WebSocket path).
    const upgrade = (this.ctx.req as { upgrade?: boolean }).upgrade === true;
    return upgrade ? (this.ctx.secure ? 'wss' : 'ws') : this.ctx.secure ? 'https' : 'http';
  }
  get port(): number {
    return this.ctx.req.socket.localPort ?? 0;
  }
  header(name: string): string | undefined {
    const v = (this.ctx.req.headers as IncomingHttpHeaders)[name];
    return Array.isArray(v) ? v.join(', ') : v;
  }
  cookie(name: string): string | undefined {
    return cookieValues(this.ctx.req.headers.cookie, name)?.[0];
  }
  anyHeader(): boolean {
    return this.ctx.req.rawHeaders.length > 0;
  }
  anyCookie(): boolean {
    return hasCookies(this.ctx.req.headers.cookie);
  }
}

/** Which condition types need a database loaded: loaded at compile, so a request never waits for a file. */
function needs(rule: RateLimitRuleConfig, type: 'country' | 'asn'): boolean {
  return rule.conditions.some((c) => c.type === type);
}

/** Databases whose failure was logged already (once per database and process, not once per endpoint compile). */
const reported = new WeakMap<GeoDatabases, Set<string>>();

/**
 * Loads the GeoIP databases the rules need. One that cannot be read does not fail the compile: its conditions are
 * taken as met (compileRateLimitConditions `assumeMet`), so every rule still limits at least the visitors it was
 * written for, the endpoint stays up, and its other settings still apply on this edge. Logged as an error, once.
 */
function loadGeo(geo: GeoDatabases, rules: readonly RateLimitRuleConfig[], deps: StageDeps): ReadonlySet<RateLimitConditionType> | undefined {
  let missing: Set<RateLimitConditionType> | undefined;
  for (const type of ['country', 'asn'] as const) {
    if (!rules.some((r) => needs(r, type))) continue;
    try {
      if (type === 'country') geo.requireCountry();
      else geo.requireAsn();
    } catch (err) {
      (missing ??= new Set()).add(type);
      let seen = reported.get(geo);
      if (seen === undefined) reported.set(geo, (seen = new Set()));
      if (!seen.has(type)) {
        seen.add(type);
        deps.logger?.error({ err, database: type }, `the ${type} GeoIP database cannot be read: rate-limit ${type} conditions are taken as met on this edge until it can`);
      }
    }
  }
  return missing;
}

/**
 * Answers a request a rule refused: 429 `rate_limited` with Retry-After and the RateLimit-* fields of the rule
 * that acted. Only refusals carry them (Cloudflare's default): admitted requests pay nothing and tell nothing.
 */
function refuse(ctx: RequestContext, rule: CompiledRule, decision: WindowDecision): 'done' {
  const seconds = String(Math.max(1, Math.ceil(decision.retryAfterMs / 1000)));
  const res = ctx.res;
  res.setHeader('retry-after', seconds);
  res.setHeader('ratelimit-limit', String(rule.config.requests_per_window));
  res.setHeader('ratelimit-remaining', String(decision.remaining));
  res.setHeader('ratelimit-reset', seconds);
  res.setHeader('ratelimit-policy', rule.policy);
  sendEdgeError(res, 'rate_limited', ctx.req.headers.accept, `rate limit "${rule.config.name}": ${rule.config.requests_per_window} requests per ${rule.config.window_size_seconds} s`);
  return 'done';
}

function unavailable(ctx: RequestContext, rule: CompiledRule): 'done' {
  ctx.res.setHeader('retry-after', '1');
  sendEdgeError(ctx.res, 'rate_limit_unavailable', ctx.req.headers.accept, `rate limit "${rule.config.name}" counts across edges and its store cannot be reached`);
  return 'done';
}

/** Whether the visitor is gone (a throttled request whose connection closed is dropped, not counted). */
function gone(ctx: RequestContext): boolean {
  return ctx.res.destroyed || ctx.req.socket.destroyed || ctx.res.writableEnded;
}

class RateLimitStage implements Stage {
  readonly name = 'rate-limit';

  constructor(
    private readonly endpoint: string,
    private readonly rules: readonly CompiledRule[],
    private readonly clock: RateLimitClock,
    private readonly geo: () => GeoDatabases,
    private readonly deps: RateLimitDeps,
    private readonly held: HeldRequests,
  ) {}

  run(ctx: RequestContext): Verdict | Promise<Verdict> {
    const facts = new RequestFacts(ctx, this.geo);
    const hits = this.deps.hits;
    let key: string | undefined;
    let now = 0;
    // Decisions in rule order; cluster rules may answer later, so the first refusal is found once all have.
    let takes: (Take | Promise<Take>)[] | undefined;
    let matched: CompiledRule[] | undefined;
    let async = false;
    for (const rule of this.rules) {
      if (!rule.match(facts)) continue;
      hits?.hit(rule.config.uuid);
      if (key === undefined) {
        key = rateLimitKey(ctx.clientIp);
        now = this.clock.now();
      }
      let take: Take | Promise<Take>;
      const local = rule.local;
      if (local !== null) {
        // The common case, edge rules that admit: no decision object, no array, no promise.
        const wait = local.admit(key, now);
        if (wait === 0) continue;
        take = refused(wait);
      } else {
        take = rule.take(key, now);
      }
      (takes ??= []).push(take);
      (matched ??= []).push(rule);
      if (typeof (take as Promise<Take>).then === 'function') async = true;
    }
    if (takes === undefined) {
      if (key !== undefined) this.deps.observe?.(this.endpoint, '', 'allowed');
      return 'next';
    }
    if (!async) return this.act(ctx, key!, matched!, takes as Take[]);
    return Promise.all(takes).then((all) => this.act(ctx, key!, matched!, all));
  }

  /** The first rule that did not admit the request acts on it. */
  private act(ctx: RequestContext, key: string, rules: CompiledRule[], takes: Take[]): Verdict | Promise<Verdict> {
    for (let i = 0; i < takes.length; i++) {
      const take = takes[i];
      const rule = rules[i];
      if (take === 'unavailable') {
        this.deps.observe?.(this.endpoint, rule.config.uuid, 'unavailable');
        return unavailable(ctx, rule);
      }
      if (take.allowed) continue;
      if (rule.config.action === 'throttle') return this.hold(ctx, key, rule, take);
      this.deps.observe?.(this.endpoint, rule.config.uuid, 'blocked');
      return refuse(ctx, rule, take);
    }
    this.deps.observe?.(this.endpoint, '', 'allowed');
    return 'next';
  }

  /**
   * Throttle: the request waits (a timer, never a busy loop) in its visitor's queue until the rule admits it, then
   * goes on through the pipeline; first come, first admitted. A full queue refuses it like `block`.
   */
  private hold(ctx: RequestContext, key: string, rule: CompiledRule, decision: WindowDecision): Verdict | Promise<Verdict> {
    let queue = rule.state.queues?.get(key);
    const held = this.held;
    if ((queue !== undefined && queue.length >= throttleQueueBound(rule.config.requests_per_window)) || held.count >= held.max || gone(ctx)) {
      this.deps.observe?.(this.endpoint, rule.config.uuid, 'blocked');
      return refuse(ctx, rule, decision);
    }
    this.deps.observe?.(this.endpoint, rule.config.uuid, 'throttled');
    const queues = (rule.state.queues ??= new Map());
    return new Promise<Verdict>((resolve) => {
      const fresh = queue === undefined;
      const q = (queue ??= []);
      if (fresh) queues.set(key, q);
      // A visitor who leaves frees their place (and the edge's count) at once, not when the timer next fires.
      const waiting: Waiting = {
        ctx,
        resolve,
        onClose: () => {
          const at = q.indexOf(waiting);
          if (at === -1) return;
          q.splice(at, 1);
          this.release(waiting, 'done');
          if (q.length === 0 && queues.get(key) === q) queues.delete(key);
        },
      };
      q.push(waiting);
      held.count++;
      ctx.req.socket.once('close', waiting.onClose);
      if (fresh) this.wake(rule, key, q, decision.retryAfterMs);
    });
  }

  /** A held request leaves its queue: the edge's count drops, its close listener goes, its verdict is given. */
  private release(waiting: Waiting, verdict: Verdict): void {
    this.held.count--;
    waiting.ctx.req.socket.off('close', waiting.onClose);
    waiting.resolve(verdict);
  }

  /** In `ms`, admits the queue's head requests while they fit; the rest wait for the next fit. */
  private wake(rule: CompiledRule, key: string, queue: Waiting[], ms: number): void {
    const timer = this.clock.setTimeout(() => void this.drain(rule, key, queue), Math.max(1, ms));
    timer.unref?.();
  }

  private async drain(rule: CompiledRule, key: string, queue: Waiting[]): Promise<void> {
    while (queue.length > 0) {
      const head = queue[0];
      if (gone(head.ctx)) {
        queue.shift();
        this.release(head, 'done');
        continue;
      }
      let take: Take;
      try {
        take = await rule.take(key, this.clock.now());
      } catch {
        take = 'unavailable';
      }
      // The visitor may have left while the cluster decided (its place is already freed).
      if (queue[0] !== head) {
        if (take !== 'unavailable' && take.allowed) continue;
        if (queue.length === 0) break;
        return this.wake(rule, key, queue, take === 'unavailable' ? 1 : take.retryAfterMs);
      }
      if (take === 'unavailable') {
        queue.shift();
        this.release(head, unavailable(head.ctx, rule));
        continue;
      }
      if (!take.allowed) return this.wake(rule, key, queue, take.retryAfterMs);
      queue.shift();
      this.release(head, 'next');
    }
    if (rule.state.queues?.get(key) === queue) rule.state.queues.delete(key);
  }
}

/**
 * Where windows read the time: the rate limits' own clock when given (it also drives throttle timers), else the
 * stages' clock (StageDeps.clock) with real timers, else the wall clock.
 */
function rateLimitClock(rl: RateLimitDeps, deps: StageDeps): RateLimitClock {
  if (rl.clock !== undefined) return rl.clock;
  const stages = deps.clock;
  return stages === undefined ? SYSTEM_CLOCK : { now: () => stages.now(), setTimeout: SYSTEM_CLOCK.setTimeout };
}

/** What a rule's counts derive from: a change to any of these starts its counts afresh; name, action, priority do not. */
function countsVersion(rule: RateLimitRuleConfig): string {
  return JSON.stringify([rule.requests_per_window, rule.window_size_seconds, rule.scope, rule.conditions.map((c) => [c.type, c.operator, c.value, c.logical_operator])]);
}

function compileRule(rule: RateLimitRuleConfig, rl: RateLimitDeps, clock: RateLimitClock, endpointId: string, assumeMet: ReadonlySet<RateLimitConditionType> | undefined): CompiledRule {
  const limit = rule.requests_per_window;
  const windowMs = rule.window_size_seconds * 1000;
  // The edge's own home for counts (src/edge/rate-limit/visitors.ts), keyed by rule uuid and what it counts.
  const counters = rl.counters;
  const state = counters
    ? counters.keep(rule.uuid, countsVersion(rule), (budget) => new RuleState(limit, windowMs, counters.maxKeysPerRule, budget, clock.now()))
    : new RuleState(limit, windowMs, rl.maxKeys ?? DEFAULT_MAX_KEYS, undefined, clock.now());
  const match = compileRateLimitConditions(rule.conditions, assumeMet);
  const policy = `${limit};w=${rule.window_size_seconds}`;
  const local = (key: string, now: number): Take => state.local.take(key, now);
  const store: ClusterStore | undefined = rule.scope === 'cluster' ? rl.cluster : undefined;
  if (store === undefined) return { config: rule, match, windowMs, state, policy, local: state.local, take: local };
  return {
    config: rule,
    match,
    windowMs,
    state,
    policy,
    local: null,
    take(key, now) {
      // A visitor the cluster refused stays refused here until its wait is over: no round trip per blocked request.
      const blockedMs = state.blocked.remaining(key, now);
      if (blockedMs > 0) return refused(blockedMs);
      return store.take(rule.uuid, key, limit, windowMs, now).then(
        (decision) => {
          if (!decision.allowed) state.blocked.set(key, now + decision.retryAfterMs);
          return decision;
        },
        (err: unknown): Take => {
          if (!(err instanceof RateLimitStoreUnavailable)) throw err;
          if (rule.fail_mode === 'closed') return 'unavailable';
          rl.observe?.(endpointId, rule.uuid, 'fail_open' satisfies RateLimitOutcome);
          return local(key, now);
        },
      );
    },
  };
}

export const rateLimit: StageFactory = {
  id: 'rate-limit',
  healthProbe: 'skips',
  compile(endpoint: EndpointConfig, deps: StageDeps = DEFAULT_STAGE_DEPS): Stage | null {
    const configured = endpoint.rate_limits;
    if (configured === undefined || configured.length === 0) return null;
    const rl: RateLimitDeps = deps.rateLimits ?? {};
    const geo = rl.geo ?? (defaultGeo ??= new GeoDatabases());
    // Databases a rule needs are loaded now; one that cannot be read makes its conditions hold (loadGeo).
    const assumeMet = loadGeo(geo, configured, deps);
    // The snapshot's order is the evaluation order; sorted again so a hand-built config cannot change the semantics.
    const ordered = [...configured].sort((a, b) => a.priority - b.priority || a.id - b.id);
    const clock = rateLimitClock(rl, deps);
    const rules = ordered.map((rule) => compileRule(rule, rl, clock, endpoint.uuid, assumeMet));
    return new RateLimitStage(endpoint.uuid, rules, clock, () => geo, rl, rl.held ?? defaultHeld);
  },
};
