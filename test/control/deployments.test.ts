// Deployments over real HTTP: the queue (a new deployment supersedes the queued ones, never the running one), the
// order the feed entry carries, cancel and rollback rules, and the agent-events route an edge calls with the agent's
// key: transitions, claims, refusals, the bounded log, the process state, bad bodies and permissions.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Value } from '@sinclair/typebox/value';
import { AgentEventsAnswerSchema, ApplicationConfigSchema, APPLICATION_TOPIC, type ApplicationConfig } from '../../src/shared/deploy.ts';
import type { TestNode } from '../helpers/node.ts';
import { createEndpoint, expectBody, feedVersion, nodeWithOwner, orgWithMember, storeRows, type User } from '../helpers/endpoint-api.ts';

const SHA = (n: number) => n.toString(16).padStart(40, 'c');

describe('deployments', () => {
  let t: TestNode;
  let owner: User;
  before(async () => {
    ({ t, owner } = await nodeWithOwner());
  });
  after(() => t.close());

  const sql = storeRows(() => t);
  let names = 0;
  async function newApp(user: User = owner, headers?: Record<string, string>): Promise<string> {
    const endpoint = await createEndpoint(t, user, headers);
    const body = { name: `deployed-${++names}`, endpoint: endpoint.uuid, repository_url: 'https://example.com/app.git', provider: 'github', run_command: 'run' };
    return (await expectBody(201, t.api('POST', '/v1/applications', { key: user.api_key, body, headers }))).uuid;
  }
  const deploy = (uuid: string, body: unknown = {}) => expectBody(202, t.api('POST', `/v1/applications/${uuid}/deployments`, { key: owner.api_key, body }));
  const get = (uuid: string, id: number) => expectBody(200, t.api('GET', `/v1/applications/${uuid}/deployments/${id}`, { key: owner.api_key }));
  const events = (uuid: string, agent: string, list: unknown[], key = owner.api_key) => t.api('POST', `/v1/applications/${uuid}/agent-events`, { key, body: { agent_id: agent, events: list } });
  async function report(uuid: string, agent: string, list: unknown[]): Promise<Array<{ ok: boolean; code?: string }>> {
    const body = await expectBody(200, events(uuid, agent, list));
    assert.ok(Value.Check(AgentEventsAnswerSchema, body));
    assert.equal(body.results.length, list.length);
    return body.results;
  }
  const status = (id: number, s: string, extra: Record<string, unknown> = {}) => ({ type: 'status', deployment_id: id, status: s, ...extra });
  async function order(uuid: string): Promise<ApplicationConfig['order']> {
    const data = (await sql<{ data: ApplicationConfig }>('SELECT data FROM feed_entries WHERE topic = $1 AND key = $2', [APPLICATION_TOPIC, uuid]))[0].data;
    assert.ok(Value.Check(ApplicationConfigSchema, data), JSON.stringify([...Value.Errors(ApplicationConfigSchema, data)].slice(0, 2)));
    return data.order;
  }
  /** Takes a deployment to live through the agent, as a deploying agent reports it. */
  async function goLive(uuid: string, id: number, agent = 'agent-1', commit = SHA(id)) {
    const results = await report(uuid, agent, [status(id, 'building', { commit }), status(id, 'deploying'), status(id, 'live')]);
    assert.deepEqual(results, [{ ok: true }, { ok: true }, { ok: true }]);
  }

  describe('the queue', () => {
    it('supersedes queued deployments, never the running one, and the order follows', async () => {
      const uuid = await newApp();
      assert.equal(await order(uuid), null);
      const first = await deploy(uuid);
      assert.equal(first.status, 'queued');
      assert.equal(first.trigger, 'manual');
      assert.equal(first.ref, 'main');
      assert.equal(first.commit_sha, null);
      assert.deepEqual(await order(uuid), { deployment_id: first.id, trigger: 'manual', ref: 'main', commit: null });

      const second = await deploy(uuid, { ref: 'hotfix', commit: SHA(2) });
      assert.equal((await get(uuid, first.id)).status, 'superseded');
      assert.deepEqual(await order(uuid), { deployment_id: second.id, trigger: 'manual', ref: 'hotfix', commit: SHA(2) });

      assert.deepEqual(await report(uuid, 'agent-1', [status(second.id, 'building')]), [{ ok: true }]);
      const third = await deploy(uuid);
      const fourth = await deploy(uuid);
      assert.equal((await get(uuid, second.id)).status, 'building', 'the running one is never superseded');
      assert.equal((await get(uuid, third.id)).status, 'superseded');
      assert.equal((await order(uuid))!.deployment_id, second.id, 'the running one is the order');

      // Only one runs: the queued one cannot start while another builds.
      assert.deepEqual(await report(uuid, 'agent-2', [status(fourth.id, 'building')]), [{ ok: false, code: 'invalid_transition', message: `Deployment ${second.id} is running; one deploy runs at a time` }]);
      await report(uuid, 'agent-1', [status(second.id, 'failed', { reason: 'npm ci exited 1' })]);
      const failed = await get(uuid, second.id);
      assert.equal(failed.status, 'failed');
      assert.equal(failed.reason, 'npm ci exited 1');
      assert.ok(failed.finished_at);
      assert.equal((await order(uuid))!.deployment_id, fourth.id, 'finishing moves the order to the next queued');

      const list = await expectBody(200, t.api('GET', `/v1/applications/${uuid}/deployments?page_size=2`, { key: owner.api_key }));
      assert.equal(list.total, 4);
      assert.deepEqual(list.items.map((d: { id: number }) => d.id), [fourth.id, third.id]);
    });

    it('refuses bad deploy bodies (400) and changes nothing', async () => {
      const uuid = await newApp();
      const version = await feedVersion(t);
      for (const body of [{ ref: '-x' }, { ref: 'a..b' }, { commit: 'abc' }, { commit: SHA(1).toUpperCase() }, { surprise: 1 }, { ref: 7 }]) {
        const res = await t.api('POST', `/v1/applications/${uuid}/deployments`, { key: owner.api_key, body });
        assert.equal(res.status, 400, JSON.stringify(body));
      }
      assert.equal((await expectBody(200, t.api('GET', `/v1/applications/${uuid}/deployments`, { key: owner.api_key }))).total, 0);
      assert.equal(await feedVersion(t), version);
      for (const id of ['0', 'abc', '-1']) assert.equal((await t.api('GET', `/v1/applications/${uuid}/deployments/${id}`, { key: owner.api_key })).status, 400, id);
      assert.equal((await t.api('GET', `/v1/applications/${uuid}/deployments/999999`, { key: owner.api_key })).status, 404);
    });

    it('cancels queued and running deployments, and 409 deployment_finished once finished', async () => {
      const uuid = await newApp();
      const queued = await deploy(uuid);
      const cancelled = await expectBody(200, t.api('POST', `/v1/applications/${uuid}/deployments/${queued.id}/cancel`, { key: owner.api_key }));
      assert.equal(cancelled.status, 'cancelled');
      assert.equal(await order(uuid), null);
      const again = await t.api('POST', `/v1/applications/${uuid}/deployments/${queued.id}/cancel`, { key: owner.api_key });
      assert.equal(again.status, 409);
      assert.equal(again.body.code, 'deployment_finished');

      const running = await deploy(uuid);
      await report(uuid, 'agent-1', [status(running.id, 'building')]);
      await expectBody(200, t.api('POST', `/v1/applications/${uuid}/deployments/${running.id}/cancel`, { key: owner.api_key }));
      assert.equal(await order(uuid), null, 'a cancelled running deployment leaves the order: its agent stops');
      // The agent's later reports for it are refused as cancelled; its own acknowledgement is taken.
      assert.deepEqual(await report(uuid, 'agent-1', [status(running.id, 'deploying'), { type: 'log', deployment_id: running.id, lines: ['stopping'] }, status(running.id, 'cancelled')]), [
        { ok: false, code: 'deployment_cancelled', message: 'The deployment was cancelled' },
        { ok: true },
        { ok: true },
      ]);
    });

    it('rolls back only to a deployment that was live with a known commit (409 not_rollbackable otherwise)', async () => {
      const uuid = await newApp();
      const one = await deploy(uuid);
      await goLive(uuid, one.id, 'agent-1', SHA(101));
      const two = await deploy(uuid);
      await goLive(uuid, two.id, 'agent-1', SHA(102));
      const first = await get(uuid, one.id);
      assert.equal(first.status, 'superseded', 'going live supersedes the previous live one');
      assert.ok(first.live_at);
      assert.equal((await expectBody(200, t.api('GET', `/v1/applications/${uuid}`, { key: owner.api_key }))).live_deployment_id, two.id);

      const back = await expectBody(202, t.api('POST', `/v1/applications/${uuid}/deployments/${one.id}/rollback`, { key: owner.api_key }));
      assert.equal(back.trigger, 'rollback');
      assert.equal(back.commit_sha, SHA(101));
      assert.equal(back.rollback_of, one.id);
      assert.deepEqual(await order(uuid), { deployment_id: back.id, trigger: 'rollback', ref: 'main', commit: SHA(101) });

      const never = await deploy(uuid);
      await report(uuid, 'agent-1', [status(never.id, 'failed', { reason: 'x' })]);
      for (const id of [never.id, back.id]) {
        const res = await t.api('POST', `/v1/applications/${uuid}/deployments/${id}/rollback`, { key: owner.api_key });
        assert.equal(res.status, 409, String(id));
        assert.equal(res.body.code, 'not_rollbackable');
      }
    });
  });

  describe('agent events', () => {
    it('moves a deployment through building, deploying and live, with the commit and timestamps', async () => {
      const uuid = await newApp();
      const d = await deploy(uuid);
      await report(uuid, 'agent-1', [status(d.id, 'building', { commit: SHA(7) })]);
      const building = await get(uuid, d.id);
      assert.equal(building.agent_id, 'agent-1');
      assert.equal(building.commit_sha, SHA(7));
      assert.ok(building.started_at);
      // A retried report is taken again, and changes nothing.
      assert.deepEqual(await report(uuid, 'agent-1', [status(d.id, 'building')]), [{ ok: true }]);
      await report(uuid, 'agent-1', [status(d.id, 'deploying'), status(d.id, 'live')]);
      const live = await get(uuid, d.id);
      assert.equal(live.status, 'live');
      assert.ok(live.live_at && live.finished_at);
      assert.equal(await order(uuid), null);
    });

    it('refuses wrong transitions, another agent’s claim, finished and unknown deployments, per event', async () => {
      const uuid = await newApp();
      const otherApp = await newApp();
      const foreign = await deploy(otherApp);
      const d = await deploy(uuid);
      const results = await report(uuid, 'agent-1', [
        status(d.id, 'deploying'),
        status(d.id, 'live'),
        status(d.id, 'building'),
        status(foreign.id, 'building'),
        status(987654, 'building'),
        { type: 'log', deployment_id: 987654, lines: ['x'] },
      ]);
      assert.deepEqual(
        results.map((r) => (r.ok ? 'ok' : r.code)),
        ['invalid_transition', 'invalid_transition', 'ok', 'not_found', 'not_found', 'not_found'],
      );
      assert.deepEqual(
        (await report(uuid, 'agent-2', [status(d.id, 'deploying'), { type: 'log', deployment_id: d.id, lines: ['mine?'] }, status(d.id, 'failed')])).map((r) => r.code),
        ['deployment_claimed', 'deployment_claimed', 'deployment_claimed'],
      );
      await report(uuid, 'agent-1', [status(d.id, 'failed', { reason: 'boom' })]);
      assert.deepEqual((await report(uuid, 'agent-1', [status(d.id, 'live')])).map((r) => r.code), ['deployment_finished']);
      assert.equal((await get(uuid, d.id)).status, 'failed');
      // The log of a deployment nobody claimed yet is refused.
      const next = await deploy(uuid);
      assert.deepEqual((await report(uuid, 'agent-1', [{ type: 'log', deployment_id: next.id, lines: ['early'] }])).map((r) => r.code), ['invalid_transition']);
    });

    it('keeps the newest 2000 log lines in order', async () => {
      const uuid = await newApp();
      const d = await deploy(uuid);
      await report(uuid, 'agent-1', [status(d.id, 'building')]);
      const batch = (from: number) => ({ type: 'log', deployment_id: d.id, lines: Array.from({ length: 64 }, (_, i) => `line ${from + i}`) });
      let sent = 0;
      while (sent < 2100) {
        const list = Array.from({ length: 10 }, (_, i) => batch(sent + i * 64));
        await report(uuid, 'agent-1', list);
        sent += 640;
      }
      const detail = await get(uuid, d.id);
      assert.equal(detail.log.length, 2000);
      assert.equal(detail.log[0], `line ${sent - 2000}`);
      assert.equal(detail.log[1999], `line ${sent - 1}`);
      assert.equal(detail.log_lines_dropped, sent - 2000);
      const long = 'x'.repeat(4096);
      assert.deepEqual(await report(uuid, 'agent-1', [{ type: 'log', deployment_id: d.id, lines: [long] }]), [{ ok: true }]);
      assert.equal((await get(uuid, d.id)).log[1999], long);
    });

    it('records the live process state and shows it as runtime', async () => {
      const uuid = await newApp();
      const d = await deploy(uuid);
      await goLive(uuid, d.id);
      await report(uuid, 'agent-1', [{ type: 'process', state: 'restarting', deployment_id: d.id, restarts: 2, message: 'exited with code 1' }]);
      const app = await expectBody(200, t.api('GET', `/v1/applications/${uuid}`, { key: owner.api_key }));
      assert.equal(app.runtime.state, 'restarting');
      assert.equal(app.runtime.restarts, 2);
      assert.equal(app.runtime.message, 'exited with code 1');
      assert.equal(app.runtime.deployment_id, d.id);
      assert.equal(app.runtime.agent_id, 'agent-1');
      assert.ok(app.runtime.reported_at);
      await report(uuid, 'agent-1', [{ type: 'process', state: 'running', deployment_id: null, restarts: 0 }]);
      assert.equal((await expectBody(200, t.api('GET', `/v1/applications/${uuid}`, { key: owner.api_key }))).runtime.state, 'running');
    });

    it('answers 400 for bad bodies and changes nothing', async () => {
      const uuid = await newApp();
      const d = await deploy(uuid);
      const version = await feedVersion(t);
      const bad: unknown[] = [
        {},
        { agent_id: 'a', events: [] },
        { agent_id: '', events: [status(d.id, 'building')] },
        { agent_id: 'has space', events: [status(d.id, 'building')] },
        { agent_id: 'a', events: [status(d.id, 'queued')] },
        { agent_id: 'a', events: [status(d.id, 'superseded')] },
        { agent_id: 'a', events: [status(d.id, 'building', { commit: 'nope' })] },
        { agent_id: 'a', events: [status(0, 'building')] },
        { agent_id: 'a', events: [{ type: 'log', deployment_id: d.id, lines: [] }] },
        { agent_id: 'a', events: [{ type: 'log', deployment_id: d.id, lines: ['x'.repeat(4097)] }] },
        { agent_id: 'a', events: [{ type: 'log', deployment_id: d.id, lines: Array(65).fill('x') }] },
        { agent_id: 'a', events: [{ type: 'process', state: 'dead', deployment_id: null, restarts: 0 }] },
        { agent_id: 'a', events: [{ type: 'unknown' }] },
        { agent_id: 'a', events: Array(101).fill(status(d.id, 'building')) },
        { agent_id: 'a', events: [status(d.id, 'building')], extra: 1 },
        { agent_id: 'a', events: [status(d.id, 'building', { extra: 1 })] },
      ];
      for (const body of bad) {
        const res = await t.api('POST', `/v1/applications/${uuid}/agent-events`, { key: owner.api_key, body });
        assert.equal(res.status, 400, `${JSON.stringify(body).slice(0, 120)}: ${res.text.slice(0, 200)}`);
      }
      assert.equal((await get(uuid, d.id)).status, 'queued');
      assert.equal(await feedVersion(t), version);
    });

    it('needs tunnels:connect in the application’s account (403), and hides other accounts’ applications (404)', async () => {
      const boss = await t.createUser('business');
      const builder = await t.createUser('business');
      const agentKeyHolder = await t.createUser('business');
      const org = await orgWithMember(t, boss, builder, ['endpoints:read', 'endpoints:write', 'endpoints:update']);
      await expectBody(201, t.api('POST', `/v1/organizations/${org.id}/members`, { key: boss.api_key, body: { email: agentKeyHolder.email, permissions: ['tunnels:connect'] } }));
      const uuid = await newApp(boss, org.headers);
      const d = await expectBody(202, t.api('POST', `/v1/applications/${uuid}/deployments`, { key: boss.api_key, body: {}, headers: org.headers }));
      const body = { agent_id: 'agent-9', events: [status(d.id, 'building')] };
      const denied = await t.api('POST', `/v1/applications/${uuid}/agent-events`, { key: builder.api_key, body, headers: org.headers });
      assert.equal(denied.status, 403);
      assert.equal(denied.body.detail.permission, 'tunnels:connect');
      const ok = await t.api('POST', `/v1/applications/${uuid}/agent-events`, { key: agentKeyHolder.api_key, body, headers: org.headers });
      assert.equal(ok.status, 200, ok.text);
      assert.deepEqual(ok.body.results, [{ ok: true }]);
      // A key of another account (the holder's personal one) does not see the application.
      const elsewhere = await t.api('POST', `/v1/applications/${uuid}/agent-events`, { key: agentKeyHolder.api_key, body });
      assert.equal(elsewhere.status, 404);
      const noKey = await t.api('POST', `/v1/applications/${uuid}/agent-events`, { key: null, body });
      assert.equal(noKey.status, 401);
    });
  });
});
