// Agent credentials after admission: a live tunnel ends, with the refusal code in its GOAWAY, when the feed brings a
// revoked key, a suspended account or a removed tunnels:connect; the agent (library and CLI) stops, never retries.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { AddressInfo } from 'node:net';
import { startAgent, TunnelRefusedError, type Agent } from '../../../src/agent/agent.ts';
import { apiKeyId } from '../../../src/shared/api-keys.ts';
import type { ApiKeyConfig } from '../../../src/shared/snapshot.ts';
import { visit } from '../../helpers/http.ts';
import { eventually } from '../../helpers/eventually.ts';
import { startTestNode, type TestNode } from '../../helpers/node.ts';
import { BIN, cleanEnv } from '../../helpers/serve-process.ts';

/** A tunnel that is never ended must fail its test, not hang the suite. */
const LIMIT = { timeout: 30_000 };

describe('agent credentials while connected', () => {
  let t: TestNode;
  let service: http.Server;
  let servicePort: number;
  let edgeUrl: string;
  const agents: Agent[] = [];

  before(async () => {
    t = await startTestNode();
    service = http.createServer((_req, res) => res.end('served'));
    await new Promise<void>((r) => service.listen(0, '127.0.0.1', r));
    servicePort = (service.address() as AddressInfo).port;
    edgeUrl = `http://127.0.0.1:${t.node.edge!.httpPort}`;
  });
  after(async () => {
    for (const a of agents) await a.stop(100);
    service.closeAllConnections();
    await new Promise<void>((r) => service.close(() => r()));
    await t.close();
  });

  /** The key's entry as this edge's mirror holds it, once `ready` accepts it. */
  function edgeKey(apiKey: string, ready: (k: ApiKeyConfig | undefined) => boolean): Promise<ApiKeyConfig | undefined> {
    return eventually(async () => {
      const k = t.node.edge!.config.apiKey(apiKeyId(apiKey));
      return ready(k) ? { k } : undefined;
    }).then(({ k }) => k);
  }

  async function endpointFor(key: string, headers: Record<string, string> = {}): Promise<{ uuid: string; hostname: string }> {
    const created = await t.api('POST', '/v1/endpoints', { key, body: {}, headers });
    assert.equal(created.status, 201, created.text);
    await eventually(async () => t.node.edge!.config.endpoint(created.body.uuid));
    return created.body;
  }

  async function connect(apiKey: string, endpoint: string): Promise<Agent> {
    const a = await startAgent({ edgeUrl, apiKey, endpoint, protocol: 'http', target: servicePort, backoff: { initialMs: 10, maxMs: 50 } });
    agents.push(a);
    return a;
  }

  /** Resolves with why the agent stopped; fails the test if it tries to reconnect first. */
  function stopped(a: Agent): Promise<TunnelRefusedError | null> {
    return new Promise((resolve, reject) => {
      a.once('reconnecting', (info) => reject(new Error(`the agent tried to reconnect: ${info.reason}`)));
      a.once('stopped', resolve);
    });
  }

  async function status(hostname: string): Promise<{ status: number; code?: string }> {
    const res = await visit(t.node.edge!.httpPort, hostname, '/', { headers: { accept: 'application/json' } });
    return { status: res.status, code: res.headers['x-edge-error'] as string | undefined };
  }

  /** The session's close reason as the edge's registry reported it. */
  function edgeDisconnect(endpoint: string): Promise<string> {
    return new Promise((resolve) => {
      const on = (session: { endpoint: { uuid: string } }, reason: { code: string }) => {
        if (session.endpoint.uuid !== endpoint) return;
        t.node.edge!.registry.off('disconnect', on);
        resolve(reason.code);
      };
      t.node.edge!.registry.on('disconnect', on);
    });
  }

  it('ends the tunnel of a revoked key with unauthorized: the agent stops without retrying, visitors get no_agent', LIMIT, async () => {
    const user = await t.createUser('pro');
    const endpoint = await endpointFor(user.api_key);
    const extra = await t.api('POST', '/v1/api-keys', { key: user.api_key, body: { name: 'agent' } });
    assert.equal(extra.status, 201);
    await edgeKey(extra.body.api_key, (k) => k !== undefined);
    const a = await connect(extra.body.api_key, endpoint.uuid);
    assert.equal((await status(endpoint.hostname)).status, 200);
    assert.equal(t.node.edge!.registry.sessionsOfKey(apiKeyId(extra.body.api_key)).length, 1);

    const why = stopped(a);
    const edgeSide = edgeDisconnect(endpoint.uuid);
    assert.equal((await t.api('DELETE', `/v1/api-keys/${extra.body.id}`, { key: user.api_key })).status, 204);
    const err = await why;
    assert.ok(err instanceof TunnelRefusedError);
    assert.equal(err.code, 'unauthorized');
    assert.equal(await edgeSide, 'unauthorized');
    assert.deepEqual(await status(endpoint.hostname), { status: 502, code: 'no_agent' });
    assert.equal(t.node.edge!.registry.sessionsOfKey(apiKeyId(extra.body.api_key)).length, 0);

    // The account's other key is untouched and still connects.
    const b = await connect(user.api_key, endpoint.uuid);
    assert.equal((await status(endpoint.hostname)).status, 200);
    await b.stop(100);
  });

  it('ends the tunnels of a suspended account with account_suspended, and refuses its agents at connect', LIMIT, async () => {
    const user = await t.createUser('pro');
    const endpoint = await endpointFor(user.api_key);
    const a = await connect(user.api_key, endpoint.uuid);
    assert.equal((await status(endpoint.hostname)).status, 200);

    const why = stopped(a);
    assert.equal((await t.api('POST', `/v1/admin/accounts/${user.account_id}/suspend`)).status, 200);
    const err = await why;
    assert.ok(err instanceof TunnelRefusedError);
    assert.equal(err.code, 'account_suspended');
    assert.equal((await status(endpoint.hostname)).code, 'no_agent');
    await assert.rejects(connect(user.api_key, endpoint.uuid), (e: unknown) => e instanceof TunnelRefusedError && e.code === 'account_suspended');
  });

  it('ends the tunnel when the plan stops allowing the protocol', LIMIT, async () => {
    const user = await t.createUser('pro');
    const endpoint = await endpointFor(user.api_key);
    const a = await startAgent({ edgeUrl, apiKey: user.api_key, endpoint: endpoint.uuid, protocol: 'tcp', target: servicePort });
    agents.push(a);
    const why = stopped(a);
    assert.equal((await t.api('PUT', `/v1/admin/accounts/${user.account_id}/plan`, { body: { plan: 'free' } })).status, 200);
    assert.equal((await why)?.code, 'protocol_not_allowed');
  });

  it('ends the tunnel of a deleted endpoint with endpoint_not_found', LIMIT, async () => {
    const user = await t.createUser('pro');
    const endpoint = await endpointFor(user.api_key);
    const a = await connect(user.api_key, endpoint.uuid);
    const why = stopped(a);
    assert.equal((await t.api('DELETE', `/v1/endpoints/${endpoint.uuid}`, { key: user.api_key })).status, 204);
    assert.equal((await why)?.code, 'endpoint_not_found');
  });

  describe('organization members', () => {
    let owner: Awaited<ReturnType<TestNode['createUser']>>;
    let member: Awaited<ReturnType<TestNode['createUser']>>;
    let org: number;
    let orgKey: { id: number; api_key: string };
    let endpoint: { uuid: string; hostname: string };

    before(async () => {
      owner = await t.createUser('pro');
      member = await t.createUser('pro');
      const created = await t.api('POST', '/v1/organizations', { key: owner.api_key, body: { name: 'acme' } });
      assert.equal(created.status, 201);
      org = created.body.id;
      const added = await t.api('POST', `/v1/organizations/${org}/members`, { key: owner.api_key, body: { email: member.email, permissions: ['traffic:read'] } });
      assert.equal(added.status, 201, added.text);
      const key = await t.api('POST', '/v1/api-keys', { key: member.api_key, body: { name: 'org agent', account_id: org } });
      assert.equal(key.status, 201, key.text);
      orgKey = key.body;
      endpoint = await endpointFor(owner.api_key, { 'x-account-id': String(org) });
    });

    async function setPermissions(permissions: string[]): Promise<void> {
      const res = await t.api('PUT', `/v1/organizations/${org}/members/${member.id}`, { key: owner.api_key, body: { permissions } });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body.permissions, permissions);
    }

    it('refuses the agent of a member with only traffic:read, at connect and in the one-shot flow', LIMIT, async () => {
      const published = await edgeKey(orgKey.api_key, (k) => k !== undefined);
      assert.deepEqual(published?.permissions, ['traffic:read']);
      await assert.rejects(connect(orgKey.api_key, endpoint.uuid), (e: unknown) => e instanceof TunnelRefusedError && e.code === 'permission_denied' && /tunnels:connect/.test(e.message));
      await assert.rejects(
        startAgent({ edgeUrl, apiKey: orgKey.api_key, protocol: 'http', target: servicePort }),
        (e: unknown) => e instanceof TunnelRefusedError && e.code === 'permission_denied',
      );
      assert.equal((await status(endpoint.hostname)).code, 'no_agent');
    });

    it('requires tunnels:connect to create an ephemeral endpoint through the API, endpoints:write or not', LIMIT, async () => {
      await setPermissions(['endpoints:write']);
      const res = await t.api('POST', '/v1/endpoints/ephemeral', { key: orgKey.api_key, body: {} });
      assert.equal(res.status, 403);
      assert.equal(res.body.code, 'permission_denied');
      assert.deepEqual(res.body.detail, { permission: 'tunnels:connect' });
    });

    it('admits a member granted tunnels:connect, and ends the tunnel when the permission is removed', LIMIT, async () => {
      await setPermissions(['traffic:read', 'tunnels:connect']);
      await edgeKey(orgKey.api_key, (k) => k?.permissions?.includes('tunnels:connect') === true);
      const a = await connect(orgKey.api_key, endpoint.uuid);
      assert.equal((await status(endpoint.hostname)).status, 200);

      const why = stopped(a);
      await setPermissions(['traffic:read']);
      const err = await why;
      assert.ok(err instanceof TunnelRefusedError);
      assert.equal(err.code, 'permission_denied');
      assert.deepEqual(await status(endpoint.hostname), { status: 502, code: 'no_agent' });
    });

    it('keeps the owner admitted: owners hold tunnels:connect without it being listed', LIMIT, async () => {
      const a = await connect(owner.api_key, endpoint.uuid).catch((e) => e);
      // The owner's key is bound to the owner's personal account, so the organization's endpoint reads as missing;
      // a key bound to the organization is admitted.
      assert.ok(a instanceof TunnelRefusedError && a.code === 'endpoint_not_found');
      const key = await t.api('POST', '/v1/api-keys', { key: owner.api_key, body: { account_id: org } });
      await edgeKey(key.body.api_key, (k) => k !== undefined);
      assert.ok(t.node.edge!.config.apiKey(apiKeyId(key.body.api_key))?.permissions?.includes('tunnels:connect'));
      const b = await connect(key.body.api_key, endpoint.uuid);
      assert.equal((await status(endpoint.hostname)).status, 200);
      await b.stop(100);
    });
  });

  it('`edge agent` exits 3 naming the code when its key is revoked while connected', LIMIT, async () => {
    const user = await t.createUser('pro');
    const endpoint = await endpointFor(user.api_key);
    const extra = await t.api('POST', '/v1/api-keys', { key: user.api_key, body: { name: 'cli' } });
    await edgeKey(extra.body.api_key, (k) => k !== undefined);
    const child = spawn(process.execPath, [BIN, 'agent', 'http', String(servicePort), '--edge', edgeUrl, '--endpoint', endpoint.uuid], {
      env: { ...cleanEnv({}), EDGE_API_KEY: extra.body.api_key, EDGE_LOG_LEVEL: 'silent' },
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await new Promise<void>((resolve, reject) => {
        void exited.then((code) => reject(new Error(`agent exited early with ${code}: ${stderr}`)));
        createInterface({ input: child.stdout }).on('line', (line) => {
          if (line.startsWith('Forwarding ')) resolve();
        });
      });
      assert.equal((await status(endpoint.hostname)).status, 200);
      assert.equal((await t.api('DELETE', `/v1/api-keys/${extra.body.id}`, { key: user.api_key })).status, 204);
      assert.equal(await exited, 3);
      assert.match(stderr, /stopped by the edge \(unauthorized\)/);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
