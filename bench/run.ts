// `npm run bench`: runs every benchmark in this folder in one process and prints one results table.
// Load runs target 127.0.0.1 only and are bounded in time; figures are for this machine, read them as ratios.
import { benchCapture, describeCapture } from './capture.ts';
import { benchConfigApply, describeConfigApply } from './config-apply.ts';
import { benchConfigAsCode, describeConfigAsCode } from './config-as-code.ts';
import { benchConsole, describeConsole } from './console.ts';
import { benchDeploy, describeDeploy } from './deploy.ts';
import { benchDns } from './dns.ts';
import { benchFeedLatency } from './feed-latency.ts';
import { benchPolicyMemory, describePolicyMemory } from './policy-memory.ts';
import { benchProxy, formatTable, type Row } from './proxy.ts';
import { benchRbac, describeRbac } from './rbac.ts';
import { accuracyRuns, benchRateLimit, describeRateLimit } from './rate-limit.ts';
import { benchRecordShipping, describeRecordShipping } from './record-shipping.ts';
import { benchStages, describeStages } from './stages.ts';
import { benchTracing, describeTracing } from './tracing.ts';

const rows: Row[] = [];

// The change feed: commit -> applied by a subscriber in another process, through Redis.
for (const databaseUrl of ['', process.env.DATABASE_URL ?? ''].filter((u, i) => i === 0 || u)) {
  const r = await benchFeedLatency({ databaseUrl, redisUrl: process.env.REDIS_URL || undefined, changes: 300, timeLimitMs: 30_000 });
  rows.push({
    benchmark: `change feed, commit -> subscriber in another process via Redis (${databaseUrl ? 'PostgreSQL' : 'PGlite'})`,
    result: `p50 ${r.p50Ms.toFixed(2)} ms, p99 ${r.p99Ms.toFixed(2)} ms (${r.samples} changes)`,
  });
}

// Config apply at scale: an edge restarted with no saved state against 100k endpoints with settings and rules
// (targets: serving within 10 s, under 500 MB resident, no event-loop stall over 100 ms), one change at that size,
// the state file written and read back (its own process); then what each policy's compiled stages hold per endpoint.
rows.push(...describeConfigApply(await benchConfigApply(100_000)));
rows.push(...describePolicyMemory(await benchPolicyMemory()));

// Configuration as code: `edge apply` of 1,000 endpoints with two rules each to an empty account (target < 60 s),
// then a no-op apply, a diff and an export, against `edge serve` in its own process.
rows.push(...describeConfigAsCode(await benchConfigAsCode()));

// The visitor-auth stages on their cached paths (target: under 5 µs each), beside the work their caches spare.
rows.push(...describeStages(await benchStages()));

// The RBAC decision for a client with 5 roles and 20 path patterns (target: under 5 µs), and the stage around it.
rows.push(...describeRbac(await benchRbac()));

// The rate-limit decision (targets: local under 2 µs, 10 rules with conditions under 5 µs) and the limiter's accuracy
// against an exact sliding log over simulated time, as Cloudflare publishes theirs.
rows.push(...describeRateLimit(await benchRateLimit(), accuracyRuns()));

// The capture path on the edge (target: capture on adds under 3 µs per request over capture off, batching included).
rows.push(...describeCapture(await benchCapture()));

// Tracing on the request path: CPU per request with it off (target: nothing measurable), on, and sampled at 1 %.
rows.push(...describeTracing(await benchTracing()));

// The edge's cost of shipping captured exchanges: to Redis (cluster mode) and to the in-process stream (edge serve),
// metadata and full, CPU per exchange over capture off.
rows.push(...describeRecordShipping(await benchRecordShipping({ redisUrl: process.env.REDIS_URL || undefined })));

// The GeoDNS server: answers per second with dnsperf against Knot DNS on the same CPU (target ≥ 0.3×), with and
// without ECS, and the time from a bind to the new answer (target < 1 s).
rows.push(...(await benchDns()));

// Push-to-deploy: a signed push webhook to `live` for an app with no build step (target < 2 s), and requests lost
// while each switch happens under load (target 0).
rows.push(...describeDeploy(await benchDeploy()));

// The web console's first load in Chromium: bytes with a cold cache (target < 300 KB) and navigation -> the endpoint
// list drawn with 1,000 endpoints (target < 1 s).
rows.push(...describeConsole(await benchConsole()));

// The whole request path as users run it: `edge serve` with endpoints made through its API (origin at the default
// capture, full, off, every policy on; raw tunnel at the default and off; WebSocket), beside a bare http-proxy-3 proxy
// (the baseline) and nginx, each in its own pinned process; three rounds interleaved, median and spread (~10 minutes).
rows.push(...(await benchProxy()));

console.log(`\n${formatTable(rows)}`);
