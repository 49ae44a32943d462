// Compiles an endpoint's config into what the pipeline runs: the list of stages it uses, in pipeline order.
// Runs when the config enters the cache, never per request; a stage an endpoint does not use is simply absent.
import type { EndpointConfig } from '../shared/snapshot.ts';
import { DEFAULT_STAGE_DEPS, type Stage, type StageDeps, type StageFactory } from './pipeline/stage.ts';
import { auth } from './stages/auth.ts';
import { httpsRedirect } from './stages/https-redirect.ts';
import { jwt } from './stages/jwt.ts';
import { mtls } from './stages/mtls.ts';
import { routing } from './stages/routing.ts';
import { webhook } from './stages/webhook.ts';

/**
 * Every stage, in ARCHITECTURE.md's pipeline order (client certificates, HTTPS enforcement, firewall rate limits,
 * visitor auth, JWT, RBAC, routing). Adding a stage is one module under stages/ and one entry here. The mTLS check
 * comes first, so a plain-HTTP request to an endpoint that requires a certificate is refused, not redirected.
 * Webhook verification reads the body whole, so it runs after the visitor is authenticated: an anonymous visitor
 * cannot make the edge buffer bodies (docs/visitor-auth.md).
 */
export const STAGES: readonly StageFactory[] = [mtls, httpsRedirect, auth, jwt, webhook, routing];

export interface CompiledEndpoint {
  readonly config: EndpointConfig;
  readonly stages: readonly Stage[];
}

export function compileEndpoint(config: EndpointConfig, deps: StageDeps = DEFAULT_STAGE_DEPS, factories: readonly StageFactory[] = STAGES): CompiledEndpoint {
  const stages: Stage[] = [];
  for (const factory of factories) {
    const stage = factory.compile(config, deps);
    if (stage !== null) stages.push(stage);
  }
  return Object.freeze({ config, stages: Object.freeze(stages) });
}
