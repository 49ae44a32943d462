// The DNS role's wire format (RFC 1035 §4, EDNS(0) RFC 6891, Client Subnet RFC 7871): reading a query into what the
// server must answer, and encoding a response that fits a size limit. No sockets here; src/dns/server.ts owns those.
import dnsPacket, { type Answer, type DecodedPacket, type OptAnswer } from 'dns-packet';
import ipaddr from 'ipaddr.js';
import type { DnsClient } from './types.ts';

/** Response codes the server sends: RFC 1035 §4.1.1, and BADVERS, an extended rcode (RFC 6891 §6.1.3). */
export const RCODES = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5, BADVERS: 16 } as const;
export type RcodeName = keyof typeof RCODES;

export const HEADER_BYTES = 12;
/** The UDP payload every client can take without EDNS (RFC 1035 §4.2.1). */
export const CLASSIC_UDP_BYTES = 512;
/** The largest UDP payload this server sends or advertises: the DNS Flag Day 2020 size that avoids IP fragmentation. */
export const EDNS_UDP_BYTES = 1232;
/** A DNS message over TCP is framed by a 16-bit length (RFC 1035 §4.2.2). */
export const TCP_MESSAGE_BYTES = 65_535;

const QR = 1 << 15;
const AA = 1 << 10;
const TC = 1 << 9;
const RD = 1 << 8;
const DO = 1 << 15;
const QTYPE_ANY = 255;
const CLASS_IN = 1;
const CLASS_ANY = 255;
const OPTION_ECS = 8;

/** An EDNS Client Subnet option as the query carried it (RFC 7871 §6). */
export interface ClientSubnet {
  family: 1 | 2;
  sourcePrefix: number;
  /** ceil(sourcePrefix / 8) bytes, exactly as sent. */
  address: Buffer;
}

export interface Edns {
  /** The UDP payload the client can take, clamped to [512, 1232] (RFC 6891 §6.2.5). */
  udpSize: number;
  /** DO (RFC 3225 §3): copied into the response. */
  dnssecOk: boolean;
  subnet: ClientSubnet | null;
}

/** What a response copies from its query, whatever the answer is. */
export interface QueryEcho {
  id: number;
  opcode: number;
  rd: boolean;
  /** The question section's bytes as asked, echoed verbatim (original case, any type number); null: none echoed. */
  question: Buffer | null;
  /** Present when the query had a usable OPT record: the response then carries one too (RFC 6891 §6.1.1). */
  edns: Edns | null;
}

export interface AskedQuestion {
  /** Lower-cased (ASCII only, RFC 4343 §3), without the trailing dot; '' for the root. */
  name: string;
  /** dns-packet's mnemonic, or TYPE<n> for a type it cannot name (the RFC 3597 presentation). */
  type: string;
  qtype: number;
}

export type Inspection =
  | { kind: 'drop'; reason: string; malformed: boolean }
  | { kind: 'error'; echo: QueryEcho; rcode: RcodeName; reason: string }
  | { kind: 'query'; echo: QueryEcho; question: AskedQuestion };

export interface ResponseBody {
  rcode: RcodeName;
  authoritative: boolean;
  answers: Answer[];
  authorities: Answer[];
  /** ECS scope prefix length for the echoed option (RFC 7871 §7.2.1). */
  ecsScope: number;
}

/** Reads one received message into what to do with it: drop it, answer an error, or ask the authority. */
export function inspectQuery(message: Buffer): Inspection {
  if (message.length < HEADER_BYTES) return { kind: 'drop', reason: 'shorter than a DNS header', malformed: true };
  const flags = message.readUInt16BE(2);
  // Never answer a response: two servers answering each other's answers, or a spoofed source, would loop forever.
  if (flags & QR) return { kind: 'drop', reason: 'a response, not a query', malformed: false };
  const echo: QueryEcho = { id: message.readUInt16BE(0), opcode: (flags >> 11) & 0xf, rd: (flags & RD) !== 0, question: null, edns: null };
  let packet: DecodedPacket;
  try {
    packet = dnsPacket.decode(message);
  } catch (err) {
    // RFC 1035 §4.1.1: FORMERR, the ID echoed; nothing else of the message can be trusted.
    return { kind: 'error', echo, rcode: 'FORMERR', reason: `undecodable: ${(err as Error).message}` };
  }
  const question = packet.questions?.length === 1 ? readQuestion(message) : null;
  if (typeof question === 'string') return { kind: 'error', echo, rcode: 'FORMERR', reason: question };
  echo.question = question?.bytes ?? null;
  const edns = readEdns(packet, echo);
  if (edns) return edns;
  // RFC 1035 §4.1.1: only standard queries (opcode 0) are served; NOTIFY, UPDATE and the rest are not implemented.
  if (echo.opcode !== 0) return { kind: 'error', echo, rcode: 'NOTIMP', reason: `opcode ${echo.opcode}` };
  if (!question) return { kind: 'error', echo, rcode: 'FORMERR', reason: `${packet.questions?.length ?? 0} questions` };
  if (question.qclass !== CLASS_IN && question.qclass !== CLASS_ANY) {
    return { kind: 'error', echo, rcode: 'REFUSED', reason: `class ${question.qclass}` };
  }
  if (question.name === null) return { kind: 'error', echo, rcode: 'REFUSED', reason: 'a name with non-text labels' };
  const type = packet.questions![0].type as string;
  return {
    kind: 'query',
    echo,
    question: { name: question.name, type: type.startsWith('UNKNOWN_') ? `TYPE${question.qtype}` : type, qtype: question.qtype },
  };
}

