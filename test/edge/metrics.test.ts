// The edge's metrics without a server: figures read at scrape time from the capture recorder, feed progress from a
// real in-process feed and subscriber, bounded per-endpoint series, and the counters only metrics keep.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TrafficRecorder, type CapturedExchange } from '../../src/edge/capture.ts';
import { EdgeMetrics, FeedProgress } from '../../src/edge/metrics.ts';
import { MemoryFeed } from '../../src/shared/feed/memory.ts';
import { FeedMirror, FeedSubscriber, type FeedConsumer } from '../../src/shared/feed/subscriber.ts';
import type { FeedChange, FeedSnapshot } from '../../src/shared/feed/types.ts';
import { capturedExchange } from '../helpers/captured-exchange.ts';
import { waitForVersion } from '../helpers/feed.ts';
import { sample, samples } from '../helpers/metrics.ts';

function exchange(endpoint: string, status: number, extra: Partial<CapturedExchange> = {}): CapturedExchange {
  return capturedExchange({ endpoint, at: new Date().toISOString(), host: `${endpoint}.edge.localhost`, status, client_ip: '127.0.0.1', secure: false, ...extra });
}

function metricsOf(traffic: TrafficRecorder, options: { endpointLimit?: number; tunnels?: () => number; feed?: FeedProgress } = {}): EdgeMetrics {
  return new EdgeMetrics({ traffic, tunnels: options.tunnels ?? (() => 0), feed: options.feed ?? new FeedProgress(), endpointLimit: options.endpointLimit ?? 100 });
}

