// `edge agent start --config` and `edge agent config check` as an operator runs them: the real program against a real
// node, three tunnels from one file with one Forwarding line each, a real SIGHUP that removes one tunnel and adds one
// while a request loop on a kept tunnel sees no error, a reload of a broken file refused, a refused tunnel reported by
// name while the others run on, and the exit statuses.
import { after, before, describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { roundTrip } from '../helpers/echo-services.ts';
import { visit } from '../helpers/http.ts';
import { requestLoop, startTunnelsFixture, udpAnswer, type TunnelsFixture } from './tunnels-fixture.ts';
import { BIN, cleanEnv, run } from '../helpers/serve-process.ts';

// A hang guard, not a timing assertion: each case starts `edge` processes (tsx start-up takes seconds on a loaded machine).
const LIMIT = { timeout: 120_000 };

/** A running `edge agent start`: its output lines as they come, and waiting for one that matches. */
interface AgentProcess {
  child: ChildProcess;
  out: string[];
  err: string[];
  /** The first line on stdout (or stderr) matching `pattern` from index `from` on; rejects if the process exits first. */
  line(pattern: RegExp, stream?: 'out' | 'err', from?: number): Promise<string>;
  exited: Promise<number | null>;
}

function startAgentProcess(t: TestContext, args: string[], env: Record<string, string>): AgentProcess {
  const child = spawn(process.execPath, [BIN, 'agent', 'start', ...args], { env: cleanEnv(env) });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  t.after(() => void child.kill('SIGKILL'));
  const out: string[] = [];
  const err: string[] = [];
  const waiters = new Set<() => void>();
  const wake = () => waiters.forEach((w) => w());
  createInterface({ input: child.stdout! }).on('line', (l) => (out.push(l), wake()));
  createInterface({ input: child.stderr! }).on('line', (l) => (err.push(l), wake()));
  let code: number | null | undefined;
  void exited.then((c) => ((code = c), wake()));
  return {
    child,
    out,
    err,
    exited,
    line(pattern, stream = 'out', from = 0) {
      const lines = stream === 'out' ? out : err;
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = lines.slice(from).find((l) => pattern.test(l));
          if (found !== undefined) {
            waiters.delete(check);
            resolve(found);
          } else if (code !== undefined) {
            waiters.delete(check);
            reject(new Error(`edge agent start exited with ${code} before printing ${pattern}:\n${out.join('\n')}\n${err.join('\n')}`));
          }
        };
        waiters.add(check);
        check();
      });
    },
  };
}

