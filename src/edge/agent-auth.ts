// Admission of an agent at tunnel connect, and its standing while connected, decided from the edge's own config
// mirror (no control-plane call): one rule set for both, run again for the tunnels a feed change concerns.
import { apiKeyId, apiKeyMatches } from '../shared/api-keys.ts';
import type { Logger } from '../shared/log.ts';
import type { Permission } from '../shared/permissions.ts';
import { allowsRegion, type Plan } from '../shared/plans.ts';
import type { EndpointConfig } from '../shared/snapshot.ts';
import type { Hello, TunnelProtocol } from '../shared/tunnel/protocol.ts';
import type { EndpointCache } from './endpoint-cache.ts';
import type { AgentSession, DeployGrant, TunnelCredential, TunnelRegistry } from './tunnels/registry.ts';
import type { Authorize, AuthorizeResult } from './tunnels/tunnel-server.ts';

/** What admission and the standing check read: the mirror, the plans, and this edge's region. */
export interface AdmissionRules {
  config: EndpointCache;
  plans: Readonly<Record<string, Plan>>;
  region: string;
}

export interface AgentAuthOptions extends AdmissionRules {
  /**
   * The one-shot flow: asks the control plane for a new ephemeral endpoint on behalf of the agent's key and
   * returns its uuid. Edges cannot write the store, so this is the one admission step that needs the control API.
   */
  createEphemeral: (apiKey: string) => Promise<string>;
  /** How long to wait for a new ephemeral endpoint to arrive through the feed. */
  feedWaitMs?: number;
}

type Refusal = Extract<AuthorizeResult, { ok: false }>;

/** The permission an agent's key needs in its account (README "Callers, accounts and permissions"). */
export const CONNECT_PERMISSION: Permission = 'tunnels:connect';

/** What a tunnel rests on: the key that admitted it (its stored hash, not the secret), its protocol and endpoint. */
export interface Standing {
  keyId: string;
  secretHash: string;
  protocol: TunnelProtocol;
  /** Absent at connect in the one-shot flow, before the ephemeral endpoint exists. */
  endpoint?: string;
}

const refuse = (code: Refusal['code'], message: string): Refusal => ({ ok: false, code, message });

/**
 * The rules an agent must meet to connect and to stay connected: its key is still published with the hash it was
 * admitted with, the key's account is known and not suspended, its plan allows this region and the protocol, the
 * key's holder has `tunnels:connect` in that account, and the endpoint (when named) belongs to that account and
 * is neither disabled nor in error. Returns the first rule broken, or null. Lookups in the mirror only, so it is cheap to run for
 * every tunnel a feed change concerns.
 *
 * A key entry without `permissions` was published before edges checked the permission; it is read as the rule
 * of that time (the account's keys may connect) until the control plane republishes it at its next start. Read
 * as "no permission" instead, an upgrade would refuse every agent (a final refusal: they exit) for that window.
 */
export function checkStanding(rules: AdmissionRules, standing: Standing): Refusal | null {
  const { config, plans, region } = rules;
  const key = config.apiKey(standing.keyId);
  if (!key || key.secret_hash !== standing.secretHash) return refuse('unauthorized', 'the API key is unknown or revoked');
  const account = config.account(key.account_id);
  if (!account) return refuse('unauthorized', 'the API key has no account on this edge');
  if (account.suspended) return refuse('account_suspended', 'the account is suspended');
  const plan = plans[account.plan];
  if (!plan) return refuse('forbidden', `plan "${account.plan}" is not configured on this edge`);
  if (!allowsRegion(plan, region)) return refuse('region_not_allowed', `plan "${account.plan}" does not allow region ${region}`);
  if (!(plan.protocols as readonly string[]).includes(standing.protocol)) {
    return refuse('protocol_not_allowed', `plan "${account.plan}" does not include ${standing.protocol} tunnels`);
  }
  if (key.permissions !== undefined && !key.permissions.includes(CONNECT_PERMISSION)) {
    return refuse('permission_denied', `the API key's user lacks ${CONNECT_PERMISSION} in account ${key.account_id}`);
  }
  if (standing.endpoint !== undefined) {
    const endpoint = config.endpoint(standing.endpoint);
    // Another account's endpoint reads as missing, as in the API.
    if (!endpoint || endpoint.account_id !== key.account_id) return refuse('endpoint_not_found', `no endpoint ${standing.endpoint} in this account`);
    if (endpoint.status === 'disabled') return refuse('forbidden', 'the endpoint is disabled');
    // The pipeline refuses visitors of an endpoint in error as it does those of a disabled one, so no agent may
    // serve it either. Unlike disabled, error is a state that clears without the user (the control plane, or this
    // edge's stand-in for a config it could not compile): `unavailable` lets the agent retry until it does.
    if (endpoint.status === 'error') return refuse('unavailable', 'the endpoint is in an error state; retrying until it recovers');
  }
  return null;
}

function welcome(endpoint: EndpointConfig, credential: TunnelCredential, deploy?: DeployGrant): AuthorizeResult {
  return { ok: true, endpoint: { uuid: endpoint.uuid, hostname: endpoint.hostname, public_url: endpoint.hostname }, credential, ...(deploy ? { deploy } : {}) };
}

/**
 * A deploying agent's application, judged from the mirror: it exists in the key's account (another account's reads
 * as missing, as in the API), and the endpoint the hello names, if any, is the one it serves. Returns the endpoint
 * the tunnel serves, or the refusal.
 */
