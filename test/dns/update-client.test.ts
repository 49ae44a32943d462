// DnsUpdateClient against a real knotd (test/helpers/knot.ts): CNAMEs published, replaced and deleted and read back
// by queries; refusals by ACL and by a wrong secret; and loopback servers that refuse, never answer or answer badly.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import dnsPacket from 'dns-packet';
import { DnsUpdateClient, DnsUpdateError } from '../../src/dns/update-client.ts';
import { parseTsigKey, signMessage, verifyResponse, type TsigKey } from '../../src/dns/tsig.ts';
import { knotAvailable, startKnot, type KnotServer } from '../helpers/knot.ts';

const ZONE = 'example.test';
const SECRET = randomBytes(32).toString('base64');
const KEY: TsigKey = parseTsigKey(`edge-update.:hmac-sha256:${SECRET}`);
const KNOT_KEY = { name: 'edge-update.', algorithm: 'hmac-sha256', secret: SECRET } as const;

function cnames(packet: dnsPacket.Packet): string[] {
  return (packet.answers ?? []).flatMap((a) => (a.type === 'CNAME' ? [a.data] : []));
}

/** Fails unless `promise` rejects with a DnsUpdateError passing `check`; returns it. */
async function updateError(promise: Promise<unknown>): Promise<DnsUpdateError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof DnsUpdateError, `expected a DnsUpdateError, got ${String(err)}`);
    return err;
  }
  assert.fail('the update succeeded');
}

/**
 * Adds an A and an AAAA record by a signed UPDATE built here (dns-packet encodes additions), so replaceCname has
 * data to remove that its own messages never create.
 */
async function addAddresses(port: number, name: string): Promise<void> {
  const message = dnsPacket.encode({
    type: 'query',
    id: 4242,
    flags: 5 << 11,
    questions: [{ type: 'SOA', name: ZONE, class: 'IN' }],
    authorities: [
      { type: 'A', name, class: 'IN', ttl: 60, data: '192.0.2.7' },
      { type: 'AAAA', name, class: 'IN', ttl: 60, data: '2001:db8::7' },
    ],
  });
  const { signed, mac } = signMessage(message, KEY);
  const socket = connect({ host: '127.0.0.1', port });
  socket.write(frame(signed));
  const response = await readMessage(socket);
  socket.destroy();
  assert.equal(response.readUInt16BE(2) & 0xf, 0, 'the addresses were added');
  assert.equal(verifyResponse(response, mac, KEY).ok, true);
}

interface TcpServer {
  port: number;
  /** Connections accepted so far. */
  accepted: Socket[];
  close(): Promise<void>;
}

/** A loopback TCP server handing each connection to `onConnection`. */
async function tcpServer(onConnection: (socket: Socket) => void): Promise<TcpServer> {
  const accepted: Socket[] = [];
  const server: Server = createServer((socket) => {
    accepted.push(socket);
    onConnection(socket);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    accepted,
    async close() {
      for (const s of accepted) s.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}

/** Reads one length-prefixed DNS message from `socket`, leaving the socket open (a for-await break would destroy it). */
function readMessage(socket: Socket): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let buffered = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        socket.off('data', onData);
        resolve(buffered.subarray(2, 2 + buffered.readUInt16BE(0)));
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.once('end', () => reject(new Error('connection ended before a whole message')));
  });
}

function frame(message: Buffer): Buffer {
  const length = Buffer.alloc(2);
  length.writeUInt16BE(message.length);
  return Buffer.concat([length, message]);
}