describe('edge agent start --config', () => {
  let f: TunnelsFixture;
  let dir: string;

  /** An agent file in the test's directory, with the key by reference and the node's edge as the default. */
  async function agentFile(name: string, tunnels: string): Promise<string> {
    const path = join(dir, name);
    await writeFile(path, `api_key: \${AGENT_KEY}\nedge: http://127.0.0.1:${f.edgePort}\nlog: { level: warn }\ntunnels:\n${tunnels}`);
    return path;
  }

  const env = () => ({ AGENT_KEY: f.owner.api_key });

  before(async () => {
    f = await startTunnelsFixture();
    dir = await mkdtemp(join(tmpdir(), 'agent-start-'));
  });

  after(async () => {
    await f?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('runs three tunnels from one file, one Forwarding line each; SIGHUP removes one and adds one without a failed request on a kept one', LIMIT, async (t) => {
    const { lines, http, tcp, udp, web, api, db, dns, edgePort } = f;
    const path = await agentFile('three.yml', lines.web + lines.db + lines.dns);
    const agent = startAgentProcess(t, ['--config', path, '--all'], env());
    const [webLine] = await Promise.all([
      agent.line(/^\[web\] Forwarding /),
      agent.line(new RegExp(`^\\[db\\] Forwarding \\S+ -> ${tcp.port} \\(raw transport\\)$`)),
      agent.line(new RegExp(`^\\[dns\\] Forwarding \\S+ -> ${udp.port} \\(raw transport\\)$`)),
    ]);
    assert.equal(webLine, `[web] Forwarding https://${web.hostname} -> ${http.port} (raw transport)`);
    assert.equal((await visit(edgePort, web.hostname, '/')).status, 200);
    assert.equal((await roundTrip(db.port, Buffer.from('tcp through the file'))).toString(), 'tcp through the file');
    assert.equal(await udpAnswer(dns.port, 'udp'), 'echo:udp');

    const loop = await requestLoop(edgePort, web.hostname);
    try {
      await agentFile('three.yml', lines.web + lines.api + lines.dns);
      const from = agent.out.length;
      agent.child.kill('SIGHUP');
      assert.equal(await agent.line(/^Reloaded /, 'out', from), `Reloaded ${path}: started api; stopped db; unchanged web, dns`);
      assert.equal(await agent.line(/^\[api\] Forwarding /, 'out', from), `[api] Forwarding https://${api.hostname} -> ${http.port} (raw transport)`);
      assert.equal((await visit(edgePort, api.hostname, '/added')).status, 200);
      await loop.serves(5);

      // A file with a mistake is refused, located, and every tunnel runs on.
      await agentFile('three.yml', lines.web + `  api: { protocol: http, target: ${http.port}, endpoint: ${api.uuid}, transport: rawx }\n`);
      const errFrom = agent.err.length;
      agent.child.kill('SIGHUP');
      await agent.line(/^edge: reload refused, .* has mistakes; the running tunnels are kept$/, 'err', errFrom);
      assert.match(await agent.line(/transport/, 'err', errFrom), new RegExp(`^${path}:6:\\d+ tunnels\\.api\\.transport: must be auto, raw or ws, got "rawx"$`));
      assert.equal((await visit(edgePort, api.hostname, '/kept')).status, 200);
      await loop.serves(5);
    } finally {
      await loop.stop();
    }
    assert.deepEqual(loop.failures, []);
    assert.deepEqual(agent.out.filter((l) => l.startsWith('[web] ')), [webLine], 'the kept tunnel never reconnected');
    agent.child.kill('SIGTERM');
    assert.equal(await agent.exited, 0);
  });

  it('reports a tunnel the edge refuses by name and keeps the others running; exits 3 once no tunnel is left', LIMIT, async (t) => {
    const ghost = `  ghost: { protocol: http, target: ${f.http.port}, endpoint: ${randomUUID()} }\n`;
    // A deploy tunnel whose directory cannot be made fails before it dials: said as it is, not as a refusal.
    const broken = `  broken: { protocol: deploy, application: ${randomUUID()}, dir: /dev/null/site }\n`;
    const path = await agentFile('refused.yml', f.lines.web + ghost + broken);
    const agent = startAgentProcess(t, ['--config', path, '--all'], env());
    assert.match(await agent.line(/ghost/, 'err'), /^edge: tunnel ghost stopped: the edge refused it \(endpoint_not_found\): /);
    assert.match(await agent.line(/broken/, 'err'), /^edge: tunnel broken stopped: ENOTDIR: not a directory, mkdir '\/dev\/null\/site/);
    await agent.line(/^\[web\] Forwarding /);
    assert.equal((await visit(f.edgePort, f.web.hostname, '/')).status, 200);
    agent.child.kill('SIGTERM');
    assert.equal(await agent.exited, 0);

    const alone = await run(['agent', 'start', '--config', path, 'ghost'], cleanEnv(env()));
    assert.equal(alone.code, 3, alone.stderr);
    assert.match(alone.stderr, /edge: tunnel ghost stopped: the edge refused it \(endpoint_not_found\)/);
    assert.match(alone.stderr, /edge: no tunnel is running any more/);
  });

  it('starts only the tunnels named on the command line', LIMIT, async (t) => {
    const path = await agentFile('named.yml', f.lines.web + f.lines.api);
    const agent = startAgentProcess(t, ['--config', path, 'api'], env());
    await agent.line(/^\[api\] Forwarding /);
    agent.child.kill('SIGTERM');
    assert.equal(await agent.exited, 0);
    assert.deepEqual(agent.out.filter((l) => l.includes('Forwarding')).length, 1);
  });

  it('refuses a bad command line or a file with mistakes with exit status 2, before connecting anywhere', LIMIT, async () => {
    const path = await agentFile('usage.yml', f.lines.web);
    const bad = await agentFile('bad.yml', `  web: { protocol: http, target: 3000, colour: blue }\n`);
    for (const [args, message] of [
      [['agent', 'start', 'web'], /--config FILE is required/],
      [['agent', 'start', '--config', path], /name the tunnels to start, or --all/],
      [['agent', 'start', '--config', path, '--all', 'web'], /give tunnel names or --all, not both/],
      [['agent', 'start', '--config', path, 'web', 'nope'], new RegExp(`${path} has no tunnel named nope \\(it has web\\)`)],
      [['agent', 'start', '--config', path, '--all', '--transport', 'quic'], /--transport: must be auto, raw or ws, got "quic"/],
      [['agent', 'start', '--config', bad, '--all'], new RegExp(`^${bad}:5:40 tunnels\\.web\\.colour: unknown field$`, 'm')],
      [['agent', 'start', '--config', join(dir, 'missing.yml'), '--all'], /missing\.yml: cannot read the file \(no such file\)/],
      [['agent', 'config', 'lint', path], /unknown agent config subcommand "lint"/],
    ] as const) {
      const result = await run([...args], cleanEnv(env()));
      assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, message);
    }
    const help = await run(['agent', 'start', '--help'], cleanEnv({}));
    assert.equal(help.code, 0);
    assert.match(help.stdout, /Usage: edge agent start --config FILE \(NAME\.\.\. \| --all\)/);
  });
});

describe('edge agent config check', () => {
  it('prints one line per tunnel and exits 0 for a good file; every mistake located and exit 2 for a bad one', LIMIT, async () => {
    const dir = await mkdtemp(join(tmpdir(), 'agent-check-'));
    try {
      const good = join(dir, 'good.yml');
      await writeFile(good, 'api_key: ${KEY}\ntunnels:\n  web: { protocol: http, target: 3000, tags: [eu] }\n  db: { protocol: tcp, target: "127.0.0.1:5432", transport: ws }\n');
      const ok = await run(['agent', 'config', 'check', good], cleanEnv({ KEY: 'edge_secret_key' }));
      assert.equal(ok.code, 0, ok.stderr);
      assert.equal(
        ok.stdout,
        `${good}: 2 tunnels, no mistakes\n` +
          '  web: http 3000 -> an ephemeral endpoint, edge http://127.0.0.1:8080, auto transport, 8 data connections, tags eu\n' +
          '  db: tcp 127.0.0.1:5432 -> an ephemeral endpoint, edge http://127.0.0.1:8080, ws transport\n',
      );
      assert.doesNotMatch(ok.stdout, /edge_secret_key/);

      // Flags and the environment are the defaults `agent start` would use.
      const flagged = await run(['agent', 'config', 'check', good, '--edge', 'https://edge.example.test', '--data-connections', '2'], cleanEnv({ KEY: 'k', EDGE_TRANSPORT: 'raw' }));
      assert.equal(flagged.code, 0, flagged.stderr);
      assert.match(flagged.stdout, /web: http 3000 -> an ephemeral endpoint, edge https:\/\/edge\.example\.test, raw transport, 2 data connections/);

      const bad = join(dir, 'bad.yml');
      await writeFile(bad, 'api_key: ${KEY}\ntunnels:\n  web:\n    protocol: http\n    target: 3000\n    transport: quic\n  db:\n    protocol: tcp\n');
      const refused = await run(['agent', 'config', 'check', bad], cleanEnv({}));
      assert.equal(refused.code, 2);
      assert.equal(
        refused.stderr,
        `${bad}:1:10 api_key: the environment variable KEY is not set (or is empty)\n` +
          `${bad}:6:16 tunnels.web.transport: must be auto, raw or ws, got "quic"\n` +
          `${bad}:7:3 tunnels.db: target is required\n` +
          `edge: ${bad}: 3 mistakes\n`,
      );
      assert.equal(refused.stdout, '');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
