// The console's endpoint screens in Chromium against a real node, a real agent and a real local service: the list
// (create, search, delete, narrowed to a tag), the overview with an agent online and tags edited, visitor auth that a visitor then meets at the edge,
// a shadowed rate-limit rule, routing rules, rules edited (conditions added and deleted, a refused edit that changes
// nothing, a new routing target the edge then uses), RBAC, health with its chart, a missing plan feature named, API
// values with markup shown as text, and an axe pass on the list and every tab.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Locator, Page } from 'playwright-core';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import { accessibilityViolations, launchBrowser, screenshot, signedInPage, skipConsoleSuite } from '../helpers/console.ts';
import { createEndpoint, edgeCaughtUp, expectBody, nodeWithOwner, type User } from '../helpers/endpoint-api.ts';
import { visit } from '../helpers/http.ts';
import { startEchoService, type Echoed, type LocalService } from '../helpers/local-service.ts';
import type { TestNode } from '../helpers/node.ts';

const MARKUP = '<img src=x onerror=alert(1)>';
const WAIT = { timeout: 20_000 };

async function assertAccessible(page: Page, where: string): Promise<void> {
  const violations = await accessibilityViolations(page);
  assert.deepEqual(violations, [], `${where}: ${JSON.stringify(violations, null, 2)}`);
}

/** Submits `form` with its button named `button` and returns the refusal the form then shows. */
async function refusal(form: Locator, button: string): Promise<string> {
  await form.getByRole('button', { name: button }).click();
  const alert = form.getByRole('alert');
  await alert.waitFor(WAIT);
  return alert.innerText();
}

