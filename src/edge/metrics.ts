// The edge's own Prometheus metrics, served on its internal ops port (src/edge/ops.ts), never the public listener.
// Values are read from what the edge already keeps at scrape time (collect()), so a request costs no metric call.
import { Counter, Gauge, Registry } from 'prom-client';
import { collectProcessMetrics } from '../shared/process-metrics.ts';
import type { FeedSubscriber } from '../shared/feed/subscriber.ts';
import type { FeedListener, FeedSource } from '../shared/feed/transport.ts';
import type { RecordSinkStats } from '../shared/records/types.ts';
import type { TrafficRecorder } from './capture.ts';
import type { TrafficShipperStats } from './traffic-shipper.ts';
import { RATE_LIMIT_OUTCOMES, type RateLimitOutcome } from './rate-limit/deps.ts';

/** What a visitor-auth stage concluded about a request (the metric's `outcome` label). */
export type AuthOutcome = 'ok' | 'missing' | 'invalid' | 'unavailable';

/** Why the edge closed a slow client: its request head, or its request body, stalled past the limit. */
export type SlowClientKind = 'headers' | 'body';

export interface EdgeMetricsOptions {
  /** Exchanges counted by the capture hook: per-endpoint and node-wide counters, and refusals. */
  traffic: TrafficRecorder;
  /** Live agent tunnels on this edge. */
  tunnels(): number;
  /** Where the config feed stands (the subscriber's source wrapped by `feed.observe`, and `feed.follow`ed). */
  feed: FeedProgress;
  /** How many of the most recently active endpoints get per-endpoint series; 0 = node-wide totals only. */
  endpointLimit: number;
  /** The traffic-record sink (src/shared/records): records sent, buffered and dropped. Absent: no such series. */
  records?: { stats(): RecordSinkStats };
  /** The traffic shipper (src/edge/traffic-shipper.ts): captured exchanges shipped, queued and dropped. Absent: no such series. */
  capture?: { stats(): TrafficShipperStats };
  /** The relay (src/edge/relay): streams sent to peers and failed, streams taken for local agents. Absent: no such series. */
  relay?: () => { sent: number; failed: number; accepted: number; refused: number };
}

/**
 * Where the config feed stands for this edge: the newest version the feed source has shown (its head, a change
 * hint, a replayed change or a snapshot) against the version applied, and since when the edge has been behind.
 */
export class FeedProgress {
  private head: number | null = null;
  private applied_ = 0;
  private appliedAt = 0;
  /** When the edge first knew of a version newer than it serves (ms since the epoch); null while caught up. */
  private behindSince: number | null = null;

  constructor(private readonly now: () => number = Date.now) {}

  /**
   * A reading of the source's head (head(), a snapshot) replaces the last one, so a source restored to an older
   * history does not leave a lag that can never close; a hint or a replayed change only raises it.
   */
  sawHead(version: number, reading: boolean): void {
    this.head = reading || this.head === null ? version : Math.max(this.head, version);
    this.update();
  }

  /** The edge serves `version`; `live` when it was applied now, not restored from disk at start. */
  applied(version: number, live: boolean): void {
    this.applied_ = version;
    if (live) this.appliedAt = this.now();
    this.update();
  }

  get appliedVersion(): number {
    return this.applied_;
  }

  /** The newest version seen at the source; null until the source has answered. */
  get headVersion(): number | null {
    return this.head;
  }

  /** Versions the source holds that this edge does not serve yet. */
  get lagVersions(): number {
    return this.head === null ? 0 : Math.max(0, this.head - this.applied_);
  }

  /** How long the edge has known of a newer version than it serves, in seconds; 0 while caught up. */
  get lagSeconds(): number {
    return this.behindSince === null ? 0 : (this.now() - this.behindSince) / 1000;
  }

  /** When a change was last applied on this run, in seconds since the epoch; 0 before the first. */
  get lastAppliedSeconds(): number {
    return this.appliedAt / 1000;
  }

  private update(): void {
    if (this.lagVersions === 0) this.behindSince = null;
    else this.behindSince ??= this.now();
  }

  /**
   * Wraps the edge's feed source so every version it reports is noted; the subscriber sees the same source. The
   * subscriber keeps the head it compares to itself, so this is where an outside reader learns it.
   */
  observe(source: FeedSource): FeedSource {
    return {
      subscribe: (listener: FeedListener) =>
        source.subscribe({
          onChange: (change) => {
            this.sawHead(change.version, false);
            listener.onChange(change);
          },
          onReset: (version) => {
            this.sawHead(version, false);
            listener.onReset(version);
          },
          onReconnect: () => listener.onReconnect(),
        }),
      head: async () => {
        const head = await source.head();
        if (head !== null) this.sawHead(head, true);
        return head;
      },
      readSince: async (version) => {
        const changes = await source.readSince(version);
        if (changes !== null && changes.length > 0) this.sawHead(changes[changes.length - 1].version, false);
        return changes;
      },
      readSnapshot: async () => {
        const snapshot = await source.readSnapshot();
        if (snapshot !== null) this.sawHead(snapshot.version, true);
        return snapshot;
      },
      close: () => source.close(),
    };
  }

