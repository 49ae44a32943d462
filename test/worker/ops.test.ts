// The worker's ops port end to end (WORKER_OPS_PORT): the real program with the worker role, its liveness, its
// readiness (store, Redis, the lease-holding jobs) and its metrics as the jobs work; promtool's verdict on every port.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../src/shared/config.ts';
import { createLogger } from '../../src/shared/log.ts';
import { startNode, type NodeHandle } from '../../src/main.ts';
import { edgeCaughtUp, expectBody, type User } from '../helpers/endpoint-api.ts';
import { eventually } from '../helpers/eventually.ts';
import { freeTcpPort } from '../helpers/free-port.ts';
import { visit, type Reply } from '../helpers/http.ts';
import { sample, samples } from '../helpers/metrics.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { copyPgliteTemplate } from '../helpers/pglite-template.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

/** One request to an ops port on loopback. */
function ops(port: number, path: string, method = 'GET'): Promise<Reply> {
  return visit(port, '127.0.0.1', path, { method });
}

const PROMTOOL = '/usr/bin/promtool';

/** promtool's complaints about an exposition (empty when it has none), or null when it is not installed. */
function promtoolProblems(text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(PROMTOOL, ['check', 'metrics'], (err, stdout, stderr) => {
      const said = `${stdout}${stderr}`.trim();
      // Exit 3: lint problems, listed in the output; any other failure is the tool's own.
      if (err && (err as { code?: number }).code !== 3) return reject(err);
      resolve(err ? said || 'promtool failed without saying why' : said);
    });
    child.stdin!.end(text);
  });
}

/** Every family the worker exposes on a node with the record worker, whatever has happened yet. */
const FAMILIES = [
  'edge_worker_job_runs_total',
  'edge_worker_job_failures_total',
  'edge_worker_job_duration_seconds_count',
  'edge_worker_job_last_success_timestamp_seconds',
  'edge_worker_health_probes_total',
  'edge_worker_alert_evaluations_total',
  'edge_worker_alert_notifications_total',
  'edge_worker_record_batches_written_total',
  'edge_worker_record_batches_dead_lettered_total',
  'edge_worker_records_dead_lettered_total',
  'edge_worker_records_skipped_total',
  'edge_worker_record_backlog_batches',
  'edge_worker_retention_deleted_rows_total',
  'edge_worker_process_cpu_seconds_total',
];

