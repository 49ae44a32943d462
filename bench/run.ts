// `npm run bench`: runs every benchmark in this folder in one process and prints one results table.
// Load runs target 127.0.0.1 only and are bounded in time; figures are for this machine, read them as ratios.
import { benchFeedLatency } from './feed-latency.ts';

interface Row {
  benchmark: string;
  result: string;
}

const rows: Row[] = [];

// The change feed: commit -> applied by a subscriber in another process, through Redis.
for (const databaseUrl of ['', process.env.DATABASE_URL ?? ''].filter((u, i) => i === 0 || u)) {
  const r = await benchFeedLatency({ databaseUrl, redisUrl: process.env.REDIS_URL || undefined, changes: 300, timeLimitMs: 30_000 });
  rows.push({
    benchmark: `change feed, commit -> subscriber in another process via Redis (${databaseUrl ? 'PostgreSQL' : 'PGlite'})`,
    result: `p50 ${r.p50Ms.toFixed(2)} ms, p99 ${r.p99Ms.toFixed(2)} ms (${r.samples} changes)`,
  });
}

const width = Math.max(...rows.map((r) => r.benchmark.length));
console.log(`\n${'benchmark'.padEnd(width)} | result`);
console.log(`${'-'.repeat(width)}-|-${'-'.repeat(40)}`);
for (const r of rows) console.log(`${r.benchmark.padEnd(width)} | ${r.result}`);
