// Dedicated-port activation through a whole `edge serve` at its default settings: the endpoint turns `active` by
// following the heartbeat that lists its port bound, not on the janitor's 30 s sweep (docs/dedicated-ports.md).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import { MemoryPresence, type EdgeHeartbeat } from '../../src/shared/presence.ts';
import type { Database } from '../../src/store/db.ts';
import type { ProvisioningEndpoint } from '../../src/store/endpoint-status.ts';
import { portActivator } from '../../src/worker/ports.ts';
import { eventually } from '../helpers/eventually.ts';
import { capturedLogger } from '../helpers/logger.ts';
import { freeTcpPort } from '../helpers/free-port.ts';
import { copyPgliteTemplate } from '../helpers/pglite-template.ts';
import { cleanEnv, serveNode, type ServedNode } from '../helpers/serve-process.ts';

const ADMIN_KEY = 'port-activation-admin-key-0123456789';
/** The default EDGE_JANITOR_INTERVAL_MS: the sweep this test must not wait for. */
const JANITOR_SWEEP_MS = 30_000;

/** Sends `payload` to the port and resolves with what comes back once the far side ends. */
function echoThrough(port: number, payload: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port, allowHalfOpen: true }, () => socket.end(payload));
    let got = '';
    socket.on('data', (d) => (got += d));
    socket.on('end', () => resolve(got));
    socket.on('error', reject);
  });
}

describe('dedicated port activation follows the heartbeat', () => {
  let dir: string;
  let node: ServedNode;
  let echo: net.Server;
  let agent: Agent | undefined;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'edge-port-activation-'));
    await copyPgliteTemplate(join(dir, 'pglite'));
    // Nothing but what a test needs to run beside others (loopback, ephemeral listener ports, a known admin key):
    // the janitor, presence and port-activation intervals are the defaults.
    node = await serveNode(cleanEnv({ EDGE_DATA_DIR: dir, EDGE_ADMIN_API_KEY: ADMIN_KEY }));
    echo = net.createServer({ allowHalfOpen: true }, (s) => {
      s.on('error', () => {});
      s.pipe(s);
    });
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  });
  after(async () => {
    await agent?.stop();
    await node?.stop();
    await new Promise<void>((r) => (echo ? echo.close(() => r()) : r()));
    await rm(dir, { recursive: true, force: true });
  });

  // The timeout is the assertion's bound: the worker's first full pass ran at start, before the endpoint existed,
  // and the next one is 30 s later, so only the heartbeat path can make the endpoint active within it.
  it('a dedicated TCP port carrying an echo turns its endpoint active before the janitor sweep', { timeout: JANITOR_SWEEP_MS * 2 / 3 }, async () => {
    const api = async (method: string, path: string, key: string, body?: unknown) => {
      const res = await fetch(`http://127.0.0.1:${node.control}${path}`, {
        method,
        headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: await res.json() };
    };
    // business: dedicated ports and tcp tunnels with no verification gate.
    const user = await api('POST', '/v1/admin/users', ADMIN_KEY, { email: 'ports@example.test', plan: 'business' });
    assert.equal(user.status, 201, JSON.stringify(user.body));
    const key = user.body.api_key as string;
    const endpoint = await api('POST', '/v1/endpoints', key, {});
    assert.equal(endpoint.status, 201, JSON.stringify(endpoint.body));
    const uuid = endpoint.body.uuid as string;
    const port = await freeTcpPort();
    const assigned = await api('PUT', `/v1/endpoints/${uuid}/ports`, key, { dedicated_tcp_port: port });
    assert.deepEqual(assigned, { status: 200, body: { ok: true, dedicated_tcp_port: port, dedicated_udp_port: null } });

    agent = await startAgent({ edgeUrl: `http://127.0.0.1:${node.http}`, apiKey: key, endpoint: uuid, protocol: 'tcp', target: (echo.address() as AddressInfo).port });
    // The edge binds the port once the assignment reaches it through the feed: until then a connect is refused.
    const echoed = await eventually(() => echoThrough(port, 'ping').catch(() => undefined));
    assert.equal(echoed, 'ping');

    const status = async () => (await api('GET', `/v1/endpoints/${uuid}`, key)).body.status as string;
    await eventually(async () => ((await status()) === 'active' ? true : undefined), JANITOR_SWEEP_MS);
  });

});

