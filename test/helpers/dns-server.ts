// A real authoritative DNS server for tests: UDP on 127.0.0.1, port chosen by the OS, answering TXT queries from a
// map (RFC 1035 wire format). Names can also be set to answer with an error code or to never answer at all.
import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import type { AddressInfo } from 'node:net';

const TYPE_TXT = 16;
const CLASS_IN = 1;

export const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 } as const;

/** One TXT record is a list of character-strings; a plain string is one record of one (auto-split) string. */
export type TxtRecord = string | string[];

type Behaviour = { kind: 'txt'; records: TxtRecord[] } | { kind: 'rcode'; rcode: number } | { kind: 'drop' };

export interface DnsServer {
  /** "127.0.0.1:<port>", the form EDGE_DNS_RESOLVERS takes. */
  address: string;
  port: number;
  /** Every question received, in order, names lower-cased. */
  queries: Array<{ name: string; type: number }>;
  setTxt(name: string, records: TxtRecord[]): void;
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

function response(query: Buffer, question: Question | null, rcode: number, answers: Buffer[]): Buffer {
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
    rr.writeUInt16BE(TYPE_TXT, 2);
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
      // The name exists; another record type is NODATA (NOERROR with no answers).
      else if (question.type !== TYPE_TXT) reply = response(msg, question, RCODE.NOERROR, []);
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
    setRcode: (name, rcode) => void table.set(key(name), { kind: 'rcode', rcode }),
    drop: (name) => void table.set(key(name), { kind: 'drop' }),
    remove: (name) => void table.delete(key(name)),
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
