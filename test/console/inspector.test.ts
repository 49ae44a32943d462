// The traffic inspector and recent errors in a real browser against a real node: requests made through the edge to
// an agent's local service, captured in full, found in the inspector's list (filtered by status class, older pages
// on request), opened at their own URL with headers and bodies, replayed beside the original (a POST only after a
// confirmation); hostile header values and paths stay text; full capture turned on from the notice of an endpoint
// without it; the 404 among them in recent errors; no serious accessibility violations.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import { accessibilityViolations, launchBrowser, screenshot, signedInPage, skipConsoleSuite } from '../helpers/console.ts';
import { createEndpoint, edgeCaughtUp, expectBody, nodeWithOwner, type User } from '../helpers/endpoint-api.ts';
import { eventually } from '../helpers/eventually.ts';
import { visit } from '../helpers/http.ts';
import { startLocalService, type LocalService } from '../helpers/local-service.ts';
import type { TestNode } from '../helpers/node.ts';

const XSS = '<img src=x onerror=window.__xss=1>';
const XSS_PATH = '/<img/src=x/onerror=window.__xss=2>';

describe('console: traffic inspector and recent errors', { skip: skipConsoleSuite() }, () => {
  let t: TestNode;
  let owner: User;
  let browser: Browser;
  let agent: Agent;
  let service: LocalService<string>;
  let endpoint: { uuid: string; hostname: string };
  let page: Page;

  const edgeVisit = (path: string, headers: Record<string, string> = {}, options: { method?: string; body?: string } = {}) =>
    visit(t.node.edge!.httpPort, endpoint.hostname, path, { headers, ...options });
  /** The suite's one signed-in tab (the key stays in its sessionStorage) at `path` under /console. */
  const open = async (path: string) => {
    await page.goto(`${t.controlUrl}/console${path}`);
    return page;
  };
  const noViolations = async (page: Page, where: string) => {
    const found = await accessibilityViolations(page);
    assert.deepEqual(found, [], `${where}: ${JSON.stringify(found, null, 2)}`);
  };
  /** The log ids of the endpoint's captured requests once `count` of them are stored. */
  const captured = (count: number) =>
    eventually(async () => {
      const res = await t.api('GET', `/v1/traffic/logs?endpoint=${endpoint.uuid}&limit=100`, { key: owner.api_key });
      return res.status === 200 && res.body.items.length >= count ? (res.body.items as Array<{ id: number; path: string; method: string; status_code: number }>) : undefined;
    });
  /** The captured request to `path` by `method`, once stored. */
  const capturedRequest = (method: string, path: string) =>
    eventually(async () => (await captured(1)).find((r) => r.method === method && r.path === path));

  before(async () => {
    service = await startLocalService<string>(
      (req, res, record) => {
        let body = '';
        req.setEncoding('utf8');
        req.on('data', (chunk: string) => (body += chunk));
        req.on('end', () => {
          record(`${req.method} ${req.url} ${body}`);
          if (req.url === '/missing') return void res.writeHead(404, { 'content-type': 'text/plain' }).end('no such thing');
          if (req.url === '/bin') return void res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(Buffer.from([0, 1, 2, 0xff, 0xfe, 0x41]));
          const text = JSON.stringify({ url: req.url, method: req.method, body, probe: req.headers['x-probe'] ?? null, seen: Date.now() });
          res.writeHead(200, { 'content-type': 'application/json', 'x-service': 'local' }).end(text);
        });
      },
      () => {},
    );
    ({ t, owner } = await nodeWithOwner());
    endpoint = await createEndpoint(t, owner);
    await expectBody(200, t.api('PUT', `/v1/endpoints/${endpoint.uuid}/settings/capture`, { key: owner.api_key, body: { capture_enabled: true, capture_level: 'full' } }));
    await edgeCaughtUp(t);
    agent = await startAgent({ edgeUrl: `http://127.0.0.1:${t.node.edge!.httpPort}`, apiKey: owner.api_key, endpoint: endpoint.uuid, protocol: 'http', target: service.port });
    await eventually(async () => ((await edgeVisit('/ready')).status === 200 ? true : undefined));
    assert.equal((await edgeVisit('/orders?page=2', { 'x-trace': 'trace-123', authorization: 'Bearer secret-token' })).status, 200);
    assert.equal((await edgeVisit('/missing')).status, 404);
    assert.equal((await edgeVisit('/bin')).status, 200);
    assert.equal((await edgeVisit(XSS_PATH, { 'x-probe': XSS })).status, 200);
    browser = await launchBrowser();
    page = await signedInPage(browser, t.controlUrl, owner.api_key);
  });
  after(async () => {
    await page?.context().close();
    await browser?.close();
    await agent?.stop();
    await t?.close();
    await service?.close();
  });

  it('lists a request made through the edge, opens it at its own URL with headers and body, and replays it beside the original', async () => {
    const rows = await captured(5);
    const orders = rows.find((r) => r.path === '/orders')!;
    await open(`/endpoints/${endpoint.uuid}/traffic`);
    const link = page.getByRole('link', { name: '/orders?page=2' });
    await link.click();
    await page.waitForURL(`**/console/endpoints/${endpoint.uuid}/traffic/${orders.id}`);
    const request = page.locator('section.exchange-side').filter({ has: page.getByRole('heading', { name: 'Request', exact: true }) });
    await request.getByRole('row', { name: /x-trace/ }).getByText('trace-123').waitFor();
    // The credential the capture redacted reads as redacted, never as the token sent.
    await request.getByRole('row', { name: /authorization/ }).getByText('[redacted]').waitFor();
    assert.equal(await page.getByText('secret-token').count(), 0);
    // The JSON answer pretty-printed.
    const response = page.locator('section.exchange-side').filter({ has: page.getByRole('heading', { name: 'Response', exact: true }) });
    assert.match(await response.locator('pre').innerText(), /\{\n {2}"url": "\/orders\?page=2",/);
    await noViolations(page, 'inspector detail');
    await screenshot(page, 'inspector');

    const before = service.seen.length;
    await page.getByRole('button', { name: 'Replay request' }).click();
    const replayed = page.locator('section.exchange-side').filter({ has: page.getByRole('heading', { name: 'Replayed response' }) });
    await replayed.getByText('Status 200').waitFor();
    assert.ok(service.seen.length > before, 'the replay reached the service');
    assert.match(await replayed.locator('pre').innerText(), /"url": "\/orders\?page=2"/);
    await page.locator('section.exchange-side').filter({ has: page.getByRole('heading', { name: 'Original response' }) }).getByText('Status 200').waitFor();
    await noViolations(page, 'inspector replay');
    // The replay is traffic too: it appears at the top of the live list.
    await eventually(async () => ((await page.getByRole('link', { name: '/orders?page=2' }).count()) >= 2 ? true : undefined));
  });

  it('shows a binary body as a hex preview', async () => {
    const rows = await captured(5);
    const bin = rows.find((r) => r.path === '/bin')!;
    await open(`/endpoints/${endpoint.uuid}/traffic/${bin.id}`);
    await page.getByText('00000000  00 01 02 ff fe 41').waitFor();
  });

  it('renders hostile header values and paths as text: no element is created, no script runs', async () => {
    const rows = await captured(5);
    const probe = rows.find((r) => r.path.includes('img'))!;
    await open(`/endpoints/${endpoint.uuid}/traffic`);
    await page.getByRole('link', { name: probe.path }).click();
    await page.getByRole('cell', { name: XSS, exact: true }).waitFor();
    assert.equal(await page.locator('#app img').count(), 0);
    assert.equal(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss), undefined);
  });

  it('narrows the list with the status filter, kept in the URL', async () => {
    await captured(5);
    await open(`/endpoints/${endpoint.uuid}/traffic`);
    await page.getByRole('link', { name: '/orders?page=2' }).first().waitFor();
    await page.getByLabel('Status').selectOption('4xx');
    await page.waitForURL(/status=4xx/);
    const paths = () => page.locator('table tbody tr td:nth-child(3)').allInnerTexts();
    await eventually(async () => ((await paths()).join() === '/missing' ? true : undefined));
    await noViolations(page, 'inspector list');
    // A link with the filter opens filtered.
    await open(`/endpoints/${endpoint.uuid}/traffic?status=2xx&path=/bin`);
    await page.getByRole('link', { name: '/bin' }).waitFor();
    assert.deepEqual(await paths(), ['/bin']);
  });

  it('lists the 404 in recent errors, linked to its request in the inspector', async () => {
    const rows = await captured(5);
    const missing = rows.find((r) => r.path === '/missing')!;
    await open('/traffic/errors');
    const link = page.getByRole('link', { name: '/missing' });
    await link.waitFor();
    assert.equal(await link.getAttribute('href'), `/console/endpoints/${endpoint.uuid}/traffic/${missing.id}`);
    await page.getByLabel('Class').selectOption('5xx');
    await page.getByText('No errors').waitFor();
    await noViolations(page, 'recent errors');
  });

  it('replays a captured POST only after a confirmation, then with force, beside the original', async () => {
    const order = '{"item":"tea","count":2}';
    assert.equal((await edgeVisit('/orders/new', { 'content-type': 'application/json' }, { method: 'POST', body: order })).status, 200);
    const post = await capturedRequest('POST', '/orders/new');
    await open(`/endpoints/${endpoint.uuid}/traffic/${post.id}`);
    const sent = () => service.seen.filter((s) => s === `POST /orders/new ${order}`).length;
    assert.equal(sent(), 1);
    await page.getByRole('button', { name: 'Replay POST request' }).click();
    const confirm = page.getByRole('button', { name: 'Yes, send this POST again' });
    await confirm.waitFor();
    assert.equal(sent(), 1, 'nothing is sent before the confirmation');
    await noViolations(page, 'replay confirmation');
    await confirm.click();

    const replayed = page.locator('section.exchange-side').filter({ has: page.getByRole('heading', { name: 'Replayed response' }) });
    await replayed.getByText('Status 200').waitFor();
    await replayed.getByText(/POST http.*\/orders\/new/).waitFor();
    assert.match(await replayed.locator('pre').innerText(), /"method": "POST",\n {2}"body": "\{\\"item\\":\\"tea\\",\\"count\\":2\}"/);
    assert.equal(sent(), 2, 'the replay sent the captured POST again, body and all');
    const original = page.locator('section.exchange-side').filter({ has: page.getByRole('heading', { name: 'Original response' }) });
    await original.getByText('Status 200').waitFor();
    // A cancelled confirmation sends nothing.
    await page.getByRole('button', { name: 'Replay POST request' }).click();
    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.getByRole('button', { name: 'Replay POST request' }).waitFor();
    assert.equal(sent(), 2);
  });

  it('shows older requests a page at a time when there are more than one page holds', async () => {
    // The inspector lists 50 a page: 55 more requests make sure a second page exists.
    for (let i = 0; i < 55; i++) assert.equal((await edgeVisit(`/page/${i}`)).status, 200);
    // Every one of them stored (captures are written apart from the answer), so the count below is final.
    const all = await eventually(async () => {
      const rows = await captured(55);
      return new Set(rows.filter((r) => r.path.startsWith('/page/')).map((r) => r.path)).size === 55 ? rows : undefined;
    });
    const total = all.length;
    assert.ok(total > 50 && total < 100, `${total} captured: more than a page, all in one API answer`);
    await open(`/endpoints/${endpoint.uuid}/traffic`);
    await page.getByText('50 requests shown').waitFor();
    assert.equal(await page.locator('table tbody tr').count(), 50);
    assert.equal(await page.getByRole('link', { name: '/page/0', exact: true }).count(), 0, 'the oldest is not on the first page');
    await page.getByRole('button', { name: 'Show older requests' }).click();
    await page.getByText(`${total} requests shown`).waitFor();
    await page.getByRole('link', { name: '/page/0', exact: true }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Show older requests' }).count(), 0, 'no page after the last');
  });

  it('turns full capture on from the notice of an endpoint that does not capture', async () => {
    const quiet = await createEndpoint(t, owner);
    await expectBody(200, t.api('PUT', `/v1/endpoints/${quiet.uuid}/settings/capture`, { key: owner.api_key, body: { capture_enabled: false } }));
    assert.equal((await expectBody(200, t.api('GET', `/v1/endpoints/${quiet.uuid}`, { key: owner.api_key }))).capture_enabled, false);
    await open(`/endpoints/${quiet.uuid}/traffic`);
    await page.getByText('Capture is off for this endpoint').waitFor();
    await noViolations(page, 'capture notice');
    await page.getByRole('button', { name: 'Capture headers and bodies' }).click();
    await page.getByText('Capture is off for this endpoint').waitFor({ state: 'detached' });
    const after = await expectBody(200, t.api('GET', `/v1/endpoints/${quiet.uuid}`, { key: owner.api_key }));
    assert.deepEqual([after.capture_enabled, after.capture_level], [true, 'full']);
  });
});
