// Applications over real HTTP: create, list, get, update and delete with every refusal changing nothing, ownership as
// endpoints have it (another account's is 404), permissions and suspension, the webhook's URL and secret (sealed at
// rest, regenerated), and the application's feed entry (validated against ApplicationConfigSchema, withdrawn on delete).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Value } from '@sinclair/typebox/value';
import { ApplicationConfigSchema, APPLICATION_TOPIC } from '../../src/shared/deploy.ts';
import type { TestNode } from '../helpers/node.ts';
import { createEndpoint, expectBody, feedVersion, nodeWithOwner, orgWithMember, storeRows, type User } from '../helpers/endpoint-api.ts';

describe('applications API', () => {
  let t: TestNode;
  let owner: User;
  let other: User;
  before(async () => {
    ({ t, owner } = await nodeWithOwner({ EDGE_PUBLIC_CONTROL_URL: 'https://control.example.com/' }));
    other = await t.createUser('business');
  });
  after(() => t.close());

  const sql = storeRows(() => t);
  const as = (user: Pick<User, 'api_key'>, method: string, path: string, body?: unknown, headers?: Record<string, string>) => t.api(method, path, { key: user.api_key, body, headers });
  let names = 0;
  const gitApp = (endpoint: string, over: Record<string, unknown> = {}) => ({
    name: `app-${++names}`,
    endpoint,
    source: 'git',
    repository_url: 'https://github.com/example/app.git',
    provider: 'github',
    run_command: 'node server.js',
    ...over,
  });
  async function newApp(user: User = owner, over: Record<string, unknown> = {}) {
    const endpoint = await createEndpoint(t, user);
    return expectBody(201, as(user, 'POST', '/v1/applications', gitApp(endpoint.uuid, over)));
  }
  const feedEntry = async (uuid: string) => (await sql<{ data: unknown }>('SELECT data FROM feed_entries WHERE topic = $1 AND key = $2', [APPLICATION_TOPIC, uuid]))[0]?.data;
  const count = async () => (await sql<{ n: number }>('SELECT count(*)::int AS n FROM applications'))[0].n;

  describe('create and read', () => {
    it('creates a git application with the defaults and publishes its config', async () => {
      const endpoint = await createEndpoint(t, owner);
      const res = await as(owner, 'POST', '/v1/applications', { name: 'web', endpoint: endpoint.uuid, repository_url: 'git@github.com:example/web.git', provider: 'github', run_command: 'npm start' });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.headers.get('location'), `/v1/applications/${res.body.uuid}`);
      const app = res.body;
      assert.equal(app.source, 'git');
      assert.equal(app.branch, 'main');
      assert.equal(app.auto_deploy, true);
      assert.equal(app.health_path, '/');
      assert.equal(app.build_command, null);
      assert.equal(app.endpoint, endpoint.uuid);
      assert.equal(app.account_id, owner.account_id);
      assert.equal(app.runtime, null);
      assert.equal(app.live_deployment_id, null);
      assert.equal('secret' in app || 'webhook_secret_sealed' in app, false);
      assert.deepEqual(await expectBody(200, as(owner, 'GET', `/v1/applications/${app.uuid}`)), app);

      const entry = await feedEntry(app.uuid);
      assert.ok(Value.Check(ApplicationConfigSchema, entry), JSON.stringify([...Value.Errors(ApplicationConfigSchema, entry)].slice(0, 2)));
      assert.deepEqual(entry, {
        uuid: app.uuid,
        name: 'web',
        account_id: owner.account_id,
        endpoint_uuid: endpoint.uuid,
        source: 'git',
        repository_url: 'git@github.com:example/web.git',
        build_command: null,
        run_command: 'npm start',
        health_path: '/',
        order: null,
      });
    });

    it('creates a manual application with no repository, provider or webhook', async () => {
      const endpoint = await createEndpoint(t, owner);
      const app = await expectBody(201, as(owner, 'POST', '/v1/applications', { name: 'manual-one', endpoint: endpoint.uuid, source: 'manual', run_command: './run', build_command: 'make', health_path: '/healthz' }));
      assert.equal(app.source, 'manual');
      assert.equal(app.repository_url, null);
      assert.equal(app.provider, null);
      assert.equal(app.build_command, 'make');
      const res = await as(owner, 'GET', `/v1/applications/${app.uuid}/webhook`);
      assert.equal(res.status, 404);
      assert.equal(res.body.code, 'not_found');
      assert.equal((await as(owner, 'POST', `/v1/applications/${app.uuid}/webhook/regenerate`)).status, 404);
      assert.ok(Value.Check(ApplicationConfigSchema, await feedEntry(app.uuid)));
    });

    it('accepts https, ssh:// and scp-like repository URLs', async () => {
      for (const url of ['https://gitlab.com/group/sub/app.git', 'ssh://git@github.com:22/example/app.git', 'ssh://host.example/srv/repo', 'deploy@git.example.com:srv/app.git']) {
        const app = await newApp(owner, { repository_url: url, provider: 'gitlab' });
        assert.equal(app.repository_url, url);
      }
    });

    it('lists the active account’s applications, newest first, paged', async () => {
      const mine = await newApp(other);
      const second = await newApp(other);
      const list = await expectBody(200, as(other, 'GET', '/v1/applications?page_size=1'));
      assert.equal(list.total, 2);
      assert.equal(list.page_size, 1);
      assert.deepEqual(list.items.map((a: { uuid: string }) => a.uuid), [second.uuid]);
      const page2 = await expectBody(200, as(other, 'GET', '/v1/applications?page=2&page_size=1'));
      assert.deepEqual(page2.items.map((a: { uuid: string }) => a.uuid), [mine.uuid]);
      assert.equal((await as(other, 'GET', '/v1/applications?page=1000&page_size=100')).body.code, 'pagination_too_deep');
    });
  });

  describe('refusals change nothing', () => {
    it('answers 400 for every bad create body', async () => {
      const endpoint = await createEndpoint(t, owner);
      const e = endpoint.uuid;
      const before = await count();
      const version = await feedVersion(t);
      const cases: Array<[Record<string, unknown>, string, string?]> = [
        [{ ...gitApp(e), surprise: 1 }, 'surprise', 'unknown_field'],
        [{ ...gitApp(e), name: '' }, 'name'],
        [{ ...gitApp(e), name: 'x'.repeat(101) }, 'name'],
        [{ ...gitApp(e), name: undefined }, 'name'],
        [{ ...gitApp(e), endpoint: 'not-a-uuid' }, 'endpoint'],
        [{ ...gitApp(e), endpoint: undefined }, 'endpoint'],
        [{ ...gitApp(e), source: 'svn' }, 'source'],
        [{ ...gitApp(e), repository_url: undefined }, 'repository_url'],
        [{ ...gitApp(e), provider: undefined }, 'provider'],
        [{ ...gitApp(e), provider: 'bitbucket' }, 'provider'],
        [{ ...gitApp(e), repository_url: 'http://github.com/example/app.git' }, 'repository_url'],
        [{ ...gitApp(e), repository_url: 'git://github.com/example/app.git' }, 'repository_url'],
        [{ ...gitApp(e), repository_url: 'ext::sh -c touch% /tmp/pwned' }, 'repository_url'],
        [{ ...gitApp(e), repository_url: 'ext::ssh' }, 'repository_url'],
        [{ ...gitApp(e), repository_url: 'fd::17' }, 'repository_url'],
        [{ ...gitApp(e), repository_url: '-uhttps://example.com/x' }, 'repository_url'],
        [{ ...gitApp(e), repository_url: 'https://example.com/a b.git' }, 'repository_url'],
        [{ ...gitApp(e), repository_url: 'https://example.com/a\n.git' }, 'repository_url'],
        [{ ...gitApp(e), repository_url: 'https://user:token@github.com/example/app.git' }, 'repository_url'],
        [{ ...gitApp(e), repository_url: 'file:///srv/repo.git' }, 'repository_url'],
        [{ ...gitApp(e), repository_url: 'git@github.com:-oProxyCommand=x' }, 'repository_url'],
        [{ ...gitApp(e), repository_url: 'ssh://-oProxyCommand=x/path' }, 'repository_url'],
        [{ ...gitApp(e), repository_url: '' }, 'repository_url'],
        [{ ...gitApp(e), branch: '-x' }, 'branch'],
        [{ ...gitApp(e), branch: 'a..b' }, 'branch'],
        [{ ...gitApp(e), branch: 'has space' }, 'branch'],
        [{ ...gitApp(e), branch: '' }, 'branch'],
        [{ ...gitApp(e), auto_deploy: 'yes' }, 'auto_deploy'],
        [{ ...gitApp(e), run_command: '' }, 'run_command'],
        [{ ...gitApp(e), run_command: undefined }, 'run_command'],
        [{ ...gitApp(e), run_command: 'x'.repeat(4097) }, 'run_command'],
        [{ ...gitApp(e), run_command: 'a\u0000b' }, 'run_command'],
        [{ ...gitApp(e), build_command: '' }, 'build_command'],
        [{ ...gitApp(e), health_path: 'health' }, 'health_path'],
        [{ ...gitApp(e), health_path: `/${'x'.repeat(255)}` }, 'health_path'],
        [{ ...gitApp(e), health_path: '/a b' }, 'health_path'],
        [{ name: 'm', endpoint: e, source: 'manual', run_command: 'x', repository_url: 'https://github.com/a/b' }, 'repository_url'],
        [{ name: 'm', endpoint: e, source: 'manual', run_command: 'x', provider: 'github' }, 'provider'],
      ];
      for (const [body, field, code = 'invalid_request'] of cases) {
        const res = await as(owner, 'POST', '/v1/applications', body);
        assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
        assert.equal(res.body.code, code, JSON.stringify(body));
        assert.equal(res.body.detail.field, field, JSON.stringify(body));
      }
      const invalidJson = await t.api('POST', '/v1/applications', { key: owner.api_key, raw: '{"name":', headers: { 'content-type': 'application/json' } });
      assert.equal(invalidJson.status, 400);
      assert.equal(invalidJson.body.code, 'invalid_json');
      assert.equal(await count(), before);
      assert.equal(await feedVersion(t), version);
    });

    it('accepts file:// repositories only where EDGE_DEPLOY_ALLOW_FILE_URLS is on', async () => {
      const { t: other, owner: user } = await nodeWithOwner({ EDGE_DEPLOY_ALLOW_FILE_URLS: 'true' });
      try {
        const endpoint = await createEndpoint(other, user);
        const app = await expectBody(201, other.api('POST', '/v1/applications', { key: user.api_key, body: gitApp(endpoint.uuid, { repository_url: 'file:///srv/git/app.git' }) }));
        assert.equal(app.repository_url, 'file:///srv/git/app.git');
        for (const url of ['file://host/srv/app.git', 'file:///', 'ext::sh']) {
          const res = await other.api('POST', '/v1/applications', { key: user.api_key, body: gitApp(endpoint.uuid, { repository_url: url }) });
          assert.equal(res.status, 400, url);
        }
      } finally {
        await other.close();
      }
    });

    it('refuses a second application on one endpoint and a name taken in the account (409)', async () => {
      const first = await newApp(owner);
      const before = await count();
      const sameEndpoint = await as(owner, 'POST', '/v1/applications', gitApp(first.endpoint));
      assert.equal(sameEndpoint.status, 409);
      assert.equal(sameEndpoint.body.code, 'already_exists');
      assert.equal(sameEndpoint.body.detail.field, 'endpoint');
      const endpoint = await createEndpoint(t, owner);
      const sameName = await as(owner, 'POST', '/v1/applications', gitApp(endpoint.uuid, { name: first.name }));
      assert.equal(sameName.status, 409);
      assert.equal(sameName.body.detail.field, 'name');
      const second = await expectBody(201, as(owner, 'POST', '/v1/applications', gitApp(endpoint.uuid)));
      const rename = await as(owner, 'PATCH', `/v1/applications/${second.uuid}`, { name: first.name });
      assert.equal(rename.status, 409);
      assert.equal(rename.body.detail.field, 'name');
      assert.equal(await count(), before + 1);
      assert.equal((await expectBody(200, as(owner, 'GET', `/v1/applications/${second.uuid}`))).name, second.name);
    });

    it('hides another account’s applications and endpoints as 404, and answers a malformed id 400', async () => {
      const theirs = await newApp(other);
      const myEndpoint = await createEndpoint(t, owner);
      for (const [method, path, body] of [
        ['GET', `/v1/applications/${theirs.uuid}`],
        ['PATCH', `/v1/applications/${theirs.uuid}`, { name: 'mine now' }],
        ['DELETE', `/v1/applications/${theirs.uuid}`],
        ['GET', `/v1/applications/${theirs.uuid}/webhook`],
        ['POST', `/v1/applications/${theirs.uuid}/webhook/regenerate`],
        ['GET', `/v1/applications/${theirs.uuid}/deployments`],
        ['POST', `/v1/applications/${theirs.uuid}/deployments`, {}],
        ['GET', '/v1/applications/3f1c2a9e-0000-4000-8000-000000000000'],
      ] as Array<[string, string, unknown?]>) {
        const res = await as(owner, method, path, body);
        assert.equal(res.status, 404, `${method} ${path}: ${res.text}`);
        assert.equal(res.body.code, 'not_found');
      }
      const onTheirEndpoint = await as(owner, 'POST', '/v1/applications', gitApp(theirs.endpoint));
      assert.equal(onTheirEndpoint.status, 404);
      const moveToMine = await as(other, 'PATCH', `/v1/applications/${theirs.uuid}`, { endpoint: myEndpoint.uuid });
      assert.equal(moveToMine.status, 404);
      assert.equal((await as(other, 'GET', `/v1/applications/${theirs.uuid}`)).body.name, theirs.name);
      const bad = await as(owner, 'GET', '/v1/applications/not-a-uuid');
      assert.equal(bad.status, 400);
      assert.equal(bad.body.code, 'invalid_id');
    });

    it('checks each operation’s permission (403) and refuses a suspended account', async () => {
      const boss = await t.createUser('business');
      const member = await t.createUser('business');
      const org = await orgWithMember(t, boss, member, ['endpoints:read']);
      const endpoint = await createEndpoint(t, boss, org.headers);
      const app = await expectBody(201, as(boss, 'POST', '/v1/applications', gitApp(endpoint.uuid), org.headers));
      // endpoints:read reads, but writes nothing and sees no secret.
      assert.equal((await as(member, 'GET', `/v1/applications/${app.uuid}`, undefined, org.headers)).status, 200);
      assert.equal((await as(member, 'GET', '/v1/applications', undefined, org.headers)).body.total, 1);
      for (const [method, path, body, permission] of [
        ['POST', '/v1/applications', gitApp(endpoint.uuid), 'endpoints:write'],
        ['PATCH', `/v1/applications/${app.uuid}`, { auto_deploy: false }, 'endpoints:update'],
        ['DELETE', `/v1/applications/${app.uuid}`, undefined, 'endpoints:delete'],
        ['GET', `/v1/applications/${app.uuid}/webhook`, undefined, 'endpoints:update'],
        ['POST', `/v1/applications/${app.uuid}/webhook/regenerate`, undefined, 'endpoints:update'],
        ['POST', `/v1/applications/${app.uuid}/deployments`, {}, 'endpoints:update'],
      ] as Array<[string, string, unknown, string]>) {
        const res = await as(member, method, path, body, org.headers);
        assert.equal(res.status, 403, `${method} ${path}`);
        assert.equal(res.body.code, 'permission_denied');
        assert.equal(res.body.detail.permission, permission);
      }
      const nobody = await t.createUser('business');
      const none = await orgWithMember(t, boss, nobody, []);
      assert.equal((await as(nobody, 'GET', `/v1/applications/${app.uuid}`, undefined, none.headers)).body.code, 'permission_denied');

      const suspended = await t.createUser('business');
      const theirs = await newApp(suspended);
      await expectBody(200, t.api('POST', `/v1/admin/accounts/${suspended.account_id}/suspend`));
      for (const [method, path, body] of [
        ['GET', '/v1/applications'],
        ['GET', `/v1/applications/${theirs.uuid}`],
        ['PATCH', `/v1/applications/${theirs.uuid}`, { name: 'x' }],
        ['POST', `/v1/applications/${theirs.uuid}/deployments`, {}],
      ] as Array<[string, string, unknown?]>) {
        const res = await as(suspended, method, path, body);
        assert.equal(res.status, 403, `${method} ${path}`);
        assert.equal(res.body.code, 'account_suspended');
      }
    });
  });

  describe('update and delete', () => {
    it('updates fields, republishes the config, and switches between git and manual', async () => {
      const app = await newApp(owner, { build_command: 'npm ci' });
      const patched = await expectBody(200, as(owner, 'PATCH', `/v1/applications/${app.uuid}`, { branch: 'release/v2', auto_deploy: false, build_command: null, health_path: '/ready', run_command: 'node dist/main.js' }));
      assert.equal(patched.branch, 'release/v2');
      assert.equal(patched.auto_deploy, false);
      assert.equal(patched.build_command, null);
      assert.equal(patched.name, app.name);
      const entry = (await feedEntry(app.uuid)) as Record<string, unknown>;
      assert.equal(entry.build_command, null);
      assert.equal(entry.health_path, '/ready');
      assert.equal(entry.run_command, 'node dist/main.js');

      const secret = (await expectBody(200, as(owner, 'GET', `/v1/applications/${app.uuid}/webhook`))).secret;
      const manual = await expectBody(200, as(owner, 'PATCH', `/v1/applications/${app.uuid}`, { source: 'manual', repository_url: null, provider: null }));
      assert.equal(manual.repository_url, null);
      assert.equal((await as(owner, 'GET', `/v1/applications/${app.uuid}/webhook`)).status, 404);
      const back = await as(owner, 'PATCH', `/v1/applications/${app.uuid}`, { source: 'git' });
      assert.equal(back.status, 400);
      assert.equal(back.body.detail.field, 'repository_url');
      await expectBody(200, as(owner, 'PATCH', `/v1/applications/${app.uuid}`, { source: 'git', repository_url: 'https://gitlab.com/a/b.git', provider: 'gitlab' }));
      const hook = await expectBody(200, as(owner, 'GET', `/v1/applications/${app.uuid}/webhook`));
      assert.notEqual(hook.secret, secret, 'a new secret once git again');
      assert.equal(hook.provider, 'gitlab');
    });

    it('answers 400 for bad PATCH bodies and changes nothing', async () => {
      const app = await newApp(owner);
      const version = await feedVersion(t);
      for (const body of [{ surprise: true }, { name: '' }, { branch: '..' }, { repository_url: 'ext::sh' }, { health_path: 'x' }, { run_command: null }, { endpoint: 'nope' }, { auto_deploy: 1 }]) {
        const res = await as(owner, 'PATCH', `/v1/applications/${app.uuid}`, body);
        assert.equal(res.status, 400, JSON.stringify(body));
      }
      assert.deepEqual(await expectBody(200, as(owner, 'GET', `/v1/applications/${app.uuid}`)), app);
      assert.equal(await feedVersion(t), version);
    });

    it('deletes an application and withdraws its feed entry; deleting its endpoint does too', async () => {
      const app = await newApp(owner);
      assert.ok(await feedEntry(app.uuid));
      assert.equal((await as(owner, 'DELETE', `/v1/applications/${app.uuid}`)).status, 204);
      assert.equal((await as(owner, 'GET', `/v1/applications/${app.uuid}`)).status, 404);
      assert.equal(await feedEntry(app.uuid), undefined);
      assert.equal((await as(owner, 'DELETE', `/v1/applications/${app.uuid}`)).status, 404);

      const second = await newApp(owner);
      await expectBody(202, as(owner, 'POST', `/v1/applications/${second.uuid}/deployments`, {}));
      assert.equal((await as(owner, 'DELETE', `/v1/endpoints/${second.endpoint}`)).status, 204);
      assert.equal((await as(owner, 'GET', `/v1/applications/${second.uuid}`)).status, 404);
      assert.equal(await feedEntry(second.uuid), undefined);
    });
  });

  describe('webhook', () => {
    it('shows the URL under EDGE_PUBLIC_CONTROL_URL and the secret, sealed at rest', async () => {
      const app = await newApp(owner, { branch: 'prod', auto_deploy: false });
      const hook = await expectBody(200, as(owner, 'GET', `/v1/applications/${app.uuid}/webhook`));
      assert.deepEqual(Object.keys(hook).sort(), ['auto_deploy', 'branch', 'provider', 'secret', 'url']);
      assert.equal(hook.url, `https://control.example.com/api/webhooks/git/${app.uuid}`);
      assert.equal(hook.provider, 'github');
      assert.equal(hook.branch, 'prod');
      assert.equal(hook.auto_deploy, false);
      assert.match(hook.secret, /^[A-Za-z0-9_-]{43}$/);
      const stored = (await sql<{ s: string }>('SELECT webhook_secret_sealed AS s FROM applications WHERE uuid = $1', [app.uuid]))[0].s;
      assert.ok(!stored.includes(hook.secret));
      assert.ok(!JSON.stringify(await feedEntry(app.uuid)).includes(hook.secret));

      const fresh = await expectBody(200, as(owner, 'POST', `/v1/applications/${app.uuid}/webhook/regenerate`));
      assert.deepEqual(Object.keys(fresh).sort(), ['secret', 'url']);
      assert.equal(fresh.url, hook.url);
      assert.notEqual(fresh.secret, hook.secret);
      assert.equal((await expectBody(200, as(owner, 'GET', `/v1/applications/${app.uuid}/webhook`))).secret, fresh.secret);
    });

    it('derives the URL from the control listener when EDGE_PUBLIC_CONTROL_URL is unset', async () => {
      const { t: plain, owner: user } = await nodeWithOwner();
      try {
        const endpoint = await createEndpoint(plain, user);
        const app = await expectBody(201, plain.api('POST', '/v1/applications', { key: user.api_key, body: gitApp(endpoint.uuid) }));
        const hook = await expectBody(200, plain.api('GET', `/v1/applications/${app.uuid}/webhook`, { key: user.api_key }));
        assert.equal(hook.url, `${plain.controlUrl}/api/webhooks/git/${app.uuid}`);
      } finally {
        await plain.close();
      }
    });
  });
});
