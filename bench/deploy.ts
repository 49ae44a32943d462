// Push-to-deploy (`npx tsx bench/deploy.ts`, and in `npm run bench`): from a signed push webhook to the deployment
// `live` for an app with no build step (target under 2 s), and requests lost while each switch happens under load (target 0).
import { createHmac, randomUUID } from 'node:crypto';
import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { DeployAgent } from '../src/agent/deploy/deploy-agent.ts';
import { createEndpoint, nodeWithOwner } from '../test/helpers/endpoint-api.ts';
import { appFiles, makeRepo } from '../test/helpers/git-app.ts';
import { percentile } from './lib/soak-report.ts';
import type { Row } from './proxy.ts';

export interface DeployBenchResult {
  /** Milliseconds from sending each push webhook to reading its deployment `live`, in order. */
  pushToLiveMs: number[];
  /** Per push, from the deployment's own timestamps: created → an agent took it (the feed and the tunnel), taken → live (git, start, health, switch). */
  dispatchMs: number[];
  agentMs: number[];
  requests: number;
  /** Requests that did not answer 200 with one of the versions, or failed outright. */
  failed: number;
  concurrency: number;
}

export async function benchDeploy(options: { pushes?: number; concurrency?: number } = {}): Promise<DeployBenchResult> {
  const pushes = options.pushes ?? 8;
  const concurrency = options.concurrency ?? 8;
  const { t, owner } = await nodeWithOwner({ EDGE_DEPLOY_ALLOW_FILE_URLS: 'true' });
  const repo = await makeRepo();
  const dir = await mkdtemp(join(tmpdir(), 'edge-bench-deploy-'));
  let agent: DeployAgent | undefined;
  const keepAlive = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  try {
    const endpoint = await createEndpoint(t, owner);
    const created = await t.api('POST', '/v1/applications', {
      key: owner.api_key,
      body: { name: 'bench', endpoint: endpoint.uuid, source: 'git', repository_url: repo.url, provider: 'github', run_command: 'node server.js', health_path: '/healthz' },
    });
    if (created.status !== 201) throw new Error(`application: ${created.status} ${created.text}`);
    const app = created.body as { uuid: string };
    const secret = ((await t.api('GET', `/v1/applications/${app.uuid}/webhook`, { key: owner.api_key })).body as { secret: string }).secret;
    agent = new DeployAgent({ application: app.uuid, dir, edgeUrl: `http://127.0.0.1:${t.node.edge!.httpPort}`, apiKey: owner.api_key });
    await agent.start();

    const dispatchMs: number[] = [];
    const agentMs: number[] = [];
    const push = async (sha: string): Promise<number> => {
      const body = JSON.stringify({ ref: 'refs/heads/main', after: sha, deleted: false });
      const signature = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
      const started = performance.now();
      const res = await fetch(`${t.controlUrl}/api/webhooks/git/${app.uuid}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-github-event': 'push', 'x-github-delivery': randomUUID(), 'x-hub-signature-256': signature },
        body,
      });
      const { deployment_id: id } = (await res.json()) as { deployment_id: number };
      if (res.status !== 202) throw new Error(`webhook answered ${res.status}`);
      for (;;) {
        const d = (await t.api('GET', `/v1/applications/${app.uuid}/deployments/${id}`, { key: owner.api_key })).body as {
          status: string;
          reason: string | null;
          created_at: string;
          started_at: string;
          live_at: string;
        };
        if (d.status === 'live') {
          const elapsed = performance.now() - started;
          dispatchMs.push(Date.parse(d.started_at) - Date.parse(d.created_at));
          agentMs.push(Date.parse(d.live_at) - Date.parse(d.started_at));
          return elapsed;
        }
        if (d.status === 'failed' || d.status === 'cancelled' || d.status === 'superseded') throw new Error(`deployment ${id} ${d.status}: ${d.reason}`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    };

    // The first release has nothing to switch from: it goes live before the load starts.
    await push(await repo.commit(appFiles({ version: 'v0' }), 'v0'));
    const versions = new Set(['v0']);
    let requests = 0;
    let failed = 0;
    let loading = true;
    const visitor = async () => {
      while (loading) {
        const ok = await new Promise<boolean>((resolve) => {
          const req = http.get({ host: '127.0.0.1', port: t.node.edge!.httpPort, path: '/', headers: { host: endpoint.hostname }, agent: keepAlive }, (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (d) => (text += d));
            res.on('end', () => {
              const ok = res.statusCode === 200 && versions.has(text);
              // BENCH_DEBUG=1 prints what a lost request got, to tell the edge's answers from the agent's.
              if (!ok && process.env.BENCH_DEBUG) console.error(res.statusCode, text.slice(0, 200));
              resolve(ok);
            });
          });
          req.on('error', () => resolve(false));
        });
        requests++;
        if (!ok) failed++;
      }
    };
    const loops = Array.from({ length: concurrency }, visitor);
    const pushToLiveMs: number[] = [];
    try {
      for (let i = 1; i <= pushes; i++) {
        versions.add(`v${i}`);
        pushToLiveMs.push(await push(await repo.commit(appFiles({ version: `v${i}` }))));
      }
    } finally {
      loading = false;
      await Promise.all(loops);
    }
    // The first push (before the load) is left out of the phases, as of the totals.
    return { pushToLiveMs, dispatchMs: dispatchMs.slice(1), agentMs: agentMs.slice(1), requests, failed, concurrency };
  } finally {
    keepAlive.destroy();
    await agent?.stop(0);
    await t.close();
    await repo.close();
    await rm(dir, { recursive: true, force: true });
  }
}

export function describeDeploy(r: DeployBenchResult): Row[] {
  const sorted = [...r.pushToLiveMs].sort((a, b) => a - b);
  const p50 = (values: number[]) => percentile([...values].sort((a, b) => a - b), 50).toFixed(0);
  return [
    {
      benchmark: 'push webhook -> deployment live (no build step; git fetch, start, health check, switch)',
      result: `p50 ${percentile(sorted, 50).toFixed(0)} ms, max ${sorted.at(-1)!.toFixed(0)} ms over ${sorted.length} pushes (target < 2 s)`,
    },
    {
      benchmark: 'of which: created -> taken by the agent (feed, tunnel) · taken -> live (agent: git, start, health, switch)',
      result: `p50 ${p50(r.dispatchMs)} ms · p50 ${p50(r.agentMs)} ms`,
    },
    {
      benchmark: `requests lost during those switches (${r.concurrency} keep-alive visitors through the edge)`,
      result: `${r.failed} of ${r.requests} (target 0)`,
    },
  ];
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const rows = describeDeploy(await benchDeploy());
  for (const row of rows) console.log(`${row.benchmark}: ${row.result}`);
}