describe('worker ops port (all roles in one process)', () => {
  let t: TestNode;
  let receiver: WebhookReceiver;
  let owner: User;
  let port: number;
  const scrape = async () => (await ops(port, '/metrics')).body;
  const createEndpoint = async () => expectBody<{ uuid: string; hostname: string }>(201, t.api('POST', '/v1/endpoints', { key: owner.api_key, body: {} }));

  before(async () => {
    receiver = await startWebhookReceiver();
    // Private addresses allowed: the webhook receiver lives on loopback. Health intervals scaled to seconds, so a
    // newly enabled check falls due within one (its first probe is spread over up to 25 s otherwise). Alert rules
    // and janitor-cadence jobs run only when a test says so: their timers wait an hour.
    t = await startTestNode({
      WORKER_OPS_PORT: '0',
      EDGE_ORIGIN_ALLOW_PRIVATE: 'true',
      EDGE_HEALTH_MIN_INTERVAL_SECONDS: '1',
      EDGE_ALERT_EVALUATION_INTERVAL_MS: '3600000',
      EDGE_JANITOR_INTERVAL_MS: '3600000',
    });
    port = t.node.workerOpsPort!;
    owner = await t.createUser('business');
  });
  after(async () => {
    await t?.close();
    await receiver?.close();
  });

  it('listens on a port of its own, apart from the edge ops, public and control ports', () => {
    assert.ok(port > 0);
    const edge = t.node.edge!;
    assert.ok(![edge.opsPort, edge.httpPort, edge.httpsPort, t.node.control!.port].includes(port));
  });

  it('answers /healthz 200, and HEAD without a body', async () => {
    const res = await ops(port, '/healthz');
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(res.body), { status: 'ok' });
    const head = await ops(port, '/healthz', 'HEAD');
    assert.equal(head.status, 200);
    assert.equal(head.body, '');
  });

  it('answers /readyz 200 listing each check: the store, Redis when configured, the alert evaluator and the health prober', async () => {
    const res = await ops(port, '/readyz');
    assert.equal(res.status, 200, res.body);
    assert.deepEqual(JSON.parse(res.body), {
      status: 'ready',
      checks: { store: true, ...(process.env.REDIS_URL ? { redis: true } : {}), alert_evaluator: true, health_prober: true },
    });
  });

  it('answers unknown paths and other methods with 404 route_not_found in the uniform error body', async () => {
    for (const [method, path] of [
      ['GET', '/'],
      ['GET', '/metrics/x'],
      ['GET', '/v1/endpoints'],
      ['POST', '/metrics'],
      ['PUT', '/readyz'],
      ['DELETE', '/healthz'],
    ]) {
      const res = await ops(port, path, method);
      assert.equal(res.status, 404, `${method} ${path}`);
      assert.deepEqual(JSON.parse(res.body), { error: 'No such route', code: 'route_not_found', detail: `No route ${method} ${path}` });
    }
    assert.equal((await ops(port, '/readyz?verbose=1')).status, 200);
  });

  it('exposes every worker family in Prometheus text, with every job listed before its first pass', async () => {
    const res = await ops(port, '/metrics');
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /^text\/plain/);
    for (const family of FAMILIES) assert.ok(samples(res.body, family).length > 0, `${family} is exposed`);
    const jobs = samples(res.body, 'edge_worker_job_runs_total').map((s) => s.labels.job).sort();
    assert.deepEqual(jobs, ['alert_evaluation', 'credential_use', 'dedicated_port_activation', 'janitor_sweep', 'rate_limit_hit_pruning', 'traffic_retention']);
    assert.deepEqual(Object.keys(t.node.workerJobs!).sort(), jobs);
    // The edge's and the control API's own series stay on their ports.
    assert.equal(samples(res.body, 'edge_tunnels').length, 0);
    assert.equal(samples(res.body, 'edge_control_requests_total').length, 0);
  });

  it('counts a job pass by its label, with its duration and the time it went through', async () => {
    const before = await scrape();
    const runs = sample(before, 'edge_worker_job_runs_total', { job: 'janitor_sweep' })!;
    const timed = sample(before, 'edge_worker_job_duration_seconds_count', { job: 'janitor_sweep' }) ?? 0;
    await t.node.workerJobs!.janitor_sweep.sweep();
    const text = await scrape();
    assert.equal(sample(text, 'edge_worker_job_runs_total', { job: 'janitor_sweep' }), runs + 1);
    assert.equal(sample(text, 'edge_worker_job_failures_total', { job: 'janitor_sweep' }), sample(before, 'edge_worker_job_failures_total', { job: 'janitor_sweep' }));
    assert.equal(sample(text, 'edge_worker_job_duration_seconds_count', { job: 'janitor_sweep' }), timed + 1);
    assert.ok(sample(text, 'edge_worker_job_last_success_timestamp_seconds', { job: 'janitor_sweep' })! > 0);
  });

  it('counts an alert evaluation by outcome and its webhook notification by channel and outcome', async () => {
    const endpoint = await createEndpoint();
    // No request in the window: "requests < 1" fires on the first evaluation and notifies the receiver.
    await expectBody(
      201,
      t.api('POST', '/v1/traffic/alerts', {
        key: owner.api_key,
        body: { name: 'Silence', endpoint_id: endpoint.uuid, metric: 'requests', comparison: 'lt', threshold: 1, window_seconds: 300, channels: [{ type: 'webhook', url: receiver.url }] },
      }),
    );
    const before = await scrape();
    await t.node.workerJobs!.alert_evaluation.sweep();
    const text = await scrape();
    assert.equal(receiver.deliveries.length, 1);
    assert.equal(sample(text, 'edge_worker_alert_evaluations_total', { outcome: 'firing' }), sample(before, 'edge_worker_alert_evaluations_total', { outcome: 'firing' })! + 1);
    assert.equal(
      sample(text, 'edge_worker_alert_notifications_total', { channel: 'webhook', outcome: 'delivered' }),
      sample(before, 'edge_worker_alert_notifications_total', { channel: 'webhook', outcome: 'delivered' })! + 1,
    );
    assert.equal(sample(text, 'edge_worker_alert_notifications_total', { channel: 'webhook', outcome: 'failed' }), 0);
    assert.equal(sample(text, 'edge_worker_job_runs_total', { job: 'alert_evaluation' }), sample(before, 'edge_worker_job_runs_total', { job: 'alert_evaluation' })! + 1);

    // Judged again with nothing changed: the rule stays firing and nothing is sent.
    await t.node.workerJobs!.alert_evaluation.sweep();
    const again = await scrape();
    assert.equal(sample(again, 'edge_worker_alert_evaluations_total', { outcome: 'unchanged' }), sample(text, 'edge_worker_alert_evaluations_total', { outcome: 'unchanged' })! + 1);
    assert.equal(receiver.deliveries.length, 1);
  });

  it('counts a health probe by its verdict', async () => {
    const endpoint = await createEndpoint();
    await expectBody(200, t.api('PUT', `/v1/endpoints/${endpoint.uuid}/health-check`, { key: owner.api_key, body: { enabled: true, path: '/health' } }));
    await edgeCaughtUp(t);
    const prober = t.node.healthProber!;
    const before = sample(await scrape(), 'edge_worker_health_probes_total', { verdict: 'unhealthy' })!;
    // No agent serves the endpoint: the edge answers 502 no_agent, an unhealthy verdict.
    await eventually(async () => {
      await prober.pass();
      await prober.idle();
      return sample(await scrape(), 'edge_worker_health_probes_total', { verdict: 'unhealthy' })! > before ? true : undefined;
    });
    const text = await scrape();
    assert.equal(sample(text, 'edge_worker_health_probes_total', { verdict: 'healthy' }), 0);
  });

  it("counts a traffic-record batch the store keeps refusing as dead-lettered, and the records in it; others are written", async () => {
    const endpoint = await createEndpoint();
    await edgeCaughtUp(t);
    const before = await scrape();
    const written = sample(before, 'edge_worker_record_batches_written_total')!;
    assert.equal(sample(before, 'edge_worker_record_batches_dead_lettered_total'), 0);
    // A real refusal by the store for this endpoint's usage, as a constraint a record breaks would give.
    await t.node.db!.query(`ALTER TABLE endpoint_traffic_minutely ADD CONSTRAINT test_poison CHECK (endpoint_uuid <> '${endpoint.uuid}')`);
    try {
      assert.equal((await visit(t.node.edge!.httpPort, endpoint.hostname, '/')).status, 502);
      // The edge sends usage every couple of seconds; the worker retries the batch a few times, then gives it up.
      const text = await eventually(async () => {
        const text = await scrape();
        return sample(text, 'edge_worker_record_batches_dead_lettered_total')! >= 1 ? text : undefined;
      }, 30_000);
      assert.ok(sample(text, 'edge_worker_records_dead_lettered_total')! >= 1);
    } finally {
      await t.node.db!.query('ALTER TABLE endpoint_traffic_minutely DROP CONSTRAINT test_poison');
    }
    // Traffic keeps being written after it.
    assert.equal((await visit(t.node.edge!.httpPort, endpoint.hostname, '/')).status, 502);
    await eventually(async () => (sample(await scrape(), 'edge_worker_record_batches_written_total')! > written ? true : undefined), 30_000);
  });

  it('reports the traffic-record backlog by state (the Redis stream with REDIS_URL, else the in-process queue)', async () => {
    const text = await scrape();
    const queued = sample(text, 'edge_worker_record_backlog_batches', { state: 'queued' });
    const pending = sample(text, 'edge_worker_record_backlog_batches', { state: 'pending' });
    assert.ok(queued !== undefined && queued >= 0, `queued ${queued}`);
    assert.ok(pending !== undefined && pending >= 0, `pending ${pending}`);
  });

  it('passes promtool check metrics on the worker, edge and control ports', { skip: existsSync(PROMTOOL) ? false : `${PROMTOOL} is not installed (Debian package prometheus)` }, async () => {
    const expositions = {
      worker: await scrape(),
      edge: (await ops(t.node.edge!.opsPort, '/metrics')).body,
      control: await (await fetch(`${t.controlUrl}/metrics`)).text(),
    };
    for (const [port, text] of Object.entries(expositions)) {
      assert.ok(text.length > 0, `${port} exposition`);
      assert.equal(await promtoolProblems(text), '', `promtool on the ${port} port`);
    }
  });

  it('exposes every metric the Grafana dashboard (docs/grafana/edge-platform.json) queries, on one of the three ports', async () => {
    const dashboard = JSON.parse(await readFile(join(import.meta.dirname, '..', '..', 'docs', 'grafana', 'edge-platform.json'), 'utf8')) as {
      panels: Array<{ targets?: Array<{ expr: string }> }>;
    };
    const queried = new Set<string>();
    for (const panel of dashboard.panels) {
      for (const target of panel.targets ?? []) {
        for (const [name] of target.expr.matchAll(/\bedge_[a-z_]+\b/g)) queried.add(name.replace(/_(bucket|sum|count)$/, ''));
      }
    }
    assert.ok(queried.size >= 20, `the dashboard queries ${queried.size} metrics`);
    const expositions = [await scrape(), (await ops(t.node.edge!.opsPort, '/metrics')).body, await (await fetch(`${t.controlUrl}/metrics`)).text()].join('\n');
    const exposed = new Set([...expositions.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]));
    assert.deepEqual([...queried].filter((name) => !exposed.has(name)), [], 'queried by the dashboard but exposed nowhere');
  });

  // Last: the node's store stays closed.
  it('answers /readyz 503 naming the store once the store is closed; /healthz stays 200', async () => {
    await t.node.db!.close();
    const res = await ops(port, '/readyz');
    assert.equal(res.status, 503);
    const body = JSON.parse(res.body);
    assert.equal(body.status, 'not_ready');
    assert.equal(body.checks.store, false);
    assert.equal(body.checks.alert_evaluator, true);
    assert.equal((await ops(port, '/healthz')).status, 200);
  });
});

