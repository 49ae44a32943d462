// Data connections (edge-tunnel-data/1) between a real edge TunnelServer and real agents: who is granted them, what
// the edge answers a hand-written upgrade, spares closing with their tunnel, and the agent keeping its spares ready.
import { describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { WebSocket } from 'ws';
import { startAgent, type Agent, type AgentOptions } from '../../../src/agent/agent.ts';
import type { AgentDataConnections } from '../../../src/agent/data-connections.ts';
import type { AgentSession } from '../../../src/edge/tunnels/registry.ts';
import type { TunnelServerOptions } from '../../../src/edge/tunnels/tunnel-server.ts';
import { DATA_ID_HEADER, DATA_KEY_HEADER, DATA_UPGRADE_TOKEN } from '../../../src/shared/tunnel/data.ts';
import { PROTOCOL_VERSION, TUNNEL_PATH, type DataConnectionGrant } from '../../../src/shared/tunnel/protocol.ts';
import { RAW_UPGRADE_TOKEN, encodeHandshakeFrame, readHandshakeFrame, type FrameResult } from '../../../src/shared/tunnel/raw.ts';
import { eventually } from '../../helpers/eventually.ts';
import { startForwardingEdge, type ForwardingEdge } from '../../helpers/forwarding-edge.ts';

const HOST = 'app.edge.test';

async function listen(server: net.Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as net.AddressInfo).port;
}

function closeServer(server: net.Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

type Edge = ForwardingEdge;

/** An edge: the TunnelServer on an http.Server whose every request goes to the endpoint's agent (forwardToAgent). */
function startEdge(t: TestContext, options: Partial<TunnelServerOptions> = {}): Promise<Edge> {
  return startForwardingEdge(t, HOST, options);
}

/** The local service: `/hold` answers only when the test releases it; anything else `ok`. */
async function startLocal(t: TestContext) {
  const held: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    if (req.url === '/hold') return void held.push(res);
    res.end('ok');
  });
  const port = await listen(server);
  t.after(() => {
    server.closeAllConnections();
    return closeServer(server);
  });
  return { port, held };
}

/** A real agent on the raw transport with fast reconnects, stopped after the test. */
async function agentFor(t: TestContext, edge: Edge, target: number | string, options: Partial<AgentOptions> = {}): Promise<Agent> {
  const agent = await startAgent({
    edgeUrl: edge.url,
    apiKey: 'key',
    endpoint: edge.endpoint.uuid,
    protocol: 'http',
    target,
    transport: 'raw',
    backoff: { initialMs: 20, maxMs: 200 },
    ...options,
  });
  t.after(() => agent.stop(1_000));
  return agent;
}

/** The edge's session for the agent once `spares` data connections wait on both sides, and the grant. */
async function ready(edge: Edge, agent: Agent, spares: number): Promise<{ session: AgentSession; grant: DataConnectionGrant }> {
  return eventually(async () => {
    const session = edge.registry.pick(edge.endpoint.uuid);
    const grant = agent.welcome?.data_connections;
    if (!session?.data || !grant || session.data.id !== grant.id) return undefined;
    return agent.dataConnections?.idle === spares && agent.dataConnections.open === spares && session.data.size === spares ? { session, grant } : undefined;
  });
}

/** The agent's own data connections object (private): the sockets it holds are what "closed on its side" means. */
function agentData(agent: Agent): AgentDataConnections {
  const data = (agent as unknown as { data: AgentDataConnections | null }).data;
  assert.ok(data !== null, 'the agent has data connections');
  return data;
}

interface Upgrade {
  status: number;
  /** The answer's status line and fields, as sent. */
  head: string;
  socket: net.Socket;
}

/**
 * A data connection upgrade written by hand, in one write with `behind` after the head: the status of the edge's
 * answer, and the socket (a spare at the edge after a 101).
 */
