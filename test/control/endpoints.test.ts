// The endpoint lifecycle over real HTTP: create (generated and custom names, domains, `@`, quotas), list, get,
// delete, the admin ephemeral path, and the subdomain rules underneath. Rejected writes are shown to change nothing.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalSubdomain, generateSubdomain, hostnameFor } from '../../src/control/subdomains.ts';
import { WORDS } from '../../src/control/words.ts';
import { escapeLike } from '../../src/store/endpoints.ts';
import { feedVersion, orgWithMember as orgWithMemberOf, storeRows, type User } from '../helpers/endpoint-api.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { BAD_TAGS, SIXTEEN_TAGS } from '../helpers/tags.ts';

const GENERATED = /^[a-z]+-[a-z]+-[a-z]+$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('subdomain rules', () => {
  it('keeps a word list of at least 2,000 distinct lowercase words', () => {
    assert.ok(WORDS.length >= 2000, `only ${WORDS.length} words`);
    assert.equal(new Set(WORDS).size, WORDS.length);
    for (const w of WORDS) assert.match(w, /^[a-z]{2,12}$/);
  });

  it('generates word-word-word from the list', () => {
    for (let i = 0; i < 50; i++) {
      const name = generateSubdomain();
      assert.match(name, GENERATED);
      for (const part of name.split('-')) assert.ok(WORDS.includes(part), part);
    }
    assert.equal(generateSubdomain(() => 0), `${WORDS[0]}-${WORDS[0]}-${WORDS[0]}`);
  });

  it('canonicalises to lowercase and accepts DNS labels', () => {
    for (const [input, out] of [
      ['MyApp', 'myapp'],
      ['a', 'a'],
      ['0', '0'],
      ['api-v2', 'api-v2'],
      ['x'.repeat(63), 'x'.repeat(63)],
      ['@', '@'],
    ]) {
      assert.deepEqual(canonicalSubdomain(input), { ok: true, subdomain: out }, input);
    }
  });

  it('rejects anything that is not one DNS label', () => {
    for (const input of ['', '-a', 'a-', 'a_b', 'a.b', 'x'.repeat(64), 'café', 'a b', '@@', 'xn--abc', 'ab--cd', '*', 'a%']) {
      assert.equal(canonicalSubdomain(input).ok, false, input);
    }
  });

  it('puts `@` at the bare domain', () => {
    assert.equal(hostnameFor('@', 'Example.COM'), 'example.com');
    assert.equal(hostnameFor('app', 'example.com'), 'app.example.com');
  });

  it('escapes LIKE wildcards and backslashes', () => {
    assert.equal(escapeLike('50%_a\\b'), '50\\%\\_a\\\\b');
  });
});

