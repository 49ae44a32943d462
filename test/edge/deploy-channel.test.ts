// Push-to-deploy end to end: a real node, a bare git repository, a connected `edge agent deploy`, signed webhooks of
// both provider kinds. A push goes live and visitors get the new version with no failed request during the switch; a
// failing build or health check leaves the old version serving; a rollback brings an earlier commit back.
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DeployAgent } from '../../src/agent/deploy/deploy-agent.ts';
import type { ServerHttp2Stream } from 'node:http2';
import { Agent, TunnelRefusedError, type AgentOptions } from '../../src/agent/agent.ts';
import { CONTROL_STREAM_HEADER, CONTROL_STREAM_PATH, type EdgeControlMessage } from '../../src/shared/deploy.ts';
import { createEndpoint, edgeCaughtUp, expectBody, nodeWithOwner, type User } from '../helpers/endpoint-api.ts';
import { readUntil } from '../helpers/eventually.ts';
import { appFiles, makeRepo, type Repo } from '../helpers/git-app.ts';
import { visit } from '../helpers/http.ts';
import type { TestNode } from '../helpers/node.ts';

interface Deployment {
  id: number;
  status: string;
  commit_sha: string | null;
  reason: string | null;
  log: string[];
}

const FINISHED = new Set(['live', 'failed', 'superseded', 'cancelled']);