async function dataUpgrade(t: TestContext, port: number, fields: { id?: string; key?: string }, behind = ''): Promise<Upgrade> {
  const socket = net.connect(port, '127.0.0.1');
  t.after(() => socket.destroy());
  socket.on('error', () => {});
  await once(socket, 'connect');
  const lines = [`GET ${TUNNEL_PATH} HTTP/1.1`, 'host: 127.0.0.1', 'connection: Upgrade', `upgrade: ${DATA_UPGRADE_TOKEN}`];
  if (fields.id !== undefined) lines.push(`${DATA_ID_HEADER}: ${fields.id}`);
  if (fields.key !== undefined) lines.push(`${DATA_KEY_HEADER}: ${fields.key}`);
  socket.write(`${lines.join('\r\n')}\r\n\r\n${behind}`);
  let head = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) return;
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.pause();
      const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1]);
      if (status === 101) assert.match(head, new RegExp(`\r\nupgrade: ${DATA_UPGRADE_TOKEN}\r\n`, 'i'));
      resolve({ status, head: head.slice(0, end), socket });
    };
    const onClose = () => reject(new Error(`the edge closed the connection without an answer: ${JSON.stringify(head)}`));
    socket.on('data', onData);
    socket.once('close', onClose);
  });
}

/** Resolves once the socket is closed (the edge ended it). */
function closed(socket: net.Socket): Promise<void> {
  socket.resume();
  return socket.closed ? Promise.resolve() : once(socket, 'close').then(() => undefined);
}

/** 43 base64url characters that are no grant's. */
const token = () => randomBytes(32).toString('base64url');

const hello = (fields: Record<string, unknown>) => ({ type: 'hello', version: PROTOCOL_VERSION, api_key: 'key', agent_id: 'by-hand', tags: [], client: 'by-hand', ...fields });

/** A hello sent by hand on the raw transport: the edge's welcome. */
async function rawWelcome(t: TestContext, port: number, fields: Record<string, unknown>): Promise<Record<string, unknown>> {
  const req = http.request({ host: '127.0.0.1', port, path: TUNNEL_PATH, headers: { connection: 'Upgrade', upgrade: RAW_UPGRADE_TOKEN } });
  req.end();
  const [res, socket, head] = (await once(req, 'upgrade')) as [http.IncomingMessage, net.Socket, Buffer];
  t.after(() => socket.destroy());
  assert.equal(res.statusCode, 101);
  socket.write(encodeHandshakeFrame(JSON.stringify(hello(fields))));
  const result = await new Promise<FrameResult>((resolve) => readHandshakeFrame(socket, head, 8192, resolve));
  assert.ok(result.ok, 'a handshake frame');
  // Nothing speaks HTTP/2 behind it: gone at once, so the edge's shutdown does not wait for its GOAWAY's answer.
  socket.destroy();
  return JSON.parse(result.frame.toString('utf8'));
}

