// The credential-use recorder: last_used_at of basic users, settings tokens and endpoint API keys comes from what
// edges report in their heartbeats, latest use wins across edges, never moves back, and bad reports are ignored.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_CREDENTIAL_USE_ENTRIES, MemoryPresence, RedisPresence, type EdgeHeartbeat, type PresenceStore } from '../../src/shared/presence.ts';
import { credentialUseRecorder, latestUses } from '../../src/worker/credential-use.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

function heartbeat(node: string, use: EdgeHeartbeat['credential_use']): EdgeHeartbeat {
  return { node, region: 'test', version: 0, heartbeat_at: new Date().toISOString(), agents: [], credential_use: use };
}

describe('latestUses', () => {
  it('keeps the latest use of each id across edges, for users and tokens apart', () => {
    const uses = latestUses([
      heartbeat('a', { basic_users: { '1': '2030-01-01T00:00:00Z' }, tokens: { '1': '2030-01-02T00:00:00Z', '2': '2030-01-01T00:00:00Z' } }),
      heartbeat('b', { basic_users: { '1': '2030-01-03T00:00:00Z' }, tokens: { '2': '2029-12-31T00:00:00Z' } }),
      heartbeat('c', undefined),
    ]);
    assert.deepEqual([...uses.basicUsers], [[1, Date.parse('2030-01-03T00:00:00Z')]]);
    assert.deepEqual(
      [...uses.tokens].sort(([x], [y]) => x - y),
      [
        [1, Date.parse('2030-01-02T00:00:00Z')],
        [2, Date.parse('2030-01-01T00:00:00Z')],
      ],
    );
  });

  it('ignores ids that are not row ids and times that do not parse', () => {
    const uses = latestUses([
      heartbeat('a', {
        basic_users: { abc: '2030-01-01T00:00:00Z', '0': '2030-01-01T00:00:00Z', '-3': '2030-01-01T00:00:00Z', '07': '2030-01-01T00:00:00Z', '5': 'yesterday' },
        tokens: { '9': 42 as unknown as string, '1e3': '2030-01-01T00:00:00Z', '99999999999999999999': '2030-01-01T00:00:00Z' },
      }),
      { ...heartbeat('b', undefined), credential_use: { basic_users: 'nope' as unknown as Record<string, string> } },
    ]);
    assert.equal(uses.basicUsers.size, 0);
    assert.equal(uses.tokens.size, 0);
  });

  it('files rbac-client:<id> uses, from users and tokens alike, under the client', () => {
    const uses = latestUses([
      heartbeat('a', { basic_users: { 'rbac-client:7': '2030-01-01T00:00:00Z', '7': '2030-01-05T00:00:00Z' }, tokens: { 'rbac-client:8': '2030-01-02T00:00:00Z' } }),
      heartbeat('b', { tokens: { 'rbac-client:7': '2030-01-03T00:00:00Z', 'rbac-client:0': '2030-01-01T00:00:00Z', 'rbac-client:x': '2030-01-01T00:00:00Z', 'rbac-client:9': 'later' } }),
    ]);
    assert.deepEqual(
      [...uses.rbacClients].sort(([x], [y]) => x - y),
      [
        [7, Date.parse('2030-01-03T00:00:00Z')],
        [8, Date.parse('2030-01-02T00:00:00Z')],
      ],
    );
    assert.deepEqual([...uses.basicUsers], [[7, Date.parse('2030-01-05T00:00:00Z')]], 'a settings user with the same number is another credential');
    assert.equal(uses.tokens.size, 0);
  });

  it('reads at most MAX_CREDENTIAL_USE_ENTRIES ids of one edge', () => {
    const many = Object.fromEntries(Array.from({ length: MAX_CREDENTIAL_USE_ENTRIES + 50 }, (_, i) => [String(i + 1), '2030-01-01T00:00:00Z']));
    assert.equal(latestUses([heartbeat('a', { tokens: many })]).tokens.size, MAX_CREDENTIAL_USE_ENTRIES);
  });
});

