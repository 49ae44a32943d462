// The git push webhook over real HTTP, for GitHub and GitLab: signatures over the raw bytes (one 401 body whatever is
// wrong), what a push queues and what is ignored, the order of 404/413/415/401/400, redeliveries answered as the first
// time, regenerated secrets, and the per-application delivery rate.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, randomUUID } from 'node:crypto';
import type { TestNode } from '../helpers/node.ts';
import { createEndpoint, expectBody, nodeWithOwner, storeRows, type User } from '../helpers/endpoint-api.ts';

const SHA = (n: number) => n.toString(16).padStart(40, 'a');
const ZEROS = '0'.repeat(40);

interface Hook {
  uuid: string;
  url: string;
  secret: string;
}

describe('git webhooks', () => {
  let t: TestNode;
  let owner: User;
  before(async () => {
    ({ t, owner } = await nodeWithOwner({ EDGE_DEPLOY_WEBHOOK_MAX_BYTES: '4096' }));
  });
  after(() => t.close());

  const sql = storeRows(() => t);
  let names = 0;
  async function newApp(provider: 'github' | 'gitlab', over: Record<string, unknown> = {}): Promise<Hook> {
    const endpoint = await createEndpoint(t, owner);
    const body = { name: `hooked-${++names}`, endpoint: endpoint.uuid, repository_url: 'https://example.com/app.git', provider, run_command: 'run', ...over };
    const app = await expectBody(201, t.api('POST', '/v1/applications', { key: owner.api_key, body }));
    const hook = await expectBody(200, t.api('GET', `/v1/applications/${app.uuid}/webhook`, { key: owner.api_key }));
    return { uuid: app.uuid, url: hook.url, secret: hook.secret };
  }
  const deploymentCount = async (uuid: string) =>
    (await sql<{ n: number }>('SELECT count(*)::int AS n FROM deployments d JOIN applications a ON a.id = d.application_id WHERE a.uuid = $1', [uuid]))[0].n;

  /** POSTs raw bytes to the webhook path of `uuid`, no API key. */
  async function deliver(uuid: string, body: string, headers: Record<string, string>) {
    const res = await fetch(`${t.controlUrl}/api/webhooks/git/${uuid}`, { method: 'POST', headers, body });
    const text = await res.text();
    let parsed: any;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
    return { status: res.status, headers: res.headers, body: parsed, text };
  }
  const sign = (secret: string, body: string) => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
  function github(hook: Hook, event: string, payload: unknown, extra: Record<string, string> = {}) {
    const body = JSON.stringify(payload);
    return deliver(hook.uuid, body, { 'content-type': 'application/json', 'x-github-event': event, 'x-github-delivery': randomUUID(), 'x-hub-signature-256': sign(hook.secret, body), ...extra });
  }
  function gitlab(hook: Hook, event: string, payload: unknown, extra: Record<string, string> = {}) {
    return deliver(hook.uuid, JSON.stringify(payload), { 'content-type': 'application/json', 'x-gitlab-event': event, 'x-gitlab-event-uuid': randomUUID(), 'x-gitlab-token': hook.secret, ...extra });
  }
  const push = (ref: string, after: string, over: Record<string, unknown> = {}) => ({ ref, after, before: SHA(1), deleted: false, repository: { full_name: 'example/app' }, ...over });
  const glPush = (ref: string, after: string, over: Record<string, unknown> = {}) => ({ object_kind: 'push', ref, after, before: SHA(1), checkout_sha: after, ...over });

  describe('GitHub', () => {
    it('queues a deployment of the pushed commit (202) with a good signature', async () => {
      const hook = await newApp('github');
      const res = await github(hook, 'push', push('refs/heads/main', SHA(2)));
      assert.equal(res.status, 202, res.text);
      assert.equal(res.body.status, 'queued');
      assert.ok(Number.isInteger(res.body.deployment_id));
      const d = await expectBody(200, t.api('GET', `/v1/applications/${hook.uuid}/deployments/${res.body.deployment_id}`, { key: owner.api_key }));
      assert.equal(d.status, 'queued');
      assert.equal(d.trigger, 'push');
      assert.equal(d.ref, 'main');
      assert.equal(d.commit_sha, SHA(2));
    });

    it('answers 401 with one body for a missing, wrong or wrong-kind signature, and queues nothing', async () => {
      const hook = await newApp('github');
      const body = JSON.stringify(push('refs/heads/main', SHA(3)));
      const base = { 'content-type': 'application/json', 'x-github-event': 'push' };
      const bodies = new Set<string>();
      const variants: Array<Record<string, string>> = [
        {},
        { 'x-hub-signature-256': sign('wrong secret', body) },
        { 'x-hub-signature-256': sign(hook.secret, body + ' ') },
        { 'x-hub-signature-256': sign(hook.secret, body).replace('sha256=', 'sha1=') },
        { 'x-hub-signature-256': sign(hook.secret, body).slice(0, -2) },
        { 'x-hub-signature-256': 'sha256=zz' + sign(hook.secret, body).slice(9) },
        { 'x-hub-signature': `sha1=${createHmac('sha1', hook.secret).update(body).digest('hex')}` },
        { 'x-gitlab-token': hook.secret },
      ];
      for (const headers of variants) {
        const res = await deliver(hook.uuid, body, { ...base, ...headers });
        assert.equal(res.status, 401, JSON.stringify(headers));
        bodies.add(res.text);
      }
      assert.equal(bodies.size, 1);
      assert.equal(JSON.parse([...bodies][0]).code, 'webhook_signature_invalid');
      assert.equal(await deploymentCount(hook.uuid), 0);
    });

    it('ignores a ping, another branch, a tag, a deletion, other events, and everything with auto_deploy off (200)', async () => {
      const hook = await newApp('github');
      const cases: Array<[string, unknown, string]> = [
        ['ping', { zen: 'Keep it logically awesome.', hook_id: 1 }, 'ping'],
        ['push', push('refs/heads/feature', SHA(4)), 'other_branch'],
        ['push', push('refs/tags/v1.0.0', SHA(4)), 'tag'],
        ['push', push('refs/heads/main', ZEROS, { deleted: true }), 'branch_deleted'],
        ['pull_request', { action: 'opened' }, 'unsupported_event'],
        ['issues', { action: 'opened' }, 'unsupported_event'],
      ];
      for (const [event, payload, reason] of cases) {
        const res = await github(hook, event, payload);
        assert.equal(res.status, 200, `${event} ${reason}: ${res.text}`);
        assert.deepEqual(res.body, { status: 'ignored', reason });
      }
      await expectBody(200, t.api('PATCH', `/v1/applications/${hook.uuid}`, { key: owner.api_key, body: { auto_deploy: false } }));
      assert.deepEqual((await github(hook, 'push', push('refs/heads/main', SHA(5)))).body, { status: 'ignored', reason: 'auto_deploy_off' });
      assert.equal(await deploymentCount(hook.uuid), 0);
    });

    it('answers a redelivery with the same deployment and queues nothing more', async () => {
      const hook = await newApp('github');
      const delivery = randomUUID();
      const first = await github(hook, 'push', push('refs/heads/main', SHA(6)), { 'x-github-delivery': delivery });
      assert.equal(first.status, 202);
      const again = await github(hook, 'push', push('refs/heads/main', SHA(6)), { 'x-github-delivery': delivery });
      assert.equal(again.status, 202);
      assert.deepEqual(again.body, first.body);
      // Concurrent copies of one delivery: one deployment.
      const copies = randomUUID();
      const answers = await Promise.all([1, 2, 3].map(() => github(hook, 'push', push('refs/heads/main', SHA(7)), { 'x-github-delivery': copies })));
      assert.deepEqual(new Set(answers.map((a) => a.status)), new Set([202]));
      assert.equal(new Set(answers.map((a) => a.body.deployment_id)).size, 1);
      assert.equal(await deploymentCount(hook.uuid), 2);
      // An ignored delivery is remembered too.
      const ping = randomUUID();
      assert.deepEqual((await github(hook, 'ping', {}, { 'x-github-delivery': ping })).body, { status: 'ignored', reason: 'ping' });
      assert.deepEqual((await github(hook, 'ping', {}, { 'x-github-delivery': ping })).body, { status: 'ignored', reason: 'ping' });
    });

    it('stops taking the old secret at once when it is regenerated', async () => {
      const hook = await newApp('github');
      const fresh = await expectBody(200, t.api('POST', `/v1/applications/${hook.uuid}/webhook/regenerate`, { key: owner.api_key }));
      assert.equal((await github(hook, 'push', push('refs/heads/main', SHA(8)))).status, 401);
      assert.equal((await github({ ...hook, secret: fresh.secret }, 'push', push('refs/heads/main', SHA(8)))).status, 202);
    });
  });

  describe('GitLab', () => {
    it('queues on a Push Hook to the branch with the right token (202)', async () => {
      const hook = await newApp('gitlab', { branch: 'deploy' });
      const res = await gitlab(hook, 'Push Hook', glPush('refs/heads/deploy', SHA(9)));
      assert.equal(res.status, 202, res.text);
      const d = await expectBody(200, t.api('GET', `/v1/applications/${hook.uuid}/deployments/${res.body.deployment_id}`, { key: owner.api_key }));
      assert.equal(d.commit_sha, SHA(9));
      assert.equal(d.ref, 'deploy');
    });

    it('answers 401 with one body for a missing or wrong token, or a GitHub signature', async () => {
      const hook = await newApp('gitlab');
      const body = JSON.stringify(glPush('refs/heads/main', SHA(10)));
      const texts = new Set<string>();
      const variants: Array<Record<string, string>> = [{}, { 'x-gitlab-token': 'wrong' }, { 'x-gitlab-token': hook.secret + 'x' }, { 'x-gitlab-token': '' }, { 'x-hub-signature-256': sign(hook.secret, body) }];
      for (const headers of variants) {
        const res = await deliver(hook.uuid, body, { 'content-type': 'application/json', 'x-gitlab-event': 'Push Hook', ...headers });
        assert.equal(res.status, 401, JSON.stringify(headers));
        texts.add(res.text);
      }
      assert.equal(texts.size, 1);
      assert.equal(await deploymentCount(hook.uuid), 0);
    });

    it('ignores a tag push, another branch, a deletion and other events', async () => {
      const hook = await newApp('gitlab');
      const cases: Array<[string, unknown, string]> = [
        ['Tag Push Hook', { object_kind: 'tag_push', ref: 'refs/tags/v1', after: SHA(11) }, 'tag'],
        ['Push Hook', glPush('refs/heads/other', SHA(11)), 'other_branch'],
        ['Push Hook', glPush('refs/heads/main', ZEROS, { checkout_sha: null }), 'branch_deleted'],
        ['Merge Request Hook', { object_kind: 'merge_request' }, 'unsupported_event'],
      ];
      for (const [event, payload, reason] of cases) {
        const res = await gitlab(hook, event, payload);
        assert.equal(res.status, 200, res.text);
        assert.deepEqual(res.body, { status: 'ignored', reason });
      }
      const delivery = randomUUID();
      const first = await gitlab(hook, 'Push Hook', glPush('refs/heads/main', SHA(12)), { 'x-gitlab-event-uuid': delivery });
      const again = await gitlab(hook, 'Push Hook', glPush('refs/heads/main', SHA(12)), { 'x-gitlab-event-uuid': delivery });
      assert.equal(again.status, 202);
      assert.deepEqual(again.body, first.body);
      assert.equal(await deploymentCount(hook.uuid), 1);
    });
  });

  describe('order of refusals', () => {
    it('answers 404 for an unknown, malformed, manual or deleted application, whatever else is wrong', async () => {
      const endpoint = await createEndpoint(t, owner);
      const manual = await expectBody(201, t.api('POST', '/v1/applications', { key: owner.api_key, body: { name: 'manual-hook', endpoint: endpoint.uuid, source: 'manual', run_command: 'x' } }));
      const gone = await newApp('github');
      await expectBody(204, t.api('DELETE', `/v1/applications/${gone.uuid}`, { key: owner.api_key }));
      for (const uuid of [randomUUID(), 'not-a-uuid', manual.uuid, gone.uuid]) {
        for (const [body, headers] of [
          ['{}', { 'content-type': 'application/json' }],
          ['x'.repeat(10000), { 'content-type': 'text/plain' }],
          ['hello', {}],
        ] as Array<[string, Record<string, string>]>) {
          const res = await deliver(uuid, body, headers);
          assert.equal(res.status, 404, `${uuid} ${res.text}`);
          assert.equal(res.body.code, 'not_found');
        }
      }
    });

    it('answers 413 over EDGE_DEPLOY_WEBHOOK_MAX_BYTES, then 415, then 401, then 400 for invalid JSON', async () => {
      const hook = await newApp('github');
      const big = JSON.stringify(push('refs/heads/main', SHA(13), { padding: 'x'.repeat(5000) }));
      const tooBig = await deliver(hook.uuid, big, { 'content-type': 'application/json', 'x-github-event': 'push', 'x-hub-signature-256': sign(hook.secret, big) });
      assert.equal(tooBig.status, 413);
      assert.equal(tooBig.body.code, 'body_too_large');
      assert.equal((await deliver(hook.uuid, big, { 'content-type': 'text/plain' })).status, 413);

      const body = JSON.stringify(push('refs/heads/main', SHA(13)));
      for (const type of ['text/plain', 'application/x-www-form-urlencoded', undefined]) {
        const res = await deliver(hook.uuid, body, { ...(type ? { 'content-type': type } : {}), 'x-github-event': 'push' });
        assert.equal(res.status, 415, String(type));
        assert.equal(res.body.code, 'unsupported_media_type');
      }
      assert.equal((await deliver(hook.uuid, body, { 'content-type': 'application/json', 'x-github-event': 'push', 'x-hub-signature-256': sign('nope', body) })).status, 401);

      const broken = '{"ref": "refs/heads/main", ';
      const invalid = await deliver(hook.uuid, broken, { 'content-type': 'application/json; charset=utf-8', 'x-github-event': 'push', 'x-hub-signature-256': sign(hook.secret, broken) });
      assert.equal(invalid.status, 400);
      assert.equal(invalid.body.code, 'invalid_json');
      assert.equal(await deploymentCount(hook.uuid), 0);
    });

    it('needs no API key and is in the OpenAPI document without one', async () => {
      const doc = await expectBody(200, t.api('GET', '/v1/openapi.json', { key: null }));
      const op = doc.paths['/api/webhooks/git/{uuid}'].post;
      assert.deepEqual(op.security, []);
      // Every operation of applications and deployments is described.
      const operations: Array<[string, string]> = [
        ['/v1/applications', 'post'],
        ['/v1/applications', 'get'],
        ['/v1/applications/{uuid}', 'get'],
        ['/v1/applications/{uuid}', 'patch'],
        ['/v1/applications/{uuid}', 'delete'],
        ['/v1/applications/{uuid}/webhook', 'get'],
        ['/v1/applications/{uuid}/webhook/regenerate', 'post'],
        ['/v1/applications/{uuid}/deployments', 'get'],
        ['/v1/applications/{uuid}/deployments', 'post'],
        ['/v1/applications/{uuid}/deployments/{id}', 'get'],
        ['/v1/applications/{uuid}/deployments/{id}/rollback', 'post'],
        ['/v1/applications/{uuid}/deployments/{id}/cancel', 'post'],
        ['/v1/applications/{uuid}/agent-events', 'post'],
      ];
      for (const [path, method] of operations) assert.ok(doc.paths[path]?.[method]?.summary, `${method.toUpperCase()} ${path} in the OpenAPI document`);
    });
  });

  describe('delivery rate', () => {
    let limited: TestNode;
    let user: User;
    before(async () => {
      ({ t: limited, owner: user } = await nodeWithOwner({ EDGE_DEPLOY_WEBHOOK_RATE: '3' }));
    });
    after(() => limited.close());

    it('answers 429 with Retry-After beyond the rate per application, and other applications still pass', async () => {
      const make = async (name: string) => {
        const endpoint = await createEndpoint(limited, user);
        const app = await expectBody(201, limited.api('POST', '/v1/applications', { key: user.api_key, body: { name, endpoint: endpoint.uuid, repository_url: 'https://example.com/x.git', provider: 'github', run_command: 'run' } }));
        return { uuid: app.uuid, ...(await expectBody(200, limited.api('GET', `/v1/applications/${app.uuid}/webhook`, { key: user.api_key }))) };
      };
      const a = await make('rate-a');
      const b = await make('rate-b');
      const ping = (hook: { uuid: string; secret: string }) =>
        fetch(`${limited.controlUrl}/api/webhooks/git/${hook.uuid}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-github-event': 'ping', 'x-hub-signature-256': sign(hook.secret, '{}') },
          body: '{}',
        });
      for (let i = 0; i < 3; i++) assert.equal((await ping(a)).status, 200);
      const refused = await ping(a);
      assert.equal(refused.status, 429);
      assert.equal(((await refused.json()) as { code: string }).code, 'webhook_rate_limited');
      const retry = Number(refused.headers.get('retry-after'));
      assert.ok(retry >= 1 && retry <= 60, String(retry));
      assert.equal((await ping(b)).status, 200);
    });
  });
});
