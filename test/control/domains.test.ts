// Custom domains over HTTP against the real program: claiming, listing, deleting, and verification through a real
// DNS server on loopback (EDGE_DNS_RESOLVERS points the node at it), including contested names and resolver failures.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { RCODE, startDnsServer, type DnsServer } from '../helpers/dns-server.ts';
import { DnsLookupError, DnsVerifier, parseResolverList } from '../../src/control/dns-verifier.ts';
import { findUsableDomain } from '../../src/store/domains.ts';

type User = Awaited<ReturnType<TestNode['createUser']>>;

describe('custom domains', () => {
  let t: TestNode;
  let dns: DnsServer;
  let owner: User;
  let other: User;

  before(async () => {
    dns = await startDnsServer();
    // A two-label base domain, so "a parent of the platform domain" can be tested with a valid name.
    t = await startTestNode({ EDGE_DNS_RESOLVERS: dns.address, EDGE_BASE_DOMAIN: 'edge.platform.test' });
    owner = await t.createUser('pro');
    other = await t.createUser('pro');
  });
  after(async () => {
    await t.close();
    await dns.close();
  });

  async function claim(user: User, name: string) {
    const res = await t.api('POST', '/v1/domains', { key: user.api_key, body: { name } });
    assert.equal(res.status, 201, res.text);
    return res.body;
  }

  async function names(user: User): Promise<string[]> {
    const res = await t.api('GET', '/v1/domains', { key: user.api_key });
    assert.equal(res.status, 200);
    return res.body.items.map((d: { name: string }) => d.name);
  }

  /** An organization owned by `owner` with a member holding only `permissions` in it. */
  async function orgMember(permissions: string[]) {
    const org = await t.api('POST', '/v1/organizations', { key: owner.api_key, body: { name: `org-${permissions.join('-') || 'none'}` } });
    const member = await t.createUser('pro');
    const add = await t.api('POST', `/v1/organizations/${org.body.id}/members`, { key: owner.api_key, body: { email: member.email, permissions } });
    assert.equal(add.status, 201);
    return { key: member.api_key, headers: { 'x-account-id': String(org.body.id) }, orgId: org.body.id as number };
  }

  async function insertEndpoint(user: User, domainId: number, hostname: string): Promise<string> {
    const { rows } = await t.node.db!.query<{ uuid: string }>(
      'INSERT INTO endpoints (user_id, account_id, domain_id, subdomain, hostname) VALUES ($1, $2, $3, $4, $5) RETURNING uuid::text AS uuid',
      [user.id, user.account_id, domainId, hostname.split('.')[0], hostname],
    );
    return rows[0].uuid;
  }

  describe('POST /v1/domains', () => {
    it('claims a domain, canonicalised, with the TXT challenge to publish', async () => {
      const res = await t.api('POST', '/v1/domains', { key: owner.api_key, body: { name: ' Shop.Example.TEST. ' } });
      assert.equal(res.status, 201);
      const d = res.body;
      assert.ok(Number.isInteger(d.id));
      assert.equal(d.name, 'shop.example.test');
      assert.equal(d.verified, false);
      assert.equal(d.verified_at, null);
      assert.equal(d.verification.type, 'TXT');
      assert.equal(d.verification.name, '_edge-challenge.shop.example.test');
      assert.match(d.verification.value, /^edge-verify=[0-9a-f]{32}$/);
      assert.ok(!Number.isNaN(Date.parse(d.created_at)));
      assert.deepEqual(Object.keys(d).sort(), ['created_at', 'id', 'name', 'verification', 'verified', 'verified_at']);
    });

    it('stores internationalised names in their ASCII form', async () => {
      const d = await claim(owner, 'Bücher.Example');
      assert.equal(d.name, 'xn--bcher-kva.example');
    });

    it('answers 409 when the account already has the name, in any letter case, and adds nothing', async () => {
      await claim(owner, 'twice.example.test');
      const before = await names(owner);
      const res = await t.api('POST', '/v1/domains', { key: owner.api_key, body: { name: 'TWICE.example.test' } });
      assert.equal(res.status, 409);
      assert.equal(res.body.code, 'already_exists');
      assert.deepEqual(await names(owner), before);
    });

    it('lets another account claim the same name (only verification is exclusive)', async () => {
      await claim(other, 'twice.example.test');
    });

    it('refuses invalid names, IP addresses, wildcards and the platform namespace with 400, creating nothing', async () => {
      const before = await names(owner);
      const cases: Array<[string, string]> = [
        ['not a domain', 'invalid_domain'],
        ['localhost', 'invalid_domain'],
        ['-bad.example.com', 'invalid_domain'],
        ['a..example.com', 'invalid_domain'],
        ['under_score.example.com', 'invalid_domain'],
        ['*.example.com', 'invalid_domain'],
        ['10.0.0.1', 'invalid_domain'],
        [`${'a'.repeat(64)}.example.com`, 'invalid_domain'],
        [`${'abcdefghi.'.repeat(24)}com`, 'invalid_domain'],
        ['edge.platform.test', 'platform_domain'],
        ['Foo.Edge.Platform.Test', 'platform_domain'],
        ['platform.test', 'platform_domain'],
      ];
      for (const [name, reason] of cases) {
        const res = await t.api('POST', '/v1/domains', { key: owner.api_key, body: { name } });
        assert.equal(res.status, 400, name);
        assert.equal(res.body.code, 'invalid_request', name);
        assert.equal(res.body.detail.reason, reason, name);
        assert.equal(res.body.detail.field, 'name');
      }
      assert.deepEqual(await names(owner), before);
    });

    it('decodes strictly: unknown field, missing name, wrong type, invalid JSON', async () => {
      const unknown = await t.api('POST', '/v1/domains', { key: owner.api_key, body: { name: 'x.example.test', verified: true } });
      assert.equal(unknown.status, 400);
      assert.equal(unknown.body.code, 'unknown_field');
      assert.deepEqual(unknown.body.detail, { field: 'verified', reason: 'unknown field' });
      const missing = await t.api('POST', '/v1/domains', { key: owner.api_key });
      assert.equal(missing.status, 400);
      assert.deepEqual(missing.body.detail, { field: 'name', reason: 'missing required field' });
      assert.equal((await t.api('POST', '/v1/domains', { key: owner.api_key, body: { name: 5 } })).status, 400);
      const json = await t.api('POST', '/v1/domains', { key: owner.api_key, raw: '{"name":', headers: { 'content-type': 'application/json' } });
      assert.equal(json.body.code, 'invalid_json');
      assert.ok(!(await names(owner)).includes('x.example.test'));
    });

    it('answers 401 without a key, 403 without domains:manage, 403 when suspended', async () => {
      assert.equal((await t.api('POST', '/v1/domains', { key: null, body: { name: 'x.example.test' } })).status, 401);
      const member = await orgMember(['endpoints:read']);
      const denied = await t.api('POST', '/v1/domains', { key: member.key, headers: member.headers, body: { name: 'x.example.test' } });
      assert.equal(denied.status, 403);
      assert.equal(denied.body.code, 'permission_denied');
      assert.equal(denied.body.detail.permission, 'domains:manage');
      const allowed = await orgMember(['domains:manage']);
      const ok = await t.api('POST', '/v1/domains', { key: allowed.key, headers: allowed.headers, body: { name: 'member.example.test' } });
      assert.equal(ok.status, 201);

      const suspended = await t.createUser('pro');
      assert.equal((await t.api('POST', `/v1/admin/accounts/${suspended.account_id}/suspend`)).status, 200);
      const refused = await t.api('POST', '/v1/domains', { key: suspended.api_key, body: { name: 'x.example.test' } });
      assert.equal(refused.status, 403);
      assert.equal(refused.body.code, 'account_suspended');
    });
  });

  describe('GET /v1/domains and /v1/domains/{id}', () => {
    it("lists only the active account's domains", async () => {
      const mine = await names(owner);
      assert.ok(mine.includes('shop.example.test'));
      const theirs = await names(other);
      assert.ok(!theirs.includes('shop.example.test'));
      assert.deepEqual(theirs, ['twice.example.test']);
    });

    it('gets one, and answers 404 for another account and a missing id, 400 for a malformed id', async () => {
      const d = await claim(owner, 'get.example.test');
      const res = await t.api('GET', `/v1/domains/${d.id}`, { key: owner.api_key });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, d);
      const foreign = await t.api('GET', `/v1/domains/${d.id}`, { key: other.api_key });
      assert.equal(foreign.status, 404);
      assert.equal(foreign.body.code, 'not_found');
      assert.equal((await t.api('GET', '/v1/domains/987654321', { key: owner.api_key })).status, 404);
      const bad = await t.api('GET', '/v1/domains/abc', { key: owner.api_key });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.code, 'invalid_id');
      assert.equal((await t.api('GET', `/v1/domains/${d.id}`, { key: null })).status, 401);
    });
  });

  describe('POST /v1/domains/{id}/verify', () => {
    it('answers 409 txt_record_not_found while no record is published, and stays unverified', async () => {
      const d = await claim(owner, 'pending.example.test');
      const res = await t.api('POST', `/v1/domains/${d.id}/verify`, { key: owner.api_key });
      assert.equal(res.status, 409);
      assert.equal(res.body.code, 'conflict');
      assert.equal(res.body.detail.reason, 'txt_record_not_found');
      assert.deepEqual(res.body.detail.expected, d.verification);
      assert.deepEqual(res.body.detail.found, []);
      assert.ok(dns.queries.some((q) => q.name === '_edge-challenge.pending.example.test' && q.type === 16), 'asked the configured resolver');
      assert.equal((await t.api('GET', `/v1/domains/${d.id}`, { key: owner.api_key })).body.verified, false);
    });

    it('reports what it found when the published value is wrong', async () => {
      const d = await claim(owner, 'typo.example.test');
      dns.setTxt(d.verification.name, ['edge-verify=0000', 'v=spf1 -all']);
      const res = await t.api('POST', `/v1/domains/${d.id}/verify`, { key: owner.api_key });
      assert.equal(res.status, 409);
      assert.deepEqual(res.body.detail.found, ['edge-verify=0000', 'v=spf1 -all']);
      assert.equal((await t.api('GET', `/v1/domains/${d.id}`, { key: owner.api_key })).body.verified, false);
    });

    it('verifies when the record is published (among others, split into strings), then is idempotent', async () => {
      const d = await claim(owner, 'verify.example.test');
      const token: string = d.verification.value;
      // One record holding the value in two character-strings: they are joined, as RFC 7208 §3.3 does.
      dns.setTxt(d.verification.name, ['unrelated', [token.slice(0, 10), token.slice(10)]]);
      const res = await t.api('POST', `/v1/domains/${d.id}/verify`, { key: owner.api_key });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.verified, true);
      assert.ok(Math.abs(Date.parse(res.body.verified_at) - Date.now()) < 60_000);

      const asked = dns.queries.length;
      const again = await t.api('POST', `/v1/domains/${d.id}/verify`, { key: owner.api_key });
      assert.equal(again.status, 200);
      assert.equal(again.body.verified_at, res.body.verified_at, 'the first verification time is kept');
      assert.equal(dns.queries.length, asked, 'a verified domain is not looked up again');
      assert.equal((await t.api('GET', `/v1/domains/${d.id}`, { key: owner.api_key })).body.verified, true);
    });

    it('answers 409 already_exists when another account holds the name verified; the name frees up on delete', async () => {
      const mine = await claim(owner, 'contested.example.test');
      const theirs = await claim(other, 'contested.example.test');
      dns.setTxt(mine.verification.name, [mine.verification.value, theirs.verification.value]);
      assert.equal((await t.api('POST', `/v1/domains/${mine.id}/verify`, { key: owner.api_key })).status, 200);

      const lost = await t.api('POST', `/v1/domains/${theirs.id}/verify`, { key: other.api_key });
      assert.equal(lost.status, 409);
      assert.equal(lost.body.code, 'already_exists');
      assert.equal(lost.body.detail.reason, 'verified_elsewhere');
      assert.equal((await t.api('GET', `/v1/domains/${theirs.id}`, { key: other.api_key })).body.verified, false);

      assert.equal((await t.api('DELETE', `/v1/domains/${mine.id}`, { key: owner.api_key })).status, 204);
      const won = await t.api('POST', `/v1/domains/${theirs.id}/verify`, { key: other.api_key });
      assert.equal(won.status, 200);
      assert.equal(won.body.verified, true);
    });

    it('answers 503 dns_lookup_failed when the resolver fails (SERVFAIL, REFUSED), leaving the domain unverified', async () => {
      for (const [label, rcode, code] of [['servfail', RCODE.SERVFAIL, 'ESERVFAIL'], ['refused', RCODE.REFUSED, 'EREFUSED']] as const) {
        const d = await claim(owner, `${label}.example.test`);
        dns.setRcode(d.verification.name, rcode);
        const res = await t.api('POST', `/v1/domains/${d.id}/verify`, { key: owner.api_key });
        assert.equal(res.status, 503, label);
        assert.equal(res.body.code, 'unavailable');
        assert.equal(res.body.detail.reason, 'dns_lookup_failed');
        assert.equal(res.body.detail.dns_error, code);
        assert.equal((await t.api('GET', `/v1/domains/${d.id}`, { key: owner.api_key })).body.verified, false);
      }
    });

    it('answers 404 for another account, 400 for a malformed id, 403 without domains:manage, 401 without a key', async () => {
      const d = await claim(owner, 'guarded.example.test');
      dns.setTxt(d.verification.name, [d.verification.value]);
      assert.equal((await t.api('POST', `/v1/domains/${d.id}/verify`, { key: other.api_key })).status, 404);
      assert.equal((await t.api('POST', '/v1/domains/0/verify', { key: owner.api_key })).status, 400);
      assert.equal((await t.api('POST', `/v1/domains/${d.id}/verify`, { key: null })).status, 401);
      const member = await orgMember(['endpoints:read']);
      const res = await t.api('POST', `/v1/domains/${d.id}/verify`, { key: member.key, headers: member.headers });
      assert.equal(res.status, 403);
      assert.equal(res.body.code, 'permission_denied');
      assert.equal((await t.api('GET', `/v1/domains/${d.id}`, { key: owner.api_key })).body.verified, false);
    });
  });

  describe('POST /v1/admin/domains/{id}/verify', () => {
    it('marks a domain verified without DNS', async () => {
      const d = await claim(owner, 'admin.example.test');
      const asked = dns.queries.length;
      const res = await t.api('POST', `/v1/admin/domains/${d.id}/verify`);
      assert.equal(res.status, 200);
      assert.equal(res.body.verified, true);
      assert.equal(dns.queries.length, asked);
      assert.equal((await t.api('GET', `/v1/domains/${d.id}`, { key: owner.api_key })).body.verified, true);
    });

    it('answers 403 to non-admins, 404 for a missing domain, 409 when another account holds the name', async () => {
      const d = await claim(owner, 'admin2.example.test');
      const refused = await t.api('POST', `/v1/admin/domains/${d.id}/verify`, { key: owner.api_key });
      assert.equal(refused.status, 403);
      assert.equal(refused.body.code, 'admin_required');
      assert.equal((await t.api('GET', `/v1/domains/${d.id}`, { key: owner.api_key })).body.verified, false);
      assert.equal((await t.api('POST', '/v1/admin/domains/987654321/verify')).status, 404);

      const rival = await claim(other, 'admin2.example.test');
      assert.equal((await t.api('POST', `/v1/admin/domains/${d.id}/verify`)).status, 200);
      const conflict = await t.api('POST', `/v1/admin/domains/${rival.id}/verify`);
      assert.equal(conflict.status, 409);
      assert.equal(conflict.body.code, 'already_exists');
    });
  });

  describe('DELETE /v1/domains/{id}', () => {
    it('answers 409 while an endpoint uses the domain, and deletes it once none does', async () => {
      const d = await claim(owner, 'busy.example.test');
      await t.api('POST', `/v1/admin/domains/${d.id}/verify`);
      const uuid = await insertEndpoint(owner, d.id, 'www.busy.example.test');
      const res = await t.api('DELETE', `/v1/domains/${d.id}`, { key: owner.api_key });
      assert.equal(res.status, 409);
      assert.equal(res.body.code, 'conflict');
      assert.equal(res.body.detail.reason, 'domain_in_use');
      assert.equal(res.body.detail.endpoints, 1);
      assert.equal((await t.api('GET', `/v1/domains/${d.id}`, { key: owner.api_key })).status, 200);

      await t.node.db!.query('DELETE FROM endpoints WHERE uuid = $1', [uuid]);
      const gone = await t.api('DELETE', `/v1/domains/${d.id}`, { key: owner.api_key });
      assert.equal(gone.status, 204);
      assert.equal(gone.text, '');
      assert.equal((await t.api('GET', `/v1/domains/${d.id}`, { key: owner.api_key })).status, 404);
      assert.equal((await t.api('DELETE', `/v1/domains/${d.id}`, { key: owner.api_key })).status, 404);
    });

    it("answers 404 for another account's domain and 403 without domains:manage, deleting nothing", async () => {
      const d = await claim(owner, 'keep.example.test');
      assert.equal((await t.api('DELETE', `/v1/domains/${d.id}`, { key: other.api_key })).status, 404);
      const member = await orgMember([]);
      const res = await t.api('DELETE', `/v1/domains/${d.id}`, { key: member.key, headers: member.headers });
      assert.equal(res.status, 403);
      assert.equal((await t.api('DELETE', `/v1/domains/${d.id}`, { key: null })).status, 401);
      assert.equal((await t.api('GET', `/v1/domains/${d.id}`, { key: owner.api_key })).status, 200);
    });
  });

  it('counts only a verified domain of the account as usable (findUsableDomain)', async () => {
    const d = await claim(owner, 'usable.example.test');
    const db = t.node.db!;
    assert.equal(await findUsableDomain(db, owner.account_id, d.id), null, 'unverified');
    await t.api('POST', `/v1/admin/domains/${d.id}/verify`);
    assert.equal((await findUsableDomain(db, owner.account_id, d.id))?.name, 'usable.example.test');
    assert.equal(await findUsableDomain(db, other.account_id, d.id), null, 'another account');
  });

  it('describes the domain operations in the OpenAPI document', async () => {
    const doc = (await t.api('GET', '/v1/openapi.json', { key: null })).body;
    for (const [path, method] of [
      ['/v1/domains', 'post'],
      ['/v1/domains', 'get'],
      ['/v1/domains/{id}', 'get'],
      ['/v1/domains/{id}', 'delete'],
      ['/v1/domains/{id}/verify', 'post'],
      ['/v1/admin/domains/{id}/verify', 'post'],
    ]) {
      const op = doc.paths[path]?.[method];
      assert.ok(op, `${method} ${path}`);
      assert.ok(op.summary && op.tags.includes('domains'), `${method} ${path} summary/tags`);
    }
  });
});