describe('portActivator', () => {
  const candidate: ProvisioningEndpoint = { id: 7, uuid: 'e-7', dedicated_tcp_port: 4000, dedicated_udp_port: null, feed_version: 5 };
  const beat = (version: number, ports: EdgeHeartbeat['ports']): EdgeHeartbeat =>
    ({ node: 'edge-1', region: 'local', version, heartbeat_at: new Date().toISOString(), agents: [], ports });

  /** A store holding one provisioning endpoint whose guarded write always loses (so it keeps waiting). */
  function fakeStore() {
    const counts = { reads: 0, writes: 0 };
    const db = {
      engine: 'pglite',
      schema: 'public',
      query: async () => {
        counts.reads++;
        return { rows: [candidate] };
      },
      transaction: async () => {
        counts.writes++;
        return false;
      },
    } as unknown as Database;
    return { db, counts };
  }

  it('reads the store only when a heartbeat shows a port newly bound, a waiting endpoint open, or the sweep is due', async () => {
    const { db, counts } = fakeStore();
    const presence = new MemoryPresence(60_000);
    let clock = 0;
    const job = portActivator(db, presence, { intervalMs: 60_000, sweepMs: 30_000, logger: capturedLogger('info').logger, now: () => clock });
    await job.sweep(); // the first read is a full pass
    assert.deepEqual(counts, { reads: 1, writes: 0 });
    await job.sweep();
    assert.deepEqual(counts, { reads: 1, writes: 0 }, 'nothing new: presence read, store left alone');

    // The port listed by an edge that has not applied the assignment yet: newly bound, judged, not open.
    await presence.report(beat(4, [{ endpoint: 'e-7', protocol: 'tcp', port: 4000 }]));
    await job.sweep();
    assert.deepEqual(counts, { reads: 2, writes: 0 });
    await job.sweep();
    assert.deepEqual(counts, { reads: 2, writes: 0 });

    // The same port list from the edge once it applied the assignment: the waiting endpoint is open now.
    await presence.report(beat(5, [{ endpoint: 'e-7', protocol: 'tcp', port: 4000 }]));
    await job.sweep();
    assert.deepEqual(counts, { reads: 3, writes: 1 });

    // The write lost a race, nothing new arrives: only the sweep's cadence brings the next full pass.
    await presence.report(beat(5, []));
    await job.sweep();
    assert.deepEqual(counts, { reads: 3, writes: 1 });
    clock += 30_000;
    await job.sweep();
    assert.deepEqual(counts, { reads: 4, writes: 1 });
    await job.stop();
  });

  it('treats unreadable presence as unknown: no store read, and the port is judged at the next read', async () => {
    const { db, counts } = fakeStore();
    const presence = new MemoryPresence(60_000);
    let down = false;
    const edges = presence.edges.bind(presence);
    presence.edges = async () => {
      if (down) throw new Error('presence unreachable');
      return edges();
    };
    const { logger, lines } = capturedLogger('info');
    const job = portActivator(db, presence, { intervalMs: 60_000, sweepMs: 30_000, logger, now: () => 0 });
    await job.sweep();
    down = true;
    await presence.report(beat(5, [{ endpoint: 'e-7', protocol: 'tcp', port: 4000 }]));
    await job.sweep();
    assert.deepEqual(counts, { reads: 1, writes: 0 });
    assert.ok(lines.some((l) => l.msg === 'dedicated port activation skipped'), JSON.stringify(lines));
    down = false;
    await job.sweep();
    assert.deepEqual(counts, { reads: 2, writes: 1 });
    await job.stop();
  });
});
