// WebSocket masking on the agent's side of the tunnel (the ws fallback transport): every client frame masked with a
// fresh random key (RFC 6455 §5.3), read on the wire by a TLS-terminating relay, the intermediary masking protects.
import { describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import { startAgent, type AgentOptions } from '../../src/agent/agent.ts';
import { TunnelRegistry } from '../../src/edge/tunnels/registry.ts';
import { TunnelServer } from '../../src/edge/tunnels/tunnel-server.ts';
import { createSelfSigned } from '../helpers/certs.ts';

async function listen(server: net.Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as net.AddressInfo).port;
}

function close(server: net.Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

/**
 * A relay to `port` that keeps every byte the client sent, as it reaches the edge: in clear, over plain TCP or
 * after terminating TLS (a load balancer in front of the edge).
 */
async function recordingRelay(t: TestContext, port: number, tlsOptions?: tls.TlsOptions) {
  const sent: Buffer[] = [];
  const sockets = new Set<net.Socket>();
  const relayed = (client: net.Socket) => {
    const upstream = net.connect(port, '127.0.0.1');
    sockets.add(client).add(upstream);
    client.on('data', (chunk: Buffer) => sent.push(chunk));
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  };
  const relay = tlsOptions ? tls.createServer(tlsOptions, relayed) : net.createServer(relayed);
  const relayPort = await listen(relay);
  t.after(async () => {
    for (const s of sockets) s.destroy();
    await close(relay);
  });
  return { port: relayPort, sent: () => Buffer.concat(sent) };
}

interface Frame {
  opcode: number;
  masked: boolean;
  key: Buffer;
  payload: Buffer;
}

/** The client's WebSocket frames after its upgrade request (RFC 6455 §5.2), payloads unmasked. */
function framesOf(wire: Buffer): Frame[] {
  const frames: Frame[] = [];
  let at = wire.indexOf('\r\n\r\n') + 4;
  while (at + 2 <= wire.length) {
    const opcode = wire[at] & 0x0f;
    const masked = (wire[at + 1] & 0x80) !== 0;
    let length = wire[at + 1] & 0x7f;
    let head = 2;
    if (length === 126) {
      length = wire.readUInt16BE(at + 2);
      head = 4;
    } else if (length === 127) {
      length = Number(wire.readBigUInt64BE(at + 2));
      head = 10;
    }
    const key = masked ? wire.subarray(at + head, at + head + 4) : Buffer.alloc(4);
    const start = at + head + (masked ? 4 : 0);
    if (start + length > wire.length) break; // cut by the end of the recording
    const payload = Buffer.from(wire.subarray(start, start + length));
    for (let i = 0; i < payload.length; i++) payload[i] ^= key[i & 3];
    frames.push({ opcode, masked, key, payload });
    at = start + length;
  }
  return frames;
}

async function tunnelThroughRelay(t: TestContext, tlsRelay: boolean) {
  const local = http.createServer((_req, res) => res.end('served'));
  const localPort = await listen(local);
  t.after(() => close(local));
  const endpoint = { uuid: randomUUID(), hostname: 'mask.edge.test', public_url: 'http://mask.edge.test' };
  const registry = new TunnelRegistry();
  const tunnels = new TunnelServer({ authorize: async () => ({ ok: true, endpoint }), registry, region: 'local', node: 'edge-test' });
  const edge = http.createServer();
  tunnels.attach(edge);
  const edgePort = await listen(edge);
  t.after(async () => {
    await tunnels.close(1_000);
    edge.closeAllConnections();
    await close(edge);
  });
  const cert = tlsRelay ? await createSelfSigned({ dns: ['localhost'] }) : null;
  const relay = await recordingRelay(t, edgePort, cert ? { key: cert.keyPem, cert: cert.certPem } : undefined);
  const options: AgentOptions = cert
    ? { edgeUrl: `https://localhost:${relay.port}`, edgeTls: { ca: cert.certPem }, apiKey: 'key', endpoint: endpoint.uuid, protocol: 'http', target: localPort, transport: 'ws' }
    : { edgeUrl: `http://127.0.0.1:${relay.port}`, apiKey: 'key', endpoint: endpoint.uuid, protocol: 'http', target: localPort, transport: 'ws' };
  const agent = await startAgent(options);
  t.after(() => agent.stop(1_000));

  // Traffic both ways, so HTTP/2 frames follow the hello.
  const session = registry.pick(endpoint.uuid);
  assert.ok(session);
  assert.equal(session.transport, 'ws');
  for (let i = 0; i < 3; i++) {
    const stream = session.request({ ':method': 'GET', ':path': '/', ':authority': endpoint.hostname, ':scheme': 'http' });
    stream.end();
    let body = '';
    stream.setEncoding('utf8');
    for await (const chunk of stream) body += chunk;
    assert.equal(body, 'served');
  }
  return relay;
}

function assertRandomlyMasked(frames: Frame[]): void {
  // The hello (FIN + text), then the agent's HTTP/2 bytes in binary messages.
  assert.ok(frames.length >= 3, `${frames.length} frames`);
  assert.equal(frames[0].opcode, 0x1);
  assert.match(frames[0].payload.toString('utf8'), /^\{"type":"hello"/);
  assert.ok(frames.slice(1).some((f) => f.opcode === 0x2));
  for (const f of frames) assert.equal(f.masked, true, 'every client frame has the MASK bit (RFC 6455 §5.1)');
  // A fresh random 32-bit key per frame: none all zero (which would leave the payload in clear), none repeated.
  const keys = frames.map((f) => f.key.toString('hex'));
  assert.ok(!keys.includes('00000000'), `keys ${keys.join(' ')}`);
  assert.equal(new Set(keys).size, keys.length, `keys ${keys.join(' ')}`);
}

describe('agent WebSocket masking', () => {
  it('masks every frame with a fresh random key on a plain connection, even to loopback', async (t) => {
    const relay = await tunnelThroughRelay(t, false);
    const wire = relay.sent();
    assertRandomlyMasked(framesOf(wire));
    // The hello's API key never crosses in clear.
    assert.equal(wire.includes('"api_key"'), false);
  });

  it('masks every frame with a fresh random key over TLS, as a TLS-terminating load balancer sees them', async (t) => {
    const relay = await tunnelThroughRelay(t, true);
    const wire = relay.sent();
    assertRandomlyMasked(framesOf(wire));
    assert.equal(wire.includes('"api_key"'), false);
  });
});