export function isAnyQuery(question: AskedQuestion): boolean {
  return question.qtype === QTYPE_ANY;
}

interface RawQuestion {
  bytes: Buffer;
  /** null: a label holds bytes no zone name can (a dot, a space, non-ASCII), so it names nothing served here. */
  name: string | null;
  qtype: number;
  qclass: number;
}

/**
 * Walks the question's name label by label (RFC 1035 §4.1.2). A compression pointer is a format error here: the
 * only data before the question is the header, which holds no name (RFC 1035 §4.1.4 allows pointers to prior names).
 */
function readQuestion(message: Buffer): RawQuestion | string {
  const labels: string[] = [];
  let textual = true;
  let offset = HEADER_BYTES;
  for (;;) {
    if (offset >= message.length) return 'question name runs past the message';
    const length = message[offset];
    if (length === 0) break;
    if (length & 0xc0) return 'compression pointer in the question';
    const label = message.subarray(offset + 1, offset + 1 + length);
    textual &&= label.every((byte) => byte > 0x20 && byte < 0x7f && byte !== 0x2e);
    labels.push(label.toString('latin1'));
    offset += 1 + length;
  }
  const end = offset + 1 + 4;
  if (end > message.length) return 'question runs past the message';
  return {
    bytes: message.subarray(HEADER_BYTES, end),
    name: textual ? labels.join('.').toLowerCase() : null,
    qtype: message.readUInt16BE(offset + 1),
    qclass: message.readUInt16BE(offset + 3),
  };
}

/** Sets `echo.edns` from the query's OPT record; returns the error to answer when EDNS makes the query unusable. */
function readEdns(packet: DecodedPacket, echo: QueryEcho): Inspection | null {
  const opts = [...(packet.answers ?? []), ...(packet.authorities ?? []), ...(packet.additionals ?? [])].filter(
    (record): record is OptAnswer => record.type === 'OPT',
  );
  if (opts.length === 0) return null;
  // RFC 6891 §6.1.1: at most one OPT, in the additional section, owned by the root.
  if (opts.length > 1) return { kind: 'error', echo, rcode: 'FORMERR', reason: 'more than one OPT record' };
  const opt = opts[0];
  if (!packet.additionals?.includes(opt)) return { kind: 'error', echo, rcode: 'FORMERR', reason: 'OPT outside the additional section' };
  if (opt.name !== '.') return { kind: 'error', echo, rcode: 'FORMERR', reason: 'OPT not owned by the root' };
  // RFC 6891 §6.2.5: a size below 512 is treated as 512; above what this server sends it changes nothing.
  const udpSize = Math.min(Math.max(opt.udpPayloadSize, CLASSIC_UDP_BYTES), EDNS_UDP_BYTES);
  echo.edns = { udpSize, dnssecOk: (opt.flags & DO) !== 0, subnet: null };
  // RFC 6891 §6.1.3: this server speaks version 0; a higher version is answered BADVERS with our OPT at version 0.
  if (opt.ednsVersion > 0) return { kind: 'error', echo, rcode: 'BADVERS', reason: `EDNS version ${opt.ednsVersion}` };
  const subnets = (opt.options ?? []).filter((option) => option.code === OPTION_ECS);
  if (subnets.length > 1) return { kind: 'error', echo, rcode: 'FORMERR', reason: 'more than one ECS option' };
  if (subnets.length === 0) return null;
  const subnet = parseClientSubnet(subnets[0].data ?? Buffer.alloc(0));
  if (typeof subnet === 'string') return { kind: 'error', echo, rcode: 'FORMERR', reason: subnet };
  echo.edns.subnet = subnet;
  return null;
}

/**
 * RFC 7871 §6: FAMILY (1 IPv4, 2 IPv6), SOURCE PREFIX-LENGTH, SCOPE PREFIX-LENGTH (0 in queries), then ADDRESS cut
 * to ceil(source / 8) bytes with the bits past the prefix zero; a server SHOULD answer anything else FORMERR.
 * Read from the option's raw bytes: dns-packet's own ECS decoding pads and copies without checking any of this.
 */