describe('EdgeMetrics', () => {
  it('exports requests by endpoint and class, node totals, and edge errors from the recorder at scrape time', async () => {
    const traffic = new TrafficRecorder();
    const metrics = metricsOf(traffic);
    traffic.record(exchange('e1', 200), false);
    traffic.record(exchange('e1', 204), false);
    traffic.record(exchange('e1', 502, { edge_error: 'no_agent' }), false);
    traffic.record(exchange('e2', 200, { completed: false }), false);
    traffic.refused(404, 'endpoint_not_found');
    const text = await metrics.text();
    assert.equal(sample(text, 'edge_requests_total', { endpoint: 'e1', class: '2xx' }), 2);
    assert.equal(sample(text, 'edge_requests_total', { endpoint: 'e1', class: '5xx' }), 1);
    assert.equal(sample(text, 'edge_requests_total', { endpoint: 'e2', class: 'aborted' }), 1);
    // A refusal before any endpoint was known has no endpoint series; it counts for the node and as an error.
    assert.equal(samples(text, 'edge_requests_total').length, 3);
    assert.equal(sample(text, 'edge_node_requests_total', { class: '2xx' }), 2);
    assert.equal(sample(text, 'edge_node_requests_total', { class: '4xx' }), 1);
    assert.equal(sample(text, 'edge_node_requests_total', { class: '5xx' }), 1);
    assert.equal(sample(text, 'edge_node_requests_total', { class: 'aborted' }), 1);
    assert.equal(sample(text, 'edge_errors_total', { code: 'no_agent' }), 1);
    assert.equal(sample(text, 'edge_errors_total', { code: 'endpoint_not_found' }), 1);
    // Scrapes read, never consume: a second one says the same.
    assert.equal(sample(await metrics.text(), 'edge_requests_total', { endpoint: 'e1', class: '2xx' }), 2);
  });

  it('keeps per-endpoint series for the most recently active endpoints only, while node totals count every request', async () => {
    const traffic = new TrafficRecorder();
    const metrics = metricsOf(traffic, { endpointLimit: 2 });
    for (const e of ['a', 'b', 'c', 'a']) traffic.record(exchange(e, 200), false);
    const text = await metrics.text();
    assert.deepEqual(samples(text, 'edge_requests_total').map((s) => s.labels.endpoint).sort(), ['a', 'c']);
    assert.equal(sample(text, 'edge_requests_total', { endpoint: 'a', class: '2xx' }), 2);
    assert.equal(sample(text, 'edge_node_requests_total', { class: '2xx' }), 4);

    const none = metricsOf(traffic, { endpointLimit: 0 });
    none.authOutcome('a', 'basic', 'ok');
    const totalsOnly = await none.text();
    assert.equal(samples(totalsOnly, 'edge_requests_total').length, 0);
    assert.equal(samples(totalsOnly, 'edge_auth_outcomes_total').length, 0);
    assert.equal(sample(totalsOnly, 'edge_node_requests_total', { class: '2xx' }), 4);
  });

  it('refuses an endpoint limit that is not a non-negative integer', () => {
    for (const endpointLimit of [-1, 1.5, Number.NaN]) {
      assert.throws(() => metricsOf(new TrafficRecorder(), { endpointLimit }), RangeError);
    }
  });

  it('counts slow-client closes by kind, both kinds present from the start', async () => {
    const metrics = metricsOf(new TrafficRecorder());
    assert.equal(sample(await metrics.text(), 'edge_slow_client_closes_total', { kind: 'headers' }), 0);
    metrics.slowClientClosed('body');
    metrics.slowClientClosed('body');
    metrics.slowClientClosed('headers');
    const text = await metrics.text();
    assert.equal(sample(text, 'edge_slow_client_closes_total', { kind: 'body' }), 2);
    assert.equal(sample(text, 'edge_slow_client_closes_total', { kind: 'headers' }), 1);
  });

  it('counts auth outcomes per endpoint and stage, evicting the least recently active endpoint past the limit', async () => {
    const metrics = metricsOf(new TrafficRecorder(), { endpointLimit: 2 });
    metrics.authOutcome('a', 'basic', 'ok');
    metrics.authOutcome('a', 'basic', 'ok');
    metrics.authOutcome('a', 'basic', 'invalid');
    metrics.authOutcome('b', 'jwt', 'missing');
    metrics.authOutcome('a', 'jwt', 'unavailable');
    metrics.authOutcome('c', 'basic', 'ok'); // b is the least recently active now
    const text = await metrics.text();
    assert.equal(sample(text, 'edge_auth_outcomes_total', { endpoint: 'a', stage: 'basic', outcome: 'ok' }), 2);
    assert.equal(sample(text, 'edge_auth_outcomes_total', { endpoint: 'a', stage: 'basic', outcome: 'invalid' }), 1);
    assert.equal(sample(text, 'edge_auth_outcomes_total', { endpoint: 'a', stage: 'jwt', outcome: 'unavailable' }), 1);
    assert.equal(sample(text, 'edge_auth_outcomes_total', { endpoint: 'c', stage: 'basic', outcome: 'ok' }), 1);
    assert.equal(sample(text, 'edge_auth_outcomes_total', { endpoint: 'b', stage: 'jwt', outcome: 'missing' }), undefined);
  });

  it('reads live tunnels at scrape time', async () => {
    let live = 3;
    const metrics = metricsOf(new TrafficRecorder(), { tunnels: () => live });
    assert.equal(sample(await metrics.text(), 'edge_tunnels'), 3);
    live = 0;
    assert.equal(sample(await metrics.text(), 'edge_tunnels'), 0);
  });

  it('carries the data-plane prefix on process metrics, apart from the control API', async () => {
    const text = await metricsOf(new TrafficRecorder()).text();
    assert.ok(samples(text, 'edge_data_process_cpu_seconds_total').length > 0);
    assert.equal(samples(text, 'edge_control_process_cpu_seconds_total').length, 0);
  });
});

/** A consumer that holds each change until the test lets it through, so the edge can be caught behind the feed. */
class GatedConsumer implements FeedConsumer {
  readonly mirror = new FeedMirror();
  private gate: Promise<void> = Promise.resolve();
  private open: () => void = () => {};

  close(): void {
    this.gate = new Promise((resolve) => (this.open = resolve));
  }

  release(): void {
    this.open();
    this.gate = Promise.resolve();
  }

