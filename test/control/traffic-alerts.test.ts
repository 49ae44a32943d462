// Traffic alert rules over real HTTP: create/list/get/replace/delete with their shapes (secrets never returned),
// every bad input refused with a 400 that changes nothing, another account's rules and endpoints 404, permissions,
// the test operation (a test event, the rule's status unchanged), and the events list's limit edge cases.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { TestNode } from '../helpers/node.ts';
import { createEndpoint, expectBody, nodeWithOwner, orgWithMember, storeRows, type User } from '../helpers/endpoint-api.ts';
import { BAD_TAGS, SIXTEEN_TAGS } from '../helpers/tags.ts';
import { assertFingerprintOf } from '../helpers/fingerprints.ts';

const BASE = '/v1/traffic/alerts';
const SECRET = 'a-webhook-secret-of-some-length';

describe('traffic alert rules API', () => {
  let t: TestNode;
  let owner: User;
  let other: User;
  before(async () => {
    // Private webhook addresses are refused here (the default); the end-to-end test delivers to a local receiver.
    ({ t, owner } = await nodeWithOwner());
    other = await t.createUser('business');
  });
  after(() => t.close());

  const sql = storeRows(() => t);
  const rule = (over: Record<string, unknown> = {}) => ({
    name: 'API errors',
    metric: 'error_rate',
    comparison: 'gt',
    threshold: 0.05,
    window_seconds: 300,
    channels: [{ type: 'webhook', url: 'https://hooks.example.com/alerts?token=abc', secret: SECRET }, { type: 'email', to: 'ops@example.com' }],
    ...over,
  });
  const create = (body: unknown, user: Pick<User, 'api_key'> = owner, headers?: Record<string, string>) => t.api('POST', BASE, { key: user.api_key, body, headers });
  const createOk = (body: unknown, user: Pick<User, 'api_key'> = owner) => expectBody(201, create(body, user));
  const state = async () => ({ rules: await sql('SELECT * FROM alert_rules ORDER BY id'), events: await sql('SELECT * FROM alert_events ORDER BY id') });

  it('creates a rule (201, Location, status unknown, has_secret) and reads it back; the secret is sealed and never shown', async () => {
    const endpoint = await createEndpoint(t, owner);
    const res = await create(rule({ endpoint_id: endpoint.uuid }));
    assert.equal(res.status, 201, res.text);
    const r = res.body;
    assert.equal(res.headers.get('location'), `${BASE}/${r.uuid}`);
    assert.deepEqual(Object.keys(r).sort(), [
      'channels', 'comparison', 'created_at', 'endpoint_id', 'endpoint_uuid', 'id', 'last_evaluated_at', 'last_value', 'metric', 'name',
      'status', 'tags', 'threshold', 'updated_at', 'user_id', 'uuid', 'window_seconds',
    ]);
    assert.deepEqual(r.tags, [], 'no tags: an empty list');
    assert.equal(r.status, 'unknown');
    assert.equal(r.endpoint_id, endpoint.id);
    assert.equal(r.endpoint_uuid, endpoint.uuid);
    assert.equal(r.user_id, owner.id);
    assert.equal(r.threshold, 0.05);
    assert.equal(r.last_value, null);
    const fingerprint = r.channels[0].secret_fingerprint;
    assert.deepEqual(r.channels, [
      { type: 'webhook', url: 'https://hooks.example.com/alerts?token=abc', has_secret: true, secret_fingerprint: fingerprint },
      { type: 'email', to: 'ops@example.com' },
    ]);
    await assertFingerprintOf(fingerprint, SECRET, 'the signing secret');
    assert.ok(!res.text.includes(SECRET));
    const [row] = await sql(`SELECT channels::text AS channels FROM alert_rules WHERE uuid = $1`, [r.uuid]);
    assert.ok(!row.channels.includes(SECRET), 'the secret is stored sealed');

    const got = await expectBody(200, t.api('GET', `${BASE}/${r.uuid}`, { key: owner.api_key }));
    assert.deepEqual(got, r);
    const upper = await expectBody(200, t.api('GET', `${BASE}/${r.uuid.toUpperCase()}`, { key: owner.api_key }));
    assert.equal(upper.uuid, r.uuid);
    const list = await expectBody(200, t.api('GET', BASE, { key: owner.api_key }));
    assert.ok(list.items.some((x: any) => x.uuid === r.uuid));
  });

  it('takes the endpoint by numeric id, none for all endpoints, and defaults window_seconds; the list is the account’s only', async () => {
    const endpoint = await createEndpoint(t, owner);
    const byId = await createOk(rule({ endpoint_id: endpoint.id, window_seconds: undefined }));
    assert.equal(byId.endpoint_uuid, endpoint.uuid);
    assert.equal(byId.window_seconds, 300);
    const byIdText = await createOk(rule({ endpoint_id: String(endpoint.id), metric: 'requests', comparison: 'lt', threshold: 1 }));
    assert.equal(byIdText.endpoint_id, endpoint.id);
    const all = await createOk(rule({ endpoint_id: null, metric: 'latency_p95_ms', threshold: 800, channels: [{ type: 'webhook', url: 'http://hooks.example.com/x' }] }));
    assert.equal(all.endpoint_id, null);
    assert.equal(all.endpoint_uuid, null);
    assert.deepEqual(all.channels, [{ type: 'webhook', url: 'http://hooks.example.com/x', has_secret: false, secret_fingerprint: null }]);
    const theirs = await createOk(rule({ name: 'theirs' }), other);
    const mine = await expectBody(200, t.api('GET', BASE, { key: owner.api_key }));
    assert.ok(!mine.items.some((x: any) => x.uuid === theirs.uuid));
    assert.deepEqual(
      mine.items.map((x: any) => x.id),
      [...mine.items.map((x: any) => x.id)].sort((a: number, b: number) => a - b),
      'oldest first',
    );
  });

  it('refuses bad input with 400 and changes nothing', async () => {
    const endpoint = await createEndpoint(t, owner);
    const before = await state();
    const cases: Array<[string, unknown, string?]> = [
      ['unknown field', { ...rule(), severity: 'high' }, 'unknown_field'],
      ['missing name', { ...rule(), name: undefined }],
      ['blank name', rule({ name: '   ' })],
      ['control characters in the name', rule({ name: 'a\u0007b' })],
      ['unknown metric', rule({ metric: 'errors_4xx' })],
      ['unknown comparison', rule({ comparison: 'gte' })],
      ['negative threshold', rule({ threshold: -1 })],
      ['threshold as a string', rule({ threshold: '5' })],
      ['error_rate above 1', rule({ threshold: 5 })],
      ['window below 60', rule({ window_seconds: 59 })],
      ['window above a day', rule({ window_seconds: 86401 })],
      ['fractional window', rule({ window_seconds: 90.5 })],
      ['no channels', rule({ channels: [] })],
      ['eleven channels', rule({ channels: Array.from({ length: 11 }, (_, i) => ({ type: 'email', to: `o${i}@example.com` })) })],
      ['unknown channel type', rule({ channels: [{ type: 'sms', to: '+100' }] })],
      ['webhook on loopback', rule({ channels: [{ type: 'webhook', url: 'http://127.0.0.1:9/x' }] })],
      ['webhook on localhost', rule({ channels: [{ type: 'webhook', url: 'http://localhost/x' }] })],
      ['webhook on a private address', rule({ channels: [{ type: 'webhook', url: 'https://10.1.2.3/x' }] })],
      ['webhook on link-local metadata', rule({ channels: [{ type: 'webhook', url: 'http://169.254.169.254/latest' }] })],
      ['webhook on mapped IPv6 loopback', rule({ channels: [{ type: 'webhook', url: 'http://[::ffff:127.0.0.1]/x' }] })],
      ['webhook not http', rule({ channels: [{ type: 'webhook', url: 'ftp://hooks.example.com/x' }] })],
      ['webhook with credentials', rule({ channels: [{ type: 'webhook', url: 'https://u:p@hooks.example.com/x' }] })],
      ['webhook not a URL', rule({ channels: [{ type: 'webhook', url: 'hooks' }] })],
      ['webhook without url', rule({ channels: [{ type: 'webhook' }] })],
      ['webhook with to', rule({ channels: [{ type: 'webhook', url: 'https://hooks.example.com/x', to: 'a@example.com' }] })],
      ['short secret', rule({ channels: [{ type: 'webhook', url: 'https://hooks.example.com/x', secret: 'short' }] })],
      ['email without to', rule({ channels: [{ type: 'email' }] })],
      ['email not an address', rule({ channels: [{ type: 'email', to: 'not-an-address' }] })],
      ['email with two addresses', rule({ channels: [{ type: 'email', to: 'a@example.com,b@example.com' }] })],
      ['email with a header break', rule({ channels: [{ type: 'email', to: 'a@example.com\r\nBcc: x@example.com' }] })],
      ['email with a url', rule({ channels: [{ type: 'email', to: 'a@example.com', url: 'https://x.example.com' }] })],
      ['duplicate destination', rule({ channels: [{ type: 'email', to: 'a@example.com' }, { type: 'email', to: 'A@example.com' }] })],
      ['endpoint_id not an id', rule({ endpoint_id: 'abc' })],
      ['endpoint_id zero', rule({ endpoint_id: 0 })],
      ['endpoint_id as a boolean', rule({ endpoint_id: true })],
    ];
    for (const [what, body, code] of cases) {
      const res = await create(body);
      assert.equal(res.status, 400, `${what}: ${res.text}`);
      if (code) assert.equal(res.body.code, code, what);
    }
    const json = await t.api('POST', BASE, { key: owner.api_key, raw: '{"name":', headers: { 'content-type': 'application/json' } });
    assert.equal(json.status, 400);
    assert.equal(json.body.code, 'invalid_json');
    // Another account's endpoint, and one that does not exist, are 404 (as any endpoint that is not the caller's).
    const theirs = await createEndpoint(t, other);
    assert.equal((await create(rule({ endpoint_id: theirs.uuid }))).status, 404);
    assert.equal((await create(rule({ endpoint_id: theirs.id }))).status, 404);
    assert.equal((await create(rule({ endpoint_id: '00000000-0000-4000-8000-000000000000' }))).status, 404);
    assert.equal((await create(rule({ endpoint_id: '99999999999999999' }))).status, 404);
    assert.deepEqual(await state(), before);
    assert.ok(endpoint.uuid);
  });

  it('replaces a rule: a webhook sent without secret keeps the one of the same URL, null removes it; status is kept', async () => {
    const r = await createOk(rule());
    await sql(`UPDATE alert_rules SET status = 'firing', last_value = 0.5 WHERE uuid = $1`, [r.uuid]);
    const put = (body: unknown, user: Pick<User, 'api_key'> = owner) => t.api('PUT', `${BASE}/${r.uuid}`, { key: user.api_key, body });
    const kept = await expectBody(
      200,
      put(rule({ name: 'Renamed', threshold: 0.2, channels: [{ type: 'webhook', url: 'https://hooks.example.com/alerts?token=abc' }, { type: 'webhook', url: 'https://other.example.com/' }] })),
    );
    assert.equal(kept.name, 'Renamed');
    assert.equal(kept.threshold, 0.2);
    assert.equal(kept.status, 'firing');
    assert.equal(kept.last_value, 0.5);
    assert.deepEqual(kept.channels, [
      { type: 'webhook', url: 'https://hooks.example.com/alerts?token=abc', has_secret: true, secret_fingerprint: r.channels[0].secret_fingerprint },
      { type: 'webhook', url: 'https://other.example.com/', has_secret: false, secret_fingerprint: null },
    ]);
    const rotated = await expectBody(200, put(rule({ channels: [{ type: 'webhook', url: 'https://hooks.example.com/alerts?token=abc', secret: `${SECRET}-2` }] })));
    assert.notEqual(rotated.channels[0].secret_fingerprint, r.channels[0].secret_fingerprint, 'a new secret, a new fingerprint');
    await assertFingerprintOf(rotated.channels[0].secret_fingerprint, `${SECRET}-2`, 'the rotated secret');
    const removed = await expectBody(200, put(rule({ channels: [{ type: 'webhook', url: 'https://hooks.example.com/alerts?token=abc', secret: null }] })));
    assert.equal(removed.channels[0].has_secret, false);
    assert.equal(removed.channels[0].secret_fingerprint, null);
    assert.equal(removed.window_seconds, 300);
    const before = await state();
    assert.equal((await put(rule({ threshold: 2 }))).status, 400);
    assert.equal((await put({ ...rule(), extra: 1 })).status, 400);
    assert.equal((await put(rule({ channels: [{ type: 'webhook', url: 'http://192.168.1.1/' }] }))).status, 400);
    assert.equal((await put(rule(), other)).status, 404);
    assert.deepEqual(await state(), before);
  });

  it('takes tags on create and on PUT (a full write: omitted means none), in every view', async () => {
    const r = await createOk(rule({ tags: ['oncall', 'team.api'] }));
    assert.deepEqual(r.tags, ['oncall', 'team.api']);
    assert.deepEqual((await expectBody(200, t.api('GET', `${BASE}/${r.uuid}`, { key: owner.api_key }))).tags, ['oncall', 'team.api']);
    const listed = await expectBody(200, t.api('GET', BASE, { key: owner.api_key }));
    assert.deepEqual(listed.items.find((x: any) => x.uuid === r.uuid).tags, ['oncall', 'team.api']);
    const put = (body: unknown) => expectBody(200, t.api('PUT', `${BASE}/${r.uuid}`, { key: owner.api_key, body }));
    assert.deepEqual((await put(rule({ tags: SIXTEEN_TAGS }))).tags, SIXTEEN_TAGS);
    assert.deepEqual((await put(rule())).tags, [], 'PUT is a full write: tags omitted are none');
  });

  it('reads a webhook secret stored before fingerprints existed as fingerprint null, kept so until the secret is sent again', async () => {
    const r = await createOk(rule({ channels: [{ type: 'webhook', url: 'https://hooks.example.com/old', secret: SECRET }] }));
    // As migration 012's rows were written: the sealed secret alone.
    await sql(`UPDATE alert_rules SET channels = jsonb_build_array((channels->0) - 'secret_fingerprint') WHERE uuid = $1`, [r.uuid]);
    const old = await expectBody(200, t.api('GET', `${BASE}/${r.uuid}`, { key: owner.api_key }));
    assert.deepEqual(old.channels, [{ type: 'webhook', url: 'https://hooks.example.com/old', has_secret: true, secret_fingerprint: null }]);
    const put = (body: unknown) => expectBody(200, t.api('PUT', `${BASE}/${r.uuid}`, { key: owner.api_key, body }));
    assert.equal((await put(rule({ channels: [{ type: 'webhook', url: 'https://hooks.example.com/old' }] }))).channels[0].secret_fingerprint, null);
    const resent = await put(rule({ channels: [{ type: 'webhook', url: 'https://hooks.example.com/old', secret: SECRET }] }));
    await assertFingerprintOf(resent.channels[0].secret_fingerprint, SECRET, 'sent again');
  });

  it('refuses bad tags with 400 invalid_request on create and PUT, changing nothing', async () => {
    const r = await createOk(rule({ tags: ['keep'] }));
    const before = await state();
    for (const [what, tags] of BAD_TAGS) {
      const created = await create(rule({ tags }));
      assert.equal(created.status, 400, what);
      assert.equal(created.body.code, 'invalid_request', what);
      assert.match(created.body.detail.field, /^tags(\.\d+)?$/, what);
      const replaced = await t.api('PUT', `${BASE}/${r.uuid}`, { key: owner.api_key, body: rule({ tags }) });
      assert.equal(replaced.status, 400, what);
      assert.equal(replaced.body.code, 'invalid_request', what);
    }
    assert.deepEqual(await state(), before);
  });

  it('answers 404 for another account’s rule on every operation, and 400 for a malformed uuid', async () => {
    const r = await createOk(rule());
    const before = await state();
    for (const [method, path, body] of [
      ['GET', `${BASE}/${r.uuid}`],
      ['PUT', `${BASE}/${r.uuid}`, rule()],
      ['DELETE', `${BASE}/${r.uuid}`],
      ['POST', `${BASE}/${r.uuid}/test`],
      ['GET', `${BASE}/${r.uuid}/events`],
    ] as const) {
      const res = await t.api(method, path, { key: other.api_key, body });
      assert.equal(res.status, 404, `${method} ${path}: ${res.text}`);
      assert.equal(res.body.code, 'not_found');
      const missing = await t.api(method, path.replace(r.uuid, '00000000-0000-4000-8000-000000000000'), { key: owner.api_key, body });
      assert.equal(missing.status, 404, `${method} missing`);
      const malformed = await t.api(method, path.replace(r.uuid, '12'), { key: owner.api_key, body });
      assert.equal(malformed.status, 400, `${method} malformed`);
      assert.equal((await t.api(method, path, { key: null, body })).status, 401);
    }
    assert.deepEqual(await state(), before);
  });

  it('needs traffic:read to read and endpoints:write to write, in the active account', async () => {
    const boss = await t.createUser();
    const reader = await t.createUser();
    const writer = await t.createUser();
    const asReader = await orgWithMember(t, boss, reader, ['traffic:read']);
    const org = asReader.id;
    await expectBody(201, t.api('POST', `/v1/organizations/${org}/members`, { key: boss.api_key, body: { email: writer.email, permissions: ['endpoints:write'] } }));
    const headers = { 'x-account-id': String(org) };
    const r = await expectBody(201, create(rule(), boss, headers));
    assert.equal((await t.api('GET', BASE, { key: reader.api_key, headers })).status, 200);
    assert.equal((await t.api('GET', `${BASE}/${r.uuid}/events`, { key: reader.api_key, headers })).status, 200);
    const denied = await create(rule(), reader, headers);
    assert.equal(denied.status, 403);
    assert.equal(denied.body.code, 'permission_denied');
    assert.equal((await t.api('POST', `${BASE}/${r.uuid}/test`, { key: reader.api_key, headers })).status, 403);
    assert.equal((await t.api('DELETE', `${BASE}/${r.uuid}`, { key: reader.api_key, headers })).status, 403);
    assert.equal((await t.api('GET', BASE, { key: writer.api_key, headers })).status, 403);
    assert.equal((await create(rule(), writer, headers)).status, 201);
    // Outside the organization the rule does not exist.
    assert.equal((await t.api('GET', `${BASE}/${r.uuid}`, { key: reader.api_key })).status, 404);
  });

  it('test: records a test event, sends it once, leaves the status; without SMTP an e-mail channel is not notified', async () => {
    const r = await createOk(rule({ channels: [{ type: 'email', to: 'ops@example.com' }] }));
    const event = await expectBody(200, t.api('POST', `${BASE}/${r.uuid}/test`, { key: owner.api_key }));
    assert.deepEqual(Object.keys(event).sort(), ['id', 'notification_err', 'notified', 'rule_id', 'status', 'triggered_at', 'value']);
    assert.equal(event.status, 'test');
    assert.equal(event.rule_id, r.id);
    assert.equal(event.value, 0);
    assert.equal(event.notified, false);
    assert.match(event.notification_err, /no SMTP server configured/);
    const after = await expectBody(200, t.api('GET', `${BASE}/${r.uuid}`, { key: owner.api_key }));
    assert.equal(after.status, 'unknown');
    // Again within the cooldown: 429 with Retry-After, nothing recorded or sent (a test sends to every channel, so
    // unthrottled it would let a user make the platform flood the addresses of their choosing).
    const again = await t.api('POST', `${BASE}/${r.uuid}/test`, { key: owner.api_key });
    assert.equal(again.status, 429, again.text);
    assert.equal(again.body.code, 'alert_test_too_soon');
    const retryAfter = Number(again.headers.get('retry-after'));
    assert.ok(retryAfter >= 1 && retryAfter <= 30, `Retry-After ${again.headers.get('retry-after')}`);
    const { items } = await expectBody(200, t.api('GET', `${BASE}/${r.uuid}/events`, { key: owner.api_key }));
    assert.deepEqual(items, [event]);
    // With an evaluated rule, the test carries its last value and leaves the status.
    const evaluated = await createOk(rule({ channels: [{ type: 'email', to: 'ops@example.com' }] }));
    await sql(`UPDATE alert_rules SET status = 'ok', last_value = 0.02 WHERE uuid = $1`, [evaluated.uuid]);
    const second = await expectBody(200, t.api('POST', `${BASE}/${evaluated.uuid}/test`, { key: owner.api_key, body: {} }));
    assert.equal(second.value, 0.02);
    assert.equal((await expectBody(200, t.api('GET', `${BASE}/${evaluated.uuid}`, { key: owner.api_key }))).status, 'ok');
  });

  it('events: newest first; limit 0 or omitted is the cap (100), above it capped, anything but an integer 400', async () => {
    const r = await createOk(rule());
    await sql(
      `INSERT INTO alert_events (rule_id, status, value, triggered_at, notified, notification_err)
       SELECT $1, CASE WHEN g % 2 = 0 THEN 'ok' ELSE 'firing' END, g, now() - make_interval(mins => 200 - g), true, NULL FROM generate_series(1, 105) g`,
      [r.id],
    );
    const events = (q: string) => t.api('GET', `${BASE}/${r.uuid}/events${q}`, { key: owner.api_key });
    const omitted = await expectBody(200, events(''));
    assert.equal(omitted.items.length, 100);
    assert.equal(omitted.items[0].value, 105, 'newest first');
    assert.equal(omitted.items[99].value, 6);
    assert.deepEqual(omitted.items[0], {
      id: omitted.items[0].id,
      rule_id: r.id,
      status: 'firing',
      value: 105,
      triggered_at: omitted.items[0].triggered_at,
      notified: true,
      notification_err: null,
    });
    assert.equal((await expectBody(200, events('?limit=0'))).items.length, 100);
    assert.equal((await expectBody(200, events('?limit='))).items.length, 100);
    assert.deepEqual((await expectBody(200, events('?limit=3'))).items.map((e: any) => e.value), [105, 104, 103]);
    assert.equal((await expectBody(200, events('?limit=1'))).items.length, 1);
    assert.equal((await expectBody(200, events('?limit=100'))).items.length, 100);
    assert.equal((await expectBody(200, events('?limit=101'))).items.length, 100);
    assert.equal((await expectBody(200, events('?limit=99999999999999999999'))).items.length, 100);
    for (const bad of ['-1', 'abc', '1.5', '1e3', ' 5']) {
      const res = await events(`?limit=${encodeURIComponent(bad)}`);
      assert.equal(res.status, 400, `limit=${bad}: ${res.text}`);
      assert.equal(res.body.code, 'invalid_query');
    }
    const none = await createOk(rule());
    assert.deepEqual(await expectBody(200, t.api('GET', `${BASE}/${none.uuid}/events`, { key: owner.api_key })), { items: [] });
  });

  it('deletes a rule with its events (204), then 404', async () => {
    const r = await createOk(rule());
    await expectBody(200, t.api('POST', `${BASE}/${r.uuid}/test`, { key: owner.api_key }));
    const res = await t.api('DELETE', `${BASE}/${r.uuid}`, { key: owner.api_key });
    assert.equal(res.status, 204);
    assert.equal((await t.api('GET', `${BASE}/${r.uuid}`, { key: owner.api_key })).status, 404);
    assert.equal((await t.api('DELETE', `${BASE}/${r.uuid}`, { key: owner.api_key })).status, 404);
    assert.deepEqual(await sql('SELECT id FROM alert_events WHERE rule_id = $1', [r.id]), []);
  });

  it('a rule on an endpoint goes when the endpoint is deleted', async () => {
    const endpoint = await createEndpoint(t, owner);
    const r = await createOk(rule({ endpoint_id: endpoint.uuid }));
    assert.equal((await t.api('DELETE', `/v1/endpoints/${endpoint.uuid}`, { key: owner.api_key })).status < 300, true);
    assert.equal((await t.api('GET', `${BASE}/${r.uuid}`, { key: owner.api_key })).status, 404);
  });

  it('creates endpoints and alert rules of one user at once without a failure (PostgreSQL once deadlocked on them)', async () => {
    // An endpoint create locks the user, then key-shares the account; an alert-rule create locks the account, then
    // key-shares the user. Both quota locks are FOR NO KEY UPDATE, so neither waits on the other's foreign keys.
    const user = await t.createUser('business');
    const answers = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        i % 2 === 0 ? t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} }) : create(rule({ name: `together ${i}` }), user),
      ),
    );
    assert.deepEqual(answers.map((a) => a.status), answers.map(() => 201), answers.filter((a) => a.status !== 201).map((a) => a.text).join('\n'));
  });

  it('describes every alert operation in the OpenAPI document', async () => {
    const doc = (await t.api('GET', '/v1/openapi.json', { key: null })).body;
    for (const [path, method] of [
      ['/v1/traffic/alerts', 'post'],
      ['/v1/traffic/alerts', 'get'],
      ['/v1/traffic/alerts/{uuid}', 'get'],
      ['/v1/traffic/alerts/{uuid}', 'put'],
      ['/v1/traffic/alerts/{uuid}', 'delete'],
      ['/v1/traffic/alerts/{uuid}/test', 'post'],
      ['/v1/traffic/alerts/{uuid}/events', 'get'],
    ]) {
      const op = doc.paths[path]?.[method];
      assert.ok(op?.summary, `${method} ${path}`);
      assert.ok(op.tags.includes('traffic-alerts'));
    }
    const post = doc.paths['/v1/traffic/alerts'].post.requestBody.content['application/json'].schema;
    assert.equal(post.additionalProperties, false);
    assert.ok(post.properties.channels);
    const channel = doc.paths['/v1/traffic/alerts/{uuid}'].get.responses['200'].content['application/json'].schema.properties.channels.items;
    assert.ok(channel.properties.secret_fingerprint, 'channels show the secret’s fingerprint');
    for (const op of [doc.paths['/v1/traffic/alerts'].post, doc.paths['/v1/traffic/alerts/{uuid}'].put]) {
      const tags = op.requestBody.content['application/json'].schema.properties.tags;
      assert.deepEqual([tags.type, tags.maxItems, tags.uniqueItems, tags.items.pattern], ['array', 16, true, '^[a-z0-9][a-z0-9._-]{0,31}$']);
    }
    const view = doc.paths['/v1/traffic/alerts/{uuid}'].get.responses['200'].content['application/json'].schema;
    assert.ok(view.required.includes('tags') && view.properties.tags.type === 'array');
  });
});
