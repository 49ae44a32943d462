// The account screen in a real browser against a real node: the active account's plan, the caller's accounts, and
// API keys: a new key's secret shown once (it works, and is gone once dismissed or reloaded), revoked after a
// confirmation (it stops working); no serious accessibility violations.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { accessibilityViolations, launchBrowser, signedInPage, skipConsoleSuite } from '../helpers/console.ts';
import { nodeWithOwner, type User } from '../helpers/endpoint-api.ts';
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
});
