// Starts the real program in-process on ephemeral ports, against the test's own store and Redis prefix.
// PostgreSQL and Redis are used when DATABASE_URL / REDIS_URL are set (CI), embedded PGlite and in-process feed otherwise.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import { loadConfig } from '../../src/shared/config.ts';
import { createLogger } from '../../src/shared/log.ts';
import { startNode, type NodeHandle, type NodeOptions } from '../../src/main.ts';
import { testSchemaName } from './db.ts';
import { copyPgliteTemplate } from './pglite-template.ts';

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface TestNode {
  node: NodeHandle;
  controlUrl: string;
  adminKey: string;
  env: Record<string, string>;
  api<T = any>(method: string, path: string, opts?: { key?: string | null; body?: unknown; raw?: string; headers?: Record<string, string> }): Promise<ApiResponse<T>>;
  /** Creates a user through the admin API and returns their id, account and key. */
  createUser(plan?: string, email?: string): Promise<{ id: number; account_id: number; api_key: string; email: string }>;
  close(): Promise<void>;
}

/** What a test reads of the node beyond its API: `logLines` collects its log as parsed JSON lines (at `logLevel`, default info). */
export interface TestNodeExtras {
  logLines?: Record<string, unknown>[];
  logLevel?: string;
}

export async function startTestNode(overrides: Record<string, string> = {}, options: NodeOptions = {}, extras: TestNodeExtras = {}): Promise<TestNode> {
  const dataDir = await mkdtemp(join(tmpdir(), 'edge-test-'));
  const adminKey = `test-admin-${randomBytes(16).toString('hex')}`;
  const env: Record<string, string> = {
    EDGE_CONTROL_PORT: '0',
    EDGE_HTTP_PORT: '0',
    EDGE_HTTPS_PORT: '0',
    EDGE_OPS_PORT: '0',
    EDGE_RELAY_PORT: '0',
    EDGE_DNS_PORT: '0',
    EDGE_BIND_HOST: '127.0.0.1',
    EDGE_DATA_DIR: dataDir,
    EDGE_ADMIN_API_KEY: adminKey,
    EDGE_LOG_LEVEL: process.env.EDGE_TEST_LOG_LEVEL ?? 'silent',
    EDGE_FEED_PUBLISH_POLL_MS: '200',
    // The suite keeps both cores busy: a store thread at the lowest priority would wait behind every other test.
    EDGE_STORE_THREAD_NICE: '0',
  };
  if (process.env.DATABASE_URL) {
    env.DATABASE_URL = process.env.DATABASE_URL;
    env.EDGE_DATABASE_SCHEMA = testSchemaName();
  }
  if (process.env.REDIS_URL) {
    env.REDIS_URL = process.env.REDIS_URL;
    env.EDGE_REDIS_PREFIX = `test:${randomBytes(6).toString('hex')}:`;
  }
  Object.assign(env, overrides);
  const config = loadConfig(env);
  if (!config.databaseUrl) await copyPgliteTemplate(join(config.dataDir, 'pglite'));
  const lines = extras.logLines;
  const logger = lines === undefined ? createLogger(config.logLevel) : createLogger(extras.logLevel ?? 'info', {}, { write: (line: string) => void lines.push(JSON.parse(line)) });
  const node = await startNode(config, logger, options);
  const controlUrl = `http://127.0.0.1:${node.control!.port}`;

  async function api<T>(method: string, path: string, opts: { key?: string | null; body?: unknown; raw?: string; headers?: Record<string, string> } = {}) {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    const key = opts.key === undefined ? adminKey : opts.key;
    if (key !== null) headers['x-api-key'] = key;
    let body: string | undefined = opts.raw;
    if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(controlUrl + path, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* plain-text bodies stay text */
    }
    return { status: res.status, headers: res.headers, body: parsed as T, text };
  }

  let users = 0;
  return {
    node,
    controlUrl,
    adminKey,
    env,
    api,
    async createUser(plan = 'free', email = `user${++users}-${randomBytes(3).toString('hex')}@example.test`) {
      const res = await api<{ id: number; account_id: number; api_key: string; email: string }>('POST', '/v1/admin/users', { body: { email, plan } });
      if (res.status !== 201) throw new Error(`createUser failed: ${res.status} ${res.text}`);
      return res.body;
    },
    async close() {
      await node.close();
      if (env.EDGE_DATABASE_SCHEMA) {
        const client = new pg.Client({ connectionString: env.DATABASE_URL });
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS "${env.EDGE_DATABASE_SCHEMA}" CASCADE`);
        await client.end();
      }
      if (env.EDGE_REDIS_PREFIX) await deleteRedisPrefix(env.REDIS_URL, env.EDGE_REDIS_PREFIX);
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

export async function deleteRedisPrefix(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
      if (keys.length) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}