/** A hello sent by hand on the WebSocket transport: the edge's welcome. */
async function wsWelcome(t: TestContext, port: number, fields: Record<string, unknown>): Promise<Record<string, unknown>> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}${TUNNEL_PATH}`);
  t.after(() => ws.terminate());
  await once(ws, 'open');
  ws.send(JSON.stringify(hello(fields)));
  const [data] = (await once(ws, 'message')) as [Buffer];
  ws.terminate();
  return JSON.parse(String(data));
}

describe('data connections: the upgrade', () => {
  it('an unknown id and a wrong key both get 403, and nothing is added; the grant itself gets 101', async (t) => {
    const edge = await startEdge(t);
    const local = await startLocal(t);
    const agent = await agentFor(t, edge, local.port, { dataConnections: 2 });
    const { session, grant } = await ready(edge, agent, 2);
    const refused = [
      { id: token(), key: grant.key },
      { id: grant.id, key: token() },
      { id: grant.id, key: grant.key.slice(1) },
      { id: grant.id, key: `${grant.key}=` },
      { id: grant.id },
      { key: grant.key },
      { id: grant.key, key: grant.id },
    ];
    const heads = new Set<string>();
    for (const fields of refused) {
      const answer = await dataUpgrade(t, edge.port, fields);
      assert.equal(answer.status, 403, JSON.stringify(fields));
      heads.add(answer.head);
      await closed(answer.socket);
    }
    // Byte for byte the same answer, whether the id names no session or the key is wrong.
    assert.equal(heads.size, 1);
    assert.equal(session.data!.size, 2);
    assert.deepEqual(agent.dataConnections, { open: 2, idle: 2 });
    const accepted = await dataUpgrade(t, edge.port, grant);
    assert.equal(accepted.status, 101);
    assert.equal(session.data!.size, 3);
    accepted.socket.destroy();
    await eventually(async () => (session.data!.size === 2 ? true : undefined));
  });

  it('many refused upgrades at once: each is answered and closed, and the edge holds none of their sockets', async (t) => {
    const edge = await startEdge(t);
    const local = await startLocal(t);
    const agent = await agentFor(t, edge, local.port, { dataConnections: 2 });
    const { session, grant } = await ready(edge, agent, 2);
    const held = edge.sockets.size;
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => dataUpgrade(t, edge.port, i % 2 ? { id: token(), key: token() } : { id: grant.id, key: token() })));
    assert.deepEqual(new Set(answers.map((a) => a.status)), new Set([403]));
    await Promise.all(answers.map((a) => closed(a.socket)));
    await eventually(async () => (edge.sockets.size === held ? true : undefined));
    assert.equal(session.data!.size, 2);
  });

  it('bytes behind the upgrade get 400, and nothing is added', async (t) => {
    const edge = await startEdge(t);
    const local = await startLocal(t);
    const agent = await agentFor(t, edge, local.port, { dataConnections: 2 });
    const { session, grant } = await ready(edge, agent, 2);
    const answer = await dataUpgrade(t, edge.port, grant, 'HTTP/1.1 200 OK\r\n\r\n');
    assert.equal(answer.status, 400);
    await closed(answer.socket);
    assert.equal(session.data!.size, 2);
  });

  it('a session at its max gets 429 for the next one', async (t) => {
    const edge = await startEdge(t, { maxDataConnections: 2 });
    const local = await startLocal(t);
    const agent = await agentFor(t, edge, local.port, { dataConnections: 8 });
    const { session, grant } = await ready(edge, agent, 2);
    assert.equal(grant.max, 2);
    const answer = await dataUpgrade(t, edge.port, grant);
    assert.equal(answer.status, 429);
    await closed(answer.socket);
    assert.equal(session.data!.size, 2);
    // The agent dials no more than the grant's max.
    assert.deepEqual(agent.dataConnections, { open: 2, idle: 2 });
  });

  it('bytes sent on an idle spare close that spare', async (t) => {
    const edge = await startEdge(t);
    const local = await startLocal(t);
    const agent = await agentFor(t, edge, local.port, { dataConnections: 2 });
    const { session, grant } = await ready(edge, agent, 2);
    const spare = await dataUpgrade(t, edge.port, grant);
    assert.equal(spare.status, 101);
    assert.equal(session.data!.size, 3);
    spare.socket.write('HTTP/1.1 200 OK\r\n\r\n');
    await closed(spare.socket);
    await eventually(async () => (session.data!.size === 2 ? true : undefined));
    // The agent's own spares are untouched, and requests still go on them.
    assert.deepEqual(agent.dataConnections, { open: 2, idle: 2 });
    const res = await fetch(`${edge.url}/page`);
    assert.equal(await res.text(), 'ok');
  });
});

describe('data connections: who is granted them', () => {
  it('a ws-transport agent, a tcp agent and an https-target agent get no grant; a raw http agent does', async (t) => {
    const edge = await startEdge(t);
    const local = await startLocal(t);
    const ws = await agentFor(t, edge, local.port, { transport: 'ws', agentId: 'ws' });
    const tcp = await agentFor(t, edge, local.port, { protocol: 'tcp', agentId: 'tcp' });
    const tls = await agentFor(t, edge, `https://127.0.0.1:${local.port}`, { agentId: 'tls' });
    for (const agent of [ws, tcp, tls]) {
      assert.equal(agent.welcome?.data_connections, undefined, agent.agentId);
      assert.equal(agent.dataConnections, null, agent.agentId);
    }
    const raw = await agentFor(t, edge, local.port, { agentId: 'raw', dataConnections: 1 });
    assert.equal(raw.welcome?.data_connections?.max, 128);
    const sessions = await eventually(async () => {
      const all = ['ws', 'tcp', 'tls', 'raw'].map((agentId) => edge.registry.pick(edge.endpoint.uuid, { agentId }));
      return all.every((s) => s !== null) ? (all as AgentSession[]) : undefined;
    });
    assert.deepEqual(
      sessions.map((s) => s.data !== null),
      [false, false, false, true],
    );
  });

  it('the edge grants none to a hello that offers them on the ws transport or for tcp, whatever the hello says', async (t) => {
    const edge = await startEdge(t);
    const overWs = await wsWelcome(t, edge.port, { protocol: 'http', data_connections: {} });
    assert.equal(overWs.type, 'welcome');
    assert.equal(overWs.data_connections, undefined);
    const tcp = await rawWelcome(t, edge.port, { protocol: 'tcp', data_connections: {} });
    assert.equal(tcp.type, 'welcome');
    assert.equal(tcp.data_connections, undefined);
    const http1 = await rawWelcome(t, edge.port, { protocol: 'http', data_connections: { host_header: 'local.internal' } });
    assert.match((http1.data_connections as DataConnectionGrant).id, /^[A-Za-z0-9_-]{43}$/);
    const silent = await rawWelcome(t, edge.port, { protocol: 'http' });
    assert.equal(silent.data_connections, undefined, 'a hello that offers none is granted none');
  });

  it('maxDataConnections: 0 grants none, and requests go over HTTP/2 streams', async (t) => {
    const edge = await startEdge(t, { maxDataConnections: 0 });
    const local = await startLocal(t);
    const agent = await agentFor(t, edge, local.port);
    assert.equal(agent.welcome?.data_connections, undefined);
    assert.equal(agent.dataConnections, null);
    await eventually(async () => (edge.registry.pick(edge.endpoint.uuid) ? true : undefined));
    assert.equal(edge.registry.pick(edge.endpoint.uuid)!.data, null);
    assert.equal(await (await fetch(`${edge.url}/page`)).text(), 'ok');
  });
});

