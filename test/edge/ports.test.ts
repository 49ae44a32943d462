// Dedicated ports end to end: the real program (control, edge, worker), real tcp/udp agents over real tunnels, real
// echo services. Bytes and datagrams round-trip through the assigned port; status turns active; ports follow config.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import { eventually } from '../helpers/eventually.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { ask, connectOutcome, freePort, roundTrip, tcpEcho, udpEcho } from '../helpers/echo-services.ts';

describe('dedicated ports', () => {
  let t: TestNode;
  let user: { api_key: string };
  let echo: Awaited<ReturnType<typeof tcpEcho>>;
  let udp: Awaited<ReturnType<typeof udpEcho>>;
  let edgeUrl: string;
  const agents: Agent[] = [];

  before(async () => {
    t = await startTestNode({ EDGE_PRESENCE_INTERVAL_MS: '100', EDGE_JANITOR_INTERVAL_MS: '100' });
    // business: dedicated_ports with no count limit and no verification gate, and tcp/udp tunnels.
    user = await t.createUser('business');
    echo = await tcpEcho();
    udp = await udpEcho();
    edgeUrl = `http://127.0.0.1:${t.node.edge!.httpPort}`;
  });
  after(async () => {
    for (const a of agents) await a.stop();
    await echo.close();
    await udp.close();
    await t.close();
  });

  async function endpointWithPorts(ports: { dedicated_tcp_port?: number | null; dedicated_udp_port?: number | null }): Promise<string> {
    const created = await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} });
    assert.equal(created.status, 201, created.text);
    const uuid = created.body.uuid as string;
    await setPorts(uuid, ports);
    return uuid;
  }

  /** Assigns ports and waits until the edge's config mirror holds exactly them. */
  async function setPorts(uuid: string, ports: { dedicated_tcp_port?: number | null; dedicated_udp_port?: number | null }): Promise<void> {
    const res = await t.api('PUT', `/v1/endpoints/${uuid}/ports`, { key: user.api_key, body: ports });
    assert.equal(res.status, 200, res.text);
    await eventually(async () => {
      const e = t.node.edge!.config.endpoint(uuid);
      return e && e.dedicated_tcp_port === res.body.dedicated_tcp_port && e.dedicated_udp_port === res.body.dedicated_udp_port ? true : undefined;
    });
  }

  async function agent(uuid: string, protocol: 'http' | 'tcp' | 'udp', target: number): Promise<Agent> {
    const a = await startAgent({ edgeUrl, apiKey: user.api_key, endpoint: uuid, protocol, target });
    agents.push(a);
    return a;
  }

  const status = async (uuid: string) => (await t.api('GET', `/v1/endpoints/${uuid}`, { key: user.api_key })).body.status as string;
  const waitStatus = (uuid: string, want: string) => eventually(async () => ((await status(uuid)) === want ? true : undefined));

  it('carries TCP bytes through a tcp agent, both ways with half-close, and turns the endpoint active', async () => {
    const port = await freePort('tcp');
    const uuid = await endpointWithPorts({ dedicated_tcp_port: port });
    await agent(uuid, 'tcp', echo.port);
    await waitStatus(uuid, 'active');

    const small = await roundTrip(port, Buffer.from('hello over a dedicated port'));
    assert.equal(small.toString(), 'hello over a dedicated port');
    // Larger than every window and buffer on the way, so backpressure has to work for it to arrive whole.
    const big = randomBytes(8 * 1024 * 1024);
    assert.ok((await roundTrip(port, big)).equals(big));
  });

  it('closes a visitor connection at once when the endpoint has no tcp agent, even with an http agent live', async () => {
    const port = await freePort('tcp');
    const uuid = await endpointWithPorts({ dedicated_tcp_port: port });
    // Active without any agent: the status says the port is bound, not that someone serves it.
    await waitStatus(uuid, 'active');
    assert.deepEqual(await connectOutcome(port), { refused: false, received: 0 });
    await agent(uuid, 'http', echo.port);
    assert.deepEqual(await connectOutcome(port), { refused: false, received: 0 });
  });

  it('stops listening when the port is cleared, while a connection already open runs on', async () => {
    const port = await freePort('tcp');
    const uuid = await endpointWithPorts({ dedicated_tcp_port: port });
    await agent(uuid, 'tcp', echo.port);
    await waitStatus(uuid, 'active');

    const live = net.connect({ port, host: '127.0.0.1' });
    live.on('error', () => {});
    const reply = (text: string) =>
      new Promise<string>((resolve) => {
        live.once('data', (d: Buffer) => resolve(d.toString()));
        live.write(text);
      });
    assert.equal(await reply('before'), 'before');

    await setPorts(uuid, { dedicated_tcp_port: null });
    await eventually(async () => ((await connectOutcome(port)).refused ? true : undefined));
    assert.equal(await reply('after'), 'after');
    live.destroy();
  });

  it('retries a port another process holds and opens it once freed; provisioning until then', async () => {
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    const port = (blocker.address() as AddressInfo).port;
    const uuid = await endpointWithPorts({ dedicated_tcp_port: port });
    await agent(uuid, 'tcp', echo.port);
    // A witness assigned later turns active: the worker pass that saw it judged the blocked endpoint against
    // heartbeats from edges that had applied both assignments, and left it provisioning (no sleep needed).
    const witness = await endpointWithPorts({ dedicated_tcp_port: await freePort('tcp') });
    await waitStatus(witness, 'active');
    assert.equal(await status(uuid), 'provisioning');

    await new Promise<void>((r) => blocker.close(() => r()));
    await waitStatus(uuid, 'active');
    assert.equal((await roundTrip(port, Buffer.from('freed'))).toString(), 'freed');
  });

  it('moves the listener when the port changes', async () => {
    const [first, second] = [await freePort('tcp'), await freePort('tcp')];
    const uuid = await endpointWithPorts({ dedicated_tcp_port: first });
    await agent(uuid, 'tcp', echo.port);
    await waitStatus(uuid, 'active');
    await setPorts(uuid, { dedicated_tcp_port: second });
    // A new port goes back to provisioning in the control API, and to active once the edge has bound it.
    await waitStatus(uuid, 'active');
    assert.equal((await roundTrip(second, Buffer.from('moved'))).toString(), 'moved');
    assert.deepEqual(await connectOutcome(first), { refused: true });
  });

  it('carries UDP datagrams through a udp agent, each visitor getting its own replies', async () => {
    const port = await freePort('udp');
    const uuid = await endpointWithPorts({ dedicated_udp_port: port });
    await agent(uuid, 'udp', udp.port);
    await waitStatus(uuid, 'active');

    const a = dgram.createSocket('udp4');
    const b = dgram.createSocket('udp4');
    try {
      await Promise.all([new Promise<void>((r) => a.bind(0, '127.0.0.1', r)), new Promise<void>((r) => b.bind(0, '127.0.0.1', r))]);
      // Datagrams may be lost by definition; retry each question within the deadline rather than sleeping.
      assert.equal(await eventually(() => ask(a, port, 'from-a')), 'echo:from-a');
      assert.equal(await eventually(() => ask(b, port, 'from-b')), 'echo:from-b');
      assert.equal(await eventually(() => ask(a, port, 'again-a')), 'echo:again-a');
      assert.equal(await eventually(() => ask(a, port, '')), 'echo:');
    } finally {
      a.close();
      b.close();
    }
  });

  it('ends the UDP flows of a stopping agent, so it stops at once and the visitor moves to another agent', async () => {
    const port = await freePort('udp');
    const uuid = await endpointWithPorts({ dedicated_udp_port: port });
    const first = await agent(uuid, 'udp', udp.port);
    await waitStatus(uuid, 'active');
    const socket = dgram.createSocket('udp4');
    try {
      await new Promise<void>((r) => socket.bind(0, '127.0.0.1', r));
      assert.equal(await eventually(() => ask(socket, port, 'one')), 'echo:one');
      await agent(uuid, 'udp', udp.port);
      // The agent drains for up to 5 s while streams are open; a flow left open would hold it that long.
      const started = Date.now();
      await first.stop();
      assert.ok(Date.now() - started < 4_000, `agent stop took ${Date.now() - started} ms`);
      assert.equal(await eventually(() => ask(socket, port, 'two')), 'echo:two');
    } finally {
      socket.close();
    }
  });

  it('drops datagrams when the endpoint has no udp agent', async () => {
    const port = await freePort('udp');
    const uuid = await endpointWithPorts({ dedicated_udp_port: port });
    await waitStatus(uuid, 'active');
    const socket = dgram.createSocket('udp4');
    try {
      await new Promise<void>((r) => socket.bind(0, '127.0.0.1', r));
      assert.equal(await ask(socket, port, 'anyone?', 300), undefined);
    } finally {
      socket.close();
    }
  });

  it('closes the ports of a deleted endpoint', async () => {
    const [tcp, udpPort] = [await freePort('tcp'), await freePort('udp')];
    const uuid = await endpointWithPorts({ dedicated_tcp_port: tcp, dedicated_udp_port: udpPort });
    await waitStatus(uuid, 'active');
    assert.equal((await t.api('DELETE', `/v1/endpoints/${uuid}`, { key: user.api_key })).status, 204);
    await eventually(async () => ((await connectOutcome(tcp)).refused ? true : undefined));
    // The UDP port is free again: this process can bind it.
    await eventually(async () => {
      const s = dgram.createSocket('udp4');
      return new Promise<true | undefined>((resolve) => {
        s.once('error', () => resolve(undefined));
        s.bind(udpPort, '127.0.0.1', () => s.close(() => resolve(true)));
      });
    });
  });
});
