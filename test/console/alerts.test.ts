// Alert rules in a real browser against a real node: create a rule through the form (landing on its own page),
// send a test and see the `test` event (e-mail is not configured on the test node, so the event says it was not
// sent and why), delete it from the list; no serious accessibility violations on either screen.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { accessibilityViolations, launchBrowser, signedInPage, skipConsoleSuite } from '../helpers/console.ts';
import { createEndpoint, nodeWithOwner, type User } from '../helpers/endpoint-api.ts';
import type { TestNode } from '../helpers/node.ts';

describe('console: alerts', { skip: skipConsoleSuite() }, () => {
  let t: TestNode;
  let owner: User;
  let browser: Browser;
  let endpoint: { uuid: string; hostname: string };
  const pages: Page[] = [];

  const noViolations = async (page: Page, where: string) => {
    const found = await accessibilityViolations(page);
    assert.deepEqual(found, [], `${where}: ${JSON.stringify(found, null, 2)}`);
  };

  before(async () => {
    ({ t, owner } = await nodeWithOwner());
    endpoint = await createEndpoint(t, owner);
    browser = await launchBrowser();
  });
  after(async () => {
    for (const page of pages) await page.context().close();
    await browser?.close();
    await t?.close();
  });

  it('creates a rule, sends a test and shows the test event, deletes the rule', async () => {
    const page = await signedInPage(browser, t.controlUrl, owner.api_key, '/alerts');
    pages.push(page);
    await page.getByText('No alert rules yet.').waitFor();
    await page.getByLabel('Name').fill('API <b>errors</b>');
    await page.getByLabel('Endpoint').selectOption(endpoint.uuid);
    await page.getByLabel('Metric').selectOption('errors_5xx');
    await page.getByLabel('Threshold').fill('3');
    await page.getByLabel('E-mail address').fill('ops@example.test');
    await noViolations(page, 'alert list with the form');
    await page.getByRole('button', { name: 'Create rule' }).click();

    await page.waitForURL(/\/console\/alerts\/[0-9a-f-]{36}$/);
    const uuid = page.url().split('/').at(-1)!;
    await page.getByRole('heading', { level: 1, name: /API <b>errors<\/b>/ }).waitFor();
    await page.getByText('5xx answers (count) above 3 over 5 minutes').waitFor();
    await page.getByRole('link', { name: endpoint.hostname }).waitFor();
    await page.getByText('No events yet').waitFor();

    await page.getByRole('button', { name: 'Send test' }).click();
    await page.getByRole('status').getByText(/Test recorded, but not every channel took it: .*no SMTP server configured/).waitFor();
    const row = page.getByRole('row').filter({ has: page.getByText('test', { exact: true }) });
    await row.getByText(/Not sent: .*no SMTP server configured/).waitFor();
    const events = await t.api('GET', `/v1/traffic/alerts/${uuid}/events`, { key: owner.api_key });
    assert.deepEqual(events.body.items.map((e: { status: string }) => e.status), ['test']);
    await noViolations(page, 'alert rule');

    // A second test within 30 s is refused; the API's reason is shown next to the button.
    await page.getByRole('button', { name: 'Send test' }).click();
    await page.getByRole('alert').getByText(/alert_test_too_soon/).waitFor();

    await page.getByRole('link', { name: 'All alert rules' }).click();
    await page.getByRole('link', { name: 'API <b>errors</b>' }).waitFor();
    assert.equal(await page.locator('#app b').count(), 0);
    await page.getByRole('button', { name: 'Delete API <b>errors</b>' }).click();
    await page.getByRole('button', { name: 'Yes, delete' }).click();
    await page.getByText('No alert rules yet.').waitFor();
    assert.equal((await t.api('GET', `/v1/traffic/alerts/${uuid}`, { key: owner.api_key })).status, 404);
  });
});
