// The account screen in a real browser against a real node: the active account's plan, the caller's accounts, and
// API keys: a new key's secret shown once (it works, and is gone once dismissed or reloaded), revoked after a
// confirmation (it stops working); switching the account the console works in (X-Account-Id), kept in the tab until
// sign-out, and the way back when the user is removed from it; no serious accessibility violations.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { accessibilityViolations, launchBrowser, signedInPage, skipConsoleSuite } from '../helpers/console.ts';
import { createEndpoint, expectBody, nodeWithOwner, orgWithMember, type User } from '../helpers/endpoint-api.ts';
import type { TestNode } from '../helpers/node.ts';

describe('console: account', { skip: skipConsoleSuite() }, () => {
  let t: TestNode;
  let owner: User;
  let browser: Browser;
  const pages: Page[] = [];

  before(async () => {
    ({ t, owner } = await nodeWithOwner());
    browser = await launchBrowser();
  });
  after(async () => {
    for (const page of pages) await page.context().close();
    await browser?.close();
    await t?.close();
  });

  it('shows the plan, creates an API key shown once, revokes it after a confirmation', async () => {
    const page = await signedInPage(browser, t.controlUrl, owner.api_key, '/account');
    pages.push(page);
    const plan = page.locator('dl.facts dt', { hasText: 'Plan' }).locator('xpath=following-sibling::dd[1]');
    assert.equal(await plan.innerText(), 'business');
    const rbac = page.getByRole('table', { name: 'Plan features' }).getByRole('row', { name: /rbac/ });
    assert.match(await rbac.innerText(), /yes/);
    await page.getByRole('table', { name: 'API keys' }).getByRole('cell').first().waitFor();
    const found = await accessibilityViolations(page);
    assert.deepEqual(found, [], JSON.stringify(found, null, 2));

    await page.getByLabel('Name', { exact: true }).fill('ci runner');
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = await page.locator('code.secret').innerText();
    assert.match(secret, /^edge_[0-9a-f]{16}_/);
    assert.equal((await t.api('GET', '/v1/me', { key: secret })).status, 200, 'the shown key works');
    await page.getByRole('button', { name: 'I have saved it' }).click();
    assert.equal(await page.getByText(secret).count(), 0);
    await page.reload();
    await page.getByRole('cell', { name: 'ci runner', exact: true }).waitFor();
    assert.equal(await page.getByText(secret).count(), 0, 'never shown again');

    await page.getByRole('button', { name: 'Revoke ci runner' }).click();
    await page.getByRole('button', { name: 'Yes, revoke', exact: true }).click();
    await page.getByRole('row', { name: /ci runner/ }).getByText('revoked').waitFor();
    assert.equal((await t.api('GET', '/v1/me', { key: secret })).status, 401, 'the revoked key stops working');
  });

  it('switches the account the console works in: its endpoints, kept in the tab until sign-out, and back when the user leaves it', async () => {
    const member = await t.createUser('business');
    const org = await orgWithMember(t, owner, member, ['endpoints:read', 'traffic:read']);
    const own = await createEndpoint(t, member);
    const orgs = await createEndpoint(t, owner, org.headers);
    const page = await signedInPage(browser, t.controlUrl, member.api_key);
    pages.push(page);
    const table = page.locator('table');
    await table.getByRole('link', { name: own.hostname, exact: true }).waitFor();
    const switcher = page.getByLabel('Active account');
    assert.equal(await switcher.inputValue(), String(member.account_id), 'the key’s own account first');

    // Switched from one of the other account's endpoints: its page belongs to that account, so the list opens.
    await table.getByRole('link', { name: own.hostname, exact: true }).click();
    await page.waitForURL(`**/console/endpoints/${own.uuid}`);
    await page.getByRole('heading', { level: 1, name: own.hostname }).waitFor();
    await switcher.selectOption(String(org.id));
    await page.waitForURL(/\/console\/endpoints$/);
    await table.getByRole('link', { name: orgs.hostname, exact: true }).waitFor();
    assert.equal(await table.getByRole('link', { name: own.hostname, exact: true }).count(), 0, 'only the chosen account’s endpoints');
    assert.equal(await page.evaluate(() => sessionStorage.getItem('edge.accountId')), String(org.id));
    const found = await accessibilityViolations(page);
    assert.deepEqual(found, [], JSON.stringify(found, null, 2));

    // A reload stays in the chosen account; the account screen says which is active and switches back.
    await page.reload();
    await table.getByRole('link', { name: orgs.hostname, exact: true }).waitFor();
    assert.equal(await switcher.inputValue(), String(org.id));
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Account' }).click();
    const kind = page.locator('dl.facts dt', { hasText: 'Kind' }).locator('xpath=following-sibling::dd[1]');
    assert.equal(await kind.innerText(), 'organization');
    await page.getByRole('button', { name: /^Work in / }).click();
    await page.locator('dl.facts dd', { hasText: /^personal$/ }).waitFor();
    assert.equal(await switcher.inputValue(), String(member.account_id));

    // Removed from the organization while working in it: the next call falls back to the key's account and says so.
    await switcher.selectOption(String(org.id));
    await page.waitForFunction((id) => sessionStorage.getItem('edge.accountId') === id, String(org.id));
    const members = await expectBody(200, t.api('GET', `/v1/organizations/${org.id}/members`, { key: owner.api_key }));
    const membership = members.items.find((m: { email: string }) => m.email === member.email);
    assert.equal((await t.api('DELETE', `/v1/organizations/${org.id}/members/${membership.user_id}`, { key: owner.api_key })).status, 204);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Endpoints' }).click();
    await page.getByRole('alert').filter({ hasText: 'You no longer belong to the account “Org”' }).waitFor();
    await table.getByRole('link', { name: own.hostname, exact: true }).waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('edge.accountId')), null);
    assert.equal(await page.getByLabel('Active account').count(), 0, 'one account left: no choice to make');

    // Signing out forgets the choice with the key.
    await page.evaluate((id) => sessionStorage.setItem('edge.accountId', id), String(member.account_id));
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API key').waitFor();
    assert.deepEqual(await page.evaluate(() => [sessionStorage.getItem('edge.apiKey'), sessionStorage.getItem('edge.accountId')]), [null, null]);
  });
});
