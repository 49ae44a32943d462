// Editing an endpoint's policies in Chromium against a real node: an RBAC role (name, description, method and path
// patterns, rate; the headers the form does not show kept) and an OAuth/OIDC provider (pre-filled from GET, an empty
// client secret keeping the stored one), each checked through the API afterwards; a refused edit shows the API's
// reason and changes nothing; an axe pass on each edit form.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { accessibilityViolations, launchBrowser, signedInPage, skipConsoleSuite } from '../helpers/console.ts';
import { createEndpoint, expectBody, nodeWithOwner, storeRows, type User } from '../helpers/endpoint-api.ts';
import type { TestNode } from '../helpers/node.ts';

const WAIT = { timeout: 20_000 };

describe('console: editing endpoint policies', { skip: skipConsoleSuite() }, () => {
  let t: TestNode;
  let owner: User;
  let browser: Browser;
  let endpoint: { uuid: string; hostname: string };
  let page: Page;
  const sql = storeRows(() => t);

  const noViolations = async (where: string) => {
    const found = await accessibilityViolations(page);
    assert.deepEqual(found, [], `${where}: ${JSON.stringify(found, null, 2)}`);
  };
  const open = async (tab: string) => {
    await page.goto(`${t.controlUrl}/console/endpoints/${endpoint.uuid}/${tab}`);
    await page.getByRole('button', { name: 'Sign out' }).waitFor(WAIT);
  };
  const call = (method: string, path: string, body?: unknown) => t.api(method, `/v1/endpoints/${endpoint.uuid}/${path}`, { key: owner.api_key, body });

  before(async () => {
    ({ t, owner } = await nodeWithOwner());
    endpoint = await createEndpoint(t, owner);
    browser = await launchBrowser();
    page = await signedInPage(browser, t.controlUrl, owner.api_key);
  });
  after(async () => {
    await page?.context().close();
    await browser?.close();
    await t?.close();
  });

  it('edits an RBAC role pre-filled with what it holds, keeps what the form does not show; a taken name is refused and changes nothing', async () => {
    const readers = await expectBody(
      201,
      call('POST', 'rbac/roles', {
        name: 'readers',
        description: 'read the docs',
        permissions: { allowed_methods: ['GET'], allowed_paths: ['/docs/**'], headers: { 'x-role': 'reader' } },
      }),
    );
    await expectBody(201, call('POST', 'rbac/roles', { name: 'writers', permissions: { allowed_methods: ['POST'] } }));
    await open('rbac');
    await page.getByRole('button', { name: 'Edit role readers' }).click();
    const form = page.getByRole('form', { name: 'Edit role readers' });
    const name = form.getByLabel('Name', { exact: true });
    assert.equal(await name.inputValue(), 'readers');
    assert.equal(await form.getByLabel('Description (optional)').inputValue(), 'read the docs');
    assert.equal(await form.getByLabel('Allowed methods (comma separated, * for any)').inputValue(), 'GET');
    assert.equal(await form.getByLabel('Allowed paths (globs: /api/*, /files/**)').inputValue(), '/docs/**');
    await noViolations('rbac role edit form');

    await name.fill('docs readers');
    await form.getByLabel('Description (optional)').fill('');
    await form.getByLabel('Allowed methods (comma separated, * for any)').fill('get, head');
    await form.getByLabel('Allowed paths (globs: /api/*, /files/**)').fill('/docs/**, /api/*');
    await form.getByLabel('Denied paths').fill('/docs/private');
    await form.getByLabel('Requests per second (optional)').fill('5');
    await form.getByRole('button', { name: 'Save role' }).click();
    await form.waitFor({ state: 'detached', ...WAIT });
    await page.getByRole('row').filter({ hasText: 'docs readers' }).getByText('GET, HEAD / —').waitFor(WAIT);

    const roles = await expectBody(200, call('GET', 'rbac/roles'));
    const saved = roles.find((r: { id: number }) => r.id === readers.id);
    assert.equal(saved.name, 'docs readers');
    assert.equal(saved.description, undefined, 'the emptied description is cleared');
    assert.deepEqual(saved.permissions, {
      allowed_methods: ['GET', 'HEAD'],
      denied_methods: [],
      allowed_paths: ['/docs/**', '/api/*'],
      denied_paths: ['/docs/private'],
      rate_limit_rps: 5,
      headers: { 'x-role': 'reader' },
      metadata: {},
    });

    // Another role's name: the API's reason beside the form, the role as it was.
    await page.getByRole('button', { name: 'Edit role docs readers' }).click();
    const again = page.getByRole('form', { name: 'Edit role docs readers' });
    await again.getByLabel('Name', { exact: true }).fill('writers');
    await again.getByLabel('Allowed methods (comma separated, * for any)').fill('DELETE');
    await again.getByRole('button', { name: 'Save role' }).click();
    await again.getByRole('alert').getByText('already has a role named "writers"').waitFor(WAIT);
    assert.deepEqual(await expectBody(200, call('GET', 'rbac/roles')), roles);
    await again.getByRole('button', { name: 'Cancel' }).click();
    await again.waitFor({ state: 'detached', ...WAIT });
  });

  it('edits an OAuth/OIDC provider pre-filled from the API, an empty secret keeping the stored one; an http issuer is refused and changes nothing', async () => {
    const created = await expectBody(
      201,
      call('POST', 'oauth/providers', {
        kind: 'oidc',
        name: 'Company SSO',
        issuer: 'https://idp.example.com',
        client_id: 'edge-client',
        client_secret: 'first-secret-0123456789',
        allowed_emails: ['alice@example.com'],
      }),
    );
    await expectBody(204, call('PUT', `oauth/providers/${created.id}/toggle`, { enabled: false }));
    const sealed = async () => (await sql<{ s: string }>('SELECT client_secret_sealed AS s FROM endpoint_oauth_providers WHERE id = $1', [created.id]))[0].s;
    const secretBefore = await sealed();

    await open('auth');
    await page.getByRole('button', { name: 'Edit Company SSO' }).click();
    const form = page.getByRole('form', { name: 'Edit provider Company SSO' });
    assert.equal(await form.getByLabel('Issuer URL').inputValue(), 'https://idp.example.com');
    assert.equal(await form.getByLabel('Client id').inputValue(), 'edge-client');
    assert.equal(await form.getByLabel('Allowed e-mail addresses (comma separated, optional)').inputValue(), 'alice@example.com');
    const secret = form.getByLabel('Client secret (leave empty to keep the stored one)');
    assert.equal(await secret.inputValue(), '', 'the secret is never returned, so never shown');
    await noViolations('provider edit form');

    await form.getByLabel('Client id').fill('edge-client-2');
    await form.getByLabel('Scopes (space separated, optional)').fill('openid email');
    await form.getByLabel('Allowed e-mail domains (comma separated, optional)').fill('example.org');
    await form.getByRole('button', { name: 'Save provider' }).click();
    await form.waitFor({ state: 'detached', ...WAIT });
    await page.getByRole('cell', { name: 'edge-client-2', exact: true }).waitFor(WAIT);

    const saved = await expectBody(200, call('GET', `oauth/providers/${created.id}`));
    assert.equal(saved.client_id, 'edge-client-2');
    assert.deepEqual(saved.scopes, ['openid', 'email']);
    assert.deepEqual(saved.allowed_emails, ['alice@example.com'], 'kept: the form sends what it shows');
    assert.deepEqual(saved.allowed_domains, ['example.org']);
    assert.equal(saved.enabled, false, 'an edit leaves the enabled flag alone');
    assert.equal(await sealed(), secretBefore, 'an empty secret field keeps the stored secret');

    // A plain-http issuer: refused with the API's reason, the provider and its secret as they were.
    await page.getByRole('button', { name: 'Edit Company SSO' }).click();
    const again = page.getByRole('form', { name: 'Edit provider Company SSO' });
    await again.getByLabel('Issuer URL').fill('http://idp.example.com');
    await again.getByLabel('Client secret (leave empty to keep the stored one)').fill('second-secret-0123456789');
    await again.getByRole('button', { name: 'Save provider' }).click();
    await again.getByRole('alert').getByText(/Invalid issuer: must be https/).waitFor(WAIT);
    assert.deepEqual(await expectBody(200, call('GET', `oauth/providers/${created.id}`)), saved);
    assert.equal(await sealed(), secretBefore);

    // A new secret typed in replaces the stored one.
    await again.getByLabel('Issuer URL').fill('https://idp.example.com');
    await again.getByRole('button', { name: 'Save provider' }).click();
    await again.waitFor({ state: 'detached', ...WAIT });
    assert.notEqual(await sealed(), secretBefore);
  });
});
