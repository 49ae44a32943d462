// What relaying costs (`npx tsx bench/relay.ts [--requests N]`): a local cluster of two edges, an agent on edge 2 and
// an origin service; CPU per request on both edges (from /proc) and latency, relayed against direct and the origin path.
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startAgent } from '../src/agent/agent.ts';
import { startLocalCluster } from '../src/cluster/local.ts';
import type { NodeProcess } from '../src/cluster/node-process.ts';
import { percentile } from './lib/soak-report.ts';

const requestsArg = process.argv.indexOf('--requests');
const REQUESTS = requestsArg > 0 ? Number(process.argv[requestsArg + 1]) : 3_000;
if (!Number.isInteger(REQUESTS) || REQUESTS < 100) throw new Error('--requests must be a whole number of at least 100');
const CONCURRENCY = 8;
const TICKS_PER_SECOND = 100; // USER_HZ on Linux

/** utime + stime of a process in ms (/proc/<pid>/stat fields 14 and 15). */
async function cpuMs(node: NodeProcess): Promise<number> {
  const stat = await readFile(`/proc/${node.pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
}

const cluster = await startLocalCluster({ edges: 2, databaseUrl: process.env.DATABASE_URL || undefined, redisUrl: process.env.REDIS_URL || undefined, env: { EDGE_ORIGIN_ALLOW_PRIVATE: 'true' } });
const service = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => res.end('ok'));
});
await new Promise<void>((r) => service.listen(0, '127.0.0.1', r));
const keepAlive = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
const send = (port: number, host: string) =>
  new Promise<number>((resolve, reject) => {
    const started = performance.now();
    http
      .get({ host: '127.0.0.1', port, path: '/bench', headers: { host }, agent: keepAlive }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve(performance.now() - started) : reject(new Error(`status ${res.statusCode}`))));
      })
      .on('error', reject);
  });

try {
  const api = async (method: string, path: string, key: string, body?: unknown) => {
    const res = await fetch(`${cluster.controlUrl}${path}`, { method, headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
    if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status}`);
    return res.json() as Promise<any>;
  };
  const user = await api('POST', '/v1/admin/users', cluster.adminKey, { email: 'relay-bench@example.test', plan: 'pro' });
  const tunnel = await api('POST', '/v1/endpoints', user.api_key, {});
  const origin = await api('POST', '/v1/endpoints', user.api_key, {});
  await api('PUT', `/v1/endpoints/${origin.uuid}/origin`, user.api_key, { url: `http://127.0.0.1:${(service.address() as AddressInfo).port}` });
  const [edge1, edge2] = cluster.edges;
  // Agents are admitted only by an edge that knows the endpoint (404 until the feed brings it).
  for (const edge of cluster.edges) while ((await probe(edge, tunnel.hostname)) === 404) await new Promise((r) => setTimeout(r, 100));
  const agent = await startAgent({ edgeUrl: `http://127.0.0.1:${edge2.ports.http}`, apiKey: user.api_key, endpoint: tunnel.uuid, protocol: 'http', target: (service.address() as AddressInfo).port });
  while ((await send(edge1.ports.http!, tunnel.hostname).catch(() => -1)) === -1) await new Promise((r) => setTimeout(r, 100));

  const run = async (name: string, port: number, host: string) => {
    // A warm-up of a fifth, then the measured run; CPU read around it on both edges.
    await load(port, host, Math.floor(REQUESTS / 5));
    const before = [await cpuMs(edge1), await cpuMs(edge2)];
    const latencies = await load(port, host, REQUESTS);
    const after = [await cpuMs(edge1), await cpuMs(edge2)];
    const cpu = after.map((a, i) => ((a - before[i]) * 1000) / REQUESTS);
    latencies.sort((a, b) => a - b);
    return { name, edge1UsPerRequest: Math.round(cpu[0]), edge2UsPerRequest: Math.round(cpu[1]), totalUs: Math.round(cpu[0] + cpu[1]), p50Ms: percentile(latencies, 50).toFixed(2), p99Ms: percentile(latencies, 99).toFixed(2) };
  };
  const rows = [await run('origin path on edge 1', edge1.ports.http!, origin.hostname), await run('tunnel, agent on the same edge (edge 2)', edge2.ports.http!, tunnel.hostname), await run('tunnel, relayed edge 1 → edge 2', edge1.ports.http!, tunnel.hostname)];
  console.table(rows);
  const [originRow, direct, relayed] = rows;
  console.log(`relayed total edge CPU ${relayed.totalUs} µs = ${(relayed.totalUs / originRow.totalUs).toFixed(2)}× the origin path's (target ≤ 1.5×); direct tunnel ${direct.totalUs} µs`);
  console.log(`p50 relayed ${relayed.p50Ms} ms vs direct ${direct.p50Ms} ms (+${(Number(relayed.p50Ms) - Number(direct.p50Ms)).toFixed(2)} ms; target +1 ms); p99 ${relayed.p99Ms} vs ${direct.p99Ms} ms`);
  await agent.stop();
} finally {
  keepAlive.destroy();
  service.close();
  await cluster.stop();
}

async function load(port: number, host: string, n: number): Promise<number[]> {
  const out: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < n) {
        next++;
        out.push(await send(port, host));
      }
    }),
  );
  return out;
}

async function probe(edge: NodeProcess, host: string): Promise<number> {
  return new Promise((resolve) => http.get({ host: '127.0.0.1', port: edge.ports.http, path: '/', headers: { host }, agent: false }, (res) => (res.resume(), resolve(res.statusCode!))).on('error', () => resolve(0)));
}
