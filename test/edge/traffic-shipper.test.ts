// The edge's traffic shipper behind a real HTTP server that arms capture as the pipeline does and forwards like an
// upstream would: full captures keep redacted headers and the first 10 KiB of each body without changing what
// passes, metadata keeps neither, capture off only counts; usage per minute; a full queue drops and counts.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { TrafficRecorder, captureExchange, type CapturedExchange } from '../../src/edge/capture.ts';
import { EdgeMetrics, FeedProgress } from '../../src/edge/metrics.ts';
import type { RequestContext } from '../../src/edge/pipeline/stage.ts';
import { ALWAYS_REDACTED, REDACTED, REDACTED_QUERY_PARAMS, TrafficShipper, exchangeRecord, latencyBucket, redactQuery } from '../../src/edge/traffic-shipper.ts';
import { MemoryRecords } from '../../src/shared/records/memory.ts';
import { TRAFFIC_BODY_LIMIT, TRAFFIC_LATENCY_BOUNDS_MS, parseRecord, type TrafficExchangeRecord, type TrafficRecord, type TrafficUsageRecord } from '../../src/shared/records/types.ts';
import type { EndpointConfig } from '../../src/shared/snapshot.ts';
import { endpointConfig } from '../helpers/endpoint-config.ts';
import { eventually } from '../helpers/eventually.ts';
import { sample } from '../helpers/metrics.ts';

const FULL = endpointConfig({ uuid: '11111111-2222-4333-8444-555555555555', hostname: 'full.edge.test', account_id: 7, capture_enabled: true, capture_level: 'full' });
const META = endpointConfig({ uuid: '21111111-2222-4333-8444-555555555555', hostname: 'meta.edge.test', account_id: 7, capture_enabled: true, capture_level: 'metadata' });
const OFF = endpointConfig({ uuid: '31111111-2222-4333-8444-555555555555', hostname: 'off.edge.test', account_id: 7, capture_enabled: false, capture_level: 'off' });
const DEFAULT = endpointConfig({ uuid: '41111111-2222-4333-8444-555555555555', hostname: 'default.edge.test', account_id: 7, capture_enabled: true, capture_level: null });
/** Token mode reading its token from a header of the user's choosing: that header is a credential on this endpoint. */
const TOKEN_HEADER = endpointConfig({
  uuid: '51111111-2222-4333-8444-555555555555', hostname: 'token.edge.test', account_id: 7, capture_enabled: true, capture_level: 'full',
  auth: { mode: 'token', realm: '', token_source: { kind: 'header', name: 'x-my-token' }, basic_users: [], tokens: [], session_ttl_seconds: null, credentials_version: 1 },
});
const BY_HOST = new Map<string, EndpointConfig>([FULL, META, OFF, DEFAULT, TOKEN_HEADER].map((e) => [e.hostname, e]));

/** Everything appended so far, parsed as the worker would parse it (what a record looks like after the wire). */
async function shipped(records: MemoryRecords): Promise<TrafficRecord[]> {
  const batches = await records.read({ count: 1000, blockMs: 0 });
  await records.ack(batches.map((b) => b.id));
  return batches.flatMap((b) => b.records);
}

