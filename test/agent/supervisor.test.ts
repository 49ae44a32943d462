// The supervisor of an agent file's tunnels (src/agent/supervisor.ts) against a real node: http, tcp and udp tunnels in
// one process carrying real traffic; apply() adding, removing and restarting tunnels without touching the others; a
// refused tunnel ending alone; a deploy tunnel served by a DeployAgent.
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from '../../src/agent/agent.ts';
import { parseAgentFile, type TunnelSpec } from '../../src/agent/config-file.ts';
import { DeployAgent } from '../../src/agent/deploy/deploy-agent.ts';
import { HaAgent } from '../../src/agent/ha.ts';
import { Supervisor } from '../../src/agent/supervisor.ts';
import type { Welcome } from '../../src/shared/tunnel/protocol.ts';
import { createLogger } from '../../src/shared/log.ts';
import { roundTrip } from '../helpers/echo-services.ts';
import { createEndpoint, edgeCaughtUp, expectBody } from '../helpers/endpoint-api.ts';
import { eventually, readUntil } from '../helpers/eventually.ts';
import { appFiles, makeRepo } from '../helpers/git-app.ts';
import { skipSlowSuite } from '../helpers/slow-suites.ts';
import { visit } from '../helpers/http.ts';
import { requestLoop, startTunnelsFixture, udpAnswer, type TunnelsFixture } from './tunnels-fixture.ts';

/** Resolves with the welcome when `name` comes online; rejects if it fails first. */
function online(supervisor: Supervisor, name: string): Promise<Welcome> {
  return new Promise((resolve, reject) => {
    const onOnline = (spec: TunnelSpec, welcome: Welcome) => {
      if (spec.name !== name) return;
      done();
      resolve(welcome);
    };
    const onFailed = (spec: TunnelSpec, err: Error) => {
      if (spec.name !== name) return;
      done();
      reject(err);
    };
    const done = () => {
      supervisor.off('online', onOnline);
      supervisor.off('failed', onFailed);
    };
    supervisor.on('online', onOnline);
    supervisor.on('failed', onFailed);
  });
}

/** Resolves with the error `name` fails with. */
function failed(supervisor: Supervisor, name: string): Promise<Error & { code?: string }> {
  return new Promise((resolve) => {
    const on = (spec: TunnelSpec, err: Error) => {
      if (spec.name !== name) return;
      supervisor.off('failed', on);
      resolve(err);
    };
    supervisor.on('failed', on);
  });
}

