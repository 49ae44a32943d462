// The DNS wire server over real UDP and TCP sockets on 127.0.0.1, with a small authority for example.test: answers,
// negative answers, EDNS sizes, Client Subnet, truncation, RFC 8482 ANY, malformed input, TCP framing and limits, RRL.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import dnsPacket, { type Answer, type DecodedPacket, type OptAnswer, type PacketOpt } from 'dns-packet';
import { Registry } from 'prom-client';
import { startDnsServer, type DnsServer } from '../../src/dns/server.ts';
import type { DnsAuthority, DnsClient, DnsQuestion, DnsResponse } from '../../src/dns/types.ts';
import { sample } from '../helpers/metrics.ts';
import { random } from '../helpers/random.ts';
import { framed, idOf, query, TcpClient, UdpClient } from '../helpers/dns-clients.ts';

const run = promisify(execFile);
const hasDig = (() => {
  try {
    execFileSync('dig', ['-v'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

const ZONE = 'example.test';
const SOA: Answer = {
  name: ZONE,
  type: 'SOA',
  ttl: 300,
  data: { mname: `ns1.${ZONE}`, rname: `hostmaster.${ZONE}`, serial: 1, refresh: 3600, retry: 600, expire: 86400, minimum: 60 },
};
/** About 800 bytes of TXT: over 512 (no EDNS), under 1232 (EDNS). */
const MID_TXT = Array.from({ length: 4 }, (_, i) => String(i).repeat(200));
/** About 1600 bytes of TXT: over every UDP limit, fine over TCP. */
const BIG_TXT = Array.from({ length: 8 }, (_, i) => String.fromCharCode(97 + i).repeat(200));

const RECORDS: Answer[] = [
  { name: `www.${ZONE}`, type: 'A', ttl: 60, data: '192.0.2.10' },
  { name: `www.${ZONE}`, type: 'A', ttl: 60, data: '192.0.2.11' },
  { name: `www.${ZONE}`, type: 'AAAA', ttl: 60, data: '2001:db8::10' },
  { name: `www.${ZONE}`, type: 'TXT', ttl: 60, data: 'v=www' },
  { name: `text.${ZONE}`, type: 'TXT', ttl: 60, data: 'only text here' },
  { name: `mid.${ZONE}`, type: 'TXT', ttl: 60, data: MID_TXT },
  { name: `big.${ZONE}`, type: 'TXT', ttl: 60, data: BIG_TXT },
];

/** example.test from a record list, plus geo.example.test whose A record depends on the client's subnet. */
class TestZone implements DnsAuthority {
  readonly asked: Array<{ question: DnsQuestion; client: DnsClient }> = [];

  answer(question: DnsQuestion, client: DnsClient): DnsResponse {
    this.asked.push({ question, client });
    const { name, type } = question;
    if (name !== ZONE && !name.endsWith(`.${ZONE}`)) return { rcode: 'REFUSED', authoritative: false, answers: [], authorities: [] };
    if (name === `geo.${ZONE}`) return this.geo(type, client);
    const atName = RECORDS.filter((record) => record.name === name);
    if (atName.length === 0 && name !== ZONE) return { rcode: 'NXDOMAIN', authoritative: true, answers: [], authorities: [SOA] };
    const answers = atName.filter((record) => record.type === type);
    return { rcode: 'NOERROR', authoritative: true, answers, authorities: answers.length ? [] : [SOA] };
  }

  /** 192.0.2.1 for clients in 1.2.3.0/24, 192.0.2.2 for the rest; the answer depends on the /24 it was given. */
  private geo(type: string, client: DnsClient): DnsResponse {
    if (type !== 'A') return { rcode: 'NOERROR', authoritative: true, answers: [], authorities: [SOA] };
    const inRegion = client.subnet?.family === 4 && client.subnet.address.startsWith('1.2.3.');
    const data = inRegion ? '192.0.2.1' : '192.0.2.2';
    return { rcode: 'NOERROR', authoritative: true, answers: [{ name: `geo.${ZONE}`, type: 'A', ttl: 60, data }], authorities: [], ecsScope: client.subnet ? 24 : 0 };
  }

  lastClient(): DnsClient {
    const last = this.asked.at(-1);
    assert.ok(last, 'the authority was never asked');
    return last.client;
  }
}

function opt(fields: Partial<OptAnswer> = {}): OptAnswer {
  return { name: '.', type: 'OPT', udpPayloadSize: 1232, extendedRcode: 0, ednsVersion: 0, flags: 0, flag_do: false, options: [], ...fields };
}

/** An ECS option's bytes exactly as given (RFC 7871 §6), valid or not. */
function ecs(family: number, sourcePrefix: number, address: number[], scope = 0): PacketOpt {
  const data = Buffer.from([0, family, sourcePrefix, scope, ...address]);
  return { code: 8, data, ip: undefined } as PacketOpt;
}

function ecsOf(reply: DecodedPacket): any {
  const record = reply.additionals?.find((a) => a.type === 'OPT') as OptAnswer | undefined;
  assert.ok(record, 'the reply has no OPT record');
  return record.options.find((o) => o.code === 8);
}

function rcodeOf(reply: DecodedPacket): string {
  return (reply as DecodedPacket & { rcode: string }).rcode;
}

/** The answers' data in order (dns-packet types OPT without one). */
function dataOf(reply: DecodedPacket): unknown[] {
  return (reply.answers ?? []).map((a) => ('data' in a ? a.data : undefined));
}

function txtBytes(reply: DecodedPacket): number {
  return (dataOf(reply) as Buffer[][]).flat().reduce((sum, s) => sum + s.length, 0);
}

/** A header with QR=0, the given id and counts, then `body`. */
function rawMessage(id: number, counts: [number, number, number, number], body: number[]): Buffer {
  const header = Buffer.alloc(12);
  header.writeUInt16BE(id, 0);
  counts.forEach((count, i) => header.writeUInt16BE(count, 4 + 2 * i));
  return Buffer.concat([header, Buffer.from(body)]);
}

describe('DNS wire server', () => {
  const zone = new TestZone();
  const registry = new Registry();
  let server: DnsServer;
  let udp: UdpClient;

  before(async () => {
    server = await startDnsServer({ host: '127.0.0.1', port: 0, authority: zone, metrics: registry, rateLimit: { responsesPerSecond: 0, slip: 0 } });
    udp = new UdpClient(server.port);
  });
  after(async () => {
    await udp.close();
    await server.close();
  });

  /** The answer to a good query on the same socket comes next: whatever came before got no reply. */
  async function assertStillAnswers(client: UdpClient | TcpClient = udp): Promise<void> {
    const reply = await client.ask(query(`www.${ZONE}`, 'A'));
    assert.equal(rcodeOf(reply), 'NOERROR');
    assert.equal(reply.answers?.length, 2);
  }

  describe('answers', () => {
    it('answers A over UDP: AA set, RA clear, RD copied, the question echoed in the case it was asked', async () => {
      const reply = await udp.ask(query('WWW.Example.TEST', 'A'));
      assert.equal(rcodeOf(reply), 'NOERROR');
      assert.equal(reply.flag_aa, true);
      assert.equal(reply.flag_ra, false);
      assert.equal(reply.flag_rd, true);
      assert.deepEqual(reply.questions, [{ name: 'WWW.Example.TEST', type: 'A', class: 'IN' }]);
      assert.deepEqual(dataOf(reply).sort(), ['192.0.2.10', '192.0.2.11']);
      assert.deepEqual(zone.asked.at(-1)?.question, { name: `www.${ZONE}`, type: 'A' });
      assert.equal(reply.additionals?.length, 0, 'no OPT in the answer to a query without one');

      const norec = await udp.ask(query(`www.${ZONE}.`, 'AAAA', { flags: 0 }));
      assert.equal(norec.flag_rd, false);
      assert.deepEqual(dataOf(norec), ['2001:db8::10']);
    });

    it('answers A over TCP', async () => {
      const tcp = await TcpClient.open(server.port);
      try {
        const reply = await tcp.ask(query(`www.${ZONE}`, 'A'));
        assert.equal(rcodeOf(reply), 'NOERROR');
        assert.equal(reply.flag_aa, true);
        assert.deepEqual(dataOf(reply).sort(), ['192.0.2.10', '192.0.2.11']);
      } finally {
        await tcp.close();
      }
    });

    it('carries the authority SOA with NXDOMAIN and NODATA', async () => {
      const nx = await udp.ask(query(`nope.${ZONE}`, 'A'));
      assert.equal(rcodeOf(nx), 'NXDOMAIN');
      assert.equal(nx.flag_aa, true);
      assert.deepEqual(nx.answers, []);
      assert.equal(nx.authorities?.[0]?.type, 'SOA');
      assert.equal(nx.authorities?.[0]?.name, ZONE);

      const nodata = await udp.ask(query(`text.${ZONE}`, 'A'));
      assert.equal(rcodeOf(nodata), 'NOERROR');
      assert.deepEqual(nodata.answers, []);
      assert.equal(nodata.authorities?.[0]?.type, 'SOA');
    });

    it('answers REFUSED without AA for names outside its zones', async () => {
      const reply = await udp.ask(query('www.example.org', 'A'));
      assert.equal(rcodeOf(reply), 'REFUSED');
      assert.equal(reply.flag_aa, false);
      assert.deepEqual(reply.answers, []);
    });

    it('passes a type dns-packet cannot name as TYPE<n> and echoes its number', async () => {
      const message = query(`www.${ZONE}`, 'A');
      message.writeUInt16BE(260, message.length - 4);
      const reply = await udp.ask(message);
      assert.deepEqual(zone.asked.at(-1)?.question, { name: `www.${ZONE}`, type: 'TYPE260' });
      assert.equal(rcodeOf(reply), 'NOERROR');
      assert.equal(reply.questions?.[0]?.type, 'UNKNOWN_260');
    });

    it('answers REFUSED for a class other than IN or ANY, without asking the authority', async () => {
      const message = query(`www.${ZONE}`, 'A');
      message.writeUInt16BE(3, message.length - 2); // CHAOS
      const before = zone.asked.length;
      const reply = await udp.ask(message);
      assert.equal(rcodeOf(reply), 'REFUSED');
      assert.equal(zone.asked.length, before);
    });
  });

  describe('sizes and truncation', () => {
    it('sets TC=1 with no records for a UDP answer over 512 bytes, and sends the whole answer over TCP', async () => {
      const truncatedBefore = server.stats().truncated;
      const reply = await udp.ask(query(`big.${ZONE}`, 'TXT'));
      assert.equal(reply.flag_tc, true);
      assert.equal(rcodeOf(reply), 'NOERROR');
      assert.deepEqual(reply.answers, []);
      assert.deepEqual(reply.authorities, []);
      assert.equal(reply.questions?.[0]?.name, `big.${ZONE}`);
      assert.ok(reply.size <= 512, `${reply.size} bytes`);
      assert.equal(server.stats().truncated, truncatedBefore + 1);

      const tcp = await TcpClient.open(server.port);
      try {
        const full = await tcp.ask(query(`big.${ZONE}`, 'TXT'));
        assert.equal(full.flag_tc, false);
        assert.equal(txtBytes(full), BIG_TXT.join('').length);
        assert.ok(full.size > 1232, `${full.size} bytes over TCP`);
      } finally {
        await tcp.close();
      }
    });

    it('honours the EDNS buffer size: 1232 fits ~800 bytes that 512 does not, and 4096 is capped at 1232', async () => {
      const plain = await udp.ask(query(`mid.${ZONE}`, 'TXT'));
      assert.equal(plain.flag_tc, true, 'no OPT: the limit is 512');

      const edns = await udp.ask(query(`mid.${ZONE}`, 'TXT', { additionals: [opt({ udpPayloadSize: 1232 })] }));
      assert.equal(edns.flag_tc, false);
      assert.equal(txtBytes(edns), MID_TXT.join('').length);
      const ours = edns.additionals?.find((a) => a.type === 'OPT') as OptAnswer;
      assert.equal(ours.udpPayloadSize, 1232);
      assert.equal(ours.ednsVersion, 0);

      const tiny = await udp.ask(query(`mid.${ZONE}`, 'TXT', { additionals: [opt({ udpPayloadSize: 100 })] }));
      assert.equal(tiny.flag_tc, true, 'an advertised size under 512 counts as 512');

      const big = await udp.ask(query(`big.${ZONE}`, 'TXT', { additionals: [opt({ udpPayloadSize: 4096 })] }));
      assert.equal(big.flag_tc, true);
      assert.ok(big.size <= 1232, `${big.size} bytes`);
      assert.ok(big.additionals?.some((a) => a.type === 'OPT'), 'the truncated answer keeps its OPT');
    });

    it('answers BADVERS (extended rcode 16) with an OPT of version 0 to EDNS version 1', async () => {
      const reply = await udp.ask(query(`www.${ZONE}`, 'A', { additionals: [opt({ ednsVersion: 1 })] }));
      const ours = reply.additionals?.find((a) => a.type === 'OPT') as OptAnswer;
      assert.equal(ours.extendedRcode, 1);
      assert.equal(ours.ednsVersion, 0);
      assert.equal(rcodeOf(reply), 'NOERROR', 'the low 4 bits of 16 are 0');
      assert.deepEqual(reply.answers, []);
    });
  });

  describe('EDNS Client Subnet', () => {
    it('passes the subnet to the authority and echoes it with the authority scope', async () => {
      const reply = await udp.ask(query(`geo.${ZONE}`, 'A', { additionals: [opt({ options: [ecs(1, 24, [1, 2, 3])] })] }));
      assert.deepEqual(zone.lastClient(), { address: '127.0.0.1', subnet: { family: 4, address: '1.2.3.0', sourcePrefix: 24 } });
      assert.deepEqual(dataOf(reply), ['192.0.2.1']);
      const echoed = ecsOf(reply);
      assert.deepEqual([echoed.family, echoed.sourcePrefixLength, echoed.scopePrefixLength, echoed.ip], [1, 24, 24, '1.2.3.0']);

      const other = await udp.ask(query(`geo.${ZONE}`, 'A', { additionals: [opt({ options: [ecs(1, 20, [10, 9, 0x10])] })] }));
      assert.deepEqual(zone.lastClient().subnet, { family: 4, address: '10.9.16.0', sourcePrefix: 20 });
      assert.deepEqual(dataOf(other), ['192.0.2.2']);
      assert.equal(ecsOf(other).sourcePrefixLength, 20);
    });

    it('passes an IPv6 subnet zero-filled', async () => {
      const reply = await udp.ask(query(`geo.${ZONE}`, 'A', { additionals: [opt({ options: [ecs(2, 48, [0x20, 0x01, 0x0d, 0xb8, 0, 1])] })] }));
      assert.deepEqual(zone.lastClient().subnet, { family: 6, address: '2001:db8:1::', sourcePrefix: 48 });
      assert.deepEqual([ecsOf(reply).family, ecsOf(reply).sourcePrefixLength, ecsOf(reply).scopePrefixLength], [2, 48, 24]);
    });

    it('passes no subnet for a source prefix of 0 (opted out) and echoes scope 0', async () => {
      const reply = await udp.ask(query(`geo.${ZONE}`, 'A', { additionals: [opt({ options: [ecs(1, 0, [])] })] }));
      assert.deepEqual(zone.lastClient(), { address: '127.0.0.1' });
      const echoed = ecsOf(reply);
      assert.deepEqual([echoed.family, echoed.sourcePrefixLength, echoed.scopePrefixLength], [1, 0, 0]);
    });
  });

  describe('RFC 8482 ANY', () => {
    it('answers ANY with the A RRset only', async () => {
      const reply = await udp.ask(query(`www.${ZONE}`, 'ANY'));
      assert.equal(rcodeOf(reply), 'NOERROR');
      assert.deepEqual(reply.answers?.map((a) => a.type), ['A', 'A']);
      assert.deepEqual(zone.asked.at(-1)?.question, { name: `www.${ZONE}`, type: 'A' });
    });

    it('answers ANY at a name without A records with a synthesized HINFO "RFC8482", over TCP as well', async () => {
      const reply = await udp.ask(query(`text.${ZONE}`, 'ANY'));
      assert.equal(rcodeOf(reply), 'NOERROR');
      assert.equal(reply.answers?.length, 1);
      const [hinfo] = reply.answers!;
      assert.equal(hinfo.type, 'HINFO');
      assert.equal(hinfo.ttl, 3600);
      assert.deepEqual(dataOf(reply), [{ cpu: 'RFC8482', os: '' }]);

      const tcp = await TcpClient.open(server.port);
      try {
        const overTcp = await tcp.ask(query(`www.${ZONE}`, 'ANY'));
        assert.deepEqual(overTcp.answers?.map((a) => a.type), ['A', 'A'], 'minimal over TCP too');
      } finally {
        await tcp.close();
      }
    });

    it('answers ANY for a missing name NXDOMAIN', async () => {
      const reply = await udp.ask(query(`nope.${ZONE}`, 'ANY'));
      assert.equal(rcodeOf(reply), 'NXDOMAIN');
      assert.equal(reply.authorities?.[0]?.type, 'SOA');
    });
  });

  describe('malformed and unwanted messages', () => {
    /** Sends `message`, expects FORMERR echoing its id, then proves the server still answers. */
    async function assertFormErr(message: Buffer): Promise<DecodedPacket> {
      const malformedBefore = server.stats().malformed;
      udp.send(message);
      const raw = await udp.next();
      assert.equal(idOf(raw), idOf(message));
      const reply = dnsPacket.decode(raw);
      assert.equal(reply.type, 'response');
      assert.equal(rcodeOf(reply), 'FORMERR');
      assert.equal(server.stats().malformed, malformedBefore + 1);
      await assertStillAnswers();
      return reply;
    }

    /** Sends `message`, then a good query whose answer must be the next thing to arrive. */
    async function assertNoReply(message: Buffer): Promise<void> {
      udp.send(message);
      await assertStillAnswers();
    }

    it('drops a 5-byte packet', async () => {
      const malformedBefore = server.stats().malformed;
      await assertNoReply(Buffer.from([1, 2, 3, 4, 5]));
      assert.equal(server.stats().malformed, malformedBefore + 1);
    });

    it('never answers a response (QR=1)', async () => {
      const response = dnsPacket.encode({ type: 'response', id: 777, flags: 0, questions: [{ name: `www.${ZONE}`, type: 'A' }] });
      await assertNoReply(response);
    });

    it('answers FORMERR, echoing the id without a question, to fixed garbage', async () => {
      const garbage = Buffer.from('4a1f 0100 0001 0000 0000 0000 3f2e 91aa 07ff 01c3 5d'.replace(/ /g, ''), 'hex');
      const reply = await assertFormErr(garbage);
      assert.deepEqual(reply.questions, []);
    });

    it('answers FORMERR to compression pointer loops, in the question and in a record', async () => {
      await assertFormErr(rawMessage(0x1001, [1, 0, 0, 0], [0xc0, 12, 0, 1, 0, 1]));
      // Two pointers pointing at each other: 14 → 18 → 14.
      await assertFormErr(rawMessage(0x1002, [1, 0, 0, 0], [1, 0x61, 0xc0, 18, 1, 0x62, 0xc0, 14, 0, 1, 0, 1]));
      // A pointer into the header is backwards, so dns-packet follows it; a question can never point anywhere.
      await assertFormErr(rawMessage(0x0000, [1, 0, 0, 0], [0xc0, 0, 0, 1, 0, 1]));
      const good = query(`www.${ZONE}`, 'A');
      const loop = Buffer.concat([good, Buffer.from([0xc0, good.length, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 1, 2, 3, 4])]);
      loop.writeUInt16BE(1, 10);
      await assertFormErr(loop);
    });

    it('answers FORMERR to a truncated question, and to a record length running past the message', async () => {
      const good = query(`www.${ZONE}`, 'A');
      await assertFormErr(good.subarray(0, good.length - 3));
      const longOpt = dnsPacket.encode({ type: 'query', id: 4242, questions: [{ name: `www.${ZONE}`, type: 'A' }], additionals: [opt()] });
      longOpt.writeUInt16BE(500, longOpt.length - 2); // the OPT's RDLENGTH
      await assertFormErr(longOpt);
    });

    it('answers FORMERR to two questions', async () => {
      const two = dnsPacket.encode({ type: 'query', id: 4343, questions: [{ name: `www.${ZONE}`, type: 'A' }, { name: `text.${ZONE}`, type: 'TXT' }] });
      const reply = await assertFormErr(two);
      assert.deepEqual(reply.questions, []);
    });

    it('answers FORMERR to two OPT records', async () => {
      await assertFormErr(query(`www.${ZONE}`, 'A', { additionals: [opt(), opt()] }));
    });

    it('answers FORMERR to ECS with address bits past the prefix, too many address bytes, a scope, or an unknown family', async () => {
      const reply = await assertFormErr(query(`geo.${ZONE}`, 'A', { additionals: [opt({ options: [ecs(1, 20, [1, 2, 0x3f])] })] }));
      assert.ok(reply.additionals?.some((a) => a.type === 'OPT'), 'FORMERR to an EDNS query carries an OPT');
      await assertFormErr(query(`geo.${ZONE}`, 'A', { additionals: [opt({ options: [ecs(1, 24, [1, 2, 3, 0])] })] }));
      await assertFormErr(query(`geo.${ZONE}`, 'A', { additionals: [opt({ options: [ecs(1, 24, [1, 2, 3], 24)] })] }));
      await assertFormErr(query(`geo.${ZONE}`, 'A', { additionals: [opt({ options: [ecs(3, 8, [1])] })] }));
      await assertFormErr(query(`geo.${ZONE}`, 'A', { additionals: [opt({ options: [ecs(1, 33, [1, 2, 3, 4, 5])] })] }));
    });

    it('answers NOTIMP to an UPDATE (opcode 5)', async () => {
      const update = query(ZONE, 'SOA', { flags: 5 << 11 });
      const reply = await udp.ask(update);
      assert.equal(rcodeOf(reply), 'NOTIMP');
      assert.equal((reply as any).opcode, 'UPDATE');
      await assertStillAnswers();
    });

    it('survives 300 seeded random datagrams and still answers', async () => {
      const rand = random(0xd15);
      const malformedBefore = server.stats().malformed;
      // Batches of 20, so the burst never overflows a socket buffer (UDP would drop the good query, not the server).
      for (let batch = 0; batch < 15; batch++) {
        for (let i = 0; i < 20; i++) udp.send(Buffer.from(Array.from({ length: rand(120) }, () => rand(256))));
        const good = query(`www.${ZONE}`, 'A');
        udp.send(good);
        for (;;) {
          const reply = dnsPacket.decode(await udp.next());
          assert.equal(reply.type, 'response', 'whatever comes back is a well-formed response');
          if (reply.id === idOf(good) && reply.answers?.length === 2) break;
        }
      }
      assert.ok(server.stats().malformed > malformedBefore + 100, `${server.stats().malformed - malformedBefore} malformed`);
    });
  });

  describe('TCP', () => {
    it('answers two queries pipelined in one write, each in turn', async () => {
      const tcp = await TcpClient.open(server.port);
      try {
        const first = query(`www.${ZONE}`, 'A');
        const second = query(`text.${ZONE}`, 'TXT');
        await tcp.write(Buffer.concat([framed(first), framed(second)]));
        const replies = [dnsPacket.decode(await tcp.next()), dnsPacket.decode(await tcp.next())];
        assert.deepEqual(replies.map((r) => r.id), [idOf(first), idOf(second)]);
        assert.deepEqual(replies.map((r) => r.answers?.[0]?.type), ['A', 'TXT']);
      } finally {
        await tcp.close();
      }
    });

    it('reassembles a query split across two writes, the cut inside the length field', async () => {
      const tcp = await TcpClient.open(server.port);
      try {
        const message = framed(query(`www.${ZONE}`, 'AAAA'));
        await tcp.write(message.subarray(0, 1));
        await tcp.write(message.subarray(1));
        const reply = dnsPacket.decode(await tcp.next());
        assert.equal(reply.id, idOf(message.subarray(2)));
        assert.deepEqual(dataOf(reply), ['2001:db8::10']);
      } finally {
        await tcp.close();
      }
    });

    it('answers FORMERR to a 65535-byte frame of garbage and keeps the connection', async () => {
      const tcp = await TcpClient.open(server.port);
      try {
        const junk = Buffer.alloc(65_535, 0xc0);
        junk.writeUInt16BE(0x5151, 0);
        junk.writeUInt16BE(0, 2);
        junk.writeUInt16BE(0xffff, 4);
        await tcp.write(framed(junk));
        const reply = dnsPacket.decode(await tcp.next());
        assert.equal(reply.id, 0x5151);
        assert.equal(rcodeOf(reply), 'FORMERR');
        await assertStillAnswers(tcp);
      } finally {
        await tcp.close();
      }
    });

    it('answers what came before a zero-length frame, then closes', async () => {
      const tcp = await TcpClient.open(server.port);
      const message = query(`www.${ZONE}`, 'A');
      await tcp.write(Buffer.concat([framed(message), Buffer.from([0, 0])]));
      assert.equal(idOf(await tcp.next()), idOf(message));
      await tcp.closed;
    });

    it('closes on a frame too short to hold a header', async () => {
      const malformedBefore = server.stats().malformed;
      const tcp = await TcpClient.open(server.port);
      await tcp.write(Buffer.from([0, 5, 1, 2, 3, 4, 5]));
      await tcp.closed;
      assert.equal(server.stats().malformed, malformedBefore + 1);
    });
  });

  describe('with dig', { skip: !hasDig && 'dig is not installed' }, () => {
    it('answers dig +norec', async () => {
      const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(server.port), '+norec', '+time=2', '+tries=1', `www.${ZONE}`, 'A']);
      assert.match(stdout, /status: NOERROR/);
      assert.match(stdout, /flags: qr aa;/);
      assert.match(stdout, /www\.example\.test\.\s+60\s+IN\s+A\s+192\.0\.2\.10/);
    });

    it('echoes dig +subnet with the authority scope', async () => {
      const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(server.port), '+norec', '+time=2', '+tries=1', '+subnet=1.2.3.0/24', `geo.${ZONE}`, 'A']);
      assert.match(stdout, /CLIENT-SUBNET: 1\.2\.3\.0\/24\/24/);
      assert.match(stdout, /geo\.example\.test\.\s+60\s+IN\s+A\s+192\.0\.2\.1\b/);
    });
  });

  describe('metrics', () => {
    it('counts queries by transport and rcode, malformed messages and truncations', async () => {
      const text = await registry.metrics();
      assert.ok((sample(text, 'dns_queries_total', { transport: 'udp', rcode: 'NOERROR' }) ?? 0) > 0);
      assert.ok((sample(text, 'dns_queries_total', { transport: 'udp', rcode: 'NXDOMAIN' }) ?? 0) > 0);
      assert.ok((sample(text, 'dns_queries_total', { transport: 'tcp', rcode: 'NOERROR' }) ?? 0) > 0);
      assert.ok((sample(text, 'dns_queries_total', { transport: 'udp', rcode: 'FORMERR' }) ?? 0) > 0);
      assert.equal(sample(text, 'dns_malformed_total'), server.stats().malformed);
      assert.equal(sample(text, 'dns_truncated_total'), server.stats().truncated);
      assert.equal(sample(text, 'dns_rate_limited_total', { action: 'dropped' }), undefined, 'rate limiting is off here');
    });
  });
});

describe('DNS wire server TCP limits', () => {
  let server: DnsServer;

  before(async () => {
    server = await startDnsServer({ host: '127.0.0.1', port: 0, authority: new TestZone(), tcpIdleMs: 1000, maxTcpConnections: 1 });
  });
  after(() => server.close());

  it('closes connections past the cap, and idle ones', async () => {
    const first = await TcpClient.open(server.port);
    const reply = await first.ask(query(`www.${ZONE}`, 'A'));
    assert.equal(rcodeOf(reply), 'NOERROR');
    // Accepted by the kernel, closed by the server at once (the connect may even fail outright): never answered.
    const second = await TcpClient.open(server.port).catch(() => null);
    if (second) {
      second.write(framed(query(`www.${ZONE}`, 'A'))).catch(() => {});
      await second.closed;
      assert.equal(second.replies, 0);
    }
    await first.closed; // the idle timeout
  });
});

describe('DNS response rate limiting', () => {
  const registry = new Registry();
  let server: DnsServer;
  let udp: UdpClient;

  before(async () => {
    server = await startDnsServer({ host: '127.0.0.1', port: 0, authority: new TestZone(), metrics: registry, rateLimit: { responsesPerSecond: 5, slip: 2 } });
    udp = new UdpClient(server.port);
  });
  after(async () => {
    await udp.close();
    await server.close();
  });

  it('drops most of a burst of 50, slips some truncated, and still answers the client over TCP', async () => {
    const burst = Array.from({ length: 50 }, () => query(`www.${ZONE}`, 'A'));
    for (const message of burst) udp.send(message);
    // Of two more queries over the limit, slip 2 sends one of them: its reply marks the end of the burst's replies.
    const markers = [query(`www.${ZONE}`, 'A'), query(`www.${ZONE}`, 'A')];
    for (const message of markers) udp.send(message);
    const markerIds = markers.map(idOf);
    const burstIds = new Set(burst.map(idOf));
    const replies: DecodedPacket[] = [];
    for (let raw = await udp.next(); !markerIds.includes(idOf(raw)); raw = await udp.next()) {
      assert.ok(burstIds.has(idOf(raw)));
      replies.push(dnsPacket.decode(raw));
    }

    assert.ok(replies.length < 50, `${replies.length} of 50 answered`);
    const slipped = replies.filter((r) => r.flag_tc);
    assert.ok(slipped.length > 0, 'some replies slipped with TC=1');
    assert.ok(slipped.every((r) => r.answers?.length === 0));
    assert.ok(replies.some((r) => !r.flag_tc && r.answers?.length === 2), 'the first ones are answered in full');
    assert.ok(server.stats().rateLimited > 0);

    const tcp = await TcpClient.open(server.port);
    try {
      const reply = await tcp.ask(query(`www.${ZONE}`, 'A'));
      assert.equal(reply.answers?.length, 2, 'TCP is never limited');
    } finally {
      await tcp.close();
    }

    const text = await registry.metrics();
    assert.ok((sample(text, 'dns_rate_limited_total', { action: 'dropped' }) ?? 0) > 0);
    assert.ok((sample(text, 'dns_rate_limited_total', { action: 'slipped' }) ?? 0) > 0);
    assert.equal(
      (sample(text, 'dns_rate_limited_total', { action: 'dropped' }) ?? 0) + (sample(text, 'dns_rate_limited_total', { action: 'slipped' }) ?? 0),
      server.stats().rateLimited,
    );
  });
});