describe('push-to-deploy through a deploying agent', () => {
  let t: TestNode;
  let owner: User;
  let repo: Repo;
  let dir: string;
  let agent: DeployAgent;
  let app: { uuid: string };
  let hostname: string;
  let edgePort: number;

  const webhookUrl = () => `${t.controlUrl}/api/webhooks/git/${app.uuid}`;

  async function secret(): Promise<string> {
    return (await expectBody(200, t.api('GET', `/v1/applications/${app.uuid}/webhook`, { key: owner.api_key }))).secret;
  }

  /** A GitHub push delivery, signed with the application's secret. */
  async function githubPush(sha: string, branch = 'main'): Promise<Response> {
    const body = JSON.stringify({ ref: `refs/heads/${branch}`, before: '0'.repeat(40), after: sha, created: false, deleted: false, repository: { full_name: 'dev/app' } });
    const signature = `sha256=${createHmac('sha256', await secret()).update(body).digest('hex')}`;
    return fetch(webhookUrl(), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-github-event': 'push', 'x-github-delivery': randomUUID(), 'x-hub-signature-256': signature },
      body,
    });
  }

  /** A GitLab push delivery, carrying the secret as its token. */
  async function gitlabPush(sha: string, branch = 'main'): Promise<Response> {
    const body = JSON.stringify({ object_kind: 'push', ref: `refs/heads/${branch}`, before: '0'.repeat(40), after: sha, checkout_sha: sha, project: { path_with_namespace: 'dev/app' } });
    return fetch(webhookUrl(), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gitlab-event': 'Push Hook', 'x-gitlab-event-uuid': randomUUID(), 'x-gitlab-token': await secret() },
      body,
    });
  }

  async function queued(res: Response): Promise<number> {
    const body = (await res.json()) as { status: string; deployment_id: number };
    assert.equal(res.status, 202, JSON.stringify(body));
    assert.equal(body.status, 'queued');
    return body.deployment_id;
  }

  function deployment(id: number): Promise<Deployment> {
    return expectBody<Deployment>(200, t.api('GET', `/v1/applications/${app.uuid}/deployments/${id}`, { key: owner.api_key }));
  }

  /** The deployment once it finished, whatever way. */
  function finished(id: number): Promise<Deployment> {
    return readUntil(() => deployment(id), (d) => FINISHED.has(d.status), 60_000);
  }

  const served = async () => (await visit(edgePort, hostname, '/')).body;

  before(async () => {
    ({ t, owner } = await nodeWithOwner({ EDGE_DEPLOY_ALLOW_FILE_URLS: 'true' }));
    edgePort = t.node.edge!.httpPort;
    repo = await makeRepo();
    dir = await mkdtemp(join(tmpdir(), 'edge-deploy-'));
    const endpoint = await createEndpoint(t, owner);
    hostname = endpoint.hostname;
    app = await expectBody(
      201,
      t.api('POST', '/v1/applications', {
        key: owner.api_key,
        body: { name: 'web', endpoint: endpoint.uuid, source: 'git', repository_url: repo.url, provider: 'github', branch: 'main', build_command: 'sh build.sh', run_command: 'node server.js', health_path: '/healthz' },
      }),
    );
    // The edge admits a deploying agent from its own copy of the feed: the application must have reached it (with
    // Redis between control and edge, the 201 can come first).
    await edgeCaughtUp(t);
    agent = new DeployAgent({
      application: app.uuid,
      dir,
      edgeUrl: `http://127.0.0.1:${edgePort}`,
      apiKey: owner.api_key,
      agentId: 'deployer-1',
      backoff: { initialMs: 50, maxMs: 500 },
      deployer: { healthTimeoutMs: 5_000, stopGraceMs: 2_000 },
    });
    await agent.start();
  });

  after(async () => {
    await agent?.stop(0);
    await t?.close();
    await repo?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('answers 503 on the endpoint while no release is live', async () => {
    const reply = await visit(edgePort, hostname, '/');
    assert.equal(reply.status, 503);
    assert.match(reply.body, /No release/);
  });

  it('takes a signed GitHub push live: visitors get the pushed version, the log has the build output', async () => {
    const sha = await repo.commit(appFiles({ version: 'v1' }), 'v1');
    const id = await queued(await githubPush(sha));
    const done = await finished(id);
    assert.equal(done.status, 'live', `${done.reason}\n${done.log.join('\n')}`);
    assert.equal(done.commit_sha, sha);
    assert.ok(done.log.some((line) => line.includes('building v1')), done.log.join('\n'));
    assert.equal(await served(), 'v1');
  });

  it('switches to a GitLab push with zero failed requests from a steady loop through the edge', async () => {
    await expectBody(200, t.api('PATCH', `/v1/applications/${app.uuid}`, { key: owner.api_key, body: { provider: 'gitlab' } }));
    const seen: string[] = [];
    const failures: string[] = [];
    let looping = true;
    // Several visitors at once, so requests are in flight on the old release at the moment of the switch.
    const visitor = async () => {
      while (looping) {
        const reply = await visit(edgePort, hostname, '/').catch((err: Error) => ({ status: 0, body: err.message }));
        if (reply.status !== 200) failures.push(`${reply.status} ${reply.body}`);
        else seen.push(reply.body);
      }
    };
    const loop = Promise.all([visitor(), visitor(), visitor(), visitor()]);
    try {
      const sha = await repo.commit(appFiles({ version: 'v2' }), 'v2');
      const done = await finished(await queued(await gitlabPush(sha)));
      assert.equal(done.status, 'live', `${done.reason}\n${done.log.join('\n')}`);
      // Keep going until the loop itself has seen the new version.
      await readUntil(async () => seen.at(-1), (v) => v === 'v2');
    } finally {
      looping = false;
      await loop;
    }
    assert.deepEqual(failures, []);
    assert.ok(seen.includes('v1') && seen.includes('v2'), 'the loop ran across the switch');
    assert.equal(seen.at(-1), 'v2');
  });

  it('marks a failing build failed with its output and keeps the live version serving', async () => {
    const sha = await repo.commit(appFiles({ version: 'v3', buildFails: true }), 'v3');
    const done = await finished(await queued(await gitlabPush(sha)));
    assert.equal(done.status, 'failed');
    assert.match(done.reason ?? '', /build/);
    assert.ok(done.log.some((line) => line.includes('build step failing on purpose')), done.log.join('\n'));
    assert.equal(await served(), 'v2');
  });

  it('marks a release that never turns healthy failed and keeps the live version serving', async () => {
    const sha = await repo.commit(appFiles({ version: 'v4', healthy: false }), 'v4');
    const done = await finished(await queued(await gitlabPush(sha)));
    assert.equal(done.status, 'failed');
    assert.match(done.reason ?? '', /health/i);
    assert.equal(await served(), 'v2');
  });

  it('rolls back to a commit that was live before', async () => {
    const list = await expectBody<{ items: Deployment[] }>(200, t.api('GET', `/v1/applications/${app.uuid}/deployments`, { key: owner.api_key }));
    const first = list.items.at(-1)!;
    const res = await expectBody<Deployment>(202, t.api('POST', `/v1/applications/${app.uuid}/deployments/${first.id}/rollback`, { key: owner.api_key }));
    const done = await finished(res.id);
    assert.equal(done.status, 'live', `${done.reason}\n${done.log.join('\n')}`);
    assert.equal(done.commit_sha, first.commit_sha);
    assert.equal(await served(), 'v1');
  });

  it('ignores a push to another branch (200, nothing deployed)', async () => {
    const sha = await repo.commit(appFiles({ version: 'v5' }), 'v5', 'feature');
    const res = await gitlabPush(sha, 'feature');
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { status: string }).status, 'ignored');
    assert.equal(await served(), 'v1');
  });

  it('refuses a deploying agent for an application of another account', async () => {
    const other = await t.createUser();
    const strangerDir = await mkdtemp(join(tmpdir(), 'edge-deploy-'));
    const stranger = new DeployAgent({ application: app.uuid, dir: strangerDir, edgeUrl: `http://127.0.0.1:${edgePort}`, apiKey: other.api_key });
    await assert.rejects(stranger.start(), (err: unknown) => err instanceof TunnelRefusedError && err.code === 'application_not_found');
    await stranger.stop(0);
    await rm(strangerDir, { recursive: true, force: true });
  });
});

