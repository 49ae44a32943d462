// The relay's parts on their own (the whole path across processes is test/cluster/many-edges.test.ts): the fields a
// relayed stream carries and the ones refused, which peer is chosen, and who the relay listener lets in at all.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http2 from 'node:http2';
import { createLogger } from '../../../src/shared/log.ts';
import { MemoryPresence, type EdgeHeartbeat } from '../../../src/shared/presence.ts';
import { derivedCredentials, type RelayCredentials } from '../../../src/edge/relay/credentials.ts';
import { addRelayFields, readRelayFields, withoutRelayFields } from '../../../src/edge/relay/headers.ts';
import { RelayPeers } from '../../../src/edge/relay/peers.ts';
import { RelayServer } from '../../../src/edge/relay/server.ts';
import { TunnelRegistry } from '../../../src/edge/tunnels/registry.ts';

const logger = createLogger('silent');

describe('relay fields', () => {
  it('carry the endpoint and the routing rule’s choice, and replace any a visitor sent under the same prefix', () => {
    const headers = addRelayFields({ ':path': '/x', 'x-edge-relay-endpoint': 'forged', 'x-edge-relay-agent': 'forged' }, 'ep-1', { tags: ['api', 'eu'], protocol: 'http' });
    assert.deepEqual(readRelayFields(headers as never), { endpoint: 'ep-1', pick: { tags: ['api', 'eu'], protocol: 'http' } });
    assert.equal(headers['x-edge-relay-agent'], undefined);
    assert.deepEqual(withoutRelayFields(headers as never), { ':path': '/x' });
  });

  it('are refused when missing or malformed, so the stream is refused rather than guessed at', () => {
    for (const bad of [
      {},
      { 'x-edge-relay-endpoint': 'a/b' },
      { 'x-edge-relay-endpoint': 'ep', 'x-edge-relay-agent': 'has space' },
      { 'x-edge-relay-endpoint': 'ep', 'x-edge-relay-tags': 'ok,-bad' },
      { 'x-edge-relay-endpoint': 'ep', 'x-edge-relay-tags': Array.from({ length: 17 }, (_, i) => `t${i}`).join(',') },
      { 'x-edge-relay-endpoint': 'ep', 'x-edge-relay-protocol': 'smtp' },
    ]) {
      assert.equal(readRelayFields(bad as never), null, JSON.stringify(bad));
    }
  });
});

function beat(node: string, region: string, load: number, agents: Array<{ endpoint: string; tags?: string[]; protocol?: string }>): EdgeHeartbeat {
  return {
    node,
    region,
    version: 1,
    heartbeat_at: new Date().toISOString(),
    relay: { host: '127.0.0.1', port: 1 },
    load,
    agents: agents.map((a, i) => ({ endpoint: a.endpoint, agent_id: `${node}-agent-${i}`, tags: a.tags ?? [], protocol: a.protocol ?? 'http', connected_at: new Date().toISOString() })),
  };
}

describe('choosing a peer', () => {
  let credentials: RelayCredentials;
  before(async () => {
    credentials = await derivedCredentials(randomBytes(32), 'edge-a');
  });

  async function peersOf(heartbeats: EdgeHeartbeat[], regionOrder: string[] = []): Promise<RelayPeers> {
    const presence = new MemoryPresence(10_000);
    for (const h of heartbeats) await presence.report(h);
    const peers = new RelayPeers({ presence, node: 'edge-a', region: 'eu', regionOrder, credentials, timeoutMs: 1_000, connectTimeoutMs: 500, failureHoldMs: 1_000, refreshMs: 60_000, logger });
    await peers.start();
    return peers;
  }

  it('takes the nearest region first (this edge’s own, then the configured order), then the least loaded', async () => {
    const peers = await peersOf([beat('edge-us', 'us', 0, [{ endpoint: 'ep' }]), beat('edge-eu-busy', 'eu', 9, [{ endpoint: 'ep' }]), beat('edge-eu', 'eu', 2, [{ endpoint: 'ep' }])]);
    assert.equal(peers.target('ep')?.peer, 'edge-eu');
    peers.close();
    const ordered = await peersOf([beat('edge-us', 'us', 5, [{ endpoint: 'ep' }]), beat('edge-ap', 'ap', 0, [{ endpoint: 'ep' }])], ['us', 'ap']);
    assert.equal(ordered.target('ep')?.peer, 'edge-us');
    ordered.close();
  });

  it('only takes edges whose agents match the routing rule, and never itself', async () => {
    const peers = await peersOf([beat('edge-a', 'eu', 0, [{ endpoint: 'ep', tags: ['api'] }]), beat('edge-b', 'us', 0, [{ endpoint: 'ep', tags: ['web'] }]), beat('edge-c', 'ap', 0, [{ endpoint: 'ep', tags: ['api'], protocol: 'tcp' }])]);
    assert.equal(peers.target('ep', { tags: ['API'] })?.peer, 'edge-c');
    assert.equal(peers.target('ep', { tags: ['api'], protocol: 'http' }), null);
    assert.equal(peers.target('other'), null);
    peers.close();
  });

  it('passes over a peer that failed, for the failure hold', async () => {
    const peers = await peersOf([beat('edge-b', 'eu', 0, [{ endpoint: 'ep' }]), beat('edge-c', 'us', 0, [{ endpoint: 'ep' }])]);
    // edge-b advertises port 1, where nothing listens: the connection fails and edge-b is held.
    const stream = peers.target('ep')!.request({ ':method': 'GET', ':path': '/' });
    await new Promise((resolve) => stream.on('close', resolve).on('error', () => {}));
    assert.equal(peers.target('ep')?.peer, 'edge-c');
    assert.ok(peers.counts.failed >= 1);
    peers.close();
  });
});

