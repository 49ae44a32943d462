// The edge's config mirror: host lookups follow every change (renames, deletions, names that appear after a
// cached miss), and the saved copy brings a restarted edge back to the version it had applied. At scale: work in
// proportion to what changed, resets in slices that serve the previous state until they swap, compile failures
// compiled and logged once with the previous config kept, origin pools released as endpoints stop naming them.
import { after, describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TrafficRecorder } from '../../src/edge/capture.ts';
import { STAGES } from '../../src/edge/compile.ts';
import { EndpointCache } from '../../src/edge/endpoint-cache.ts';
import { OriginPools } from '../../src/edge/forward/origin.ts';
import { handleRequest } from '../../src/edge/pipeline/pipeline.ts';
import type { StageFactory } from '../../src/edge/pipeline/stage.ts';
import { TunnelRegistry } from '../../src/edge/tunnels/registry.ts';
import { MemoryFeed } from '../../src/shared/feed/memory.ts';
import { FeedSubscriber } from '../../src/shared/feed/subscriber.ts';
import type { FeedEntry } from '../../src/shared/feed/types.ts';
import { createLogger } from '../../src/shared/log.ts';
import type { EndpointConfig, RoutingRuleConfig } from '../../src/shared/snapshot.ts';
import { endpointConfig } from '../helpers/endpoint-config.ts';
import { waitForVersion } from '../helpers/feed.ts';
import { visit } from '../helpers/http.ts';
import { capturedLogger } from '../helpers/logger.ts';

const logger = createLogger('silent');

function endpoint(uuid: string, hostname: string, extra: Partial<EndpointConfig> = {}): EndpointConfig {
  return endpointConfig({ uuid, hostname, capture_enabled: true, ...extra });
}

