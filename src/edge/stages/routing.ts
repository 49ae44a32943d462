// The routing stage: picks what may serve a request (some of the endpoint's agents, or an origin URL) from its routing
// rules. Rules are compiled once into closures; per request the first enabled rule that matches sets ctx.selector.
//
// Order (docs/routing-rules.md): ascending priority, ties by ascending id; disabled rules are left out at compile
// time. Conditions of a rule are ANDed. No match leaves the selector unset: the endpoint's origin URL, if it has one,
// or any of its agents serves.
import type { RoutingConditionConfig, RoutingRuleConfig } from '../../shared/snapshot.ts';
import { parseIp, type IpWords } from '../../shared/match/cidr.ts';
import { compileConditionMatcher } from '../../shared/match/condition.ts';
import { canonicalOriginUrl } from '../../shared/origin-url.ts';
import type { StringMatcher } from '../../shared/match/glob.ts';
import { cookieValues } from '../match/cookies.ts';
import { queryValues } from '../match/query.ts';
import type { AgentSelector, RequestContext, Stage, StageFactory } from '../pipeline/stage.ts';

/**
 * What conditions derive from a request, computed on first use and shared by every condition of every rule for
 * that request: the path and host split once, the client address parsed once. Query and cookie conditions scan
 * for their one name instead (cheaper than parsing every parameter or cookie into a map).
 */
class RequestFacts {
  private pathSegments?: string[];
  private hostLabels?: string[];
  private ip?: IpWords | null;

  constructor(private readonly ctx: RequestContext) {}

  segments(): string[] {
    return (this.pathSegments ??= this.ctx.path.split('/'));
  }

  labels(): string[] {
    return (this.hostLabels ??= this.ctx.host.split('.'));
  }

  clientIp(): IpWords | null {
    if (this.ip === undefined) this.ip = parseIp(this.ctx.clientIp);
    return this.ip;
  }
}

type Probe = (ctx: RequestContext, facts: RequestFacts) => boolean;

const anyOf = (values: readonly string[] | undefined, match: StringMatcher): boolean => {
  if (values === undefined) return false;
  for (const v of values) if (match(v)) return true;
  return false;
};

/**
 * Rough per-request cost of each condition type. A rule's conditions are ANDed and side-effect free, so they run
 * cheapest first: a method or path mismatch rejects the rule before any query parsing or header scanning.
 */
const COST: Record<RoutingConditionConfig['condition_type'], number> = { method: 0, path: 1, host: 2, header: 3, source_ip: 4, cookie: 5, query: 6 };

/**
 * Compiles one condition into a probe: the shared compiler (the one the control API validates with) builds the
 * matchers, and this binds each to what it reads from the request. Throws on a condition it cannot compile.
 */
export function compileCondition(condition: RoutingConditionConfig): Probe {
  const m = compileConditionMatcher(condition);
  switch (m.kind) {
    case 'path': {
      const match = m.match;
      return (ctx) => match(ctx.path);
    }
    case 'path_segments': {
      const match = m.match;
      return (_ctx, facts) => match(facts.segments());
    }
    case 'method': {
      const methods = m.methods;
      if (methods.size === 1) {
        const [only] = methods;
        return (ctx) => ctx.method === only;
      }
      return (ctx) => methods.has(ctx.method);
    }
    case 'header': {
      const { name, match } = m;
      if (match === null) return (ctx) => ctx.req.headers[name] !== undefined;
      return (ctx) => {
        const value = ctx.req.headers[name];
        return typeof value === 'string' ? match(value) : anyOf(value, match);
      };
    }
    case 'query': {
      const { name, match } = m;
      return (ctx) => ctx.query !== '' && anyOf(queryValues(ctx.query, name), match);
    }
    case 'cookie': {
      const { name, match } = m;
      return (ctx) => anyOf(cookieValues(ctx.req.headers.cookie, name), match);
    }
    case 'source_ip': {
      const match = m.match;
      return (_ctx, facts) => match(facts.clientIp());
    }
    case 'host': {
      const match = m.match;
      return (ctx) => match(ctx.host);
    }
    case 'host_labels': {
      const match = m.match;
      return (_ctx, facts) => match(facts.labels());
    }
  }
}

