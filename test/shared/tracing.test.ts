// Tracing setup from the standard OTEL_* variables (src/shared/tracing.ts): off without an endpoint or when disabled,
// bad values refused with the variable named, the resource and sampler as configured, and a worker job's span per pass.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTracing, TracingConfigError, traceIdOf, tracesUrl } from '../../src/shared/tracing.ts';
import { PeriodicJob } from '../../src/worker/periodic.ts';
import { capturedLogger } from '../helpers/logger.ts';
import { createLogger } from '../../src/shared/log.ts';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.ts';

describe('tracing setup', () => {
  let receiver: OtlpReceiver;
  before(async () => (receiver = await startOtlpReceiver()));
  after(() => receiver?.close());

  it('creates nothing without an endpoint, or with OTEL_SDK_DISABLED=true', () => {
    assert.equal(startTracing('edge', {}), null);
    assert.equal(startTracing('edge', { OTEL_EXPORTER_OTLP_ENDPOINT: '' }), null);
    assert.equal(startTracing('edge', { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SDK_DISABLED: 'true' }), null);
  });

  it('resolves the traces URL: the signal\'s own as is, else the base plus /v1/traces', () => {
    assert.equal(tracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }), 'http://collector:4318/v1/traces');
    assert.equal(tracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://b/traces' }), 'https://b/traces');
  });

  it('refuses bad values with the variable named', () => {
    const bad: [Record<string, string>, RegExp][] = [
      [{ OTEL_EXPORTER_OTLP_ENDPOINT: "not a url" }, /^OTEL_EXPORTER_OTLP_ENDPOINT: "not a url" is not a URL$/],
      [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'ftp://x/v1/traces' }, /^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "ftp:\/\/x\/v1\/traces" is not an http\(s\) URL$/],
      [{ OTEL_TRACES_SAMPLER: 'sometimes' }, /^OTEL_TRACES_SAMPLER: /],
      [{ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '1.5' }, /^OTEL_TRACES_SAMPLER_ARG: /],
      [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: 'half' }, /^OTEL_TRACES_SAMPLER_ARG: /],
      [{ OTEL_RESOURCE_ATTRIBUTES: 'team=edge,oops' }, /^OTEL_RESOURCE_ATTRIBUTES: "oops" is not key=value/],
      [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, /^OTEL_EXPORTER_OTLP_PROTOCOL: /],
    ];
    for (const [env, message] of bad) {
      assert.throws(() => startTracing('edge', { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, ...env }), (err: Error) => err instanceof TracingConfigError && message.test(err.message), JSON.stringify(env));
    }
  });

  it('exports with the resource configured: service name, role, OTEL_RESOURCE_ATTRIBUTES and the caller\'s attributes', async () => {
    const tracing = startTracing('worker', { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=test,team=a%20b' }, { 'edge.node_id': 'n1' })!;
    tracing.tracer.startSpan('probe-span').end();
    await tracing.shutdown();
    const span = await receiver.waitFor((s) => s.name === 'probe-span');
    assert.deepEqual(
      { name: span.resource['service.name'], role: span.resource['edge.role'], env: span.resource['deployment.environment'], team: span.resource.team, node: span.resource['edge.node_id'] },
      { name: 'edge-worker', role: 'worker', env: 'test', team: 'a b', node: 'n1' },
    );
  });

  it('samples as OTEL_TRACES_SAMPLER says: always_off records nothing', async () => {
    const tracing = startTracing('edge', { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_TRACES_SAMPLER: 'always_off' })!;
    const span = tracing.tracer.startSpan('never-exported');
    assert.equal(span.isRecording(), false);
    span.end();
    await tracing.shutdown();
    assert.ok(!receiver.spans.some((s) => s.name === 'never-exported'));
  });

  it('reads a trace id out of a traceparent, nothing out of a malformed one', () => {
    assert.equal(traceIdOf('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'), '0af7651916cd43dd8448eb211c80319c');
    assert.equal(traceIdOf(`00-${'0'.repeat(32)}-b7ad6b7169203331-01`), undefined);
    assert.equal(traceIdOf('garbage'), undefined);
    assert.equal(traceIdOf(undefined), undefined);
  });

  it('a worker job gets a span per pass, named by its label, failed passes marked', async () => {
    const tracing = startTracing('worker', { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url })!;
    let fail = false;
    const job = new PeriodicJob('Traced sweep', 3_600_000, createLogger('silent'), async () => {
      if (fail) throw new Error('store refused');
      return null;
    }).trace(tracing.tracer);
    await job.sweep();
    fail = true;
    await job.sweep();
    await tracing.forceFlush();
    // forceFlush resolves once the receiver has answered the export.
    const passes = receiver.spans.filter((s) => s.name === 'traced_sweep');
    assert.equal(passes.length, 2);
    assert.deepEqual(passes.map((s) => s.status), [0, 2], 'the failed pass is marked ERROR');
    assert.equal(passes[0].attributes['edge.job'], 'traced_sweep');
    assert.notEqual(passes[0].traceId, passes[1].traceId, 'each pass is its own trace');
    await tracing.shutdown();
  });

  it('a traced job\'s pass line and its skipped warning name the pass\'s trace', async () => {
    const tracing = startTracing('worker', { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url })!;
    const { logger, lines } = capturedLogger('info');
    let n = 0;
    const job = new PeriodicJob('Logged sweep', 3_600_000, logger, async () => {
      if (++n === 2) throw new Error('store refused');
      return { msg: 'pass done', fields: { items: 1 } };
    }).trace(tracing.tracer);
    await job.sweep();
    await job.sweep();
    await tracing.forceFlush();
    const [first, second] = receiver.spans.filter((s) => s.name === 'logged_sweep');
    const traceOf = (msg: string) => lines.filter((l) => l.msg === msg).map((l) => l.trace_id);
    assert.deepEqual(traceOf('pass done'), [first.traceId]);
    assert.deepEqual(traceOf('Logged sweep skipped'), [second.traceId]);
    await tracing.shutdown();
  });
});