describe('the traffic shipper', () => {
  let server: http.Server;
  let port = 0;
  let records: MemoryRecords;
  let shipper: TrafficShipper;
  /** Exchanges the server reported, capture on or off (the edge's recorder beside the shipper, as on an edge). */
  const recorder = new TrafficRecorder();
  const counted = () => recorder.totals().requests;
  /** sha256 and length of each request body the "upstream" received, in order. */
  const received: { sha: string; length: number }[] = [];

  before(async () => {
    records = new MemoryRecords();
    shipper = new TrafficShipper({ sink: records, edge: 'edge-t', region: 'eu-test', redactHeaders: [' X-Secret ', 'x-api-key', ''], usageIntervalMs: 0, exchangeIntervalMs: 0 });
    server = http.createServer((req, res) => {
      const endpoint = BY_HOST.get((req.headers.host ?? '').split(':')[0])!;
      const url = req.url ?? '/';
      const q = url.indexOf('?');
      const ctx: RequestContext = {
        req, res, endpoint, method: req.method ?? 'GET', host: endpoint.hostname, authority: endpoint.hostname,
        path: q < 0 ? url : url.slice(0, q), query: q < 0 ? '' : url.slice(q + 1), clientIp: '192.0.2.9', secure: false, upstreamHeaders: {},
      };
      captureExchange({ record: (x, detailed) => (recorder.record(x, detailed), shipper.record(x, detailed)) }, ctx);
      // Like a forwarder: the body streamed through, then an answer of the asked size streamed back in chunks.
      const hash = createHash('sha256');
      let length = 0;
      req.on('data', (chunk: Buffer) => {
        hash.update(chunk);
        length += chunk.length;
      });
      req.on('end', () => {
        received.push({ sha: hash.digest('hex'), length });
        const size = Number(new URLSearchParams(ctx.query).get('size') ?? '2');
        res.writeHead(Number(new URLSearchParams(ctx.query).get('status') ?? '200'), { 'content-type': 'text/plain', 'set-cookie': ['a=1', 'b=2'], 'x-secret': 's3cr3t', 'x-kept': 'yes' });
        const body = Buffer.alloc(size, 'r');
        for (let i = 0; i < size; i += 4096) res.write(body.subarray(i, i + 4096));
        res.end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    shipper.close();
    await new Promise((resolve) => server.close(resolve));
    await records.close();
  });

  /** One request; resolves with the answer's body once the exchange is over on the server too. */
  async function send(host: string, path: string, options: { method?: string; headers?: Record<string, string>; body?: Buffer; chunked?: boolean } = {}) {
    const before = counted();
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request({ port, host: '127.0.0.1', path, method: options.method ?? 'GET', headers: { host, ...options.headers }, agent: false }, resolve);
      req.on('error', reject);
      if (options.body && options.chunked) {
        for (let i = 0; i < options.body.length; i += 1000) req.write(options.body.subarray(i, i + 1000));
        req.end();
      } else req.end(options.body);
    });
    const chunks: Buffer[] = [];
    for await (const chunk of res) chunks.push(chunk as Buffer);
    // The server reports the exchange when its side closes: wait for the request to have been counted.
    await eventually(async () => (counted() > before ? true : undefined));
    return { status: res.statusCode, body: Buffer.concat(chunks) };
  }

  async function exchanges(): Promise<TrafficExchangeRecord[]> {
    shipper.flush();
    return (await shipped(records)).filter((r): r is TrafficExchangeRecord => r.kind === 'traffic_exchange');
  }

  it('full: redacted headers, the first 10 KiB of each body, and forwarding unchanged', async () => {
    const body = Buffer.alloc(15_000);
    for (let i = 0; i < body.length; i++) body[i] = i % 251;
    const answer = await send('full.edge.test', '/upload?size=20000', {
      method: 'POST', chunked: true, body,
      headers: { authorization: 'Bearer top', cookie: 'sid=1', 'x-secret': 'mine', 'X-Api-Key': 'k', 'proxy-authorization': 'Basic x', 'x-visible': 'v', 'user-agent': 'tester/1' },
    });
    assert.equal(answer.status, 200);
    assert.equal(answer.body.length, 20_000, 'the answer arrived whole');
    assert.deepEqual(received.at(-1), { sha: createHash('sha256').update(body).digest('hex'), length: 15_000 }, 'the body passed unchanged');
    const [x] = await exchanges();
    assert.equal(x.level, 'full');
    assert.equal(x.method, 'POST');
    assert.equal(x.path, '/upload');
    assert.equal(x.query, 'size=20000');
    assert.equal(x.account, 7);
    assert.equal(x.endpoint, FULL.uuid);
    assert.equal(x.hostname, 'full.edge.test');
    assert.equal(x.edge, 'edge-t');
    assert.equal(x.region, 'eu-test');
    assert.equal(x.user_agent, 'tester/1');
    assert.equal(x.bytes_in, 15_000);
    assert.ok(x.bytes_out > 20_000, `bytes_out ${x.bytes_out} counts the head and the body`);
    for (const name of ['authorization', 'cookie', 'x-secret', 'x-api-key', 'proxy-authorization']) assert.equal(x.request_headers![name], REDACTED, name);
    assert.equal(x.request_headers!['x-visible'], 'v');
    assert.equal(x.request_headers!['transfer-encoding'], 'chunked');
    assert.equal(x.response_headers!['set-cookie'], REDACTED);
    assert.equal(x.response_headers!['x-secret'], REDACTED);
    assert.equal(x.response_headers!['x-kept'], 'yes');
    assert.equal(x.response_headers!['content-type'], 'text/plain');
    assert.deepEqual(Buffer.from(x.request_body!, 'base64'), body.subarray(0, TRAFFIC_BODY_LIMIT));
    assert.equal(x.request_body_truncated, true);
    assert.deepEqual(Buffer.from(x.response_body!, 'base64'), Buffer.alloc(TRAFFIC_BODY_LIMIT, 'r'));
    assert.equal(x.response_body_truncated, true);
  });

  it('never stores a credential: the endpoint\'s token header, common key headers, and token-bearing query parameters (either level)', async () => {
    await send('token.edge.test', '/cb?code=abc&x=1&Access_Token=t&token=&size=1', { headers: { 'x-my-token': 'near-miss', 'x-auth-token': 'a', 'x-visible': 'v' } });
    const [x] = await exchanges();
    assert.equal(x.request_headers!['x-my-token'], REDACTED, 'the token header this endpoint reads');
    assert.equal(x.request_headers!['x-auth-token'], REDACTED);
    assert.equal(x.request_headers!['x-visible'], 'v');
    assert.equal(x.query, `code=${REDACTED}&x=1&Access_Token=${REDACTED}&token=${REDACTED}&size=1`);
    await send('meta.edge.test', '/cb?state=s&id_token=eyJ&size=1');
    const [m] = await exchanges();
    assert.equal(m.query, `state=s&id_token=${REDACTED}&size=1`);
  });

  it('full with small bodies keeps them whole and says nothing was cut', async () => {
    await send('full.edge.test', '/small?size=5', { method: 'PUT', body: Buffer.from('hello') });
    const [x] = await exchanges();
    assert.equal(x.level, 'full');
    assert.equal(Buffer.from(x.request_body!, 'base64').toString(), 'hello');
    assert.equal(x.bytes_in, 5);
    assert.equal(Buffer.from(x.response_body!, 'base64').toString(), 'rrrrr');
    assert.equal(x.request_body_truncated, false);
    assert.equal(x.response_body_truncated, false);
  });

  it('metadata: the exchange\'s facts, no headers or bodies; bodies still counted', async () => {
    await send('meta.edge.test', '/m?status=503&size=100', { method: 'POST', body: Buffer.alloc(3000, 1), headers: { authorization: 'Bearer x' } });
    const [x] = await exchanges();
    assert.equal(x.level, 'metadata');
    assert.equal(x.status, 503);
    assert.equal(x.bytes_in, 3000);
    for (const field of ['request_headers', 'response_headers', 'request_body', 'response_body', 'request_body_truncated'] as const) assert.equal(x[field], undefined, field);
    assert.equal(received.at(-1)!.length, 3000);
    assert.ok(parseRecord(JSON.parse(JSON.stringify(x))), 'the worker accepts it');
  });

  it('capture on with no level stored (the default) keeps metadata only', async () => {
    await send('default.edge.test', '/d', { headers: { 'x-visible': 'v' } });
    const [x] = await exchanges();
    assert.equal(x.endpoint, DEFAULT.uuid);
    assert.equal(x.level, 'metadata');
    assert.equal(x.request_headers, undefined);
  });

  it('capture off: no exchange shipped, but usage counts every exchange per endpoint and minute', async () => {
    await exchanges();
    await send('off.edge.test', '/o?status=404');
    await send('off.edge.test', '/o?status=500&size=10');
    await send('off.edge.test', '/o');
    shipper.flush();
    const all = await shipped(records);
    assert.equal(all.filter((r) => r.kind === 'traffic_exchange').length, 0);
    const usage = all.filter((r): r is TrafficUsageRecord => r.kind === 'traffic_usage').flatMap((r) => r.usage).filter((u) => u.endpoint === OFF.uuid);
    assert.equal(usage.reduce((n, u) => n + u.requests, 0), 3);
    assert.equal(usage.reduce((n, u) => n + u.errors_4xx, 0), 1);
    assert.equal(usage.reduce((n, u) => n + u.errors_5xx, 0), 1);
    assert.ok(usage.every((u) => u.account === 7 && u.minute.endsWith(':00.000Z')));
    assert.equal(usage.reduce((n, u) => n + u.latency.reduce((a, b) => a + b, 0), 0), 3, 'each exchange in one latency bucket');
    shipper.flush();
    assert.deepEqual(await shipped(records), [], 'an idle interval sends nothing');
  });

  it('a full queue drops new exchanges and counts them; usage still counts them; the metric shows it', async () => {
    const sink = new MemoryRecords();
    const small = new TrafficShipper({ sink, edge: 'e', region: 'r', maxQueued: 2, batchSize: 10, usageIntervalMs: 0, exchangeIntervalMs: 0 });
    const x: CapturedExchange = {
      endpoint: META.uuid, account: 7, hostname: 'meta.edge.test', at: new Date(0).toISOString(), time: 0, method: 'GET', host: 'meta.edge.test',
      path: '/', query: '', status: 200, duration_ms: 3, bytes_in: 0, bytes_out: 10, client_ip: '192.0.2.1', country: null, user_agent: '',
      secure: false, rule: null, edge_error: null, auth_outcome: null, client_id: null, completed: true, level: 'metadata',
    };
    for (let i = 0; i < 5; i++) small.record(x, true);
    assert.deepEqual(small.stats(), { shipped: 0, dropped: 3, queued: 2 });
    const metrics = new EdgeMetrics({ traffic: new TrafficRecorder(), tunnels: () => 0, feed: new FeedProgress(), endpointLimit: 0, capture: small });
    assert.equal(sample(await metrics.text(), 'edge_capture_dropped_total'), 3);
    assert.equal(sample(await metrics.text(), 'edge_capture_queued'), 2);
    small.close();
    assert.deepEqual(small.stats(), { shipped: 2, dropped: 3, queued: 0 });
    const sent = await shipped(sink);
    assert.equal(sent.filter((r) => r.kind === 'traffic_exchange').length, 2);
    const usage = sent.filter((r): r is TrafficUsageRecord => r.kind === 'traffic_usage').flatMap((r) => r.usage);
    assert.equal(usage[0].requests, 5, 'usage counts what capture dropped');
    assert.equal(usage[0].minute, new Date(0).toISOString());
    await sink.close();
  });

  it('redacts query parameters by their decoded, lower-cased name; names not encoded are judged without decoding', () => {
    const R = REDACTED;
    assert.equal(redactQuery('page=2&sort=name'), 'page=2&sort=name');
    assert.equal(redactQuery('CODE=1&Client_Secret=s&password='), `CODE=${R}&Client_Secret=${R}&password=${R}`);
    // Encoded names are decoded first (%-escapes, + as a space); a malformed escape is kept as it is.
    assert.equal(redactQuery('acc%65ss_token=t&api%5Fkey=k&%E0%A4%A=x&to+ken=y'), `acc%65ss_token=${R}&api%5Fkey=${R}&%E0%A4%A=x&to+ken=y`);
    // Lengths: the shortest and longest redacted names, one character either side of them, and a value alone.
    assert.equal(redactQuery('cod=1&code=1&refresh_token=1&refresh_tokens=1&=code&code'), `cod=1&code=${R}&refresh_token=${R}&refresh_tokens=1&=code&code`);
    // Lower-casing is Unicode's: the Kelvin sign lower-cases to "k".
    assert.equal(redactQuery('api\u212Aey=1'), `api\u212Aey=${R}`);
    for (const name of REDACTED_QUERY_PARAMS) assert.equal(redactQuery(`${name.toUpperCase()}=v`), `${name.toUpperCase()}=${R}`, name);
  });

  it('stores header fields the same on every record: names trimmed and lower-cased, repeats joined, secrets redacted', () => {
    const head = 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n X-Spaced :  a b \r\nSET-COOKIE: s=1\r\nx-spaced: c\r\nVary: a\r\nvary: b\r\nconstructor: k\r\n\r\n';
    const body = { chunks: [], size: 0, truncated: false };
    const x: CapturedExchange = {
      endpoint: FULL.uuid, account: 7, hostname: FULL.hostname, at: new Date(0).toISOString(), time: 0, method: 'GET', host: FULL.hostname, path: '/',
      query: '', status: 200, duration_ms: 1, bytes_in: 0, bytes_out: 0, client_ip: '198.51.100.1', country: null, user_agent: '', secure: true, rule: null,
      edge_error: null, auth_outcome: null, client_id: null, completed: true, level: 'full',
      detail: { request_headers: { 'x-mine': 'secret', 'x-other': 'kept', cookie: 'c=1' }, response_head: head, request_body: body, response_body: body, redact: ['x-mine'] },
    };
    const redact = new Set<string>(ALWAYS_REDACTED);
    // Twice: the second record reads the field names the first one remembered.
    for (let i = 0; i < 2; i++) {
      const r = exchangeRecord(x, 'edge-a', 'r', redact);
      assert.deepEqual(r.response_headers, { 'content-type': 'text/plain', 'x-spaced': 'a b, c', 'set-cookie': REDACTED, vary: 'a, b', constructor: 'k' });
      assert.deepEqual(r.request_headers, { 'x-mine': REDACTED, 'x-other': 'kept', cookie: REDACTED });
    }
    // The exchange's own list applies to its record only.
    assert.equal(exchangeRecord({ ...x, detail: { ...x.detail!, redact: undefined } }, 'edge-a', 'r', redact).request_headers!['x-mine'], 'secret');
  });

  it('puts latencies in the histogram\'s buckets, the overflow last', () => {
    assert.equal(latencyBucket(0), 0);
    assert.equal(latencyBucket(1), 0);
    assert.equal(latencyBucket(1.01), 1);
    assert.equal(latencyBucket(30_000), TRAFFIC_LATENCY_BOUNDS_MS.length - 1);
    assert.equal(latencyBucket(30_001), TRAFFIC_LATENCY_BOUNDS_MS.length);
  });

  it('refuses option values it cannot work with', () => {
    const sink = new MemoryRecords();
    for (const bad of [{ batchSize: 0 }, { maxQueued: -1 }, { batchSize: 10_000 }, { maxUsageEntries: 1.5 }]) {
      assert.throws(() => new TrafficShipper({ sink, edge: 'e', region: 'r', ...bad }), RangeError, JSON.stringify(bad));
    }
  });
});
