// An apply cut off half-way by a control node killed mid-apply reports what was done and what was not, and the
// next apply against the restarted node (same store: a PGlite directory) finishes the job with an empty diff after.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { cleanEnv, serveNode, type ServedNode } from '../helpers/serve-process.ts';
import { configCommand } from '../../src/config-as-code/command.ts';
import { scratch, type Ran } from './support.ts';

/** Forwards HTTP to `target()`; calls `onWrite(n)` before forwarding the n-th request that is not a GET. */
function countingProxy(target: () => number, onWrite: (n: number) => void): Promise<Server> {
  let writes = 0;
  const server = createServer((req, res) => {
    if (req.method !== 'GET') onWrite(++writes);
    const upstream = request({ host: '127.0.0.1', port: target(), method: req.method, path: req.url, headers: req.headers }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    // The node is gone: the client sees the connection dropped, as it would talking to the node itself.
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

async function apply(url: string, key: string, args: string[]): Promise<Ran> {
  let stdout = '';
  let stderr = '';
  const code = await configCommand('apply', args, {
    stdout: (s) => void (stdout += s),
    stderr: (s) => void (stderr += s),
    env: { EDGE_API_KEY: key, EDGE_CONTROL_URL: url },
  });
  return { code, stdout, stderr };
}

describe('an apply interrupted by a killed control node', () => {
  let files: Awaited<ReturnType<typeof scratch>>;
  let node: ServedNode | undefined;
  let proxy: Server | undefined;
  const adminKey = `admin-${randomBytes(12).toString('hex')}`;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    files = await scratch();
    env = cleanEnv({ EDGE_DATA_DIR: files.dir, EDGE_ADMIN_API_KEY: adminKey, EDGE_LOG_LEVEL: 'info' });
  });
  after(async () => {
    node?.child.kill('SIGKILL');
    await node?.exited;
    proxy?.close();
    await files?.remove();
  });

  it('reports what was done and what was not, and the next apply completes it', async () => {
    node = await serveNode(env);
    const direct = `http://127.0.0.1:${node.control}`;
    const user = await (await fetch(`${direct}/v1/admin/users`, { method: 'POST', headers: { 'x-api-key': adminKey, 'content-type': 'application/json' }, body: JSON.stringify({ email: 'ops@example.test', plan: 'business' }) })).json();

    const doc = {
      version: 1,
      endpoints: Object.fromEntries(
        Array.from({ length: 20 }, (_, i) => [`cut-${i}`, { tags: ['cut'], rate_limits: { main: { requests_per_window: 10, window_size_seconds: 60, action: 'block' } } }]),
      ),
    };
    const file = await files.file('cut.yaml', doc);
    let killed: Promise<number | null> | undefined;
    const first = node;
    proxy = await countingProxy(
      () => first.control!,
      (n) => {
        // Past the first 16 parallel calls, so some have been answered and some not.
        if (n === 30) {
          first.child.kill('SIGKILL');
          killed = first.exited;
        }
      },
    );
    const cut = await apply(`http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, user.api_key, ['-f', file]);
    assert.ok(killed, 'the node was killed mid-apply');
    await killed;
    assert.equal(cut.code, 1, cut.stdout);
    assert.match(cut.stdout, /Apply: \d+ created, 0 updated, 0 deleted, [1-9]\d* failed\./);
    assert.match(cut.stdout, /failed: create .*: unreachable/);
    assert.match(cut.stdout, /Run the apply again to finish/);
    const done = [...cut.stdout.matchAll(/^created (endpoint|rate limit) /gm)].length;
    assert.ok(done > 0 && done < 40, `some of the 40 resources were created (${done})`);

    node = await serveNode(env);
    const again = `http://127.0.0.1:${node.control}`;
    const second = await apply(again, user.api_key, ['-f', file]);
    assert.equal(second.code, 0, second.stdout);
    const created = Number(/Apply: (\d+) created/.exec(second.stdout)![1]);
    // An endpoint created before the kill whose settings or rules were cut off is completed, not created again.
    assert.ok(created + done >= 40 && created < 40, second.stdout);
    const diff = await configCommand('diff', ['-f', file], { stdout: () => {}, stderr: () => {}, env: { EDGE_API_KEY: user.api_key, EDGE_CONTROL_URL: again } });
    assert.equal(diff, 0);
    const list = await (await fetch(`${again}/v1/endpoints?page_size=100`, { headers: { 'x-api-key': user.api_key } })).json();
    assert.equal(list.total, 20);
  });
});
