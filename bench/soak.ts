// `npm run soak -- --minutes N`: a local cluster (control, worker, three edges) under mixed traffic at half its measured
// capacity, with a config change every second and agents reconnecting; reports errors, latency and RSS per minute.
import { mkdir, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { startAgent, type Agent } from '../src/agent/agent.ts';
import { startHaAgent, type HaAgent } from '../src/agent/ha.ts';
import { startLocalCluster } from '../src/cluster/local.ts';
import { foldMinutes, parseSoakArgs, rssGrowth, toCsv, toSvg, type Outcome, type Sample } from './lib/soak-report.ts';

const RSS_GROWTH_LIMIT_PERCENT = 10;
/** A relayed request may meet an edge whose agent just left (presence lags by up to one beat): 502 then is the reconnect's. */
const RECONNECT_WINDOW_MS = 2_000;

const args = parseSoakArgs(process.argv.slice(2));
const outDir = args.out ?? join('bench', 'results', `soak-${new Date().toISOString().replace(/[:.]/g, '-')}`);
await mkdir(outDir, { recursive: true });

const cluster = await startLocalCluster({
  databaseUrl: process.env.DATABASE_URL || undefined,
  redisUrl: process.env.REDIS_URL || undefined,
  env: { EDGE_ORIGIN_ALLOW_PRIVATE: 'true', EDGE_PRESENCE_INTERVAL_MS: '1000' },
});
const agents: Array<Agent | HaAgent> = [];
const service = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => res.end(`ok ${req.url}`));
});
await new Promise<void>((r) => service.listen(0, '127.0.0.1', r));
const servicePort = (service.address() as AddressInfo).port;
const edgePorts = cluster.edges.map((e) => e.ports.http!);

async function api(method: string, path: string, key: string, body?: unknown): Promise<any> {
  const res = await fetch(`${cluster.controlUrl}${path}`, { method, headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  const json = await res.json().catch(() => undefined);
  if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

function send(port: number, host: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; ms: number; error?: string }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path, headers: { host, ...headers }, agent: keepAlive }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, ms: performance.now() - started }));
    });
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
    req.on('error', (err: Error & { code?: string }) => resolve({ status: 0, ms: performance.now() - started, error: err.code ?? err.message }));
  });
}
const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 64 });

let lastReconnectAt = -Infinity;
const runStart = performance.now();

