// Firewall rate limits over real HTTP: the list (filters, pagination, endpoint maps, posture), rule and condition
// writes with their docs/api.md refusals (415, Bad request + detail, entitlement_required, account_suspended, quota_paused,
// 404 for another rule's condition) changing nothing, legacy integer ids before and after the sunset, shadowed rules,
// and the active rules edges receive, in order.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { createEndpoint, edgeEndpoint, expectBody, feedVersion, nodeWithOwner, orgWithMember, storeRows, type User } from '../helpers/endpoint-api.ts';
import { BAD_TAGS, SIXTEEN_TAGS } from '../helpers/tags.ts';

const BASE = '/v1/firewall/rate-limits';

describe('firewall rate limits API', () => {
  let t: TestNode;
  let owner: User;
  before(async () => ({ t, owner } = await nodeWithOwner()));
  after(() => t.close());

  const sql = storeRows(() => t);
  const newEndpoint = async (user: User = owner, headers?: Record<string, string>) => createEndpoint(t, user, headers);
  const rule = (endpoint_id: string | number, over: Record<string, unknown> = {}) => ({
    endpoint_id,
    name: 'login',
    requests_per_window: 5,
    window_size_seconds: 60,
    action: 'block',
    conditions: [
      { type: 'method', operator: 'equals', value: 'post' },
      { type: 'path', operator: 'equals', value: '/login' },
    ],
    ...over,
  });
  const create = (body: unknown, user: Pick<User, 'api_key'> = owner, headers?: Record<string, string>) => t.api('POST', BASE, { key: user.api_key, body, headers });
  const createOk = (body: unknown, user: Pick<User, 'api_key'> = owner) => expectBody(201, create(body, user));
  const get = (ref: string | number, user: Pick<User, 'api_key'> = owner) => t.api('GET', `${BASE}/${ref}`, { key: user.api_key });
  const putCondition = (ruleRef: string | number, condRef: string | number, body: unknown, user: Pick<User, 'api_key'> = owner, headers?: Record<string, string>) =>
    t.api('PUT', `${BASE}/${ruleRef}/conditions/${condRef}`, { key: user.api_key, body, headers });
  /** What a refused write must not have touched. */
  const state = async () => ({
    rules: await sql('SELECT * FROM rate_limit_rules ORDER BY id'),
    conditions: await sql('SELECT * FROM rate_limit_conditions ORDER BY id'),
    feed: await feedVersion(t),
  });

  // ---- create and read --------------------------------------------------------------------------------------

  it('creates a rule with defaults and canonical conditions, with Location, and reads it back', async () => {
    const endpoint = await newEndpoint();
    const res = await create(
      rule(endpoint.uuid, {
        description: 'Slow down credential stuffing',
        conditions: [
          { type: 'method', operator: 'in', value: 'post, put,POST' },
          { type: 'header', operator: 'exists', value: 'Authorization', logical_operator: 'or' },
          { type: 'country', operator: 'in', value: 'us,de' },
          { type: 'asn', operator: 'equals', value: 'AS13335' },
          { type: 'port', operator: 'equals', value: 443 },
        ],
      }),
    );
    assert.equal(res.status, 201, res.text);
    const r = res.body;
    assert.equal(res.headers.get('location'), `${BASE}/${r.uuid}`);
    assert.deepEqual(Object.keys(r).sort(), [
      'action', 'conditions', 'created_at', 'description', 'endpoint_id', 'endpoint_uuid', 'fail_mode', 'hit_count', 'hits_daily', 'id',
      'last_matched', 'name', 'priority', 'requests_per_window', 'scope', 'shadow_reason', 'shadowed', 'source_ip', 'status', 'tags', 'updated_at',
      'user_id', 'uuid', 'window_size_seconds',
    ]);
    assert.deepEqual(r.tags, [], 'no tags: an empty list');
    assert.equal(r.endpoint_id, endpoint.id);
    assert.equal(r.endpoint_uuid, endpoint.uuid);
    assert.equal(r.user_id, owner.id);
    assert.equal(typeof r.id, 'number');
    assert.equal(r.status, 'active');
    assert.equal(r.priority, 0);
    assert.equal(r.scope, 'edge');
    assert.equal(r.fail_mode, 'open');
    assert.equal(r.source_ip, null);
    assert.equal(r.hit_count, 0);
    assert.equal(r.last_matched, null);
    assert.deepEqual(r.hits_daily, [0, 0, 0, 0, 0, 0, 0]);
    assert.equal(r.shadowed, false);
    assert.equal(r.shadow_reason, null);
    assert.deepEqual(
      r.conditions.map((c: any) => [c.condition_type, c.operator, c.condition_value, c.logical_operator]),
      [
        ['method', 'in', 'POST,PUT', 'AND'],
        ['header', 'exists', 'authorization', 'OR'],
        ['country', 'in', 'US,DE', 'AND'],
        ['asn', 'equals', '13335', 'AND'],
        ['port', 'equals', '443', 'AND'],
      ],
    );
    for (const c of r.conditions) {
      assert.deepEqual(Object.keys(c).sort(), ['condition_type', 'condition_value', 'created_at', 'id', 'logical_operator', 'operator', 'rule_id', 'rule_uuid', 'uuid']);
      assert.equal(c.rule_uuid, r.uuid);
      assert.equal(c.rule_id, r.id);
    }
    assert.deepEqual(await expectBody(200, get(r.uuid)), r);
  });

  it('reads hit statistics: hits_daily is 7 UTC days, oldest first, today last', async () => {
    const endpoint = await newEndpoint();
    const r = await createOk(rule(endpoint.uuid));
    await sql(`UPDATE rate_limit_rules SET hit_count = 12, last_matched = now() WHERE id = $1`, [r.id]);
    await sql(
      `INSERT INTO rate_limit_hits_daily (rule_id, day, hits) VALUES ($1, (now() AT TIME ZONE 'UTC')::date, 7), ($1, (now() AT TIME ZONE 'UTC')::date - 6, 5),
         ($1, (now() AT TIME ZONE 'UTC')::date - 7, 99)`,
      [r.id],
    );
    const got = await expectBody(200, get(r.uuid));
    assert.deepEqual(got.hits_daily, [5, 0, 0, 0, 0, 0, 7]);
    assert.equal(got.hit_count, 12);
    assert.ok(got.last_matched);
  });

  it('turns the deprecated source_ip into a source_ip condition joining every OR group', async () => {
    const endpoint = await newEndpoint();
    const r = await createOk(
      rule(endpoint.uuid, {
        source_ip: '10.0.0.0/8',
        conditions: [
          { type: 'path', operator: 'prefix', value: '/api', logical_operator: 'OR' },
          { type: 'path', operator: 'equals', value: '/login' },
        ],
      }),
    );
    assert.deepEqual(
      r.conditions.map((c: any) => `${c.condition_type} ${c.operator} ${c.condition_value} ${c.logical_operator}`),
      ['source_ip in 10.0.0.0/8 AND', 'path prefix /api OR', 'source_ip in 10.0.0.0/8 AND', 'path equals /login AND'],
    );
    const all = await createOk(rule(endpoint.uuid, { source_ip: '*', conditions: [] }));
    assert.deepEqual(all.conditions, []);
    const only = await createOk(rule(endpoint.id, { source_ip: '2001:db8::/32', conditions: [] }));
    assert.deepEqual(only.conditions.map((c: any) => c.condition_value), ['2001:db8::/32']);
    const bad = await create(rule(endpoint.uuid, { source_ip: '10.0.0.0/99' }));
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error, 'Bad request');
    assert.match(bad.body.detail, /^source_ip: .*invalid prefix length/);
  });

  it('refuses bad rule bodies with a clear 400 (conditions: Bad request + detail), 415 and 404, changing nothing', async () => {
    const endpoint = await newEndpoint();
    const before = await state();
    const cases: Array<[unknown, number, string, RegExp | string]> = [
      [rule(endpoint.uuid, { conditions: [{ type: 'referrer', operator: 'equals', value: 'x' }] }), 400, 'Bad request', /^conditions\[0\]: unknown condition type "referrer"/],
      [rule(endpoint.uuid, { conditions: [{ type: 'path', operator: 'regex', value: '.*' }] }), 400, 'Bad request', /operator "regex" is not allowed for path; expected one of/],
      [rule(endpoint.uuid, { conditions: [{ type: 'source_ip', operator: 'in', value: 'nope' }] }), 400, 'Bad request', /"nope" is not an IP address/],
      [rule(endpoint.uuid, { conditions: [{ operator: 'in', value: 'US' }] }), 400, 'Bad request', /type is required/],
      [rule(endpoint.uuid, { conditions: [{ type: 'country', value: 'US' }] }), 400, 'Bad request', /operator is required; country allows equals, in, not_in/],
      [rule(endpoint.uuid, { conditions: [{ type: 'country', operator: 'in' }] }), 400, 'Bad request', /value is required for operator in/],
      [rule(endpoint.uuid, { conditions: [{ type: 'toString' }] }), 400, 'Bad request', /^conditions\[0\]: operator is required$/],
      [rule(endpoint.uuid, { conditions: [{ type: 'constructor', operator: 'in', value: 'x' }] }), 400, 'Bad request', /unknown condition type "constructor"/],
      [rule(endpoint.uuid, { conditions: [{ type: 'country', operator: 'in', value: 'US', logical_operator: 'XOR' }] }), 400, 'Bad request', /logical_operator must be AND or OR/],
      [rule(endpoint.uuid, { conditions: [{ type: 7, operator: 'in', value: 'US' }] }), 400, 'Bad request', /type must be a string/],
      [rule(endpoint.uuid, { conditions: [{ type: 'country', operator: 'in', value: 'US', extra: 1 }] }), 400, 'Invalid request body', /"field":"conditions.0.extra","reason":"unknown field"/],
      [rule(endpoint.uuid, { window_size_seconds: 86401 }), 400, 'Invalid request body', /window_size_seconds/],
      [rule(endpoint.uuid, { requests_per_window: 0 }), 400, 'Invalid request body', /requests_per_window/],
      [rule(endpoint.uuid, { action: 'drop' }), 400, 'Invalid request body', /action/],
      [rule(endpoint.uuid, { status: 'paused' }), 400, 'Invalid request body', /status/],
      [rule(endpoint.uuid, { scope: 'global' }), 400, 'Invalid request body', /scope/],
      [rule(endpoint.uuid, { name: '' }), 400, 'Invalid request body', /name/],
      [rule(endpoint.uuid, { name: 'a\u0000b' }), 400, 'Invalid name: control characters are not allowed', /"field":"name","reason":"control characters are not allowed"/],
      [rule(endpoint.uuid, { unknown: true }), 400, 'Invalid request body', /"field":"unknown","reason":"unknown field"/],
      [{ ...rule(endpoint.uuid), endpoint_id: undefined }, 400, 'Invalid request body', /endpoint_id/],
      [rule('not-an-id'), 400, 'Invalid endpoint_id: an endpoint uuid or a positive integer id', /"field":"endpoint_id"/],
      [rule('00000000-0000-4000-8000-000000000000'), 404, 'Endpoint not found', ''],
      [rule(987654321), 404, 'Endpoint not found', ''],
    ];
    for (const [body, status, error, detail] of cases) {
      const res = await create(body);
      assert.equal(res.status, status, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal(res.body.error, error, res.text);
      // Condition refusals keep the contract's string detail; other validation errors name the field: {field, reason}.
      if (detail instanceof RegExp) assert.match(typeof res.body.detail === 'string' ? res.body.detail : JSON.stringify(res.body.detail), detail, res.text);
    }
    const tooMany = await create(rule(endpoint.uuid, { conditions: Array.from({ length: 21 }, () => ({ type: 'method', operator: 'equals', value: 'GET' })) }));
    assert.equal(tooMany.status, 400);
    const raw = await t.api('POST', BASE, { key: owner.api_key, raw: JSON.stringify(rule(endpoint.uuid)), headers: { 'content-type': 'text/plain' } });
    assert.equal(raw.status, 415);
    assert.equal(raw.body.code, 'unsupported_media_type');
    const json = await t.api('POST', BASE, { key: owner.api_key, raw: '{"name":', headers: { 'content-type': 'application/json' } });
    assert.equal(json.status, 400);
    assert.equal(json.body.code, 'invalid_json');
    assert.deepEqual(await state(), before);
  });

  // ---- permissions, plans, accounts -------------------------------------------------------------------------

  it('gates writes: free plan 403 entitlement_required (code), permission_denied, account_suspended; reads need endpoints:read', async () => {
    const free = await t.createUser('free');
    const freeEndpoint = await newEndpoint(free);
    const refused = await create(rule(freeEndpoint.uuid), free);
    assert.equal(refused.status, 403);
    assert.equal(refused.body.code, 'entitlement_required');
    assert.deepEqual(refused.body.detail, { feature: 'custom_rate_limits' });
    // The list works on any plan (and shows nothing).
    const listed = await expectBody(200, t.api('GET', BASE, { key: free.api_key }));
    assert.deepEqual(listed.rules, []);
    assert.equal(listed.posture.endpoints_without_active_rules, 1);

    const boss = await t.createUser('business');
    const reader = await t.createUser('business');
    const org = await orgWithMember(t, boss, reader, ['endpoints:read']);
    const orgEndpoint = await newEndpoint(boss, org.headers);
    const r = await expectBody(201, create(rule(orgEndpoint.uuid), boss, org.headers));
    const denied = await create(rule(orgEndpoint.uuid), reader, org.headers);
    assert.equal(denied.status, 403);
    assert.equal(denied.body.code, 'permission_denied');
    assert.deepEqual(denied.body.detail, { permission: 'rate_limits:update' });
    const deniedCondition = await putCondition(r.uuid, r.conditions[0].uuid, { type: 'method', operator: 'equals', value: 'GET' }, reader, org.headers);
    assert.equal(deniedCondition.status, 403);
    assert.equal((await t.api('GET', `${BASE}/${r.uuid}`, { key: reader.api_key, headers: org.headers })).status, 200);
    const orgList = await expectBody(200, t.api('GET', BASE, { key: reader.api_key, headers: org.headers }));
    assert.deepEqual(orgList.rules.map((x: any) => x.uuid), [r.uuid]);

    const suspended = await t.createUser('business');
    const mine = await newEndpoint(suspended);
    const kept = await createOk(rule(mine.uuid), suspended);
    await expectBody(200, t.api('POST', `/v1/admin/accounts/${suspended.account_id}/suspend`));
    const before = await state();
    for (const res of [
      await create(rule(mine.uuid), suspended),
      await putCondition(kept.uuid, kept.conditions[0].uuid, { type: 'method', operator: 'equals', value: 'GET' }, suspended),
      await t.api('DELETE', `${BASE}/${kept.uuid}`, { key: suspended.api_key }),
    ]) {
      assert.equal(res.status, 403, res.text);
      assert.equal(res.body.code, 'account_suspended');
    }
    assert.deepEqual(await state(), before);
  });

  it('keeps accounts apart: another account’s rule and endpoint are 404, its rules never listed', async () => {
    const a = await t.createUser('business');
    const b = await t.createUser('business');
    const ea = await newEndpoint(a);
    const ra = await createOk(rule(ea.uuid), a);
    const before = await state();
    assert.equal((await get(ra.uuid, b)).status, 404);
    assert.equal((await create(rule(ea.uuid), b)).status, 404);
    assert.equal((await create(rule(ea.id), b)).status, 404);
    assert.equal((await putCondition(ra.uuid, ra.conditions[0].uuid, { type: 'method', operator: 'equals', value: 'GET' }, b)).status, 404);
    assert.equal((await t.api('DELETE', `${BASE}/${ra.uuid}`, { key: b.api_key })).status, 404);
    assert.equal((await t.api('PUT', `${BASE}/${ra.uuid}`, { key: b.api_key, body: rule(ea.uuid) })).status, 404);
    assert.equal((await t.api('POST', `${BASE}/${ra.uuid}/conditions`, { key: b.api_key, body: { type: 'method', operator: 'equals', value: 'GET' } })).status, 404);
    const listed = await expectBody(200, t.api('GET', `${BASE}?endpoint_id=${ea.uuid}`, { key: b.api_key }));
    assert.deepEqual(listed.rules, []);
    assert.equal(listed.pagination.total, 0);
    assert.equal((await t.api('GET', BASE, { key: null })).status, 401);
    assert.deepEqual(await state(), before);
  });

  // ---- conditions -------------------------------------------------------------------------------------------

  it('PUT condition: full write keeping uuid and position; unchanged values are fine; the docs/api.md refusals change nothing', async () => {
    const endpoint = await newEndpoint();
    const r = await createOk(rule(endpoint.uuid));
    const [first, second] = r.conditions;
    const res = await putCondition(r.uuid, first.uuid, { type: 'header', operator: 'prefix', value: 'User-Agent=curl/', logical_operator: 'or' });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { ...first, condition_type: 'header', operator: 'prefix', condition_value: 'user-agent=curl/', logical_operator: 'OR' });
    const again = await putCondition(r.uuid, first.uuid, { type: 'header', operator: 'prefix', value: 'user-agent=curl/', logical_operator: 'OR' });
    assert.deepEqual(again.body, res.body);
    // exists takes only the name; logical_operator defaults to AND.
    const exists = await expectBody(200, putCondition(r.uuid, second.uuid, { type: 'cookie', operator: 'exists', value: 'session' }));
    assert.equal(exists.logical_operator, 'AND');
    const got = await expectBody(200, get(r.uuid));
    assert.deepEqual(got.conditions.map((c: any) => c.uuid), [first.uuid, second.uuid], 'order and uuids kept');

    const other = await createOk(rule(endpoint.uuid, { name: 'other' }));
    const before = await state();
    const refusals: Array<[Promise<any>, number, string]> = [
      [putCondition(r.uuid, other.conditions[0].uuid, { type: 'method', operator: 'equals', value: 'GET' }), 404, 'not_found'],
      [putCondition(r.uuid, '00000000-0000-4000-8000-000000000000', { type: 'method', operator: 'equals', value: 'GET' }), 404, 'not_found'],
      [putCondition('00000000-0000-4000-8000-000000000000', first.uuid, { type: 'method', operator: 'equals', value: 'GET' }), 404, 'not_found'],
      [putCondition(r.uuid, first.uuid, { type: 'method', operator: 'contains', value: 'GE' }), 400, 'bad_request'],
      [putCondition(r.uuid, first.uuid, { type: 'port', operator: 'equals', value: '70000' }), 400, 'bad_request'],
      [putCondition(r.uuid, first.uuid, { type: 'header', operator: 'equals', value: 'no-equals-sign' }), 400, 'bad_request'],
      [putCondition(r.uuid, first.uuid, {}), 400, 'bad_request'],
      [putCondition(r.uuid, 'not-a-uuid', { type: 'method', operator: 'equals', value: 'GET' }), 400, 'invalid_id'],
      [t.api('PUT', `${BASE}/${r.uuid}/conditions/${first.uuid}`, { key: owner.api_key, raw: '{"type":"method"' , headers: { 'content-type': 'application/json' } }), 400, 'invalid_json'],
      [t.api('PUT', `${BASE}/${r.uuid}/conditions/${first.uuid}`, { key: owner.api_key, raw: '{}', headers: { 'content-type': 'text/plain' } }), 415, 'unsupported_media_type'],
      [t.api('PUT', `${BASE}/${r.uuid}/conditions/${first.uuid}`, { key: owner.api_key }), 415, 'unsupported_media_type'],
    ];
    for (const [pending, status, code] of refusals) {
      const res = await pending;
      assert.equal(res.status, status, res.text);
      assert.equal(res.body.code, code, res.text);
      if (code === 'bad_request') {
        assert.equal(res.body.error, 'Bad request');
        assert.equal(typeof res.body.detail, 'string');
      }
    }
    assert.deepEqual(await state(), before);
  });

  it('adds conditions last (201) and deletes them, other conditions keeping their order', async () => {
    const endpoint = await newEndpoint();
    const r = await createOk(rule(endpoint.uuid));
    const res = await t.api('POST', `${BASE}/${r.uuid}/conditions`, { key: owner.api_key, body: { type: 'user_agent', operator: 'contains', value: 'bot' } });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.headers.get('location'), `${BASE}/${r.uuid}/conditions/${res.body.uuid}`);
    const afterAdd = await expectBody(200, get(r.uuid));
    assert.deepEqual(afterAdd.conditions.map((c: any) => c.uuid), [...r.conditions.map((c: any) => c.uuid), res.body.uuid]);
    const bad = await t.api('POST', `${BASE}/${r.uuid}/conditions`, { key: owner.api_key, body: { type: 'browser', operator: 'equals', value: 'netscape' } });
    assert.equal(bad.status, 400);
    assert.match(bad.body.detail, /unknown browser "netscape"/);
    const noType = await t.api('POST', `${BASE}/${r.uuid}/conditions`, { key: owner.api_key, raw: '{}', headers: { 'content-type': 'text/plain' } });
    assert.equal(noType.status, 415);

    assert.equal((await t.api('DELETE', `${BASE}/${r.uuid}/conditions/${r.conditions[0].uuid}`, { key: owner.api_key })).status, 204);
    assert.equal((await t.api('DELETE', `${BASE}/${r.uuid}/conditions/${r.conditions[0].uuid}`, { key: owner.api_key })).status, 404);
    const afterDelete = await expectBody(200, get(r.uuid));
    assert.deepEqual(afterDelete.conditions.map((c: any) => c.uuid), [r.conditions[1].uuid, res.body.uuid]);
    // A condition appended after a delete still goes last.
    const last = await expectBody(201, t.api('POST', `${BASE}/${r.uuid}/conditions`, { key: owner.api_key, body: { type: 'protocol', operator: 'in', value: 'https,wss' } }));
    assert.equal((await expectBody(200, get(r.uuid))).conditions.at(-1).uuid, last.uuid);
  });

  it('replaces a rule whole (PUT) and deletes it', async () => {
    const endpoint = await newEndpoint();
    const r = await createOk(rule(endpoint.uuid, { priority: 3, scope: 'cluster', fail_mode: 'closed' }));
    const put = await expectBody(
      200,
      t.api('PUT', `${BASE}/${r.uuid}`, {
        key: owner.api_key,
        body: { name: 'renamed', requests_per_window: 10, window_size_seconds: 10, action: 'throttle', conditions: [{ type: 'path', operator: 'prefix', value: '/api' }] },
      }),
    );
    assert.equal(put.uuid, r.uuid);
    assert.equal(put.name, 'renamed');
    assert.equal(put.action, 'throttle');
    assert.equal(put.priority, 0, 'omitted fields take their defaults');
    assert.equal(put.scope, 'edge');
    assert.equal(put.fail_mode, 'open');
    assert.deepEqual(put.conditions.map((c: any) => c.condition_value), ['/api']);
    const other = await newEndpoint();
    const moved = await t.api('PUT', `${BASE}/${r.uuid}`, { key: owner.api_key, body: rule(other.uuid) });
    assert.equal(moved.status, 400);
    assert.deepEqual(moved.body.detail, { field: 'endpoint_id', reason: 'a rule cannot move to another endpoint; create a new rule there' });
    assert.equal((await t.api('PUT', `${BASE}/${r.uuid}`, { key: owner.api_key, body: rule(endpoint.id) })).status, 200);
    assert.equal((await t.api('DELETE', `${BASE}/${r.uuid}`, { key: owner.api_key })).status, 204);
    assert.equal((await get(r.uuid)).status, 404);
    assert.equal((await sql('SELECT count(*)::int AS n FROM rate_limit_conditions WHERE rule_id = $1', [r.id]))[0].n, 0);
  });

  it('takes tags on create and on PUT (a full write: omitted means none), in every view, never in the feed', async () => {
    const endpoint = await newEndpoint();
    const r = await createOk(rule(endpoint.uuid, { tags: ['login', 'team.auth'] }));
    assert.deepEqual(r.tags, ['login', 'team.auth']);
    assert.deepEqual((await expectBody(200, get(r.uuid))).tags, ['login', 'team.auth']);
    const listed = await expectBody(200, t.api('GET', `${BASE}?endpoint_id=${endpoint.uuid}`, { key: owner.api_key }));
    assert.deepEqual(listed.rules.map((x: any) => x.tags), [['login', 'team.auth']]);
    const edge = await edgeEndpoint(t, endpoint.uuid);
    assert.ok(!('tags' in edge.rate_limits![0]), 'edges get no tags');

    const put = (body: unknown) => t.api('PUT', `${BASE}/${r.uuid}`, { key: owner.api_key, body });
    assert.deepEqual((await expectBody(200, put(rule(endpoint.uuid, { tags: SIXTEEN_TAGS })))).tags, SIXTEEN_TAGS);
    assert.deepEqual((await expectBody(200, put(rule(endpoint.uuid)))).tags, [], 'PUT replaces the rule whole: tags omitted are none');
    assert.deepEqual((await expectBody(200, get(r.uuid))).tags, []);
  });

  it('refuses bad tags with 400 invalid_request on create and PUT, changing nothing', async () => {
    const endpoint = await newEndpoint();
    const r = await createOk(rule(endpoint.uuid, { tags: ['keep'] }));
    const before = await state();
    for (const [what, tags] of BAD_TAGS) {
      const created = await create(rule(endpoint.uuid, { tags }));
      assert.equal(created.status, 400, what);
      assert.equal(created.body.code, 'invalid_request', what);
      assert.match(created.body.detail.field, /^tags(\.\d+)?$/, what);
      const replaced = await t.api('PUT', `${BASE}/${r.uuid}`, { key: owner.api_key, body: rule(endpoint.uuid, { tags }) });
      assert.equal(replaced.status, 400, what);
      assert.equal(replaced.body.code, 'invalid_request', what);
    }
    assert.deepEqual(await state(), before);
  });

  it('answers 409 quota_paused while the endpoint is paused, and writes again once unpaused', async () => {
    const endpoint = await newEndpoint();
    const r = await createOk(rule(endpoint.uuid));
    await expectBody(200, t.api('POST', `/v1/admin/endpoints/${endpoint.uuid}/pause`));
    const before = await state();
    for (const res of [
      await create(rule(endpoint.uuid)),
      await putCondition(r.uuid, r.conditions[0].uuid, { type: 'method', operator: 'equals', value: 'GET' }),
      await t.api('DELETE', `${BASE}/${r.uuid}/conditions/${r.conditions[0].uuid}`, { key: owner.api_key }),
      await t.api('DELETE', `${BASE}/${r.uuid}`, { key: owner.api_key }),
    ]) {
      assert.equal(res.status, 409, res.text);
      assert.equal(res.body.code, 'quota_paused');
    }
    assert.deepEqual(await state(), before);
    await expectBody(200, t.api('POST', `/v1/admin/endpoints/${endpoint.uuid}/unpause`));
    await expectBody(200, putCondition(r.uuid, r.conditions[0].uuid, { type: 'method', operator: 'equals', value: 'GET' }));
  });

  // ---- list -------------------------------------------------------------------------------------------------

  it('lists with pagination, search, status and endpoint filters, endpoint maps and posture', async () => {
    const user = await t.createUser('business');
    const e1 = await newEndpoint(user);
    const e2 = await newEndpoint(user);
    await newEndpoint(user); // no rules
    const made = [];
    for (let i = 0; i < 5; i++) made.push(await createOk(rule(e1.uuid, { name: `Login ${i}`, priority: 5 - i, status: i === 4 ? 'inactive' : 'active' }), user));
    const api2 = await createOk(rule(e2.uuid, { name: 'API burst', status: 'disabled' }), user);
    const list = (query: string) => expectBody(200, t.api('GET', `${BASE}${query}`, { key: user.api_key }));

    const all = await list('');
    assert.equal(all.pagination.total, 6);
    assert.deepEqual(all.pagination, { page: 1, limit: 20, total: 6, totalPages: 1 });
    // Evaluation order within an endpoint: priority ascending.
    assert.deepEqual(all.rules.filter((r: any) => r.endpoint_id === e1.id).map((r: any) => r.name), ['Login 4', 'Login 3', 'Login 2', 'Login 1', 'Login 0']);
    assert.equal(all.defaultDomain, 'edge.localhost');
    assert.equal(all.endpoints.length, 3);
    assert.deepEqual(Object.keys(all.endpointByID).sort(), [e1, e2].map((e) => String(e.id)).concat(all.endpoints.map((e: any) => String(e.id))).filter((v, i, a) => a.indexOf(v) === i).sort());
    assert.equal(all.endpointByID[String(e1.id)].uuid, e1.uuid);
    assert.equal(all.endpointByID[String(e1.id)].active_rules, 4);
    assert.deepEqual(all.domainByID, {});
    assert.equal(all.posture.endpoints_with_active_rules, 1);
    assert.equal(all.posture.endpoints_without_active_rules, 2);
    assert.equal(typeof all.posture.shadowed_rules, 'number');

    const page2 = await list('?limit=4&page=2');
    assert.deepEqual(page2.pagination, { page: 2, limit: 4, total: 6, totalPages: 2 });
    assert.equal(page2.rules.length, 2);
    assert.deepEqual((await list('?page_size=5')).pagination.limit, 5);
    assert.equal((await list('?limit=1000')).pagination.limit, 100);
    assert.equal((await list('?limit=abc&page=-1')).pagination.limit, 20);
    assert.deepEqual((await list('?search=burst')).rules.map((r: any) => r.uuid), [api2.uuid]);
    assert.deepEqual((await list('?q=LOGIN%201')).rules.map((r: any) => r.name), ['Login 1']);
    assert.deepEqual((await list('?search=%25')).rules, [], 'LIKE wildcards are literal');
    assert.deepEqual((await list('?status=inactive')).rules.map((r: any) => r.uuid), [made[4].uuid]);
    assert.deepEqual((await list('?status=disabled')).rules.map((r: any) => r.uuid), [api2.uuid]);
    assert.equal((await list(`?endpoint_id=${e2.uuid}`)).pagination.total, 1);
    assert.equal((await list(`?endpoint_id=${e1.id}`)).pagination.total, 5);
    assert.equal((await list(`?endpoint_id=${e1.id}&status=active`)).pagination.total, 4);
    for (const bad of ['?status=paused', '?endpoint_id=nope', '?page=1000&limit=100']) {
      const res = await t.api('GET', `${BASE}${bad}`, { key: user.api_key });
      assert.equal(res.status, 400, `${bad}: ${res.text}`);
    }
  });

  // ---- shadowing and the edge -------------------------------------------------------------------------------

  it('computes shadowed rules on every write, across the endpoint’s rules', async () => {
    const endpoint = await newEndpoint();
    const narrow = await createOk(rule(endpoint.uuid, { name: 'narrow', priority: 10, requests_per_window: 10 }));
    assert.equal(narrow.shadowed, false);
    const broad = await createOk(rule(endpoint.uuid, { name: 'all posts', priority: 1, requests_per_window: 5, conditions: [{ type: 'method', operator: 'equals', value: 'POST' }] }));
    assert.equal(broad.shadowed, false);
    const shadowed = await expectBody(200, get(narrow.uuid));
    assert.equal(shadowed.shadowed, true);
    assert.match(shadowed.shadow_reason, new RegExp(`rule "all posts" \\(${broad.uuid}\\) is evaluated first`));
    const listed = await expectBody(200, t.api('GET', `${BASE}?endpoint_id=${endpoint.uuid}`, { key: owner.api_key }));
    assert.ok(listed.posture.shadowed_rules >= 1);
    // Deactivating the broad rule frees the narrow one.
    await expectBody(200, t.api('PUT', `${BASE}/${broad.uuid}`, { key: owner.api_key, body: rule(endpoint.uuid, { name: 'all posts', priority: 1, status: 'inactive' }) }));
    const freed = await expectBody(200, get(narrow.uuid));
    assert.equal(freed.shadowed, false);
    assert.equal(freed.shadow_reason, null);
  });

  it('publishes the active rules to edges in evaluation order, with canonical conditions in position order', async () => {
    const endpoint = await newEndpoint();
    const later = await createOk(rule(endpoint.uuid, { name: 'later', priority: 5, scope: 'cluster', fail_mode: 'closed' }));
    const first = await createOk(rule(endpoint.uuid, { name: 'first', priority: 1, action: 'throttle', conditions: [] }));
    const tie = await createOk(rule(endpoint.uuid, { name: 'tie', priority: 5 }));
    await createOk(rule(endpoint.uuid, { name: 'off', priority: 0, status: 'inactive' }));
    await createOk(rule(endpoint.uuid, { name: 'disabled', priority: 0, status: 'disabled' }));
    let config = await edgeEndpoint(t, endpoint.uuid);
    assert.deepEqual(config.rate_limits!.map((r) => r.name), ['first', 'later', 'tie']);
    assert.deepEqual(config.rate_limits![1], {
      uuid: later.uuid,
      id: later.id,
      name: 'later',
      requests_per_window: 5,
      window_size_seconds: 60,
      action: 'block',
      priority: 5,
      scope: 'cluster',
      fail_mode: 'closed',
      conditions: later.conditions.map((c: any) => ({ uuid: c.uuid, type: c.condition_type, operator: c.operator, value: c.condition_value, logical_operator: c.logical_operator })),
    });
    await expectBody(200, putCondition(later.uuid, later.conditions[1].uuid, { type: 'path', operator: 'prefix', value: '/auth' }));
    config = await edgeEndpoint(t, endpoint.uuid);
    assert.equal(config.rate_limits![1].conditions[1].value, '/auth');
    for (const r of [later, first, tie]) assert.equal((await t.api('DELETE', `${BASE}/${r.uuid}`, { key: owner.api_key })).status, 204);
    config = await edgeEndpoint(t, endpoint.uuid);
    assert.equal(config.rate_limits, undefined, 'no active rule: no rate-limit section');
  });

  it('lists every operation in the OpenAPI document', async () => {
    const doc = await expectBody(200, t.api('GET', '/v1/openapi.json', { key: null }));
    const ops = (path: string) => Object.keys(doc.paths[path] ?? {}).sort();
    assert.deepEqual(ops(BASE), ['get', 'post']);
    assert.deepEqual(ops(`${BASE}/{uuid}`), ['delete', 'get', 'put']);
    assert.deepEqual(ops(`${BASE}/{uuid}/conditions`), ['post']);
    assert.deepEqual(ops(`${BASE}/{uuid}/conditions/{condition_uuid}`), ['delete', 'put']);
    for (const op of [doc.paths[BASE].post, doc.paths[`${BASE}/{uuid}`].put]) {
      const tags = op.requestBody.content['application/json'].schema.properties.tags;
      assert.deepEqual([tags.type, tags.maxItems, tags.uniqueItems, tags.items.pattern], ['array', 16, true, '^[a-z0-9][a-z0-9._-]{0,31}$']);
    }
    const view = doc.paths[`${BASE}/{uuid}`].get.responses['200'].content['application/json'].schema;
    assert.ok(view.required.includes('tags') && view.properties.tags.type === 'array');
  });

  // ---- legacy integer ids -----------------------------------------------------------------------------------

  it('accepts legacy integer ids before the sunset, with Deprecation and Sunset headers', async () => {
    const endpoint = await newEndpoint();
    const r = await createOk(rule(endpoint.uuid));
    const byUuid = await get(r.uuid);
    assert.equal(byUuid.headers.get('deprecation'), null);
    const res = await get(r.id);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.uuid, r.uuid);
    assert.match(res.headers.get('deprecation')!, /^@\d+$/);
    assert.equal(res.headers.get('sunset'), new Date(t.node.config.rateLimitIdSunset).toUTCString());
    const cond = await putCondition(r.id, r.conditions[0].id, { type: 'method', operator: 'equals', value: 'PATCH' });
    assert.equal(cond.status, 200, cond.text);
    assert.equal(cond.body.uuid, r.conditions[0].uuid);
    assert.ok(cond.headers.get('sunset'));
    assert.equal((await get(999999999)).status, 404);
  });
});