  async reset(snapshot: FeedSnapshot): Promise<void> {
    await this.gate;
    await this.mirror.reset(snapshot);
  }

  async apply(change: FeedChange): Promise<void> {
    await this.gate;
    this.mirror.apply(change);
  }
}

describe('FeedProgress', () => {
  it('reports the applied version, the head seen at the source and the lag between them, through a real subscriber', async () => {
    let now = 1_000_000;
    const feed = new FeedProgress(() => now);
    const source = new MemoryFeed();
    await source.reset({ version: 1, entries: [{ topic: 't', key: 'k', version: 1, data: 1 }] });
    const consumer = new GatedConsumer();
    const subscriber = new FeedSubscriber(feed.observe(source), consumer, { checkIntervalMs: 60_000 });
    feed.follow(subscriber);
    const metrics = metricsOf(new TrafficRecorder(), { feed });
    try {
      assert.equal(sample(await metrics.text(), 'edge_config_version'), 0);
      await subscriber.start();
      let text = await metrics.text();
      assert.equal(sample(text, 'edge_config_version'), 1);
      assert.equal(sample(text, 'edge_feed_head_version'), 1);
      assert.equal(sample(text, 'edge_feed_lag_versions'), 0);
      assert.equal(sample(text, 'edge_feed_lag_seconds'), 0);
      assert.equal(sample(text, 'edge_config_last_applied_timestamp_seconds'), 1000);

      // Changes 2 and 3 are published while the consumer is held: the edge knows of 3 and serves 1.
      consumer.close();
      const seen = new Promise<void>((resolve) => source.subscribe({ onChange: (c) => c.version === 3 && resolve(), onReset() {}, onReconnect() {} }));
      assert.equal(await source.publish({ version: 2, topic: 't', key: 'k', data: 2 }), true);
      assert.equal(await source.publish({ version: 3, topic: 't', key: 'k', data: 3 }), true);
      await seen;
      now += 4_500;
      text = await metrics.text();
      assert.equal(sample(text, 'edge_feed_head_version'), 3);
      assert.equal(sample(text, 'edge_config_version'), 1);
      assert.equal(sample(text, 'edge_feed_lag_versions'), 2);
      assert.equal(sample(text, 'edge_feed_lag_seconds'), 4.5);

      consumer.release();
      await waitForVersion(subscriber, 3);
      text = await metrics.text();
      assert.equal(sample(text, 'edge_config_version'), 3);
      assert.equal(sample(text, 'edge_feed_lag_versions'), 0);
      assert.equal(sample(text, 'edge_feed_lag_seconds'), 0);
      assert.equal(sample(text, 'edge_config_last_applied_timestamp_seconds'), 1004.5);
    } finally {
      await subscriber.stop();
      await source.close();
    }
  });

  it('starts from a config restored from disk without calling it an applied change', async () => {
    const feed = new FeedProgress(() => 5_000);
    const subscriber = new FeedSubscriber(feed.observe(new MemoryFeed()), new FeedMirror(), { checkIntervalMs: 60_000, version: 7 });
    feed.follow(subscriber);
    assert.equal(feed.appliedVersion, 7);
    assert.equal(feed.lastAppliedSeconds, 0);
    assert.equal(feed.headVersion, null);
    assert.equal(feed.lagVersions, 0);
  });

  it('takes a head reading over an older hint, so a source restored to an older history leaves no lag that cannot close', () => {
    let now = 0;
    const feed = new FeedProgress(() => now);
    feed.applied(5, true);
    feed.sawHead(9, false);
    assert.equal(feed.lagVersions, 4);
    now = 2_000;
    assert.equal(feed.lagSeconds, 2);
    // A repeated or late hint never lowers what was seen...
    feed.sawHead(6, false);
    assert.equal(feed.headVersion, 9);
    // ...but the source's own head reading replaces it.
    feed.sawHead(5, true);
    assert.equal(feed.lagVersions, 0);
    assert.equal(feed.lagSeconds, 0);
  });
});
