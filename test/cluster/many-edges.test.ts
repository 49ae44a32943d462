// Many edges as one, with real processes (src/cluster): control, worker and three edges meeting through a private
// Redis and PostgreSQL. Visitors reach any edge; agents sit on some; faults are injected on purpose while traffic
// flows (an edge killed, an edge frozen, Redis killed, PostgreSQL restarted, a bad network to Redis) and each test
// says what a user sees: which requests may fail, until when, and that nothing accepted was lost.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import dgram from 'node:dgram';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket, WebSocketServer } from 'ws';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import { startHaAgent, type HaAgent } from '../../src/agent/ha.ts';
import { startLocalCluster, type LocalCluster } from '../../src/cluster/local.ts';
import { NodeProcess } from '../../src/cluster/node-process.ts';
import { freePort } from '../../src/cluster/services.ts';
import { eventually } from '../helpers/eventually.ts';
import { controlApi, sendToEdge as send } from '../helpers/cluster-http.ts';
import { startFaultProxy, type FaultProxy } from '../helpers/fault-proxy.ts';
import { skipSlowSuite } from '../helpers/slow-suites.ts';

/** Connects to a dedicated TCP port, sends `payload`, half-closes and collects the answer until the peer ends. */
function tcpRoundTrip(port: number, payload: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    const chunks: Buffer[] = [];
    socket.on('connect', () => socket.end(payload));
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('end', () => resolve(Buffer.concat(chunks)));
    socket.on('error', reject);
    socket.setTimeout(10_000, () => socket.destroy(new Error('timeout')));
  });
}

/** A UDP port free on loopback right now. */
function freeUdpPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = dgram.createSocket('udp4');
    probe.once('error', reject);
    probe.bind(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/** Requests sent one after another until stopped, each result kept with its time. */
class Traffic {
  readonly results: Array<{ at: number; port: number; status: number }> = [];
  private running = true;
  private readonly loops: Promise<void>[];
  constructor(ports: () => number[], host: string) {
    this.loops = [0, 1].map(async (lane) => {
      while (this.running) {
        for (const port of ports()) {
          const r = await send(port, host, `/traffic/${lane}`, { timeoutMs: 10_000 });
          this.results.push({ at: Date.now(), port, status: r.status });
        }
      }
    });
  }
  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }
  /** Results on or after `since` that were not 200. */
  failuresSince(since: number): Array<{ at: number; port: number; status: number }> {
    return this.results.filter((r) => r.at >= since && r.status !== 200);
  }
}

