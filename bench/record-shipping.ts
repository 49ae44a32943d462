// The edge's cost of shipping captured exchanges in cluster mode: TrafficShipper feeding RedisRecords (XADD batches to
// a real redis-server), metadata and full, beside the in-process path (MemoryRecords, `edge serve` without REDIS_URL).
//
// What is measured is this process's CPU (utime+stime, GC and ioredis included) per exchange, over a steady stream of
// exchanges handed to the shipper a few dozen per event-loop turn, as under load, with the shipper's default batching
// and intervals; the cost of capture off (usage tally only, same stream) is subtracted. Redis's own CPU is not the
// edge's and is left out. `npx tsx bench/record-shipping.ts`; `npm run bench` includes it. Measure only: no target
// is asserted.
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import type { CapturedExchange } from '../src/edge/capture.ts';
import { TrafficShipper } from '../src/edge/traffic-shipper.ts';
import { MemoryRecords } from '../src/shared/records/memory.ts';
import { RedisRecords } from '../src/shared/records/redis.ts';
import type { RecordSink } from '../src/shared/records/types.ts';
import { startRedisServer } from '../test/helpers/redis-server.ts';
import type { Row } from './proxy.ts';
import { DiscardingSink } from './lib/discarding-sink.ts';

export type ShippingMode = 'off' | 'metadata-memory' | 'full-memory' | 'metadata-redis' | 'full-redis';

export interface ShippingResult {
  mode: ShippingMode;
  /** Median over rounds of CPU µs per exchange (everything: building the exchange, tally, record, batch, send). */
  cpuUsPerExchange: number;
  /** Per round, for the spread. */
  rounds: number[];
  /** Records the sink reported sent in the last round, and dropped over all rounds. */
  sent: number;
  dropped: number;
}

export interface ShippingOptions {
  /** Exchanges per measured round. */
  exchanges?: number;
  rounds?: number;
  /** Exchanges handed over per event-loop turn (a loaded edge finishes several requests per turn). */
  perTurn?: number;
  redisUrl?: string;
}


const REQUEST_HEADERS = {
  host: 'app.bench.localhost',
  'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36',
  accept: 'application/json',
  'accept-encoding': 'gzip, br',
  'accept-language': 'en-GB,en;q=0.9',
  authorization: 'Bearer abc.def.ghi',
  cookie: 'sid=0123456789',
  'x-request-id': '7f1c7d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f',
};
const RESPONSE_HEAD = 'HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: 100\r\ndate: Mon, 01 Jan 2030 00:00:00 GMT\r\nconnection: keep-alive\r\n\r\n';
const RESPONSE_BODY = Buffer.alloc(100, 120);

/** A finished 100 B GET as capture hands it over: a fresh object each time (the queue keeps them until sent). */
function exchange(level: 'metadata' | 'full', i: number): CapturedExchange {
  const now = Date.now();
  return {
    at: new Date(now).toISOString(),
    time: now,
    account: 1,
    endpoint: '1b7d4c8e-2a61-4f3b-9f0e-6d1c2b3a4e5f',
    hostname: 'app.bench.localhost',
    method: 'GET',
    host: 'app.bench.localhost',
    path: '/small',
    query: `page=${i & 7}`,
    status: 200,
    duration_ms: 0.8,
    bytes_in: 0,
    bytes_out: RESPONSE_HEAD.length + RESPONSE_BODY.length,
    client_ip: '198.51.100.20',
    country: null,
    user_agent: REQUEST_HEADERS['user-agent'],
    secure: false,
    rule: null,
    edge_error: null,
    auth_outcome: null,
    client_id: null,
    completed: true,
    level,
    detail:
      level === 'full'
        ? {
            request_headers: { ...REQUEST_HEADERS },
            response_head: RESPONSE_HEAD,
            request_body: { chunks: [], size: 0, truncated: false },
            response_body: { chunks: [Buffer.from(RESPONSE_BODY)], size: RESPONSE_BODY.length, truncated: false },
          }
        : undefined,
  };
}

const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

