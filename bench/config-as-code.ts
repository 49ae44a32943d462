// `edge apply` at scale: 1,000 endpoints, each with a rate-limit rule and a routing rule, applied to an empty
// account on a control node of its own process (`edge serve`, PGlite), then a second, no-op apply. Timed, never a test.
//
// Standalone: `npx tsx bench/config-as-code.ts` (BENCH_CAC_ENDPOINTS sets the count, default 1,000).
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { stringify } from 'yaml';
import { configCommand } from '../src/config-as-code/command.ts';
import { cleanEnv, serveNode } from '../test/helpers/serve-process.ts';
import type { Row } from './proxy.ts';

export interface ConfigAsCodeResult {
  endpoints: number;
  resources: number;
  applyMs: number;
  noopMs: number;
  diffMs: number;
  exportMs: number;
  calls: string;
}

async function timed(run: () => Promise<number>, what: string): Promise<number> {
  const start = performance.now();
  const code = await run();
  if (code !== 0) throw new Error(`${what} exited ${code}`);
  return performance.now() - start;
}

export async function benchConfigAsCode(endpoints = Number(process.env.BENCH_CAC_ENDPOINTS ?? 1000)): Promise<ConfigAsCodeResult> {
  const dir = await mkdtemp(join(tmpdir(), 'edge-bench-cac-'));
  const adminKey = `admin-${randomBytes(12).toString('hex')}`;
  // The plans' quotas are far below a thousand endpoints; this node's plan makes room for the run.
  const configFile = join(dir, 'config.json');
  await writeFile(configFile, JSON.stringify({ plans: { business: { quotas: { permanent_endpoints: endpoints * 2, organization_endpoints: endpoints * 2 } } } }));
  const node = await serveNode(cleanEnv({ EDGE_DATA_DIR: dir, EDGE_ADMIN_API_KEY: adminKey, EDGE_LOG_LEVEL: 'info', EDGE_CONFIG_FILE: configFile }));
  try {
    const url = `http://127.0.0.1:${node.control}`;
    const res = await fetch(`${url}/v1/admin/users`, {
      method: 'POST',
      headers: { 'x-api-key': adminKey, 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'bench@example.test', plan: 'business' }),
    });
    const user = await res.json();
    const doc = {
      version: 1,
      endpoints: Object.fromEntries(
        Array.from({ length: endpoints }, (_, i) => [
          `bench-${i}`,
          {
            tags: ['bench'],
            rate_limits: { api: { requests_per_window: 100, window_size_seconds: 60, action: 'block', conditions: [{ type: 'path', operator: 'prefix', value: '/api' }] } },
            routing_rules: { canary: { target_agent_tags: ['canary'], conditions: [{ condition_type: 'header', condition_key: 'x-canary', pattern: '1' }] } },
          },
        ]),
      ),
    };
    const file = join(dir, 'edge.yaml');
    await writeFile(file, stringify(doc));
    let out = '';
    const io = { stdout: (s: string) => void (out += s), stderr: (s: string) => void (out += s), env: { EDGE_API_KEY: user.api_key, EDGE_CONTROL_URL: url } };
    const applyMs = await timed(() => configCommand('apply', ['-f', file], io), 'apply');
    const summary = /Apply: .*/.exec(out)?.[0] ?? '';
    out = '';
    const noopMs = await timed(() => configCommand('apply', ['-f', file], io), 'no-op apply');
    if (!out.startsWith('No changes')) throw new Error(`the second apply was not a no-op: ${out.slice(0, 500)}`);
    const diffMs = await timed(() => configCommand('diff', ['-f', file], io), 'diff');
    const exportMs = await timed(() => configCommand('export', ['--file', join(dir, 'export.yaml')], io), 'export');
    return { endpoints, resources: endpoints * 3, applyMs, noopMs, diffMs, exportMs, calls: summary };
  } finally {
    await node.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

export function describeConfigAsCode(r: ConfigAsCodeResult): Row[] {
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  return [
    {
      benchmark: `edge apply: ${r.endpoints.toLocaleString('en')} endpoints with a rate-limit and a routing rule each (${r.resources.toLocaleString('en')} resources) to an empty account`,
      result: `${s(r.applyMs)} (target < 60 s); then a no-op apply ${s(r.noopMs)}, diff ${s(r.diffMs)}, export ${s(r.exportMs)}`,
    },
  ];
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  for (const row of describeConfigAsCode(await benchConfigAsCode())) console.log(`${row.benchmark}: ${row.result}`);
}