  /** Follows what `subscriber` applies, starting from what it holds (a config restored from disk). */
  follow(subscriber: FeedSubscriber): void {
    this.applied(subscriber.version, false);
    subscriber.on('applied', (version) => this.applied(version, true));
  }
}

/** Counts by key, for metrics whose values live only here (auth outcomes). */
type Tally = Record<string, number>;

/**
 * The edge's metric registry. Request, error and tunnel figures are read at scrape time from the capture hook's
 * recorder and the tunnel registry; the few things only metrics need (auth outcomes, slow-client closes) are
 * plain counters here. Default process metrics carry the `edge_data_` prefix, apart from the control API's
 * `edge_control_` ones when both roles share a process.
 */
export class EdgeMetrics {
  readonly registry = new Registry();
  private readonly endpointLimit: number;
  /** endpoint -> stage -> outcome -> count, least recently active first; bounded by endpointLimit. */
  private readonly auth = new Map<string, Map<string, Tally>>();
  private readonly slowCloses: Counter<'kind'>;
  /** endpoint -> outcome -> count, least recently active first; bounded by endpointLimit. */
  private readonly rateLimits = new Map<string, Tally>();
  /** Node-wide rate-limit outcomes, every endpoint included. */
  private readonly rateLimitTotals: Record<RateLimitOutcome, number> = { allowed: 0, blocked: 0, throttled: 0, unavailable: 0, fail_open: 0 };

  constructor(options: EdgeMetricsOptions) {
    const { traffic, tunnels, feed, endpointLimit, records, capture, relay } = options;
    if (!Number.isInteger(endpointLimit) || endpointLimit < 0) throw new RangeError(`EdgeMetrics endpointLimit must be a non-negative integer, got ${endpointLimit}`);
    this.endpointLimit = endpointLimit;
    const registers = [this.registry];
    collectProcessMetrics(this.registry, 'edge_data_');
    const auth = this.auth;

    new Counter({
      name: 'edge_requests_total',
      help: `Exchanges by endpoint and status class (aborted: not finished), for the ${endpointLimit} most recently active endpoints`,
      labelNames: ['endpoint', 'class'],
      registers,
      collect() {
        this.reset();
        for (const [endpoint, counters] of traffic.recentlyActive(endpointLimit)) {
          for (const [cls, n] of Object.entries(counters.by_class)) this.inc({ endpoint, class: cls }, n);
        }
      },
    });
    if (relay) {
      new Counter({
        name: 'edge_relay_streams_total',
        help: 'Relay streams: sent to other edges (out), failed before an answer (out_failed), taken for an agent here (in), refused here (in_refused)',
        labelNames: ['direction'],
        registers,
        collect() {
          this.reset();
          const c = relay();
          this.inc({ direction: 'out' }, c.sent);
          this.inc({ direction: 'out_failed' }, c.failed);
          this.inc({ direction: 'in' }, c.accepted);
          this.inc({ direction: 'in_refused' }, c.refused);
        },
      });
    }
    new Counter({
      name: 'edge_node_requests_total',
      help: 'Every request this edge answered, by status class, endpoint known or not',
      labelNames: ['class'],
      registers,
      collect() {
        this.reset();
        for (const [cls, n] of Object.entries(traffic.totals().by_class)) this.inc({ class: cls }, n);
      },
    });
    new Counter({
      name: 'edge_errors_total',
      help: 'Answers the edge gave itself, by error code (docs/errors.md), endpoint known or not',
      labelNames: ['code'],
      registers,
      collect() {
        this.reset();
        for (const [code, n] of Object.entries(traffic.totals().edge_errors)) this.inc({ code }, n);
      },
    });
    new Counter({
      name: 'edge_auth_outcomes_total',
      help: `Visitor authentication outcomes by endpoint and stage, for the ${endpointLimit} most recently active endpoints`,
      labelNames: ['endpoint', 'stage', 'outcome'],
      registers,
      collect() {
        this.reset();
        for (const [endpoint, stages] of auth) {
          for (const [stage, outcomes] of stages) {
            for (const [outcome, n] of Object.entries(outcomes)) this.inc({ endpoint, stage, outcome }, n);
          }
        }
      },
    });
    const rateLimits = this.rateLimits;
    const rateLimitTotals = this.rateLimitTotals;
    new Counter({
      name: 'edge_rate_limit_outcomes_total',
      help: `Requests firewall rate-limit rules matched, by endpoint and outcome (allowed, blocked, throttled, unavailable, fail_open), for the ${endpointLimit} most recently active endpoints`,
      labelNames: ['endpoint', 'outcome'],
      registers,
      collect() {
        this.reset();
        for (const [endpoint, outcomes] of rateLimits) {
          for (const [outcome, n] of Object.entries(outcomes)) this.inc({ endpoint, outcome }, n);
        }
      },
    });
    new Counter({
      name: 'edge_node_rate_limit_outcomes_total',
      help: 'Requests firewall rate-limit rules matched on this edge, by outcome, every endpoint included',
      labelNames: ['outcome'],
      registers,
      collect() {
        this.reset();
        for (const outcome of RATE_LIMIT_OUTCOMES) this.inc({ outcome }, rateLimitTotals[outcome]);
      },
    });
    if (capture) {
      new Counter({
        name: 'edge_capture_shipped_total',
        help: 'Captured exchanges (endpoints with capture on) this edge sent to the record stream',
        registers,
        collect() {
          this.reset();
          this.inc(capture.stats().shipped);
        },
      });
      new Counter({
        name: 'edge_capture_dropped_total',
        help: 'Captured exchanges dropped because the capture queue was full (the record stream not keeping up)',
        registers,
        collect() {
          this.reset();
          this.inc(capture.stats().dropped);
        },
      });
      new Gauge({
        name: 'edge_capture_queued',
        help: 'Captured exchanges waiting on this edge to be sent',
        registers,
        collect() {
          this.set(capture.stats().queued);
        },
      });
    }
    if (records) {
      new Counter({
        name: 'edge_traffic_records_sent_total',
        help: 'Traffic records (rate-limit hits, captured exchanges, usage) this edge handed to the record stream',
        registers,
        collect() {
          this.reset();
          this.inc(records.stats().sent);
        },
      });
      new Counter({
        name: 'edge_traffic_records_dropped_total',
        help: 'Traffic records dropped, oldest first, because the bounded buffer was full (record stream unreachable) or the stream cap trimmed them',
        registers,
        collect() {
          this.reset();
          this.inc(records.stats().dropped);
        },
      });
      new Gauge({
        name: 'edge_traffic_records_buffered',
        help: 'Traffic records waiting on this edge to be sent to the record stream',
        registers,
        collect() {
          this.set(records.stats().buffered);
        },
      });
    }
    this.slowCloses = new Counter({ name: 'edge_slow_client_closes_total', help: 'Connections closed because the client stalled, by what stalled', labelNames: ['kind'], registers });
    for (const kind of ['headers', 'body'] satisfies SlowClientKind[]) this.slowCloses.inc({ kind }, 0);

    new Gauge({
      name: 'edge_tunnels',
      help: 'Agent tunnels connected to this edge',
      registers,
      collect() {
        this.set(tunnels());
      },
    });
    new Gauge({
      name: 'edge_config_version',
      help: 'The config feed version this edge serves',
      registers,
      collect() {
        this.set(feed.appliedVersion);
      },
    });
    new Gauge({
      name: 'edge_feed_head_version',
      help: 'The newest config version the feed source has shown this edge (0 until it has answered)',
      registers,
      collect() {
        this.set(feed.headVersion ?? 0);
      },
    });
    new Gauge({
      name: 'edge_feed_lag_versions',
      help: 'Config versions the feed source holds that this edge does not serve yet',
      registers,
      collect() {
        this.set(feed.lagVersions);
      },
    });
    new Gauge({
      name: 'edge_feed_lag_seconds',
      help: 'How long this edge has known of a newer config version than it serves (0 while caught up)',
      registers,
      collect() {
        this.set(feed.lagSeconds);
      },
    });
    new Gauge({
      name: 'edge_config_last_applied_timestamp_seconds',
      help: 'When this edge last applied a config change (seconds since the epoch; 0 before the first since start)',
      registers,
      collect() {
        this.set(feed.lastAppliedSeconds);
      },
    });
  }

