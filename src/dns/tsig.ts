// TSIG (RFC 8945): signs the DNS UPDATE messages sent to an operator's primary and verifies the primary's signed
// answers, with HMAC-SHA256/384/512 keys given as `name:algorithm:base64secret` (EDGE_DNS_TSIG_KEY).
import { createHmac, timingSafeEqual } from 'node:crypto';

export type TsigAlgorithm = 'hmac-sha256' | 'hmac-sha384' | 'hmac-sha512';

export interface TsigKey {
  /** Lower-case, without the trailing dot. */
  name: string;
  algorithm: TsigAlgorithm;
  secret: Buffer;
}

/** The TSIG RR's TYPE (RFC 8945 §4.2). */
export const TYPE_TSIG = 250;
const CLASS_ANY = 255;

const DIGESTS: Record<TsigAlgorithm, { hash: string; size: number }> = {
  'hmac-sha256': { hash: 'sha256', size: 32 },
  'hmac-sha384': { hash: 'sha384', size: 48 },
  'hmac-sha512': { hash: 'sha512', size: 64 },
};

/** RFC 8945 §6 recommends a key at least as long as the digest; below 16 bytes it is guessable, so refuse it. */
const MIN_SECRET_BYTES = 16;

/** TSIG error codes (RFC 8945 §3) as they appear in the TSIG RR's Error field. */
const TSIG_ERRORS: Record<number, string> = { 16: 'BADSIG', 17: 'BADKEY', 18: 'BADTIME', 22: 'BADTRUNC' };