interface CompiledRule {
  readonly probes: readonly Probe[];
  /** Built once and shared by every request the rule matches; downstream only reads it. */
  readonly selector: Readonly<AgentSelector>;
}

/** Evaluation order: ascending priority, then ascending id (the order rules were created in). */
export function byEvaluationOrder(a: Pick<RoutingRuleConfig, 'priority' | 'id'>, b: Pick<RoutingRuleConfig, 'priority' | 'id'>): number {
  return a.priority - b.priority || a.id - b.id;
}

/**
 * The rule's origin URL, checked for shape only: whether its address may be reached is decided when the edge
 * connects (src/edge/forward/origin.ts), against every address the name resolves to.
 */
function compileOrigin(rule: RoutingRuleConfig): string {
  const url = rule.target_origin_url!;
  try {
    canonicalOriginUrl(url, true);
  } catch (err) {
    throw new RangeError(`routing rule ${rule.id} ("${rule.name}"), target_origin_url: ${(err as Error).message}`, { cause: err });
  }
  return url;
}

function compileRule(rule: RoutingRuleConfig): CompiledRule {
  if (rule.conditions.length === 0) throw new RangeError(`routing rule ${rule.id} has no conditions`);
  const probes = [...rule.conditions]
    .sort((a, b) => COST[a.condition_type] - COST[b.condition_type])
    .map((condition) => {
      try {
        return compileCondition(condition);
      } catch (err) {
        throw new RangeError(`routing rule ${rule.id} ("${rule.name}"), ${condition.condition_type} condition: ${(err as Error).message}`, { cause: err });
      }
    });
  const selector: AgentSelector = { rule: rule.name !== '' ? rule.name : `#${rule.id}` };
  if (rule.target_agent_id !== null && rule.target_agent_id !== '') selector.agentId = rule.target_agent_id;
  if (rule.target_agent_tags.length > 0) selector.tags = Object.freeze(rule.target_agent_tags.map((t) => t.toLowerCase()));
  // Absent from snapshots made before rules could name origins; the control API stores it canonical.
  if (rule.target_origin_url) {
    if (selector.agentId !== undefined || selector.tags !== undefined) throw new RangeError(`routing rule ${rule.id} targets both agents and an origin`);
    selector.origin = compileOrigin(rule);
  }
  return { probes, selector: Object.freeze(selector) };
}

/** The compiled rules of an endpoint, in evaluation order, disabled rules left out. Throws on a malformed rule. */
export function compileRoutingRules(rules: readonly RoutingRuleConfig[]): readonly CompiledRule[] {
  return rules
    .filter((r) => r.enabled)
    .sort(byEvaluationOrder)
    .map(compileRule);
}

/** The selector of the first rule that matches, or undefined. Exposed for tests and for a future "explain" tool. */
export function selectAgents(rules: readonly CompiledRule[], ctx: RequestContext): Readonly<AgentSelector> | undefined {
  const facts = new RequestFacts(ctx);
  next: for (const rule of rules) {
    for (const probe of rule.probes) if (!probe(ctx, facts)) continue next;
    return rule.selector;
  }
  return undefined;
}

export const routing: StageFactory = {
  id: 'routing',
  healthProbe: 'runs',
  compile(endpoint): Stage | null {
    const rules = compileRoutingRules(endpoint.routing_rules ?? []);
    // No enabled rule: the stage is absent, so an endpoint without routing pays nothing per request.
    if (rules.length === 0) return null;
    return {
      name: 'routing',
      run(ctx) {
        const selector = selectAgents(rules, ctx);
        if (selector !== undefined) ctx.selector = selector;
        return 'next';
      },
    };
  },
};
