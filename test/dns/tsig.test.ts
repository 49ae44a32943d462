// TSIG keys from EDGE_DNS_TSIG_KEY, the MAC of a signed request checked against one computed here from RFC 8945's
// layout, and verification of responses signed here by hand: good, tampered, late, by another key, unsigned.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import dnsPacket from 'dns-packet';
import { parseTsigKey, signMessage, verifyResponse, type TsigKey } from '../../src/dns/tsig.ts';

const SECRET = Buffer.from('000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f', 'hex');
const KEY: TsigKey = { name: 'k.test', algorithm: 'hmac-sha256', secret: SECRET };
const T = 1_700_000_000; // 0x6553f100
const NOW = T * 1000;

/** The TSIG variables of RFC 8945 §4.3.3 for KEY, spelled out byte by byte. */
function variables(time: number, error = 0): Buffer {
  const t = Buffer.alloc(6);
  t.writeUIntBE(time, 0, 6);
  const e = Buffer.alloc(2);
  e.writeUInt16BE(error);
  return Buffer.concat([
    Buffer.from('016b047465737400', 'hex'), // k.test.
    Buffer.from('00ff00000000', 'hex'), // class ANY, TTL 0
    Buffer.from('0b686d61632d73686132353600', 'hex'), // hmac-sha256.
    t,
    Buffer.from('012c', 'hex'), // fudge 300
    e,
    Buffer.from('0000', 'hex'), // other len 0
  ]);
}

/** A TSIG RR (RFC 8945 §4.2) for KEY, as a server would append it. */
function tsigRecord(options: { name?: Buffer; time: number; mac: Buffer; originalId: number; error?: number }): Buffer {
  const rdata = Buffer.alloc(0x200);
  let o = Buffer.from('0b686d61632d73686132353600', 'hex').copy(rdata, 0);
  o = rdata.writeUIntBE(options.time, o, 6);
  o = rdata.writeUInt16BE(300, o);
  o = rdata.writeUInt16BE(options.mac.length, o);
  o += options.mac.copy(rdata, o);
  o = rdata.writeUInt16BE(options.originalId, o);
  o = rdata.writeUInt16BE(options.error ?? 0, o);
  o = rdata.writeUInt16BE(0, o);
  const head = Buffer.from('00fa00ff000000000000', 'hex'); // TSIG, ANY, TTL 0, RDLENGTH below
  head.writeUInt16BE(o, 8);
  return Buffer.concat([options.name ?? Buffer.from('016b047465737400', 'hex'), head, rdata.subarray(0, o)]);
}

/** A NOERROR UPDATE response to id, as dns-packet encodes it, without TSIG. */
function bareResponse(id: number, rcode = 0): Buffer {
  return dnsPacket.encode({ type: 'response', id, flags: (5 << 11) | rcode, questions: [{ type: 'SOA', name: 'example.test', class: 'IN' }] });
}

/** `response` signed as the answer to a request whose MAC was `requestMac` (RFC 8945 §4.3.1). */
function signResponse(response: Buffer, requestMac: Buffer, time: number, secret = SECRET, name?: Buffer): Buffer {
  const size = Buffer.alloc(2);
  size.writeUInt16BE(requestMac.length);
  const mac = createHmac('sha256', secret).update(Buffer.concat([size, requestMac, response, variables(time)])).digest();
  const out = Buffer.concat([response, tsigRecord({ name, time, mac, originalId: response.readUInt16BE(0) })]);
  out.writeUInt16BE(response.readUInt16BE(10) + 1, 10);
  return out;
}

