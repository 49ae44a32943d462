// The tunnel's wire rules as pure functions: handshake frames against their strict schemas, the refusal table,
// the GOAWAY reason, the HTTP/1.1 <-> HTTP/2 header mapping and the UDP datagram framing.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  MAX_DATA_CONNECTIONS,
  MAX_HELLO_BYTES,
  REFUSALS,
  encodeGoAwayReason,
  isRetryableRefusal,
  normalizeTags,
  parseEdgeReply,
  parseGoAwayReason,
  parseHello,
  refusalCloseCode,
  refusalForCloseCode,
  type Hello,
} from '../../../src/shared/tunnel/protocol.ts';
import { endToEndHeaders, toHttp1RequestHeaders, toHttp2RequestHeaders, toHttp2ResponseHeaders } from '../../../src/shared/tunnel/headers.ts';
import { DatagramDecoder, MAX_DATAGRAM_BYTES, encodeDatagram } from '../../../src/shared/tunnel/datagram.ts';

const UUID = '0b7e3f62-5a1c-4d8e-9f20-3c4b5a6d7e8f';

const valid: Hello = {
  type: 'hello',
  version: 1,
  api_key: 'edge_0123456789abcdef_secret',
  endpoint: UUID,
  protocol: 'http',
  agent_id: 'laptop-1',
  tags: ['eu', 'blue'],
  client: 'edge-agent node/20',
};

function hello(patch: Record<string, unknown>): string {
  return JSON.stringify({ ...valid, ...patch });
}

function rejects(text: string | Buffer, expected: RegExp): void {
  const parsed = parseHello(text);
  assert.equal(parsed.ok, false, `accepted ${String(text).slice(0, 80)}`);
  if (!parsed.ok) assert.match(parsed.message, expected);
}

