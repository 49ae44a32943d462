// A whole cluster on one machine: control, worker and several edges as separate `edge serve` processes that meet
// only through Redis and PostgreSQL, as in production. `edge cluster`, the fault tests and the soak all start this one.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NodeProcess } from './node-process.ts';
import { startLocalPostgres, startLocalRedis, type LocalPostgres, type LocalRedis } from './services.ts';

export interface LocalClusterOptions {
  /** How many edges (default 3), each in its own region. */
  edges?: number;
  /** The edges' regions, in order (default eu, us, ap, then region-4, ...). */
  regions?: string[];
  /** PostgreSQL to use; absent: a private server is started (PostgreSQL must be installed). */
  databaseUrl?: string;
  /** Redis to use; absent: a private redis-server is started. */
  redisUrl?: string;
  /** Settings for every process (EDGE_PRESENCE_INTERVAL_MS, EDGE_LOG_LEVEL=debug, ...); the launcher's own win. */
  env?: Record<string, string>;
  /** Settings for edges only (applied after `env`). */
  edgeEnv?: Record<string, string>;
  /** Loopback by default; 0.0.0.0 exposes the public ports to the network. */
  bindHost?: string;
  /** Fixed ports, for a cluster a person uses: control on `basePort`, edge i on basePort+10i (+0 http, +1 https, +2 ops, +3 relay). */
  basePort?: number;
}

export interface LocalCluster {
  control: NodeProcess;
  worker: NodeProcess;
  edges: NodeProcess[];
  /** The private servers the launcher started (absent when URLs were given). */
  redis?: LocalRedis;
  postgres?: LocalPostgres;
  redisUrl: string;
  databaseUrl: string;
  adminKey: string;
  /** http://127.0.0.1:<control port> */
  controlUrl: string;
  /** Every process, control first. */
  readonly nodes: NodeProcess[];
  /** Stops every process (SIGTERM), then the private servers, then removes the data directories. */
  stop(): Promise<void>;
}

const DEFAULT_REGIONS = ['eu', 'us', 'ap'];

/** Starts control, worker and the edges, each ready (its `node ready` line read) before the call resolves. */
export async function startLocalCluster(options: LocalClusterOptions = {}): Promise<LocalCluster> {
  const edgeCount = options.edges ?? 3;
  if (!Number.isInteger(edgeCount) || edgeCount < 1 || edgeCount > 16) throw new RangeError('edges must be an integer from 1 to 16');
  const host = options.bindHost ?? '127.0.0.1';
  const dirs: string[] = [];
  const started: NodeProcess[] = [];
  let redis: LocalRedis | undefined;
  let postgres: LocalPostgres | undefined;
  const id = randomBytes(4).toString('hex');
  // A schema of its own, so a cluster on a shared database (CI's) never meets another's rows.
  const schema = options.databaseUrl ? `cluster_${id}` : undefined;

  const cleanup = async () => {
    for (const node of started.reverse()) await node.stop().catch(() => {});
    await redis?.stop();
    await postgres?.stop();
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  };

  try {
    redis = options.redisUrl ? undefined : await startLocalRedis();
    postgres = options.databaseUrl ? undefined : await startLocalPostgres();
    const redisUrl = options.redisUrl ?? redis!.url;
    const databaseUrl = options.databaseUrl ?? postgres!.url;
    const adminKey = `cluster-admin-${randomBytes(16).toString('hex')}`;
    const port = (offset: number) => (options.basePort ? String(options.basePort + offset) : '0');
    const dataDir = async () => {
      const dir = await mkdtemp(join(tmpdir(), 'edge-cluster-'));
      dirs.push(dir);
      return dir;
    };
    // What every process of the cluster shares; a clean base so nothing from the caller's environment leaks in.
    const base: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      REDIS_URL: redisUrl,
      EDGE_REDIS_PREFIX: `cluster:${id}:`,
      EDGE_SECRET_KEY: randomBytes(32).toString('hex'),
      EDGE_BIND_HOST: host,
      EDGE_OPS_BIND_HOST: '127.0.0.1',
      EDGE_LOG_LEVEL: 'info',
      EDGE_STORE_THREAD_NICE: '0',
      ...options.env,
    };
    const db = { DATABASE_URL: databaseUrl, ...(schema ? { EDGE_DATABASE_SCHEMA: schema } : {}) };

    const control = new NodeProcess('control', 'control', {
      ...base,
      ...db,
      EDGE_ROLE: 'control',
      EDGE_NODE_ID: 'control-1',
      EDGE_DATA_DIR: await dataDir(),
      EDGE_ADMIN_API_KEY: adminKey,
      EDGE_CONTROL_PORT: port(0),
    });
    await control.start();
    started.push(control);
    const controlUrl = `http://127.0.0.1:${control.ports.control}`;

    const worker = new NodeProcess('worker', 'worker', { ...base, ...db, EDGE_ROLE: 'worker', EDGE_NODE_ID: 'worker-1', EDGE_DATA_DIR: await dataDir(), WORKER_OPS_BIND_HOST: '127.0.0.1', WORKER_OPS_PORT: port(1) });
    const edges: NodeProcess[] = [];
    for (let i = 0; i < edgeCount; i++) {
      const region = options.regions?.[i] ?? DEFAULT_REGIONS[i] ?? `region-${i + 1}`;
      edges.push(
        new NodeProcess(`edge-${i + 1}`, 'edge', {
          ...base,
          EDGE_ROLE: 'edge',
          EDGE_NODE_ID: `edge-${i + 1}`,
          EDGE_REGION: region,
          EDGE_DATA_DIR: await dataDir(),
          EDGE_CONTROL_URL: controlUrl,
          EDGE_HTTP_PORT: port(10 * (i + 1)),
          EDGE_HTTPS_PORT: port(10 * (i + 1) + 1),
          EDGE_OPS_PORT: port(10 * (i + 1) + 2),
          EDGE_RELAY_PORT: port(10 * (i + 1) + 3),
          EDGE_DNS_PORT: port(10 * (i + 1) + 4),
          ...options.edgeEnv,
        }),
      );
    }
    // The worker and the edges need only control's store and Redis: they start side by side.
    await Promise.all([worker, ...edges].map(async (node) => {
      await node.start();
      started.push(node);
    }));

    const nodes = [control, worker, ...edges];
    return {
      control,
      worker,
      edges,
      redis,
      postgres,
      redisUrl,
      databaseUrl,
      adminKey,
      controlUrl,
      nodes,
      async stop() {
        await cleanup();
        if (schema) await dropSchema(databaseUrl, schema);
      },
    };
  } catch (err) {
    await cleanup();
    if (schema && options.databaseUrl) await dropSchema(options.databaseUrl, schema).catch(() => {});
    throw err;
  }
}

/** The cluster's own schema on a shared database goes with it. */
async function dropSchema(url: string, schema: string): Promise<void> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}