describe('the relay listener', () => {
  let server: RelayServer;
  let port: number;
  let ours: RelayCredentials;
  const seed = randomBytes(32);
  before(async () => {
    server = new RelayServer({ registry: new TunnelRegistry(), credentials: await derivedCredentials(seed, 'edge-b'), logger });
    port = await server.listen(0, '127.0.0.1');
    ours = await derivedCredentials(seed, 'edge-a');
  });
  after(() => server.close());

  const connect = (creds: Partial<RelayCredentials>) =>
    new Promise<{ status?: number; code?: string; rst?: number }>((resolve) => {
      const session = http2.connect(`https://127.0.0.1:${port}`, { ca: creds.ca, cert: creds.cert, key: creds.key, servername: creds.servername, minVersion: 'TLSv1.3' });
      session.on('error', (err: Error & { code?: string }) => resolve({ code: err.code ?? err.message }));
      const stream = session.request({ ':path': '/', 'x-edge-relay-endpoint': 'no-such-endpoint' });
      stream.on('response', (h) => resolve({ status: Number(h[':status']) }));
      stream.on('close', () => {
        resolve({ rst: stream.rstCode });
        session.close();
      });
      stream.on('error', () => {});
    });

  it('refuses a stream for an endpoint with no agent here (REFUSED_STREAM: the relaying edge answers as for a missing agent)', async () => {
    assert.deepEqual(await connect(ours), { rst: http2.constants.NGHTTP2_REFUSED_STREAM });
  });

  it('lets nobody in without a certificate from the cluster’s CA', async () => {
    const foreign = await derivedCredentials(randomBytes(32), 'intruder');
    const refused = await connect({ ...foreign, ca: ours.ca });
    assert.ok(refused.code !== undefined || refused.rst !== http2.constants.NGHTTP2_REFUSED_STREAM, JSON.stringify(refused));
    assert.equal(refused.status, undefined);
    const anonymous = await connect({ ca: ours.ca, servername: ours.servername });
    assert.equal(anonymous.status, undefined);
    assert.notEqual(anonymous.rst, http2.constants.NGHTTP2_REFUSED_STREAM);
  });
});

describe('a peer that accepts a stream and never answers', () => {
  const seed = randomBytes(32);
  let silent: http2.Http2SecureServer;
  let port: number;
  const held: http2.ServerHttp2Stream[] = [];
  before(async () => {
    const creds = await derivedCredentials(seed, 'edge-b');
    silent = http2.createSecureServer({ ca: creds.ca, cert: creds.cert, key: creds.key, requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.3' });
    // Takes the stream and sends nothing back: no headers, no reset.
    silent.on('stream', (stream) => held.push(stream));
    port = await new Promise<number>((resolve) => silent.listen(0, '127.0.0.1', () => resolve((silent.address() as { port: number }).port)));
  });
  after(() => {
    for (const stream of held) stream.destroy();
    silent.close();
  });

  it('fails the stream with EDGE_RELAY_TIMEOUT (the visitor’s 504 agent_timeout) after the relay timeout, and holds the peer', async () => {
    const presence = new MemoryPresence(10_000);
    await presence.report({ ...beat('edge-b', 'eu', 0, [{ endpoint: 'ep' }]), relay: { host: '127.0.0.1', port } });
    const credentials = await derivedCredentials(seed, 'edge-a');
    const peers = new RelayPeers({ presence, node: 'edge-a', region: 'eu', regionOrder: [], credentials, timeoutMs: 300, connectTimeoutMs: 2_000, failureHoldMs: 60_000, refreshMs: 60_000, logger });
    await peers.start();
    try {
      const stream = peers.target('ep')!.request({ ':method': 'GET', ':path': '/' });
      const err = await new Promise<Error & { code?: string }>((resolve) => stream.on('error', resolve));
      assert.equal(err.code, 'EDGE_RELAY_TIMEOUT');
      assert.equal(held.length, 1, 'the peer did receive the stream');
      assert.equal(peers.target('ep'), null, 'the silent peer is passed over for the failure hold');
    } finally {
      peers.close();
    }
  });
});