describe('parseHello', () => {
  it('accepts a complete hello, from a string or a Buffer', () => {
    for (const input of [JSON.stringify(valid), Buffer.from(JSON.stringify(valid))]) {
      const parsed = parseHello(input);
      assert.ok(parsed.ok);
      assert.deepEqual(parsed.value, valid);
    }
  });

  it('accepts a hello without endpoint (the one-shot flow) and with no tags', () => {
    const { endpoint: _omit, ...rest } = valid;
    const parsed = parseHello(JSON.stringify({ ...rest, tags: [] }));
    assert.ok(parsed.ok);
    assert.equal(parsed.value.endpoint, undefined);
  });

  it('accepts every protocol and the longest allowed values', () => {
    for (const protocol of ['http', 'tcp', 'udp']) assert.ok(parseHello(hello({ protocol })).ok, protocol);
    const tags = Array.from({ length: 16 }, (_, i) => `${i}`.padEnd(64, 'x'));
    assert.ok(parseHello(hello({ tags, agent_id: 'a'.repeat(64) })).ok);
  });

  it('rejects unknown fields, naming them', () => {
    rejects(hello({ token: 'x' }), /unknown field \/token/);
    rejects(hello({ __proto__: 1, extra: true }), /unknown field \/extra/);
  });

  it('rejects oversized and malformed tags', () => {
    rejects(hello({ tags: Array.from({ length: 17 }, (_, i) => `t${i}`) }), /\/tags/);
    rejects(hello({ tags: ['x'.repeat(65)] }), /\/tags\/0/);
    rejects(hello({ tags: ['has space'] }), /\/tags\/0/);
    rejects(hello({ tags: ['-leading'] }), /\/tags\/0/);
    rejects(hello({ tags: [''] }), /\/tags\/0/);
    rejects(hello({ tags: 'eu' }), /\/tags/);
  });

  it('rejects a bad endpoint uuid', () => {
    rejects(hello({ endpoint: 'not-a-uuid' }), /\/endpoint/);
    rejects(hello({ endpoint: `${UUID}0` }), /\/endpoint/);
    rejects(hello({ endpoint: null }), /\/endpoint/);
  });

  it('rejects wrong types and values', () => {
    rejects(hello({ version: '1' }), /\/version/);
    rejects(hello({ version: 1.5 }), /\/version/);
    rejects(hello({ protocol: 'quic' }), /\/protocol/);
    rejects(hello({ type: 'welcome' }), /\/type/);
    rejects(hello({ api_key: '' }), /\/api_key/);
    rejects(hello({ api_key: 'k'.repeat(257) }), /\/api_key/);
    rejects(hello({ agent_id: 'a'.repeat(65) }), /\/agent_id/);
    rejects(hello({ agent_id: 'two words' }), /\/agent_id/);
    rejects(hello({ agent_id: 7 }), /\/agent_id/);
    rejects(hello({ client: 'c'.repeat(129) }), /\/client/);
  });

  it('rejects missing fields', () => {
    for (const field of ['type', 'version', 'api_key', 'protocol', 'agent_id', 'tags', 'client']) {
      const copy: Record<string, unknown> = { ...valid };
      delete copy[field];
      rejects(JSON.stringify(copy), new RegExp(`/${field}`));
    }
  });

  it('accepts data_connections offered with no field or with a host_header of visible ASCII', () => {
    for (const data_connections of [{}, { host_header: 'localhost:3000' }, { host_header: '[::1]:8080' }, { host_header: '!'.repeat(255) }]) {
      const parsed = parseHello(hello({ data_connections }));
      assert.ok(parsed.ok, JSON.stringify(data_connections));
      assert.deepEqual(parsed.value.data_connections, data_connections);
    }
  });

  it('rejects a host_header that could inject a field (spaces, controls, non-ASCII), empty or too long, and unknown fields', () => {
    for (const host_header of ['a b', 'a\r\nx-injected: 1', 'a\tb', 'a\u0000', 'caf\u00e9.test', 'a\u007f', '', 'h'.repeat(256), 7, null]) {
      rejects(hello({ data_connections: { host_header } }), /\/data_connections\/host_header/);
    }
    rejects(hello({ data_connections: { max: 4 } }), /unknown field \/data_connections\/max/);
    rejects(hello({ data_connections: true }), /\/data_connections/);
    rejects(hello({ data_connections: null }), /\/data_connections/);
  });

  it('rejects what is not a JSON object, and frames over the size limit before parsing them', () => {
    rejects('{"type":', /not valid JSON/);
    rejects('null', /Expected object/);
    rejects('[]', /Expected object/);
    rejects(hello({ client: 'x'.repeat(MAX_HELLO_BYTES) }), /exceeds the limit/);
  });
});

