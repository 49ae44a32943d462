// The one rule set that admits an agent and keeps it connected (checkStanding), against a config mirror fed by
// hand: each rule refuses with its own code, and a key entry written before permissions were published still admits.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { checkStanding, type AdmissionRules, type Standing } from '../../src/edge/agent-auth.ts';
import { isRetryableRefusal } from '../../src/shared/tunnel/protocol.ts';
import { EndpointCache } from '../../src/edge/endpoint-cache.ts';
import { createLogger } from '../../src/shared/log.ts';
import type { Plan } from '../../src/shared/plans.ts';
import { TOPICS, type AccountConfig, type ApiKeyConfig, type EndpointConfig } from '../../src/shared/snapshot.ts';
import { endpointConfig } from '../helpers/endpoint-config.ts';

const plan = (regions: string[], protocols: Plan['protocols']) => ({ allowed_regions: regions, protocols }) as unknown as Plan;
const PLANS = { pro: plan(['*'], ['http', 'tcp']), eu: plan(['eu-west'], ['http']) };

const KEY: ApiKeyConfig = { key_id: 'k1', secret_hash: 'aGFzaA==', user_id: 7, account_id: 3, permissions: ['traffic:read', 'tunnels:connect'] };

function endpoint(uuid: string, extra: Partial<EndpointConfig> = {}): EndpointConfig {
  return endpointConfig({ uuid, user_id: 7, account_id: 3, hostname: `${uuid}.edge.localhost`, ...extra });
}

/** A mirror holding the key, its account, and endpoints e1 (the account's) and e2 (another account's). */
function rules(overrides: { key?: Partial<ApiKeyConfig> | null; account?: Partial<AccountConfig>; region?: string } = {}): AdmissionRules {
  const config = new EndpointCache({ logger: createLogger('silent') });
  let version = 0;
  const put = (topic: string, key: string, data: unknown) => config.mirror.apply({ version: ++version, topic, key, data });
  if (overrides.key !== null) put(TOPICS.apiKey, 'k1', { ...KEY, ...overrides.key });
  put(TOPICS.account, '3', { id: 3, plan: 'pro', suspended: false, ...overrides.account });
  put(TOPICS.endpoint, 'e1', endpoint('e1'));
  put(TOPICS.endpoint, 'e2', endpoint('e2', { account_id: 4 }));
  put(TOPICS.endpoint, 'e3', endpoint('e3', { status: 'disabled' }));
  put(TOPICS.endpoint, 'e4', endpoint('e4', { status: 'error' }));
  return { config, plans: PLANS, region: overrides.region ?? 'local' };
}

const standing: Standing = { keyId: 'k1', secretHash: 'aGFzaA==', protocol: 'http', endpoint: 'e1' };
const code = (r: AdmissionRules, s: Partial<Standing> = {}) => checkStanding(r, { ...standing, ...s })?.code ?? null;

describe('checkStanding', () => {
  it('admits a key whose holder has tunnels:connect, to its account’s endpoint or to none yet (one-shot)', () => {
    assert.equal(code(rules()), null);
    assert.equal(code(rules(), { endpoint: undefined }), null);
  });

  it('refuses a key that is gone, or published again with another hash, as unauthorized', () => {
    assert.equal(code(rules({ key: null })), 'unauthorized');
    assert.equal(code(rules({ key: { secret_hash: 'b3RoZXI=' } })), 'unauthorized');
  });

  it('refuses a suspended account, a region or protocol the plan excludes, and an unknown plan', () => {
    assert.equal(code(rules({ account: { suspended: true } })), 'account_suspended');
    assert.equal(code(rules({ account: { plan: 'eu' } })), 'region_not_allowed');
    assert.equal(code(rules({ account: { plan: 'eu' }, region: 'eu-west' })), null);
    assert.equal(code(rules(), { protocol: 'udp' }), 'protocol_not_allowed');
    assert.equal(code(rules({ account: { plan: 'gold' } })), 'forbidden');
  });

  it('refuses a holder without tunnels:connect as permission_denied, whatever else they hold', () => {
    assert.equal(code(rules({ key: { permissions: ['traffic:read', 'endpoints:update', 'members:manage'] } })), 'permission_denied');
    assert.equal(code(rules({ key: { permissions: [] } })), 'permission_denied');
  });

  it('reads a key entry without permissions (written before edges checked them) as the rule of that time: admitted', () => {
    assert.equal(code(rules({ key: { permissions: undefined } })), null);
  });

  it("refuses another account's endpoint as missing, and a disabled one", () => {
    assert.equal(code(rules(), { endpoint: 'e2' }), 'endpoint_not_found');
    assert.equal(code(rules(), { endpoint: 'nope' }), 'endpoint_not_found');
    assert.equal(code(rules(), { endpoint: 'e3' }), 'forbidden');
  });

  it('checkStanding admits an endpoint in error (the pipeline refuses its visitors): refused as unavailable, which the agent retries', () => {
    const refusal = checkStanding(rules(), { ...standing, endpoint: 'e4' });
    assert.equal(refusal?.code, 'unavailable');
    assert.match(refusal!.message, /error state/);
    assert.equal(isRetryableRefusal('unavailable'), true, 'the agent comes back once the endpoint recovers');
  });
});
