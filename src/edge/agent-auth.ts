// Admission of an agent at tunnel connect, decided from the edge's own config mirror (no control-plane call):
// API key, account standing, the plan's allowed_regions against this edge's region, the protocol entitlement, ownership.
import { apiKeyId, apiKeyMatches } from '../shared/api-keys.ts';
import { allowsRegion, type Plan } from '../shared/plans.ts';
import type { EndpointConfig } from '../shared/snapshot.ts';
import type { Hello } from '../shared/tunnel/protocol.ts';
import type { EdgeConfig } from './config.ts';
import type { Authorize, AuthorizeResult } from './tunnels/tunnel-server.ts';

export interface AgentAuthOptions {
  config: EdgeConfig;
  plans: Readonly<Record<string, Plan>>;
  region: string;
  /**
   * The one-shot flow: asks the control plane for a new ephemeral endpoint on behalf of the agent's key and
   * returns its uuid. Edges cannot write the store, so this is the one admission step that needs the control API.
   */
  createEphemeral: (apiKey: string) => Promise<string>;
  /** How long to wait for a new ephemeral endpoint to arrive through the feed. */
  feedWaitMs?: number;
}

const refuse = (code: Extract<AuthorizeResult, { ok: false }>['code'], message: string): AuthorizeResult => ({ ok: false, code, message });

function welcome(endpoint: EndpointConfig): AuthorizeResult {
  return { ok: true, endpoint: { uuid: endpoint.uuid, hostname: endpoint.hostname, public_url: endpoint.hostname } };
}

/** Resolves with the endpoint once the feed has delivered it, or undefined after `ms`. */
function awaitEndpoint(config: EdgeConfig, uuid: string, ms: number): Promise<EndpointConfig | undefined> {
  const known = config.endpoint(uuid);
  if (known) return Promise.resolve(known);
  return new Promise((resolve) => {
    const onEndpoint = (changed: string, value: EndpointConfig | null) => {
      if (changed !== uuid || !value) return;
      clearTimeout(timer);
      config.off('endpoint', onEndpoint);
      resolve(value);
    };
    const timer = setTimeout(() => {
      config.off('endpoint', onEndpoint);
      resolve(undefined);
    }, ms);
    config.on('endpoint', onEndpoint);
  });
}

export function agentAuthorizer(options: AgentAuthOptions): Authorize {
  const { config, plans, region } = options;
  return async (hello: Hello): Promise<AuthorizeResult> => {
    const key = config.apiKey(apiKeyId(hello.api_key));
    if (!key || !apiKeyMatches(hello.api_key, Buffer.from(key.secret_hash, 'base64'))) return refuse('unauthorized', 'invalid or revoked API key');
    const account = config.account(key.account_id);
    if (!account) return refuse('unauthorized', 'the API key has no account on this edge');
    if (account.suspended) return refuse('account_suspended', 'the account is suspended');
    const plan = plans[account.plan];
    if (!plan) return refuse('forbidden', `plan "${account.plan}" is not configured on this edge`);
    if (!allowsRegion(plan, region)) return refuse('region_not_allowed', `plan "${account.plan}" does not allow region ${region}`);
    if (!(plan.protocols as readonly string[]).includes(hello.protocol)) {
      return refuse('protocol_not_allowed', `plan "${account.plan}" does not include ${hello.protocol} tunnels`);
    }
    if (hello.endpoint) {
      const endpoint = config.endpoint(hello.endpoint);
      // Another account's endpoint reads as missing, as in the API.
      if (!endpoint || endpoint.account_id !== key.account_id) return refuse('endpoint_not_found', `no endpoint ${hello.endpoint} in this account`);
      if (endpoint.status === 'disabled') return refuse('forbidden', 'the endpoint is disabled');
      return welcome(endpoint);
    }
    let uuid: string;
    try {
      uuid = await options.createEphemeral(hello.api_key);
    } catch (err) {
      const e = err as { code?: string; message?: string };
      if (e.code === 'quota_exceeded' || e.code === 'permission_denied' || e.code === 'entitlement_required') return refuse('forbidden', e.message ?? e.code);
      return refuse('unavailable', `cannot create an ephemeral endpoint now: ${e.message ?? 'control plane unreachable'}`);
    }
    const endpoint = await awaitEndpoint(config, uuid, options.feedWaitMs ?? 10_000);
    if (!endpoint) return refuse('unavailable', 'the new endpoint has not reached this edge yet; retrying');
    return welcome(endpoint);
  };
}