describe('parseEdgeReply', () => {
  const welcome = {
    type: 'welcome',
    endpoint: { uuid: UUID, hostname: 'quiet-fox.edge.test', public_url: 'http://quiet-fox.edge.test:8080' },
    region: 'eu-west',
    node: 'edge-1',
  };

  it('accepts a welcome and a refusal', () => {
    const w = parseEdgeReply(JSON.stringify(welcome));
    assert.ok(w.ok);
    assert.deepEqual(w.value, welcome);
    const r = parseEdgeReply(JSON.stringify({ type: 'refused', code: 'region_not_allowed', message: 'not here' }));
    assert.ok(r.ok);
    assert.equal(r.value.type, 'refused');
  });

  it('accepts refusal codes it does not know (newer edges), but only snake_case ones', () => {
    assert.ok(parseEdgeReply(JSON.stringify({ type: 'refused', code: 'some_future_code', message: '' })).ok);
    assert.equal(parseEdgeReply(JSON.stringify({ type: 'refused', code: 'Bad Code', message: '' })).ok, false);
  });

  const grant = { id: 'i'.repeat(42) + '-', key: 'K_'.repeat(21) + 'z', max: 128 };

  it('accepts a welcome with a data connection grant: id and key of 43 base64url characters, max 1..1024', () => {
    for (const max of [1, 128, MAX_DATA_CONNECTIONS]) {
      const w = parseEdgeReply(JSON.stringify({ ...welcome, data_connections: { ...grant, max } }));
      assert.ok(w.ok, `max ${max}`);
      assert.equal(w.value.type, 'welcome');
      if (w.value.type === 'welcome') assert.deepEqual(w.value.data_connections, { ...grant, max });
    }
  });

  it('rejects a grant with a malformed id or key, a max out of range, a missing or an unknown field', () => {
    const bad = (patch: Record<string, unknown>) => parseEdgeReply(JSON.stringify({ ...welcome, data_connections: { ...grant, ...patch } })).ok;
    for (const token of ['a'.repeat(42), 'a'.repeat(44), 'a'.repeat(42) + '=', 'a'.repeat(42) + '+', 'a'.repeat(42) + '/', 'a'.repeat(42) + ' ', '']) {
      assert.equal(bad({ id: token }), false, `id ${JSON.stringify(token)}`);
      assert.equal(bad({ key: token }), false, `key ${JSON.stringify(token)}`);
    }
    for (const max of [0, -1, MAX_DATA_CONNECTIONS + 1, 1.5, '8', null]) assert.equal(bad({ max }), false, `max ${String(max)}`);
    assert.equal(bad({ extra: 1 }), false);
    for (const field of ['id', 'key', 'max']) {
      const copy: Record<string, unknown> = { ...grant };
      delete copy[field];
      assert.equal(parseEdgeReply(JSON.stringify({ ...welcome, data_connections: copy })).ok, false, `without ${field}`);
    }
    assert.equal(parseEdgeReply(JSON.stringify({ ...welcome, data_connections: null })).ok, false);
  });

  it('rejects unknown fields, bad endpoints and unknown frame types', () => {
    assert.equal(parseEdgeReply(JSON.stringify({ ...welcome, extra: 1 })).ok, false);
    assert.equal(parseEdgeReply(JSON.stringify({ ...welcome, endpoint: { ...welcome.endpoint, uuid: 'x' } })).ok, false);
    assert.equal(parseEdgeReply(JSON.stringify({ ...welcome, endpoint: { ...welcome.endpoint, port: 1 } })).ok, false);
    const other = parseEdgeReply(JSON.stringify({ type: 'hello' }));
    assert.equal(other.ok, false);
    if (!other.ok) assert.match(other.message, /unexpected frame type "hello"/);
  });
});

describe('refusals', () => {
  it('maps every code to a private-use close code (RFC 6455 §7.4.2) and back', () => {
    for (const [code, { close }] of Object.entries(REFUSALS)) {
      assert.ok(close >= 4000 && close <= 4999, code);
      assert.equal(refusalCloseCode(code as keyof typeof REFUSALS), close);
      assert.equal(REFUSALS[refusalForCloseCode(close)!].close, close);
    }
    assert.equal(refusalForCloseCode(1006), null);
  });

  it('retries only transient refusals, never unknown codes', () => {
    assert.equal(isRetryableRefusal('unauthorized'), false);
    assert.equal(isRetryableRefusal('region_not_allowed'), false);
    assert.equal(isRetryableRefusal('protocol_not_allowed'), false);
    assert.equal(isRetryableRefusal('shutting_down'), true);
    assert.equal(isRetryableRefusal('internal'), true);
    assert.equal(isRetryableRefusal('some_future_code'), false);
    assert.equal(isRetryableRefusal('constructor'), false);
  });
});

describe('GOAWAY reason', () => {
  it('round-trips, and ignores opaque data that is not one', () => {
    assert.deepEqual(parseGoAwayReason(encodeGoAwayReason({ code: 'replaced', message: 'again' })), { code: 'replaced', message: 'again' });
    assert.equal(parseGoAwayReason(undefined), null);
    assert.equal(parseGoAwayReason(Buffer.alloc(0)), null);
    assert.equal(parseGoAwayReason(Buffer.from('debug text')), null);
    assert.equal(parseGoAwayReason(Buffer.from('{"code":"x","message":"m","more":1}')), null);
  });
});