  /** A connection closed because its client stalled (called by the listeners' slow-client detection). */
  slowClientClosed(kind: SlowClientKind): void {
    this.slowCloses.inc({ kind });
  }

  /**
   * A visitor-auth stage's outcome for one request. Counted here without a metric call (the scrape exports it);
   * only the `endpointLimit` most recently active endpoints keep figures, the least recently active go first.
   */
  authOutcome(endpoint: string, stage: string, outcome: AuthOutcome): void {
    if (this.endpointLimit === 0) return;
    let stages = this.auth.get(endpoint);
    if (stages) {
      // Re-inserting keeps the Map in least-recently-active order for eviction.
      this.auth.delete(endpoint);
    } else {
      stages = new Map();
      if (this.auth.size >= this.endpointLimit) this.auth.delete(this.auth.keys().next().value!);
    }
    this.auth.set(endpoint, stages);
    let outcomes = stages.get(stage);
    if (!outcomes) stages.set(stage, (outcomes = {}));
    outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
  }

  /**
   * What the rate-limit stage did with a request some rule matched (a fail_open is told besides the request's own
   * outcome). Counted here without a metric call, per endpoint for the `endpointLimit` most recently active ones.
   */
  rateLimitOutcome(endpoint: string, outcome: RateLimitOutcome): void {
    this.rateLimitTotals[outcome]++;
    if (this.endpointLimit === 0) return;
    let outcomes = this.rateLimits.get(endpoint);
    if (outcomes) {
      this.rateLimits.delete(endpoint);
    } else {
      outcomes = {};
      if (this.rateLimits.size >= this.endpointLimit) this.rateLimits.delete(this.rateLimits.keys().next().value!);
    }
    this.rateLimits.set(endpoint, outcomes);
    outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
  }

  /** The Prometheus text exposition of every metric. */
  async text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