describe('the control stream of a deploying agent', () => {
  let t: TestNode;
  let owner: User;
  let edgePort: number;
  let endpoint: { uuid: string; hostname: string };
  let app: { uuid: string };
  let agent: Agent | undefined;

  /** A deploying agent by hand: records the edge's control messages and the visitor streams it was sent. */
  function handAgent(options: Partial<AgentOptions> = {}) {
    const messages: EdgeControlMessage[] = [];
    const visitorHeaders: Record<string, unknown>[] = [];
    let control: ServerHttp2Stream | null = null;
    const streams = (stream: ServerHttp2Stream, headers: Record<string, unknown>) => {
      if (headers[':path'] === CONTROL_STREAM_PATH && headers[CONTROL_STREAM_HEADER] === '1') {
        control = stream;
        stream.respond({ ':status': 200 });
        let buffered = '';
        stream.setEncoding('utf8');
        stream.on('data', (chunk: string) => {
          buffered += chunk;
          for (let nl = buffered.indexOf('\n'); nl !== -1; nl = buffered.indexOf('\n')) {
            messages.push(JSON.parse(buffered.slice(0, nl)) as EdgeControlMessage);
            buffered = buffered.slice(nl + 1);
          }
        });
        return;
      }
      visitorHeaders.push(headers);
      stream.respond({ ':status': 200 });
      stream.end('from the application');
    };
    const a = new Agent({ edgeUrl: `http://127.0.0.1:${edgePort}`, apiKey: owner.api_key, protocol: 'http', application: app.uuid, streams, backoff: { initialMs: 50, maxMs: 200 }, ...options });
    return { agent: a, messages, visitorHeaders, send: (line: string) => control!.write(line) };
  }

  /** The application a control message carries, if it is one. */
  const applicationOf = (m: EdgeControlMessage | undefined) => (m?.type === 'application' ? m.application : undefined);
  const refusalOf = (m: EdgeControlMessage | undefined) => (m?.type === 'event_refused' ? m : undefined);

  const deployments = async () => (await expectBody<{ items: Deployment[] }>(200, t.api('GET', `/v1/applications/${app.uuid}/deployments`, { key: owner.api_key }))).items;

  before(async () => {
    ({ t, owner } = await nodeWithOwner({ EDGE_DEPLOY_ALLOW_FILE_URLS: 'true' }));
    edgePort = t.node.edge!.httpPort;
    endpoint = await createEndpoint(t, owner);
    app = await expectBody(
      201,
      t.api('POST', '/v1/applications', { key: owner.api_key, body: { name: 'api', endpoint: endpoint.uuid, source: 'git', repository_url: 'file:///nonexistent/app.git', provider: 'github', run_command: 'node server.js' } }),
    );
    await edgeCaughtUp(t);
  });

  afterEach(async () => {
    await agent?.stop(0);
    agent = undefined;
  });

  after(async () => {
    await t?.close();
  });

  it('sends the application at connect, then each new order as the feed brings it', async () => {
    const hand = handAgent();
    agent = hand.agent;
    const welcome = await agent.start();
    assert.equal(welcome.endpoint.uuid, endpoint.uuid, 'the application’s endpoint is served');
    const first = await readUntil(async () => applicationOf(hand.messages[0]), (a) => a !== undefined);
    assert.equal(first!.order, null);
    const manual = await expectBody<Deployment>(202, t.api('POST', `/v1/applications/${app.uuid}/deployments`, { key: owner.api_key, body: {} }));
    const ordered = await readUntil(async () => applicationOf(hand.messages.at(-1)), (a) => a?.order?.deployment_id === manual.id);
    assert.equal(ordered!.order!.ref, 'main');
  });

  it('drops lines that are not events and carries the valid ones that follow to the control API', async () => {
    const hand = handAgent();
    agent = hand.agent;
    await agent.start();
    const ordered = await readUntil(async () => applicationOf(hand.messages.at(-1)), (a) => a !== undefined && a.order !== null);
    const id = ordered!.order!.deployment_id;
    hand.send('not json\n');
    hand.send(`${JSON.stringify({ type: 'status', deployment_id: id, status: 'exploded' })}\n`);
    hand.send(`${JSON.stringify({ type: 'status', deployment_id: id, status: 'building', extra: true })}\n`);
    hand.send(`${JSON.stringify({ type: 'status', deployment_id: id, status: 'building' })}\n`);
    hand.send(`${JSON.stringify({ type: 'log', deployment_id: id, lines: ['fetching'] })}\n`);
    const building = await readUntil(() => deployments(), (items) => items.some((d) => d.id === id && d.status === 'building'));
    assert.ok(building.length > 0);
    const detail = await readUntil(async () => (await expectBody<Deployment>(200, t.api('GET', `/v1/applications/${app.uuid}/deployments/${id}`, { key: owner.api_key }))), (d) => d.log.includes('fetching'));
    assert.deepEqual(detail.log, ['fetching']);
  });

  it('tells the agent when the control API refuses one of its events', async () => {
    const hand = handAgent();
    agent = hand.agent;
    await agent.start();
    await readUntil(async () => hand.messages[0], (m) => m !== undefined);
    hand.send(`${JSON.stringify({ type: 'status', deployment_id: 999_999, status: 'building' })}\n`);
    const refused = await readUntil(async () => hand.messages.map(refusalOf).find(Boolean), (m) => m !== undefined);
    assert.equal(refused!.deployment_id, 999_999);
    assert.equal(refused!.code, 'not_found');
  });

  it('never lets a visitor open the control handler: their x-edge-control is stripped', async () => {
    const hand = handAgent();
    agent = hand.agent;
    await agent.start();
    const reply = await visit(edgePort, endpoint.hostname, CONTROL_STREAM_PATH, { method: 'POST', headers: { [CONTROL_STREAM_HEADER]: '1', 'content-type': 'application/x-ndjson' }, body: '{}\n' });
    assert.equal(reply.status, 200);
    assert.equal(reply.body, 'from the application');
    assert.equal(hand.visitorHeaders.length, 1);
    assert.equal(hand.visitorHeaders[0]![CONTROL_STREAM_HEADER], undefined);
  });

  it('refuses an application that is unknown, another endpoint named beside it, or a tcp tunnel for it', async () => {
    const refusal = async (options: Partial<AgentOptions>) => {
      const a = handAgent(options).agent;
      try {
        await a.start();
        assert.fail('admitted');
      } catch (err) {
        assert.ok(err instanceof TunnelRefusedError, String(err));
        return err.code;
      } finally {
        await a.stop(0);
      }
    };
    assert.equal(await refusal({ application: randomUUID() }), 'application_not_found');
    const other = await createEndpoint(t, owner);
    assert.equal(await refusal({ endpoint: other.uuid }), 'forbidden');
    assert.equal(await refusal({ protocol: 'tcp' }), 'invalid_hello');
  });
});