describe('normalizeTags', () => {
  it('lower-cases and removes duplicates, keeping order', () => {
    assert.deepEqual(normalizeTags(['EU', 'blue', 'eu', 'Blue', 'x']), ['eu', 'blue', 'x']);
  });
});

describe('header mapping (RFC 9113 §8.2.2, RFC 9110 §7.6.1)', () => {
  it('drops connection-specific fields and the ones Connection names', () => {
    const out = endToEndHeaders({
      connection: 'keep-alive, X-Hop',
      'keep-alive': 'timeout=5',
      'proxy-connection': 'keep-alive',
      'transfer-encoding': 'chunked',
      upgrade: 'websocket',
      host: 'a.test',
      'x-hop': '1',
      'x-end': '2',
      'set-cookie': ['a=1', 'b=2'],
    });
    assert.deepEqual(out, { 'x-end': '2', 'set-cookie': ['a=1', 'b=2'] });
  });

  it('keeps TE only as "trailers"', () => {
    assert.deepEqual(endToEndHeaders({ te: 'gzip, trailers;q=1' }), { te: 'trailers' });
    assert.deepEqual(endToEndHeaders({ te: 'gzip' }), {});
  });

  it('builds an HTTP/2 request from an HTTP/1.1 one, Host becoming :authority', () => {
    const h = toHttp2RequestHeaders(
      { method: 'POST', path: '/a?b=1', authority: 'app.edge.test', scheme: 'https' },
      { host: 'app.edge.test', connection: 'close', 'content-type': 'text/plain' },
    );
    assert.deepEqual(h, { ':method': 'POST', ':path': '/a?b=1', ':authority': 'app.edge.test', ':scheme': 'https', 'content-type': 'text/plain' });
  });

  it('builds the local HTTP/1.1 request: Host from :authority unless fixed, pseudo-headers gone', () => {
    const h2 = { ':method': 'GET', ':path': '/', ':authority': 'app.edge.test', ':scheme': 'http', accept: '*/*' };
    assert.deepEqual(toHttp1RequestHeaders(h2), { host: 'app.edge.test', accept: '*/*' });
    assert.deepEqual(toHttp1RequestHeaders(h2, 'localhost:3000'), { host: 'localhost:3000', accept: '*/*' });
  });

  it('builds the HTTP/2 response without hop-by-hop fields', () => {
    assert.deepEqual(toHttp2ResponseHeaders(201, { connection: 'keep-alive', 'keep-alive': 'timeout=5', 'transfer-encoding': 'chunked', etag: '"x"' }), {
      ':status': 201,
      etag: '"x"',
    });
  });
});

describe('UDP datagram framing', () => {
  it('round-trips datagrams split and joined at every byte boundary', () => {
    const datagrams = [Buffer.from('one'), Buffer.alloc(0), Buffer.alloc(300, 7), Buffer.from('last')];
    const wire = Buffer.concat(datagrams.map(encodeDatagram));
    for (let cut = 0; cut <= wire.length; cut++) {
      const got: Buffer[] = [];
      const decoder = new DatagramDecoder((d) => got.push(d));
      decoder.push(wire.subarray(0, cut));
      decoder.push(wire.subarray(cut));
      assert.deepEqual(got, datagrams, `cut at ${cut}`);
      assert.equal(decoder.pendingBytes, 0);
    }
  });

  it('reports a stream cut inside a frame, and refuses payloads over 65535 bytes', () => {
    const decoder = new DatagramDecoder(() => assert.fail('no complete datagram'));
    decoder.push(encodeDatagram(Buffer.from('truncated')).subarray(0, 5));
    assert.equal(decoder.pendingBytes, 5);
    assert.equal(encodeDatagram(Buffer.alloc(MAX_DATAGRAM_BYTES)).length, MAX_DATAGRAM_BYTES + 2);
    assert.throws(() => encodeDatagram(Buffer.alloc(MAX_DATAGRAM_BYTES + 1)), RangeError);
  });
});