describe('data connections: with their tunnel', () => {
  it('agent.stop closes the spares on both sides, and the grant is gone', async (t) => {
    const edge = await startEdge(t);
    const local = await startLocal(t);
    const agent = await agentFor(t, edge, local.port, { dataConnections: 3 });
    const { session, grant } = await ready(edge, agent, 3);
    const mine = agentData(agent);
    await agent.stop(1_000);
    await eventually(async () => (mine.size === 0 && session.data!.size === 0 && edge.sockets.size === 0 ? true : undefined));
    assert.equal(agent.dataConnections, null);
    const late = await dataUpgrade(t, edge.port, grant);
    assert.equal(late.status, 403);
  });

  it('agent.stop(grace) lets an exchange in flight on a data connection finish, and resolves once it has', async (t) => {
    const edge = await startEdge(t);
    const local = await startLocal(t);
    const agent = await agentFor(t, edge, local.port, { dataConnections: 1 });
    const { session } = await ready(edge, agent, 1);
    const mine = agentData(agent);
    const reply = visit(edge.port, 'GET', '/hold');
    await eventually(async () => (local.held.length === 1 ? true : undefined));
    let stopped = false;
    const stopping = agent.stop(20_000).then(() => (stopped = true));
    // The tunnel is gone at once (it carried no stream); the exchange goes on, and stop() waits for it.
    await eventually(async () => (session.available === false && mine.size === 1 ? true : undefined));
    assert.equal(stopped, false);
    local.held[0].end('held');
    assert.deepEqual(await reply, { status: 200, body: 'held', complete: true });
    await stopping;
    assert.equal(mine.size, 0);
  });

  it('agent.stop(grace) cuts an exchange still in flight when the grace ends, and resolves once it is closed on both sides', async (t) => {
    const edge = await startEdge(t);
    const local = await startLocal(t);
    const agent = await agentFor(t, edge, local.port, { dataConnections: 1 });
    const { session } = await ready(edge, agent, 1);
    const mine = agentData(agent);
    const reply = visit(edge.port, 'GET', '/hold');
    await eventually(async () => (local.held.length === 1 ? true : undefined));
    await agent.stop(100);
    assert.equal(mine.size, 0);
    const r = await reply;
    assert.equal(r.status, 502, r.body);
    await eventually(async () => (session.data!.size === 0 ? true : undefined));
  });

  it("the edge destroying the session closes the spares on both sides; the agent's next tunnel brings a new grant", async (t) => {
    const edge = await startEdge(t);
    const local = await startLocal(t);
    const agent = await agentFor(t, edge, local.port, { dataConnections: 3 });
    const first = await ready(edge, agent, 3);
    const mine = agentData(agent);
    await first.session.destroy({ code: 'test', message: 'destroyed by the test' });
    await eventually(async () => (mine.size === 0 && first.session.data!.size === 0 ? true : undefined));
    assert.equal((await dataUpgrade(t, edge.port, first.grant)).status, 403);
    const second = await ready(edge, agent, 3);
    assert.notEqual(second.grant.id, first.grant.id);
    assert.notEqual(second.grant.key, first.grant.key);
    assert.notEqual(agentData(agent), mine);
  });

  it('a draining session closes its spares and answers 503 to a new data connection', async (t) => {
    const edge = await startEdge(t);
    const local = await startLocal(t);
    const agent = await agentFor(t, edge, local.port, { dataConnections: 2 });
    const { session, grant } = await ready(edge, agent, 2);
    // A request in flight on an HTTP/2 stream keeps the session draining (not closed) while the test looks.
    const stream = session.request({ ':method': 'GET', ':path': '/hold', ':authority': HOST, ':scheme': 'http' }, { endStream: true });
    stream.on('error', () => {});
    await eventually(async () => (local.held.length === 1 ? true : undefined));
    const closing = session.close({ code: 'test', message: 'drained by the test' }, 20_000);
    assert.equal(session.available, false);
    await eventually(async () => (session.data!.size === 0 ? true : undefined));
    const answer = await dataUpgrade(t, edge.port, grant);
    assert.equal(answer.status, 503);
    await closed(answer.socket);
    local.held[0].end('done');
    stream.resume();
    await closing;
  });
});

