// Publishes DNS changes to an operator's primary server: RFC 2136 UPDATE messages signed with TSIG (RFC 8945),
// one TCP connection per update, the answer's TSIG verified before its response code is believed.
import { connect, isIPv6 } from 'node:net';
import { randomInt } from 'node:crypto';
import dnsPacket from 'dns-packet';
import { encodeName, normaliseName, signMessage, verifyResponse, type TsigKey } from './tsig.ts';

const OPCODE_UPDATE = 5;
const TYPE = { A: 1, CNAME: 5, AAAA: 28 } as const;
const CLASS_ANY = 255;

/** RCODE names (RFC 1035 §4.1.1, RFC 2136 §2.2). */
const RCODES = ['NOERROR', 'FORMERR', 'SERVFAIL', 'NXDOMAIN', 'NOTIMP', 'REFUSED', 'YXDOMAIN', 'YXRRSET', 'NXRRSET', 'NOTAUTH', 'NOTZONE'];

export type DnsUpdateFailure = 'refused' | 'timeout' | 'unreachable' | 'bad_response';

export class DnsUpdateError extends Error {
  override name = 'DnsUpdateError';
  constructor(
    readonly reason: DnsUpdateFailure,
    message: string,
    /** The response code, when the server answered with one. */
    readonly rcode?: string,
  ) {
    super(message);
  }
}

export interface DnsUpdateClientOptions {
  /** host:port of the primary; an IPv6 address in brackets ([::1]:53). */
  server: string;
  zone: string;
  key: TsigKey;
  timeoutMs?: number;
}

/** host and port of `host:port` / `[v6]:port`, or a RangeError. */
function parseServer(server: string): { host: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:[\]]+)):(\d{1,5})$/.exec(server.trim());
  if (!m) throw new RangeError(`DNS server must be host:port (an IPv6 address as [::1]:53), not ${JSON.stringify(server)}`);
  const host = m[1] ?? m[2];
  if (m[1] !== undefined && !isIPv6(m[1])) throw new RangeError(`DNS server ${JSON.stringify(server)}: ${m[1]} is not an IPv6 address`);
  const port = Number(m[3]);
  if (port < 1 || port > 65535) throw new RangeError(`DNS server ${JSON.stringify(server)}: port must be 1..65535`);
  return { host, port };
}

/** A deletion RR of RFC 2136 §2.5.2 (delete an RRset): class ANY, TTL 0, no RDATA, which dns-packet cannot encode. */
function deleteRRset(name: string, type: number): Buffer {
  const fixed = Buffer.alloc(10);
  fixed.writeUInt16BE(type, 0);
  fixed.writeUInt16BE(CLASS_ANY, 2);
  // TTL and RDLENGTH stay 0.
  return Buffer.concat([encodeName(name), fixed]);
}

export class DnsUpdateClient {
  readonly zone: string;
  private readonly host: string;
  private readonly port: number;
  private readonly key: TsigKey;
  private readonly timeoutMs: number;

  constructor(options: DnsUpdateClientOptions) {
    const { host, port } = parseServer(options.server);
    this.host = host;
    this.port = port;
    if (typeof options.zone !== 'string' || options.zone.replace(/\.$/, '') === '') throw new RangeError('DNS zone is empty');
    this.zone = normaliseName(options.zone, 'DNS zone');
    this.key = options.key;
    const timeoutMs = options.timeoutMs ?? 3000;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new RangeError(`timeoutMs must be a positive number, not ${timeoutMs}`);
    this.timeoutMs = timeoutMs;
  }

  /** `name` normalised, or a RangeError when it is not strictly below the zone (a CNAME cannot sit at the apex). */
  private nameInZone(name: string): string {
    const n = normaliseName(name, 'DNS name');
    if (!n.endsWith(`.${this.zone}`)) throw new RangeError(`${name} is not a name below the zone ${this.zone}`);
    return n;
  }

  /**
   * Makes `name` a CNAME to `target`: in one UPDATE, deletes the CNAME, A and AAAA RRsets at the name (a CNAME
   * cannot coexist with other data, RFC 1034 §3.6.2) and adds the new CNAME; the server applies it atomically
   * (RFC 2136 §3.4.2).
   */
  async replaceCname(name: string, target: string, ttl: number): Promise<void> {
    const owner = this.nameInZone(name);
    const to = normaliseName(target, 'CNAME target');
    // RFC 2181 §8: a TTL is 0..2^31-1 seconds.
    if (!Number.isInteger(ttl) || ttl < 0 || ttl > 0x7fffffff) throw new RangeError(`TTL must be an integer 0..2147483647, not ${ttl}`);
    await this.send(
      [deleteRRset(owner, TYPE.CNAME), deleteRRset(owner, TYPE.A), deleteRRset(owner, TYPE.AAAA)],
      { type: 'CNAME', name: owner, class: 'IN', ttl, data: to },
    );
  }