describe('supervisor', () => {
  let f: TunnelsFixture;
  const supervisors: Supervisor[] = [];

  /** The tunnels of an agent file's text, through the file's own parsing and resolution. */
  function specs(tunnels: string): TunnelSpec[] {
    const result = parseAgentFile('edge-agent.yml', `api_key: \${KEY}\nedge: http://127.0.0.1:${f.edgePort}\ntunnels:\n${tunnels}`, { KEY: f.owner.api_key });
    assert.ok(result.ok, result.ok ? '' : result.errors.join('\n'));
    return result.file.tunnels;
  }

  function supervisor(): Supervisor {
    const s = new Supervisor({ logger: createLogger(process.env.EDGE_TEST_LOG_LEVEL ?? 'silent') });
    supervisors.push(s);
    return s;
  }

  before(async () => {
    f = await startTunnelsFixture({ EDGE_DEPLOY_ALLOW_FILE_URLS: 'true' });
  });

  afterEach(async () => {
    for (const s of supervisors.splice(0)) await s.stop();
  });

  after(async () => {
    await f?.close();
  });

  it('runs an http, a tcp and a udp tunnel in one process, each carrying real traffic', async () => {
    const s = supervisor();
    const up = Promise.all(['web', 'db', 'dns'].map((name) => online(s, name)));
    const result = await s.apply(specs(f.lines.web + f.lines.db + f.lines.dns));
    assert.deepEqual(result, { started: ['web', 'db', 'dns'], stopped: [], restarted: [], unchanged: [] });
    const [webWelcome, dbWelcome, dnsWelcome] = await up;
    assert.equal(webWelcome.endpoint.uuid, f.web.uuid);
    assert.equal(dbWelcome.endpoint.uuid, f.db.uuid);
    assert.equal(dnsWelcome.endpoint.uuid, f.dns.uuid);
    assert.deepEqual(s.names, ['web', 'db', 'dns']);

    const reply = await visit(f.edgePort, f.web.hostname, '/through-the-file');
    assert.equal(reply.status, 200, reply.body);
    assert.equal(JSON.parse(reply.body).url, '/through-the-file');
    assert.equal((await roundTrip(f.db.port, Buffer.from('bytes over tcp'))).toString(), 'bytes over tcp');
    assert.equal(await udpAnswer(f.dns.port, 'datagram'), 'echo:datagram');
  });

  it('removes one tunnel and adds one while a request loop on a kept tunnel sees no error and its connection stays up', async () => {
    const s = supervisor();
    const up = Promise.all([online(s, 'web'), online(s, 'db')]);
    await s.apply(specs(f.lines.web + f.lines.db));
    await up;
    const agentsOf = async (uuid: string) => (await f.t.api('GET', `/v1/endpoints/${uuid}/tunnels`, { key: f.owner.api_key })).body.items.length as number;
    await eventually(async () => ((await agentsOf(f.db.uuid)) === 1 ? true : undefined));
    const kept = s.handle('web') as Agent;
    const drops: unknown[] = [];
    kept.on('disconnected', (info) => drops.push(info));

    const loop = await requestLoop(f.edgePort, f.web.hostname);
    try {
      const added = online(s, 'api');
      const result = await s.apply(specs(f.lines.web + f.lines.api));
      assert.deepEqual(result, { started: ['api'], stopped: ['db'], restarted: [], unchanged: ['web'] });
      await added;
      // The removed tunnel is gone from the edge (the control API lists the agents edges report).
      await eventually(async () => ((await agentsOf(f.db.uuid)) === 0 ? true : undefined));
      await loop.serves(5);
    } finally {
      await loop.stop();
    }
    assert.deepEqual(loop.failures, []);
    assert.deepEqual(drops, [], 'the kept tunnel was not reconnected');
    assert.equal(s.handle('web'), kept, 'the kept tunnel is the same agent');
    assert.deepEqual(s.names, ['web', 'api']);
    assert.equal((await visit(f.edgePort, f.api.hostname, '/added')).status, 200);
  });

  it('restarts only the tunnel whose settings changed, here from one edge to a list of edges', async () => {
    const s = supervisor();
    const up = Promise.all([online(s, 'web'), online(s, 'api')]);
    await s.apply(specs(f.lines.web + f.lines.api));
    await up;
    const webAgent = s.handle('web');
    const again = online(s, 'api');
    const moved = `  api: { protocol: http, target: ${f.http.port}, endpoint: ${f.api.uuid}, edges: ["http://127.0.0.1:${f.edgePort}"] }\n`;
    const result = await s.apply(specs(f.lines.web + moved));
    assert.deepEqual(result, { started: [], stopped: [], restarted: ['api'], unchanged: ['web'] });
    await again;
    assert.ok(s.handle('api') instanceof HaAgent);
    assert.equal(s.handle('web'), webAgent);
    assert.equal((await visit(f.edgePort, f.api.hostname, '/moved')).status, 200);
  });

  it('a tunnel the edge refuses ends alone: the others keep serving, a reload starts it again, idle once none is left', async () => {
    const s = supervisor();
    let idle = 0;
    s.on('idle', () => idle++);
    const up = online(s, 'web');
    const refused = failed(s, 'ghost');
    await s.apply(specs(f.lines.web + `  ghost: { protocol: http, target: ${f.http.port}, endpoint: ${randomUUID()} }\n`));
    assert.equal((await refused).code, 'endpoint_not_found');
    await up;
    assert.deepEqual(s.names, ['web']);
    assert.equal((await visit(f.edgePort, f.web.hostname, '/still')).status, 200);
    assert.equal(idle, 0);

    // Applying the same file again tries the refused tunnel again (it is not running), and leaves web alone.
    const again = failed(s, 'ghost');
    const ghost = `  ghost: { protocol: http, target: ${f.http.port}, endpoint: ${randomUUID()} }\n`;
    const result = await s.apply(specs(f.lines.web + ghost));
    assert.deepEqual(result, { started: ['ghost'], stopped: [], restarted: [], unchanged: ['web'] });
    await again;

    const lonely = supervisor();
    const idled = once(lonely, 'idle');
    await lonely.apply(specs(ghost));
    await idled;
    assert.deepEqual(lonely.names, []);
  });

  /**
   * An application of `repositoryUrl` on a new endpoint, and a supervisor running it as a deploy tunnel of the file
   * (once online); `done()` stops it and removes its directory.
   */
  async function deployTunnel(repositoryUrl: string, app: Record<string, string> = {}) {
    const endpoint = await createEndpoint(f.t, f.owner);
    const created = await expectBody(
      201,
      f.t.api('POST', '/v1/applications', {
        key: f.owner.api_key,
        body: { name: `site-${endpoint.uuid.slice(0, 8)}`, endpoint: endpoint.uuid, source: 'git', repository_url: repositoryUrl, provider: 'github', run_command: 'node server.js', ...app },
      }),
    );
    // The edge admits a deploying agent from its own copy of the feed (with Redis between, the 201 can come first).
    await edgeCaughtUp(f.t);
    const dir = await mkdtemp(join(tmpdir(), 'agent-file-deploy-'));
    const s = supervisor();
    const up = online(s, 'site');
    await s.apply(specs(`  site: { protocol: deploy, application: ${created.uuid}, dir: ${dir}, build_timeout: 120, health_timeout: 30, keep_releases: 2 }\n`));
    const welcome = await up.catch(async (err: unknown) => {
      await rm(dir, { recursive: true, force: true });
      throw err;
    });
    return {
      s,
      app: created as { uuid: string },
      endpoint,
      welcome,
      async done() {
        await s.stop();
        await rm(dir, { recursive: true, force: true });
      },
    };
  }

  it('starts a deploy tunnel as a DeployAgent serving its application on the endpoint', async () => {
    const site = await deployTunnel('file:///nonexistent/app.git');
    try {
      assert.ok(site.s.handle('site') instanceof DeployAgent);
      assert.equal(site.welcome.endpoint.uuid, site.endpoint.uuid);
      // No release is live (the repository does not exist): the deploy agent itself answers.
      const reply = await visit(f.edgePort, site.endpoint.hostname, '/');
      assert.equal(reply.status, 503);
      assert.match(reply.body, /No release of this application is live yet/);
    } finally {
      await site.done();
    }
  });

  // Builds and starts a real release (git, a child process): the multi-process pass runs it (test/helpers/slow-suites.ts).
  it('deploys a commit through a deploy tunnel of the file and serves it on the endpoint', { skip: skipSlowSuite() }, async () => {
    const repo = await makeRepo();
    try {
      const site = await deployTunnel(repo.url, { branch: 'main', build_command: 'sh build.sh', health_path: '/healthz' });
      try {
        const sha = await repo.commit(appFiles({ version: 'v1' }), 'v1');
        await expectBody(202, f.t.api('POST', `/v1/applications/${site.app.uuid}/deployments`, { key: f.owner.api_key, body: { commit: sha } }));
        const reply = await readUntil(() => visit(f.edgePort, site.endpoint.hostname, '/'), (r) => r.body === 'v1', 90_000);
        assert.equal(reply.status, 200);
      } finally {
        await site.done();
      }
    } finally {
      await repo.close();
    }
  });
});