export function checkApplication(config: EndpointCache, accountId: number, hello: Pick<Hello, 'application' | 'endpoint' | 'protocol'>): { endpoint: string } | Refusal {
  const app = hello.application === undefined ? undefined : config.application(hello.application);
  if (!app || app.account_id !== accountId) return refuse('application_not_found', `no application ${hello.application} in this account`);
  if (hello.protocol !== 'http') return refuse('invalid_hello', 'a deploying agent serves its application over http');
  if (hello.endpoint !== undefined && hello.endpoint !== app.endpoint_uuid) {
    return refuse('forbidden', `application ${app.uuid} serves endpoint ${app.endpoint_uuid}, not ${hello.endpoint}`);
  }
  return { endpoint: app.endpoint_uuid };
}

/** Resolves with the endpoint once the feed has delivered it, or undefined after `ms`. */
function awaitEndpoint(config: EndpointCache, uuid: string, ms: number): Promise<EndpointConfig | undefined> {
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
  const { config } = options;
  return async (hello: Hello): Promise<AuthorizeResult> => {
    const keyId = apiKeyId(hello.api_key);
    const key = config.apiKey(keyId);
    if (!key || !apiKeyMatches(hello.api_key, Buffer.from(key.secret_hash, 'base64'))) return refuse('unauthorized', 'invalid or revoked API key');
    const credential: TunnelCredential = { keyId, secretHash: key.secret_hash, accountId: key.account_id };
    if (hello.application !== undefined) {
      const app = checkApplication(config, key.account_id, hello);
      if ('ok' in app) return app;
      const refusal = checkStanding(options, { keyId, secretHash: key.secret_hash, protocol: hello.protocol, endpoint: app.endpoint });
      // The agent's key goes with its events to the control API, which judges it again there (src/edge/deploy-channel.ts).
      return refusal ?? welcome(config.endpoint(app.endpoint)!, credential, { application: hello.application, apiKey: hello.api_key });
    }
    const standing: Standing = { keyId, secretHash: key.secret_hash, protocol: hello.protocol, endpoint: hello.endpoint };
    const refusal = checkStanding(options, standing);
    if (refusal) return refusal;
    if (hello.endpoint) return welcome(config.endpoint(hello.endpoint)!, credential);
    let uuid: string;
    try {
      uuid = await options.createEphemeral(hello.api_key);
    } catch (err) {
      const e = err as { code?: string; message?: string };
      if (e.code === 'permission_denied') return refuse('permission_denied', e.message ?? e.code);
      if (e.code === 'quota_exceeded' || e.code === 'entitlement_required') return refuse('forbidden', e.message ?? e.code);
      return refuse('unavailable', `cannot create an ephemeral endpoint now: ${e.message ?? 'control plane unreachable'}`);
    }
    const endpoint = await awaitEndpoint(config, uuid, options.feedWaitMs ?? 10_000);
    if (!endpoint) return refuse('unavailable', 'the new endpoint has not reached this edge yet; retrying');
    // The wait let the feed move on: the key, its account and the new endpoint are judged as they are now.
    return checkStanding(options, { ...standing, endpoint: endpoint.uuid }) ?? welcome(endpoint, credential);
  };
}

export interface StandingWatchOptions {
  /** Streams in flight on a tunnel that lost its standing get this long to finish (default 5 s). */
  graceMs?: number;
  logger?: Logger;
}

/**
 * Ends live tunnels that would no longer be admitted: whenever the feed changes an API key, an account or an
 * endpoint, the sessions resting on it (found by key id, account id or endpoint uuid, never by a scan) are judged
 * again by checkStanding, and those that fail get a GOAWAY carrying the refusal code (docs/tunnels.md). A session
 * is also judged once as it registers, which covers a change applied while its hello was being decided. Returns
 * a function that stops watching.
 */
export function watchStanding(rules: AdmissionRules, registry: TunnelRegistry, options: StandingWatchOptions = {}): () => void {
  const { config } = rules;
  const graceMs = options.graceMs ?? 5_000;
  const judge = (sessions: Iterable<AgentSession>) => {
    for (const session of sessions) {
      const credential = session.credential;
      if (!credential || !session.available) continue;
      const refusal = checkStanding(rules, { keyId: credential.keyId, secretHash: credential.secretHash, protocol: session.protocol, endpoint: session.endpoint.uuid });
      if (!refusal) continue;
      options.logger?.info({ session: session.id, agent: session.agentId, endpoint: session.endpoint.uuid, code: refusal.code, reason: refusal.message }, 'ending a tunnel that lost its standing');
      void session.close({ code: refusal.code, message: refusal.message }, graceMs);
    }
  };
  const onKey = (keyId: string) => judge(registry.sessionsOfKey(keyId));
  const onAccount = (id: number) => judge(registry.sessionsOfAccount(id));
  const onEndpoint = (uuid: string) => judge(registry.sessions(uuid));
  const onConnect = (session: AgentSession) => judge([session]);
  // A deploying agent stands on its application too: deleted, or moved to another endpoint, ends its tunnel.
  const onApplication = (uuid: string) => {
    for (const session of registry.sessions()) {
      if (session.deploy?.application !== uuid || !session.credential || !session.available) continue;
      const app = checkApplication(config, session.credential.accountId, { application: uuid, endpoint: session.endpoint.uuid, protocol: session.protocol });
      if (!('ok' in app)) continue;
      options.logger?.info({ session: session.id, agent: session.agentId, application: uuid, code: app.code }, 'ending a deploying agent whose application is gone');
      void session.close({ code: app.code, message: app.message }, graceMs);
    }
  };
  config.on('apiKey', onKey);
  config.on('account', onAccount);
  config.on('endpoint', onEndpoint);
  registry.on('connect', onConnect);
  config.on('application', onApplication);
  return () => {
    config.off('application', onApplication);
    config.off('apiKey', onKey);
    config.off('account', onAccount);
    config.off('endpoint', onEndpoint);
    registry.off('connect', onConnect);
  };
}