/** A plain origin on loopback that answers `origin <path>`, closed when the test ends; its URL. */
async function startOrigin(t: TestContext): Promise<string> {
  const origin = http.createServer((req, res) => res.end(`origin ${req.url}`));
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  t.after(() => new Promise<void>((r) => origin.close(() => r())));
  return `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
}

/**
 * The pipeline in front of `config` on a listener of its own, with origin pools that follow its endpoints as the edge
 * wires them (pools and listener closed when the test ends): its port, and the pools to inspect.
 */
async function startPipeline(t: TestContext, config: EndpointCache): Promise<{ port: number; origins: OriginPools }> {
  const origins = new OriginPools({ allowPrivate: true });
  t.after(() => origins.close());
  config.on('endpoint', (_uuid, next, previous) => origins.track(previous, next));
  const deps = { config, registry: new TunnelRegistry(), origins, capture: new TrafficRecorder() };
  const edge = http.createServer((req, res) => handleRequest(deps, req, res, false));
  await new Promise<void>((r) => edge.listen(0, '127.0.0.1', r));
  t.after(() => {
    edge.closeAllConnections();
    return new Promise<void>((r) => edge.close(() => r()));
  });
  return { port: (edge.address() as AddressInfo).port, origins };
}

describe('EndpointCache', () => {
  const dirs: string[] = [];
  after(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it('finds endpoints by hostname and follows renames and deletions', () => {
    const config = new EndpointCache({ logger });
    config.mirror.apply({ version: 1, topic: 'endpoint', key: 'u1', data: endpoint('u1', 'a.edge.localhost') });
    assert.equal(config.lookup('a.edge.localhost')?.config.uuid, 'u1');
    config.mirror.apply({ version: 2, topic: 'endpoint', key: 'u1', data: endpoint('u1', 'b.edge.localhost') });
    assert.equal(config.lookup('a.edge.localhost'), null);
    assert.equal(config.lookup('b.edge.localhost')?.config.uuid, 'u1');
    config.mirror.apply({ version: 3, topic: 'endpoint', key: 'u1', data: null });
    assert.equal(config.lookup('b.edge.localhost'), null);
  });

  it('serves a name that appears after a cached miss', () => {
    const config = new EndpointCache({ logger });
    assert.equal(config.lookup('late.edge.localhost'), null);
    config.mirror.apply({ version: 1, topic: 'endpoint', key: 'u2', data: endpoint('u2', 'late.edge.localhost') });
    assert.equal(config.lookup('late.edge.localhost')?.config.uuid, 'u2');
  });

  it('recompiles on change: a new config version is what the next lookup sees', () => {
    const config = new EndpointCache({ logger });
    config.mirror.apply({ version: 1, topic: 'endpoint', key: 'u3', data: endpoint('u3', 'c.edge.localhost') });
    assert.equal(config.lookup('c.edge.localhost')?.config.status, 'active');
    config.mirror.apply({ version: 2, topic: 'endpoint', key: 'u3', data: endpoint('u3', 'c.edge.localhost', { status: 'disabled' }) });
    assert.equal(config.lookup('c.edge.localhost')?.config.status, 'disabled');
  });

  it('saves what it applied and restores it at the same version', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'edge-config-'));
    dirs.push(dir);
    const stateFile = join(dir, 'edge-config.json');
    const first = new EndpointCache({ logger, stateFile });
    await first.mirror.reset({ version: 7, entries: [{ topic: 'endpoint', key: 'u4', version: 7, data: endpoint('u4', 'd.edge.localhost') }] });
    await first.flush();
    const second = new EndpointCache({ logger, stateFile });
    assert.equal(await second.load(), 7);
    assert.equal(second.lookup('d.edge.localhost')?.config.uuid, 'u4');
  });

  it('starts empty when the saved file is missing or unreadable', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'edge-config-'));
    dirs.push(dir);
    const config = new EndpointCache({ logger, stateFile: join(dir, 'absent.json') });
    assert.equal(await config.load(), 0);
  });
});

/** A stage that every compile passes through first (and never runs per request): counts compiles, failed ones too. */
function countingStage(): StageFactory & { compiles: number } {
  const factory = {
    id: 'counting',
    healthProbe: 'runs' as const,
    compiles: 0,
    compile() {
      factory.compiles++;
      return null;
    },
  };
  return factory;
}

const uuidOf = (i: number) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;

/** `n` endpoint entries e<i>.edge.localhost at versions 1..n. */
function endpointEntries(n: number, from = 0): FeedEntry[] {
  return Array.from({ length: n }, (_, k) => {
    const i = from + k;
    return { topic: 'endpoint', key: uuidOf(i), version: i + 1, data: endpoint(uuidOf(i), `e${i}.edge.localhost`) };
  });
}

/** A routing rule the compiler refuses: its source_ip pattern is not an address. */
const BAD_RULE: RoutingRuleConfig = {
  id: 9,
  name: 'broken',
  priority: 1,
  enabled: true,
  target_agent_id: null,
  target_agent_tags: ['x'],
  target_origin_url: null,
  conditions: [{ condition_type: 'source_ip', condition_key: '', pattern: 'not-an-ip' }],
};

describe('EndpointCache at scale', () => {
  it('a reset of n endpoints compiles each once and emits one event each; a later reset only what differs', async () => {
    const counting = countingStage();
    const config = new EndpointCache({ logger, stages: [counting, ...STAGES] });
    let events = 0;
    config.on('endpoint', () => events++);
    const n = 5_000;
    const entries = endpointEntries(n);
    await config.mirror.reset({ version: n, entries });
    assert.equal(counting.compiles, n);
    assert.equal(events, n);
    assert.equal(config.endpoints().length, n);

    // The same snapshot again, with one endpoint edited, one removed and one added: three compiles at most, three events.
    counting.compiles = 0;
    events = 0;
    const next = entries.slice(1);
    next[0] = { ...next[0], version: n + 1, data: endpoint(uuidOf(1), 'renamed.edge.localhost') };
    next.push(...endpointEntries(1, n));
    await config.mirror.reset({ version: n + 2, entries: next });
    assert.equal(counting.compiles, 2, 'the edited and the added endpoint, nothing else');
    assert.equal(events, 3);
    assert.equal(config.lookup('e0.edge.localhost'), null);
    assert.equal(config.lookup('e1.edge.localhost'), null);
    assert.equal(config.lookup('renamed.edge.localhost')?.config.uuid, uuidOf(1));
    assert.equal(config.lookup(`e${n}.edge.localhost`)?.config.uuid, uuidOf(n));
  });

  it('applies one change at n endpoints with one compile and one event, and compiles nothing per lookup after', async () => {
    const counting = countingStage();
    const config = new EndpointCache({ logger, stages: [counting, ...STAGES], cacheSize: 100 });
    const n = 5_000;
    await config.mirror.reset({ version: n, entries: endpointEntries(n) });
    let events = 0;
    config.on('endpoint', () => events++);
    counting.compiles = 0;
    config.mirror.apply({ version: n + 1, topic: 'endpoint', key: uuidOf(7), data: endpoint(uuidOf(7), 'e7.edge.localhost', { enforce_https: true }) });
    assert.equal(counting.compiles, 1);
    assert.equal(events, 1);
    // The first lookup compiles it for the cache (it was not in use), the next ones hit the cache.
    for (let i = 0; i < 10; i++) assert.equal(config.lookup('e7.edge.localhost')?.config.enforce_https, true);
    assert.equal(counting.compiles, 2);
  });

  it('Regression: a reset of 20k entries yields to the event loop, serving the previous state whole until the swap', async () => {
    const config = new EndpointCache({ logger });
    config.mirror.apply({ version: 1, topic: 'endpoint', key: 'old', data: endpoint('old', 'old.edge.localhost') });
    assert.equal(config.lookup('old.edge.localhost')?.config.uuid, 'old');
    const n = 20_000;
    const entries = endpointEntries(n, 1);
    let finished = false;
    const during: Array<{ finished: boolean; old: string | undefined; fresh: string | undefined; version: number }> = [];
    const probe = () =>
      setImmediate(() => {
        // What a request arriving now would see.
        during.push({ finished, old: config.lookup('old.edge.localhost')?.config.uuid, fresh: config.lookup('e1.edge.localhost')?.config.uuid, version: config.version });
        if (!finished) probe();
      });
    probe();
    await config.mirror.reset({ version: n + 1, entries });
    finished = true;
    const before = during.filter((d) => !d.finished);
    assert.ok(before.length >= 2, `the reset returned to the event loop ${before.length} times`);
    // Until the swap, the previous state whole; never a mix of the two.
    for (const d of before) {
      const previousState = d.old === 'old' && d.fresh === undefined && d.version === 1;
      const nextState = d.old === undefined && d.fresh === uuidOf(1) && d.version === n + 1;
      assert.ok(previousState || nextState, `a mix of two states: ${JSON.stringify(d)}`);
    }
    assert.ok(before.some((d) => d.old === 'old'), 'requests were served from the previous state during the reset');
    assert.equal(config.lookup('old.edge.localhost'), null);
    assert.equal(config.lookup(`e${n}.edge.localhost`)?.config.uuid, uuidOf(n));
  });

  it('refuses an apply while a reset is in progress rather than losing it at the swap', async () => {
    const config = new EndpointCache({ logger });
    const reset = config.mirror.reset({ version: 20_000, entries: endpointEntries(20_000) });
    await new Promise((r) => setImmediate(r));
    assert.throws(() => config.mirror.apply({ version: 20_001, topic: 'endpoint', key: 'x', data: endpoint('x', 'x.edge.localhost') }), /reset is in progress/);
    await reset;
    assert.equal(config.endpoint('x'), undefined);
  });

  it('keeps the feed order while a reset runs in slices: changes published meanwhile are applied after it, in order', async (t) => {
    const feed = new MemoryFeed();
    t.after(() => feed.close());
    const n = 20_000;
    await feed.reset({ version: n, entries: endpointEntries(n) });
    const config = new EndpointCache({ logger });
    const subscriber = new FeedSubscriber(feed, config.mirror, { checkIntervalMs: 600_000 });
    t.after(() => subscriber.stop());
    const applied: number[] = [];
    subscriber.on('applied', (v) => applied.push(v));
    // Published once the reset has started yielding: the edge is then mid-way through the snapshot at version n.
    let published = false;
    const publishDuringReset = () =>
      setImmediate(() => {
        if (config.version !== 0 || subscriber.version !== 0) return;
        published = true;
        void (async () => {
          await feed.publish({ version: n + 1, topic: 'endpoint', key: uuidOf(3), data: endpoint(uuidOf(3), 'three.edge.localhost') });
          await feed.publish({ version: n + 2, topic: 'endpoint', key: uuidOf(3), data: null });
          await feed.publish({ version: n + 3, topic: 'endpoint', key: uuidOf(4), data: endpoint(uuidOf(4), 'four.edge.localhost') });
        })();
      });
    const started = subscriber.start();
    publishDuringReset();
    await started;
    await waitForVersion(subscriber, n + 3);
    assert.ok(published, 'the changes were published while the reset was under way');
    assert.deepEqual(applied, [n, n + 1, n + 2, n + 3]);
    assert.equal(config.endpoint(uuidOf(3)), undefined);
    assert.equal(config.lookup('four.edge.localhost')?.config.uuid, uuidOf(4));
    assert.equal(config.lookup('e4.edge.localhost'), null);
  });
});

describe('EndpointCache compile failures', () => {
  it('Regression: a config that fails to compile is compiled and logged once, and the previous one keeps serving', () => {
    const { logger: log, lines } = capturedLogger();
    const counting = countingStage();
    const config = new EndpointCache({ logger: log, stages: [counting, ...STAGES] });
    config.mirror.apply({ version: 1, topic: 'endpoint', key: 'u1', data: endpoint('u1', 'a.edge.localhost') });
    const good = config.lookup('a.edge.localhost');
    assert.equal(good?.config.status, 'active');
    const endpointEvents: Array<EndpointConfig | null> = [];
    config.on('endpoint', (_uuid, next) => endpointEvents.push(next));

    counting.compiles = 0;
    config.mirror.apply({ version: 2, topic: 'endpoint', key: 'u1', data: endpoint('u1', 'a.edge.localhost', { routing_rules: [BAD_RULE] }) });
    for (let i = 0; i < 50; i++) assert.equal(config.lookup('a.edge.localhost'), good, 'the last good compiled endpoint keeps serving');
    assert.equal(config.endpoint('u1')?.routing_rules.length, 0, 'and its config stays in force for every other listener');
    assert.equal(counting.compiles, 1, 'compiled once, not per request');
    assert.equal(lines.filter((l) => l.msg === 'endpoint config failed to compile').length, 1, 'logged once');
    assert.deepEqual(endpointEvents, [], 'nothing in force changed, so nothing to tell');
    assert.deepEqual(config.compileErrors(), {
      compile_errors: [{ endpoint: 'u1', version: 2, error: 'routing rule 9 ("broken"), source_ip condition: "not-an-ip" is not an IP address or CIDR' }],
      compile_error_count: 1,
    });

    // The next good version replaces it and clears the error.
    config.mirror.apply({ version: 3, topic: 'endpoint', key: 'u1', data: endpoint('u1', 'a.edge.localhost', { enforce_https: true }) });
    assert.equal(config.lookup('a.edge.localhost')?.config.enforce_https, true);
    assert.deepEqual(config.compileErrors(), { compile_errors: [], compile_error_count: 0 });
  });

  it('serves a new endpoint whose config fails as a 503 stand-in, compiled once, until a good version arrives', () => {
    const counting = countingStage();
    const config = new EndpointCache({ logger, stages: [counting, ...STAGES] });
    config.mirror.apply({ version: 1, topic: 'endpoint', key: 'u2', data: endpoint('u2', 'b.edge.localhost', { routing_rules: [BAD_RULE] }) });
    for (let i = 0; i < 20; i++) {
      const served = config.lookup('b.edge.localhost');
      assert.equal(served?.config.status, 'error', 'the pipeline answers endpoint_disabled (503) for it');
      assert.equal(served?.stages.length, 0);
    }
    assert.equal(config.endpoint('u2')?.status, 'error', 'ports and admission see it as not serving too');
    assert.equal(counting.compiles, 1);
    config.mirror.apply({ version: 2, topic: 'endpoint', key: 'u2', data: endpoint('u2', 'b.edge.localhost') });
    assert.equal(config.lookup('b.edge.localhost')?.config.status, 'active');
    // Deleting an endpoint forgets its error as well.
    config.mirror.apply({ version: 3, topic: 'endpoint', key: 'u2', data: endpoint('u2', 'b.edge.localhost', { routing_rules: [BAD_RULE] }) });
    assert.equal(config.compileErrors().compile_error_count, 1);
    config.mirror.apply({ version: 4, topic: 'endpoint', key: 'u2', data: null });
    assert.equal(config.compileErrors().compile_error_count, 0);
    assert.equal(config.lookup('b.edge.localhost'), null);
  });

  it('keeps the previous config when a reset brings one that fails, and is not retried by the next reset', async () => {
    const counting = countingStage();
    const config = new EndpointCache({ logger, stages: [counting, ...STAGES] });
    await config.mirror.reset({ version: 1, entries: [{ topic: 'endpoint', key: 'u3', version: 1, data: endpoint('u3', 'c.edge.localhost') }] });
    const bad = { topic: 'endpoint', key: 'u3', version: 2, data: endpoint('u3', 'c-renamed.edge.localhost', { routing_rules: [BAD_RULE] }) };
    await config.mirror.reset({ version: 2, entries: [bad] });
    assert.equal(config.lookup('c.edge.localhost')?.config.uuid, 'u3', 'still served under its previous name');
    assert.equal(config.lookup('c-renamed.edge.localhost'), null);
    assert.equal(config.compileErrors().compile_errors[0]?.version, 2);
    counting.compiles = 0;
    await config.mirror.reset({ version: 3, entries: [bad] });
    assert.equal(counting.compiles, 0, 'the same failing version is not compiled again');
    assert.equal(config.compileErrors().compile_error_count, 1);
  });

  it('Compile failures of security stages fail closed: a tightening whose auth, jwt, webhook, rbac or mtls part fails answers 503 auth_unavailable, reported', async (t) => {
    const originUrl = await startOrigin(t);
    assert.deepEqual(STAGES.filter((f) => f.failClosed === true).map((f) => f.id), ['mtls', 'auth', 'jwt', 'webhook', 'rbac'], 'the stages that fail closed');
    const { logger: log, lines } = capturedLogger();
    const outcomes: string[] = [];
    // No EDGE_SECRET_KEY in these deps: token mode and webhook verification cannot compile, as on an edge that lacks it.
    const config = new EndpointCache({ logger: log, stageDeps: { publicHttpsPort: () => 443, authOutcome: (_e, stage, o) => void outcomes.push(`${stage}:${o}`) } });
    const { port: edgePort } = await startPipeline(t, config);
    const host = 's.edge.localhost';
    const open = endpoint('s1', host, { origin_url: originUrl });
    config.mirror.apply({ version: 1, topic: 'endpoint', key: 's1', data: open });
    assert.equal((await visit(edgePort, host, '/x')).body, 'origin /x');

    const auth = { mode: 'token' as const, realm: '', token_source: { kind: 'bearer' as const }, basic_users: [], tokens: [], session_ttl_seconds: null, credentials_version: 1 };
    const jwt = { jwks_url: 'https://idp.example/jwks', issuer: null, audience: null, claim_headers: { role: 'X-Forwarded-For' } };
    const webhook = { header: 'x-signature', algo: 'sha256' as const, secret_sealed: 'sealed', prefix: '' };
    // A pattern the control API would refuse, as a snapshot from a newer or broken control plane might carry.
    const permissions = { allowed_methods: ['GET'], denied_methods: [], allowed_paths: ['no-slash'], denied_paths: [], rate_limit_rps: 0, headers: {} };
    const rbac = { roles: [{ id: 1, name: 'reader', priority: 0, permissions }], clients: [], invites: [], self_registration: { enabled: false, allowed_email_domains: [] } };
    const tightenings: Array<[string, Partial<EndpointConfig>, RegExp]> = [
      ['auth', { auth }, /^auth: .*EDGE_SECRET_KEY/],
      ['jwt', { jwt }, /^jwt: claim_headers: .*x-forwarded-for/i],
      ['webhook', { webhook }, /^webhook: .*EDGE_SECRET_KEY/],
      ['rbac', { rbac }, /^rbac: .*must start with "\/"/],
    ];
    let version = 1;
    for (const [stage, tightening, error] of tightenings) {
      outcomes.length = 0;
      config.mirror.apply({ version: ++version, topic: 'endpoint', key: 's1', data: { ...open, ...tightening } });
      const served = config.lookup(host)!;
      assert.match(served.failure ?? '', error, stage);
      assert.deepEqual(served.stages.map((s) => s.name), [stage], `${stage}: one stage that refuses`);
      const r = await visit(edgePort, host, '/x', { headers: { accept: 'application/json' } });
      assert.equal(r.status, 503, `${stage}: ${r.body}`);
      assert.equal(JSON.parse(r.body).code, 'auth_unavailable');
      assert.match(JSON.parse(r.body).detail, new RegExp(`${stage} settings could not be applied`));
      assert.deepEqual(outcomes, [`${stage}:unavailable`]);
      assert.equal(config.endpoint('s1')?.[stage as 'auth'] !== undefined, true, `${stage}: the new config is the one in force`);
      const reported = config.compileErrors().compile_errors[0];
      assert.equal(reported.version, version);
      assert.match(reported.error, error);
      // Back to the open config in between, so each tightening starts from a working endpoint.
      config.mirror.apply({ version: ++version, topic: 'endpoint', key: 's1', data: open });
      assert.equal((await visit(edgePort, host, '/x')).body, 'origin /x', `${stage}: a config that compiles clears it`);
      assert.equal(config.compileErrors().compile_error_count, 0);
    }
    assert.equal(lines.filter((l) => l.msg === 'endpoint config failed to compile').length, 4, 'each logged once');

    // A security failure closes the endpoint even when another stage fails too; a failure of another stage alone
    // keeps the last good config (availability).
    config.mirror.apply({ version: ++version, topic: 'endpoint', key: 's1', data: { ...open, routing_rules: [BAD_RULE] } });
    assert.equal((await visit(edgePort, host, '/x')).body, 'origin /x', 'routing failed: the last good config serves');
    config.mirror.apply({ version: ++version, topic: 'endpoint', key: 's1', data: { ...open, routing_rules: [BAD_RULE], auth } });
    assert.equal((await visit(edgePort, host, '/x')).status, 503);
    // A new endpoint whose auth fails is closed the same way, not a stand-in: its agents may connect, visitors get 503.
    config.mirror.apply({ version: ++version, topic: 'endpoint', key: 's2', data: endpoint('s2', 'new.edge.localhost', { auth }) });
    assert.equal(config.endpoint('s2')?.status, 'active');
    assert.equal((await visit(edgePort, 'new.edge.localhost', '/x')).status, 503);
    // The same through a reset.
    await config.mirror.reset({ version: ++version, entries: [{ topic: 'endpoint', key: 's1', version, data: { ...open, jwt } }] });
    assert.equal((await visit(edgePort, host, '/x')).status, 503);
    assert.match(config.compileErrors().compile_errors[0].error, /^jwt: /);
  });

  it('reports at most 20 compile errors, newest first, with the total', async () => {
    const config = new EndpointCache({ logger });
    const entries = Array.from({ length: 25 }, (_, i) => ({ topic: 'endpoint', key: `f${i}`, version: i + 1, data: endpoint(`f${i}`, `f${i}.edge.localhost`, { routing_rules: [BAD_RULE] }) }));
    await config.mirror.reset({ version: 25, entries });
    const { compile_errors, compile_error_count } = config.compileErrors();
    assert.equal(compile_error_count, 25);
    assert.deepEqual(
      compile_errors.map((e) => e.version),
      Array.from({ length: 20 }, (_, i) => 25 - i),
    );
  });
});

describe('EndpointCache events for keys and accounts', () => {
  it('tells listeners of API key and account changes, by apply and by reset, with the previous value', async () => {
    const config = new EndpointCache({ logger });
    const told: unknown[] = [];
    config.on('apiKey', (id, next, previous) => told.push(['apiKey', id, next, previous]));
    config.on('account', (id, next, previous) => told.push(['account', id, next, previous]));
    const key = { key_id: 'k1', secret_hash: 'h', user_id: 1, account_id: 1 };
    config.mirror.apply({ version: 1, topic: 'api_key', key: 'k1', data: key });
    config.mirror.apply({ version: 2, topic: 'account', key: '1', data: { id: 1, plan: 'free', suspended: false } });
    await config.mirror.reset({ version: 3, entries: [{ topic: 'account', key: '1', version: 3, data: { id: 1, plan: 'free', suspended: true } }] });
    assert.deepEqual(told, [
      ['apiKey', 'k1', key, null],
      ['account', 1, { id: 1, plan: 'free', suspended: false }, null],
      ['account', 1, { id: 1, plan: 'free', suspended: true }, { id: 1, plan: 'free', suspended: false }],
      ['apiKey', 'k1', null, key],
    ]);
  });
});

describe('EndpointCache state file', () => {
  const dirs: string[] = [];
  after(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  const tempDir = async () => {
    const dir = await mkdtemp(join(tmpdir(), 'edge-config-'));
    dirs.push(dir);
    return dir;
  };

  it('writes one entry per line and restores 20k entries at the same version', async () => {
    const stateFile = join(await tempDir(), 'edge-config.json');
    const first = new EndpointCache({ logger, stateFile });
    await first.mirror.reset({ version: 20_000, entries: endpointEntries(20_000) });
    await first.flush();
    const lines = (await readFile(stateFile, 'utf8')).trimEnd().split('\n');
    assert.equal(lines.length, 20_001);
    assert.deepEqual(JSON.parse(lines[0]), { version: 20_000, entries: 20_000 });
    const written = await stat(stateFile);
    const second = new EndpointCache({ logger, stateFile });
    assert.equal(await second.load(), 20_000);
    assert.equal(second.lookup('e19999.edge.localhost')?.config.uuid, uuidOf(19_999));
    // What was just read is not written back (a rewrite replaces the file: a new inode).
    await second.flush();
    assert.equal((await stat(stateFile)).ino, written.ino);
  });

  it('reads a file saved in the earlier single-document form', async () => {
    const stateFile = join(await tempDir(), 'edge-config.json');
    await writeFile(stateFile, JSON.stringify({ version: 4, entries: [{ topic: 'endpoint', key: 'u5', version: 4, data: endpoint('u5', 'old-form.edge.localhost') }] }));
    const config = new EndpointCache({ logger, stateFile });
    assert.equal(await config.load(), 4);
    assert.equal(config.lookup('old-form.edge.localhost')?.config.uuid, 'u5');
  });

  it('starts empty from a truncated or malformed file', async () => {
    const dir = await tempDir();
    const header = JSON.stringify({ version: 9, entries: 3 });
    const entry = JSON.stringify({ topic: 'endpoint', key: 'u6', version: 9, data: endpoint('u6', 'cut.edge.localhost') });
    for (const [name, text] of [
      ['truncated', `${header}\n${entry}\n${entry}\n`],
      ['cut-mid-line', `${header}\n${entry}\n${entry.slice(0, 40)}`],
      ['not-json', 'hello\n'],
      ['no-version', `${JSON.stringify({ entries: 0 })}\n`],
      ['not-an-entry', `${JSON.stringify({ version: 1, entries: 1 })}\n{"topic":1}\n`],
      ['empty', ''],
    ]) {
      const stateFile = join(dir, `${name}.json`);
      await writeFile(stateFile, text);
      const config = new EndpointCache({ logger, stateFile });
      assert.equal(await config.load(), 0, name);
      assert.equal(config.mirror.size, 0, name);
    }
  });
});

describe('origin pools follow endpoint changes', () => {
  it('Regression: closes the pool of an origin no endpoint names any more, one change at a time, and keeps shared ones', async (t) => {
    const shared = await startOrigin(t);
    const own = `${shared}/own`;

    const config = new EndpointCache({ logger });
    const { port: edgePort, origins } = await startPipeline(t, config);

    await config.mirror.reset({
      version: 2,
      entries: [
        { topic: 'endpoint', key: 'a', version: 1, data: endpoint('a', 'a.edge.localhost', { origin_url: shared }) },
        { topic: 'endpoint', key: 'b', version: 2, data: endpoint('b', 'b.edge.localhost', { origin_url: own }) },
      ],
    });
    assert.equal((await visit(edgePort, 'a.edge.localhost', '/x')).body, 'origin /x');
    assert.equal((await visit(edgePort, 'b.edge.localhost', '/y')).body, 'origin /own/y');
    assert.deepEqual(origins.usage(shared), { endpoints: 1, pooled: true });
    assert.deepEqual(origins.usage(own), { endpoints: 1, pooled: true });

    // b now shares a's origin: its own origin's pool has no endpoint left and closes; the shared one counts two.
    config.mirror.apply({ version: 3, topic: 'endpoint', key: 'b', data: endpoint('b', 'b.edge.localhost', { origin_url: shared }) });
    assert.deepEqual(origins.usage(own), { endpoints: 0, pooled: false });
    assert.deepEqual(origins.usage(shared), { endpoints: 2, pooled: true });
    // One of the two goes: the pool stays for the other, and still serves.
    config.mirror.apply({ version: 4, topic: 'endpoint', key: 'a', data: null });
    assert.deepEqual(origins.usage(shared), { endpoints: 1, pooled: true });
    assert.equal((await visit(edgePort, 'b.edge.localhost', '/z')).body, 'origin /z');
    // A rule naming an origin counts like the endpoint's own: b moves to agents with a rule to the shared origin.
    const rule: RoutingRuleConfig = { ...BAD_RULE, target_agent_tags: [], target_origin_url: shared, conditions: [] };
    config.mirror.apply({ version: 5, topic: 'endpoint', key: 'b', data: endpoint('b', 'b.edge.localhost', { routing_rules: [rule] }) });
    assert.deepEqual(origins.usage(shared), { endpoints: 1, pooled: true });
    // A reset that drops b leaves nothing naming it: the pool closes.
    await config.mirror.reset({ version: 6, entries: [] });
    assert.deepEqual(origins.usage(shared), { endpoints: 0, pooled: false });
  });
});
