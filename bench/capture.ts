// Micro-benchmark of the capture path on the edge (src/edge/capture.ts, src/edge/traffic-shipper.ts): the hook armed
// on a request and fired at its end, the edge's counters, the usage tally and, with capture on, the exchange queued
// and later built into a record and serialised in its batch (as the Redis sink does before XADD; the network write is
// not the edge's CPU). Target: capture on adds under 3 µs per request over capture off; reported, not asserted.
// `npx tsx bench/capture.ts` (a few seconds); `npm run bench` includes it.
import { EventEmitter } from 'node:events';
import type http from 'node:http';
import { pathToFileURL } from 'node:url';
import { Bench } from 'tinybench';
import { TrafficRecorder, captureExchange, type CaptureSink } from '../src/edge/capture.ts';
import type { RequestContext } from '../src/edge/pipeline/stage.ts';
import { TrafficShipper } from '../src/edge/traffic-shipper.ts';
import type { RecordSink, TrafficRecord } from '../src/shared/records/types.ts';
import type { EndpointConfig } from '../src/shared/snapshot.ts';
import { endpointConfig } from '../test/helpers/endpoint-config.ts';
import type { Row } from './proxy.ts';

/** The record sink's CPU without its I/O: each batch serialised as the Redis sink serialises it, then dropped. */
class SerialisingSink implements RecordSink {
  bytes = 0;
  append(records: readonly TrafficRecord[]): void {
    this.bytes += JSON.stringify(records).length;
  }
  async flush(): Promise<void> {}
  stats() {
    return { buffered: 0, dropped: 0, sent: 0 };
  }
  async close(): Promise<void> {}
}

const HEADERS: http.IncomingHttpHeaders = {
  host: 'app.edge.test',
  'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36',
  accept: 'application/json',
  'accept-encoding': 'gzip, br',
  'accept-language': 'en-GB,en;q=0.9',
  authorization: 'Bearer abc.def.ghi',
  cookie: 'sid=0123456789',
  'x-request-id': '7f1c7d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f',
};
const HEAD = 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\ndate: Mon, 01 Jan 2030 00:00:00 GMT\r\nconnection: keep-alive\r\n\r\n';

/** A finished GET as the pipeline sees it: a response that closes after its head and a 2-byte body were written. */
function exchange(endpoint: EndpointConfig): { ctx: RequestContext; end(): void } {
  const socket = { bytesWritten: 0 };
  const req = { headers: HEADERS, socket, push: () => true } as unknown as http.IncomingMessage;
  const res = Object.assign(new EventEmitter(), {
    headersSent: false, statusCode: 200, writableFinished: false, _header: null as string | null,
    write: () => true, end: () => undefined,
  }) as unknown as http.ServerResponse;
  const ctx: RequestContext = {
    req, res, endpoint, method: 'GET', host: endpoint.hostname, authority: endpoint.hostname, path: '/api/v1/items/42',
    query: 'page=2', clientIp: '198.51.100.20', secure: true, upstreamHeaders: {},
  };
  return {
    ctx,
    end() {
      const r = res as unknown as { headersSent: boolean; writableFinished: boolean; _header: string };
      r.headersSent = true;
      r.writableFinished = true;
      r._header = HEAD;
      socket.bytesWritten += HEAD.length + 2;
      res.emit('close');
    },
  };
}

export interface CaptureBenchResult {
  name: string;
  /** Mean ns per request. */
  meanNs: number;
}

export async function benchCapture(): Promise<CaptureBenchResult[]> {
  const sink = new SerialisingSink();
  // Long intervals: batches go when full (the steady state under load); usage is flushed by the bench itself.
  const shipper = new TrafficShipper({ sink, edge: 'bench-edge', region: 'bench', usageIntervalMs: 0, exchangeIntervalMs: 0, maxQueued: 1_000_000 });
  const recorder = new TrafficRecorder();
  const both: CaptureSink = {
    record(x, detailed) {
      recorder.record(x, detailed);
      shipper.record(x, detailed);
    },
  };
  const off = endpointConfig({ capture_enabled: false, capture_level: 'off' });
  const metadata = endpointConfig({ uuid: '1b7d4c8e-2a61-4f3b-9f0e-6d1c2b3a4e5f', capture_enabled: true, capture_level: 'metadata' });
  const full = endpointConfig({ uuid: '2b7d4c8e-2a61-4f3b-9f0e-6d1c2b3a4e5f', capture_enabled: true, capture_level: 'full' });
  const noop: CaptureSink = { record() {} };

  let n = 0;
  const run = (sinkFor: CaptureSink, endpoint: EndpointConfig) => () => {
    const x = exchange(endpoint);
    captureExchange(sinkFor, x.ctx);
    x.end();
    // What the shipper's setImmediate does under load (it cannot run inside this synchronous loop): a batch of 100
    // leaves as soon as it is full. flush() sends the usage tally too, far more often than every 2 s: a bit pessimistic.
    if (++n % 100 === 0) shipper.flush();
  };
  const bench = new Bench({ time: 1_000, warmupTime: 200 });
  bench
    .add('request and response only (no capture hook; included below)', () => {
      const x = exchange(off);
      x.end();
    })
    .add('hook, no sink work (included below)', run(noop, off))
    .add('capture off: counters and usage tally', run(both, off))
    .add('capture on, metadata: + record built, queued, batched, serialised', run(both, metadata))
    .add('capture on, full (8 request headers redacted/kept, empty bodies)', run(both, full));
  await bench.run();
  shipper.close();
  if (sink.bytes < 0) console.log(sink.bytes);
  return bench.tasks.map((t) => {
    const r = t.result;
    return { name: t.name, meanNs: r && 'latency' in r ? r.latency.mean * 1e6 : Number.NaN };
  });
}

/** The results as rows of the printed table; capture on is judged by what it adds over capture off (3 µs target). */
export function describeCapture(results: CaptureBenchResult[]): Row[] {
  const offNs = results.find((r) => r.name.startsWith('capture off'))?.meanNs ?? Number.NaN;
  return results.map((r) => {
    let result = `${(r.meanNs / 1000).toFixed(2)} µs/request`;
    if (r.name.startsWith('capture on')) {
      const added = (r.meanNs - offNs) / 1000;
      result += `, +${added.toFixed(2)} µs over capture off` + (added < 3 ? ' (target < 3 µs: met)' : ' (target < 3 µs: NOT met)');
    }
    return { benchmark: `capture ${r.name}`, result };
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { formatTable } = await import('./proxy.ts');
  console.log(`\n${formatTable(describeCapture(await benchCapture()))}`);
}