describe('firewall rate limits API after the legacy-id sunset', () => {
  let t: TestNode;
  before(async () => {
    t = await startTestNode({ EDGE_RATE_LIMIT_ID_SUNSET: '2020-01-01T00:00:00Z' });
  });
  after(() => t.close());

  it('answers 400 integer_id_unsupported to integer ids, and drops legacy condition ids from responses', async () => {
    const user = await t.createUser('business');
    const endpoint = await createEndpoint(t, user);
    const r = await expectBody(
      201,
      t.api('POST', BASE, {
        key: user.api_key,
        body: { endpoint_id: endpoint.uuid, name: 'x', requests_per_window: 1, window_size_seconds: 1, action: 'block', conditions: [{ type: 'method', operator: 'equals', value: 'GET' }] },
      }),
    );
    assert.deepEqual(Object.keys(r.conditions[0]).sort(), ['condition_type', 'condition_value', 'created_at', 'logical_operator', 'operator', 'rule_uuid', 'uuid']);
    const res = await t.api('GET', `${BASE}/${r.id}`, { key: user.api_key });
    assert.equal(res.status, 400);
    assert.equal(res.body.code, 'integer_id_unsupported');
    const cond = await t.api('PUT', `${BASE}/${r.uuid}/conditions/1`, { key: user.api_key, body: { type: 'method', operator: 'equals', value: 'GET' } });
    assert.equal(cond.status, 400);
    assert.equal(cond.body.code, 'integer_id_unsupported');
    assert.equal((await t.api('GET', `${BASE}/${r.uuid}`, { key: user.api_key })).status, 200);
  });
});