describe('credential-use recorder', () => {
  let t: TestNode;
  let presence: PresenceStore;
  let key: string;
  let uuid: string;
  let userId: number;
  let tokenId: number;
  let apiKeyId: number;

  before(async () => {
    t = await startTestNode();
    // The store the worker reads: Redis under the node's prefix when configured, else an in-process one of our own.
    presence = process.env.REDIS_URL ? new RedisPresence(process.env.REDIS_URL, t.env.EDGE_REDIS_PREFIX, 60_000) : new MemoryPresence(60_000);
    const user = await t.createUser('business');
    key = user.api_key;
    const ep = await t.api('POST', '/v1/endpoints', { key, body: {} });
    uuid = ep.body.uuid;
    const basic = await t.api('PUT', `/v1/endpoints/${uuid}/settings`, { key, body: { mode: 'basic', basic_users: [{ username: 'alice', password: 'pw' }] } });
    assert.equal(basic.status, 200, basic.text);
    userId = basic.body.basic_users[0].id;
    const api = await t.api('POST', `/v1/endpoints/${uuid}/api-keys`, { key, body: { name: 'robot' } });
    apiKeyId = api.body.id;
    const token = await t.api('PUT', `/v1/endpoints/${uuid}/settings`, { key, body: { mode: 'token', tokens: [{ name: 'ci', token: 'ci-token-0123456789abcdef' }] } });
    assert.equal(token.status, 200, token.text);
    tokenId = token.body.tokens.find((x: any) => x.source === 'settings').id;
  });
  after(async () => {
    await presence.remove('edge-a').catch(() => {});
    await presence.remove('edge-b').catch(() => {});
    await presence.close();
    await t.close();
  });

  const settings = async () => (await t.api('GET', `/v1/endpoints/${uuid}/settings`, { key })).body;
  const usedAt = async () => {
    const s = await settings();
    const keys = (await t.api('GET', `/v1/endpoints/${uuid}/api-keys`, { key })).body.items;
    return {
      user: s.basic_users.find((u: any) => u.id === userId).last_used_at as string | undefined,
      token: s.tokens.find((x: any) => x.id === tokenId).last_used_at as string | undefined,
      apiKey: keys.find((x: any) => x.id === apiKeyId).last_used_at as string | null,
    };
  };

  it('writes last_used_at from reported heartbeats, the latest use across edges winning', async () => {
    assert.deepEqual(await usedAt(), { user: undefined, token: undefined, apiKey: null }, 'never used: omitted in settings, null in the key list');
    const early = new Date(Date.now() - 60_000).toISOString();
    const late = new Date(Date.now() - 10_000).toISOString();
    await presence.report(heartbeat('edge-a', { basic_users: { [userId]: early }, tokens: { [tokenId]: late } }));
    await presence.report(heartbeat('edge-b', { basic_users: { [userId]: late }, tokens: { [apiKeyId]: early } }));
    const recorder = credentialUseRecorder(t.node.db!, presence);
    assert.equal(await recorder.pass(), 3);
    assert.deepEqual(await usedAt(), { user: late, token: late, apiKey: early });
    assert.equal(await recorder.pass(), 0, 'nothing newer since the last pass: nothing written');
  });

  it('never moves last_used_at back, and takes a time ahead of the clock as now', async () => {
    const before = await usedAt();
    await presence.report(heartbeat('edge-a', { basic_users: { [userId]: '2001-01-01T00:00:00Z' }, tokens: { [apiKeyId]: '2001-01-01T00:00:00Z' } }));
    await presence.remove('edge-b');
    // A fresh recorder (another worker, or a restart) has no memory of what was written.
    assert.equal(await credentialUseRecorder(t.node.db!, presence).pass(), 0);
    assert.deepEqual(await usedAt(), before);

    await presence.report(heartbeat('edge-a', { tokens: { [tokenId]: '2999-01-01T00:00:00Z' } }));
    const sent = Date.now();
    assert.equal(await credentialUseRecorder(t.node.db!, presence).pass(), 1);
    const token = Date.parse((await usedAt()).token!);
    assert.ok(token <= Date.now() && token >= sent - 5_000, `clamped to the database's now, got ${new Date(token).toISOString()}`);
  });

  it('ignores ids of credentials that do not exist', async () => {
    const before = await usedAt();
    await presence.report(heartbeat('edge-a', { basic_users: { '987654321': new Date().toISOString() }, tokens: { '987654321': new Date().toISOString() } }));
    assert.equal(await credentialUseRecorder(t.node.db!, presence).pass(), 0);
    assert.deepEqual(await usedAt(), before);
  });

  it('writes an RBAC client’s last_used_at from the uses of its password or token', async () => {
    const [client] = (
      await t.node.db!.query<{ id: number }>(
        "INSERT INTO rbac_clients (endpoint_id, identifier) SELECT id, 'robot' FROM endpoints WHERE uuid = $1 RETURNING id",
        [uuid],
      )
    ).rows;
    const lastUsed = async () => (await t.node.db!.query<{ last_used_at: Date | null }>('SELECT last_used_at FROM rbac_clients WHERE id = $1', [client.id])).rows[0].last_used_at;
    assert.equal(await lastUsed(), null);
    const early = new Date(Date.now() - 50_000).toISOString();
    const late = new Date(Date.now() - 5_000).toISOString();
    await presence.report(heartbeat('edge-a', { basic_users: { [`rbac-client:${client.id}`]: early } }));
    await presence.report(heartbeat('edge-b', { tokens: { [`rbac-client:${client.id}`]: late, 'rbac-client:987654321': late } }));
    const before = await usedAt();
    assert.equal(await credentialUseRecorder(t.node.db!, presence).pass(), 1);
    assert.equal((await lastUsed())?.toISOString(), late);
    assert.deepEqual(await usedAt(), before, 'the settings credentials with other ids are untouched');
    await presence.remove('edge-b');
    await presence.report(heartbeat('edge-a', {}));
  });

  it('fails the pass when presence cannot be read, so the job skips it instead of reading "no use"', async () => {
    const broken: PresenceStore = {
      report: async () => {},
      remove: async () => {},
      edges: async () => {
        throw new Error('presence down');
      },
      close: async () => {},
    };
    await assert.rejects(credentialUseRecorder(t.node.db!, broken).pass(), /presence down/);
  });
});
