// The `edge` command as an operator meets it: `edge serve` on embedded defaults, the admin CLI against the store,
// graceful shutdown, and a clear refusal of bad configuration.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { BIN, cleanEnv, run, serveNode } from './helpers/serve-process.ts';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { copyPgliteTemplate } from './helpers/pglite-template.ts';

describe('edge CLI', () => {
  const dirs: string[] = [];
  const children: ChildProcess[] = [];
  after(async () => {
    for (const c of children) c.kill('SIGKILL');
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  async function dataDir(): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), 'edge-cli-'));
    dirs.push(dir);
    await copyPgliteTemplate(join(dir, 'pglite'));
    return dir;
  }

  it('serves on embedded defaults, prints a first admin key once, and shuts down cleanly on SIGTERM', async () => {
    const dir = await dataDir();
    const node = await serveNode(cleanEnv({ EDGE_DATA_DIR: dir, EDGE_CONTROL_PORT: '0' }));
    children.push(node.child);
    assert.ok(node.control! > 0);
    assert.match(node.adminKey ?? '', /^edge_[0-9a-f]{16}_/);
    const base = `http://127.0.0.1:${node.control}`;

    const anonymous = await fetch(`${base}/v1/me`);
    assert.equal(anonymous.status, 401);
    assert.deepEqual(await anonymous.json(), { error: 'Missing or invalid API key', code: 'unauthorized' });

    const created = await fetch(`${base}/v1/admin/users`, {
      method: 'POST',
      headers: { 'x-api-key': node.adminKey!, 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'first@example.test', plan: 'free' }),
    });
    assert.equal(created.status, 201);
    const user = await created.json();
    assert.equal((await fetch(`${base}/v1/me`, { headers: { 'x-api-key': user.api_key } })).status, 200);

    node.child.kill('SIGTERM');
    assert.equal(await node.exited, 0);

    // A second start on the same store generates no new key: the first one is still the admin's.
    const again = await serveNode(cleanEnv({ EDGE_DATA_DIR: dir, EDGE_CONTROL_PORT: '0' }));
    children.push(again.child);
    assert.equal(again.adminKey, undefined);
    assert.equal((await fetch(`http://127.0.0.1:${again.control}/v1/me`, { headers: { 'x-api-key': node.adminKey! } })).status, 200);
    again.child.kill('SIGINT');
    assert.equal(await again.exited, 0);
  });

  it('creates users offline with `edge admin`, and the served API accepts their keys', async () => {
    const dir = await dataDir();
    const env = cleanEnv({ EDGE_DATA_DIR: dir, EDGE_CONTROL_PORT: '0', EDGE_ADMIN_API_KEY: 'cli-admin-key-0123456789' });
    const created = await run(['admin', 'create-user', '--email', 'ops@example.test', '--plan', 'pro'], env);
    assert.equal(created.code, 0, created.stderr);
    const user = JSON.parse(created.stdout);
    assert.equal(user.plan, 'pro');

    const duplicate = await run(['admin', 'create-user', '--email', 'ops@example.test', '--plan', 'pro'], env);
    assert.notEqual(duplicate.code, 0);
    const badPlan = await run(['admin', 'create-user', '--email', 'x@example.test', '--plan', 'gold'], env);
    assert.equal(badPlan.code, 2);
    assert.match(badPlan.stderr, /unknown plan "gold"/);

    const node = await serveNode(env);
    children.push(node.child);
    const me = await fetch(`http://127.0.0.1:${node.control}/v1/me`, { headers: { 'x-api-key': user.api_key } });
    assert.equal((await me.json()).active_account.plan, 'pro');
    const admin = await fetch(`http://127.0.0.1:${node.control}/v1/me`, { headers: { 'x-api-key': 'cli-admin-key-0123456789' } });
    assert.equal((await admin.json()).user.is_admin, true);
    node.child.kill('SIGTERM');
    await node.exited;
  });

  it('runs an agent that prints its public URL and serves through the edge; a refused agent exits 3', async () => {
    const dir = await dataDir();
    const env = cleanEnv({ EDGE_DATA_DIR: dir, EDGE_CONTROL_PORT: '0', EDGE_HTTP_PORT: '0', EDGE_HTTPS_PORT: '0', EDGE_ADMIN_API_KEY: 'cli-admin-key-agent-0123456789' });
    const node = await serveNode(env);
    children.push(node.child);
    const edgePort = node.http!;
    const base = `http://127.0.0.1:${node.control}`;
    const user = await (
      await fetch(`${base}/v1/admin/users`, {
        method: 'POST',
        headers: { 'x-api-key': 'cli-admin-key-agent-0123456789', 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'agent@example.test', plan: 'free' }),
      })
    ).json();
    const service = http.createServer((_req, res) => res.end('hello from the service'));
    await new Promise<void>((r) => service.listen(0, '127.0.0.1', r));
    const servicePort = (service.address() as AddressInfo).port;

    const agent = spawn(process.execPath, [BIN, 'agent', 'http', String(servicePort), '--edge', `http://127.0.0.1:${edgePort}`], {
      env: { ...cleanEnv({}), EDGE_API_KEY: user.api_key, EDGE_LOG_LEVEL: 'silent' },
    });
    children.push(agent);
    const hostname = await new Promise<string>((resolve, reject) => {
      agent.on('exit', (code) => reject(new Error(`agent exited with ${code}`)));
      createInterface({ input: agent.stdout! }).on('line', (line) => {
        const m = /^Forwarding https:\/\/(\S+) -> /.exec(line);
        if (m) resolve(m[1]);
      });
    });
    const res = await new Promise<string>((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port: edgePort, path: '/', headers: { host: hostname }, agent: false }, (r) => {
          let body = '';
          r.on('data', (d) => (body += d));
          r.on('end', () => resolve(body));
        })
        .on('error', reject);
    });
    assert.equal(res, 'hello from the service');
    agent.kill('SIGTERM');
    service.close();

    // The free plan has no tcp tunnels: the edge refuses, the agent says why and exits 3.
    const refused = await run(['agent', 'tcp', String(servicePort), '--edge', `http://127.0.0.1:${edgePort}`, '--api-key', user.api_key], cleanEnv({ EDGE_LOG_LEVEL: 'silent' }));
    assert.equal(refused.code, 3);
    assert.match(refused.stderr, /protocol_not_allowed/);
    node.child.kill('SIGTERM');
    await node.exited;
  });

  it('refuses bad configuration with exit status 2 and the setting named', async () => {
    const res = await run(['serve'], cleanEnv({ EDGE_CONTROL_PORT: 'eighty' }));
    assert.equal(res.code, 2);
    assert.match(res.stderr, /EDGE_CONTROL_PORT must be an integer/);
    const role = await run(['serve', '--role', 'edge'], cleanEnv({ EDGE_CONTROL_PORT: '0' }));
    assert.notEqual(role.code, 0);
    assert.match(role.stderr, /needs (REDIS_URL|EDGE_SECRET_KEY)/);
    // The OTEL_* variables are read as tracing starts, after the node's own settings: refused the same way, one line.
    const otel = await run(['serve'], cleanEnv({ EDGE_CONTROL_PORT: '0', EDGE_HTTP_PORT: '0', EDGE_HTTPS_PORT: '0', EDGE_OPS_PORT: '0', OTEL_EXPORTER_OTLP_ENDPOINT: 'notaurl' }));
    assert.equal(otel.code, 2);
    assert.match(otel.stderr, /^edge: configuration error: OTEL_EXPORTER_OTLP_ENDPOINT: "notaurl" is not a URL$/m);
    assert.doesNotMatch(otel.stderr, /\n\s+at /, 'no stack trace');
  });

  it('refuses a bad `edge agent deploy` command line with exit status 2, naming what is wrong', async () => {
    const uuid = '0b7e3f62-5a2d-4c47-9a51-2f5d4a8e0c11';
    const env = cleanEnv({ EDGE_API_KEY: 'edge_test_key' });
    const cases: Array<[string[], RegExp]> = [
      [['agent', 'deploy'], /give the application's uuid/],
      [['agent', 'deploy', 'not-a-uuid', '--dir', '/tmp/x'], /give the application's uuid/],
      [['agent', 'deploy', uuid], /--dir is required/],
      [['agent', 'deploy', uuid, '--dir', '/tmp/x', '--keep-releases', '0'], /--keep-releases must be a whole number from 1 to 50/],
      [['agent', 'deploy', uuid, '--dir', '/tmp/x', '--build-timeout', '1.5'], /--build-timeout must be a whole number of seconds/],
      [['agent', 'deploy', uuid, '--dir', '/tmp/x', '--health-timeout', '0'], /--health-timeout must be a whole number of seconds/],
      [['agent', 'deploy', uuid, '--dir', '/tmp/x', '--transport', 'carrier-pigeon'], /--transport must be auto, raw or ws/],
    ];
    for (const [args, message] of cases) {
      const res = await run(args, env);
      assert.equal(res.code, 2, `${args.join(' ')}: ${res.stderr}`);
      assert.match(res.stderr, message, args.join(' '));
    }
    const help = await run(['agent', 'deploy', '--help'], env);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /--keep-releases/);
  });

  it('prints help', async () => {
    const res = await run(['--help'], cleanEnv({}));
    assert.equal(res.code, 0);
    assert.match(res.stdout, /edge <command>/);
  });
});
