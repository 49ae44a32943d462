// Shared setup of the configuration-as-code tests: a node with a business user, the commands run in-process with
// their output captured (the same code `edge diff|apply|export` runs), and a document naming every resource kind.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import bcrypt from 'bcrypt';
import { stringify } from 'yaml';
import { configCommand } from '../../src/config-as-code/command.ts';
import { createCa } from '../helpers/certs.ts';
import { after, before } from 'node:test';
import { nodeWithOwner, type User } from '../helpers/endpoint-api.ts';
import type { TestNode } from '../helpers/node.ts';

export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `edge <command> …args` against the node as `key`, with `env` added to the environment. */
export async function edge(t: TestNode, key: string, command: 'diff' | 'apply' | 'export', args: string[], env: Record<string, string> = {}): Promise<Ran> {
  let stdout = '';
  let stderr = '';
  const code = await configCommand(command, args, {
    stdout: (s) => void (stdout += s),
    stderr: (s) => void (stderr += s),
    env: { EDGE_API_KEY: key, EDGE_CONTROL_URL: t.controlUrl, ...env },
  });
  return { code, stdout, stderr };
}

/** A scratch directory for files; removed by the returned function. */
export interface Scratch {
  dir: string;
  file: (name: string, content: unknown) => Promise<string>;
  remove: () => Promise<void>;
}

export async function scratch(): Promise<Scratch> {
  const dir = await mkdtemp(join(tmpdir(), 'edge-cac-'));
  return {
    dir,
    file: async (name, content) => {
      const path = join(dir, name);
      await writeFile(path, typeof content === 'string' ? content : name.endsWith('.json') ? JSON.stringify(content) : stringify(content));
      return path;
    },
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

/** The secrets the full document references, as the environment an apply runs with. */
export const SECRETS = {
  WEBHOOK_SECRET: 'whsec-0123456789abcdef',
  GOOGLE_SECRET: 'google-client-secret-1',
  BOB_PASSWORD: 'bob-password-1',
  ALERT_SECRET: 'alert-signing-secret-0123',
};

/** A document with every resource kind the format covers, on endpoints of `prefix` under the platform domain. */
export async function fullDocument(prefix: string): Promise<Record<string, any>> {
  const ca = await createCa('Config CA');
  const aliceHash = await bcrypt.hash('alice-password', 10);
  return {
    version: 1,
    endpoints: {
      [`${prefix}-web`]: {
        tags: ['team-a', 'web'],
        origin_url: 'https://origin.example.com/app',
        capture: { enabled: true, level: 'metadata' },
        ports: { tcp: 24001 },
        mtls: { mode: 'optional', ca_bundle_pem: ca.certPem },
        health_check: { enabled: true, path: '/healthz', interval_seconds: 120 },
        auth: {
          mode: 'basic',
          realm: 'Staff',
          enforce_https: true,
          session_ttl_seconds: 3600,
          basic_users: [
            { username: 'alice', password_hash: aliceHash },
            { username: 'bob', password: '${BOB_PASSWORD}' },
          ],
          jwt: { jwks_url: 'https://login.example.com/.well-known/jwks.json', issuer: 'https://login.example.com/', audience: 'api', claim_headers: { sub: 'X-User' } },
          webhook: { header: 'X-Hub-Signature-256', algo: 'sha256', prefix: 'sha256=', secret: '${WEBHOOK_SECRET}' },
        },
        rbac_roles: {
          admin: { description: 'Everything', priority: 10, permissions: { allowed_methods: ['*'], allowed_paths: ['/*'], headers: { 'x-role': 'admin' } } },
          reader: { is_default: true, permissions: { allowed_methods: ['GET'], allowed_paths: ['/api/*'], rate_limit_rps: 5 } },
        },
        rate_limits: {
          'api-burst': {
            requests_per_window: 100,
            window_size_seconds: 60,
            action: 'block',
            priority: 1,
            tags: ['team-a'],
            conditions: [
              { type: 'path', operator: 'prefix', value: '/api' },
              { type: 'method', operator: 'in', value: 'POST,PUT', logical_operator: 'AND' },
            ],
          },
          'login': { requests_per_window: 5, window_size_seconds: 300, action: 'throttle', scope: 'cluster', tags: ['team-a'] },
        },
        routing_rules: {
          canary: { priority: 5, target_agent_tags: ['canary'], conditions: [{ condition_type: 'header', condition_key: 'x-canary', pattern: '1' }], tags: ['team-a'] },
          legacy: { enabled: false, target_origin_url: 'https://legacy.example.com', conditions: [{ condition_type: 'path', pattern: '/old/**', condition_key: 'glob' }] },
        },
        alerts: {
          'web-errors': {
            metric: 'error_rate',
            comparison: 'gt',
            threshold: 0.05,
            window_seconds: 300,
            channels: [{ type: 'webhook', url: 'https://hooks.example.com/alerts', secret: '${ALERT_SECRET}' }, { type: 'email', to: 'ops@example.com' }],
            tags: ['team-a'],
          },
        },
      },
      [`${prefix}-sso`]: {
        tags: ['team-b'],
        oauth_providers: {
          google: { kind: 'oidc', issuer: 'https://accounts.example.com', client_id: 'client-1', client_secret: '${GOOGLE_SECRET}', allowed_domains: ['example.com'] },
          github: { kind: 'oauth2', issuer: 'https://github.example.com', client_id: 'gh', client_secret: '${GOOGLE_SECRET}', authorization_url: 'https://github.example.com/login/oauth/authorize', token_url: 'https://github.example.com/login/oauth/access_token', userinfo_url: 'https://api.github.example.com/user', enabled: false },
        },
        auth: { mode: 'oauth', allowed_redirects: ['/after'], enabled_providers: ['google'] },
      },
    },
    alerts: {
      'all-down': { metric: 'endpoint_down', comparison: 'gt', threshold: 0, channels: [{ type: 'email', to: 'oncall@example.com' }] },
    },
  };
}

/** The environment an exported document's references need: each named for the secret it stands for. */
export function exportedSecrets(references: string[]): Record<string, string> {
  const value = (name: string) =>
    name.endsWith('_WEBHOOK') ? SECRETS.WEBHOOK_SECRET : name.endsWith('_CLIENT_SECRET') ? SECRETS.GOOGLE_SECRET : SECRETS.ALERT_SECRET;
  return Object.fromEntries(references.map((r) => [r, value(r)]));
}

/** The references `edge export` listed on stderr. */
export const referencesIn = (stderr: string) => [...stderr.matchAll(/EDGE_SECRET_[A-Z0-9_]+/g)].map((m) => m[0]);

export interface Suite {
  t: TestNode;
  owner: User;
  files: Scratch;
}

/** A describe's node with a business user and a scratch directory, started before its tests and removed after. */
export function configSuite(env?: Record<string, string>): Suite {
  const suite = {} as Suite;
  before(async () => {
    ({ t: suite.t, owner: suite.owner } = await nodeWithOwner(env));
    suite.files = await scratch();
  });
  after(async () => {
    await suite.t?.close();
    await suite.files?.remove();
  });
  return suite;
}