describe('worker ops port on a worker-only node whose Redis is unreachable', () => {
  let node: NodeHandle;
  let dataDir: string;

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'worker-ops-'));
    await copyPgliteTemplate(join(dataDir, 'pglite'));
    const config = loadConfig({
      EDGE_ROLE: 'worker',
      EDGE_SECRET_KEY: randomBytes(24).toString('hex'),
      EDGE_DATA_DIR: dataDir,
      EDGE_NODE_ID: `worker-ops-${randomBytes(3).toString('hex')}`,
      EDGE_LOG_LEVEL: process.env.EDGE_TEST_LOG_LEVEL ?? 'silent',
      REDIS_URL: `redis://127.0.0.1:${await freeTcpPort()}`,
      EDGE_REDIS_PREFIX: `test:${randomBytes(6).toString('hex')}:`,
      WORKER_OPS_PORT: '0',
      // The janitor runs only when the test says so.
      EDGE_JANITOR_INTERVAL_MS: '3600000',
    });
    node = await startNode(config, createLogger(config.logLevel));
  });
  after(async () => {
    await node?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('answers /readyz 503 naming redis, the store answering; no prober runs without EDGE_PROBE_EDGE_URL', async () => {
    assert.equal(node.control, undefined);
    assert.equal(node.edge, undefined);
    const port = node.workerOpsPort!;
    assert.equal((await ops(port, '/healthz')).status, 200);
    const res = await ops(port, '/readyz');
    assert.equal(res.status, 503);
    assert.deepEqual(JSON.parse(res.body), { status: 'not_ready', checks: { store: true, redis: false, alert_evaluator: true } });
  });

  it('still serves /metrics, without a backlog it cannot read; a job failing on Redis counts as failed', async () => {
    const port = node.workerOpsPort!;
    // The janitor reads presence from Redis: the pass fails and is counted so.
    await node.workerJobs!.janitor_sweep.sweep();
    const res = await ops(port, '/metrics');
    assert.equal(res.status, 200);
    assert.equal(sample(res.body, 'edge_worker_job_failures_total', { job: 'janitor_sweep' }), 1);
    assert.equal(sample(res.body, 'edge_worker_job_runs_total', { job: 'janitor_sweep' }), 1);
    assert.equal(sample(res.body, 'edge_worker_job_last_success_timestamp_seconds', { job: 'janitor_sweep' }), 0);
    assert.equal(samples(res.body, 'edge_worker_record_backlog_batches').length, 0);
    assert.equal(sample(res.body, 'edge_worker_record_batches_written_total'), 0);
  });
});