try {
  const user = await api('POST', '/v1/admin/users', cluster.adminKey, { email: 'soak@example.test', plan: 'pro' });
  const key = user.api_key as string;
  // Endpoints: tunnel (two agents, a routing rule for /api), tunnel with basic auth, origin with capture and a rate limit.
  const tunnel = await api('POST', '/v1/endpoints', key, {});
  const basic = await api('POST', '/v1/endpoints', key, {});
  const origin = await api('POST', '/v1/endpoints', key, {});
  await api('PUT', `/v1/endpoints/${basic.uuid}/settings`, key, { mode: 'basic', basic_users: [{ username: 'soak', password: 'soak-password-1' }] });
  await api('PUT', `/v1/endpoints/${origin.uuid}/origin`, key, { url: `http://127.0.0.1:${servicePort}` });
  await api('PUT', `/v1/endpoints/${origin.uuid}/settings/capture`, key, { capture_enabled: true, capture_level: 'full' });
  await api('POST', '/v1/firewall/rate-limits', key, { endpoint_id: origin.uuid, name: 'limited', requests_per_window: 20, window_size_seconds: 1, action: 'block', conditions: [{ type: 'path', operator: 'prefix', value: '/limited' }] });
  await api('POST', `/v1/endpoints/${tunnel.uuid}/routing-rules`, key, { name: 'api', priority: 1, target_agent_tags: 'api', conditions: [{ condition_type: 'path', condition_key: 'prefix', pattern: '/api' }] });
  // Every edge must know the endpoints before agents connect to them.
  for (const port of edgePorts) {
    // 404 until the edge has the endpoint (then 502 without an agent, 401 behind basic auth).
    for (const e of [tunnel, basic]) while ((await send(port, e.hostname, '/')).status === 404) await new Promise((r) => setTimeout(r, 100));
  }
  const edgeUrl = (i: number) => `http://127.0.0.1:${edgePorts[i]}`;
  agents.push(await startHaAgent({ edges: [edgeUrl(0), edgeUrl(1)], apiKey: key, endpoint: tunnel.uuid, protocol: 'http', target: servicePort }));
  const apiAgent = { agent: await startAgent({ edgeUrl: edgeUrl(2), apiKey: key, endpoint: tunnel.uuid, protocol: 'http', target: servicePort, tags: ['api'] }) };
  const second = { agent: await startAgent({ edgeUrl: edgeUrl(2), apiKey: key, endpoint: basic.uuid, protocol: 'http', target: servicePort }) };
  agents.push(await startAgent({ edgeUrl: edgeUrl(1), apiKey: key, endpoint: basic.uuid, protocol: 'http', target: servicePort }));
  const auth = `Basic ${Buffer.from('soak:soak-password-1').toString('base64')}`;
  for (const port of edgePorts) while ((await send(port, tunnel.hostname, '/api/ready')).status !== 200) await new Promise((r) => setTimeout(r, 100));

  // The mix: what each request is, and which answers are the policy doing its job.
  const mix: Array<{ host: string; path: string; headers?: Record<string, string>; expected: number[] }> = [
    { host: tunnel.hostname, path: '/t', expected: [] },
    { host: tunnel.hostname, path: '/api/x', expected: [] },
    { host: basic.hostname, path: '/b', headers: { authorization: auth }, expected: [] },
    { host: basic.hostname, path: '/b-anon', expected: [401] },
    { host: origin.hostname, path: '/o', expected: [] },
    { host: origin.hostname, path: '/limited', expected: [429] },
  ];
  let turn = 0;
  const one = async (samples: Sample[] | null): Promise<void> => {
    const m = mix[turn % mix.length];
    const port = edgePorts[Math.floor(turn / mix.length) % edgePorts.length];
    turn++;
    const r = await send(port, m.host, m.path, m.headers);
    if (!samples) return;
    const at = performance.now() - runStart;
    let outcome: Outcome = r.status === 200 ? 'ok' : m.expected.includes(r.status) ? 'expected' : 'unexpected';
    if (outcome === 'unexpected' && r.status === 502 && at - lastReconnectAt < RECONNECT_WINDOW_MS) outcome = 'reconnect_window';
    samples.push({ at, outcome, latencyMs: r.ms, detail: r.error ?? String(r.status) });
  };

  // Capacity: closed loop, 32 at a time, for 15 s.
  let done = 0;
  const capacityEnd = performance.now() + 15_000;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (performance.now() < capacityEnd) {
        await one(null);
        done++;
      }
    }),
  );
  const capacity = done / 15;
  const rate = args.rate ?? Math.max(1, Math.floor(capacity / 2));
  console.log(`capacity ${capacity.toFixed(0)} req/s through 3 edges; soaking at ${rate} req/s for ${args.minutes} min`);

  // The soak: paced open loop, config changes every second, an agent reconnecting every 30 s.
  const samples: Sample[] = [];
  const rss: Array<Record<string, number>> = [];
  const soakStart = performance.now();
  lastReconnectAt = -Infinity;
  const readRss = async () => {
    const out: Record<string, number> = {};
    for (const node of cluster.nodes) out[node.name] = Math.round(((await node.rss()) ?? 0) / 1048576);
    out.soak = Math.round(process.memoryUsage().rss / 1048576);
    return out;
  };
  const endAt = soakStart + args.minutes * 60_000;
  let sent = 0;
  let inFlight = 0;
  let skipped = 0;
  const pending = new Set<Promise<void>>();
  let nextConfig = soakStart + 1_000;
  let nextReconnect = soakStart + 30_000;
  let nextMinute = soakStart + 60_000;
  let flip = false;
  // Samples are timed from the soak's start, not the capacity run's.
  const offset = soakStart - runStart;
  while (performance.now() < endAt) {
    const now = performance.now();
    const due = Math.floor(((now - soakStart) / 1000) * rate) - sent;
    for (let i = 0; i < due; i++) {
      sent++;
      // A generator that cannot keep up is said, not hidden: requests beyond 512 in flight are skipped and counted.
      if (inFlight >= 512) {
        skipped++;
        continue;
      }
      inFlight++;
      const p = one(samples).finally(() => {
        inFlight--;
        pending.delete(p);
      });
      pending.add(p);
    }
    if (now >= nextConfig) {
      nextConfig += 1_000;
      flip = !flip;
      void api('PUT', `/v1/endpoints/${origin.uuid}/settings/capture`, key, { capture_enabled: true, capture_level: flip ? 'metadata' : 'full' }).catch((err) => {
        samples.push({ at: performance.now() - runStart, outcome: 'unexpected', latencyMs: 0, detail: `config change: ${(err as Error).message}` });
      });
    }
    if (now >= nextReconnect) {
      nextReconnect += 30_000;
      lastReconnectAt = performance.now() - runStart;
      const which = flip ? apiAgent : second;
      const options = which === apiAgent ? { edgeUrl: edgeUrl(2), endpoint: tunnel.uuid, tags: ['api'] } : { edgeUrl: edgeUrl(2), endpoint: basic.uuid, tags: [] };
      void (async () => {
        await which.agent.stop();
        which.agent = await startAgent({ ...options, apiKey: key, protocol: 'http', target: servicePort });
        lastReconnectAt = performance.now() - runStart;
      })();
    }
    if (now >= nextMinute) {
      nextMinute += 60_000;
      rss.push(await readRss());
      const m = rss.length;
      const inMinute = samples.filter((s) => s.at - offset >= (m - 1) * 60_000 && s.at - offset < m * 60_000);
      console.log(`minute ${m}: ${inMinute.length} requests, ${inMinute.filter((s) => s.outcome === 'unexpected').length} unexpected`);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  await Promise.all(pending);
  if (rss.length < Math.ceil(args.minutes)) rss.push(await readRss());
  agents.push(apiAgent.agent, second.agent);

  const shifted = samples.map((s) => ({ ...s, at: s.at - offset }));
  const rows = foldMinutes(shifted, rss);
  const growth = rssGrowth(rows);
  await writeFile(join(outDir, 'soak.csv'), toCsv(rows));
  await writeFile(join(outDir, 'soak.svg'), toSvg(rows, `soak: ${rate} req/s for ${args.minutes} min (capacity ${capacity.toFixed(0)} req/s)`));
  const errors = new Map<string, number>();
  for (const s of shifted) if (s.outcome !== 'ok') errors.set(`${s.outcome} ${s.detail}`, (errors.get(`${s.outcome} ${s.detail}`) ?? 0) + 1);
  console.log('\nminute  requests  ok      expected  reconnect  unexpected  p50 ms  p99 ms  ' + Object.keys(rows[0]?.rssMiB ?? {}).map((n) => `${n} MiB`).join('  '));
  for (const r of rows) {
    console.log(
      [String(r.minute).padEnd(6), String(r.requests).padEnd(8), String(r.ok).padEnd(6), String(r.expected).padEnd(8), String(r.reconnectWindow).padEnd(9), String(r.unexpected).padEnd(10), String(r.p50Ms).padEnd(6), String(r.p99Ms).padEnd(6), ...Object.values(r.rssMiB).map(String)].join('  '),
    );
  }
  console.log('\nanswers other than 200, by class:', Object.fromEntries(errors));
  console.log('RSS growth over the second half (%):', growth);
  console.log(`generator skipped ${skipped} of ${sent} requests (over 512 in flight)`);
  console.log(`written: ${join(outDir, 'soak.csv')}, ${join(outDir, 'soak.svg')}`);
  const unexpected = shifted.filter((s) => s.outcome === 'unexpected').length;
  const grew = Object.entries(growth).filter(([, g]) => g > RSS_GROWTH_LIMIT_PERCENT);
  if (unexpected > 0 || grew.length > 0 || skipped > 0) {
    console.log(`FAIL: ${unexpected} unexpected answers; RSS grew over ${RSS_GROWTH_LIMIT_PERCENT} % for: ${grew.map(([n]) => n).join(', ') || 'none'}; ${skipped} skipped`);
    process.exitCode = 1;
  } else console.log('PASS');
} finally {
  for (const a of agents) await a.stop(1_000).catch(() => {});
  keepAlive.destroy();
  service.close();
  await cluster.stop();
}