describe('PUT condition refuses header exists without value (issue 20 item 8)', () => {
  let t: TestNode;
  let owner: User;
  before(async () => ({ t, owner } = await nodeWithOwner()));
  after(() => t.close());

  it('accepts header and cookie exists / not_exists without a value, stored with an empty value and published to edges', async () => {
    const endpoint = await createEndpoint(t, owner);
    const body = { endpoint_id: endpoint.uuid, name: 'x', requests_per_window: 5, window_size_seconds: 60, action: 'block', conditions: [{ type: 'method', operator: 'equals', value: 'POST' }] };
    const r = await expectBody(201, t.api('POST', BASE, { key: owner.api_key, body }));
    const [first] = r.conditions;
    for (const [type, operator] of [['header', 'exists'], ['header', 'not_exists'], ['cookie', 'exists'], ['cookie', 'not_exists']]) {
      for (const extra of [{}, { value: null }, { value: '' }]) {
        const res = await t.api('PUT', `${BASE}/${r.uuid}/conditions/${first.uuid}`, { key: owner.api_key, body: { type, operator, ...extra } });
        assert.equal(res.status, 200, `${type} ${operator} ${JSON.stringify(extra)}: ${res.text}`);
        assert.deepEqual([res.body.condition_type, res.body.operator, res.body.condition_value], [type, operator, '']);
      }
    }
    const added = await t.api('POST', `${BASE}/${r.uuid}/conditions`, { key: owner.api_key, body: { type: 'header', operator: 'exists' } });
    assert.equal(added.status, 201, added.text);
    assert.equal(added.body.condition_value, '');
    const published = await edgeEndpoint(t, endpoint.uuid);
    const conditions = published.rate_limits!.find((x) => x.uuid === r.uuid)!.conditions;
    assert.deepEqual(conditions.map((c: { type: string; operator: string; value: string }) => [c.type, c.operator, c.value]), [['cookie', 'not_exists', ''], ['header', 'exists', '']]);
    // The value operators still need one.
    const refused = await t.api('PUT', `${BASE}/${r.uuid}/conditions/${first.uuid}`, { key: owner.api_key, body: { type: 'header', operator: 'equals' } });
    assert.equal(refused.status, 400);
    assert.equal(refused.body.code, 'bad_request');
  });

  it('path conditions are stored in the canonical form they match in; exact_ operators keep the path as written', async () => {
    const endpoint = await createEndpoint(t, owner);
    const conditions = [
      { type: 'path', operator: 'equals', value: '/Login/' },
      { type: 'path', operator: 'EXACT_equals', value: '/Login/' },
    ];
    const r = await expectBody(201, t.api('POST', BASE, { key: owner.api_key, body: { endpoint_id: endpoint.uuid, name: 'login', requests_per_window: 5, window_size_seconds: 60, action: 'block', conditions } }));
    assert.deepEqual(r.conditions.map((c: { operator: string; condition_value: string }) => [c.operator, c.condition_value]), [['equals', '/login'], ['exact_equals', '/Login/']]);
    const refused = await t.api('POST', `${BASE}/${r.uuid}/conditions`, { key: owner.api_key, body: { type: 'header', operator: 'exact_equals', value: 'a=b' } });
    assert.equal(refused.status, 400);
  });
});