describe('data connections: a session replaced by the same agent id', () => {
  it("the old session's exchange in flight finishes on its data connection, then its connections close on both sides; the new session has its own", async (t) => {
    const edge = await startEdge(t);
    const local = await startLocal(t);
    const first = await agentFor(t, edge, local.port, { dataConnections: 2, agentId: 'same' });
    const old = await ready(edge, first, 2);
    const mine = agentData(first);
    const reply = visit(edge.port, 'GET', '/hold');
    await eventually(async () => (local.held.length === 1 ? true : undefined));
    const second = await agentFor(t, edge, local.port, { dataConnections: 2, agentId: 'same' });
    const fresh = await ready(edge, second, 2);
    assert.notEqual(fresh.session, old.session);
    assert.notEqual(fresh.grant.id, old.grant.id);
    // The old session drained: its spares closed, the connection carrying the exchange is still open on both sides.
    await eventually(async () => (old.session.data!.size === 1 && mine.size === 1 ? true : undefined));
    assert.notEqual((await dataUpgrade(t, edge.port, old.grant)).status, 101, 'the old grant takes no new connection');
    local.held[0].end('held');
    assert.deepEqual(await reply, { status: 200, body: 'held', complete: true });
    await eventually(async () => (old.session.data!.size === 0 && mine.size === 0 ? true : undefined));
    // New requests take the new session's data connections.
    assert.equal((await visit(edge.port, 'GET', '/page')).body, 'ok');
    assert.equal(fresh.session.data!.exchanges, 1);
  });
});

