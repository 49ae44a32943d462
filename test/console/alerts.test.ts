// Alert rules in a real browser against a real node: create a rule through the form (landing on its own page),
// send a test and see the `test` event (e-mail is not configured on the test node, so the event says it was not
// sent and why), edit a rule on its page (pre-filled, every channel kept, a webhook's secret kept unless replaced; a
// refused edit changes nothing), delete it from the list; no serious accessibility violations on any screen.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { accessibilityViolations, launchBrowser, signedInPage, skipConsoleSuite } from '../helpers/console.ts';
import { createEndpoint, expectBody, nodeWithOwner, type User } from '../helpers/endpoint-api.ts';
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

  it('edits a rule on its page, pre-filled with every channel; the webhook keeps its secret; a refused edit shows why and changes nothing', async () => {
    const rule = await expectBody(
      201,
      t.api('POST', '/v1/traffic/alerts', {
        key: owner.api_key,
        body: {
          name: 'slow answers',
          endpoint_id: endpoint.uuid,
          metric: 'latency_p95_ms',
          comparison: 'gt',
          threshold: 800,
          window_seconds: 300,
          channels: [
            { type: 'email', to: 'ops@example.test' },
            { type: 'webhook', url: 'https://hooks.example.com/alerts', secret: 'webhook-secret-0123456789' },
          ],
        },
      }),
    );
    const page = await signedInPage(browser, t.controlUrl, owner.api_key, `/alerts/${rule.uuid}`);
    pages.push(page);
    await page.getByRole('button', { name: 'Edit rule' }).click();
    const form = page.getByRole('form', { name: 'Edit rule slow answers' });
    assert.equal(await form.getByLabel('Name').inputValue(), 'slow answers');
    assert.equal(await form.getByLabel('Endpoint').inputValue(), endpoint.uuid);
    assert.equal(await form.getByLabel('Metric').inputValue(), 'latency_p95_ms');
    assert.equal(await form.getByLabel('Threshold').inputValue(), '800');
    assert.equal(await form.getByLabel('Window').inputValue(), '300');
    assert.equal(await form.getByLabel('E-mail address', { exact: true }).inputValue(), 'ops@example.test');
    assert.equal(await form.getByLabel('Webhook URL (channel 2)').inputValue(), 'https://hooks.example.com/alerts');
    assert.equal(await form.getByLabel('New signing secret (channel 2)').inputValue(), '', 'a secret is never shown');
    await noViolations(page, 'alert rule edit form');

    const fields = (r: Record<string, unknown>) => ({ name: r.name, metric: r.metric, comparison: r.comparison, threshold: r.threshold, window_seconds: r.window_seconds, endpoint_uuid: r.endpoint_uuid, channels: r.channels, updated_at: r.updated_at });
    await form.getByLabel('Name').fill('slow or quiet');
    await form.getByLabel('Metric').selectOption('requests');
    await form.getByLabel('Fires when the value is').selectOption('lt');
    await form.getByLabel('Threshold').fill('10');
    await form.getByLabel('Window').selectOption('900');
    await form.getByLabel('Endpoint').selectOption('');
    await form.getByRole('button', { name: 'Save rule' }).click();
    await page.getByRole('status').getByText('Rule saved.').waitFor();
    await page.getByRole('heading', { level: 1, name: /slow or quiet/ }).waitFor();
    await page.getByText('Requests (count) below 10 over 15 minutes').waitFor();
    const saved = await expectBody(200, t.api('GET', `/v1/traffic/alerts/${rule.uuid}`, { key: owner.api_key }));
    assert.deepEqual(
      { ...fields(saved), updated_at: undefined },
      {
        name: 'slow or quiet',
        metric: 'requests',
        comparison: 'lt',
        threshold: 10,
        window_seconds: 900,
        endpoint_uuid: null,
        channels: [
          { type: 'email', to: 'ops@example.test' },
          // The same secret, kept: its fingerprint is the one the rule was created with.
          { type: 'webhook', url: 'https://hooks.example.com/alerts', has_secret: true, secret_fingerprint: rule.channels[1].secret_fingerprint },
        ],
        updated_at: undefined,
      },
    );

    // An error rate above 1 is refused: the API's reason beside the form, the rule as it was.
    await page.getByRole('button', { name: 'Edit rule' }).click();
    const again = page.getByRole('form', { name: 'Edit rule slow or quiet' });
    await again.getByLabel('Metric').selectOption('error_rate');
    await again.getByLabel('Threshold').fill('5');
    await again.getByRole('button', { name: 'Remove channel 1' }).click();
    await again.getByRole('button', { name: 'Save rule' }).click();
    await again.getByRole('alert').getByText(/error_rate is a fraction/).waitFor();
    const after = await expectBody(200, t.api('GET', `/v1/traffic/alerts/${rule.uuid}`, { key: owner.api_key }));
    assert.deepEqual(fields(after), fields(saved));
  });
});
