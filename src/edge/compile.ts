// Compiles an endpoint's config into what the pipeline runs: the list of stages it uses, in pipeline order.
// Runs when the config enters the cache, never per request; a stage an endpoint does not use is simply absent.
import type { EndpointConfig } from '../shared/snapshot.ts';
import { sendEdgeError } from './http/pages.ts';
import { DEFAULT_STAGE_DEPS, type Stage, type StageDeps, type StageFactory } from './pipeline/stage.ts';
import { auth } from './stages/auth.ts';
import { httpsRedirect } from './stages/https-redirect.ts';
import { jwt } from './stages/jwt.ts';
import { mtls } from './stages/mtls.ts';
import { rateLimit } from './stages/rate-limit.ts';
import { rbac } from './stages/rbac.ts';
import { register } from './stages/register.ts';
import { routing } from './stages/routing.ts';
import { webhook } from './stages/webhook.ts';

/**
 * Every stage, in docs/architecture.md's pipeline order (client certificates, HTTPS enforcement, firewall rate limits,
 * visitor auth, JWT, RBAC, routing). Adding a stage is one module under stages/ and one entry here: what the pipeline
 * needs to know of it besides (fails closed, skipped by health probes) is on its factory. The mTLS check
 * comes first, so a plain-HTTP request to an endpoint that requires a certificate is refused, not redirected.
 * Webhook verification reads the body whole, so it runs after the visitor is authenticated: an anonymous visitor
 * cannot make the edge buffer bodies (docs/visitor-auth.md). The registration pages (`register`) come before auth:
 * a visitor redeeming an invite has no credential yet (docs/rbac.md).
 */
export const STAGES: readonly StageFactory[] = [mtls, httpsRedirect, rateLimit, register, auth, jwt, webhook, rbac, routing];

export interface CompiledEndpoint {
  readonly config: EndpointConfig;
  readonly stages: readonly Stage[];
  /**
   * The stages a verified health probe goes through: `stages` without those whose factory says the probe skips them
   * (StageFactory.healthProbe). An endpoint compiled closed stays closed: visitors get 503, so does the probe.
   */
  readonly probeStages: readonly Stage[];
  /**
   * Set when a fail-closed stage (StageFactory.failClosed) did not compile: why, prefixed with the stage's id. The
   * stages are then one that answers every request 503 auth_unavailable; the caller reports the failure.
   */
  readonly failure?: string;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * The one stage of an endpoint whose security stage failed to compile: every request is refused, never served
 * without the check it asked for. Counted as that stage's `unavailable` outcome.
 */
function closedStage(config: EndpointConfig, stageId: string, deps: StageDeps): Stage {
  const detail = `this endpoint's ${stageId} settings could not be applied on this edge`;
  return {
    name: stageId,
    run(ctx) {
      deps.authOutcome?.(config.uuid, stageId, 'unavailable');
      sendEdgeError(ctx.res, 'auth_unavailable', ctx.req.headers.accept, detail);
      return 'done';
    },
  };
}

/**
 * The endpoint's stages in pipeline order. A stage that fails to compile throws, and the caller keeps the previous
 * config in force (availability: a broken routing rule must not take a working endpoint down); but when the stage
 * is a security one (failClosed), the endpoint is compiled closed instead (`failure` set), whatever else failed:
 * keeping the previous config would serve visitors without the check the new one asks for.
 */
export function compileEndpoint(config: EndpointConfig, deps: StageDeps = DEFAULT_STAGE_DEPS, factories: readonly StageFactory[] = STAGES): CompiledEndpoint {
  const stages: Stage[] = [];
  const probeStages: Stage[] = [];
  let failed: unknown;
  let failedAny = false;
  for (const factory of factories) {
    let stage: Stage | null;
    try {
      stage = factory.compile(config, deps);
    } catch (err) {
      if (factory.failClosed === true) {
        const closed = Object.freeze([closedStage(config, factory.id, deps)]);
        return Object.freeze({ config, stages: closed, probeStages: closed, failure: `${factory.id}: ${errorText(err)}` });
      }
      // Later security stages still get their say: one of them failing closes the endpoint.
      if (!failedAny) {
        failed = err;
        failedAny = true;
      }
      continue;
    }
    if (stage === null) continue;
    stages.push(stage);
    if (factory.healthProbe === 'runs') probeStages.push(stage);
  }
  if (failedAny) throw failed;
  return Object.freeze({ config, stages: Object.freeze(stages), probeStages: Object.freeze(probeStages) });
}