describe('data connections: the agent keeps its spares', () => {
  it('keeps dataConnections spares ready and replaces a spare once a request takes it', async (t) => {
    const edge = await startEdge(t);
    const local = await startLocal(t);
    const agent = await agentFor(t, edge, local.port, { dataConnections: 3 });
    const { session } = await ready(edge, agent, 3);
    const reply = fetch(`${edge.url}/hold`);
    await eventually(async () => (local.held.length === 1 ? true : undefined));
    // The request went on a spare (no HTTP/2 stream is open), and a new spare took its place on both sides.
    assert.equal(session.activeStreams, 0);
    await eventually(async () => (agent.dataConnections?.open === 4 && agent.dataConnections.idle === 3 && session.data!.size === 4 ? true : undefined));
    local.held[0].end('held');
    assert.equal(await (await reply).text(), 'held');
    // The taken connection stays open for the next request (undici keeps it alive); the spares stay at 3.
    assert.deepEqual(agent.dataConnections, { open: 4, idle: 3 });
  });

  it('dials a new spare when the network closes an idle one', async (t) => {
    const edge = await startEdge(t);
    const local = await startLocal(t);
    // A relay between the agent and the edge, so the test can cut one connection as a middlebox's idle timeout would.
    const relayed: Array<{ client: net.Socket; upstream: net.Socket; first: string }> = [];
    const relay = net.createServer((client) => {
      const upstream = net.connect(edge.port, '127.0.0.1');
      const entry = { client, upstream, first: '' };
      relayed.push(entry);
      client.once('data', (chunk: Buffer) => (entry.first = chunk.toString('latin1')));
      client.pipe(upstream).pipe(client);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
      client.once('close', () => upstream.destroy());
      upstream.once('close', () => client.destroy());
    });
    const relayPort = await listen(relay);
    t.after(async () => {
      for (const { client, upstream } of relayed) {
        client.destroy();
        upstream.destroy();
      }
      await closeServer(relay);
    });
    const agent = await agentFor(t, { ...edge, url: `http://127.0.0.1:${relayPort}` }, local.port, { dataConnections: 2 });
    const { session } = await ready(edge, agent, 2);
    const spares = relayed.filter((r) => r.first.includes(DATA_UPGRADE_TOKEN));
    assert.equal(spares.length, 2);
    spares[0].client.destroy();
    await eventually(async () => (relayed.filter((r) => r.first.includes(DATA_UPGRADE_TOKEN)).length === 3 ? true : undefined));
    await ready(edge, agent, 2);
    assert.equal(session.data!.size, 2);
  });
});

interface Visit {
  status: number;
  body: string;
  /** Whether the response ended as its framing said; false when the connection went first. */
  complete: boolean;
}

/** A visitor's request to the edge (JSON error pages), resolved whatever happens to it. */
function visit(port: number, method: string, path: string, body?: string): Promise<Visit> {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, agent: false, headers: { host: HOST, accept: 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('latin1');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('error', () => {});
      res.once('close', () => resolve({ status: res.statusCode ?? 0, body: text, complete: res.complete }));
    });
    req.on('error', () => resolve({ status: 0, body: '', complete: false }));
    req.end(body);
  });
}

/**
 * The edge's session for a real agent whose own data connections are then closed (it dials no more): what the
 * session's data connections carry from then on is only what the test offers by hand with the agent's grant.
 */