/** One round: `exchanges` handed to a fresh shipper at `perTurn` per turn, then everything flushed and sent. */
async function round(mode: ShippingMode, exchanges: number, perTurn: number, redisUrl: string, prefix: string): Promise<{ us: number; sent: number; dropped: number }> {
  const sink: RecordSink & { close(): Promise<void> } =
    mode.endsWith('redis') ? new RedisRecords({ url: redisUrl, prefix, consumer: 'bench-edge' }) : mode.endsWith('memory') ? new MemoryRecords() : new DiscardingSink();
  // The edge's settings: batches of 100, exchanges sent at least every second, usage every 2 s.
  const shipper = new TrafficShipper({ sink, edge: 'bench-edge', region: 'bench' });
  const level = mode.startsWith('full') ? 'full' : 'metadata';
  const detailed = mode !== 'off';
  // The connection is made and warm before the window (an edge's is, long before its requests).
  for (let i = 0; i < 200; i++) shipper.record(exchange(level, i), detailed);
  shipper.flush();
  await sink.flush();
  const sentBefore = sink.stats().sent;
  const t0 = cpuUs();
  let n = 0;
  await new Promise<void>((resolve) => {
    const turn = () => {
      for (let k = 0; k < perTurn && n < exchanges; k++, n++) shipper.record(exchange(level, n), detailed);
      if (n < exchanges) setImmediate(turn);
      else resolve();
    };
    turn();
  });
  shipper.close();
  await sink.flush(30_000);
  const us = cpuUs() - t0;
  const stats = sink.stats();
  // MemoryRecords keeps what no worker read here until it goes with the sink: the worker's side is not the edge's cost.
  await sink.close();
  return { us, sent: stats.sent - sentBefore, dropped: stats.dropped + shipper.stats().dropped };
}

async function deleteKeys(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    for await (const keys of redis.scanStream({ match: `${prefix}*`, count: 100 }) as AsyncIterable<string[]>) {
      if (keys.length > 0) await redis.del(...keys);
    }
  } finally {
    redis.disconnect();
  }
}

const median = (v: number[]) => {
  const s = [...v].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

export async function benchRecordShipping(options: ShippingOptions = {}): Promise<ShippingResult[]> {
  const exchanges = options.exchanges ?? 50_000;
  const rounds = options.rounds ?? 3;
  const perTurn = options.perTurn ?? 16;
  const modes: ShippingMode[] = ['off', 'metadata-memory', 'full-memory', 'metadata-redis', 'full-redis'];
  const cleanup: Array<() => Promise<unknown>> = [];
  try {
    let redisUrl = options.redisUrl;
    const prefix = `bench:${randomUUID()}:`;
    if (redisUrl) {
      const url = redisUrl;
      cleanup.push(() => deleteKeys(url, prefix));
    } else {
      const server = await startRedisServer();
      cleanup.push(() => server.stop());
      redisUrl = server.url;
    }
    const per = new Map<ShippingMode, number[]>(modes.map((m) => [m, []]));
    const last = new Map<ShippingMode, { sent: number; dropped: number }>();
    // A run-in of every mode (JIT), then the rounds, interleaved so drift on a shared machine hits every mode alike.
    for (const mode of modes) await round(mode, 5_000, perTurn, redisUrl, prefix);
    for (let r = 0; r < rounds; r++) {
      for (const mode of modes) {
        const res = await round(mode, exchanges, perTurn, redisUrl, prefix);
        per.get(mode)!.push(res.us / exchanges);
        const prev = last.get(mode);
        last.set(mode, { sent: res.sent, dropped: (prev?.dropped ?? 0) + res.dropped });
      }
      // The stream grows by every round's batches; trimmed so Redis's memory stays small (not the edge's cost).
      const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
      await redis.del(`${prefix}records`).finally(() => redis.disconnect());
    }
    return modes.map((mode) => ({ mode, cpuUsPerExchange: median(per.get(mode)!), rounds: per.get(mode)!, ...last.get(mode)! }));
  } finally {
    for (const step of cleanup.reverse()) await step().catch(() => {});
  }
}

const LABEL: Record<ShippingMode, string> = {
  off: 'capture off (usage tally only; subtracted below)',
  'metadata-memory': 'metadata → in-process stream (MemoryRecords, edge serve)',
  'full-memory': 'full → in-process stream (MemoryRecords, edge serve)',
  'metadata-redis': 'metadata → Redis (RedisRecords, cluster mode)',
  'full-redis': 'full → Redis (RedisRecords, cluster mode)',
};

export function describeRecordShipping(results: ShippingResult[]): Row[] {
  const off = results.find((r) => r.mode === 'off')?.cpuUsPerExchange ?? Number.NaN;
  return results.map((r) => {
    const range = r.rounds.length > 1 ? ` (${Math.min(...r.rounds).toFixed(2)}–${Math.max(...r.rounds).toFixed(2)})` : '';
    let result = `${r.cpuUsPerExchange.toFixed(2)} µs CPU/exchange${range}`;
    if (r.mode !== 'off') result += `, +${(r.cpuUsPerExchange - off).toFixed(2)} µs over capture off`;
    result += `; ${r.sent} records sent in the last round${r.dropped > 0 ? `, ${r.dropped} DROPPED` : ''}`;
    return { benchmark: `record shipping, ${LABEL[r.mode]}`, result };
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { formatTable } = await import('./proxy.ts');
  const rows = describeRecordShipping(await benchRecordShipping({ redisUrl: process.env.REDIS_URL || undefined }));
  console.log(`\n${formatTable(rows)}`);
}
