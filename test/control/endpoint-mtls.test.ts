// Endpoint client-certificate (mTLS) policy over HTTP against the real program: modes, CA bundle validation,
// publication to the feed, and refusals that leave the stored policy exactly as it was.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { feedVersion } from '../helpers/endpoint-api.ts';
import { createCa, createLeaf, expiredWindow, type Issued } from '../helpers/certs.ts';

type User = Awaited<ReturnType<TestNode['createUser']>>;

describe('endpoint mTLS', () => {
  let t: TestNode;
  let owner: User;
  let other: User;
  let clients: Issued;
  let partners: Issued;

  before(async () => {
    t = await startTestNode();
    [owner, other] = await Promise.all([t.createUser('free'), t.createUser('free')]);
    clients = await createCa('Clients Root');
    partners = await createCa('Partners Root', { kind: 'rsa' });
  });
  after(() => t.close());

  async function insertEndpoint(user: User, hostname: string) {
    const { rows } = await t.node.db!.query<{ uuid: string; id: number }>(
      'INSERT INTO endpoints (user_id, account_id, subdomain, hostname) VALUES ($1, $2, $3, $4) RETURNING id, uuid::text AS uuid',
      [user.id, user.account_id, hostname.split('.')[0], hostname],
    );
    return rows[0];
  }

  async function stored(uuid: string) {
    const { rows } = await t.node.db!.query<{ mtls_mode: string; mtls_ca_pem: string | null }>('SELECT mtls_mode, mtls_ca_pem FROM endpoints WHERE uuid = $1', [uuid]);
    return rows[0];
  }

  async function feedEndpoint(uuid: string): Promise<any> {
    const { rows } = await t.node.db!.query<{ data: unknown }>("SELECT data FROM feed_entries WHERE topic = 'endpoint' AND key = $1", [uuid]);
    return rows[0]?.data ?? null;
  }

  async function orgMember(permissions: string[]) {
    const org = await t.api('POST', '/v1/organizations', { key: owner.api_key, body: { name: `org-${permissions.join('-') || 'none'}` } });
    const member = await t.createUser('free');
    const add = await t.api('POST', `/v1/organizations/${org.body.id}/members`, { key: owner.api_key, body: { email: member.email, permissions } });
    assert.equal(add.status, 201);
    const label = `org-${org.body.id}`;
    const { rows } = await t.node.db!.query<{ uuid: string }>(
      'INSERT INTO endpoints (user_id, account_id, subdomain, hostname) VALUES ($1, $2, $3, $4) RETURNING uuid::text AS uuid',
      [owner.id, org.body.id, label, `${label}.edge.localhost`],
    );
    return { key: member.api_key, headers: { 'x-account-id': String(org.body.id) }, uuid: rows[0].uuid };
  }

  it('starts disabled with no CA certificates', async () => {
    const ep = await insertEndpoint(owner, 'fresh.edge.localhost');
    const res = await t.api('GET', `/v1/endpoints/${ep.uuid}/mtls`, { key: owner.api_key });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { mode: 'disabled', ca_certificates: [] });
  });

  it('requires client certificates from a CA bundle, stores it cleanly and publishes the endpoint', async () => {
    const ep = await insertEndpoint(owner, 'mtls.edge.localhost');
    const res = await t.api('PUT', `/v1/endpoints/${ep.uuid}/mtls`, { key: owner.api_key, body: { mode: 'required', ca_bundle_pem: `# our clients\n${clients.certPem}` } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.mode, 'required');
    assert.equal(res.body.ca_certificates.length, 1);
    const [ca] = res.body.ca_certificates;
    assert.equal(ca.subject, 'CN=Clients Root, O=Edge Tests');
    assert.match(ca.fingerprint_sha256, /^[0-9a-f]{64}$/);
    assert.equal(ca.not_after, clients.cert.notAfter.toISOString());

    const row = await stored(ep.uuid);
    assert.equal(row.mtls_mode, 'required');
    assert.ok(!row.mtls_ca_pem!.includes('# our clients'), 'explanatory text is not stored');
    const published = await feedEndpoint(ep.uuid);
    assert.equal(published.mtls_mode, 'required');
    assert.equal(published.mtls_ca_pem, row.mtls_ca_pem);

    const got = await t.api('GET', `/v1/endpoints/${ep.uuid}/mtls`, { key: owner.api_key });
    assert.deepEqual(got.body, res.body);
  });

  it('accepts several CAs in optional mode, dropping duplicates, and replaces the previous bundle', async () => {
    const ep = await insertEndpoint(owner, 'optional.edge.localhost');
    await t.api('PUT', `/v1/endpoints/${ep.uuid}/mtls`, { key: owner.api_key, body: { mode: 'required', ca_bundle_pem: partners.certPem } });
    const res = await t.api('PUT', `/v1/endpoints/${ep.uuid}/mtls`, {
      key: owner.api_key,
      body: { mode: 'optional', ca_bundle_pem: `${clients.certPem}${partners.certPem}${clients.certPem}` },
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.mode, 'optional');
    assert.deepEqual(
      res.body.ca_certificates.map((c: { subject: string }) => c.subject),
      ['CN=Clients Root, O=Edge Tests', 'CN=Partners Root, O=Edge Tests'],
    );
    assert.equal((await stored(ep.uuid)).mtls_ca_pem!.match(/BEGIN CERTIFICATE/g)?.length, 2);
  });

  it('disabling clears the bundle and publishes it', async () => {
    const ep = await insertEndpoint(owner, 'off.edge.localhost');
    await t.api('PUT', `/v1/endpoints/${ep.uuid}/mtls`, { key: owner.api_key, body: { mode: 'required', ca_bundle_pem: clients.certPem } });
    const res = await t.api('PUT', `/v1/endpoints/${ep.uuid}/mtls`, { key: owner.api_key, body: { mode: 'disabled' } });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { mode: 'disabled', ca_certificates: [] });
    assert.deepEqual(await stored(ep.uuid), { mtls_mode: 'disabled', mtls_ca_pem: null });
    const published = await feedEndpoint(ep.uuid);
    assert.equal(published.mtls_mode, 'disabled');
    assert.equal(published.mtls_ca_pem, null);
  });

  describe('refusals leave the policy as it was', () => {
    let ep: { uuid: string };
    let before_: { mtls_mode: string; mtls_ca_pem: string | null };
    before(async () => {
      ep = await insertEndpoint(owner, 'guarded.edge.localhost');
      const res = await t.api('PUT', `/v1/endpoints/${ep.uuid}/mtls`, { key: owner.api_key, body: { mode: 'required', ca_bundle_pem: clients.certPem } });
      assert.equal(res.status, 200);
      before_ = await stored(ep.uuid);
    });

    async function refused(body: unknown, opts: { key?: string | null; headers?: Record<string, string>; uuid?: string } = {}) {
      const version = await feedVersion(t);
      const res = await t.api('PUT', `/v1/endpoints/${opts.uuid ?? ep.uuid}/mtls`, { key: opts.key === undefined ? owner.api_key : opts.key, headers: opts.headers, body });
      assert.deepEqual(await stored(ep.uuid), before_, `unchanged after ${res.status} ${res.text}`);
      assert.equal(await feedVersion(t), version, 'nothing published');
      return res;
    }

    it('400 for bad bundles, naming the reason', async () => {
      const leaf = await createLeaf(clients, { dns: ['client.example.test'] });
      const expired = await createCa('Old Root', expiredWindow());
      const cases: Array<[string, string]> = [
        ['garbage', 'no_certificate'],
        [`${clients.certPem}\n${leaf.certPem}`, 'not_a_ca'],
        [expired.certPem, 'expired_ca'],
        [`${clients.certPem}\n${clients.keyPem}`, 'private_key_in_certificate'],
        ['-----BEGIN CERTIFICATE-----\nAAECAwQF\n-----END CERTIFICATE-----', 'unparsable_certificate'],
        [clients.certPem.repeat(51), 'too_many_certificates'],
      ];
      for (const [ca_bundle_pem, reason] of cases) {
        const res = await refused({ mode: 'optional', ca_bundle_pem });
        assert.equal(res.status, 400, reason);
        assert.equal(res.body.code, 'invalid_request');
        assert.equal(res.body.detail.field, 'ca_bundle_pem');
        assert.equal(res.body.detail.reason, reason);
      }
    });

    it('400 for a missing or unknown mode, a missing bundle, a bundle with disabled, unknown fields, invalid JSON', async () => {
      const noMode = await refused({ ca_bundle_pem: clients.certPem });
      assert.equal(noMode.status, 400);
      assert.equal(noMode.body.detail.field, 'mode');
      assert.equal((await refused({ mode: 'sometimes', ca_bundle_pem: clients.certPem })).status, 400);
      const noBundle = await refused({ mode: 'required' });
      assert.equal(noBundle.status, 400);
      assert.equal(noBundle.body.detail.reason, 'missing_field');
      const extra = await refused({ mode: 'disabled', ca_bundle_pem: clients.certPem });
      assert.equal(extra.status, 400);
      assert.equal(extra.body.detail.reason, 'unexpected_field');
      const unknown = await refused({ mode: 'disabled', verify_depth: 2 });
      assert.equal(unknown.body.code, 'unknown_field');
      assert.deepEqual(unknown.body.detail, { field: 'verify_depth', reason: 'unknown field' });
      const json = await t.api('PUT', `/v1/endpoints/${ep.uuid}/mtls`, { key: owner.api_key, raw: '{"mode"', headers: { 'content-type': 'application/json' } });
      assert.equal(json.body.code, 'invalid_json');
      assert.deepEqual(await stored(ep.uuid), before_);
    });

    it("404 for another account's endpoint or a missing one, 400 for a malformed uuid", async () => {
      const theirs = await insertEndpoint(other, 'theirs.edge.localhost');
      const foreign = await refused({ mode: 'disabled' }, { uuid: theirs.uuid });
      assert.equal(foreign.status, 404);
      assert.equal((await stored(theirs.uuid)).mtls_mode, 'disabled');
      assert.equal((await t.api('GET', `/v1/endpoints/${theirs.uuid}/mtls`, { key: owner.api_key })).status, 404);
      assert.equal((await refused({ mode: 'disabled' }, { uuid: '00000000-0000-4000-8000-000000000000' })).status, 404);
      const bad = await refused({ mode: 'disabled' }, { uuid: 'nope' });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.code, 'invalid_id');
    });

    it('401 without a key; 403 without endpoints:update (write) or endpoints:read (read)', async () => {
      assert.equal((await refused({ mode: 'disabled' }, { key: null })).status, 401);
      assert.equal((await t.api('GET', `/v1/endpoints/${ep.uuid}/mtls`, { key: null })).status, 401);

      const reader = await orgMember(['endpoints:read']);
      const write = await t.api('PUT', `/v1/endpoints/${reader.uuid}/mtls`, { key: reader.key, headers: reader.headers, body: { mode: 'disabled' } });
      assert.equal(write.status, 403);
      assert.equal(write.body.code, 'permission_denied');
      assert.equal(write.body.detail.permission, 'endpoints:update');
      assert.equal((await t.api('GET', `/v1/endpoints/${reader.uuid}/mtls`, { key: reader.key, headers: reader.headers })).status, 200);

      const nobody = await orgMember([]);
      const read = await t.api('GET', `/v1/endpoints/${nobody.uuid}/mtls`, { key: nobody.key, headers: nobody.headers });
      assert.equal(read.status, 403);
      assert.equal(read.body.detail.permission, 'endpoints:read');

      const updater = await orgMember(['endpoints:update']);
      const ok = await t.api('PUT', `/v1/endpoints/${updater.uuid}/mtls`, { key: updater.key, headers: updater.headers, body: { mode: 'optional', ca_bundle_pem: clients.certPem } });
      assert.equal(ok.status, 200);
    });
  });

  it('describes the mTLS operations in the OpenAPI document', async () => {
    const doc = (await t.api('GET', '/v1/openapi.json', { key: null })).body;
    for (const method of ['get', 'put']) {
      const op = doc.paths['/v1/endpoints/{id}/mtls']?.[method];
      assert.ok(op?.summary, method);
      assert.ok(op.tags.includes('mtls'));
    }
  });
});
