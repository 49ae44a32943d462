// `edge agent --transport` and EDGE_TRANSPORT as an operator uses them: the real program against an edge's tunnel
// listener, the transport it chose on its Forwarding line and on the edge's session, the data connections it keeps,
// and bad values refused.
import { describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { TunnelRegistry, type AgentSession } from '../../src/edge/tunnels/registry.ts';
import { TunnelServer } from '../../src/edge/tunnels/tunnel-server.ts';
import { eventually } from '../helpers/eventually.ts';
import { BIN, cleanEnv, run } from '../helpers/serve-process.ts';

// A hang guard, not a timing assertion: each case starts `edge agent` processes (tsx start-up takes seconds on a
// loaded machine).
const LIMIT = { timeout: 90_000 };

async function startEdge(t: TestContext) {
  const endpoint = { uuid: randomUUID(), hostname: 'cli.edge.test', public_url: 'http://cli.edge.test' };
  const registry = new TunnelRegistry();
  const tunnels = new TunnelServer({ authorize: async () => ({ ok: true, endpoint }), registry, region: 'local', node: 'edge-test' });
  const server = http.createServer();
  tunnels.attach(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(async () => {
    await tunnels.close(1_000);
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { endpoint, registry, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** Runs `edge agent` until its Forwarding line and the edge's session; returns both. */
async function agentLine(t: TestContext, args: string[], env: Record<string, string> = {}): Promise<{ line: string; session: AgentSession }> {
  const edge = await startEdge(t);
  const connected = once(edge.registry, 'connect') as Promise<[AgentSession]>;
  const child = spawn(process.execPath, [BIN, 'agent', 'http', '3000', '--edge', edge.url, '--endpoint', edge.endpoint.uuid, ...args], {
    env: { ...cleanEnv({}), EDGE_API_KEY: 'edge_test_key', EDGE_LOG_LEVEL: 'silent', ...env },
  });
  t.after(() => void child.kill('SIGKILL'));
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const line = await new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`agent exited with ${code}: ${stderr}`)));
    createInterface({ input: child.stdout }).on('line', (l) => {
      if (l.startsWith('Forwarding ')) resolve(l);
    });
  });
  const [session] = await connected;
  return { line, session };
}

describe('edge agent --transport', () => {
  it('uses the raw transport by default and says so', LIMIT, async (t) => {
    const { line, session } = await agentLine(t, []);
    assert.match(line, /^Forwarding http:\/\/cli\.edge\.test -> 3000 \(raw transport\)$/);
    assert.equal(session.transport, 'raw');
  });

  it('--transport ws and EDGE_TRANSPORT=ws use the WebSocket transport; the flag wins over the variable', LIMIT, async (t) => {
    const flag = await agentLine(t, ['--transport', 'ws']);
    assert.match(flag.line, /\(ws transport\)$/);
    assert.equal(flag.session.transport, 'ws');
    const variable = await agentLine(t, [], { EDGE_TRANSPORT: 'ws' });
    assert.equal(variable.session.transport, 'ws');
    const both = await agentLine(t, ['--transport', 'raw'], { EDGE_TRANSPORT: 'ws' });
    assert.equal(both.session.transport, 'raw');
  });

  it('refuses an unknown transport with a usage error (exit 2), before connecting anywhere', LIMIT, async () => {
    for (const [args, env] of [
      [['--transport', 'quic'], {}],
      [[], { EDGE_TRANSPORT: 'WS ' }],
    ] as const) {
      const result = await run(['agent', 'http', '3000', '--edge', 'http://127.0.0.1:1', ...args], { ...cleanEnv({}), EDGE_API_KEY: 'k', ...env });
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, /--transport must be auto, raw or ws, got "/);
    }
  });
});

describe('edge agent --data-connections', () => {
  it('keeps 8 spare data connections by default; --data-connections and EDGE_DATA_CONNECTIONS set the number, 0 offers none', LIMIT, async (t) => {
    // Four agents, each against its own edge, started together: one process start-up instead of four in a row.
    const [byDefault, flag, variable, none] = await Promise.all([
      agentLine(t, []),
      agentLine(t, ['--data-connections', '3'], { EDGE_DATA_CONNECTIONS: '5' }),
      agentLine(t, [], { EDGE_DATA_CONNECTIONS: '2' }),
      agentLine(t, ['--data-connections', '0']),
    ]);
    assert.ok(byDefault.session.data, 'the edge granted data connections');
    await eventually(async () => (byDefault.session.data?.size === 8 ? true : undefined));
    await eventually(async () => (flag.session.data?.size === 3 ? true : undefined));
    await eventually(async () => (variable.session.data?.size === 2 ? true : undefined));
    assert.equal(none.session.data, null);
  });

  it('refuses a value that is not a whole number from 0 to 1024 with a usage error (exit 2)', LIMIT, async () => {
    for (const [args, env] of [
      [['--data-connections=-1'], {}],
      [['--data-connections', '1025'], {}],
      [[], { EDGE_DATA_CONNECTIONS: 'many' }],
    ] as const) {
      const result = await run(['agent', 'http', '3000', '--edge', 'http://127.0.0.1:1', ...args], { ...cleanEnv({}), EDGE_API_KEY: 'k', ...env });
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, /--data-connections must be a whole number from 0 to 1024, got "/);
    }
  });

  it('refuses an EDGE_LOG_FORMAT other than auto, text or json with a usage error (exit 2)', LIMIT, async () => {
    const result = await run(['agent', 'http', '3000', '--edge', 'http://127.0.0.1:1'], { ...cleanEnv({}), EDGE_API_KEY: 'k', EDGE_LOG_FORMAT: 'yaml' });
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /EDGE_LOG_FORMAT must be auto, text or json, got "yaml"/);
  });
});