async function handOnly(t: TestContext, edge: Edge) {
  const local = await startLocal(t);
  const agent = await agentFor(t, edge, local.port, { dataConnections: 1 });
  const { session, grant } = await ready(edge, agent, 1);
  agentData(agent).stop(0);
  await eventually(async () => (session.data!.size === 0 ? true : undefined));
  return { local, agent, session, grant, data: session.data! };
}

/**
 * A data connection written by hand with the agent's grant, as a hostile agent would hold one. `request` resolves
 * with the head of the first request the edge sends on it; the test answers with whatever bytes it likes.
 */
async function handSpare(t: TestContext, edge: Edge, grant: DataConnectionGrant): Promise<{ socket: net.Socket; request: Promise<string> }> {
  const { status, socket } = await dataUpgrade(t, edge.port, grant);
  assert.equal(status, 101);
  let received = '';
  const request = new Promise<string>((resolve) => {
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      if (received.includes('\r\n\r\n')) resolve(received);
    });
  });
  socket.resume();
  return { socket, request };
}

describe('data connections: a hostile agent answering on its own data connection', () => {
  const answers: Array<[string, string]> = [
    ['a 101 to a request that asked for no upgrade', 'HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: other\r\n\r\n'],
    ['a 100 Continue (the edge sends no Expect)', 'HTTP/1.1 100 Continue\r\n\r\n'],
    ['a header block over 16 KiB', `HTTP/1.1 200 OK\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`],
    ['both Content-Length and Transfer-Encoding', 'HTTP/1.1 200 OK\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n'],
    ['two different Content-Lengths', 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nok'],
    ['a status of 600', 'HTTP/1.1 600 Odd\r\ncontent-length: 2\r\n\r\nok'],
    ['a field Node refuses to send', 'HTTP/1.1 200 OK\r\nx-bad: a\x01b\r\ncontent-length: 2\r\n\r\nok'],
    ['no HTTP at all', 'SSH-2.0-OpenSSH_9.6\r\n'],
  ];

  it('answers the edge cannot relay are each a 502 agent_error for that visitor and close that connection; nothing stays counted', async (t) => {
    const edge = await startEdge(t);
    const { data, grant } = await handOnly(t, edge);
    for (const [name, bytes] of answers) {
      const spare = await handSpare(t, edge, grant);
      // A POST: never sent again over HTTP/2 (only a bodyless idempotent request may be), so the 502 is what it met.
      const reply = visit(edge.port, 'POST', '/x', 'body');
      assert.match(await spare.request, /^POST \/x HTTP\/1\.1\r\n/, name);
      spare.socket.write(bytes);
      const r = await reply;
      assert.equal(r.status, 502, `${name}: ${r.body}`);
      assert.equal(JSON.parse(r.body).code, 'agent_error', name);
      await closed(spare.socket);
      assert.equal(data.hasCapacity(), false, `${name}: no connection left, none counted free`);
    }
    // With no data connection, requests take the tunnel's HTTP/2 streams; a new one carries the next request.
    assert.equal((await visit(edge.port, 'GET', '/page')).body, 'ok');
    const spare = await handSpare(t, edge, grant);
    assert.equal(data.hasCapacity(), true);
    const reply = visit(edge.port, 'GET', '/page');
    await spare.request;
    spare.socket.write('HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nmine');
    assert.deepEqual(await reply, { status: 200, body: 'mine', complete: true });
    assert.equal(data.exchanges, answers.length + 1);
  });

  it('a flood of 103 Early Hints before the answer: the final answer still reaches the visitor', async (t) => {
    const edge = await startEdge(t);
    const { grant } = await handOnly(t, edge);
    const spare = await handSpare(t, edge, grant);
    const reply = visit(edge.port, 'GET', '/page');
    await spare.request;
    spare.socket.write('HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n'.repeat(2000));
    spare.socket.write('HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nfinal');
    assert.deepEqual(await reply, { status: 200, body: 'final', complete: true });
  });

  it('a GET answered with a 101 is sent again over an HTTP/2 stream (bodyless and idempotent), once', async (t) => {
    const edge = await startEdge(t);
    const { data, grant } = await handOnly(t, edge);
    const spare = await handSpare(t, edge, grant);
    const reply = visit(edge.port, 'GET', '/page');
    await spare.request;
    spare.socket.write('HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: other\r\n\r\n');
    assert.deepEqual(await reply, { status: 200, body: 'ok', complete: true });
    await closed(spare.socket);
    assert.equal(data.exchanges, 1);
  });

  it('bytes after a complete response close that connection: the visitor gets the response, the bytes reach no one', async (t) => {
    const edge = await startEdge(t);
    const { grant } = await handOnly(t, edge);
    const smuggled = 'HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nevil';
    // In the same write as the response…
    const first = await handSpare(t, edge, grant);
    const one = visit(edge.port, 'GET', '/one');
    await first.request;
    first.socket.write(`HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok${smuggled}`);
    assert.deepEqual(await one, { status: 200, body: 'ok', complete: true });
    await closed(first.socket);
    // …and later, on the connection the edge keeps alive for the next request.
    const second = await handSpare(t, edge, grant);
    const two = visit(edge.port, 'GET', '/two');
    await second.request;
    second.socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
    assert.deepEqual(await two, { status: 200, body: 'ok', complete: true });
    second.socket.write(smuggled);
    await closed(second.socket);
    for (const path of ['/a', '/b', '/c']) assert.equal((await visit(edge.port, 'GET', path)).body, 'ok', path);
  });

  it('upgrades racing for the last places: exactly max are taken, the rest get 429', async (t) => {
    const edge = await startEdge(t, { maxDataConnections: 6 });
    const local = await startLocal(t);
    const agent = await agentFor(t, edge, local.port, { dataConnections: 2 });
    const { session, grant } = await ready(edge, agent, 2);
    const answers = await Promise.all(Array.from({ length: 12 }, () => dataUpgrade(t, edge.port, grant)));
    const statuses = answers.map((a) => a.status).sort();
    assert.deepEqual(statuses, [101, 101, 101, 101, 429, 429, 429, 429, 429, 429, 429, 429]);
    assert.equal(session.data!.size, 6);
  });
});

describe('data connections: the edge shutting down', () => {
  it('TunnelServer.close(grace) lets an exchange in flight on a data connection finish, then closes it', async (t) => {
    const edge = await startEdge(t);
    const local = await startLocal(t);
    const agent = await agentFor(t, edge, local.port, { dataConnections: 1 });
    const { session } = await ready(edge, agent, 1);
    const reply = visit(edge.port, 'GET', '/hold');
    await eventually(async () => (local.held.length === 1 ? true : undefined));
    const closing = edge.tunnels.close(20_000);
    // The tunnel itself carries no stream, so it is gone at once; the exchange goes on on its data connection.
    await eventually(async () => (edge.registry.pick(edge.endpoint.uuid) === null && session.data!.size === 1 ? true : undefined));
    local.held[0].end('held');
    assert.deepEqual(await reply, { status: 200, body: 'held', complete: true });
    await closing;
    assert.equal(session.data!.size, 0);
  });

  it('cuts an exchange still in flight when the grace ends, and resolves only once its connection closed', async (t) => {
    const edge = await startEdge(t);
    const { session, grant } = await handOnly(t, edge);
    // A connection that never answers and never closes (a hostile agent's): only the edge's grace can end it.
    const spare = await handSpare(t, edge, grant);
    const reply = visit(edge.port, 'GET', '/never');
    await spare.request;
    await edge.tunnels.close(100);
    assert.equal(session.data!.size, 0);
    const r = await reply;
    assert.equal(r.status, 502, r.body);
    await closed(spare.socket);
  });
});
