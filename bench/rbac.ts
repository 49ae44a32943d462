// Micro-benchmark of the RBAC decision (src/edge/rbac/policy.ts, src/edge/stages/rbac.ts): a client holding 5 roles
// with 20 path patterns in all, on a request only the last role decides, so every pattern of every role is tried.
// Target: under 5 µs per request; reported, not asserted. Beside it: the same through the whole stage (client lookup,
// headers stamped), a path with `;` parameters (judged twice), and a rate-limited role (the token bucket).
// `npx tsx bench/rbac.ts` (a few seconds); `npm run bench` includes it.
import type http from 'node:http';
import { pathToFileURL } from 'node:url';
import { Bench } from 'tinybench';
import type { RequestContext } from '../src/edge/pipeline/stage.ts';
import { compilePolicy, decide } from '../src/edge/rbac/policy.ts';
import { rbac } from '../src/edge/stages/rbac.ts';
import type { RbacConfig, RbacPermissionsConfig, RbacRoleConfig } from '../src/shared/snapshot.ts';
import { endpointConfig } from '../test/helpers/endpoint-config.ts';
import type { Row } from './proxy.ts';

function role(id: number, priority: number, permissions: Partial<RbacPermissionsConfig>): RbacRoleConfig {
  return {
    id,
    name: `role-${id}`,
    priority,
    permissions: { allowed_methods: [], denied_methods: [], allowed_paths: [], denied_paths: [], rate_limit_rps: 0, headers: {}, ...permissions },
  };
}

/** Five roles, twenty patterns (exact, prefix, `*` and `**` globs); a GET under /api/ is decided by the fifth. */
function roles(rps = 0): RbacRoleConfig[] {
  return [
    role(1, 50, { denied_methods: ['TRACE'], denied_paths: ['/admin/*', '/internal/**/dump', '/debug', '/v*/secrets'] }),
    role(2, 40, { allowed_methods: ['GET', 'POST', 'PUT'], allowed_paths: ['/api/*/write', '/api/v1/orders/*/lines', '/carts/**/items', '/uploads/*'] }),
    role(3, 30, { allowed_methods: ['GET', 'DELETE'], allowed_paths: ['/api/v1/orders/*/cancel', '/sessions/*', '/api/**/purge', '/tmp'] }),
    role(4, 20, { allowed_methods: ['GET', 'OPTIONS'], denied_paths: ['/api/v1/*/private', '/reports/**/raw'], allowed_paths: ['/cors/*', '/api/v2/*'] }),
    role(5, 10, { allowed_methods: ['GET', 'HEAD'], allowed_paths: ['/docs/**', '/static/*/assets', '/health', '/api/*'], rate_limit_rps: rps, headers: { 'x-tier': 'reader' } }),
  ];
}

const config = (rps = 0): RbacConfig => ({
  roles: roles(rps),
  clients: [{ id: 1, identifier: 'bench-client', status: 'active', email: null, identities: [], role_ids: [1, 2, 3, 4, 5] }],
  invites: [],
  self_registration: { enabled: false, allowed_email_domains: [] },
});

const PATH = '/api/v1/items/42';

function context(path: string): RequestContext {
  const endpoint = endpointConfig();
  return {
    req: { headers: {} } as http.IncomingMessage,
    res: {} as http.ServerResponse,
    endpoint,
    method: 'GET',
    host: endpoint.hostname,
    authority: endpoint.hostname,
    path,
    query: '',
    clientIp: '198.51.100.20',
    secure: true,
    upstreamHeaders: {},
    visitor: { kind: 'basic', name: 'bench', clientId: 1 },
  };
}

export interface RbacBenchResult {
  name: string;
  /** Mean ns per request. */
  meanNs: number;
}

export async function benchRbac(): Promise<RbacBenchResult[]> {
  const client = compilePolicy(config()).byId.get(1)!;
  const check = decide(client, 'GET', PATH);
  if (!check.allowed || check.role.id !== 5) throw new Error('bench setup: the fifth role must decide');
  const stage = rbac.compile(endpointConfig({ rbac: config() }))!;
  // A huge rate: the bucket is consulted on every request and never runs dry.
  const limited = rbac.compile(endpointConfig({ rbac: config(1_000_000_000) }))!;
  const params = `${PATH};jsessionid=0123456789`;
  if (stage.run(context(PATH)) !== 'next' || stage.run(context(params)) !== 'next' || limited.run(context(PATH)) !== 'next') throw new Error('bench setup: refused');

  let sink = 0;
  const bench = new Bench({ time: 1_000 });
  bench
    .add('decision, 5 roles / 20 patterns, decided by the last role', () => {
      if (decide(client, 'GET', PATH).allowed) sink++;
    })
    .add('rbac stage (client lookup, decision, headers)', () => {
      if (stage.run(context(PATH)) === 'next') sink++;
    })
    .add('rbac stage, path with ; parameters (judged twice)', () => {
      if (stage.run(context(params)) === 'next') sink++;
    })
    .add('rbac stage, deciding role rate-limited (token bucket)', () => {
      if (limited.run(context(PATH)) === 'next') sink++;
    })
    .add('context only (included in the stage lines)', () => {
      if (context(PATH).secure) sink++;
    });
  await bench.run();
  if (sink < 0) console.log(sink);
  return bench.tasks.map((t) => {
    const r = t.result;
    return { name: t.name, meanNs: r && 'latency' in r ? r.latency.mean * 1e6 : Number.NaN };
  });
}

/** The results as rows of the printed table, against the 5 µs target. */
export function describeRbac(results: RbacBenchResult[]): Row[] {
  return results.map((r) => {
    const us = r.meanNs / 1000;
    let result = `${us.toFixed(2)} µs/request`;
    if (!r.name.startsWith('context')) result += us < 5 ? ' (target < 5 µs: met)' : ' (target < 5 µs: NOT met)';
    return { benchmark: `rbac ${r.name}`, result };
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { formatTable } = await import('./proxy.ts');
  console.log(`\n${formatTable(describeRbac(await benchRbac()))}`);
}