  /** Deletes the CNAME RRset at `name`; deleting one that does not exist succeeds (RFC 2136 §3.4.2.3). */
  async deleteName(name: string): Promise<void> {
    const owner = this.nameInZone(name);
    await this.send([deleteRRset(owner, TYPE.CNAME)]);
  }

  /** Encodes, signs and sends one UPDATE whose update section is `deletions` then `addition`. */
  private async send(deletions: readonly Buffer[], addition?: dnsPacket.Answer): Promise<void> {
    const id = randomInt(0, 0x10000);
    // Zone section: the zone's SOA (RFC 2136 §2.3); no prerequisites.
    const packet: dnsPacket.Packet = {
      type: 'query',
      id,
      flags: OPCODE_UPDATE << 11,
      questions: [{ type: 'SOA', name: this.zone, class: 'IN' }],
    };
    const head = dnsPacket.encode(packet);
    // dns-packet encodes the addition but not the RDATA-less deletions, which must come first (RFC 2136 §3.4.2
    // applies the update section in order): encode the addition on its own and take the bytes after the zone section.
    const add = addition === undefined ? Buffer.alloc(0) : dnsPacket.encode({ ...packet, authorities: [addition] }).subarray(head.length);
    const message = Buffer.concat([head, ...deletions, add]);
    message.writeUInt16BE(deletions.length + (addition === undefined ? 0 : 1), 8); // UPCOUNT
    const { signed, mac } = signMessage(message, this.key);
    const response = await this.exchange(signed, id);

    const rcode = RCODES[response.readUInt16BE(2) & 0xf] ?? `RCODE ${response.readUInt16BE(2) & 0xf}`;
    const tsig = verifyResponse(response, mac, this.key);
    const where = `${this.host}:${this.port}`;
    if (!tsig.ok) {
      // The server answers a request it cannot authenticate with an unsigned error (RFC 8945 §5.2): believed as a
      // refusal, since it only ever stops a change, but an unauthenticated success is never taken for one.
      if (tsig.reason === 'unsigned' && rcode !== 'NOERROR') {
        const why = tsig.serverError ? `; the server reports ${tsig.serverError} for key ${this.key.name}` : '';
        throw new DnsUpdateError('refused', `DNS server ${where} refused the update to ${this.zone}: ${rcode} (unsigned answer${why})`, rcode);
      }
      throw new DnsUpdateError('bad_response', `DNS server ${where} answered with a bad TSIG (${tsig.reason}): ${tsig.detail}`, rcode);
    }
    if (rcode !== 'NOERROR') {
      const why = tsig.serverError ? ` (TSIG ${tsig.serverError})` : '';
      throw new DnsUpdateError('refused', `DNS server ${where} refused the update to ${this.zone}: ${rcode}${why}`, rcode);
    }
  }

  /** Sends `message` over a fresh TCP connection (RFC 1035 §4.2.2 length prefix) and resolves with the answer to `id`. */
  private exchange(message: Buffer, id: number): Promise<Buffer> {
    const where = `${this.host}:${this.port}`;
    return new Promise<Buffer>((resolve, reject) => {
      const socket = connect({ host: this.host, port: this.port });
      let buffered = Buffer.alloc(0);
      let settled = false;
      const finish = (err: DnsUpdateError | null, value?: Buffer) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        socket.destroy();
        if (err) reject(err);
        else resolve(value as Buffer);
      };
      const timer = setTimeout(
        () => finish(new DnsUpdateError('timeout', `DNS server ${where} did not answer the update within ${this.timeoutMs} ms`)),
        this.timeoutMs,
      );
      socket.on('connect', () => {
        const length = Buffer.alloc(2);
        length.writeUInt16BE(message.length);
        // No half-close: some servers drop a connection whose client has stopped sending before they answer.
        socket.write(Buffer.concat([length, message]));
      });
      socket.on('data', (chunk: Buffer) => {
        buffered = Buffer.concat([buffered, chunk]);
        while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
          const frame = buffered.subarray(2, 2 + buffered.readUInt16BE(0));
          buffered = buffered.subarray(2 + frame.length);
          // Anything that is not our answer (another ID, not a response, or too short to tell) is skipped.
          if (frame.length >= 12 && frame.readUInt16BE(0) === id && (frame[2] & 0x80) !== 0) return finish(null, Buffer.from(frame));
        }
      });
      socket.on('error', (err: NodeJS.ErrnoException) => {
        finish(new DnsUpdateError('unreachable', `DNS server ${where} is unreachable: ${err.code ?? err.message}`));
      });
      socket.on('close', () => {
        finish(new DnsUpdateError('bad_response', `DNS server ${where} closed the connection without answering the update`));
      });
    });
  }
}