describe('endpoint lifecycle', () => {
  let t: TestNode;
  const base = 'edge.localhost';

  before(async () => {
    t = await startTestNode();
  });
  after(() => t.close());

  // ---- helpers --------------------------------------------------------------------------------------------------

  const sql = storeRows(() => t);
  const endpointCount = async (userId: number) => (await sql<{ n: number }>('SELECT count(*)::int AS n FROM endpoints WHERE user_id = $1', [userId]))[0].n;
  const feedEntry = async (uuid: string) => (await sql<{ data: any }>("SELECT data FROM feed_entries WHERE topic = 'endpoint' AND key = $1", [uuid]))[0]?.data ?? null;

  /** A domain the user's account has claimed; verified unless told otherwise (the domain API is another module). */
  let domainSeq = 0;
  async function addDomain(user: Pick<User, 'id' | 'account_id'>, opts: { verified?: boolean; accountId?: number } = {}) {
    const name = `d${++domainSeq}-${Date.now().toString(36)}.example.test`;
    const [row] = await sql<{ id: number }>(
      `INSERT INTO domains (account_id, user_id, name, verification_token, verified_at) VALUES ($1, $2, $3, 'tok', ${opts.verified === false ? 'NULL' : 'now()'}) RETURNING id`,
      [opts.accountId ?? user.account_id, user.id, name],
    );
    return { id: row.id, name };
  }

  const create = (key: string, body: unknown = {}, headers?: Record<string, string>) => t.api('POST', '/v1/endpoints', { key, body, headers });
  const ephemeral = async (userId: number) => {
    const res = await t.api('POST', '/v1/admin/endpoints/ephemeral', { body: { user_id: userId } });
    assert.equal(res.status, 201, res.text);
    return res.body;
  };

  /** An organization owned by `owner` with `member` holding `permissions`; returns the header selecting it. */
  const orgWithMember = (owner: User, member: User, permissions: string[]) => orgWithMemberOf(t, owner, member, permissions);

  // ---- create -----------------------------------------------------------------------------------------------------

  describe('POST /v1/endpoints', () => {
    it('creates an endpoint with a generated word-word-word name on the platform domain', async () => {
      const user = await t.createUser('free');
      const res = await create(user.api_key);
      assert.equal(res.status, 201, res.text);
      const e = res.body;
      assert.deepEqual(Object.keys(e).sort(), [
        'certificate_id', 'created_at', 'domain_id', 'ephemeral', 'hostname', 'id', 'is_custom', 'mtls_mode', 'protocol', 'public_url', 'status', 'subdomain', 'tags', 'updated_at', 'uuid',
      ]);
      assert.deepEqual(e.tags, [], 'no tags: an empty list, never absent');
      assert.equal(e.certificate_id, null, 'a new endpoint serves the platform certificate');
      assert.match(e.uuid, UUID);
      assert.match(e.subdomain, GENERATED);
      assert.equal(e.hostname, `${e.subdomain}.${base}`);
      assert.equal(e.public_url, e.hostname);
      assert.equal(e.protocol, 'unified');
      assert.equal(e.is_custom, false);
      assert.equal(e.domain_id, null);
      assert.equal(e.status, 'active');
      assert.equal(e.mtls_mode, 'disabled');
      assert.equal(e.ephemeral, false);
      assert.ok(!Number.isNaN(Date.parse(e.created_at)) && e.created_at.endsWith('Z'));
      assert.equal(res.headers.get('location'), `/v1/endpoints/${e.uuid}`);

      // Edges hear of it through the feed, in the same transaction.
      const feed = await feedEntry(e.uuid);
      assert.equal(feed.hostname, e.hostname);
      assert.equal(feed.status, 'active');
      assert.equal(feed.paused, false);
    });

    it('accepts and ignores the retired protocol and region fields', async () => {
      const user = await t.createUser('free');
      const res = await create(user.api_key, { protocol: 'tcp', region: 'eu' });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.protocol, 'unified');
    });

    it('honours a custom subdomain, lowercased, when the plan includes custom_subdomains', async () => {
      const user = await t.createUser('pro');
      const name = `MyApp${Date.now()}`;
      const res = await create(user.api_key, { subdomain: name, is_custom: true });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.subdomain, name.toLowerCase());
      assert.equal(res.body.hostname, `${name.toLowerCase()}.${base}`);
      assert.equal(res.body.is_custom, true);
    });

    it('silently generates a name when the plan lacks custom_subdomains, or is_custom is not true', async () => {
      const free = await t.createUser('free');
      const denied = await create(free.api_key, { subdomain: 'wanted-by-free', is_custom: true });
      assert.equal(denied.status, 201);
      assert.equal(denied.body.is_custom, false);
      assert.match(denied.body.subdomain, GENERATED);

      const pro = await t.createUser('pro');
      const notCustom = await create(pro.api_key, { subdomain: 'not-asked-for' });
      assert.equal(notCustom.body.is_custom, false);
      assert.match(notCustom.body.subdomain, GENERATED);
      const noName = await create(pro.api_key, { is_custom: true });
      assert.equal(noName.body.is_custom, false);
      assert.match(noName.body.subdomain, GENERATED);
    });

    it('answers 400 for a malformed subdomain and creates nothing', async () => {
      const user = await t.createUser('pro');
      for (const subdomain of ['-bad', 'bad-', 'with_underscore', 'a.b', 'x'.repeat(64), 'sp ace', 'xn--punycode']) {
        const res = await create(user.api_key, { subdomain, is_custom: true });
        assert.equal(res.status, 400, subdomain);
        assert.equal(res.body.code, 'invalid_request');
        assert.equal(res.body.error, 'Invalid subdomain format');
      }
      assert.equal(await endpointCount(user.id), 0);
    });

    it('answers 400 for unknown fields, wrong types and invalid JSON, and creates nothing', async () => {
      const user = await t.createUser('pro');
      const unknown = await create(user.api_key, { subdomain: 'x', surprise: true });
      assert.equal(unknown.status, 400);
      assert.equal(unknown.body.code, 'unknown_field');
      assert.deepEqual(unknown.body.detail, { field: 'surprise', reason: 'unknown field' });
      for (const body of [{ is_custom: 'yes' }, { domain_id: 'one' }, { domain_id: 0 }, { subdomain: 7 }]) {
        const res = await create(user.api_key, body);
        assert.equal(res.status, 400, JSON.stringify(body));
      }
      const bad = await t.api('POST', '/v1/endpoints', { key: user.api_key, raw: '{"subdomain":', headers: { 'content-type': 'application/json' } });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.code, 'invalid_json');
      assert.equal(await endpointCount(user.id), 0);
    });

    it('answers 409 when a custom hostname is taken, and creates nothing', async () => {
      const a = await t.createUser('pro');
      const b = await t.createUser('pro');
      const name = `taken-${Date.now()}`;
      assert.equal((await create(a.api_key, { subdomain: name, is_custom: true })).status, 201);
      const res = await create(b.api_key, { subdomain: name.toUpperCase(), is_custom: true });
      assert.equal(res.status, 409);
      assert.equal(res.body.code, 'already_exists');
      assert.equal(await endpointCount(b.id), 0);
    });

    it('answers 409 for the names the platform’s DNS keeps (the GeoDNS zone, the name servers), and creates nothing', async () => {
      const user = await t.createUser('pro');
      for (const subdomain of ['geo', 'ns1']) {
        const res = await create(user.api_key, { subdomain, is_custom: true });
        assert.equal(res.status, 409, `${subdomain}: ${res.text}`);
        assert.equal(res.body.code, 'already_exists');
        assert.match(res.body.error, /reserved/);
      }
      assert.equal(await endpointCount(user.id), 0);
    });

    it('puts endpoints on a verified domain of the active account', async () => {
      const user = await t.createUser('pro');
      const domain = await addDomain(user);
      const custom = await create(user.api_key, { subdomain: 'shop', is_custom: true, domain_id: domain.id });
      assert.equal(custom.status, 201, custom.text);
      assert.equal(custom.body.hostname, `shop.${domain.name}`);
      assert.equal(custom.body.domain_id, domain.id);
      const generated = await create(user.api_key, { domain_id: domain.id });
      assert.equal(generated.body.hostname, `${generated.body.subdomain}.${domain.name}`);
    });

    it('answers 404 for a domain that is missing, unverified or another account’s, and creates nothing', async () => {
      const user = await t.createUser('pro');
      const other = await t.createUser('pro');
      const unverified = await addDomain(user, { verified: false });
      const foreign = await addDomain(other);
      for (const domainId of [987654321, unverified.id, foreign.id]) {
        const res = await create(user.api_key, { subdomain: 'x', is_custom: true, domain_id: domainId });
        assert.equal(res.status, 404, String(domainId));
        assert.equal(res.body.code, 'not_found');
      }
      assert.equal(await endpointCount(user.id), 0);
    });

    it('lets the strict domain owner claim the root `@`, served at the bare domain', async () => {
      const user = await t.createUser('pro');
      const domain = await addDomain(user);
      const res = await create(user.api_key, { subdomain: '@', is_custom: true, domain_id: domain.id });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.subdomain, '@');
      assert.equal(res.body.hostname, domain.name);
      assert.equal(res.body.public_url, domain.name);
    });

    it('refuses `@` to an account member who does not own the domain, and on the platform domain, with 403', async () => {
      const owner = await t.createUser('pro');
      const member = await t.createUser('pro');
      const org = await orgWithMember(owner, member, ['endpoints:read', 'endpoints:write']);
      const domain = await addDomain(owner, { accountId: org.id });
      const res = await create(member.api_key, { subdomain: '@', is_custom: true, domain_id: domain.id }, org.headers);
      assert.equal(res.status, 403);
      assert.equal(res.body.code, 'forbidden');
      // ...while a custom subdomain on the same organization domain is fine for the member.
      const sub = await create(member.api_key, { subdomain: 'team', is_custom: true, domain_id: domain.id }, org.headers);
      assert.equal(sub.status, 201, sub.text);

      const platform = await create(member.api_key, { subdomain: '@', is_custom: true });
      assert.equal(platform.status, 403);
      assert.equal(await endpointCount(member.id), 1);
    });

    it('lets an admin claim `@` anywhere, the platform domain included', async () => {
      const res = await create(t.adminKey, { subdomain: '@', is_custom: true });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.hostname, base);
      assert.equal((await t.api('DELETE', `/v1/endpoints/${res.body.uuid}`)).status, 204);
    });

    it('answers 403 quota_exceeded at the permanent-endpoint quota; ephemerals do not count', async () => {
      const user = await t.createUser('free'); // permanent_endpoints: 1
      await ephemeral(user.id);
      assert.equal((await create(user.api_key)).status, 201);
      const res = await create(user.api_key);
      assert.equal(res.status, 403);
      assert.equal(res.body.code, 'quota_exceeded');
      assert.match(res.body.error, /Permanent endpoint limit reached: 1 of 1 \(plan free\)/);
      assert.equal(res.body.detail.quota, 'permanent_endpoints');
      assert.equal(await endpointCount(user.id), 2);
    });

    it('checks the quota before the domain', async () => {
      const user = await t.createUser('free');
      assert.equal((await create(user.api_key)).status, 201);
      const res = await create(user.api_key, { domain_id: 987654321 });
      assert.equal(res.status, 403);
      assert.equal(res.body.code, 'quota_exceeded');
    });

    it('answers 403 quota_exceeded at the organization endpoint limit', async () => {
      const owner = await t.createUser('free');
      const member = await t.createUser('free');
      const org = await orgWithMember(owner, member, ['endpoints:write']);
      // Free plan: organization_endpoints 1. The owner's endpoint fills the organization.
      assert.equal((await create(owner.api_key, {}, org.headers)).status, 201);
      const res = await create(member.api_key, {}, org.headers);
      assert.equal(res.status, 403);
      assert.equal(res.body.code, 'quota_exceeded');
      assert.equal(res.body.detail.quota, 'organization_endpoints');
      assert.equal(await endpointCount(member.id), 0);
      // The member's own personal quota is untouched by the organization's.
      assert.equal((await create(member.api_key)).status, 201);
    });

    it('answers 401 without a key, 403 without endpoints:write, 403 account_suspended', async () => {
      assert.equal((await t.api('POST', '/v1/endpoints', { key: null, body: {} })).status, 401);

      const owner = await t.createUser('pro');
      const reader = await t.createUser('pro');
      const org = await orgWithMember(owner, reader, ['endpoints:read']);
      const denied = await create(reader.api_key, {}, org.headers);
      assert.equal(denied.status, 403);
      assert.equal(denied.body.code, 'permission_denied');

      const user = await t.createUser('pro');
      await t.api('POST', `/v1/admin/accounts/${user.account_id}/suspend`);
      const suspended = await create(user.api_key);
      assert.equal(suspended.status, 403);
      assert.equal(suspended.body.code, 'account_suspended');
      assert.equal(await endpointCount(user.id) + (await endpointCount(reader.id)), 0);
    });
  });

  // ---- list -------------------------------------------------------------------------------------------------------

  describe('GET /v1/endpoints', () => {
    let owner: User;
    let uuids: string[] = [];
    before(async () => {
      owner = await t.createUser('business');
      // 23 ephemerals (no quota) and 2 permanents, one of them with a custom name.
      for (let i = 0; i < 23; i++) uuids.push((await ephemeral(owner.id)).uuid);
      uuids.push((await create(owner.api_key)).body.uuid);
      uuids.push((await create(owner.api_key, { subdomain: `list-me-${Date.now()}`, is_custom: true })).body.uuid);
      uuids = uuids.reverse(); // newest first
    });

    const list = (query = '', key = owner.api_key) => t.api('GET', `/v1/endpoints${query}`, { key });

    it('pages the caller’s endpoints newest first, with the total over all pages', async () => {
      const first = await list();
      assert.equal(first.status, 200);
      assert.equal(first.body.total, 25);
      assert.equal(first.body.page, 1);
      assert.equal(first.body.page_size, 20);
      assert.deepEqual(first.body.items.map((e: { uuid: string }) => e.uuid), uuids.slice(0, 20));
      const second = await list('?page=2');
      assert.deepEqual(second.body.items.map((e: { uuid: string }) => e.uuid), uuids.slice(20));
      const third = await list('?page=3&page_size=20');
      assert.deepEqual(third.body.items, []);
      assert.equal(third.body.total, 25);
    });

    it('gives items the same shape as Get', async () => {
      const page = await list('?page_size=1');
      const get = await t.api('GET', `/v1/endpoints/${page.body.items[0].uuid}`, { key: owner.api_key });
      assert.deepEqual(page.body.items[0], get.body);
    });

    it('clamps page_size to 100 and falls back to defaults for values that are not positive integers', async () => {
      assert.equal((await list('?page_size=1000')).body.page_size, 100);
      for (const q of ['?page=abc&page_size=xyz', '?page=0&page_size=0', '?page=-1&page_size=-5', '?page=1.5&page_size=2e1', '?page=&page_size=']) {
        const res = await list(q);
        assert.equal(res.status, 200, q);
        assert.equal(res.body.page, 1, q);
        assert.equal(res.body.page_size, 20, q);
      }
    });

    it('answers 400 pagination_too_deep beyond the resource-protection cap', async () => {
      assert.equal((await list('?page=500&page_size=20')).status, 200); // exactly 10000
      for (const q of ['?page=501&page_size=20', '?page=101&page_size=100', '?page=99999999999999999999']) {
        const res = await list(q);
        assert.equal(res.status, 400, q);
        assert.equal(res.body.code, 'pagination_too_deep');
      }
    });

    it('filters by a literal substring of the subdomain: wildcards and backslashes match only themselves', async () => {
      const custom = await list('?q=LIST-ME');
      assert.equal(custom.body.total, 1);
      for (const q of ['%', '_', '%25', '\\', 'list%me', 'list_me']) {
        const res = await list(`?q=${encodeURIComponent(q)}`);
        assert.equal(res.status, 200);
        assert.equal(res.body.total, 0, q);
      }
      assert.equal((await list('?q=-')).body.total, 25);
    });

    it('filters by status, domain, ephemerality; include_ephemeral is a no-op', async () => {
      assert.equal((await list('?status=active')).body.total, 25);
      assert.equal((await list('?status=provisioning')).body.total, 0);
      assert.equal((await list('?ephemeral_only=1')).body.total, 23);
      assert.ok((await list('?ephemeral_only=1')).body.items.every((e: { ephemeral: boolean }) => e.ephemeral));
      assert.equal((await list('?include_ephemeral=0')).body.total, 25);
      assert.equal((await list('?include_ephemeral=1')).body.total, 25);

      const domain = await addDomain(owner);
      await create(owner.api_key, { domain_id: domain.id });
      const onDomain = await list(`?domain_id=${domain.id}`);
      assert.equal(onDomain.body.total, 1);
      assert.equal(onDomain.body.items[0].domain_id, domain.id);
      await t.api('DELETE', `/v1/endpoints/${onDomain.body.items[0].uuid}`, { key: owner.api_key });
    });

    it('answers 400 for a malformed domain_id or status filter', async () => {
      assert.equal((await list('?domain_id=abc')).status, 400);
      assert.equal((await list('?domain_id=abc')).body.code, 'invalid_query');
      assert.equal((await list('?status=running')).status, 400);
    });

    it('shows non-admins only the active account and ignores their user_id; admins see all and may filter', async () => {
      const stranger = await t.createUser('free');
      await create(stranger.api_key);
      const own = await list(`?user_id=${owner.id}`, stranger.api_key);
      assert.equal(own.body.total, 1);
      assert.equal(own.body.items[0].user_id, stranger.id);

      const admin = await list(`?user_id=${owner.id}&page_size=100`, t.adminKey);
      assert.equal(admin.body.total, 25);
      assert.ok(admin.body.items.every((e: { user_id: number }) => e.user_id === owner.id));
      const all = await list('', t.adminKey);
      assert.ok(all.body.total > 26);
      assert.equal((await list('?user_id=abc', t.adminKey)).status, 400);
    });

    it('answers 401 without a key and 403 without endpoints:read', async () => {
      assert.equal((await t.api('GET', '/v1/endpoints', { key: null })).status, 401);
      const member = await t.createUser('free');
      const org = await orgWithMember(await t.createUser('free'), member, []);
      const res = await t.api('GET', '/v1/endpoints', { key: member.api_key, headers: org.headers });
      assert.equal(res.status, 403);
      assert.equal(res.body.code, 'permission_denied');
    });
  });

  // ---- get --------------------------------------------------------------------------------------------------------

  describe('GET /v1/endpoints/{id}', () => {
    it('returns the full endpoint, capture settings included', async () => {
      const user = await t.createUser('free');
      const created = await create(user.api_key);
      const res = await t.api('GET', `/v1/endpoints/${created.body.uuid}`, { key: user.api_key });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, {
        ...created.body,
        user_id: user.id,
        last_active_at: null,
        dedicated_tcp_port: null,
        dedicated_udp_port: null,
        capture_enabled: true,
        capture_level: null,
        origin_url: null,
      });
    });

    it('answers 404 for another user’s endpoint, the same as for a missing one; 400 for a malformed id', async () => {
      const a = await t.createUser('free');
      const b = await t.createUser('free');
      const created = await create(a.api_key);
      const foreign = await t.api('GET', `/v1/endpoints/${created.body.uuid}`, { key: b.api_key });
      const missing = await t.api('GET', '/v1/endpoints/00000000-0000-4000-8000-000000000000', { key: b.api_key });
      assert.equal(foreign.status, 404);
      assert.deepEqual(foreign.body, missing.body);
      const bad = await t.api('GET', '/v1/endpoints/not-a-uuid', { key: a.api_key });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.code, 'invalid_id');
      assert.equal((await t.api('GET', `/v1/endpoints/${created.body.uuid}`, { key: null })).status, 401);
    });

    it('lets an admin fetch any endpoint; accepts an upper-case uuid', async () => {
      const user = await t.createUser('free');
      const created = await create(user.api_key);
      const res = await t.api('GET', `/v1/endpoints/${created.body.uuid.toUpperCase()}`);
      assert.equal(res.status, 200);
      assert.equal(res.body.user_id, user.id);
    });
  });

  // ---- delete -----------------------------------------------------------------------------------------------------

  describe('DELETE /v1/endpoints/{id}', () => {
    it('removes the endpoint, frees its hostname and ports, and publishes the deletion', async () => {
      const user = await t.createUser('business');
      const name = `gone-${Date.now()}`;
      const created = await create(user.api_key, { subdomain: name, is_custom: true });
      const port = 20000 + Math.floor(Math.random() * 10000);
      assert.equal((await t.api('PUT', `/v1/endpoints/${created.body.uuid}/ports`, { key: user.api_key, body: { dedicated_tcp_port: port } })).status, 200);

      const res = await t.api('DELETE', `/v1/endpoints/${created.body.uuid}`, { key: user.api_key });
      assert.equal(res.status, 204);
      assert.equal(res.text, '');
      assert.equal((await t.api('GET', `/v1/endpoints/${created.body.uuid}`, { key: user.api_key })).status, 404);
      assert.equal((await t.api('DELETE', `/v1/endpoints/${created.body.uuid}`, { key: user.api_key })).status, 404);
      assert.equal(await feedEntry(created.body.uuid), null);
      const [outbox] = await sql("SELECT data FROM feed_outbox WHERE topic = 'endpoint' AND key = $1 ORDER BY version DESC LIMIT 1", [created.body.uuid]);
      assert.equal(outbox.data, null);

      // Name and port are free again.
      const again = await create(user.api_key, { subdomain: name, is_custom: true });
      assert.equal(again.status, 201);
      assert.equal((await t.api('PUT', `/v1/endpoints/${again.body.uuid}/ports`, { key: user.api_key, body: { dedicated_tcp_port: port } })).status, 200);
    });

    it('answers 404 for another user’s endpoint and leaves it in place; 403 without endpoints:delete; 401', async () => {
      const a = await t.createUser('free');
      const b = await t.createUser('free');
      const created = await create(a.api_key);
      assert.equal((await t.api('DELETE', `/v1/endpoints/${created.body.uuid}`, { key: b.api_key })).status, 404);
      assert.equal((await t.api('DELETE', `/v1/endpoints/${created.body.uuid}`, { key: null })).status, 401);

      const member = await t.createUser('free');
      const owner = await t.createUser('free');
      const org = await orgWithMember(owner, member, ['endpoints:read', 'endpoints:write']);
      const orgEndpoint = await create(owner.api_key, {}, org.headers);
      const denied = await t.api('DELETE', `/v1/endpoints/${orgEndpoint.body.uuid}`, { key: member.api_key, headers: org.headers });
      assert.equal(denied.status, 403);
      assert.equal(denied.body.code, 'permission_denied');

      assert.equal((await t.api('GET', `/v1/endpoints/${created.body.uuid}`, { key: a.api_key })).status, 200);
      assert.equal((await t.api('GET', `/v1/endpoints/${orgEndpoint.body.uuid}`, { key: owner.api_key, headers: org.headers })).status, 200);
    });

    it('frees a quota slot', async () => {
      const user = await t.createUser('free');
      const first = await create(user.api_key);
      assert.equal((await create(user.api_key)).status, 403);
      await t.api('DELETE', `/v1/endpoints/${first.body.uuid}`, { key: user.api_key });
      assert.equal((await create(user.api_key)).status, 201);
    });
  });

  // ---- admin ephemeral path ---------------------------------------------------------------------------------------

  describe('POST /v1/admin/endpoints/ephemeral', () => {
    it('creates an ephemeral endpoint in the user’s personal account with idle tracking', async () => {
      const user = await t.createUser('free');
      const res = await t.api('POST', '/v1/admin/endpoints/ephemeral', { body: { user_id: user.id, device_fingerprint: 'laptop-1' } });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.ephemeral, true);
      assert.equal(res.body.user_id, user.id);
      assert.match(res.body.subdomain, GENERATED);
      assert.ok(res.body.last_active_at);
      const [row] = await sql('SELECT device_fingerprint, account_id FROM endpoints WHERE uuid = $1', [res.body.uuid]);
      assert.equal(row.device_fingerprint, 'laptop-1');
      assert.equal(row.account_id, user.account_id);
      assert.equal((await feedEntry(res.body.uuid)).ephemeral, true);
      const mine = await t.api('GET', `/v1/endpoints/${res.body.uuid}`, { key: user.api_key });
      assert.equal(mine.status, 200);
    });

    it('is for admins only, and answers 404 for an unknown user', async () => {
      const user = await t.createUser('free');
      const denied = await t.api('POST', '/v1/admin/endpoints/ephemeral', { key: user.api_key, body: { user_id: user.id } });
      assert.equal(denied.status, 403);
      assert.equal(denied.body.code, 'admin_required');
      assert.equal((await t.api('POST', '/v1/admin/endpoints/ephemeral', { body: { user_id: 987654321 } })).status, 404);
      assert.equal(await endpointCount(user.id), 0);
    });
  });

  // ---- tags -------------------------------------------------------------------------------------------------------

  describe('tags', () => {
    const setTags = (uuid: string, body: unknown, key: string, headers?: Record<string, string>) => t.api('PUT', `/v1/endpoints/${uuid}/tags`, { key, body, headers });
    const tagsOf = async (uuid: string) => (await sql<{ tags: string[] }>('SELECT tags FROM endpoints WHERE uuid = $1', [uuid]))[0].tags;

    it('takes tags on create, in every view (create, get, list), in the order sent, and never in the feed', async () => {
      const user = await t.createUser('business');
      const tags = ['web', 'team.a', 'env_prod-1', 'x'.repeat(32)];
      const res = await create(user.api_key, { tags });
      assert.equal(res.status, 201, res.text);
      assert.deepEqual(res.body.tags, tags);
      const got = await t.api('GET', `/v1/endpoints/${res.body.uuid}`, { key: user.api_key });
      assert.deepEqual(got.body.tags, tags);
      const listed = await t.api('GET', '/v1/endpoints', { key: user.api_key });
      assert.deepEqual(listed.body.items[0].tags, tags);
      // Labels only: the edge's entry is what it was without them.
      const feed = await feedEntry(res.body.uuid);
      assert.ok(feed, 'published');
      assert.ok(!('tags' in feed), 'no tags in the feed entry');
      assert.ok(!JSON.stringify(feed).includes('team.a'));
      assert.deepEqual((await create(user.api_key, { tags: SIXTEEN_TAGS })).body.tags, SIXTEEN_TAGS, 'sixteen is the most');
    });

    it('takes tags on the agent one-shot ephemeral create', async () => {
      const user = await t.createUser('business');
      const res = await t.api('POST', '/v1/endpoints/ephemeral', { key: user.api_key, body: { tags: ['laptop'] } });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.ephemeral, true);
      assert.deepEqual(res.body.tags, ['laptop']);
      const bad = await t.api('POST', '/v1/endpoints/ephemeral', { key: user.api_key, body: { tags: ['Laptop'] } });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.code, 'invalid_request');
      assert.equal(await endpointCount(user.id), 1);
    });

    it('replaces the whole set with PUT …/tags, answering the endpoint; [] removes them; the feed does not move', async () => {
      const user = await t.createUser('business');
      const { body: e } = await create(user.api_key, { tags: ['a', 'b'] });
      const version = await feedVersion(t);
      const res = await setTags(e.uuid, { tags: ['b', 'c'] }, user.api_key);
      assert.equal(res.status, 200, res.text);
      const got = await t.api('GET', `/v1/endpoints/${e.uuid}`, { key: user.api_key });
      assert.deepEqual(res.body, got.body, 'the PUT answers the endpoint view');
      assert.deepEqual(res.body.tags, ['b', 'c']);
      assert.ok(Date.parse(res.body.updated_at) >= Date.parse(e.updated_at));
      assert.equal(await feedVersion(t), version, 'edges ignore tags, so nothing is published');

      const cleared = await setTags(e.uuid, { tags: [] }, user.api_key);
      assert.deepEqual(cleared.body.tags, []);
      assert.deepEqual(await tagsOf(e.uuid), []);
    });

    it('filters the list by one tag, within the active account', async () => {
      const user = await t.createUser('business');
      const other = await t.createUser('business');
      const tag = `blue-${Date.now().toString(36)}`;
      const a = (await create(user.api_key, { tags: [tag, 'x'] })).body;
      const b = (await create(user.api_key, { tags: ['x', tag] })).body;
      await create(user.api_key, { tags: ['x'] });
      await create(user.api_key);
      await create(other.api_key, { tags: [tag] });
      const res = await t.api('GET', `/v1/endpoints?tag=${tag}`, { key: user.api_key });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.total, 2);
      assert.deepEqual(res.body.items.map((e: { uuid: string }) => e.uuid), [b.uuid, a.uuid]);
      assert.equal((await t.api('GET', '/v1/endpoints?tag=x', { key: user.api_key })).body.total, 3);
      assert.equal((await t.api('GET', '/v1/endpoints?tag=nothing-has-this', { key: user.api_key })).body.total, 0);
      // Combined with the other filters.
      assert.equal((await t.api('GET', `/v1/endpoints?tag=${tag}&q=${b.subdomain}`, { key: user.api_key })).body.total, 1);
    });

    it('answers 400 invalid_query for a malformed tag filter', async () => {
      const user = await t.createUser('free');
      for (const q of ['Blue', '', '.x', 'a'.repeat(33), 'a%20b', 'a,b']) {
        const res = await t.api('GET', `/v1/endpoints?tag=${q}`, { key: user.api_key });
        assert.equal(res.status, 400, q);
        assert.equal(res.body.code, 'invalid_query', q);
        assert.equal(res.body.detail.field, 'tag', q);
      }
      const twice = await t.api('GET', '/v1/endpoints?tag=a&tag=b', { key: user.api_key });
      assert.equal(twice.status, 400, 'one tag per filter');
    });

    it('refuses bad tags on create with 400 invalid_request naming the field, and creates nothing', async () => {
      const user = await t.createUser('business');
      for (const [what, tags] of BAD_TAGS) {
        const res = await create(user.api_key, { tags });
        assert.equal(res.status, 400, what);
        assert.equal(res.body.code, 'invalid_request', what);
        assert.match(res.body.detail.field, /^tags(\.\d+)?$/, what);
      }
      assert.equal(await endpointCount(user.id), 0);
    });

    it('refuses bad tags on PUT …/tags and keeps the stored ones; tags is required there', async () => {
      const user = await t.createUser('business');
      const { body: e } = await create(user.api_key, { tags: ['keep'] });
      const version = await feedVersion(t);
      for (const [what, tags] of [...BAD_TAGS, ['a body without tags', undefined] as const]) {
        const res = await setTags(e.uuid, tags === undefined ? {} : { tags }, user.api_key);
        assert.equal(res.status, 400, what);
        assert.equal(res.body.code, 'invalid_request', what);
      }
      const extra = await setTags(e.uuid, { tags: ['a'], labels: ['b'] }, user.api_key);
      assert.equal(extra.body.code, 'unknown_field');
      assert.deepEqual(await tagsOf(e.uuid), ['keep']);
      // Nothing was published about this endpoint. (Not the global version: the worker's port activator may publish
      // another test's endpoint meanwhile.)
      const published = await t.node.db!.query<{ n: number }>('SELECT count(*)::int AS n FROM feed_outbox WHERE version > $1 AND key = $2', [version, e.uuid]);
      assert.equal(published.rows[0].n, 0);
    });

    it('PUT …/tags needs endpoints:update; another account’s endpoint is 404; a paused one 409', async () => {
      const owner = await t.createUser('business');
      const member = await t.createUser('business');
      const org = await orgWithMember(owner, member, ['endpoints:read', 'endpoints:write']);
      const { body: e } = await create(owner.api_key, { tags: ['org'] }, org.headers);
      const denied = await setTags(e.uuid, { tags: ['mine'] }, member.api_key, org.headers);
      assert.equal(denied.status, 403);
      assert.equal(denied.body.code, 'permission_denied');
      const stranger = await t.createUser('business');
      assert.equal((await setTags(e.uuid, { tags: ['mine'] }, stranger.api_key)).status, 404);
      assert.equal((await setTags(e.uuid, { tags: ['mine'] }, null as unknown as string)).status, 401);
      assert.equal((await t.api('POST', `/v1/admin/endpoints/${e.uuid}/pause`)).status, 200);
      const paused = await setTags(e.uuid, { tags: ['mine'] }, owner.api_key, org.headers);
      assert.equal(paused.status, 409);
      assert.equal(paused.body.code, 'quota_paused');
      assert.deepEqual(await tagsOf(e.uuid), ['org']);
    });
  });

  it('describes every endpoint operation in the OpenAPI document', async () => {
    const res = await t.api('GET', '/v1/openapi.json', { key: null });
    const paths = res.body.paths;
    for (const [path, method] of [
      ['/v1/endpoints', 'post'],
      ['/v1/endpoints', 'get'],
      ['/v1/endpoints/{id}', 'get'],
      ['/v1/endpoints/{id}', 'delete'],
      ['/v1/endpoints/{id}/promote', 'post'],
      ['/v1/endpoints/{id}/ports', 'put'],
      ['/v1/endpoints/{id}/settings/capture', 'put'],
      ['/v1/endpoints/{id}/tags', 'put'],
      ['/v1/endpoints/ephemeral', 'post'],
      ['/v1/admin/endpoints/ephemeral', 'post'],
      ['/v1/admin/endpoints/{id}/pause', 'post'],
      ['/v1/admin/endpoints/{id}/unpause', 'post'],
    ]) {
      const op = paths[path]?.[method];
      assert.ok(op, `${method} ${path}`);
      assert.ok(op.summary, `${method} ${path} summary`);
      assert.ok(op.tags?.length, `${method} ${path} tags`);
    }
    assert.ok(paths['/v1/endpoints'].post.requestBody);
    assert.ok(paths['/v1/endpoints'].post.responses['201']);
    // Tags: on the create bodies, the tag filter, the new operation's body, and every view.
    const schemaOf = (op: any, status?: string) => (status ? op.responses[status] : op.requestBody).content['application/json'].schema;
    for (const [path, method] of [['/v1/endpoints', 'post'], ['/v1/endpoints/ephemeral', 'post'], ['/v1/endpoints/{id}/tags', 'put']]) {
      const tags = schemaOf(paths[path][method]).properties.tags;
      assert.equal(tags.type, 'array', `${method} ${path}`);
      assert.equal(tags.maxItems, 16);
      assert.equal(tags.uniqueItems, true);
      assert.equal(tags.items.pattern, '^[a-z0-9][a-z0-9._-]{0,31}$');
    }
    assert.deepEqual(schemaOf(paths['/v1/endpoints/{id}/tags'].put).required, ['tags']);
    assert.ok(paths['/v1/endpoints'].get.parameters.some((p: any) => p.name === 'tag' && p.in === 'query'));
    for (const [path, method, status] of [['/v1/endpoints', 'post', '201'], ['/v1/endpoints/{id}', 'get', '200'], ['/v1/endpoints/{id}/tags', 'put', '200']]) {
      const view = schemaOf(paths[path][method], status);
      assert.ok(view.required.includes('tags') && view.properties.tags.type === 'array', `${method} ${path} view`);
    }
    assert.equal(schemaOf(paths['/v1/endpoints'].get, '200').properties.items.items.properties.tags.type, 'array');
  });
});
