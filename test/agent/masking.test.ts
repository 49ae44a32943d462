// WebSocket masking on the agent's side of the tunnel: an all-zero mask where no intermediary can read the bytes
// (TLS, loopback), ws's random mask elsewhere. Checked on the wire through a recording TCP relay.
import { describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { maskingProtectsNothing, startAgent } from '../../src/agent/agent.ts';
import { TunnelRegistry } from '../../src/edge/tunnels/registry.ts';
import { TunnelServer } from '../../src/edge/tunnels/tunnel-server.ts';

async function listen(server: net.Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as net.AddressInfo).port;
}

function close(server: net.Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

/** A TCP relay to `port` that keeps every byte the client sent. */
async function recordingRelay(t: TestContext, port: number) {
  const sent: Buffer[] = [];
  const sockets = new Set<net.Socket>();
  const relay = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    sockets.add(client).add(upstream);
    client.on('data', (chunk: Buffer) => sent.push(chunk));
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  const relayPort = await listen(relay);
  t.after(async () => {
    for (const s of sockets) s.destroy();
    await close(relay);
  });
  return { port: relayPort, sent: () => Buffer.concat(sent) };
}

describe('agent WebSocket masking', () => {
  it('skips masking only over TLS or loopback', () => {
    for (const url of ['wss://edge.example.com/_edge/tunnel', 'ws://127.0.0.1:8080/_edge/tunnel', 'ws://127.1.2.3/_edge/tunnel', 'ws://localhost:8080/x', 'ws://[::1]:8080/x']) {
      assert.equal(maskingProtectsNothing(new URL(url)), true, url);
    }
    for (const url of ['ws://edge.example.com/_edge/tunnel', 'ws://10.0.0.1:8080/_edge/tunnel', 'ws://127.0.0.1.example.com/x', 'ws://[::2]/x']) {
      assert.equal(maskingProtectsNothing(new URL(url)), false, url);
    }
  });

  it('sends masked frames with an all-zero key on loopback, which the edge accepts', async (t) => {
    const local = http.createServer((_req, res) => res.end('served'));
    const localPort = await listen(local);
    t.after(() => close(local));
    const endpoint = { uuid: randomUUID(), hostname: 'mask.edge.test', public_url: 'http://mask.edge.test' };
    const registry = new TunnelRegistry();
    const tunnels = new TunnelServer({ authorize: async () => ({ ok: true, endpoint }), registry, region: 'local', node: 'edge-test' });
    const edge = http.createServer();
    tunnels.attach(edge);
    const relay = await recordingRelay(t, await listen(edge));
    t.after(async () => {
      await tunnels.close(1_000);
      edge.closeAllConnections();
      await close(edge);
    });
    const agent = await startAgent({ edgeUrl: `http://127.0.0.1:${relay.port}`, apiKey: 'key', endpoint: endpoint.uuid, protocol: 'http', target: localPort });
    t.after(() => agent.stop(1_000));

    // Traffic both ways over the zero-masked tunnel.
    const session = registry.pick(endpoint.uuid);
    assert.ok(session);
    const stream = session.request({ ':method': 'GET', ':path': '/', ':authority': endpoint.hostname, ':scheme': 'http' });
    stream.end();
    let body = '';
    stream.setEncoding('utf8');
    for await (const chunk of stream) body += chunk;
    assert.equal(body, 'served');

    // The first frame after the upgrade request is the hello: FIN + text, MASK bit set (RFC 6455 §5.1 requires it
    // of clients), a key of four zero bytes, and so the JSON in clear.
    const wire = relay.sent();
    const frame = wire.subarray(wire.indexOf('\r\n\r\n') + 4);
    assert.equal(frame[0], 0x81);
    assert.equal(frame[1] & 0x80, 0x80);
    const length = frame[1] & 0x7f;
    const keyAt = length === 126 ? 4 : 2;
    assert.deepEqual([...frame.subarray(keyAt, keyAt + 4)], [0, 0, 0, 0]);
    assert.match(frame.subarray(keyAt + 4).toString('latin1'), /^\{"type":"hello"/);
  });
});