describe('DnsVerifier', () => {
  let dns: DnsServer;
  before(async () => {
    dns = await startDnsServer({ 'txt.example.test': ['a', ['b', 'c']] });
  });
  after(() => dns.close());

  it('returns joined records, and [] for NXDOMAIN and NODATA', async () => {
    const v = new DnsVerifier({ resolvers: dns.address });
    assert.deepEqual(await v.lookupTxt('TXT.example.test'), ['a', 'bc']);
    assert.deepEqual(await v.lookupTxt('missing.example.test'), []);
    dns.setTxt('nodata.example.test', []);
    assert.deepEqual(await v.lookupTxt('nodata.example.test'), []);
  });

  it('times out with ETIMEOUT when the server never answers', async () => {
    dns.drop('silent.example.test');
    const v = new DnsVerifier({ resolvers: dns.address, timeoutMs: 300 });
    const started = Date.now();
    await assert.rejects(v.lookupTxt('silent.example.test'), (err: unknown) => err instanceof DnsLookupError && err.code === 'ETIMEOUT');
    assert.ok(Date.now() - started < 2000);
  });

  it('checks the resolver list once, up front', () => {
    assert.deepEqual(parseResolverList(''), []);
    assert.deepEqual(parseResolverList(' 127.0.0.1:5353 , [::1]:53,9.9.9.9 '), ['127.0.0.1:5353', '[::1]:53', '9.9.9.9']);
    assert.throws(() => parseResolverList('dns.google'), /EDGE_DNS_RESOLVERS/);
  });
});
