// Routing rules over real HTTP: create, list in evaluation order, get, full-replacement PUT, delete; canonical forms;
// every refusal (400/401/403/404/409) leaving rules and feed untouched; plan gating; edges receiving the rules.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { TestNode } from '../helpers/node.ts';
import { createEndpoint, edgeCaughtUp, expectBody, feedVersion, nodeWithOwner, orgWithMember, storeRows, type User } from '../helpers/endpoint-api.ts';
import { BAD_TAGS, SIXTEEN_TAGS } from '../helpers/tags.ts';
import type { EndpointConfig } from '../../src/shared/snapshot.ts';

describe('routing rules API', () => {
  let t: TestNode;
  let owner: User;
  let uuid: string;
  before(async () => {
    // business: routing rules, and room for the many endpoints these tests create (pro allows 10).
    ({ t, owner } = await nodeWithOwner());
    uuid = await newEndpoint(owner);
  });
  after(() => t.close());

  const sql = storeRows(() => t);
  const newEndpoint = async (user: User) => (await createEndpoint(t, user)).uuid;
  const base = (id: string) => `/v1/endpoints/${id}/routing-rules`;
  const create = (user: Pick<User, 'api_key'>, id: string, body: unknown, headers?: Record<string, string>) =>
    t.api('POST', base(id), { key: user.api_key, body, headers });
  const list = async (user: Pick<User, 'api_key'>, id: string) => (await expectBody(200, t.api('GET', base(id), { key: user.api_key }))).items as any[];
  const rule = (over: Record<string, unknown> = {}) => ({
    name: 'api',
    priority: 10,
    target_agent_tags: 'blue',
    conditions: [{ condition_type: 'path', condition_key: 'prefix', pattern: '/api' }],
    ...over,
  });
  const createOk = (id: string, body: unknown, user: User = owner) => expectBody(201, create(user, id, body));
  /** What a write must not have touched: the API's view, the rows, and the feed version. */
  const state = async (id: string) => ({
    rules: await list(owner, id),
    conditions: (await sql('SELECT count(*)::int AS n FROM routing_rule_conditions'))[0].n,
    feed: await feedVersion(t),
  });

  /** The endpoint as the in-process edge holds it, once everything committed so far has been published and applied. */
  async function edgeEndpoint(id: string): Promise<EndpointConfig | undefined> {
    await edgeCaughtUp(t);
    return t.node.edgeFeed!.mirror.get('endpoint', id)?.data as EndpointConfig | undefined;
  }

  // ---- create, read, order ----------------------------------------------------------------------------------

  it('creates a rule in canonical form, with Location, and reads it back', async () => {
    const id = await newEndpoint(owner);
    const res = await create(owner, id, {
      name: 'Canary',
      priority: 5,
      target_agent_id: 'web-1',
      target_agent_tags: ' Blue, canary ,blue,, EU-West ',
      conditions: [
        { condition_type: 'path', pattern: '/caf%c3%a9/%7euser' },
        { condition_type: 'method', pattern: 'get, head,GET' },
        { condition_type: 'header', condition_key: 'X-Canary', pattern: '*' },
        { condition_type: 'query', condition_key: 'v', pattern: '2*' },
        { condition_type: 'cookie', condition_key: 'beta', pattern: 'yes' },
        { condition_type: 'source_ip', pattern: '10.0.0.0/8, 2001:DB8::/32' },
        { condition_type: 'host', pattern: 'API.Example.com' },
      ],
    });
    assert.equal(res.status, 201, res.text);
    const r = res.body;
    assert.equal(res.headers.get('location'), `/v1/endpoints/${id}/routing-rules/${r.id}`);
    assert.deepEqual(Object.keys(r).sort(), [
      'conditions',
      'created_at',
      'enabled',
      'id',
      'name',
      'priority',
      'tags',
      'target_agent_id',
      'target_agent_tags',
      'target_origin_url',
      'updated_at',
    ]);
    assert.deepEqual(r.tags, [], 'no tags: an empty list');
    assert.equal(r.name, 'Canary');
    assert.equal(r.priority, 5);
    assert.equal(r.enabled, true, 'enabled defaults to true on create');
    assert.equal(r.target_agent_id, 'web-1');
    assert.equal(r.target_agent_tags, 'blue,canary,eu-west');
    assert.equal(r.target_origin_url, null);
    assert.deepEqual(r.conditions, [
      { condition_type: 'path', condition_key: 'prefix', pattern: '/caf%C3%A9/~user' },
      { condition_type: 'method', condition_key: '', pattern: 'GET,HEAD' },
      { condition_type: 'header', condition_key: 'x-canary', pattern: '*' },
      { condition_type: 'query', condition_key: 'v', pattern: '2*' },
      { condition_type: 'cookie', condition_key: 'beta', pattern: 'yes' },
      { condition_type: 'source_ip', condition_key: '', pattern: '10.0.0.0/8,2001:db8::/32' },
      { condition_type: 'host', condition_key: '', pattern: 'api.example.com' },
    ]);
    assert.ok(!Number.isNaN(Date.parse(r.created_at)));

    const got = await t.api('GET', `${base(id)}/${r.id}`, { key: owner.api_key });
    assert.equal(got.status, 200, got.text);
    assert.deepEqual(got.body, r);
    assert.deepEqual(await list(owner, id), [r]);
  });

  it('percent-encodes non-ASCII path characters as browsers send them', async () => {
    const id = await newEndpoint(owner);
    const r = await createOk(id, rule({ conditions: [{ condition_type: 'path', condition_key: 'glob', pattern: '/café/*' }] }));
    assert.equal(r.conditions[0].pattern, '/caf%C3%A9/*');
  });

  it('lists rules in evaluation order: ascending priority, ties by id, disabled ones included', async () => {
    const id = await newEndpoint(owner);
    const c = await createOk(id, rule({ name: 'c', priority: 20 }));
    const a = await createOk(id, rule({ name: 'a', priority: -5 }));
    const b1 = await createOk(id, rule({ name: 'b1', priority: 10, enabled: false }));
    const b2 = await createOk(id, rule({ name: 'b2', priority: 10 }));
    assert.deepEqual(
      (await list(owner, id)).map((r) => r.name),
      [a, b1, b2, c].map((r) => r.name),
    );
    // The feed carries the same order, disabled rule included (the edge skips it when compiling).
    const config = await edgeEndpoint(id);
    assert.deepEqual(
      config!.routing_rules.map((r) => [r.name, r.enabled]),
      [
        ['a', true],
        ['b1', false],
        ['b2', true],
        ['c', true],
      ],
    );
  });

  // ---- the feed ---------------------------------------------------------------------------------------------

  it('publishes every write: edges get created, replaced and deleted rules with the endpoint record', async () => {
    const id = await newEndpoint(owner);
    assert.deepEqual((await edgeEndpoint(id))!.routing_rules, []);

    const r = await createOk(id, rule({ target_agent_id: 'a-1', target_agent_tags: 'Blue,green' }));
    let config = await edgeEndpoint(id);
    assert.deepEqual(config!.routing_rules, [
      {
        id: r.id,
        name: 'api',
        priority: 10,
        enabled: true,
        target_agent_id: 'a-1',
        target_agent_tags: ['blue', 'green'],
        target_origin_url: null,
        conditions: [{ condition_type: 'path', condition_key: 'prefix', pattern: '/api' }],
      },
    ]);

    const put = await t.api('PUT', `${base(id)}/${r.id}`, {
      key: owner.api_key,
      body: { name: 'v2', enabled: true, target_agent_id: 'a-2', conditions: [{ condition_type: 'method', pattern: 'POST' }] },
    });
    assert.equal(put.status, 200, put.text);
    config = await edgeEndpoint(id);
    assert.deepEqual(config!.routing_rules, [
      {
        id: r.id,
        name: 'v2',
        priority: 0,
        enabled: true,
        target_agent_id: 'a-2',
        target_agent_tags: [],
        target_origin_url: null,
        conditions: [{ condition_type: 'method', condition_key: '', pattern: 'POST' }],
      },
    ]);

    assert.equal((await t.api('DELETE', `${base(id)}/${r.id}`, { key: owner.api_key })).status, 204);
    assert.deepEqual((await edgeEndpoint(id))!.routing_rules, []);
  });

  // ---- PUT --------------------------------------------------------------------------------------------------

  describe('PUT /v1/endpoints/{uuid}/routing-rules/{rule_id}', () => {
    it('replaces the whole rule: omitted fields are zeroed, conditions replaced, created_at kept', async () => {
      const id = await newEndpoint(owner);
      const r = await createOk(
        id,
        rule({
          target_agent_id: 'web-1',
          conditions: [
            { condition_type: 'path', pattern: '/a' },
            { condition_type: 'method', pattern: 'GET' },
          ],
        }),
      );
      await new Promise((resolve) => setTimeout(resolve, 5));
      const res = await t.api('PUT', `${base(id)}/${r.id}`, {
        key: owner.api_key,
        body: { target_agent_tags: 'green', conditions: [{ condition_type: 'host', pattern: '*.example.com' }] },
      });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(
        { ...res.body, updated_at: undefined },
        {
          id: r.id,
          name: '',
          priority: 0,
          enabled: false,
          target_agent_id: null,
          target_agent_tags: 'green',
          target_origin_url: null,
          tags: [],
          conditions: [{ condition_type: 'host', condition_key: '', pattern: '*.example.com' }],
          created_at: r.created_at,
          updated_at: undefined,
        },
      );
      assert.ok(Date.parse(res.body.updated_at) > Date.parse(r.updated_at));
      assert.deepEqual((await t.api('GET', `${base(id)}/${r.id}`, { key: owner.api_key })).body, res.body);
      const rows = await sql('SELECT position, condition_type FROM routing_rule_conditions WHERE rule_id = $1 ORDER BY position', [r.id]);
      assert.deepEqual(rows, [{ position: 0, condition_type: 'host' }]);
    });

    it('answers 400 for invalid JSON, a non-numeric rule_id, empty or missing conditions, and changes nothing', async () => {
      const id = await newEndpoint(owner);
      const r = await createOk(id, rule());
      const before = await state(id);
      const put = (path: string, opts: { body?: unknown; raw?: string; headers?: Record<string, string> }) => t.api('PUT', path, { key: owner.api_key, ...opts });

      const json = await put(`${base(id)}/${r.id}`, { raw: '{"conditions": [', headers: { 'content-type': 'application/json' } });
      assert.equal(json.status, 400);
      assert.equal(json.body.code, 'invalid_json');

      for (const bad of ['abc', '0', '-1', '1.5', '99999999999999999999']) {
        const res = await put(`${base(id)}/${bad}`, { body: rule() });
        assert.equal(res.status, 400, bad);
        assert.equal(res.body.code, 'invalid_id', bad);
      }

      const empty = await put(`${base(id)}/${r.id}`, { body: rule({ conditions: [] }) });
      assert.equal(empty.status, 400);
      assert.equal(empty.body.code, 'invalid_request');
      const { conditions: _omitted, ...noConditions } = rule();
      const missing = await put(`${base(id)}/${r.id}`, { body: noConditions });
      assert.equal(missing.status, 400);
      assert.equal(missing.body.detail.field, 'conditions');

      const unknown = await put(`${base(id)}/${r.id}`, { body: rule({ weight: 3 }) });
      assert.equal(unknown.status, 400);
      assert.equal(unknown.body.code, 'unknown_field');
      const nested = await put(`${base(id)}/${r.id}`, { body: rule({ conditions: [{ condition_type: 'path', pattern: '/', operator: 'in' }] }) });
      assert.equal(nested.body.code, 'unknown_field');

      const untargeted = await put(`${base(id)}/${r.id}`, { body: { conditions: rule().conditions } });
      assert.equal(untargeted.status, 400);
      assert.match(untargeted.body.error, /target/);

      const badCondition = await put(`${base(id)}/${r.id}`, { body: rule({ conditions: [{ condition_type: 'path', pattern: '/ok' }, { condition_type: 'path', pattern: 'no-slash' }] }) });
      assert.equal(badCondition.status, 400);
      assert.equal(badCondition.body.detail.condition, 1);

      assert.deepEqual(await state(id), before);
    });

    it('answers 404 for a missing rule, a rule of another endpoint, and another user’s endpoint', async () => {
      const id = await newEndpoint(owner);
      const other = await newEndpoint(owner);
      const r = await createOk(id, rule());
      const stranger = await t.createUser('pro');
      const before = await state(id);
      const cases: Array<[string, string]> = [
        [owner.api_key, `${base(id)}/${r.id + 1000}`],
        [owner.api_key, `${base(other)}/${r.id}`],
        [stranger.api_key, `${base(id)}/${r.id}`],
        [owner.api_key, `${base('00000000-0000-4000-8000-000000000000')}/${r.id}`],
        // The int64 maximum: valid, but beyond what a double holds exactly; still just a missing rule.
        [owner.api_key, `${base(id)}/9223372036854775807`],
      ];
      for (const [key, path] of cases) {
        const res = await t.api('PUT', path, { key, body: rule({ name: 'hijack' }) });
        assert.equal(res.status, 404, path);
        assert.equal(res.body.code, 'not_found');
      }
      assert.deepEqual(await state(id), before);
    });
  });

  // ---- origin targets ---------------------------------------------------------------------------------------

  describe('target_origin_url', () => {
    it('targets an origin instead of agents: canonical URL stored, returned and published; PUT switches targets', async () => {
      const id = await newEndpoint(owner);
      const r = await createOk(id, rule({ target_agent_tags: undefined, target_origin_url: 'https://API.example.com:8443/v2/' }));
      assert.equal(r.target_origin_url, 'https://api.example.com:8443/v2');
      assert.equal(r.target_agent_id, null);
      assert.equal(r.target_agent_tags, '');
      assert.deepEqual((await t.api('GET', `${base(id)}/${r.id}`, { key: owner.api_key })).body, r);
      assert.equal((await edgeEndpoint(id))!.routing_rules[0].target_origin_url, 'https://api.example.com:8443/v2');

      // Full replacement: naming tags without the origin zeroes the origin, and back again.
      const toAgents = await t.api('PUT', `${base(id)}/${r.id}`, { key: owner.api_key, body: rule() });
      assert.equal(toAgents.status, 200, toAgents.text);
      assert.equal(toAgents.body.target_origin_url, null);
      assert.equal(toAgents.body.target_agent_tags, 'blue');
      const toOrigin = await t.api('PUT', `${base(id)}/${r.id}`, {
        key: owner.api_key,
        body: rule({ target_agent_tags: '', target_agent_id: null, target_origin_url: 'http://origin.example' }),
      });
      assert.equal(toOrigin.status, 200, toOrigin.text);
      assert.equal(toOrigin.body.target_origin_url, 'http://origin.example');
      const config = await edgeEndpoint(id);
      assert.deepEqual(
        config!.routing_rules.map((x) => [x.target_origin_url, x.target_agent_id, x.target_agent_tags]),
        [['http://origin.example', null, []]],
      );
    });

    it('refuses bad URLs, private addresses, both targets, no target and unknown fields, changing nothing', async () => {
      const id = await newEndpoint(owner);
      const existing = await createOk(id, rule());
      const before = await state(id);
      const originOnly = (url: unknown) => rule({ target_agent_tags: undefined, target_origin_url: url });
      const invalid: Array<[unknown, RegExp]> = [
        [originOnly('not a url'), /not a valid absolute URL/],
        [originOnly('ftp://example.com'), /only http and https/],
        [originOnly('http://user:pw@example.com'), /credentials/],
        [originOnly('http://example.com/?q=1'), /no query or fragment/],
        [originOnly('http://example.com/#top'), /no query or fragment/],
        // This platform does not allow private origins (EDGE_ORIGIN_ALLOW_PRIVATE is off).
        [originOnly('http://127.0.0.1:3000'), /private, loopback and link-local/],
        [originOnly('http://localhost:3000'), /private, loopback and link-local/],
        [originOnly('http://localhost.:3000'), /private, loopback and link-local/],
        [originOnly('http://10.1.2.3'), /private, loopback and link-local/],
        [originOnly('http://169.254.169.254/latest'), /private, loopback and link-local/],
        [originOnly('http://[::1]:8080'), /private, loopback and link-local/],
        [originOnly('http://[::ffff:192.168.0.1]'), /private, loopback and link-local/],
        [originOnly('http://0.0.0.0:80'), /private, loopback and link-local/],
        // Exactly one of agents or an origin.
        [rule({ target_origin_url: 'https://example.com' }), /agents or an origin, not both/],
        [rule({ target_agent_tags: undefined, target_agent_id: 'web-1', target_origin_url: 'https://example.com' }), /agents or an origin, not both/],
        [originOnly(null), /must target agents .* or an origin/],
        [originOnly(''), /must target agents .* or an origin/],
      ];
      for (const [body, message] of invalid) {
        for (const res of [await create(owner, id, body), await t.api('PUT', `${base(id)}/${existing.id}`, { key: owner.api_key, body })]) {
          assert.equal(res.status, 400, JSON.stringify(body));
          assert.equal(res.body.code, 'invalid_request', JSON.stringify(body));
          assert.match(res.body.error, message, JSON.stringify(body));
        }
      }
      const detail = (await create(owner, id, originOnly('ftp://example.com'))).body.detail;
      assert.deepEqual(detail, { field: 'target_origin_url', reason: 'only http and https origins are supported' });

      const typo = await create(owner, id, rule({ target_agent_tags: undefined, target_origin: 'https://example.com' }));
      assert.equal(typo.status, 400);
      assert.equal(typo.body.code, 'unknown_field');
      const wrongType = await create(owner, id, originOnly(42));
      assert.equal(wrongType.status, 400);
      assert.deepEqual(await state(id), before);
    });

    it('is held by the database too: a row with both targets, or neither, is refused', async () => {
      const id = await newEndpoint(owner);
      const [{ id: endpointId }] = await sql('SELECT id FROM endpoints WHERE uuid = $1', [id]);
      const insert = (agentId: string | null, tags: string[], origin: string | null) =>
        sql('INSERT INTO routing_rules (endpoint_id, target_agent_id, target_agent_tags, target_origin_url) VALUES ($1, $2, $3::text[], $4)', [endpointId, agentId, tags, origin]);
      await assert.rejects(insert('web-1', [], 'https://example.com'), /routing_rules_target_check/);
      await assert.rejects(insert(null, ['blue'], 'https://example.com'), /routing_rules_target_check/);
      await assert.rejects(insert(null, [], null), /routing_rules_target_check/);
      await insert(null, [], 'https://example.com');
      await insert('web-1', ['blue'], null);
    });
  });

  // ---- validation -------------------------------------------------------------------------------------------

  it('takes tags on create and on PUT (a full replacement: omitted means none), in every view, never in the feed', async () => {
    const id = await newEndpoint(owner);
    const r = await createOk(id, rule({ tags: ['canary', 'team.web'] }));
    assert.deepEqual(r.tags, ['canary', 'team.web']);
    assert.equal(r.target_agent_tags, 'blue', 'target_agent_tags are another thing: the agents chosen');
    assert.deepEqual((await expectBody(200, t.api('GET', `${base(id)}/${r.id}`, { key: owner.api_key }))).tags, ['canary', 'team.web']);
    assert.deepEqual((await list(owner, id)).map((x) => x.tags), [['canary', 'team.web']]);
    const edge = await edgeEndpoint(id);
    assert.ok(!('tags' in edge!.routing_rules[0]), 'edges get no tags');

    const put = (body: unknown) => expectBody(200, t.api('PUT', `${base(id)}/${r.id}`, { key: owner.api_key, body }));
    assert.deepEqual((await put(rule({ tags: SIXTEEN_TAGS }))).tags, SIXTEEN_TAGS);
    assert.deepEqual((await put(rule())).tags, [], 'PUT replaces the rule whole: tags omitted are none');
    assert.deepEqual((await list(owner, id))[0].tags, []);
  });

  it('refuses bad tags with 400 invalid_request on create and PUT, changing nothing', async () => {
    const id = await newEndpoint(owner);
    const r = await createOk(id, rule({ tags: ['keep'] }));
    const before = await state(id);
    for (const [what, tags] of BAD_TAGS) {
      const created = await create(owner, id, rule({ tags }));
      assert.equal(created.status, 400, what);
      assert.equal(created.body.code, 'invalid_request', what);
      assert.match(created.body.detail.field, /^tags(\.\d+)?$/, what);
      const replaced = await t.api('PUT', `${base(id)}/${r.id}`, { key: owner.api_key, body: rule({ tags }) });
      assert.equal(replaced.status, 400, what);
      assert.equal(replaced.body.code, 'invalid_request', what);
    }
    assert.deepEqual(await state(id), before);
  });

  it('refuses every malformed condition with a 400 naming its index, and creates nothing', async () => {
    const id = await newEndpoint(owner);
    const before = await state(id);
    const bad: Array<[Record<string, unknown>, string]> = [
      [{ condition_type: 'country', pattern: 'FR' }, 'condition_type'],
      [{ condition_type: 'path', pattern: 'api' }, 'pattern'],
      [{ condition_type: 'path', condition_key: 'regex', pattern: '/api' }, 'condition_key'],
      [{ condition_type: 'path', pattern: '/a/../b' }, 'pattern'],
      [{ condition_type: 'path', pattern: '/a//b' }, 'pattern'],
      [{ condition_type: 'path', pattern: '/a%2' }, 'pattern'],
      [{ condition_type: 'path', pattern: '/a?b=1' }, 'pattern'],
      [{ condition_type: 'path', pattern: '/a b' }, 'pattern'],
      [{ condition_type: 'method', pattern: ' , ' }, 'pattern'],
      [{ condition_type: 'method', pattern: 'GET,PO ST' }, 'pattern'],
      [{ condition_type: 'method', condition_key: 'x', pattern: 'GET' }, 'condition_key'],
      [{ condition_type: 'header', pattern: '*' }, 'condition_key'],
      [{ condition_type: 'header', condition_key: 'x y', pattern: '*' }, 'condition_key'],
      [{ condition_type: 'header', condition_key: 'x-a', pattern: 'a\nb' }, 'pattern'],
      [{ condition_type: 'query', pattern: '1' }, 'condition_key'],
      [{ condition_type: 'cookie', condition_key: 'a;b', pattern: '1' }, 'condition_key'],
      [{ condition_type: 'source_ip', pattern: '10.0.0.256' }, 'pattern'],
      [{ condition_type: 'source_ip', pattern: '10.0.0.0/33' }, 'pattern'],
      [{ condition_type: 'source_ip', pattern: '2001:db8::/129' }, 'pattern'],
      [{ condition_type: 'source_ip', pattern: 'fe80::1%eth0' }, 'pattern'],
      [{ condition_type: 'source_ip', pattern: '' }, 'pattern'],
      [{ condition_type: 'host', pattern: 'example.com:8080' }, 'pattern'],
      [{ condition_type: 'host', pattern: '.example.com' }, 'pattern'],
    ];
    for (const [condition, field] of bad) {
      const res = await create(owner, id, rule({ conditions: [{ condition_type: 'method', pattern: 'GET' }, condition] }));
      assert.equal(res.status, 400, JSON.stringify(condition));
      assert.equal(res.body.code, 'invalid_request', JSON.stringify(condition));
      assert.equal(res.body.detail.condition, 1, JSON.stringify(condition));
      assert.equal(res.body.detail.field, field, JSON.stringify(condition));
      assert.match(res.body.error, /condition 1/);
    }
    assert.deepEqual(await state(id), before);
  });

  it('validates targets and bounds: tags, agent id, rule name, conditions per rule', async () => {
    const id = await newEndpoint(owner);
    const before = await state(id);
    const refused = [
      rule({ target_agent_tags: '', target_agent_id: null }),
      rule({ target_agent_tags: ' , ', target_agent_id: '' }),
      rule({ target_agent_tags: 'ok,-bad' }),
      rule({ target_agent_tags: 'has space' }),
      rule({ target_agent_tags: 'x'.repeat(65) }),
      rule({ target_agent_tags: Array.from({ length: 17 }, (_, i) => `t${i}`).join(',') }),
      rule({ target_agent_id: 'bad id' }),
      rule({ target_agent_id: '-x' }),
      rule({ target_agent_id: 'x'.repeat(65) }),
      rule({ name: 'x'.repeat(101) }),
      rule({ name: 'a\u0000b' }),
      rule({ priority: 2 ** 31 }),
      rule({ priority: 1.5 }),
      rule({ enabled: 'yes' }),
      rule({ conditions: Array.from({ length: 21 }, () => ({ condition_type: 'method', pattern: 'GET' })) }),
    ];
    for (const body of refused) {
      const res = await create(owner, id, body);
      assert.equal(res.status, 400, JSON.stringify(body).slice(0, 200));
    }
    assert.deepEqual(await state(id), before);
    // At the bounds it is fine: 16 tags that dedupe from more, 20 conditions, a 64-character id.
    const ok = await createOk(
      id,
      rule({
        target_agent_id: 'a'.repeat(64),
        target_agent_tags: [...Array.from({ length: 16 }, (_, i) => `t${i}`), 'T0', 't1'].join(','),
        conditions: Array.from({ length: 20 }, () => ({ condition_type: 'method', pattern: 'GET' })),
      }),
    );
    assert.equal(ok.target_agent_tags.split(',').length, 16);
  });

  it('bounds rules per endpoint at 100, also under concurrent creates', async () => {
    const id = await newEndpoint(owner);
    const [{ id: endpointId }] = await sql('SELECT id FROM endpoints WHERE uuid = $1', [id]);
    await sql(`INSERT INTO routing_rules (endpoint_id, name, target_agent_tags) SELECT $1, 'bulk', '{x}' FROM generate_series(1, 95)`, [endpointId]);
    const results = await Promise.all(Array.from({ length: 10 }, () => create(owner, id, rule())));
    assert.equal(results.filter((r) => r.status === 201).length, 5);
    for (const r of results.filter((r) => r.status !== 201)) {
      assert.equal(r.status, 400);
      assert.match(r.body.error, /at most 100/);
    }
    assert.equal((await sql('SELECT count(*)::int AS n FROM routing_rules WHERE endpoint_id = $1', [endpointId]))[0].n, 100);
  });

  // ---- access -----------------------------------------------------------------------------------------------

  it('answers 401 without a valid key on every operation', async () => {
    const r = await createOk(uuid, rule());
    const ops: Array<[string, string, unknown?]> = [
      ['POST', base(uuid), rule()],
      ['GET', base(uuid)],
      ['GET', `${base(uuid)}/${r.id}`],
      ['PUT', `${base(uuid)}/${r.id}`, rule()],
      ['DELETE', `${base(uuid)}/${r.id}`],
    ];
    for (const [method, path, body] of ops) {
      for (const key of [null, 'nope']) {
        const res = await t.api(method, path, { key, body });
        assert.equal(res.status, 401, `${method} ${path}`);
        assert.equal(res.body.code, 'unauthorized');
      }
    }
  });

  it('answers 403 entitlement_required on a plan without endpoint_routing_rules, reads included', async () => {
    const free = await t.createUser('free');
    const id = await newEndpoint(free);
    const ops: Array<[string, string, unknown?]> = [
      ['POST', base(id), rule()],
      ['GET', base(id)],
      ['GET', `${base(id)}/1`],
      ['PUT', `${base(id)}/1`, rule()],
      ['DELETE', `${base(id)}/1`],
    ];
    for (const [method, path, body] of ops) {
      const res = await t.api(method, path, { key: free.api_key, body });
      assert.equal(res.status, 403, `${method} ${path}`);
      assert.equal(res.body.code, 'entitlement_required');
      assert.equal(res.body.detail.feature, 'endpoint_routing_rules');
    }
    assert.equal((await sql('SELECT count(*)::int AS n FROM routing_rules r JOIN endpoints e ON e.id = r.endpoint_id WHERE e.uuid = $1', [id]))[0].n, 0);
  });

  it('lets an admin manage rules on an entitled account’s endpoint, not on one whose plan lacks them', async () => {
    const admin = { api_key: t.adminKey };
    const r = await createOk(uuid, rule({ name: 'by-admin' }), admin as User);
    assert.equal((await t.api('GET', `${base(uuid)}/${r.id}`, { key: owner.api_key })).body.name, 'by-admin');
    const free = await t.createUser('free');
    const id = await newEndpoint(free);
    const res = await create(admin, id, rule());
    assert.equal(res.status, 403);
    assert.equal(res.body.code, 'entitlement_required');
  });

  it('answers 404 for another user’s endpoint on every operation, 400 for a malformed endpoint id', async () => {
    const r = await createOk(uuid, rule());
    const stranger = await t.createUser('pro');
    const before = await state(uuid);
    const ops: Array<[string, string, unknown?]> = [
      ['POST', base(uuid), rule()],
      ['GET', base(uuid)],
      ['GET', `${base(uuid)}/${r.id}`],
      ['PUT', `${base(uuid)}/${r.id}`, rule()],
      ['DELETE', `${base(uuid)}/${r.id}`],
    ];
    for (const [method, path, body] of ops) {
      const res = await t.api(method, path, { key: stranger.api_key, body });
      assert.equal(res.status, 404, `${method} ${path}`);
      assert.equal(res.body.code, 'not_found');
    }
    const malformed = await t.api('GET', base('not-a-uuid'), { key: owner.api_key });
    assert.equal(malformed.status, 400);
    assert.equal(malformed.body.code, 'invalid_id');
    assert.deepEqual(await state(uuid), before);
  });

  it('needs endpoints:read to read and endpoints:update to write in an organization', async () => {
    const orgOwner = await t.createUser('pro');
    const reader = await t.createUser('pro');
    const { headers } = await orgWithMember(t, orgOwner, reader, ['endpoints:read']);
    // Organizations are created on the owner's plan (pro), which includes routing rules.
    const ep = await t.api('POST', '/v1/endpoints', { key: orgOwner.api_key, body: {}, headers });
    assert.equal(ep.status, 201, ep.text);
    const created = await t.api('POST', base(ep.body.uuid), { key: orgOwner.api_key, body: rule(), headers });
    assert.equal(created.status, 201, created.text);

    const read = await t.api('GET', base(ep.body.uuid), { key: reader.api_key, headers });
    assert.equal(read.status, 200, read.text);
    assert.equal(read.body.items.length, 1);
    for (const [method, path] of [
      ['POST', base(ep.body.uuid)],
      ['PUT', `${base(ep.body.uuid)}/${created.body.id}`],
      ['DELETE', `${base(ep.body.uuid)}/${created.body.id}`],
    ]) {
      const res = await t.api(method, path, { key: reader.api_key, body: method === 'DELETE' ? undefined : rule(), headers });
      assert.equal(res.status, 403, `${method} ${path}`);
      assert.equal(res.body.code, 'permission_denied');
      assert.equal(res.body.detail.permission, 'endpoints:update');
    }
    assert.equal((await t.api('GET', base(ep.body.uuid), { key: reader.api_key, headers })).body.items.length, 1);
  });

  it('keeps a paused endpoint’s rules read-only (409 quota_paused), readable, and writable again once unpaused', async () => {
    const id = await newEndpoint(owner);
    const r = await createOk(id, rule());
    assert.equal((await t.api('POST', `/v1/admin/endpoints/${id}/pause`)).status, 200);
    const before = await state(id);
    for (const [method, path, body] of [
      ['POST', base(id), rule()],
      ['PUT', `${base(id)}/${r.id}`, rule()],
      ['DELETE', `${base(id)}/${r.id}`, undefined],
    ] as const) {
      const res = await t.api(method, path, { key: owner.api_key, body });
      assert.equal(res.status, 409, `${method} ${path}`);
      assert.equal(res.body.code, 'quota_paused');
    }
    assert.deepEqual(await state(id), before);
    assert.equal((await t.api('POST', `/v1/admin/endpoints/${id}/unpause`)).status, 200);
    assert.equal((await t.api('DELETE', `${base(id)}/${r.id}`, { key: owner.api_key })).status, 204);
  });

  // ---- delete -----------------------------------------------------------------------------------------------

  it('deletes a rule (204, empty body), then answers 404 for it', async () => {
    const id = await newEndpoint(owner);
    const keep = await createOk(id, rule({ name: 'keep' }));
    const r = await createOk(id, rule({ name: 'drop' }));
    const res = await t.api('DELETE', `${base(id)}/${r.id}`, { key: owner.api_key });
    assert.equal(res.status, 204);
    assert.equal(res.text, '');
    assert.equal((await t.api('GET', `${base(id)}/${r.id}`, { key: owner.api_key })).status, 404);
    assert.equal((await t.api('DELETE', `${base(id)}/${r.id}`, { key: owner.api_key })).status, 404);
    assert.equal((await t.api('DELETE', `${base(id)}/x`, { key: owner.api_key })).status, 400);
    for (const method of ['GET', 'DELETE']) assert.equal((await t.api(method, `${base(id)}/9223372036854775807`, { key: owner.api_key })).status, 404);
    assert.deepEqual((await list(owner, id)).map((x) => x.id), [keep.id]);
    assert.equal((await sql('SELECT count(*)::int AS n FROM routing_rule_conditions WHERE rule_id = $1', [r.id]))[0].n, 0);
  });

  it('goes with its endpoint: deleting the endpoint removes its rules and conditions', async () => {
    const id = await newEndpoint(owner);
    const r = await createOk(id, rule());
    assert.equal((await t.api('DELETE', `/v1/endpoints/${id}`, { key: owner.api_key })).status, 204);
    assert.equal((await sql('SELECT count(*)::int AS n FROM routing_rules WHERE id = $1', [r.id]))[0].n, 0);
    assert.equal((await sql('SELECT count(*)::int AS n FROM routing_rule_conditions WHERE rule_id = $1', [r.id]))[0].n, 0);
  });

  // ---- OpenAPI ----------------------------------------------------------------------------------------------

  it('describes every operation in /v1/openapi.json', async () => {
    const doc = (await t.api('GET', '/v1/openapi.json', { key: null })).body;
    const collection = doc.paths['/v1/endpoints/{id}/routing-rules'];
    const item = doc.paths['/v1/endpoints/{id}/routing-rules/{rule_id}'];
    const ops = [collection.post, collection.get, item.get, item.put, item.delete];
    for (const op of ops) {
      assert.ok(op.summary, 'summary');
      assert.deepEqual(op.tags, ['routing-rules']);
      assert.ok(op.parameters.some((p: any) => p.in === 'path' && p.name === 'id'));
      assert.ok(op.responses['403'] && op.responses['404']);
    }
    for (const op of [item.get, item.put, item.delete]) assert.ok(op.parameters.some((p: any) => p.name === 'rule_id'));
    for (const op of [collection.post, item.put]) {
      const schema = op.requestBody.content['application/json'].schema;
      assert.deepEqual(schema.required, ['conditions']);
      assert.equal(schema.additionalProperties, false);
      assert.deepEqual(schema.properties.conditions.items.properties.condition_type.enum, ['path', 'method', 'header', 'query', 'cookie', 'source_ip', 'host']);
      const tags = schema.properties.tags;
      assert.deepEqual([tags.type, tags.maxItems, tags.uniqueItems, tags.items.pattern], ['array', 16, true, '^[a-z0-9][a-z0-9._-]{0,31}$']);
    }
    const view = item.get.responses['200'].content['application/json'].schema;
    assert.ok(view.required.includes('tags') && view.properties.tags.type === 'array');
    assert.ok(collection.post.responses['201']);
    assert.ok(item.put.responses['200']);
    assert.ok(item.delete.responses['204']);
  });
});