describe('many edges as one (processes)', { skip: skipSlowSuite() }, () => {
  let cluster: LocalCluster;
  let service: http.Server;
  let servicePort: number;
  let wss: WebSocketServer;
  let apiKey: string;
  const agents: Array<Agent | HaAgent> = [];
  const dirs: string[] = [];
  const extra: NodeProcess[] = [];
  const proxies: FaultProxy[] = [];

  before(async () => {
    cluster = await startLocalCluster({
      env: {
        EDGE_PRESENCE_INTERVAL_MS: '200',
        EDGE_PRESENCE_STALE_MS: '1500',
        EDGE_RELAY_TIMEOUT_MS: '3000',
        EDGE_RELAY_CONNECT_TIMEOUT_MS: '1000',
        EDGE_RELAY_FAILURE_HOLD_MS: '3000',
        EDGE_FEED_CHECK_INTERVAL_MS: '1000',
        EDGE_FEED_PUBLISH_POLL_MS: '200',
      },
    });
    // The local service: echoes what it was sent (size and digest), streams a large answer on /big.
    service = http.createServer((req, res) => {
      if (req.url === '/big') {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        let left = 64;
        const chunk = Buffer.alloc(64 * 1024, 'b');
        const write = () => {
          while (left > 0) {
            left--;
            if (!res.write(chunk)) return void res.once('drain', write);
          }
          res.end();
        };
        return write();
      }
      const hash = createHash('sha256');
      let n = 0;
      req.on('data', (d: Buffer) => {
        n += d.length;
        hash.update(d);
      });
      req.on('end', () => res.end(`served ${req.method} ${req.url} ${n} ${hash.digest('hex')} auth=${req.headers.authorization ?? '-'}`));
    });
    wss = new WebSocketServer({ server: service });
    wss.on('connection', (ws) => ws.on('message', (m) => ws.send(`echo ${String(m)}`)));
    await new Promise<void>((r) => service.listen(0, '127.0.0.1', r));
    servicePort = (service.address() as AddressInfo).port;
    await freshUser();
  });

  /** A user of its own for the next test, so endpoint quotas never run out across tests. */
  async function freshUser(plan = 'pro'): Promise<void> {
    const user = await api('POST', '/v1/admin/users', cluster.adminKey, { email: `many-${randomBytes(4).toString('hex')}@example.test`, plan });
    assert.equal(user.status, 201, JSON.stringify(user.body));
    apiKey = user.body.api_key;
  }

  after(async () => {
    for (const a of agents) await a.stop(0).catch(() => {});
    for (const node of extra) await node.stop();
    for (const p of proxies) await p.close();
    for (const edge of cluster?.edges ?? []) edge.thaw();
    wss?.close();
    service?.close();
    await cluster?.stop();
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  const api = (method: string, path: string, key: string, body?: unknown, timeoutMs = 20_000) => controlApi(() => cluster.controlUrl, timeoutMs)(method, path, key, body);

  async function newEndpoint(): Promise<{ uuid: string; hostname: string }> {
    const res = await api('POST', '/v1/endpoints', apiKey, {});
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body;
  }

  /** An endpoint every running edge of the cluster already knows (answers 502 no_agent), so agents are admitted. */
  async function knownEndpoint(): Promise<{ uuid: string; hostname: string }> {
    const endpoint = await newEndpoint();
    for (const [i, edge] of cluster.edges.entries()) if (edge.running) await until(i, endpoint.hostname, 502);
    return endpoint;
  }

  const port = (i: number) => cluster.edges[i].ports.http!;

  /**
   * Which edge bound a dedicated port: every edge of this one machine tries the same port number, the first to bind
   * it serves it (it logs `dedicated port open`) and the others keep retrying.
   */
  const boundBy = (dedicatedPort: number) =>
    eventually(async () => {
      const i = cluster.edges.findIndex((e) => e.log.some((l) => l.includes('dedicated port open') && l.includes(`"port":${dedicatedPort}`)));
      return i === -1 ? undefined : i;
    }, 30_000);

  /** Waits until `edge` answers `status` for the endpoint (the feed or presence has caught up there). */
  const until = (i: number, host: string, status: number, ms = 30_000) =>
    eventually(async () => ((await send(port(i), host, '/probe')).status === status ? true : undefined), ms);

  it('relays HTTP from an edge without the agent to the edge that has it: bodies streamed both ways, byte for byte', async () => {
    const endpoint = await knownEndpoint();
    agents.push(await startAgent({ edgeUrl: `http://127.0.0.1:${port(1)}`, apiKey, endpoint: endpoint.uuid, protocol: 'http', target: servicePort }));
    await until(0, endpoint.hostname, 200);
    const upload = randomBytes(5 * 1024 * 1024);
    const posted = await send(port(0), endpoint.hostname, '/upload', { method: 'POST', body: upload });
    assert.equal(posted.status, 200);
    assert.equal(posted.body, `served POST /upload ${upload.length} ${createHash('sha256').update(upload).digest('hex')} auth=-`);
    const big = await send(port(0), endpoint.hostname, '/big');
    assert.equal(big.status, 200);
    assert.equal(big.body.length, 64 * 64 * 1024);
    // Through edge 3 as well: any edge serves.
    assert.equal((await send(port(2), endpoint.hostname, '/x')).status, 200);
  });

  it('relays a WebSocket upgrade', async () => {
    const endpoint = await knownEndpoint();
    agents.push(await startAgent({ edgeUrl: `http://127.0.0.1:${port(1)}`, apiKey, endpoint: endpoint.uuid, protocol: 'http', target: servicePort }));
    await until(0, endpoint.hostname, 200);
    const ws = new WebSocket(`ws://127.0.0.1:${port(0)}/socket`, { headers: { host: endpoint.hostname } });
    const reply = await new Promise<string>((resolve, reject) => {
      ws.once('open', () => ws.send('hello'));
      ws.once('message', (m) => resolve(String(m)));
      ws.once('error', reject);
    });
    ws.close();
    assert.equal(reply, 'echo hello');
  });

  it('judges the request on the visitor’s edge: its visitor auth holds, and the agent sees what was judged', async () => {
    const endpoint = await knownEndpoint();
    const settings = await api('PUT', `/v1/endpoints/${endpoint.uuid}/settings`, apiKey, { mode: 'basic', basic_users: [{ username: 'u', password: 'password-123' }] });
    assert.equal(settings.status, 200, JSON.stringify(settings.body));
    agents.push(await startAgent({ edgeUrl: `http://127.0.0.1:${port(1)}`, apiKey, endpoint: endpoint.uuid, protocol: 'http', target: servicePort }));
    await until(0, endpoint.hostname, 401);
    const basic = `Basic ${Buffer.from('u:password-123').toString('base64')}`;
    // Edge 1 learns where the agent is from presence, within about one beat.
    const ok = await eventually(async () => {
      const r = await send(port(0), endpoint.hostname, '/in', { headers: { authorization: basic } });
      return r.status === 200 ? r : undefined;
    });
    // The agent's service saw no credentials: the edge that judged them removed them (docs/visitor-auth.md).
    assert.match(ok.body, /^served GET \/in 0 /);
    const wrong = await send(port(0), endpoint.hostname, '/in', { headers: { authorization: `Basic ${Buffer.from('u:nope').toString('base64')}` } });
    assert.equal(wrong.status, 401);
  });

  it('answers 502 no_agent when no edge has an agent, as a single edge would', async () => {
    const endpoint = await newEndpoint();
    await until(0, endpoint.hostname, 502);
    const res = await send(port(0), endpoint.hostname, '/', { headers: { accept: 'application/json' } });
    assert.equal(JSON.parse(res.body).code, 'no_agent');
  });

  it('relays a dedicated TCP port: the edge that bound it carries each connection to a tcp agent on another edge', async () => {
    await freshUser('business'); // dedicated ports and tcp tunnels
    const endpoint = await knownEndpoint();
    const tcpPort = await freePort();
    assert.equal((await api('PUT', `/v1/endpoints/${endpoint.uuid}/ports`, apiKey, { dedicated_tcp_port: tcpPort })).status, 200);
    const binder = await boundBy(tcpPort);
    const echo = net.createServer({ allowHalfOpen: true }, (s) => {
      s.on('error', () => {});
      s.pipe(s);
    });
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
    try {
      const elsewhere = (binder + 1) % cluster.edges.length;
      agents.push(await startAgent({ edgeUrl: `http://127.0.0.1:${port(elsewhere)}`, apiKey, endpoint: endpoint.uuid, protocol: 'tcp', target: (echo.address() as AddressInfo).port }));
      const payload = randomBytes(256 * 1024);
      const echoed = await eventually(async () => {
        const got = await tcpRoundTrip(tcpPort, payload).catch(() => null);
        return got && got.equals(payload) ? got : undefined;
      }, 30_000);
      assert.equal(echoed.length, payload.length);
    } finally {
      echo.close();
    }
  });

  it('relays a dedicated UDP port: datagrams to the edge that bound it reach a udp agent on another edge, and replies come back', async () => {
    await freshUser('business');
    const endpoint = await knownEndpoint();
    const udpPort = await freeUdpPort();
    assert.equal((await api('PUT', `/v1/endpoints/${endpoint.uuid}/ports`, apiKey, { dedicated_udp_port: udpPort })).status, 200);
    const binder = await boundBy(udpPort);
    const echo = dgram.createSocket('udp4');
    echo.on('message', (msg, rinfo) => echo.send(Buffer.concat([Buffer.from('echo:'), msg]), rinfo.port, rinfo.address));
    await new Promise<void>((r) => echo.bind(0, '127.0.0.1', r));
    const visitor = dgram.createSocket('udp4');
    await new Promise<void>((r) => visitor.bind(0, '127.0.0.1', r));
    try {
      const elsewhere = (binder + 1) % cluster.edges.length;
      agents.push(await startAgent({ edgeUrl: `http://127.0.0.1:${port(elsewhere)}`, apiKey, endpoint: endpoint.uuid, protocol: 'udp', target: echo.address().port }));
      // Datagrams may be lost until the relay path is up: send again until a reply comes.
      const reply = await eventually(
        () =>
          new Promise<string | undefined>((resolve) => {
            const onMessage = (msg: Buffer) => {
              clearTimeout(timer);
              resolve(String(msg));
            };
            // No reply this time: stop listening, so the next try's listener gets the next reply.
            const timer = setTimeout(() => {
              visitor.off('message', onMessage);
              resolve(undefined);
            }, 500);
            visitor.once('message', onMessage);
            visitor.send('ping', udpPort, '127.0.0.1');
          }),
        30_000,
      );
      assert.equal(reply, 'echo:ping');
    } finally {
      echo.close();
      visitor.close();
    }
  });

  it('an agent on several edges keeps a tunnel on each; when one edge is killed it moves there to another, and the others keep serving', async () => {
    const endpoint = await knownEndpoint();
    const ha = await startHaAgent({ edges: [1, 2, 0].map((i) => `http://127.0.0.1:${port(i)}`), haConnections: 2, apiKey, endpoint: endpoint.uuid, protocol: 'http', target: servicePort, backoff: { initialMs: 100, maxMs: 500 } });
    agents.push(ha);
    await eventually(async () => (ha.connections.size === 2 ? true : undefined));
    const nodes = await eventually(async () => {
      const res = await api('GET', `/v1/endpoints/${endpoint.uuid}/tunnels`, apiKey);
      return res.body.items.length === 2 ? res.body.items.map((t: { edge_node: string }) => t.edge_node).sort() : undefined;
    });
    assert.deepEqual(nodes, ['edge-2', 'edge-3']);
    await until(0, endpoint.hostname, 200);

    // Visitors through edge 1 (relayed) and edge 3 (its own tunnel) while edge 2 dies.
    const traffic = new Traffic(() => [port(0), port(2)], endpoint.hostname);
    await eventually(async () => (traffic.results.length > 20 ? true : undefined));
    const killedAt = Date.now();
    await cluster.edges[1].kill();
    // The agent's tunnel moves to edge 1; presence forgets edge 2 within its staleness window.
    await eventually(async () => {
      const res = await api('GET', `/v1/endpoints/${endpoint.uuid}/tunnels`, apiKey);
      const on = res.body.items.map((t: { edge_node: string }) => t.edge_node).sort();
      return on.join() === 'edge-1,edge-3' ? true : undefined;
    }, 30_000);
    const settledAt = Date.now();
    await eventually(async () => (traffic.results.filter((r) => r.at > settledAt).length > 40 ? true : undefined));
    await traffic.stop();
    // Requests through the surviving edges may fail only while edge 2's death is being noticed (its relayed streams
    // cut, presence stale); after the tunnel moved, every one succeeds.
    assert.deepEqual(traffic.failuresSince(settledAt), []);
    for (const f of traffic.failuresSince(killedAt)) assert.ok(f.status === 502 || f.status === 504, `unexpected ${f.status}`);
    // Edge 3's own tunnel never went away: its visitors were served throughout.
    assert.deepEqual(traffic.results.filter((r) => r.port === port(2) && r.status !== 200), []);
  });

  it('an edge frozen with SIGSTOP leaves presence within the staleness window, and relays go to the live edges only', async () => {
    await freshUser();
    // Edge 2 comes back, without agents: its visitors are relayed to edge 1 or 3.
    await cluster.edges[1].start();
    const endpoint = await knownEndpoint();
    const ha = await startHaAgent({ edges: [0, 2].map((i) => `http://127.0.0.1:${port(i)}`), haConnections: 2, apiKey, endpoint: endpoint.uuid, protocol: 'http', target: servicePort });
    agents.push(ha);
    await eventually(async () => (ha.connections.size === 2 ? true : undefined));
    await until(1, endpoint.hostname, 200);
    cluster.edges[2].freeze();
    const frozenAt = Date.now();
    try {
      await eventually(async () => {
        const res = await api('GET', '/v1/edges', cluster.adminKey);
        return res.body.items.some((e: { node_id: string }) => e.node_id === 'edge-3') ? undefined : true;
      }, 30_000);
      const staleAfterMs = Date.now() - frozenAt;
      assert.ok(staleAfterMs < 15_000, `edge 3 left presence after ${staleAfterMs} ms`);
      // Edge 2 reads presence again within its refresh period (at most one second) and drops edge 3 from its peers.
      await eventually(async () => {
        const last = cluster.edges[1].log.filter((l) => l.includes('relay peers changed')).at(-1);
        return last !== undefined && !JSON.parse(last).peers.includes('edge-3') ? true : undefined;
      });
      // From now on every visitor of edge 2 is relayed to edge 1.
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => send(port(1), endpoint.hostname, `/after-freeze/${i}`)));
      assert.deepEqual(answers.map((a) => a.status), Array(20).fill(200));
    } finally {
      cluster.edges[2].thaw();
    }
  });

  it('Redis killed: edges keep serving their last config; changes made meanwhile reach every edge once it is back', async () => {
    await freshUser();
    const served = await knownEndpoint();
    agents.push(await startAgent({ edgeUrl: `http://127.0.0.1:${port(0)}`, apiKey, endpoint: served.uuid, protocol: 'http', target: servicePort }));
    for (const i of [0, 1, 2]) await until(i, served.hostname, 200);
    await cluster.redis!.kill();
    {
      // The edge holding the agent serves its visitors throughout (config is in memory; auth needs no Redis).
      for (let i = 0; i < 10; i++) assert.equal((await send(port(0), served.hostname, `/during/${i}`)).status, 200);
      // The control API still takes changes: PostgreSQL is the source of truth.
      const made = await newEndpoint();
      await cluster.redis!.start();
      // Every edge learns of it, and every edge reports the control's current version.
      for (const i of [0, 1, 2]) await until(i, made.hostname, 502, 60_000);
      await eventually(async () => {
        // Presence lives in Redis: just after its restart the API may still answer 503 store_unavailable, so wait.
        const res = await api('GET', '/v1/edges', cluster.adminKey);
        if (res.status !== 200) return undefined;
        return res.body.items.length === 3 && res.body.items.every((e: { in_sync: boolean }) => e.in_sync) ? true : undefined;
      }, 60_000);
    }
  });

  it('PostgreSQL restarted: edges keep serving; the API never answers 500 or hangs, and works again after', async () => {
    await freshUser();
    const endpoint = await knownEndpoint();
    agents.push(await startAgent({ edgeUrl: `http://127.0.0.1:${port(0)}`, apiKey, endpoint: endpoint.uuid, protocol: 'http', target: servicePort }));
    await until(0, endpoint.hostname, 200);
    await cluster.postgres!.kill();
    try {
      for (let i = 0; i < 5; i++) assert.equal((await send(port(0), endpoint.hostname, `/db-down/${i}`)).status, 200);
      const answer = await api('GET', '/v1/endpoints', apiKey, undefined, 30_000);
      assert.equal(answer.status, 503, `the API answered ${answer.status} while the database was down`);
      assert.equal(answer.body.code, 'store_unavailable');
      assert.equal(answer.headers.get('retry-after'), '5');
    } finally {
      await cluster.postgres!.start();
    }
    const back = await eventually(async () => {
      const res = await api('GET', '/v1/endpoints', apiKey).catch(() => undefined);
      return res?.status === 200 ? res : undefined;
    }, 60_000);
    assert.ok(back.body.items.some((e: { uuid: string }) => e.uuid === endpoint.uuid));
  });

  it('a slow, then broken, network between one edge and Redis: that edge keeps serving and catches up after', async () => {
    await freshUser();
    const proxy = await startFaultProxy({ port: cluster.redis!.port });
    proxies.push(proxy);
    const dir = await mkdtemp(join(tmpdir(), 'edge-cluster-'));
    dirs.push(dir);
    const edge = new NodeProcess('edge-4', 'edge', { ...cluster.edges[0].env, EDGE_NODE_ID: 'edge-4', EDGE_DATA_DIR: dir, REDIS_URL: `redis://127.0.0.1:${proxy.port}` });
    await edge.start();
    extra.push(edge);
    const endpoint = await newEndpoint();
    await eventually(async () => ((await send(edge.ports.http!, endpoint.hostname, '/')).status === 502 ? true : undefined), 30_000);
    agents.push(await startAgent({ edgeUrl: `http://127.0.0.1:${edge.ports.http}`, apiKey, endpoint: endpoint.uuid, protocol: 'http', target: servicePort }));
    const edge4 = (host: string, path: string) => send(edge.ports.http!, host, path);
    await eventually(async () => ((await edge4(endpoint.hostname, '/')).status === 200 ? true : undefined));
    proxy.setLatency(200);
    for (let i = 0; i < 5; i++) assert.equal((await edge4(endpoint.hostname, `/slow/${i}`)).status, 200);
    proxy.dropAll();
    proxy.refuse(true);
    for (let i = 0; i < 5; i++) assert.equal((await edge4(endpoint.hostname, `/cut/${i}`)).status, 200);
    const made = await newEndpoint();
    proxy.refuse(false);
    proxy.setLatency(0);
    await eventually(async () => ((await edge4(made.hostname, '/')).status === 502 ? true : undefined), 60_000);
  });
});