describe('DnsUpdateClient against knotd', { skip: knotAvailable() ? false : 'knotd is not installed (apt-get install knot)' }, () => {
  let knot: KnotServer;
  let denying: KnotServer;
  let client: DnsUpdateClient;

  before(async () => {
    [knot, denying] = await Promise.all([
      startKnot({ zone: ZONE, key: KNOT_KEY, allowUpdate: true }),
      startKnot({ zone: ZONE, key: KNOT_KEY, allowUpdate: false }),
    ]);
    client = new DnsUpdateClient({ server: `127.0.0.1:${knot.port}`, zone: ZONE, key: KEY });
  });

  after(async () => {
    await Promise.all([knot?.stop(), denying?.stop()]);
  });

  it('publishes a CNAME that a query then reads back', async () => {
    await client.replaceCname('www.example.test', 'edge-a.example.net', 120);
    const answer = await knot.query('www.example.test', 'CNAME');
    assert.deepEqual(cnames(answer), ['edge-a.example.net']);
    assert.equal(answer.answers?.[0].type === 'CNAME' && answer.answers[0].ttl, 120);
  });

  it('replaces the CNAME with a new target, leaving one', async () => {
    await client.replaceCname('swap.example.test', 'edge-a.example.net', 60);
    await client.replaceCname('swap.example.test', 'edge-b.example.net', 60);
    assert.deepEqual(cnames(await knot.query('swap.example.test', 'CNAME')), ['edge-b.example.net']);
  });

  it('removes A and AAAA records at the name, which a CNAME cannot sit beside', async () => {
    await addAddresses(knot.port, 'had-a.example.test');
    for (const type of ['A', 'AAAA'] as const) assert.equal((await knot.query('had-a.example.test', type)).answers?.length, 1, type);
    await client.replaceCname('had-a.example.test', 'edge-a.example.net', 60);
    assert.deepEqual(cnames(await knot.query('had-a.example.test', 'CNAME')), ['edge-a.example.net']);
    for (const type of ['A', 'AAAA'] as const) {
      const answer = await knot.query('had-a.example.test', type);
      assert.deepEqual((answer.answers ?? []).filter((r) => r.type === type), [], `the ${type} record is gone`);
    }
  });

  it('deletes the CNAME', async () => {
    await client.replaceCname('gone.example.test', 'edge-a.example.net', 60);
    assert.deepEqual(cnames(await knot.query('gone.example.test', 'CNAME')), ['edge-a.example.net']);
    await client.deleteName('gone.example.test');
    const answer = await knot.query('gone.example.test', 'CNAME');
    assert.equal(answer.rcode, 'NXDOMAIN');
    assert.deepEqual(cnames(answer), []);
    // Deleting what is not there is no error (RFC 2136 §3.4.2.3).
    await client.deleteName('gone.example.test');
  });

  it('is refused, with the rcode, by a server whose ACL denies updates with the key', async () => {
    const denied = new DnsUpdateClient({ server: `127.0.0.1:${denying.port}`, zone: ZONE, key: KEY });
    const err = await updateError(denied.replaceCname('www.example.test', 'edge-a.example.net', 60));
    assert.equal(err.reason, 'refused');
    assert.ok(err.rcode === 'NOTAUTH' || err.rcode === 'REFUSED', `rcode ${err.rcode}`);
    assert.match(err.message, new RegExp(`refused the update to example.test: ${err.rcode}`));
    assert.deepEqual(cnames(await denying.query('www.example.test', 'CNAME')), []);
  });

  it('is rejected when signed with the wrong secret, and changes nothing', async () => {
    const wrong = new DnsUpdateClient({ server: `127.0.0.1:${knot.port}`, zone: ZONE, key: { ...KEY, secret: randomBytes(32) } });
    const err = await updateError(wrong.replaceCname('wrong.example.test', 'edge-a.example.net', 60));
    assert.ok(err.reason === 'refused' || err.reason === 'bad_response', err.reason);
    assert.equal(err.rcode, 'NOTAUTH');
    assert.match(err.message, /BADSIG/);
    assert.equal((await knot.query('wrong.example.test', 'CNAME')).rcode, 'NXDOMAIN');
  });

  it('is rejected when the key is unknown to the server', async () => {
    const unknown = new DnsUpdateClient({ server: `127.0.0.1:${knot.port}`, zone: ZONE, key: { ...KEY, name: 'stranger' } });
    const err = await updateError(unknown.replaceCname('stranger.example.test', 'edge-a.example.net', 60));
    assert.equal(err.rcode, 'NOTAUTH');
    assert.match(err.message, /BADKEY/);
  });

  it('is refused with NOTZONE for a zone the server is not primary for', async () => {
    const other = new DnsUpdateClient({ server: `127.0.0.1:${knot.port}`, zone: 'other.test', key: KEY });
    const err = await updateError(other.replaceCname('www.other.test', 'edge-a.example.net', 60));
    assert.equal(err.reason, 'refused');
    assert.ok(err.rcode === 'NOTAUTH' || err.rcode === 'NOTZONE' || err.rcode === 'REFUSED', `rcode ${err.rcode}`);
  });
});

