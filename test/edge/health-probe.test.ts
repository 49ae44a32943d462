// Health probes at the edge, on an edge built from its parts: a verified probe skips HTTPS enforcement and visitor
// auth, reaches the origin without its signature and is not captured; an unsigned, forged, stale or mismatched one is
// a visitor; an endpoint compiled closed stays closed to probes.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { TrafficRecorder } from '../../src/edge/capture.ts';
import { compileEndpoint, STAGES } from '../../src/edge/compile.ts';
import { EndpointCache } from '../../src/edge/endpoint-cache.ts';
import type { StageFactory } from '../../src/edge/pipeline/stage.ts';
import { PROBE_HEADER, PROBE_USER_AGENT, PROBE_VALIDITY_SECONDS, signProbe } from '../../src/shared/health-probe.ts';
import { endpointConfig } from '../helpers/endpoint-config.ts';
import { visit } from '../helpers/http.ts';
import { capturedLogger } from '../helpers/logger.ts';
import { closeServer, servePipeline, type PipelineEdge } from '../helpers/pipeline-edge.ts';

const KEY = randomBytes(32);
const PROTECTED = { uuid: '5e0c2a9b-7c1d-4e8f-a0b1-c2d3e4f5a6b7', hostname: 'protected.edge.test' };
const CLOSED = { uuid: '6f1d3b0c-8d2e-4f90-b1c2-d3e4f5a6b7c8', hostname: 'closed.edge.test' };

describe('health probes at the edge', () => {
  const seen: Array<{ url: string; ua: string; signature: unknown }> = [];
  let origin: http.Server;
  let edge: PipelineEdge;
  let port: number;
  const capture = new TrafficRecorder();

  // A security stage that cannot compile for CLOSED: the endpoint is compiled closed (503 auth_unavailable).
  const broken: StageFactory = {
    id: 'broken-security',
    failClosed: true,
    healthProbe: 'skips',
    compile(endpoint) {
      if (endpoint.uuid === CLOSED.uuid) throw new Error('cannot apply');
      return null;
    },
  };

  before(async () => {
    origin = http.createServer((req, res) => {
      seen.push({ url: req.url ?? '', ua: req.headers['user-agent'] ?? '', signature: req.headers[PROBE_HEADER] });
      res.end('from origin');
    });
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
    const originUrl = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
    const { logger } = capturedLogger();
    const config = new EndpointCache({ logger, stages: [broken, ...STAGES] });
    edge = await servePipeline(config, { capture, logger, probeKey: KEY });
    port = edge.port;
    // Basic auth with no users (every visitor 401) behind HTTPS enforcement (every plain-HTTP visitor 301).
    const auth = { mode: 'basic', realm: 'r', token_source: { kind: 'bearer' }, basic_users: [], tokens: [], session_ttl_seconds: null, credentials_version: 1 };
    config.mirror.apply({ version: 1, topic: 'endpoint', key: PROTECTED.uuid, data: endpointConfig({ ...PROTECTED, origin_url: originUrl, enforce_https: true, auth, capture_enabled: true } as never) });
    config.mirror.apply({ version: 2, topic: 'endpoint', key: CLOSED.uuid, data: endpointConfig({ ...CLOSED, origin_url: originUrl }) });
  });
  after(async () => {
    await edge.close();
    await closeServer(origin);
  });

  const probeHeaders = (endpoint: string, target: string, method = 'GET', now = Date.now()) => ({ [PROBE_HEADER]: signProbe(KEY, endpoint, method, target, now), 'user-agent': PROBE_USER_AGENT });

  it('a verified probe skips HTTPS enforcement and auth, reaches the origin without its signature, and is not captured', async () => {
    const before = capture.counters(PROTECTED.uuid).requests;
    const reply = await visit(port, PROTECTED.hostname, '/health?deep=1', { headers: probeHeaders(PROTECTED.uuid, '/health?deep=1') });
    assert.equal(reply.status, 200, reply.body);
    assert.equal(reply.body, 'from origin');
    assert.deepEqual(seen.at(-1), { url: '/health?deep=1', ua: PROBE_USER_AGENT, signature: undefined });
    // HEAD is a probe too.
    assert.equal((await visit(port, PROTECTED.hostname, '/', { method: 'HEAD', headers: probeHeaders(PROTECTED.uuid, '/', 'HEAD') })).status, 200);
    assert.equal(capture.counters(PROTECTED.uuid).requests, before, 'not counted');
    assert.ok(capture.recent(PROTECTED.uuid).every((x) => x.path !== '/health'), 'not captured');
  });

  it('without a valid signature for exactly this request it is a visitor', async () => {
    const cases: Array<[string, Record<string, string>, string?]> = [
      ['unsigned', { 'user-agent': PROBE_USER_AGENT }],
      ['forged', { [PROBE_HEADER]: `${Math.floor(Date.now() / 1000)}.${randomBytes(32).toString('base64url')}` }],
      ['another key', { [PROBE_HEADER]: signProbe(randomBytes(32), PROTECTED.uuid, 'GET', '/health') }],
      ['stale', probeHeaders(PROTECTED.uuid, '/health', 'GET', Date.now() - (PROBE_VALIDITY_SECONDS + 5) * 1000)],
      ['another path', probeHeaders(PROTECTED.uuid, '/other')],
      ['another endpoint', probeHeaders(CLOSED.uuid, '/health')],
      ['another method', probeHeaders(PROTECTED.uuid, '/health', 'GET'), 'POST'],
    ];
    const before = seen.length;
    const counted = capture.counters(PROTECTED.uuid).requests;
    for (const [name, headers, method] of cases) {
      const reply = await visit(port, PROTECTED.hostname, '/health', { headers, method });
      assert.ok(reply.status === 301 || reply.status === 308, `${name}: ${reply.status}`);
    }
    assert.equal(seen.length, before, 'nothing reached the origin');
    assert.equal(capture.counters(PROTECTED.uuid).requests, counted + cases.length, 'captured as visitors');
  });

  it('an endpoint compiled closed answers probes 503 as it answers visitors', async () => {
    const reply = await visit(port, CLOSED.hostname, '/', { headers: { ...probeHeaders(CLOSED.uuid, '/'), accept: 'application/json' } });
    assert.equal(reply.status, 503);
    assert.equal(JSON.parse(reply.body).code, 'auth_unavailable');
  });
});

describe('what a health probe skips is said by each stage', () => {
  it('the platform stages: probes skip the security family and run registration pages and routing', () => {
    const skipped = STAGES.filter((f) => f.healthProbe === 'skips').map((f) => f.id);
    assert.deepEqual(skipped, ['mtls', 'https-redirect', 'rate-limit', 'auth', 'jwt', 'webhook', 'rbac']);
    assert.deepEqual(STAGES.filter((f) => f.healthProbe === 'runs').map((f) => f.id), ['register', 'routing']);
  });

  it('a new stage is skipped or run by probes from its own factory, with no list elsewhere to update', () => {
    const stage = (id: string, healthProbe: 'skips' | 'runs'): StageFactory => ({ id, healthProbe, compile: () => ({ name: id, run: () => 'next' }) });
    const compiled = compileEndpoint(endpointConfig(PROTECTED), undefined, [stage('new-guard', 'skips'), stage('new-router', 'runs')]);
    assert.deepEqual(compiled.stages.map((s) => s.name), ['new-guard', 'new-router']);
    assert.deepEqual(compiled.probeStages.map((s) => s.name), ['new-router']);
  });
});