describe('the endpoint screens in Chromium', { skip: skipConsoleSuite() }, () => {
  let t: TestNode;
  let owner: User;
  let browser: Browser;
  let service: LocalService<Echoed>;
  let agent: Agent | undefined;
  let served: { uuid: string; hostname: string };
  let page: Page;

  before(async () => {
    // Presence every 200 ms (agents show at once); health checks of 60 s probe every second, uptime read uncached.
    ({ t, owner } = await nodeWithOwner({ EDGE_PRESENCE_INTERVAL_MS: '200', EDGE_HEALTH_MIN_INTERVAL_SECONDS: '1', EDGE_HEALTH_UPTIME_CACHE_SECONDS: '0' }));
    [browser, service] = await Promise.all([launchBrowser(), startEchoService()]);
    served = await createEndpoint(t, owner);
    await edgeCaughtUp(t);
    agent = await startAgent({
      edgeUrl: `http://127.0.0.1:${t.node.edge!.httpPort}`,
      apiKey: owner.api_key,
      endpoint: served.uuid,
      protocol: 'http',
      target: service.port,
      agentId: 'console-agent',
      tags: ['blue'],
    });
    page = await signedInPage(browser, t.controlUrl, owner.api_key);
  });
  after(async () => {
    await page?.context().close();
    await browser?.close();
    await agent?.stop();
    await service?.close();
    await t?.close();
  });

  const open = async (path: string) => {
    await page.goto(`${t.controlUrl}/console${path}`);
    await page.getByRole('button', { name: 'Sign out' }).waitFor(WAIT);
  };
  const rows = () => page.locator('table tbody tr');

  it('creates an endpoint, finds it by search (kept in the URL), deletes it after confirming', async () => {
    await createEndpoint(t, owner);
    await open('/endpoints');
    await page.getByRole('button', { name: 'New endpoint' }).click();
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    const created = page.locator('p.notice a');
    await created.waitFor(WAIT);
    const hostname = await created.innerText();
    await page.locator('table').getByRole('link', { name: hostname, exact: true }).waitFor(WAIT);
    assert.ok((await rows().count()) >= 3, 'every endpoint listed');
    await assertAccessible(page, 'the list');

    const subdomain = hostname.split('.')[0];
    await page.getByLabel('Search by hostname').fill(subdomain);
    await page.waitForURL((url) => url.searchParams.get('q') === subdomain, WAIT);
    await page.waitForFunction(() => document.querySelectorAll('table tbody tr').length === 1, undefined, WAIT);
    assert.equal(await rows().first().getByRole('link').innerText(), hostname);
    // A reload (or a shared link) keeps the search.
    await page.reload();
    await page.waitForFunction(() => document.querySelectorAll('table tbody tr').length === 1, undefined, WAIT);
    assert.equal(await page.getByLabel('Search by hostname').inputValue(), subdomain);

    const row = rows().filter({ hasText: hostname });
    await row.getByRole('button', { name: 'Delete' }).click();
    await row.getByRole('button', { name: `Yes, delete ${hostname}` }).click();
    await page.getByText(`Deleted ${hostname}.`).waitFor(WAIT);
    await page.getByText(`No endpoint matches “${subdomain}”.`).waitFor(WAIT);
    const gone = await t.api('GET', '/v1/endpoints?page_size=100', { key: owner.api_key });
    assert.ok(!gone.body.items.some((e: { hostname: string }) => e.hostname === hostname));
  });

  it('shows the agent online on the overview, with its id and tags, and changes capture', async () => {
    await open(`/endpoints/${served.uuid}`);
    const agentRow = page.getByRole('row').filter({ hasText: 'console-agent' });
    await agentRow.waitFor(WAIT);
    assert.match(await agentRow.innerText(), /blue/);
    await assertAccessible(page, 'overview');
    await screenshot(page, 'endpoint');

    await page.getByLabel('Capture requests').check();
    await page.getByLabel('Level').selectOption('full');
    await page.getByRole('button', { name: 'Save capture' }).click();
    await page.getByText('Capture is on (full)').waitFor(WAIT);
    const endpoint = await expectBody(200, t.api('GET', `/v1/endpoints/${served.uuid}`, { key: owner.api_key }));
    assert.deepEqual([endpoint.capture_enabled, endpoint.capture_level], [true, 'full']);
  });

  it('tags an endpoint on its overview (a refused tag changes nothing) and narrows the list to a tag, kept in the URL', async () => {
    await open(`/endpoints/${served.uuid}`);
    // The section: the refusal shows under the form.
    const form = page.locator('section').filter({ has: page.getByRole('heading', { name: 'Tags', exact: true }) });
    await page.getByLabel('Tags, comma-separated').fill('team-a, Not A Tag!');
    assert.match(await refusal(form, 'Save tags'), /tags/);
    assert.deepEqual((await expectBody(200, t.api('GET', `/v1/endpoints/${served.uuid}`, { key: owner.api_key }))).tags, []);

    await page.getByLabel('Tags, comma-separated').fill('team-a, prod');
    await form.getByRole('button', { name: 'Save tags' }).click();
    await page.getByText('Tagged team-a, prod.').waitFor(WAIT);
    assert.deepEqual((await expectBody(200, t.api('GET', `/v1/endpoints/${served.uuid}`, { key: owner.api_key }))).tags, ['team-a', 'prod']);

    await open('/endpoints');
    const row = rows().filter({ hasText: served.hostname });
    await row.getByRole('link', { name: 'Endpoints tagged team-a' }).click();
    await page.waitForURL((url) => url.searchParams.get('tag') === 'team-a', WAIT);
    await page.getByText('Showing endpoints tagged team-a.').waitFor(WAIT);
    await page.waitForFunction(() => document.querySelectorAll('table tbody tr').length === 1, undefined, WAIT);
    assert.equal(await rows().first().getByRole('link', { name: served.hostname, exact: true }).count(), 1);
    await assertAccessible(page, 'the list narrowed to a tag');
    await page.getByRole('link', { name: 'Show every endpoint' }).click();
    await page.waitForURL((url) => !url.searchParams.has('tag'), WAIT);
  });

  it('turns on basic auth by adding a user (a username with markup stays text); a visitor without credentials gets 401', async () => {
    await open(`/endpoints/${served.uuid}/auth`);
    await page.getByLabel('Username').fill(MARKUP);
    await page.getByLabel('Password', { exact: true }).fill('password-123');
    await page.getByRole('button', { name: 'Add user' }).click();
    await page.getByRole('button', { name: 'Save users' }).click();
    await page.getByText('Visitors meet: basic').waitFor(WAIT);
    await page.getByRole('cell', { name: MARKUP, exact: true }).waitFor(WAIT);
    assert.equal(await page.locator('img').count(), 0, 'no element made from the markup');
    await assertAccessible(page, 'auth');

    await edgeCaughtUp(t);
    const edgePort = t.node.edge!.httpPort;
    assert.equal((await visit(edgePort, served.hostname, '/')).status, 401);
    const credentials = Buffer.from(`${MARKUP}:password-123`).toString('base64');
    assert.equal((await visit(edgePort, served.hostname, '/', { headers: { authorization: `Basic ${credentials}` } })).status, 200);

    // Removing the only user turns visitor auth off again (the other tests visit without credentials).
    await page.getByRole('button', { name: `Remove ${MARKUP}` }).click();
    await page.getByRole('button', { name: 'Save users' }).click();
    await page.getByText('Visitors meet: none').waitFor(WAIT);
  });

  it('warns that a rule another rule covers is shadowed, saying why; names with markup stay text', async () => {
    await open(`/endpoints/${served.uuid}/rate-limits`);
    const addRule = async (name: string, requests: string, priority: string, path?: string) => {
      await page.getByLabel('Name').fill(name);
      await page.getByLabel('Requests per window').fill(requests);
      await page.getByLabel('Window (seconds)').fill('60');
      await page.getByLabel('Priority (lower first)').fill(priority);
      if (path) {
        await page.getByRole('button', { name: 'Add condition' }).click();
        await page.getByLabel('Type 1').selectOption('path');
        await page.getByLabel('Operator 1').selectOption('prefix');
        await page.getByLabel('Value 1').fill(path);
      }
      await page.getByRole('button', { name: 'Add rule' }).click();
      await page.getByRole('row').filter({ hasText: name }).waitFor(WAIT);
    };
    await addRule(MARKUP, '10', '0');
    await addRule('api burst', '100', '5', '/api');
    const shadowed = page.getByRole('row').filter({ hasText: 'api burst' });
    const warning = shadowed.getByRole('note');
    await warning.waitFor(WAIT);
    assert.match(await warning.innerText(), /Shadowed/);
    assert.ok((await warning.innerText()).includes(MARKUP), 'the reason names the covering rule, as text');
    assert.match(await shadowed.innerText(), /path prefix \/api/);
    const covering = page.getByRole('row').filter({ hasText: MARKUP }).filter({ hasNotText: 'api burst' });
    assert.equal(await covering.getByRole('note').count(), 0, 'the covering rule is not shadowed');
    assert.equal(await page.locator('img').count(), 0);
    await assertAccessible(page, 'rate limits');

    await shadowed.getByRole('button', { name: 'Delete rule api burst' }).click();
    await shadowed.getByRole('button', { name: 'Yes, delete rule api burst' }).click();
    await page.getByRole('row').filter({ hasText: 'api burst' }).waitFor({ state: 'detached', ...WAIT });
  });

  it('creates and deletes a routing rule', async () => {
    await open(`/endpoints/${served.uuid}/routing`);
    await page.getByText('No routing rules.').waitFor(WAIT);
    await page.getByLabel('Name').fill('api to blue');
    await page.getByLabel('Agent tags (comma separated, all required)').fill('blue');
    await page.getByLabel(/^Key 1/).fill('prefix');
    await page.getByLabel('Pattern 1').fill('/api');
    await page.getByRole('button', { name: 'Add routing rule' }).click();
    const row = page.getByRole('row').filter({ hasText: 'api to blue' });
    await row.waitFor(WAIT);
    assert.match(await row.innerText(), /agents tagged blue/);
    await assertAccessible(page, 'routing');
    await row.getByRole('button', { name: 'Delete routing rule api to blue' }).click();
    await row.getByRole('button', { name: 'Yes, delete routing rule api to blue' }).click();
    await page.getByText('No routing rules.').waitFor(WAIT);
  });

  it('edits a rate-limit rule in place: pre-filled, conditions added and deleted, a refused condition kept as typed, and the shadow warning after a save', async () => {
    // An endpoint of its own: 'wide' covers every request at 10 a minute; 'checkout' is evaluated first, so it acts.
    const e = await createEndpoint(t, owner);
    const key = owner.api_key;
    const addRule = (body: Record<string, unknown>) =>
      expectBody(201, t.api('POST', '/v1/firewall/rate-limits', { key, body: { endpoint_id: e.uuid, action: 'block', window_size_seconds: 60, ...body } }));
    await addRule({ name: 'wide', requests_per_window: 10, priority: 10 });
    const made = await addRule({
      name: 'checkout',
      description: 'orders',
      requests_per_window: 100,
      priority: 0,
      fail_mode: 'closed',
      conditions: [{ type: 'path', operator: 'prefix', value: '/checkout' }],
    });
    const stored = () => expectBody(200, t.api('GET', `/v1/firewall/rate-limits/${made.uuid}`, { key }));
    const conditionsOf = (rule: { conditions: Array<{ condition_type: string; operator: string; condition_value: string }> }) =>
      rule.conditions.map((c) => `${c.condition_type} ${c.operator} ${c.condition_value}`);

    await open(`/endpoints/${e.uuid}/rate-limits`);
    await page.getByRole('button', { name: 'Edit rule checkout' }).click();
    const editor = page.getByRole('form', { name: 'Edit rule checkout' });
    await editor.waitFor(WAIT);
    assert.deepEqual(
      await Promise.all(['Name', 'Description (optional)', 'Requests per window', 'Window (seconds)', 'Priority (lower first)', 'Cluster count unavailable'].map((l) => editor.getByLabel(l).inputValue())),
      ['checkout', 'orders', '100', '60', '0', 'closed'],
      'the form starts from the rule',
    );
    const conditions = page.getByRole('region', { name: 'Conditions of checkout' });
    assert.deepEqual(await conditions.locator('li .mono').allInnerTexts(), ['path prefix /checkout']);
    await assertAccessible(page, 'rate-limit rule editor');

    // Cancel closes the editor and writes nothing.
    await editor.getByLabel('Name').fill('not saved');
    await editor.getByRole('button', { name: 'Cancel' }).click();
    await editor.waitFor({ state: 'detached', ...WAIT });
    assert.equal((await stored()).name, 'checkout');

    await page.getByRole('button', { name: 'Edit rule checkout' }).click();
    const append = page.getByRole('form', { name: 'Add a condition to checkout' });
    // Joined by OR: the last condition's join is rewritten before the new one is appended.
    await append.getByLabel('Joined by').selectOption('OR');
    await append.getByLabel('Type').selectOption('method');
    await append.getByLabel('Operator').selectOption('in');
    await append.getByLabel('Value').fill('post');
    await append.getByRole('button', { name: 'Append condition' }).click();
    await conditions.getByRole('listitem').filter({ hasText: 'method in POST' }).waitFor(WAIT);
    assert.match(await page.getByRole('row').filter({ has: page.getByRole('button', { name: 'Delete rule checkout' }) }).innerText(), /path prefix \/checkout OR method in POST/);
    assert.deepEqual((await stored()).conditions.map((c: { logical_operator: string }) => c.logical_operator), ['OR', 'AND']);
    assert.deepEqual(conditionsOf(await stored()), ['path prefix /checkout', 'method in POST']);

    // A condition the API refuses: its reason beside the form, what was typed still there, the rule unchanged.
    await append.getByLabel('Type').selectOption('path');
    await append.getByLabel('Operator').selectOption('prefix');
    await append.getByLabel('Value').fill('/shop/../admin');
    assert.match(await refusal(append, 'Append condition'), /dot segments/);
    assert.equal(await append.getByLabel('Value').inputValue(), '/shop/../admin');
    assert.deepEqual(conditionsOf(await stored()), ['path prefix /checkout', 'method in POST']);
    assert.equal(await conditions.getByRole('listitem').count(), 2);

    await conditions.getByRole('button', { name: 'Delete condition 1' }).click();
    await conditions.getByRole('button', { name: 'Yes, delete condition 1' }).click();
    await conditions.getByRole('listitem').filter({ hasText: '/checkout' }).waitFor({ state: 'detached', ...WAIT });
    assert.deepEqual(conditionsOf(await stored()), ['method in POST']);

    // Moved after 'wide', the rule can never act: the re-read list says so. The name's markup stays text.
    const renamed = 'checkout <b>late</b>';
    await editor.getByLabel('Name').fill(renamed);
    await editor.getByLabel('Priority (lower first)').fill('20');
    await editor.getByRole('button', { name: 'Save rule' }).click();
    await editor.waitFor({ state: 'detached', ...WAIT });
    const row = page.getByRole('row').filter({ has: page.getByRole('button', { name: `Delete rule ${renamed}` }) });
    const warning = row.getByRole('note');
    await warning.waitFor(WAIT);
    assert.match(await warning.innerText(), /Shadowed: this rule never acts\..*wide/s);
    assert.equal(await page.locator('table b').count(), 0, 'no element made from the name');
    const saved = await stored();
    assert.deepEqual(
      [saved.name, saved.priority, saved.description, saved.fail_mode, saved.requests_per_window, saved.shadowed, conditionsOf(saved)],
      [renamed, 20, 'orders', 'closed', 100, true, ['method in POST']],
      'the edited fields written, the others and the conditions kept',
    );
  });

  it('edits a routing rule: a refused pattern changes nothing, a new target is where the edge then sends requests', async () => {
    const key = owner.api_key;
    const green = await startEchoService();
    let greenAgent: Agent | undefined;
    const made = await expectBody(
      201,
      t.api('POST', `/v1/endpoints/${served.uuid}/routing-rules`, {
        key,
        body: { name: 'api to blue', priority: 1, target_agent_tags: 'blue', conditions: [{ condition_type: 'path', condition_key: 'prefix', pattern: '/api' }] },
      }),
    );
    const stored = () => expectBody(200, t.api('GET', `/v1/endpoints/${served.uuid}/routing-rules/${made.id}`, { key }));
    const edgePort = t.node.edge!.httpPort;
    try {
      greenAgent = await startAgent({
        edgeUrl: `http://127.0.0.1:${edgePort}`,
        apiKey: key,
        endpoint: served.uuid,
        protocol: 'http',
        target: green.port,
        agentId: 'console-agent-green',
        tags: ['green'],
      });
      await edgeCaughtUp(t);
      assert.equal((await visit(edgePort, served.hostname, '/api/before')).status, 200);
      assert.ok(service.seen.some((r) => r.url === '/api/before'), 'the blue agent served it');

      await open(`/endpoints/${served.uuid}/routing`);
      await page.getByRole('button', { name: 'Edit routing rule api to blue' }).click();
      const editor = page.getByRole('form', { name: 'Edit routing rule api to blue' });
      await editor.waitFor(WAIT);
      assert.deepEqual(
        await Promise.all(['Name', 'Priority (lower first)', 'Agent tags (comma separated, all required)', 'Key 1', 'Pattern 1'].map((l) => editor.getByLabel(l).inputValue())),
        ['api to blue', '1', 'blue', 'prefix', '/api'],
        'the form starts from the rule',
      );
      assert.equal(await editor.getByLabel('Enabled').isChecked(), true);
      await assertAccessible(page, 'routing rule editor');

      await editor.getByLabel('Agent tags (comma separated, all required)').fill('green');
      await editor.getByLabel('Pattern 1').fill('/api/../x');
      assert.match(await refusal(editor, 'Save routing rule'), /dot segments/);
      assert.equal(await editor.getByLabel('Pattern 1').inputValue(), '/api/../x', 'the form keeps what was typed');
      assert.deepEqual(await stored(), made, 'the refused edit changed nothing');

      const renamed = `api to green ${MARKUP}`;
      await editor.getByLabel('Name').fill(renamed);
      await editor.getByLabel('Pattern 1').fill('/api');
      await editor.getByRole('button', { name: 'Save routing rule' }).click();
      await editor.waitFor({ state: 'detached', ...WAIT });
      const row = page.getByRole('row').filter({ hasText: renamed });
      await row.waitFor(WAIT);
      assert.match(await row.innerText(), /agents tagged green/);
      assert.equal(await page.locator('img').count(), 0, 'no element made from the name');
      const saved = await stored();
      assert.deepEqual([saved.name, saved.priority, saved.enabled, saved.target_agent_tags, saved.conditions], [renamed, 1, true, 'green', made.conditions]);

      await edgeCaughtUp(t);
      assert.equal((await visit(edgePort, served.hostname, '/api/after')).status, 200);
      assert.ok(green.seen.some((r) => r.url === '/api/after'), 'the green agent served it');
      assert.ok(!service.seen.some((r) => r.url === '/api/after'), 'the blue agent did not');
    } finally {
      await t.api('DELETE', `/v1/endpoints/${served.uuid}/routing-rules/${made.id}`, { key });
      await greenAgent?.stop();
      await green.close();
    }
  });

  it('creates an RBAC role and an invite', async () => {
    await open(`/endpoints/${served.uuid}/rbac`);
    await page.getByLabel('Name', { exact: true }).fill('readers');
    await page.getByLabel('Allowed methods (comma separated, * for any)').fill('get, head');
    await page.getByLabel('Allowed paths (globs: /api/*, /files/**)').fill('/docs/**');
    await page.getByRole('button', { name: 'Add role' }).click();
    const role = page.getByRole('row').filter({ hasText: 'readers' });
    await role.waitFor(WAIT);
    assert.match(await role.innerText(), /GET, HEAD/);
    await page.getByLabel('E-mail (optional)').last().fill('guest@example.test');
    await page.getByRole('button', { name: 'Create invite' }).click();
    await page.getByText(/\/register\?endpoint=/).waitFor(WAIT);
    await page.getByRole('row').filter({ hasText: 'guest@example.test' }).filter({ hasText: 'invited' }).waitFor(WAIT);
    await assertAccessible(page, 'rbac');
  });

  it('shows uptime and a latency chart once probes ran', async () => {
    await open(`/endpoints/${served.uuid}/health`);
    await page.getByLabel('Probe this endpoint').check();
    await page.getByRole('button', { name: 'Save health check' }).click();
    await page.getByText('Checks are on').waitFor(WAIT);
    // The tab polls; the probes land within seconds at the test's interval scale.
    await page.locator('.chart canvas').waitFor({ timeout: 30_000 });
    await page.getByText('100.00 %').first().waitFor(WAIT);
    // A few probes, so the chart has a line to draw.
    await page.getByText(/Latency of the last ([3-9]|\d{2,}) probes/).waitFor(WAIT);
    assert.match(await page.locator('dl.facts').innerText(), /Last check\s+healthy 200/);
    await assertAccessible(page, 'health');
    await screenshot(page, 'health');
  });

  it('has no serious accessibility violation on the tabs the tests above did not check', async () => {
    // overview, auth, rate-limits, routing, rbac and health were checked above, with content in them.
    for (const tab of ['traffic']) {
      await open(`/endpoints/${served.uuid}/${tab}`);
      await page.getByRole('link', { name: 'Overview' }).waitFor(WAIT);
      await page.locator('.loading').first().waitFor({ state: 'detached', ...WAIT });
      await assertAccessible(page, tab);
    }
  });

  it('names the plan feature a refused tab needs', async () => {
    const free = await t.createUser('free');
    const e = await createEndpoint(t, free);
    const freePage = await signedInPage(browser, t.controlUrl, free.api_key, `/endpoints/${e.uuid}/routing`);
    try {
      const alert = freePage.getByRole('alert').first();
      await alert.waitFor(WAIT);
      assert.match(await alert.innerText(), /Your plan does not include endpoint_routing_rules/);
    } finally {
      await freePage.context().close();
    }
  });
});