function tsigErrorName(code: number): string {
  return TSIG_ERRORS[code] ?? (code === 0 ? 'NOERROR' : `TSIG error ${code}`);
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;

/**
 * A domain name lower-cased and without the trailing dot, or a RangeError naming `what`: labels of 1-63 letters,
 * digits, '-' or '_' (RFC 1035 §2.3.4 lengths), at most 253 characters.
 */
export function normaliseName(name: string, what: string): string {
  const n = name.toLowerCase().replace(/\.$/, '');
  if (n === '') throw new RangeError(`${what} is empty`);
  if (n.length > 253) throw new RangeError(`${what} is longer than 253 characters: ${name}`);
  for (const label of n.split('.')) {
    if (!LABEL.test(label)) throw new RangeError(`${what} is not a domain name (bad label "${label}"): ${name}`);
  }
  return n;
}

/** A name in uncompressed wire form; lower case, since TSIG's names are canonical (RFC 8945 §4.3.3). */
export function encodeName(name: string): Buffer {
  const n = name.toLowerCase().replace(/\.$/, '');
  const parts: Buffer[] = [];
  if (n !== '') {
    for (const label of n.split('.')) {
      const bytes = Buffer.from(label, 'latin1');
      if (bytes.length === 0 || bytes.length > 63) throw new RangeError(`bad label in ${name}`);
      parts.push(Buffer.from([bytes.length]), bytes);
    }
  }
  parts.push(Buffer.from([0]));
  return Buffer.concat(parts);
}

/**
 * A TSIG key from `name:algorithm:base64secret`. The secret's alphabet has no ':', so the spec splits on the first
 * two; anything that makes a weak or unusable key is a RangeError worded for the operator who wrote it.
 */
export function parseTsigKey(spec: string): TsigKey {
  const usage = 'expected name:algorithm:base64secret, e.g. edge-update.:hmac-sha256:<base64 of 32 random bytes>';
  const first = spec.indexOf(':');
  const second = first < 0 ? -1 : spec.indexOf(':', first + 1);
  if (first < 0 || second < 0) throw new RangeError(`TSIG key has fewer than three ':'-separated parts; ${usage}`);
  const rawName = spec.slice(0, first).trim();
  const rawAlgorithm = spec.slice(first + 1, second).trim().toLowerCase();
  const rawSecret = spec.slice(second + 1).trim();
  if (rawSecret.includes(':')) throw new RangeError(`TSIG key has more than three ':'-separated parts; ${usage}`);
  if (rawName === '' || rawName === '.') throw new RangeError(`TSIG key name is empty; ${usage}`);
  const name = normaliseName(rawName, 'TSIG key name');
  if (!(rawAlgorithm in DIGESTS)) {
    const weak = rawAlgorithm === 'hmac-md5' || rawAlgorithm === 'hmac-sha1' || rawAlgorithm === 'hmac-md5.sig-alg.reg.int';
    throw new RangeError(
      `TSIG algorithm ${JSON.stringify(rawAlgorithm)} is ${weak ? 'too weak' : 'not supported'}; use hmac-sha256, hmac-sha384 or hmac-sha512`,
    );
  }
  if (rawSecret === '') throw new RangeError(`TSIG secret is empty; ${usage}`);
  if (!BASE64.test(rawSecret)) throw new RangeError(`TSIG secret is not valid base64; ${usage}`);
  const secret = Buffer.from(rawSecret, 'base64');
  if (secret.length < MIN_SECRET_BYTES) {
    throw new RangeError(
      `TSIG secret is ${secret.length} bytes, fewer than ${MIN_SECRET_BYTES}; generate one with \`keymgr -t ${name} ${rawAlgorithm}\` or \`openssl rand -base64 32\``,
    );
  }
  return { name, algorithm: rawAlgorithm as TsigAlgorithm, secret };
}

/** Time Signed as the 48-bit seconds field (RFC 8945 §4.2). */
function writeTime(seconds: number): Buffer {
  const b = Buffer.alloc(6);
  b.writeUIntBE(seconds, 0, 6);
  return b;
}

/** The TSIG variables the MAC covers (RFC 8945 §4.3.3), in their order. */
function tsigVariables(key: TsigKey, time: number, fudge: number, error: number, other: Buffer): Buffer {
  const fixed = Buffer.alloc(6);
  fixed.writeUInt16BE(CLASS_ANY, 0);
  fixed.writeUInt32BE(0, 2); // TTL
  const tail = Buffer.alloc(6);
  tail.writeUInt16BE(fudge, 0);
  tail.writeUInt16BE(error, 2);
  tail.writeUInt16BE(other.length, 4);
  return Buffer.concat([encodeName(key.name), fixed, encodeName(`${key.algorithm}.`), writeTime(time), tail, other]);
}

function hmac(key: TsigKey, parts: readonly Buffer[]): Buffer {
  const h = createHmac(DIGESTS[key.algorithm].hash, key.secret);
  for (const p of parts) h.update(p);
  return h.digest();
}

export interface SignOptions {
  /** Milliseconds since the epoch; the wall clock unless given. */
  now?: number;
  /** Seconds of clock skew the receiver allows (RFC 8945 §10 recommends 300). */
  fudge?: number;
}

/**
 * `message` (a whole encoded DNS message) with a TSIG RR appended as its last additional record and ARCOUNT raised
 * by one, plus the MAC, which the response's MAC covers in turn (RFC 8945 §4.3.1, §4.3.2).
 */
export function signMessage(message: Buffer, key: TsigKey, options: SignOptions = {}): { signed: Buffer; mac: Buffer } {
  if (message.length < 12) throw new RangeError('a DNS message is at least 12 bytes');
  const fudge = options.fudge ?? 300;
  if (!Number.isInteger(fudge) || fudge < 0 || fudge > 0xffff) throw new RangeError(`fudge must be 0..65535 seconds, not ${fudge}`);
  const time = Math.floor((options.now ?? Date.now()) / 1000);
  const other = Buffer.alloc(0);
  const mac = hmac(key, [message, tsigVariables(key, time, fudge, 0, other)]);

  const head = Buffer.alloc(10);
  head.writeUInt16BE(TYPE_TSIG, 0);
  head.writeUInt16BE(CLASS_ANY, 2);
  head.writeUInt32BE(0, 4); // TTL
  const macSize = Buffer.alloc(2);
  macSize.writeUInt16BE(mac.length);
  const tail = Buffer.alloc(6);
  tail.writeUInt16BE(message.readUInt16BE(0), 0); // Original ID
  tail.writeUInt16BE(0, 2); // Error
  tail.writeUInt16BE(other.length, 4);
  const fudgeField = Buffer.alloc(2);
  fudgeField.writeUInt16BE(fudge);
  const rdata = Buffer.concat([encodeName(`${key.algorithm}.`), writeTime(time), fudgeField, macSize, mac, tail, other]);
  head.writeUInt16BE(rdata.length, 8);

  const signed = Buffer.concat([message, encodeName(key.name), head, rdata]);
  signed.writeUInt16BE(message.readUInt16BE(10) + 1, 10);
  return { signed, mac };
}

export type TsigFailure = 'BADSIG' | 'BADKEY' | 'BADTIME' | 'unsigned' | 'FORMERR';

export type TsigVerification =
  /** The MAC holds and the time is within the fudge; `serverError` is the TSIG Error field when non-zero (a signed BADTIME answer). */
  | { ok: true; serverError?: string }
  /** Why the response is not authenticated; `serverError` is the TSIG Error the server reported, when there was one. */
  | { ok: false; reason: TsigFailure; detail: string; serverError?: string };

class Malformed extends Error {}

/** Reads a possibly compressed name at `offset`; returns it (lower case, no trailing dot) and the offset after it. */
function readName(msg: Buffer, offset: number): { name: string; end: number } {
  const labels: string[] = [];
  let off = offset;
  let end = -1;
  for (let jumps = 0; ; ) {
    if (off >= msg.length) throw new Malformed('name runs past the message');
    const len = msg[off];
    if (len === 0) {
      if (end < 0) end = off + 1;
      break;
    }
    if ((len & 0xc0) === 0xc0) {
      if (off + 1 >= msg.length || ++jumps > 64) throw new Malformed('bad compression pointer');
      if (end < 0) end = off + 2;
      off = ((len & 0x3f) << 8) | msg[off + 1];
      continue;
    }
    if (len > 63 || off + 1 + len > msg.length) throw new Malformed('bad label');
    labels.push(msg.toString('latin1', off + 1, off + 1 + len).toLowerCase());
    off += 1 + len;
  }
  return { name: labels.join('.'), end };
}

interface TsigRecord {
  /** Offset of the TSIG RR's owner name: the message without TSIG ends here. */
  start: number;
  keyName: string;
  algorithm: string;
  time: number;
  fudge: number;
  mac: Buffer;
  originalId: number;
  error: number;
  other: Buffer;
}

/** The TSIG RR of `msg`, or null when there is none; Malformed when it is not the last additional (RFC 8945 §5.1). */
function findTsig(msg: Buffer): TsigRecord | null {
  if (msg.length < 12) throw new Malformed('shorter than a DNS header');
  const qd = msg.readUInt16BE(4);
  const rrs = msg.readUInt16BE(6) + msg.readUInt16BE(8) + msg.readUInt16BE(10);
  let off = 12;
  for (let i = 0; i < qd; i++) {
    off = readName(msg, off).end + 4;
    if (off > msg.length) throw new Malformed('question runs past the message');
  }
  let found: TsigRecord | null = null;
  for (let i = 0; i < rrs; i++) {
    const start = off;
    const owner = readName(msg, off);
    off = owner.end;
    if (off + 10 > msg.length) throw new Malformed('record header runs past the message');
    const type = msg.readUInt16BE(off);
    const rdlength = msg.readUInt16BE(off + 8);
    const rdata = off + 10;
    off = rdata + rdlength;
    if (off > msg.length) throw new Malformed('record data runs past the message');
    if (type !== TYPE_TSIG) continue;
    if (i !== rrs - 1 || i < rrs - msg.readUInt16BE(10)) throw new Malformed('TSIG is not the last additional record');
    const alg = readName(msg, rdata);
    let p = alg.end;
    if (p + 10 > off) throw new Malformed('TSIG record too short');
    const time = msg.readUIntBE(p, 6);
    const fudge = msg.readUInt16BE(p + 6);
    const macSize = msg.readUInt16BE(p + 8);
    p += 10;
    if (p + macSize + 6 > off) throw new Malformed('TSIG MAC runs past the record');
    const mac = msg.subarray(p, p + macSize);
    p += macSize;
    const originalId = msg.readUInt16BE(p);
    const error = msg.readUInt16BE(p + 2);
    const otherLen = msg.readUInt16BE(p + 4);
    p += 6;
    if (p + otherLen !== off) throw new Malformed('TSIG other data does not end the record');
    found = { start, keyName: owner.name, algorithm: alg.name, time, fudge, mac, originalId, error, other: msg.subarray(p, off) };
  }
  if (off !== msg.length) throw new Malformed('bytes after the last record');
  return found;
}

/**
 * Verifies the TSIG of a response to a request signed with `requestMac` (RFC 8945 §4.3.1, §5.3): the MAC covers
 * the request MAC, the response as it was before the TSIG was added (ARCOUNT one less, the original ID) and the
 * TSIG variables. An error answer the server could not sign (it did not know the key, or the request's MAC failed)
 * comes back with no TSIG or an empty MAC: that is 'unsigned', with the server's TSIG error when it gave one.
 */
export function verifyResponse(response: Buffer, requestMac: Buffer, key: TsigKey, now: number = Date.now()): TsigVerification {
  let tsig: TsigRecord | null;
  try {
    tsig = findTsig(response);
  } catch (err) {
    if (err instanceof Malformed) return { ok: false, reason: 'FORMERR', detail: `malformed response: ${err.message}` };
    throw err;
  }
  if (tsig === null) return { ok: false, reason: 'unsigned', detail: 'the response carries no TSIG record' };
  const serverError = tsig.error === 0 ? undefined : tsigErrorName(tsig.error);
  const withServerError = serverError === undefined ? {} : { serverError };
  if (tsig.mac.length === 0) {
    return { ok: false, reason: 'unsigned', detail: `the response's TSIG has no MAC${serverError ? ` (server reports ${serverError})` : ''}`, ...withServerError };
  }
  if (tsig.keyName !== key.name || tsig.algorithm !== key.algorithm) {
    return { ok: false, reason: 'BADKEY', detail: `signed with ${tsig.keyName} ${tsig.algorithm}, expected ${key.name} ${key.algorithm}`, ...withServerError };
  }
  // This client never asks for a truncated MAC (RFC 8945 §5.2.2.1), so the answer's must be the whole digest.
  if (tsig.mac.length !== DIGESTS[key.algorithm].size) {
    return { ok: false, reason: 'BADSIG', detail: `MAC is ${tsig.mac.length} bytes, expected ${DIGESTS[key.algorithm].size}`, ...withServerError };
  }
  const unsigned = Buffer.from(response.subarray(0, tsig.start));
  unsigned.writeUInt16BE(tsig.originalId, 0);
  unsigned.writeUInt16BE(unsigned.readUInt16BE(10) - 1, 10);
  const requestMacSize = Buffer.alloc(2);
  requestMacSize.writeUInt16BE(requestMac.length);
  const expected = hmac(key, [requestMacSize, requestMac, unsigned, tsigVariables(key, tsig.time, tsig.fudge, tsig.error, tsig.other)]);
  if (!timingSafeEqual(expected, tsig.mac)) return { ok: false, reason: 'BADSIG', detail: 'the response MAC does not match', ...withServerError };
  // The time is checked only once the MAC holds (RFC 8945 §5.2.3): an unauthenticated time proves nothing.
  const seconds = Math.floor(now / 1000);
  if (Math.abs(seconds - tsig.time) > tsig.fudge) {
    return { ok: false, reason: 'BADTIME', detail: `signed at ${tsig.time}, ${seconds - tsig.time} s from local time (fudge ${tsig.fudge} s)`, ...withServerError };
  }
  return { ok: true, ...withServerError };
}