export function parseClientSubnet(data: Buffer): ClientSubnet | string {
  if (data.length < 4) return 'ECS option shorter than its fixed fields';
  const family = data.readUInt16BE(0);
  if (family !== 1 && family !== 2) return `ECS family ${family}`;
  const sourcePrefix = data[2];
  if (sourcePrefix > maxPrefix(family)) return `ECS source prefix ${sourcePrefix} too long for family ${family}`;
  if (data[3] !== 0) return 'ECS scope prefix set in a query';
  const address = data.subarray(4);
  if (address.length !== Math.ceil(sourcePrefix / 8)) return `ECS address of ${address.length} bytes for /${sourcePrefix}`;
  const spare = (8 - (sourcePrefix % 8)) % 8;
  if (spare > 0 && (address[address.length - 1] & ((1 << spare) - 1)) !== 0) return 'ECS address has bits set past its prefix';
  return { family, sourcePrefix, address: Buffer.from(address) };
}

function maxPrefix(family: 1 | 2): number {
  return family === 1 ? 32 : 128;
}

/** The subnet as the authority sees it; none when the client opted out with a /0 (RFC 7871 §7.1.2). */
export function subnetForAuthority(subnet: ClientSubnet | null): DnsClient['subnet'] {
  if (!subnet || subnet.sourcePrefix === 0) return undefined;
  const bytes = Buffer.alloc(subnet.family === 1 ? 4 : 16);
  subnet.address.copy(bytes);
  const address = ipaddr.fromByteArray([...bytes]).toString();
  return { family: subnet.family === 1 ? 4 : 6, address, sourcePrefix: subnet.sourcePrefix };
}

/** A body with no records: errors, and the authority's rcode when it failed. */
export function emptyBody(rcode: RcodeName, authoritative = false): ResponseBody {
  return { rcode, authoritative, answers: [], authorities: [], ecsScope: 0 };
}

/**
 * Encodes the response, truncated when it exceeds `limit`: header, question and OPT with TC=1 and no records
 * (RFC 1035 §4.2.1, RFC 6891 §7), so the client retries over TCP (RFC 7766 §5). Throws when a record cannot be
 * encoded (the caller answers SERVFAIL).
 */
export function encodeResponse(echo: QueryEcho, body: ResponseBody, limit: number): { bytes: Buffer; truncated: boolean } {
  const full = encodeMessage(echo, body, false);
  if (full.length <= limit) return { bytes: full, truncated: false };
  return { bytes: encodeMessage(echo, { ...body, answers: [], authorities: [] }, true), truncated: true };
}

/** The empty TC=1 answer a rate-limited client gets instead of silence now and then ("slip"). */
export function encodeSlip(echo: QueryEcho): Buffer {
  return encodeMessage(echo, emptyBody('NOERROR'), true);
}

function encodeMessage(echo: QueryEcho, body: ResponseBody, truncated: boolean): Buffer {
  const rcode = RCODES[body.rcode];
  // The low 4 bits of the rcode go in the header; the rest in the OPT record (RFC 6891 §6.1.3). RA stays 0: no recursion.
  const flags = (echo.opcode << 11) | (body.authoritative ? AA : 0) | (truncated ? TC : 0) | (echo.rd ? RD : 0) | (rcode & 0xf);
  const packet = dnsPacket.encode({
    type: 'response',
    id: echo.id,
    flags,
    questions: [],
    answers: body.answers,
    authorities: body.authorities,
    additionals: echo.edns ? [optRecord(echo.edns, rcode, body.ecsScope)] : [],
  });
  return echo.question ? withQuestion(packet, echo.question) : packet;
}

/** Splices the question bytes as asked in after the header: dns-packet compresses nothing, so no offset moves. */
function withQuestion(packet: Buffer, question: Buffer): Buffer {
  const message = Buffer.concat([packet.subarray(0, HEADER_BYTES), question, packet.subarray(HEADER_BYTES)]);
  message.writeUInt16BE(1, 4);
  return message;
}

function optRecord(edns: Edns, rcode: number, ecsScope: number): OptAnswer {
  return {
    name: '.',
    type: 'OPT',
    udpPayloadSize: EDNS_UDP_BYTES,
    extendedRcode: rcode >> 4,
    ednsVersion: 0,
    flags: edns.dnssecOk ? DO : 0,
    flag_do: edns.dnssecOk,
    options: edns.subnet ? [{ code: OPTION_ECS, data: subnetEcho(edns.subnet, ecsScope), ip: undefined }] : [],
  };
}

/**
 * RFC 7871 §7.2.1: FAMILY, SOURCE PREFIX-LENGTH and ADDRESS as the query sent them, SCOPE from the answer (0 for a
 * client that opted out with /0, §7.1.2).
 */
function subnetEcho(subnet: ClientSubnet, ecsScope: number): Buffer {
  const scope = subnet.sourcePrefix === 0 ? 0 : Math.min(Math.max(Math.trunc(ecsScope), 0), maxPrefix(subnet.family));
  const head = Buffer.from([0, subnet.family, subnet.sourcePrefix, scope]);
  return Buffer.concat([head, subnet.address]);
}
