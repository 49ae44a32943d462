// What one endpoint's compiled policy stages hold in memory and cost to compile, per policy (settings with a rate
// limit and a routing rule; + basic auth; + JWT; + RBAC; all of them): N endpoints compiled with the edge's own
// compileEndpoint in a process of its own, heap + array buffers measured after a full GC. What an edge holds of these
// is its compiled-endpoint cache (EDGE_CACHE_SIZE, 10,000 by default): a reset compiles every config on arrival but
// keeps only the forms of hosts in use (docs/performance.md "Memory at scale"). `npx tsx bench/policy-memory.ts`;
// `npm run bench` includes it.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { compileEndpoint, type CompiledEndpoint } from '../src/edge/compile.ts';
import type { EndpointConfig } from '../src/shared/snapshot.ts';
import { policyEndpoint } from './lib/policy-endpoint.ts';
import { benchFile, TSX } from './lib/procs.ts';
import type { Row } from './proxy.ts';

const HASH = '$2b$10$CwTycUXWue0Thq9StjUM0uJ8.qGLRlhE3hL6pCnbS4cY1S7bW8dbe';

type Variant = 'rate limit + routing rule' | '+ basic auth' | '+ JWT layer' | '+ RBAC (3 roles)' | 'every policy';

function variant(v: Variant, i: number): EndpointConfig {
  const all = policyEndpoint({ id: i + 1, hostname: `e${i}.bench.localhost`, originUrl: `https://o${i % 100}.example.com`, jwksUrl: `https://idp${i % 10}.example.com/jwks.json`, passwordHash: HASH });
  const base = { ...all, auth: undefined, jwt: null, rbac: null };
  if (v === 'rate limit + routing rule') return base;
  if (v === '+ basic auth') return { ...base, auth: all.auth };
  if (v === '+ JWT layer') return { ...base, jwt: all.jwt };
  if (v === '+ RBAC (3 roles)') return { ...base, rbac: all.rbac };
  return all;
}

export interface PolicyMemoryResult {
  variant: Variant;
  /** Heap + array buffers held per compiled endpoint, KiB (after a full GC). */
  kibPerEndpoint: number;
  /** Compile time per endpoint, µs. */
  compileUs: number;
}

function measure(v: Variant, n: number): PolicyMemoryResult {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('policy-memory: run with --expose-gc');
  const configs = Array.from({ length: n }, (_, i) => variant(v, i));
  gc();
  const before = process.memoryUsage();
  const held: CompiledEndpoint[] = [];
  const started = performance.now();
  for (const c of configs) held.push(compileEndpoint(c));
  const compileUs = ((performance.now() - started) * 1000) / n;
  gc();
  const after = process.memoryUsage();
  const bytes = after.heapUsed - before.heapUsed + (after.arrayBuffers - before.arrayBuffers);
  if (held.length !== n) throw new Error('unreachable');
  return { variant: v, kibPerEndpoint: bytes / n / 1024, compileUs };
}

/** Runs the measurement in a child process (a clean heap, --expose-gc). */
export function benchPolicyMemory(n = 500): Promise<PolicyMemoryResult[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--expose-gc', ...TSX, benchFile('policy-memory.ts'), '--json', String(n)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let result: PolicyMemoryResult[] | null = null;
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.startsWith('[')) result = JSON.parse(line) as PolicyMemoryResult[];
    });
    child.once('error', reject);
    child.once('exit', (code) => (result ? resolve(result) : reject(new Error(`policy-memory bench exited with ${code} and no result`))));
  });
}

export function describePolicyMemory(results: PolicyMemoryResult[]): Row[] {
  return results.map((r) => ({
    benchmark: `compiled endpoint, ${r.variant}`,
    result:
      `${r.kibPerEndpoint.toFixed(1)} KiB held, ${r.compileUs.toFixed(0)} µs to compile; a full compiled-endpoint cache (10,000): ` +
      `${((r.kibPerEndpoint * 10_000) / 1024).toFixed(0)} MiB; compiling 100k at a reset: ${((r.compileUs * 100_000) / 1e6).toFixed(1)} s of CPU`,
  }));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const n = Number(process.argv[process.argv.indexOf('--json') + 1] ?? 500) || 500;
  const variants: Variant[] = ['rate limit + routing rule', '+ basic auth', '+ JWT layer', '+ RBAC (3 roles)', 'every policy'];
  if (process.argv.includes('--json')) console.log(JSON.stringify(variants.map((v) => measure(v, n))));
  // Started as `npx tsx bench/policy-memory.ts`, without --expose-gc: measure in a child that has it.
  else for (const row of describePolicyMemory(await benchPolicyMemory(n))) console.log(`${row.benchmark}: ${row.result}`);
}