describe('parseTsigKey', () => {
  const b64 = randomBytes(32).toString('base64');

  it('reads name:algorithm:secret, lower-casing the name and dropping its trailing dot', () => {
    const key = parseTsigKey(`Edge-Update.:HMAC-SHA256:${b64}`);
    assert.equal(key.name, 'edge-update');
    assert.equal(key.algorithm, 'hmac-sha256');
    assert.deepEqual(key.secret, Buffer.from(b64, 'base64'));
    assert.equal(parseTsigKey(`a.b:hmac-sha384:${b64}`).algorithm, 'hmac-sha384');
    assert.equal(parseTsigKey(`a.b:hmac-sha512:${b64}`).algorithm, 'hmac-sha512');
    assert.equal(parseTsigKey(`k:hmac-sha256:${randomBytes(16).toString('base64')}`).secret.length, 16);
  });

  const bad: Array<[string, string, RegExp]> = [
    ['hmac-md5', `k:hmac-md5:${b64}`, /too weak; use hmac-sha256/],
    ['hmac-sha1', `k:hmac-sha1:${b64}`, /too weak; use hmac-sha256/],
    ['an unknown algorithm', `k:hmac-sha224:${b64}`, /not supported; use hmac-sha256, hmac-sha384 or hmac-sha512/],
    ['an empty algorithm', `k::${b64}`, /use hmac-sha256/],
    ['an empty name', `:hmac-sha256:${b64}`, /name is empty; expected name:algorithm:base64secret/],
    ['a root name', `.:hmac-sha256:${b64}`, /name is empty/],
    ['a name that is no domain name', `bad name:hmac-sha256:${b64}`, /not a domain name/],
    ['an empty secret', 'k:hmac-sha256:', /secret is empty; expected name:algorithm:base64secret/],
    ['a secret that is not base64', 'k:hmac-sha256:not*base64!', /not valid base64; expected name:algorithm:base64secret/],
    ['base64 with bad padding', 'k:hmac-sha256:AAAAAAAAAAAAAAAAAAAAAA=', /not valid base64/],
    ['a secret under 16 bytes', `k:hmac-sha256:${randomBytes(15).toString('base64')}`, /15 bytes, fewer than 16; generate one with/],
    ['two parts', `k:${b64}`, /fewer than three ':'-separated parts; expected name:algorithm:base64secret/],
    ['one part', b64, /fewer than three/],
    ['four parts', `k:hmac-sha256:${b64}:extra`, /more than three ':'-separated parts/],
  ];
  for (const [what, spec, message] of bad) {
    it(`rejects ${what} with a RangeError saying what to use`, () => {
      assert.throws(() => parseTsigKey(spec), (err: unknown) => err instanceof RangeError && message.test(err.message));
    });
  }
});

describe('signMessage', () => {
  const message = dnsPacket.encode({ type: 'query', id: 0x1234, flags: 5 << 11, questions: [{ type: 'SOA', name: 'example.test', class: 'IN' }] });

  it('appends a TSIG RR whose MAC is the HMAC of the message and the TSIG variables (RFC 8945 §4.3.3)', () => {
    const { signed, mac } = signMessage(message, KEY, { now: NOW + 999 });
    const expected = createHmac('sha256', SECRET).update(Buffer.concat([message, variables(T)])).digest();
    assert.deepEqual(mac, expected);
    // Header unchanged but ARCOUNT, then the message, then exactly the RR a server would build from these fields.
    assert.equal(signed.readUInt16BE(10), 1);
    assert.deepEqual(signed.subarray(12, message.length), message.subarray(12));
    assert.deepEqual(signed.subarray(message.length), tsigRecord({ time: T, mac: expected, originalId: 0x1234 }));
    const decoded = dnsPacket.decode(signed);
    assert.equal(decoded.additionals?.length, 1);
    assert.equal(decoded.additionals?.[0].name, 'k.test');
  });

  it('covers the fudge it writes', () => {
    const { signed } = signMessage(message, KEY, { now: NOW, fudge: 60 });
    assert.equal(signed.readUInt16BE(signed.length - 6 - 32 - 2 - 2), 60);
    assert.notDeepEqual(signMessage(message, KEY, { now: NOW, fudge: 60 }).mac, signMessage(message, KEY, { now: NOW }).mac);
  });

  it('differs for another secret, time or message', () => {
    const base = signMessage(message, KEY, { now: NOW }).mac;
    assert.notDeepEqual(signMessage(message, { ...KEY, secret: randomBytes(32) }, { now: NOW }).mac, base);
    assert.notDeepEqual(signMessage(message, KEY, { now: NOW + 1000 }).mac, base);
    const other = Buffer.from(message);
    other[other.length - 1] ^= 1;
    assert.notDeepEqual(signMessage(other, KEY, { now: NOW }).mac, base);
  });
});

