// What `edge agent` prints (src/agent/console.ts): JSON log lines with one `component` key when stdout is not a
// terminal, readable status lines and warnings when it is (a stand-in stream says it is a TTY).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { Agent } from '../../src/agent/agent.ts';
import { agentConsole, publicAddress, textLine, type ConsoleOutput } from '../../src/agent/console.ts';
import type { Welcome } from '../../src/shared/tunnel/protocol.ts';

/** An output that keeps what was written, a terminal or not. */
function output(isTTY: boolean): ConsoleOutput & { text: () => string } {
  let text = '';
  return { isTTY, write: (s: string) => void (text += s), text: () => text };
}

/** A port nothing listens on: the agent's dial is refused at once, and it logs and reconnects. */
async function closedPort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

/** A real agent against a closed port until its first reconnect, its console attached as the CLI does. */
async function firstReconnect(out: ConsoleOutput, level?: string): Promise<void> {
  const terminal = agentConsole({ out, level, now: () => new Date(2026, 10, 28, 12, 34, 56) });
  const agent = new Agent({ edgeUrl: `http://127.0.0.1:${await closedPort()}`, apiKey: 'k', protocol: 'http', target: 3000, agentId: 'a1', backoff: { initialMs: 1, maxMs: 2 }, logger: terminal.logger });
  agent.on('reconnecting', (info) => terminal.reconnecting(info));
  const reconnecting = once(agent, 'reconnecting');
  agent.start().catch(() => {});
  await reconnecting;
  await agent.stop(0);
}

describe('the agent prints raw JSON log lines (with a duplicate component key) to a person terminal (issue 20 item 13)', () => {
  it('not a terminal: JSON lines, each with one component key', async () => {
    const out = output(false);
    await firstReconnect(out);
    const lines = out.text().trim().split('\n');
    assert.ok(lines.length > 0);
    for (const line of lines) {
      const entry = JSON.parse(line);
      assert.equal(line.match(/"component":/g)?.length, 1, line);
      assert.equal(entry.component, 'agent');
      assert.equal(entry.agent, 'a1');
    }
    assert.ok(lines.some((l) => JSON.parse(l).msg === 'reconnecting'));
  });

  it('a terminal: readable status lines and log lines, no JSON', async () => {
    const out = output(true);
    await firstReconnect(out, 'info');
    const lines = out.text().trim().split('\n');
    for (const line of lines) assert.doesNotMatch(line, /^\{/, line);
    assert.ok(lines.some((l) => /^Reconnecting in \d+\.\d s \(attempt 1\): \S/.test(l)), out.text());
    assert.ok(lines.some((l) => /^12:34:56 INFO {2}reconnecting reason=/.test(l)), out.text());
    // At the default level a person sees the status lines only (warnings and errors would show too).
    const quiet = output(true);
    await firstReconnect(quiet);
    assert.match(quiet.text(), /^Reconnecting in /);
    assert.doesNotMatch(quiet.text(), /INFO/);
  });

  it('formats fields, quotes what needs it, and says the public address a person opens', () => {
    const now = () => new Date(2026, 0, 2, 3, 4, 5);
    const line = JSON.stringify({ level: 40, time: 'x', pid: 1, component: 'agent', agent: 'a1', msg: 'tunnel down', reason: 'the edge went away', transport: 'raw', n: 3 });
    assert.equal(textLine(line, now), '03:04:05 WARN  tunnel down reason="the edge went away" transport=raw n=3\n');
    assert.equal(textLine('not json', now), 'not json\n');
    const welcome = (public_url: string) => ({ endpoint: { public_url } }) as Welcome;
    assert.equal(publicAddress(welcome('abc.edge.localhost'), 'http'), 'https://abc.edge.localhost');
    assert.equal(publicAddress(welcome('http://cli.edge.test'), 'http'), 'http://cli.edge.test');
    assert.equal(publicAddress(welcome('tcp.edge.localhost:40001'), 'tcp'), 'tcp.edge.localhost:40001');
    const out = output(false);
    agentConsole({ out }).forwarding(welcome('abc.edge.localhost'), 'http', '3000', 'raw');
    assert.equal(out.text(), 'Forwarding https://abc.edge.localhost -> 3000 (raw transport)\n');
  });

  it('EDGE_LOG_FORMAT forces a mode whatever stdout is', () => {
    assert.equal(agentConsole({ out: output(true), format: 'json' }).format, 'json');
    assert.equal(agentConsole({ out: output(false), format: 'text' }).format, 'text');
    assert.equal(agentConsole({ out: {} as ConsoleOutput }).format, 'json');
  });
});
