// edge apply / diff / export over every resource kind the format covers: an apply makes the account match the file,
// a second apply and a diff find nothing to do, and an export applied to an emptied account rebuilds it exactly.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { parse } from 'yaml';
import { createCa, createLeaf } from '../helpers/certs.ts';
import { configSuite, edge, exportedSecrets, fullDocument, referencesIn, SECRETS } from './support.ts';

describe('edge apply, diff and export: the round trip over every resource kind', () => {
  const suite = configSuite();
  let file: string;
  let full: Record<string, any>;

  before(async () => {
    full = await fullDocument('rt');
    file = await suite.files.file('edge.yaml', full);
  });

  it('applies a file to an empty account, then finds nothing to change', async () => {
    const diff = await edge(suite.t, suite.owner.api_key, 'diff', ['-f', file], SECRETS);
    assert.equal(diff.code, 2, diff.stdout + diff.stderr);
    assert.match(diff.stdout, /\+ create endpoint rt-web\./);
    const applied = await edge(suite.t, suite.owner.api_key, 'apply', ['-f', file], SECRETS);
    assert.equal(applied.code, 0, applied.stdout + applied.stderr);
    assert.match(applied.stdout, /Apply: \d+ created, 0 updated, 0 deleted, 0 failed\./);
    const again = await edge(suite.t, suite.owner.api_key, 'diff', ['-f', file], SECRETS);
    assert.equal(again.code, 0, again.stdout);
    assert.match(again.stdout, /No changes/);
    const second = await edge(suite.t, suite.owner.api_key, 'apply', ['-f', file], SECRETS);
    assert.equal(second.code, 0);
    assert.match(second.stdout, /No changes/);
  });

  it('exports the account as a file that rebuilds it after everything is deleted', async () => {
    const exported = await edge(suite.t, suite.owner.api_key, 'export', []);
    assert.equal(exported.code, 0, exported.stderr);
    const doc = parse(exported.stdout);
    const web = doc.endpoints['rt-web.edge.localhost'];
    assert.deepEqual(Object.keys(web).sort(), ['alerts', 'auth', 'capture', 'health_check', 'mtls', 'origin_url', 'ports', 'rate_limits', 'rbac_roles', 'routing_rules', 'tags']);
    assert.deepEqual(Object.keys(doc.endpoints['rt-sso.edge.localhost']).sort(), ['auth', 'oauth_providers', 'tags']);
    assert.deepEqual(Object.keys(doc.alerts), ['all-down']);
    assert.doesNotMatch(exported.stdout, new RegExp(Object.values(SECRETS).join('|')), 'no secret is written');
    const refs = referencesIn(exported.stderr);
    const env = exportedSecrets(refs);
    const exportedFile = await suite.files.file('exported.yaml', exported.stdout);
    const same = await edge(suite.t, suite.owner.api_key, 'diff', ['-f', exportedFile], env);
    assert.equal(same.code, 0, `the export matches the account it came from: ${same.stdout}`);

    const empty = await suite.files.file('empty.yaml', { version: 1 });
    const wiped = await edge(suite.t, suite.owner.api_key, 'apply', ['-f', empty, '--prune']);
    assert.equal(wiped.code, 0, wiped.stdout);
    assert.equal((await suite.t.api('GET', '/v1/endpoints', { key: suite.owner.api_key })).body.total, 0);

    // The API never returns a CA bundle, only its fingerprints: rebuilding mTLS takes the PEM the operator keeps.
    assert.equal(web.mtls.ca_sha256.length, 1);
    const withPem = structuredClone(doc);
    withPem.endpoints['rt-web.edge.localhost'].mtls.ca_bundle_pem = full.endpoints['rt-web'].mtls.ca_bundle_pem;
    const rebuildFile = await suite.files.file('rebuild.yaml', withPem);
    const rebuilt = await edge(suite.t, suite.owner.api_key, 'apply', ['-f', rebuildFile], env);
    assert.equal(rebuilt.code, 0, rebuilt.stdout + rebuilt.stderr);
    const diff = await edge(suite.t, suite.owner.api_key, 'diff', ['-f', exportedFile], env);
    assert.equal(diff.code, 0, diff.stdout);
    const reexported = await edge(suite.t, suite.owner.api_key, 'export', ['-o', 'json']);
    assert.deepEqual(JSON.parse(reexported.stdout), doc);
  });

  it('tells a changed secret from an unchanged one without showing either', async () => {
    const changed = { ...SECRETS, WEBHOOK_SECRET: 'whsec-another-value-9', BOB_PASSWORD: 'bob-password-2' };
    const diff = await edge(suite.t, suite.owner.api_key, 'diff', ['-f', file], changed);
    assert.equal(diff.code, 2);
    assert.match(diff.stdout, /~ update endpoint rt-web\.edge\.localhost\n {4}auth\.basic_users: .*"password":"\(changed\)"/);
    assert.match(diff.stdout, / {4}auth\.webhook: \{.*"secret":"\(secret\)"\} → \{.*"secret":"\(changed\)"\}/);
    assert.match(diff.stdout, /Plan: 0 to create, 1 to update, 0 to delete\./);
    assert.doesNotMatch(diff.stdout, /whsec|bob-password/);
    assert.equal((await edge(suite.t, suite.owner.api_key, 'apply', ['-f', file], changed)).code, 0);
    assert.equal((await edge(suite.t, suite.owner.api_key, 'diff', ['-f', file], changed)).code, 0);
    assert.equal((await edge(suite.t, suite.owner.api_key, 'diff', ['-f', file], SECRETS)).code, 2, 'the old secrets no longer match');
  });

  it('assigns library certificates by name, changes and reverts them, and exports the name', async () => {
    // An account of its own, so the whole-account exports above stay as they are.
    const user = await suite.t.createUser('business');
    const key = user.api_key;
    const domain = await suite.t.api('POST', '/v1/domains', { key, body: { name: 'cert.example.test' } });
    assert.equal(domain.status, 201, domain.text);
    assert.equal((await suite.t.api('POST', `/v1/admin/domains/${domain.body.id}/verify`)).status, 200);
    const ca = await createCa('Config Root');
    const library: Record<string, number> = {};
    for (const name of ['shop-2025', 'shop-2026']) {
      const leaf = await createLeaf(ca, { dns: ['*.cert.example.test'] });
      const up = await suite.t.api('POST', '/v1/certificates', { key, body: { name, certificate_pem: leaf.chainPem, private_key_pem: leaf.keyPem } });
      assert.equal(up.status, 201, up.text);
      library[name] = up.body.id;
    }
    const host = 'www.cert.example.test';
    const fileWith = (certificate: string | null | undefined) =>
      suite.files.file(`cert-${certificate}.yaml`, { version: 1, domains: ['cert.example.test'], endpoints: { [host]: { tags: ['tls'], ...(certificate === undefined ? {} : { certificate }) } } });
    const served = async () => {
      const list = await suite.t.api('GET', '/v1/endpoints', { key });
      return list.body.items.find((e: { hostname: string }) => e.hostname === host)?.certificate_id;
    };

    // A new endpoint gets its certificate once it exists; a second run finds nothing to do.
    const first = await fileWith('shop-2025');
    const created = await edge(suite.t, key, 'apply', ['-f', first]);
    assert.equal(created.code, 0, created.stdout + created.stderr);
    assert.match(created.stdout, / {4}certificate: "shop-2025"/);
    assert.equal(await served(), library['shop-2025']);
    assert.match((await edge(suite.t, key, 'diff', ['-f', first])).stdout, /No changes/);

    // Export writes the name, and its file matches the account.
    const exported = await edge(suite.t, key, 'export', []);
    assert.equal(exported.code, 0, exported.stderr);
    assert.equal(parse(exported.stdout).endpoints[host].certificate, 'shop-2025');
    assert.equal((await edge(suite.t, key, 'diff', ['-f', await suite.files.file('cert-exported.yaml', exported.stdout)])).code, 0);

    // Another certificate, then an omitted one (left alone), then null: the platform certificate.
    const next = await edge(suite.t, key, 'apply', ['-f', await fileWith('shop-2026')]);
    assert.equal(next.code, 0, next.stdout + next.stderr);
    assert.match(next.stdout, / {4}certificate: "shop-2025" → "shop-2026"/);
    assert.equal(await served(), library['shop-2026']);
    assert.match((await edge(suite.t, key, 'diff', ['-f', await fileWith(undefined)])).stdout, /No changes/);
    const reverted = await edge(suite.t, key, 'apply', ['-f', await fileWith(null)]);
    assert.equal(reverted.code, 0, reverted.stdout + reverted.stderr);
    assert.match(reverted.stdout, / {4}certificate: "shop-2026" → null/);
    assert.equal(await served(), null);
    assert.equal(parse((await edge(suite.t, key, 'export', [])).stdout).endpoints[host].certificate, undefined, 'the platform certificate is the default, left out');

    // A name no certificate has (here with another change in the same file) is refused before anything is applied.
    const unknown = await suite.files.file('cert-unknown.yaml', { version: 1, endpoints: { [host]: { tags: ['changed'], certificate: 'shop-1999' } } });
    for (const command of ['diff', 'apply'] as const) {
      const refused = await edge(suite.t, key, command, ['-f', unknown]);
      assert.equal(refused.code, 1, refused.stdout);
      assert.match(refused.stderr, /endpoint www\.cert\.example\.test: no certificate in the library is named "shop-1999".*nothing was applied/);
    }
    // So is a name two certificates share: which one is meant cannot be told.
    const twin = await createLeaf(ca, { dns: ['*.cert.example.test'] });
    assert.equal((await suite.t.api('POST', '/v1/certificates', { key, body: { name: 'shop-2025', certificate_pem: twin.chainPem, private_key_pem: twin.keyPem } })).status, 201);
    const shared = await edge(suite.t, key, 'apply', ['-f', await fileWith('shop-2025')]);
    assert.equal(shared.code, 1, shared.stdout);
    assert.match(shared.stderr, /endpoint www\.cert\.example\.test: 2 certificates in the library are named "shop-2025" \(ids \d+, \d+\); rename all but one; nothing was applied/);
    const after = await suite.t.api('GET', '/v1/endpoints', { key });
    assert.deepEqual(after.body.items.find((e: { hostname: string }) => e.hostname === host).tags, ['tls']);
    assert.equal(await served(), null);
  });
});
