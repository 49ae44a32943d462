// RBAC roles, memberships and the overview over real HTTP (docs/api.md "RBAC"): every operation's cases,
// canonical permissions, each refusal leaving the store and the feed untouched, plans and permissions, and the edge's view.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import bcrypt from 'bcrypt';
import type { TestNode } from '../helpers/node.ts';
import { createEndpoint, edgeEndpoint, expectBody, feedVersion, nodeWithOwner, orgWithMember, storeRows, type User } from '../helpers/endpoint-api.ts';

const PASSWORD_HASH = bcrypt.hashSync('client-password', 10);

describe('RBAC roles and memberships API', () => {
  let t: TestNode;
  let owner: User;
  // business: the rbac entitlement, and room for the many endpoints these tests create.
  before(async () => ({ t, owner } = await nodeWithOwner()));
  after(() => t.close());

  const sql = storeRows(() => t);
  const newEndpoint = async (user: User = owner) => (await createEndpoint(t, user)).uuid;
  const rbac = (id: string) => `/v1/endpoints/${id}/rbac`;
  const roles = (id: string) => `${rbac(id)}/roles`;
  const memberships = (id: string) => `${rbac(id)}/memberships`;
  const call = (method: string, path: string, body?: unknown, user: Pick<User, 'api_key'> = owner, headers?: Record<string, string>) =>
    t.api(method, path, { key: user.api_key, body, headers });
  const createRole = (id: string, body: unknown, user: Pick<User, 'api_key'> = owner) => expectBody(201, call('POST', roles(id), body, user));
  const listRoles = async (id: string) => (await expectBody(200, call('GET', roles(id)))) as any[];
  const listMemberships = async (id: string) => (await expectBody(200, call('GET', memberships(id)))) as any[];
  /** A client written straight to the store: the clients API is another module's; these tests need only rows. */
  const addClient = async (id: string, identifier: string, extra: { username?: string; status?: string } = {}): Promise<number> => {
    const rows = await sql<{ id: number }>(
      `INSERT INTO rbac_clients (endpoint_id, identifier, username, password_hash, status)
       SELECT id, $2, $3::text, CASE WHEN $3::text IS NULL THEN NULL ELSE $4 END, $5 FROM endpoints WHERE uuid = $1 RETURNING id`,
      [id, identifier, extra.username ?? null, PASSWORD_HASH, extra.status ?? 'active'],
    );
    return rows[0].id;
  };
  /** What a refused write must not have touched: roles and memberships as the API shows them, and the feed version. */
  const state = async (id: string) => ({
    roles: await listRoles(id),
    memberships: await listMemberships(id),
    feed: await feedVersion(t),
  });
  const EMPTY_PERMISSIONS = { allowed_methods: [], denied_methods: [], allowed_paths: [], denied_paths: [], rate_limit_rps: 0, headers: {}, metadata: {} };

  // ---- overview and listing -------------------------------------------------------------------------------------

  it('answers an empty overview for a new endpoint, and the edge has no rbac section', async () => {
    const id = await newEndpoint();
    const body = await expectBody(200, call('GET', rbac(id)));
    const endpointId = (await sql('SELECT id FROM endpoints WHERE uuid = $1', [id]))[0].id;
    assert.deepEqual(body, { endpoint_id: endpointId, clients: [], roles: [], memberships: [] });
    assert.deepEqual(await listRoles(id), []);
    assert.deepEqual(await listMemberships(id), []);
    assert.equal((await edgeEndpoint(t, id)).rbac ?? null, null);
  });

  it('shows clients, roles and memberships in the overview, clients in the RBAC client shape', async () => {
    const id = await newEndpoint();
    const role = await createRole(id, { name: 'reader', is_default: true });
    const clientId = await addClient(id, 'alice@example.com', { username: 'alice' });
    const list = await expectBody(200, call('POST', memberships(id), { client_id: clientId, role_id: role.id }));
    const body = await expectBody(200, call('GET', rbac(id)));
    assert.deepEqual(body.roles, [role]);
    assert.deepEqual(body.memberships, list);
    assert.equal(body.clients.length, 1);
    const client = body.clients[0];
    assert.deepEqual(Object.keys(client).sort(), [
      'created_at',
      'display_name',
      'email',
      'has_oauth',
      'has_password',
      'has_token',
      'id',
      'identifier',
      'identities',
      'metadata',
      'registration_source',
      'status',
      'updated_at',
      'username',
    ]);
    assert.equal(client.id, clientId);
    assert.equal(client.identifier, 'alice@example.com');
    assert.equal(client.has_password, true);
    assert.equal(client.has_token, false);
    assert.equal(client.has_oauth, false);
    assert.equal(client.status, 'active');
    assert.equal(client.registration_source, 'admin');
    assert.ok(!JSON.stringify(body).includes(PASSWORD_HASH), 'no password hash leaves the API');
  });

  // ---- roles: create ------------------------------------------------------------------------------------------

  it('creates a role (201, Location) in canonical form, lists it, and the edge receives it without metadata', async () => {
    const id = await newEndpoint();
    const res = await call('POST', roles(id), {
      name: 'Admin',
      description: 'Everything but the billing pages',
      priority: 100,
      is_default: false,
      permissions: {
        allowed_methods: ['GET', 'POST', 'GET', '*'],
        denied_methods: ['DELETE'],
        allowed_paths: ['/api/*', '/caf%c3%a9', '/ü/x', '/%61dmin', '/files/**/report.pdf'],
        denied_paths: ['/billing'],
        rate_limit_rps: 20,
        headers: { 'X-Role': 'admin', 'x-team': 'ops team' },
        metadata: { owner: 'ops' },
      },
    });
    assert.equal(res.status, 201, res.text);
    const role = res.body;
    assert.equal(res.headers.get('location'), `/v1/endpoints/${id}/rbac/roles/${role.id}`);
    assert.deepEqual(Object.keys(role).sort(), ['created_at', 'description', 'id', 'is_default', 'name', 'permissions', 'priority', 'updated_at']);
    assert.equal(role.name, 'Admin');
    assert.equal(role.priority, 100);
    assert.deepEqual(role.permissions, {
      allowed_methods: ['GET', 'POST', '*'],
      denied_methods: ['DELETE'],
      allowed_paths: ['/api/*', '/caf%C3%A9', '/%C3%BC/x', '/admin', '/files/**/report.pdf'],
      denied_paths: ['/billing'],
      rate_limit_rps: 20,
      headers: { 'x-role': 'admin', 'x-team': 'ops team' },
      metadata: { owner: 'ops' },
    });
    assert.deepEqual(await listRoles(id), [role]);

    const edge = await edgeEndpoint(t, id);
    assert.ok(edge.rbac);
    const { metadata: _metadata, ...edgePermissions } = role.permissions;
    assert.deepEqual(edge.rbac.roles, [{ id: role.id, name: 'Admin', priority: 100, permissions: edgePermissions }]);
  });

  it('gives omitted fields their defaults and omits an empty description', async () => {
    const id = await newEndpoint();
    const role = await createRole(id, { name: 'plain' });
    assert.equal(role.description, undefined);
    assert.equal(role.priority, 0);
    assert.equal(role.is_default, false);
    assert.deepEqual(role.permissions, EMPTY_PERMISSIONS);
  });

  it('answers 409 already_exists for a second role of the same name, and changes nothing', async () => {
    const id = await newEndpoint();
    await createRole(id, { name: 'dup' });
    const before = await state(id);
    const res = await call('POST', roles(id), { name: 'dup', priority: 3 });
    assert.equal(res.status, 409, res.text);
    assert.equal(res.body.code, 'already_exists');
    assert.deepEqual(await state(id), before);
    // Another endpoint may have a role of that name.
    await createRole(await newEndpoint(), { name: 'dup' });
  });

  it('refuses bad role bodies with a 400 naming the field, and changes nothing', async () => {
    const id = await newEndpoint();
    await createRole(id, { name: 'existing' });
    const before = await state(id);
    const cases: [string, unknown, string, string?][] = [
      ['unknown field', { name: 'x', colour: 'red' }, 'unknown_field'],
      ['unknown permissions field', { name: 'x', permissions: { allowed_verbs: ['GET'] } }, 'unknown_field'],
      ['missing name', { priority: 1 }, 'invalid_request'],
      ['empty name', { name: '' }, 'invalid_request'],
      ['blank name', { name: '   ' }, 'invalid_request', 'name'],
      ['long name', { name: 'n'.repeat(101) }, 'invalid_request'],
      ['control character in name', { name: 'a\nb' }, 'invalid_request', 'name'],
      ['long description', { name: 'x', description: 'd'.repeat(1001) }, 'invalid_request'],
      ['fractional priority', { name: 'x', priority: 1.5 }, 'invalid_request'],
      ['priority out of range', { name: 'x', priority: 1_000_001 }, 'invalid_request'],
      ['string is_default', { name: 'x', is_default: 'yes' }, 'invalid_request'],
      ['lower-case method', { name: 'x', permissions: { allowed_methods: ['get'] } }, 'invalid_request', 'permissions.allowed_methods.0'],
      ['mixed-case method', { name: 'x', permissions: { denied_methods: ['Post'] } }, 'invalid_request', 'permissions.denied_methods.0'],
      ['not a method token', { name: 'x', permissions: { allowed_methods: ['GET POST'] } }, 'invalid_request', 'permissions.allowed_methods.0'],
      ['any method denied', { name: 'x', permissions: { denied_methods: ['*'] } }, 'invalid_request', 'permissions.denied_methods.0'],
      ['relative path', { name: 'x', permissions: { allowed_paths: ['api/*'] } }, 'invalid_request', 'permissions.allowed_paths.0'],
      ['dot segment', { name: 'x', permissions: { denied_paths: ['/x/../admin'] } }, 'invalid_request', 'permissions.denied_paths.0'],
      ['empty segment', { name: 'x', permissions: { denied_paths: ['//admin'] } }, 'invalid_request', 'permissions.denied_paths.0'],
      ['space in path', { name: 'x', permissions: { allowed_paths: ['/a b'] } }, 'invalid_request', 'permissions.allowed_paths.0'],
      ['bad escape', { name: 'x', permissions: { allowed_paths: ['/a%zz'] } }, 'invalid_request', 'permissions.allowed_paths.0'],
      ['query in path', { name: 'x', permissions: { allowed_paths: ['/a?b=1'] } }, 'invalid_request', 'permissions.allowed_paths.0'],
      ['negative rate', { name: 'x', permissions: { rate_limit_rps: -1 } }, 'invalid_request'],
      ['fractional rate', { name: 'x', permissions: { rate_limit_rps: 0.5 } }, 'invalid_request'],
      ['edge-owned header', { name: 'x', permissions: { headers: { 'X-Edge-Rbac-Client': 'mallory' } } }, 'invalid_request', 'permissions.headers.X-Edge-Rbac-Client'],
      ['edge-owned header, underscores', { name: 'x', permissions: { headers: { X_Forwarded_For: '1.2.3.4' } } }, 'invalid_request', 'permissions.headers.X_Forwarded_For'],
      ['identity header', { name: 'x', permissions: { headers: { 'x-edge-auth-user': 'root' } } }, 'invalid_request', 'permissions.headers.x-edge-auth-user'],
      ['hop-by-hop header', { name: 'x', permissions: { headers: { Connection: 'close' } } }, 'invalid_request', 'permissions.headers.Connection'],
      ['host header', { name: 'x', permissions: { headers: { Host: 'evil.test' } } }, 'invalid_request', 'permissions.headers.Host'],
      ['content-length header', { name: 'x', permissions: { headers: { 'content-length': '0' } } }, 'invalid_request', 'permissions.headers.content-length'],
      ['cookie header', { name: 'x', permissions: { headers: { Cookie: 'a=b' } } }, 'invalid_request', 'permissions.headers.Cookie'],
      ['authorization header', { name: 'x', permissions: { headers: { authorization: 'Bearer x' } } }, 'invalid_request', 'permissions.headers.authorization'],
      ['not a header name', { name: 'x', permissions: { headers: { 'x role': 'a' } } }, 'invalid_request', 'permissions.headers.x role'],
      ['header twice', { name: 'x', permissions: { headers: { 'X-A': '1', 'x-a': '2' } } }, 'invalid_request', 'permissions.headers.x-a'],
      ['control character in header value', { name: 'x', permissions: { headers: { 'x-a': 'a\r\nx-b: c' } } }, 'invalid_request', 'permissions.headers.x-a'],
      ['non-ASCII header value', { name: 'x', permissions: { headers: { 'x-a': 'Zone €' } } }, 'invalid_request', 'permissions.headers.x-a'],
      ['number header value', { name: 'x', permissions: { headers: { 'x-a': 1 } } }, 'invalid_request'],
      ['number metadata value', { name: 'x', permissions: { metadata: { a: 1 } } }, 'invalid_request'],
      ['methods not an array', { name: 'x', permissions: { allowed_methods: 'GET' } }, 'invalid_request'],
      ['65 paths', { name: 'x', permissions: { allowed_paths: Array.from({ length: 65 }, (_, i) => `/p${i}`) } }, 'invalid_request'],
      [
        '65 headers',
        { name: 'x', permissions: { headers: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`x-h${i}`, 'v'])) } },
        'invalid_request',
        'permissions.headers',
      ],
    ];
    for (const [what, body, code, field] of cases) {
      const res = await call('POST', roles(id), body);
      assert.equal(res.status, 400, `${what}: ${res.text}`);
      assert.equal(res.body.code, code, what);
      if (field !== undefined) assert.equal(res.body.detail.field, field, what);
    }
    const json = await t.api('POST', roles(id), { key: owner.api_key, raw: '{"name": "x",', headers: { 'content-type': 'application/json' } });
    assert.equal(json.status, 400);
    assert.equal(json.body.code, 'invalid_json');
    assert.deepEqual(await state(id), before);
  });

  // ---- roles: update ------------------------------------------------------------------------------------------

  it('updates a role: name required, omitted priority/is_default/description keep theirs, empty or zeroed permissions keep the stored ones', async () => {
    const id = await newEndpoint();
    const permissions = { allowed_methods: ['GET'], allowed_paths: ['/api/*'], rate_limit_rps: 5, headers: { 'x-role': 'r' }, metadata: { k: 'v' } };
    const role = await createRole(id, { name: 'r', description: 'd', priority: 7, is_default: true, permissions });
    const stored = role.permissions;

    const renamed = await expectBody(200, call('PUT', `${roles(id)}/${role.id}`, { name: 'reader' }));
    assert.equal(renamed.name, 'reader');
    assert.equal(renamed.description, 'd');
    assert.equal(renamed.priority, 7);
    assert.equal(renamed.is_default, true);
    assert.deepEqual(renamed.permissions, stored);
    assert.equal(renamed.created_at, role.created_at);

    for (const keep of [{}, EMPTY_PERMISSIONS, { allowed_methods: [], rate_limit_rps: 0, headers: {} }]) {
      const res = await expectBody(200, call('PUT', `${roles(id)}/${role.id}`, { name: 'reader', permissions: keep }));
      assert.deepEqual(res.permissions, stored, JSON.stringify(keep));
    }

    const replaced = await expectBody(
      200,
      call('PUT', `${roles(id)}/${role.id}`, { name: 'reader', priority: -3, is_default: false, description: '', permissions: { denied_paths: ['/admin/*'] } }),
    );
    assert.equal(replaced.priority, -3);
    assert.equal(replaced.is_default, false);
    assert.equal(replaced.description, undefined, 'an empty description is omitted');
    assert.deepEqual(replaced.permissions, { ...EMPTY_PERMISSIONS, denied_paths: ['/admin/*'] }, 'non-empty permissions replace the stored ones whole');
    assert.deepEqual(await listRoles(id), [replaced]);

    const edge = await edgeEndpoint(t, id);
    assert.deepEqual(edge.rbac?.roles.map((r) => [r.name, r.priority, r.permissions.denied_paths]), [['reader', -3, ['/admin/*']]]);
  });

  it('answers 400 for a duplicate name on update (not 409), a missing name, bad input and a bad role_id; 404 for a missing role', async () => {
    const id = await newEndpoint();
    const a = await createRole(id, { name: 'a' });
    await createRole(id, { name: 'b' });
    const other = await newEndpoint();
    const foreign = await createRole(other, { name: 'foreign' });
    const before = await state(id);
    const put = (roleId: string | number, body: unknown) => call('PUT', `${roles(id)}/${roleId}`, body);

    const dup = await put(a.id, { name: 'b' });
    assert.equal(dup.status, 400, dup.text);
    assert.equal(dup.body.code, 'invalid_request');
    assert.equal(dup.body.detail.field, 'name');
    const missing = await put(a.id, { priority: 1 });
    assert.equal(missing.status, 400);
    assert.equal((await put(a.id, { name: 'a', colour: 1 })).body.code, 'unknown_field');
    assert.equal((await put(a.id, { name: 'a', permissions: { allowed_methods: ['get'] } })).status, 400);
    const json = await t.api('PUT', `${roles(id)}/${a.id}`, { key: owner.api_key, raw: '{', headers: { 'content-type': 'application/json' } });
    assert.equal(json.body.code, 'invalid_json');
    for (const bad of ['abc', '0', '-1', '1.5', '99999999999999999999']) {
      const res = await put(bad, { name: 'z' });
      assert.equal(res.status, 400, bad);
      assert.equal(res.body.code, 'invalid_id', bad);
    }
    for (const gone of [foreign.id, a.id + 1000, '9223372036854775807']) {
      const res = await put(gone, { name: 'z' });
      assert.equal(res.status, 404, String(gone));
      assert.equal(res.body.code, 'not_found');
    }
    assert.deepEqual(await state(id), before);
    assert.equal((await listRoles(other))[0].name, 'foreign');
  });

  // ---- roles: delete ------------------------------------------------------------------------------------------

  it('deletes a role (204) with its memberships, then answers 404; the last role gone, the edge has no roles', async () => {
    const id = await newEndpoint();
    const keep = await createRole(id, { name: 'keep' });
    const drop = await createRole(id, { name: 'drop' });
    const client = await addClient(id, 'bob');
    await expectBody(200, call('POST', memberships(id), { client_id: client, role_id: keep.id }));
    await expectBody(200, call('POST', memberships(id), { client_id: client, role_id: drop.id }));

    const res = await call('DELETE', `${roles(id)}/${drop.id}`);
    assert.equal(res.status, 204, res.text);
    assert.equal(res.text, '');
    assert.deepEqual((await listRoles(id)).map((r) => r.id), [keep.id]);
    assert.deepEqual((await listMemberships(id)).map((m) => m.role_id), [keep.id]);
    assert.equal((await call('DELETE', `${roles(id)}/${drop.id}`)).status, 404);
    assert.equal((await call('DELETE', `${roles(id)}/x`)).status, 400);
    assert.deepEqual((await edgeEndpoint(t, id)).rbac?.clients.map((c) => c.role_ids), [[keep.id]]);

    assert.equal((await call('DELETE', `${roles(id)}/${keep.id}`)).status, 204);
    const edge = await edgeEndpoint(t, id);
    assert.deepEqual(edge.rbac?.roles, [], 'no roles: RBAC is off, the client is still listed');
    assert.deepEqual(edge.rbac?.clients.map((c) => c.role_ids), [[]]);
  });

  // ---- memberships --------------------------------------------------------------------------------------------

  it('adds memberships (200 with the full list), 409 for a pair already held, and the edge sees role_ids', async () => {
    const id = await newEndpoint();
    const reader = await createRole(id, { name: 'reader' });
    const writer = await createRole(id, { name: 'writer' });
    const alice = await addClient(id, 'alice');
    const bob = await addClient(id, 'bob');

    const first = await expectBody(200, call('POST', memberships(id), { client_id: alice, role_id: reader.id }));
    assert.equal(first.length, 1);
    assert.deepEqual(Object.keys(first[0]).sort(), ['assigned_by', 'client_id', 'created_at', 'id', 'role_id', 'updated_at']);
    assert.equal(first[0].assigned_by, owner.id);
    const second = await expectBody(200, call('POST', memberships(id), { client_id: alice, role_id: writer.id }));
    const third = await expectBody(200, call('POST', memberships(id), { client_id: bob, role_id: reader.id }));
    assert.deepEqual(second[0], first[0]);
    assert.deepEqual(
      third.map((m: any) => [m.client_id, m.role_id]),
      [
        [alice, reader.id],
        [alice, writer.id],
        [bob, reader.id],
      ],
    );
    assert.deepEqual(await listMemberships(id), third);

    const before = await state(id);
    const dup = await call('POST', memberships(id), { client_id: alice, role_id: reader.id });
    assert.equal(dup.status, 409, dup.text);
    assert.equal(dup.body.code, 'already_exists');
    assert.deepEqual(await state(id), before);

    const edge = await edgeEndpoint(t, id);
    assert.deepEqual(
      edge.rbac?.clients.map((c) => [c.identifier, c.role_ids]),
      [
        ['alice', [reader.id, writer.id].sort((x, y) => x - y)],
        ['bob', [reader.id]],
      ],
    );
  });

  it('answers 404 for a client or role not on this endpoint, 400 for bad pairs, and changes nothing', async () => {
    const id = await newEndpoint();
    const role = await createRole(id, { name: 'r' });
    const client = await addClient(id, 'c');
    const other = await newEndpoint();
    const otherRole = await createRole(other, { name: 'r' });
    const otherClient = await addClient(other, 'c');
    const before = await state(id);

    for (const [body, field] of [
      [{ client_id: otherClient, role_id: role.id }, 'client_id'],
      [{ client_id: client, role_id: otherRole.id }, 'role_id'],
      [{ client_id: client + 100000, role_id: role.id }, 'client_id'],
      [{ client_id: client, role_id: role.id + 100000 }, 'role_id'],
    ] as const) {
      const res = await call('POST', memberships(id), body);
      assert.equal(res.status, 404, JSON.stringify(body));
      assert.equal(res.body.code, 'not_found');
      assert.equal(res.body.detail.field, field);
    }
    for (const method of ['POST', 'DELETE']) {
      for (const [body, code] of [
        [{ client_id: 0, role_id: role.id }, 'invalid_request'],
        [{ client_id: client, role_id: -1 }, 'invalid_request'],
        [{ client_id: client }, 'invalid_request'],
        [{ role_id: role.id }, 'invalid_request'],
        [{}, 'invalid_request'],
        [undefined, 'invalid_request'],
        [{ client_id: String(client), role_id: role.id }, 'invalid_request'],
        [{ client_id: 1.5, role_id: role.id }, 'invalid_request'],
        [{ client_id: 2 ** 60, role_id: role.id }, 'invalid_request'],
        [{ client_id: client, role_id: role.id, assigned_by: 1 }, 'unknown_field'],
      ] as const) {
        const res = await call(method, memberships(id), body);
        assert.equal(res.status, 400, `${method} ${JSON.stringify(body)}: ${res.text}`);
        assert.equal(res.body.code, code, `${method} ${JSON.stringify(body)}`);
      }
      const json = await t.api(method, memberships(id), { key: owner.api_key, raw: '{"client_id": 1', headers: { 'content-type': 'application/json' } });
      assert.equal(json.status, 400);
      assert.equal(json.body.code, 'invalid_json');
    }
    assert.deepEqual(await state(id), before);
  });

  it('removes a membership by the pair in the body (200 with the full list); a missing pair is 200 with the list unchanged', async () => {
    const id = await newEndpoint();
    const a = await createRole(id, { name: 'a' });
    const b = await createRole(id, { name: 'b' });
    const client = await addClient(id, 'carol', { username: 'carol' });
    await expectBody(200, call('POST', memberships(id), { client_id: client, role_id: a.id }));
    const both = await expectBody(200, call('POST', memberships(id), { client_id: client, role_id: b.id }));

    const left = await expectBody(200, call('DELETE', memberships(id), { client_id: client, role_id: a.id }));
    assert.deepEqual(left, [both[1]]);
    const before = await state(id);
    const again = await expectBody(200, call('DELETE', memberships(id), { client_id: client, role_id: a.id }));
    assert.deepEqual(again, left);
    const unknown = await expectBody(200, call('DELETE', memberships(id), { client_id: client + 100000, role_id: 99999999 }));
    assert.deepEqual(unknown, left);
    assert.deepEqual(await state(id), before, 'a missing pair changes nothing, not even the feed');

    const none = await expectBody(200, call('DELETE', memberships(id), { client_id: client, role_id: b.id }));
    assert.deepEqual(none, []);
    const edge = await edgeEndpoint(t, id);
    assert.deepEqual(edge.rbac?.clients.map((c) => [c.id, c.role_ids]), [[client, []]], 'the client stays, with no grants');
  });

  // ---- access -------------------------------------------------------------------------------------------------

  it('lets a free plan read (overview, roles, memberships) but answers 403 entitlement_required to every write', async () => {
    const free = await t.createUser('free');
    const id = await newEndpoint(free);
    await expectBody(200, call('GET', rbac(id), undefined, free));
    await expectBody(200, call('GET', roles(id), undefined, free));
    await expectBody(200, call('GET', memberships(id), undefined, free));
    for (const [method, path, body] of [
      ['POST', roles(id), { name: 'x' }],
      ['PUT', `${roles(id)}/1`, { name: 'x' }],
      ['DELETE', `${roles(id)}/1`, undefined],
      ['POST', memberships(id), { client_id: 1, role_id: 1 }],
      ['DELETE', memberships(id), { client_id: 1, role_id: 1 }],
    ] as const) {
      const res = await call(method, path, body, free);
      assert.equal(res.status, 403, `${method} ${path}: ${res.text}`);
      assert.equal(res.body.code, 'entitlement_required');
      assert.equal(res.body.detail.feature, 'rbac');
    }
  });

  it('answers 404 on another account’s endpoint, reads and writes alike, and 401 without a key', async () => {
    const id = await newEndpoint();
    const role = await createRole(id, { name: 'mine' });
    const client = await addClient(id, 'mine');
    const stranger = await t.createUser('business');
    const before = await state(id);
    for (const [method, path, body] of [
      ['GET', rbac(id), undefined],
      ['GET', roles(id), undefined],
      ['GET', memberships(id), undefined],
      ['POST', roles(id), { name: 'x' }],
      ['PUT', `${roles(id)}/${role.id}`, { name: 'x' }],
      ['DELETE', `${roles(id)}/${role.id}`, undefined],
      ['POST', memberships(id), { client_id: client, role_id: role.id }],
      ['DELETE', memberships(id), { client_id: client, role_id: role.id }],
    ] as const) {
      const res = await call(method, path, body, stranger);
      assert.equal(res.status, 404, `${method} ${path}: ${res.text}`);
      assert.equal((await t.api(method, path, { key: null, body })).status, 401, `${method} ${path} without a key`);
    }
    assert.equal((await call('GET', rbac('not-a-uuid'))).status, 400);
    assert.deepEqual(await state(id), before);
  });

  it('checks the permissions docs/api.md names: reads with endpoints:read; create and add endpoints:write; update endpoints:update; deletes endpoints:delete', async () => {
    const orgOwner = await t.createUser('business');
    const member = await t.createUser('business');
    const org = await orgWithMember(t, orgOwner, member, ['endpoints:read', 'endpoints:write']);
    const ep = await expectBody(201, t.api('POST', '/v1/endpoints', { key: orgOwner.api_key, body: {}, headers: org.headers }));
    const id = ep.uuid as string;
    const as = (method: string, path: string, body?: unknown) => call(method, path, body, member, org.headers);
    await expectBody(200, as('GET', rbac(id)));
    const role = await expectBody(201, as('POST', roles(id), { name: 'by-member' }));
    const client = await addClient(id, 'm');
    await expectBody(200, as('POST', memberships(id), { client_id: client, role_id: role.id }));
    for (const [method, path, body, permission] of [
      ['PUT', `${roles(id)}/${role.id}`, { name: 'x' }, 'endpoints:update'],
      ['DELETE', `${roles(id)}/${role.id}`, undefined, 'endpoints:delete'],
      ['DELETE', memberships(id), { client_id: client, role_id: role.id }, 'endpoints:delete'],
    ] as const) {
      const res = await as(method, path, body);
      assert.equal(res.status, 403, `${method} ${path}: ${res.text}`);
      assert.equal(res.body.code, 'permission_denied');
      assert.equal(res.body.detail.permission, permission);
    }
    assert.equal((await expectBody(200, as('GET', memberships(id)))).length, 1, 'refusals changed nothing');
  });

  it('keeps a paused endpoint’s RBAC read-only (409 quota_paused) and readable', async () => {
    const id = await newEndpoint();
    const role = await createRole(id, { name: 'r' });
    const client = await addClient(id, 'p');
    await expectBody(200, call('POST', memberships(id), { client_id: client, role_id: role.id }));
    assert.equal((await t.api('POST', `/v1/admin/endpoints/${id}/pause`)).status, 200);
    const before = await state(id);
    for (const [method, path, body] of [
      ['POST', roles(id), { name: 'x' }],
      ['PUT', `${roles(id)}/${role.id}`, { name: 'x' }],
      ['DELETE', `${roles(id)}/${role.id}`, undefined],
      ['POST', memberships(id), { client_id: client, role_id: role.id }],
      ['DELETE', memberships(id), { client_id: client, role_id: role.id }],
    ] as const) {
      const res = await call(method, path, body);
      assert.equal(res.status, 409, `${method} ${path}: ${res.text}`);
      assert.equal(res.body.code, 'quota_paused');
    }
    assert.deepEqual(await state(id), before);
    await expectBody(200, call('GET', rbac(id)));
    assert.equal((await t.api('POST', `/v1/admin/endpoints/${id}/unpause`)).status, 200);
    await expectBody(200, call('DELETE', memberships(id), { client_id: client, role_id: role.id }));
  });

  it('lets an admin manage roles on an entitled account’s endpoint, not on one whose plan lacks rbac', async () => {
    const admin = { api_key: t.adminKey };
    const id = await newEndpoint();
    const role = await createRole(id, { name: 'by-admin' }, admin);
    assert.equal((await listRoles(id))[0].id, role.id);
    const free = await t.createUser('free');
    const freeId = await newEndpoint(free);
    const res = await call('POST', roles(freeId), { name: 'x' }, admin);
    assert.equal(res.status, 403);
    assert.equal(res.body.code, 'entitlement_required');
  });

  // ---- OpenAPI ------------------------------------------------------------------------------------------------

  it('describes every operation in /v1/openapi.json', async () => {
    const doc = (await t.api('GET', '/v1/openapi.json', { key: null })).body;
    const overview = doc.paths['/v1/endpoints/{id}/rbac'];
    const roleList = doc.paths['/v1/endpoints/{id}/rbac/roles'];
    const role = doc.paths['/v1/endpoints/{id}/rbac/roles/{role_id}'];
    const membership = doc.paths['/v1/endpoints/{id}/rbac/memberships'];
    const ops = [overview.get, roleList.get, roleList.post, role.put, role.delete, membership.get, membership.post, membership.delete];
    for (const op of ops) {
      assert.ok(op, 'operation present');
      assert.ok(op.summary, 'summary');
      assert.deepEqual(op.tags, ['rbac']);
      assert.ok(op.responses['403'] && op.responses['404']);
    }
    assert.ok(roleList.post.responses['201'] && roleList.post.responses['409']);
    assert.ok(membership.post.responses['200'] && membership.post.responses['409']);
    assert.ok(membership.delete.requestBody, 'DELETE memberships documents its body');
    assert.deepEqual(membership.post.requestBody.content['application/json'].schema.required.sort(), ['client_id', 'role_id']);
    assert.deepEqual(roleList.post.requestBody.content['application/json'].schema.required, ['name']);
  });
});