describe('verifyResponse', () => {
  const requestMac = randomBytes(32);

  it('accepts a response signed over the request MAC, the response and the variables', () => {
    const signed = signResponse(bareResponse(7), requestMac, T);
    assert.deepEqual(verifyResponse(signed, requestMac, KEY, NOW), { ok: true });
  });

  it('restores the original ID before checking, so a rewritten ID still verifies', () => {
    const signed = signResponse(bareResponse(7), requestMac, T);
    signed.writeUInt16BE(8, 0);
    assert.deepEqual(verifyResponse(signed, requestMac, KEY, NOW), { ok: true });
  });

  it('answers BADSIG for any tampered byte of the message or MAC, and for another request MAC', () => {
    const signed = signResponse(bareResponse(7), requestMac, T);
    // Every byte but the ID (restored from the TSIG's Original ID) and ARCOUNT (which locates the TSIG) is covered.
    // Flags, a letter of the zone name, the question's class, a byte of the MAC, the Original ID.
    for (const at of [2, 3, 14, 29, signed.length - 10, signed.length - 6]) {
      const tampered = Buffer.from(signed);
      tampered[at] ^= 0x01;
      const result = verifyResponse(tampered, requestMac, KEY, NOW);
      assert.equal(result.ok ? 'ok' : result.reason, 'BADSIG', `byte ${at}`);
    }
    const result = verifyResponse(signed, randomBytes(32), KEY, NOW);
    assert.equal(result.ok ? 'ok' : result.reason, 'BADSIG');
  });

  it('answers BADTIME outside the fudge, and accepts its edge', () => {
    const signed = signResponse(bareResponse(7), requestMac, T);
    assert.equal(verifyResponse(signed, requestMac, KEY, NOW + 300_000).ok, true);
    assert.equal(verifyResponse(signed, requestMac, KEY, NOW - 300_000).ok, true);
    for (const now of [NOW + 301_000, NOW - 301_000]) {
      const result = verifyResponse(signed, requestMac, KEY, now);
      assert.equal(result.ok ? 'ok' : result.reason, 'BADTIME');
    }
  });

  it('answers BADKEY for a response signed with another key name or algorithm', () => {
    const other = Buffer.from('056f7468657200', 'hex'); // other.
    const signed = signResponse(bareResponse(7), requestMac, T, SECRET, other);
    const result = verifyResponse(signed, requestMac, KEY, NOW);
    assert.equal(result.ok ? 'ok' : result.reason, 'BADKEY');
    const good = signResponse(bareResponse(7), requestMac, T);
    const wrongAlgorithm = verifyResponse(good, requestMac, { ...KEY, algorithm: 'hmac-sha512' }, NOW);
    assert.equal(wrongAlgorithm.ok ? 'ok' : wrongAlgorithm.reason, 'BADKEY');
  });

  it('reports a response without TSIG, or with an empty MAC and the server\'s error, as unsigned', () => {
    const none = verifyResponse(bareResponse(7, 9), requestMac, KEY, NOW);
    assert.equal(none.ok ? 'ok' : none.reason, 'unsigned');
    const bare = bareResponse(7, 9);
    const unsigned = Buffer.concat([bare, tsigRecord({ time: T, mac: Buffer.alloc(0), originalId: 7, error: 17 })]);
    unsigned.writeUInt16BE(1, 10);
    const result = verifyResponse(unsigned, requestMac, KEY, NOW);
    assert.deepEqual(result.ok ? 'ok' : [result.reason, result.serverError], ['unsigned', 'BADKEY']);
  });

  it('reports malformed responses as FORMERR instead of throwing', () => {
    const signed = signResponse(bareResponse(7), requestMac, T);
    for (const cut of [0, 5, 12, 30, signed.length - 1]) {
      const result = verifyResponse(signed.subarray(0, cut), requestMac, KEY, NOW);
      assert.equal(result.ok ? 'ok' : result.reason, 'FORMERR', `cut at ${cut}`);
    }
    // A TSIG followed by another additional record is not the last one (RFC 8945 §5.1).
    const extra = dnsPacket.encode({ type: 'response', id: 7, additionals: [{ type: 'A', name: 'x.example.test', data: '192.0.2.1' }] }).subarray(12);
    const misplaced = Buffer.concat([signed, extra]);
    misplaced.writeUInt16BE(2, 10);
    const result = verifyResponse(misplaced, requestMac, KEY, NOW);
    assert.equal(result.ok ? 'ok' : result.reason, 'FORMERR');
  });
});
