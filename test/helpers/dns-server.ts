// A real authoritative DNS server for tests: UDP on 127.0.0.1, port chosen by the OS, answering TXT, A and AAAA
// queries from a map (RFC 1035 wire format). Names can also be set to answer with an error code or to never answer.
import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { Resolver } from 'node:dns/promises';
import { isIPv4, type AddressInfo, type LookupFunction } from 'node:net';
import { parseIp } from '../../src/shared/match/cidr.ts';

const TYPE_A = 1;
const TYPE_TXT = 16;
const TYPE_AAAA = 28;
const CLASS_IN = 1;

export const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 } as const;

/** One TXT record is a list of character-strings; a plain string is one record of one (auto-split) string. */
export type TxtRecord = string | string[];

type Behaviour = { kind: 'txt'; records: TxtRecord[] } | { kind: 'address'; addresses: string[] } | { kind: 'rcode'; rcode: number } | { kind: 'drop' };

export interface DnsServer {
  /** "127.0.0.1:<port>", the form EDGE_DNS_RESOLVERS takes. */
  address: string;
  port: number;
  /** Every question received, in order, names lower-cased. */
  queries: Array<{ name: string; type: number }>;
  setTxt(name: string, records: TxtRecord[]): void;
  /** Answer A queries with the IPv4 and AAAA queries with the IPv6 addresses of this list (replacing any earlier answer). */
  setAddresses(name: string, addresses: string[]): void;
  /** Answer queries for `name` with this response code (SERVFAIL, REFUSED, ...). */
  setRcode(name: string, rcode: number): void;
  /** Never answer queries for `name`: the client times out. */
  drop(name: string): void;
  remove(name: string): void;
  close(): Promise<void>;
}

interface Question {
  name: string;
  type: number;
  /** Offset just past the question section, so the response can echo it byte for byte. */
  end: number;
}

/** Reads the one question of a query; labels only (queries never use compression pointers). */
function readQuestion(msg: Buffer): Question | null {
  if (msg.length < 12 || msg.readUInt16BE(4) !== 1) return null;
  const labels: string[] = [];
  let off = 12;
  for (;;) {
    if (off >= msg.length) return null;
    const len = msg[off];
    if (len === 0) break;
    if (len > 63 || off + 1 + len > msg.length) return null; // 0xC0 pointers and overlong labels are malformed here
    labels.push(msg.toString('latin1', off + 1, off + 1 + len));
    off += 1 + len;
  }
  off += 1;
  if (off + 4 > msg.length) return null;
  return { name: labels.join('.').toLowerCase(), type: msg.readUInt16BE(off), end: off + 4 };
}

/** A TXT RDATA: each string split into <=255-byte character-strings (RFC 1035 §3.3.14). */
function txtRdata(record: TxtRecord): Buffer {
  const strings = Array.isArray(record) ? record : [record];
  const parts: Uint8Array[] = [];
  for (const s of strings) {
    const bytes = Buffer.from(s, 'utf8');
    if (bytes.length === 0) parts.push(Buffer.from([0]));
    for (let i = 0; i < bytes.length; i += 255) {
      const chunk = bytes.subarray(i, i + 255);
      parts.push(Buffer.from([chunk.length]), chunk);
    }
  }
  return Buffer.concat(parts);
}

/** An A or AAAA RDATA: the address's 4 or 16 bytes. */
function addressRdata(address: string): Buffer {
  const words = parseIp(address);
  if (words === null) throw new Error(`not an IP address: ${address}`);
  const bytes = Buffer.alloc(16);
  words.forEach((w, i) => bytes.writeUInt32BE(w, i * 4));
  return isIPv4(address) ? bytes.subarray(12) : bytes;
}

