// The certificate library and PUT /v1/endpoints/{id}/certificate over HTTP against the real program: uploads
// (every refusal leaves the library as it was), sealing, deletion, and assignment (every refusal leaves certificate_id).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { SecretBox } from '../../src/shared/secrets.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { feedVersion } from '../helpers/endpoint-api.ts';
import { createCa, createLeaf, createSelfSigned, expiredWindow, futureWindow, unrelatedKeyPem, type Issued, type Leaf } from '../helpers/certs.ts';

type User = Awaited<ReturnType<TestNode['createUser']>>;

const SECRET = 'certificates-test-secret-key-0123456789';

describe('certificates', () => {
  let t: TestNode;
  let ca: Issued;
  let owner: User;
  let other: User;
  let free: User;
  let shop: { id: number; name: string };
  /** shop.example.test and *.shop.example.test, signed by `ca`. */
  let good: Leaf;

  before(async () => {
    t = await startTestNode({ EDGE_SECRET_KEY: SECRET });
    ca = await createCa('Library Root');
    [owner, other, free] = await Promise.all([t.createUser('pro'), t.createUser('pro'), t.createUser('free')]);
    shop = await verifiedDomain(owner, 'shop.example.test');
    good = await createLeaf(ca, { dns: ['shop.example.test', '*.shop.example.test'] });
  });
  after(() => t.close());

  async function verifiedDomain(user: User, name: string) {
    const res = await t.api('POST', '/v1/domains', { key: user.api_key, body: { name } });
    assert.equal(res.status, 201, res.text);
    assert.equal((await t.api('POST', `/v1/admin/domains/${res.body.id}/verify`)).status, 200);
    return { id: res.body.id as number, name };
  }

  async function insertEndpoint(user: User, domainId: number | null, hostname: string) {
    const { rows } = await t.node.db!.query<{ uuid: string; id: number }>(
      'INSERT INTO endpoints (user_id, account_id, domain_id, subdomain, hostname) VALUES ($1, $2, $3, $4, $5) RETURNING id, uuid::text AS uuid',
      [user.id, user.account_id, domainId, hostname.split('.')[0], hostname],
    );
    return rows[0];
  }

  async function upload(user: User, leaf: Leaf, extra: Record<string, unknown> = {}) {
    const res = await t.api('POST', '/v1/certificates', { key: user.api_key, body: { certificate_pem: leaf.chainPem, private_key_pem: leaf.keyPem, ...extra } });
    assert.equal(res.status, 201, res.text);
    return res.body;
  }

  async function library(user: User): Promise<number[]> {
    const res = await t.api('GET', '/v1/certificates', { key: user.api_key });
    assert.equal(res.status, 200);
    return res.body.items.map((c: { id: number }) => c.id);
  }

  async function rowCount(): Promise<number> {
    const { rows } = await t.node.db!.query<{ n: number }>('SELECT count(*)::int AS n FROM certificates');
    return rows[0].n;
  }

  async function feedEntry(topic: string, key: string): Promise<any> {
    const { rows } = await t.node.db!.query<{ data: unknown }>('SELECT data FROM feed_entries WHERE topic = $1 AND key = $2', [topic, key]);
    return rows[0]?.data ?? null;
  }

  async function certificateIdOf(uuid: string): Promise<number | null> {
    const { rows } = await t.node.db!.query<{ certificate_id: number | null }>('SELECT certificate_id FROM endpoints WHERE uuid = $1', [uuid]);
    return rows[0].certificate_id;
  }

  async function orgMember(permissions: string[]) {
    const org = await t.api('POST', '/v1/organizations', { key: owner.api_key, body: { name: `org-${permissions.join('-') || 'none'}` } });
    const member = await t.createUser('pro');
    const add = await t.api('POST', `/v1/organizations/${org.body.id}/members`, { key: owner.api_key, body: { email: member.email, permissions } });
    assert.equal(add.status, 201);
    return { key: member.api_key, headers: { 'x-account-id': String(org.body.id) } };
  }

  describe('POST /v1/certificates', () => {
    it('stores a chain and answers with its parsed facts, never the key', async () => {
      const res = await t.api('POST', '/v1/certificates', {
        key: owner.api_key,
        body: { name: 'shop 2026', certificate_pem: good.chainPem, private_key_pem: good.keyPem },
      });
      assert.equal(res.status, 201, res.text);
      const c = res.body;
      assert.deepEqual(Object.keys(c).sort(), ['created_at', 'expired', 'fingerprint_sha256', 'id', 'issuer', 'name', 'not_after', 'not_before', 'sans', 'status', 'subject']);
      assert.equal(c.name, 'shop 2026');
      assert.equal(c.subject, 'CN=shop.example.test');
      assert.equal(c.issuer, 'CN=Library Root, O=Edge Tests');
      assert.deepEqual(c.sans, ['shop.example.test', '*.shop.example.test']);
      assert.equal(c.not_after, good.cert.notAfter.toISOString());
      assert.equal(c.not_before, good.cert.notBefore.toISOString());
      assert.equal(c.fingerprint_sha256, new X509Certificate(good.certPem).fingerprint256.replace(/:/g, '').toLowerCase());
      assert.equal(c.status, 'active');
      assert.equal(c.expired, false);
      assert.ok(!res.text.includes('PRIVATE KEY'));
    });

    it('seals the private key at rest: no plaintext in the row, and it opens to the uploaded key', async () => {
      const c = await upload(owner, good);
      const { rows } = await t.node.db!.query<Record<string, unknown>>('SELECT * FROM certificates WHERE id = $1', [c.id]);
      const row = rows[0];
      assert.ok(!JSON.stringify(row).includes('PRIVATE KEY'), 'no column holds the key in clear');
      const opened = new SecretBox(SECRET).open(row.private_key_sealed as string);
      assert.match(opened, /^-----BEGIN PRIVATE KEY-----/);
      assert.ok(new X509Certificate(good.certPem).checkPrivateKey(createPrivateKey(opened)));
      assert.equal((row.certificate_pem as string).match(/BEGIN CERTIFICATE/g)?.length, 2, 'the chain is stored');
      assert.equal(c.name, 'shop.example.test', 'the name defaults to the first DNS name');
    });

    it('accepts an RSA certificate with a PKCS#1 key, a CN-only certificate, and an expired one (flagged)', async () => {
      const rsa = await createLeaf(ca, { dns: ['rsa.shop.example.test'], kind: 'rsa' });
      const pkcs1 = createPrivateKey(rsa.keyPem).export({ type: 'pkcs1', format: 'pem' }) as string;
      const res = await t.api('POST', '/v1/certificates', { key: owner.api_key, body: { certificate_pem: rsa.chainPem, private_key_pem: pkcs1 } });
      assert.equal(res.status, 201, res.text);

      const legacy = await createSelfSigned({ dns: [], cn: 'legacy.shop.example.test' });
      assert.deepEqual((await upload(owner, legacy)).sans, ['legacy.shop.example.test']);

      const old = await createLeaf(ca, { dns: ['shop.example.test'], ...expiredWindow() });
      const expired = await upload(owner, old);
      assert.equal(expired.expired, true);
    });

    it('refuses bad uploads with 400 naming the field and reason, leaving the library as it was', async () => {
      const other = await createCa('Unrelated Root');
      const stray = await createLeaf(other, { dns: ['shop.example.test'] });
      const encrypted = createPrivateKey(good.keyPem).export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'pw' }) as string;
      const weak = await createSelfSigned({ dns: ['weak.shop.example.test'], kind: 'rsa1024' });
      const nameless = await createSelfSigned({ dns: [], cn: 'No Host Here' });
      const cases: Array<[string, Record<string, unknown>, string, string]> = [
        ['garbage', { certificate_pem: 'not a certificate', private_key_pem: good.keyPem }, 'certificate_pem', 'no_certificate'],
        ['a key in the certificate field', { certificate_pem: good.keyPem, private_key_pem: good.keyPem }, 'certificate_pem', 'private_key_in_certificate'],
        ['undecodable DER', { certificate_pem: '-----BEGIN CERTIFICATE-----\nAAECAwQF\n-----END CERTIFICATE-----', private_key_pem: good.keyPem }, 'certificate_pem', 'unparsable_certificate'],
        ['a chain in the wrong order', { certificate_pem: `${ca.certPem}\n${good.certPem}`, private_key_pem: good.keyPem }, 'certificate_pem', 'broken_chain'],
        ['a foreign issuer in the chain', { certificate_pem: `${good.certPem}\n${other.certPem}`, private_key_pem: good.keyPem }, 'certificate_pem', 'broken_chain'],
        ['no DNS name', { certificate_pem: nameless.certPem, private_key_pem: nameless.keyPem }, 'certificate_pem', 'no_dns_names'],
        ['a key that does not match', { certificate_pem: good.chainPem, private_key_pem: await unrelatedKeyPem() }, 'private_key_pem', 'key_mismatch'],
        ["another certificate's key", { certificate_pem: good.chainPem, private_key_pem: stray.keyPem }, 'private_key_pem', 'key_mismatch'],
        ['an encrypted key', { certificate_pem: good.chainPem, private_key_pem: encrypted }, 'private_key_pem', 'encrypted_private_key'],
        ['no key', { certificate_pem: good.chainPem, private_key_pem: good.certPem }, 'private_key_pem', 'no_private_key'],
        ['a weak RSA key', { certificate_pem: weak.certPem, private_key_pem: weak.keyPem }, 'private_key_pem', 'weak_private_key'],
      ];
      const before = await library(owner);
      const rows = await rowCount();
      for (const [what, body, field, reason] of cases) {
        const res = await t.api('POST', '/v1/certificates', { key: owner.api_key, body });
        assert.equal(res.status, 400, `${what}: ${res.text}`);
        assert.equal(res.body.code, 'invalid_request', what);
        assert.equal(res.body.detail.field, field, what);
        assert.equal(res.body.detail.reason, reason, what);
        assert.ok(res.body.error.length > 10, what);
      }
      assert.deepEqual(await library(owner), before);
      assert.equal(await rowCount(), rows);
    });

    it('decodes strictly: unknown field, missing field, invalid JSON — storing nothing', async () => {
      const rows = await rowCount();
      const unknown = await t.api('POST', '/v1/certificates', { key: owner.api_key, body: { certificate_pem: good.chainPem, private_key_pem: good.keyPem, status: 'active' } });
      assert.equal(unknown.status, 400);
      assert.equal(unknown.body.code, 'unknown_field');
      const missing = await t.api('POST', '/v1/certificates', { key: owner.api_key, body: { certificate_pem: good.chainPem } });
      assert.equal(missing.status, 400);
      assert.deepEqual(missing.body.detail, { field: 'private_key_pem', reason: 'missing required field' });
      const json = await t.api('POST', '/v1/certificates', { key: owner.api_key, raw: '{"certificate_pem": "', headers: { 'content-type': 'application/json' } });
      assert.equal(json.status, 400);
      assert.equal(json.body.code, 'invalid_json');
      assert.equal(await rowCount(), rows);
    });

    it('answers 401 without a key, 403 without custom_ssl or certificates:manage, storing nothing', async () => {
      const rows = await rowCount();
      const body = { certificate_pem: good.chainPem, private_key_pem: good.keyPem };
      assert.equal((await t.api('POST', '/v1/certificates', { key: null, body })).status, 401);
      const plan = await t.api('POST', '/v1/certificates', { key: free.api_key, body });
      assert.equal(plan.status, 403);
      assert.equal(plan.body.code, 'entitlement_required');
      assert.equal(plan.body.detail.feature, 'custom_ssl');
      const member = await orgMember(['endpoints:update']);
      const perm = await t.api('POST', '/v1/certificates', { key: member.key, headers: member.headers, body });
      assert.equal(perm.status, 403);
      assert.equal(perm.body.code, 'permission_denied');
      assert.equal(perm.body.detail.permission, 'certificates:manage');
      assert.equal(await rowCount(), rows);
    });
  });

  describe('GET /v1/certificates and /v1/certificates/{id}', () => {
    it("lists and gets the account's certificates only", async () => {
      const mine = await upload(owner, good, { name: 'listed' });
      const theirs = await upload(other, await createSelfSigned({ dns: ['other.example.test'] }));
      assert.ok((await library(owner)).includes(mine.id));
      assert.ok(!(await library(owner)).includes(theirs.id));
      assert.deepEqual(await library(other), [theirs.id]);

      const got = await t.api('GET', `/v1/certificates/${mine.id}`, { key: owner.api_key });
      assert.equal(got.status, 200);
      assert.deepEqual(got.body, mine);
      const foreign = await t.api('GET', `/v1/certificates/${theirs.id}`, { key: owner.api_key });
      assert.equal(foreign.status, 404);
      assert.equal(foreign.body.code, 'not_found');
      assert.equal((await t.api('GET', '/v1/certificates/987654321', { key: owner.api_key })).status, 404);
      assert.equal((await t.api('GET', '/v1/certificates/x1', { key: owner.api_key })).body.code, 'invalid_id');
      assert.equal((await t.api('GET', '/v1/certificates', { key: null })).status, 401);
    });
  });

  describe('DELETE /v1/certificates/{id}', () => {
    it('answers 409 naming the endpoints while assigned, and deletes once detached', async () => {
      const c = await upload(owner, good);
      const ep = await insertEndpoint(owner, shop.id, 'del.shop.example.test');
      assert.equal((await t.api('PUT', `/v1/endpoints/${ep.uuid}/certificate`, { key: owner.api_key, body: { certificate_id: c.id } })).status, 200);

      const busy = await t.api('DELETE', `/v1/certificates/${c.id}`, { key: owner.api_key });
      assert.equal(busy.status, 409);
      assert.equal(busy.body.code, 'conflict');
      assert.deepEqual(busy.body.detail, { reason: 'certificate_in_use', endpoints: [ep.uuid] });
      assert.equal((await t.api('GET', `/v1/certificates/${c.id}`, { key: owner.api_key })).status, 200);

      assert.equal((await t.api('PUT', `/v1/endpoints/${ep.uuid}/certificate`, { key: owner.api_key, body: { use_default: true } })).status, 200);
      const gone = await t.api('DELETE', `/v1/certificates/${c.id}`, { key: owner.api_key });
      assert.equal(gone.status, 204);
      assert.equal((await t.api('GET', `/v1/certificates/${c.id}`, { key: owner.api_key })).status, 404);
      assert.equal(await feedEntry('certificate', String(c.id)), null);
    });

    it("answers 404 for another account's certificate, 403 without certificates:manage, 401 without a key", async () => {
      const c = await upload(owner, good);
      assert.equal((await t.api('DELETE', `/v1/certificates/${c.id}`, { key: other.api_key })).status, 404);
      const member = await orgMember(['endpoints:update']);
      const res = await t.api('DELETE', `/v1/certificates/${c.id}`, { key: member.key, headers: member.headers });
      assert.equal(res.status, 403);
      assert.equal(res.body.code, 'permission_denied');
      assert.equal((await t.api('DELETE', `/v1/certificates/${c.id}`, { key: null })).status, 401);
      assert.equal((await t.api('DELETE', '/v1/certificates/nope', { key: owner.api_key })).status, 400);
      assert.equal((await t.api('GET', `/v1/certificates/${c.id}`, { key: owner.api_key })).status, 200);
    });
  });

  describe('PUT /v1/endpoints/{id}/certificate', () => {
    it('assigns a certificate and publishes the certificate and the endpoint to the feed', async () => {
      const c = await upload(owner, good, { name: 'wildcard' });
      const ep = await insertEndpoint(owner, shop.id, 'www.shop.example.test');
      const res = await t.api('PUT', `/v1/endpoints/${ep.uuid}/certificate`, { key: owner.api_key, body: { certificate_id: c.id, use_default: false } });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body, { ok: true, certificate_id: c.id, certificate_name: 'wildcard' });
      assert.equal(await certificateIdOf(ep.uuid), c.id);

      const published = await feedEntry('certificate', String(c.id));
      assert.equal(published.id, c.id);
      assert.equal(published.account_id, owner.account_id);
      assert.deepEqual(published.sans, c.sans);
      assert.equal(published.not_after, c.not_after);
      assert.match(published.certificate_pem, /BEGIN CERTIFICATE/);
      assert.ok(!JSON.stringify(published).includes('PRIVATE KEY'), 'the feed carries the key sealed only');
      assert.match(new SecretBox(SECRET).open(published.private_key_sealed), /BEGIN PRIVATE KEY/);
      assert.equal((await feedEntry('endpoint', ep.uuid)).certificate_id, c.id);
    });

    it('covers the bare domain with an exact SAN, and refuses a wildcard for the apex or two levels down', async () => {
      const c = await upload(owner, good);
      const apex = await insertEndpoint(owner, shop.id, 'shop.example.test');
      assert.equal((await t.api('PUT', `/v1/endpoints/${apex.uuid}/certificate`, { key: owner.api_key, body: { certificate_id: c.id } })).status, 200);

      // "*.bare.example.test" lies in the domain (no domain_mismatch) but never covers its apex (RFC 6125 §6.4.3).
      const bare = await verifiedDomain(owner, 'bare.example.test');
      const wildBare = await upload(owner, await createLeaf(ca, { dns: ['*.bare.example.test'] }));
      const bareApex = await insertEndpoint(owner, bare.id, 'bare.example.test');
      const notApex = await t.api('PUT', `/v1/endpoints/${bareApex.uuid}/certificate`, { key: owner.api_key, body: { certificate_id: wildBare.id } });
      assert.equal(notApex.status, 400);
      assert.equal(notApex.body.detail.reason, 'hostname_not_covered');
      assert.equal(await certificateIdOf(bareApex.uuid), null);

      const wildOnly = await upload(owner, await createLeaf(ca, { dns: ['*.shop.example.test'] }));
      const deep = await insertEndpoint(owner, shop.id, 'a.b.shop.example.test');
      const res = await t.api('PUT', `/v1/endpoints/${deep.uuid}/certificate`, { key: owner.api_key, body: { certificate_id: wildOnly.id } });
      assert.equal(res.status, 400);
      assert.equal(res.body.detail.reason, 'hostname_not_covered');
      assert.equal(await certificateIdOf(deep.uuid), null);
    });

    it('reverts with use_default, null or 0: detached, kept in the library, withdrawn from the edges', async () => {
      const c = await upload(owner, good);
      const ep = await insertEndpoint(owner, shop.id, 'revert.shop.example.test');
      for (const body of [{ use_default: true }, { certificate_id: null }, { certificate_id: 0 }, { certificate_id: 0, use_default: true }, { certificate_id: null, use_default: false }]) {
        assert.equal((await t.api('PUT', `/v1/endpoints/${ep.uuid}/certificate`, { key: owner.api_key, body: { certificate_id: c.id } })).status, 200);
        assert.ok(await feedEntry('certificate', String(c.id)));
        const res = await t.api('PUT', `/v1/endpoints/${ep.uuid}/certificate`, { key: owner.api_key, body });
        assert.equal(res.status, 200, JSON.stringify(body));
        assert.deepEqual(res.body, { ok: true, certificate_id: null }, 'certificate_name omitted on revert');
        assert.equal(await certificateIdOf(ep.uuid), null);
        assert.equal((await feedEntry('endpoint', ep.uuid)).certificate_id, null);
        assert.equal(await feedEntry('certificate', String(c.id)), null, 'no endpoint serves it any more');
      }
      assert.equal((await t.api('GET', `/v1/certificates/${c.id}`, { key: owner.api_key })).status, 200);
    });

    it("shows the assignment in the endpoint's view (get and list): the id once assigned, null after revert", async () => {
      const c = await upload(owner, good);
      const ep = await insertEndpoint(owner, shop.id, 'viewed.shop.example.test');
      const seen = async () => {
        const one = await t.api('GET', `/v1/endpoints/${ep.uuid}`, { key: owner.api_key });
        assert.equal(one.status, 200, one.text);
        const list = await t.api('GET', '/v1/endpoints?page_size=100', { key: owner.api_key });
        assert.equal(list.status, 200, list.text);
        const listed = list.body.items.find((e: { uuid: string }) => e.uuid === ep.uuid);
        assert.equal(listed.certificate_id, one.body.certificate_id, 'the list shows what get shows');
        return one.body.certificate_id;
      };
      assert.equal(await seen(), null, 'a new endpoint serves the platform certificate');
      assert.equal((await t.api('PUT', `/v1/endpoints/${ep.uuid}/certificate`, { key: owner.api_key, body: { certificate_id: c.id } })).status, 200);
      assert.equal(await seen(), c.id);
      assert.equal((await t.api('PUT', `/v1/endpoints/${ep.uuid}/certificate`, { key: owner.api_key, body: { use_default: true } })).status, 200);
      assert.equal(await seen(), null);
    });

    it('keeps a certificate published while another endpoint still serves it, and withdraws a replaced one', async () => {
      const a = await upload(owner, good, { name: 'a' });
      const b = await upload(owner, good, { name: 'b' });
      const one = await insertEndpoint(owner, shop.id, 'one.shop.example.test');
      const two = await insertEndpoint(owner, shop.id, 'two.shop.example.test');
      for (const ep of [one, two]) await t.api('PUT', `/v1/endpoints/${ep.uuid}/certificate`, { key: owner.api_key, body: { certificate_id: a.id } });
      await t.api('PUT', `/v1/endpoints/${one.uuid}/certificate`, { key: owner.api_key, body: { use_default: true } });
      assert.ok(await feedEntry('certificate', String(a.id)), 'still served by the second endpoint');
      const swap = await t.api('PUT', `/v1/endpoints/${two.uuid}/certificate`, { key: owner.api_key, body: { certificate_id: b.id } });
      assert.deepEqual(swap.body, { ok: true, certificate_id: b.id, certificate_name: 'b' });
      assert.equal(await feedEntry('certificate', String(a.id)), null);
      assert.ok(await feedEntry('certificate', String(b.id)));
    });

    describe('refusals leave certificate_id (and the feed) as they were', () => {
      let current: { id: number };
      let ep: { uuid: string; id: number };
      before(async () => {
        current = await upload(owner, good, { name: 'current' });
        ep = await insertEndpoint(owner, shop.id, 'api.shop.example.test');
        assert.equal((await t.api('PUT', `/v1/endpoints/${ep.uuid}/certificate`, { key: owner.api_key, body: { certificate_id: current.id } })).status, 200);
      });

      async function refused(body: unknown, opts: { key?: string; headers?: Record<string, string>; raw?: string; uuid?: string } = {}) {
        const version = await feedVersion(t);
        const res = await t.api('PUT', `/v1/endpoints/${opts.uuid ?? ep.uuid}/certificate`, {
          key: opts.key ?? owner.api_key,
          headers: opts.raw ? { 'content-type': 'application/json', ...opts.headers } : opts.headers,
          ...(opts.raw ? { raw: opts.raw } : { body }),
        });
        assert.equal(await certificateIdOf(ep.uuid), current.id, `certificate_id unchanged after ${res.status} ${res.text}`);
        assert.equal(await feedVersion(t), version, 'nothing published');
        return res;
      }

      it('400: not active, expired, not yet valid, domain mismatch, hostname not covered', async () => {
        const revoked = await upload(owner, good, { name: 'revoked' });
        await t.node.db!.query("UPDATE certificates SET status = 'revoked' WHERE id = $1", [revoked.id]);
        const expired = await upload(owner, await createLeaf(ca, { dns: ['*.shop.example.test'], ...expiredWindow() }));
        const future = await upload(owner, await createLeaf(ca, { dns: ['*.shop.example.test'], ...futureWindow() }));
        const elsewhere = await upload(owner, await createLeaf(ca, { dns: ['www.other.example.test', '*.example.org'] }));
        const sibling = await upload(owner, await createLeaf(ca, { dns: ['www.shop.example.test'] }));
        for (const [id, reason] of [
          [revoked.id, 'certificate_not_active'],
          [expired.id, 'certificate_expired'],
          [future.id, 'certificate_not_yet_valid'],
          [elsewhere.id, 'domain_mismatch'],
          [sibling.id, 'hostname_not_covered'],
        ] as const) {
          const res = await refused({ certificate_id: id });
          assert.equal(res.status, 400, reason);
          assert.equal(res.body.code, 'invalid_request');
          assert.equal(res.body.detail.reason, reason);
        }
      });

      it('400: unknown field, invalid JSON, wrong types, no choice made, contradictory fields', async () => {
        const unknown = await refused({ certificate_id: current.id, force: true });
        assert.equal(unknown.status, 400);
        assert.equal(unknown.body.code, 'unknown_field');
        assert.deepEqual(unknown.body.detail, { field: 'force', reason: 'unknown field' });
        assert.equal((await refused(null, { raw: '{"certificate_id": ' })).body.code, 'invalid_json');
        for (const body of [{ certificate_id: String(current.id) }, { certificate_id: -1 }, { certificate_id: 1.5 }, { use_default: 'yes' }]) {
          const res = await refused(body);
          assert.equal(res.status, 400, JSON.stringify(body));
          assert.equal(res.body.code, 'invalid_request');
        }
        for (const body of [{}, { use_default: false }]) {
          const res = await refused(body);
          assert.equal(res.status, 400, JSON.stringify(body));
          assert.equal(res.body.detail.reason, 'missing_field');
        }
        assert.equal((await refused(undefined, { raw: '' })).body.detail.reason, 'missing_field', 'no body at all is not a revert');
        const both = await refused({ use_default: true, certificate_id: current.id });
        assert.equal(both.body.detail.reason, 'conflicting_fields');
      });

      it('404: a certificate of another account, a missing one, a huge id; an endpoint of another account or missing', async () => {
        const foreign = await upload(other, await createLeaf(ca, { dns: ['*.shop.example.test'] }));
        for (const certificate_id of [foreign.id, 987654321, 2 ** 62]) {
          const res = await refused({ certificate_id });
          assert.equal(res.status, 404, String(certificate_id));
          assert.equal(res.body.code, 'not_found');
          assert.match(res.body.error, /Certificate/);
        }
        const theirs = await insertEndpoint(other, null, 'x-other.edge.localhost');
        const res = await refused({ certificate_id: current.id }, { uuid: theirs.uuid });
        assert.equal(res.status, 404);
        assert.match(res.body.error, /Endpoint/);
        assert.equal((await refused({ certificate_id: current.id }, { uuid: '00000000-0000-4000-8000-000000000000' })).status, 404);
        const bad = await refused({ certificate_id: current.id }, { uuid: 'not-a-uuid' });
        assert.equal(bad.status, 400);
        assert.equal(bad.body.code, 'invalid_id');
      });

      it('403: plan without custom_ssl, member without endpoints:update; 401 without a key', async () => {
        const freeEp = await insertEndpoint(free, null, 'free-ep.edge.localhost');
        const plan = await refused({ use_default: true }, { key: free.api_key, uuid: freeEp.uuid });
        assert.equal(plan.status, 403);
        assert.equal(plan.body.code, 'entitlement_required');
        assert.equal(plan.body.detail.feature, 'custom_ssl');
        const member = await orgMember(['endpoints:read', 'certificates:manage']);
        const perm = await refused({ certificate_id: current.id }, { key: member.key, headers: member.headers });
        assert.equal(perm.status, 403);
        assert.equal(perm.body.code, 'permission_denied');
        assert.equal(perm.body.detail.permission, 'endpoints:update');
        const anon = await t.api('PUT', `/v1/endpoints/${ep.uuid}/certificate`, { key: null, body: { use_default: true } });
        assert.equal(anon.status, 401);
        assert.equal(await certificateIdOf(ep.uuid), current.id);
      });

      it("judges an admin acting on another account's endpoint by that account's plan", async () => {
        const freeEp = await insertEndpoint(free, null, 'admin-free-ep.edge.localhost');
        // No key: the test node's admin.
        const res = await t.api('PUT', `/v1/endpoints/${freeEp.uuid}/certificate`, { body: { use_default: true } });
        assert.equal(res.status, 403);
        assert.equal(res.body.code, 'entitlement_required');
        assert.match(res.body.error, /of the endpoint's account/);
        // The owner's plan has custom_ssl: the admin gets past the entitlement to the endpoint's own checks.
        const platform = await insertEndpoint(owner, null, 'admin-pro-ep.edge.localhost');
        const past = await t.api('PUT', `/v1/endpoints/${platform.uuid}/certificate`, { body: { use_default: true } });
        assert.equal(past.status, 400);
        assert.equal(past.body.detail.reason, 'not_custom_domain');
      });
    });

    it('400 for an endpoint on the platform domain or on a domain that is not verified, changing nothing', async () => {
      const c = await upload(owner, good);
      const platform = await insertEndpoint(owner, null, 'plain-words-here.edge.localhost');
      for (const body of [{ certificate_id: c.id }, { use_default: true }]) {
        const res = await t.api('PUT', `/v1/endpoints/${platform.uuid}/certificate`, { key: owner.api_key, body });
        assert.equal(res.status, 400);
        assert.equal(res.body.detail.reason, 'not_custom_domain');
      }
      const claimed = await t.api('POST', '/v1/domains', { key: owner.api_key, body: { name: 'unverified.example.test' } });
      const pending = await insertEndpoint(owner, claimed.body.id, 'www.unverified.example.test');
      const res = await t.api('PUT', `/v1/endpoints/${pending.uuid}/certificate`, { key: owner.api_key, body: { certificate_id: c.id } });
      assert.equal(res.status, 400);
      assert.equal(res.body.detail.reason, 'domain_not_owned');
      assert.equal(await certificateIdOf(pending.uuid), null);
      assert.equal(await certificateIdOf(platform.uuid), null);
    });
  });

  it('describes the certificate operations in the OpenAPI document', async () => {
    const doc = (await t.api('GET', '/v1/openapi.json', { key: null })).body;
    for (const [path, method] of [
      ['/v1/certificates', 'post'],
      ['/v1/certificates', 'get'],
      ['/v1/certificates/{id}', 'get'],
      ['/v1/certificates/{id}', 'delete'],
      ['/v1/endpoints/{id}/certificate', 'put'],
    ]) {
      const op = doc.paths[path]?.[method];
      assert.ok(op?.summary, `${method} ${path}`);
      assert.ok(op.tags.includes('certificates'));
    }
    const put = doc.paths['/v1/endpoints/{id}/certificate'].put;
    assert.ok(put.requestBody.content['application/json'].schema.properties.use_default);
    assert.equal(put.requestBody.content['application/json'].schema.additionalProperties, false);
  });
});