describe('WORKER_OPS_PORT and WORKER_OPS_BIND_HOST', () => {
  it('are off by default, on loopback when set', () => {
    const config = loadConfig({});
    assert.equal(config.worker.opsPort, null);
    assert.equal(config.worker.opsBindHost, '127.0.0.1');
    const set = loadConfig({ WORKER_OPS_PORT: '9091', WORKER_OPS_BIND_HOST: '10.0.0.5' });
    assert.equal(set.worker.opsPort, 9091);
    assert.equal(set.worker.opsBindHost, '10.0.0.5');
    assert.equal(loadConfig({ WORKER_OPS_PORT: '0' }).worker.opsPort, 0);
  });

  it('refuses a bad value with a message naming the setting and the variable', () => {
    for (const [env, message] of [
      [{ WORKER_OPS_PORT: '65536' }, /invalid setting "worker\.opsPort" \(from WORKER_OPS_PORT\)/],
      [{ WORKER_OPS_PORT: '-1' }, /invalid setting "worker\.opsPort" \(from WORKER_OPS_PORT\)/],
      [{ WORKER_OPS_PORT: '90x' }, /WORKER_OPS_PORT must be an integer, got "90x"/],
    ] as const) {
      assert.throws(() => loadConfig(env), message, JSON.stringify(env));
    }
  });
});