function response(query: Buffer, question: Question | null, rcode: number, answers: Buffer[], type = TYPE_TXT): Buffer {
  const header = Buffer.alloc(12);
  header.writeUInt16BE(query.readUInt16BE(0), 0); // ID
  const opcode = (query[2] >> 3) & 0x0f;
  const rd = query[2] & 0x01;
  // QR=1, opcode echoed, AA=1 (we are the authority), RD echoed; RA=1; RCODE.
  header[2] = 0x80 | (opcode << 3) | 0x04 | rd;
  header[3] = 0x80 | (rcode & 0x0f);
  header.writeUInt16BE(question ? 1 : 0, 4);
  header.writeUInt16BE(answers.length, 6);
  const parts: Uint8Array[] = [header];
  if (question) parts.push(query.subarray(12, question.end));
  for (const rdata of answers) {
    const rr = Buffer.alloc(12);
    rr.writeUInt16BE(0xc00c, 0); // pointer to the question name at offset 12
    rr.writeUInt16BE(type, 2);
    rr.writeUInt16BE(CLASS_IN, 4);
    rr.writeUInt32BE(60, 6);
    rr.writeUInt16BE(rdata.length, 10);
    parts.push(rr, rdata);
  }
  return Buffer.concat(parts);
}

export async function startDnsServer(initial: Record<string, TxtRecord[]> = {}): Promise<DnsServer> {
  const table = new Map<string, Behaviour>();
  const key = (name: string) => name.toLowerCase().replace(/\.$/, '');
  for (const [name, records] of Object.entries(initial)) table.set(key(name), { kind: 'txt', records });
  const queries: DnsServer['queries'] = [];
  const socket: Socket = createSocket('udp4');

  socket.on('message', (msg: Buffer, peer: RemoteInfo) => {
    if (msg.length < 12 || msg[2] & 0x80) return; // too short for a header, or a response: ignore
    const question = readQuestion(msg);
    let reply: Buffer;
    if (!question) {
      reply = response(msg, null, RCODE.FORMERR, []);
    } else {
      queries.push({ name: question.name, type: question.type });
      const behaviour = table.get(question.name);
      if (behaviour?.kind === 'drop') return;
      if (!behaviour) reply = response(msg, question, RCODE.NXDOMAIN, []);
      else if (behaviour.kind === 'rcode') reply = response(msg, question, behaviour.rcode, []);
      else if (behaviour.kind === 'address' && (question.type === TYPE_A || question.type === TYPE_AAAA)) {
        const v4 = question.type === TYPE_A;
        const rdata = behaviour.addresses.filter((a) => isIPv4(a) === v4).map(addressRdata);
        reply = response(msg, question, RCODE.NOERROR, rdata, question.type);
      }
      // The name exists; another record type is NODATA (NOERROR with no answers).
      else if (behaviour.kind !== 'txt' || question.type !== TYPE_TXT) reply = response(msg, question, RCODE.NOERROR, []);
      else reply = response(msg, question, RCODE.NOERROR, behaviour.records.map(txtRdata));
    }
    socket.send(reply, peer.port, peer.address);
  });

  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(0, '127.0.0.1', () => {
      socket.off('error', reject);
      resolve();
    });
  });
  const { port } = socket.address() as AddressInfo;

  return {
    address: `127.0.0.1:${port}`,
    port,
    queries,
    setTxt: (name, records) => void table.set(key(name), { kind: 'txt', records }),
    setAddresses: (name, addresses) => void table.set(key(name), { kind: 'address', addresses }),
    setRcode: (name, rcode) => void table.set(key(name), { kind: 'rcode', rcode }),
    drop: (name) => void table.set(key(name), { kind: 'drop' }),
    remove: (name) => void table.delete(key(name)),
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}

/**
 * A `lookup` (the function net.connect, undici and http.Agent accept) that asks this server instead of the system
 * resolver: A and AAAA answers as dns.lookup would return them, ENOTFOUND when there are none.
 */
export function lookupVia(server: Pick<DnsServer, 'address'>): LookupFunction {
  const resolver = new Resolver({ timeout: 2000, tries: 1 });
  resolver.setServers([server.address]);
  return (hostname, options, callback) => {
    const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : (options.family ?? 0);
    void Promise.all([
      family === 6 ? [] : resolver.resolve4(hostname).catch(() => []),
      family === 4 ? [] : resolver.resolve6(hostname).catch(() => []),
    ]).then(([v4, v6]) => {
      const addresses = [...v4.map((address) => ({ address, family: 4 })), ...v6.map((address) => ({ address, family: 6 }))];
      if (addresses.length === 0) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), '');
      if (options.all) callback(null, addresses);
      else callback(null, addresses[0].address, addresses[0].family);
    });
  };
}