describe('DnsUpdateClient transport failures', () => {
  const key = parseTsigKey(`edge-update.:hmac-sha256:${randomBytes(32).toString('base64')}`);
  const servers: TcpServer[] = [];

  after(async () => {
    await Promise.all(servers.map((s) => s.close()));
  });

  it('reports a port nobody listens on as unreachable', async () => {
    const gone = await tcpServer(() => undefined);
    await gone.close();
    const client = new DnsUpdateClient({ server: `127.0.0.1:${gone.port}`, zone: ZONE, key });
    const err = await updateError(client.replaceCname('www.example.test', 'edge-a.example.net', 60));
    assert.equal(err.reason, 'unreachable');
    assert.match(err.message, /ECONNREFUSED/);
  });

  it('times out on a server that accepts and never answers, and closes its connection', async () => {
    const silent = await tcpServer(() => undefined);
    servers.push(silent);
    const client = new DnsUpdateClient({ server: `127.0.0.1:${silent.port}`, zone: ZONE, key, timeoutMs: 200 });
    const err = await updateError(client.replaceCname('www.example.test', 'edge-a.example.net', 60));
    assert.equal(err.reason, 'timeout');
    assert.equal(silent.accepted.length, 1);
    const [socket] = silent.accepted;
    // The client hung up: the server's side sees the end of the stream.
    if (!socket.readableEnded) {
      socket.resume();
      await once(socket, 'end');
    }
  });

  it('treats an answer with a bad TSIG as a bad response, even a NOERROR one', async () => {
    const forger = await tcpServer((socket) => {
      void readMessage(socket).then((request) => {
        const response = dnsPacket.encode({ type: 'response', id: request.readUInt16BE(0), flags: 5 << 11, questions: [{ type: 'SOA', name: ZONE, class: 'IN' }] });
        // Signed as a request, so without the request's MAC: the MAC cannot match.
        socket.write(frame(signMessage(response, key).signed));
      });
    });
    servers.push(forger);
    const client = new DnsUpdateClient({ server: `127.0.0.1:${forger.port}`, zone: ZONE, key });
    const err = await updateError(client.replaceCname('www.example.test', 'edge-a.example.net', 60));
    assert.equal(err.reason, 'bad_response');
    assert.equal(err.rcode, 'NOERROR');
    assert.match(err.message, /BADSIG/);
  });

  it('treats an unsigned NOERROR answer as a bad response and ignores answers to other IDs', async () => {
    const unsigned = await tcpServer((socket) => {
      void readMessage(socket).then((request) => {
        const id = request.readUInt16BE(0);
        const answer = (forId: number, rcode: number) =>
          dnsPacket.encode({ type: 'response', id: forId, flags: (5 << 11) | rcode, questions: [{ type: 'SOA', name: ZONE, class: 'IN' }] });
        socket.write(Buffer.concat([frame(answer((id + 1) & 0xffff, 5)), frame(answer(id, 0))]));
      });
    });
    servers.push(unsigned);
    const client = new DnsUpdateClient({ server: `127.0.0.1:${unsigned.port}`, zone: ZONE, key });
    const err = await updateError(client.deleteName('www.example.test'));
    assert.equal(err.reason, 'bad_response');
    assert.equal(err.rcode, 'NOERROR');
    assert.match(err.message, /unsigned/);
  });

  it('rejects names outside the zone, and the apex, before sending anything', async () => {
    const listener = await tcpServer(() => undefined);
    servers.push(listener);
    const client = new DnsUpdateClient({ server: `127.0.0.1:${listener.port}`, zone: 'Example.Test.', key });
    for (const name of ['www.example.org', 'evil-example.test', 'example.test', 'www.example.test.org']) {
      await assert.rejects(client.replaceCname(name, 'edge-a.example.net', 60), RangeError, name);
      await assert.rejects(client.deleteName(name), RangeError, name);
    }
    await assert.rejects(client.replaceCname('www.example.test', 'not a name', 60), RangeError);
    await assert.rejects(client.replaceCname('www.example.test', 'edge.example.net', -1), RangeError);
    await assert.rejects(client.replaceCname('www.example.test', 'edge.example.net', 1.5), RangeError);
    assert.equal(listener.accepted.length, 0);
  });

  it('validates its options', () => {
    for (const server of ['127.0.0.1', '127.0.0.1:0', '127.0.0.1:65536', '::1:53', '[::1]', '[example.net]:53', 'host:port', ':53', '']) {
      assert.throws(() => new DnsUpdateClient({ server, zone: ZONE, key }), RangeError, server);
    }
    for (const zone of ['', '.', 'bad zone']) {
      assert.throws(() => new DnsUpdateClient({ server: '127.0.0.1:53', zone, key }), RangeError, zone);
    }
    assert.throws(() => new DnsUpdateClient({ server: '127.0.0.1:53', zone: ZONE, key, timeoutMs: 0 }), RangeError);
    assert.equal(new DnsUpdateClient({ server: '[::1]:53', zone: 'Example.Test.', key }).zone, 'example.test');
    assert.equal(new DnsUpdateClient({ server: 'ns1.example.net:5353', zone: ZONE, key }).zone, ZONE);
  });
});
