// The console as the control role serves it (files, compression, caching, security headers, URLs that are screens)
// and its shell in Chromium: signing in with an API key, a refused key, signing out, the navigation and a URL of
// its own per screen.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { CONSOLE_CSP } from '../../src/control/console.ts';
import { nodeWithOwner, type User } from '../helpers/endpoint-api.ts';
import { accessibilityViolations, launchBrowser, signedInPage, skipConsoleSuite } from '../helpers/console.ts';
import type { TestNode } from '../helpers/node.ts';

// One node for both suites below (a node's start is most of a suite's time); the browser only where Chromium is.
let t: TestNode;
let owner: User;
before(async () => {
  ({ t, owner } = await nodeWithOwner());
});
after(async () => {
  await t?.close();
});

describe('the console as served', () => {
  const get = (path: string, headers: Record<string, string> = {}) => fetch(`${t.controlUrl}${path}`, { headers, redirect: 'manual' });

  it('serves index.html at /console/ with a strict policy and no framing, no API key needed', async () => {
    const res = await get('/console/');
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type')!, /^text\/html/);
    assert.equal(res.headers.get('content-security-policy'), CONSOLE_CSP);
    assert.match(CONSOLE_CSP, /script-src 'self'(;|$)/);
    assert.doesNotMatch(CONSOLE_CSP, /unsafe-inline|unsafe-eval/);
    assert.equal(res.headers.get('x-frame-options'), 'DENY');
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    const html = await res.text();
    assert.doesNotMatch(html, /<script>(?!<\/script>)|<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');
    assert.doesNotMatch(html, /https?:\/\//, 'nothing from elsewhere');
  });

  it('redirects /console to /console/', async () => {
    const res = await get('/console');
    assert.equal(res.status, 301);
    assert.equal(res.headers.get('location'), '/console/');
  });

  it('answers a screen URL with index.html (a shared link or a reload lands on the console), a missing file with 404', async () => {
    const screen = await get('/console/endpoints/0b7e3f62-5a2d-4c47-9a51-2f5d4a8e0c11/traffic');
    assert.equal(screen.status, 200);
    assert.match(await screen.text(), /<div id="app">/);
    assert.equal((await get('/console/no-such-file.js')).status, 404);
    assert.equal((await get('/console/../package.json')).status, 404);
  });

  it('serves the vendored libraries itself, compressed as the browser asks, revalidated by ETag', async () => {
    const plain = await get('/console/vendor/htm-preact.mjs', { 'accept-encoding': 'identity' });
    assert.equal(plain.status, 200);
    assert.match(plain.headers.get('content-type')!, /^text\/javascript/);
    const body = Buffer.from(await plain.arrayBuffer());
    const br = await fetch(`${t.controlUrl}/console/vendor/htm-preact.mjs`, { headers: { 'accept-encoding': 'br' } });
    // fetch decodes what it understands: the header says which encoding came, the bytes must decode to the file.
    assert.equal(br.headers.get('content-encoding'), 'br');
    assert.deepEqual(Buffer.from(await br.arrayBuffer()), body);
    const gz = await get('/console/vendor/htm-preact.mjs', { 'accept-encoding': 'gzip;q=1, br;q=0' });
    assert.equal(gz.headers.get('content-encoding'), 'gzip');
    assert.deepEqual(Buffer.from(await gz.arrayBuffer()), body);
    const etag = plain.headers.get('etag')!;
    const again = await get('/console/vendor/htm-preact.mjs', { 'if-none-match': etag });
    assert.equal(again.status, 304);
    assert.equal((await get('/console/vendor/uplot.js')).status, 200);
  });

  it('is not in the OpenAPI document (it is no API)', async () => {
    const doc = (await t.api('GET', '/v1/openapi.json', { key: null })).body as { paths: Record<string, unknown> };
    assert.ok(!Object.keys(doc.paths).some((p) => p.startsWith('/console')));
  });
});

describe('the console shell in Chromium', { skip: skipConsoleSuite() }, () => {
  let browser: Browser;
  before(async () => {
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
  });

  it('refuses a wrong key with a readable message and stays on the sign-in form', async () => {
    const page = await browser.newPage();
    try {
      await page.goto(`${t.controlUrl}/console/`);
      await page.getByLabel('API key').fill('edge_nothing_wrong');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('alert').waitFor();
      assert.match(await page.getByRole('alert').innerText(), /not accepted/);
      assert.equal(await page.evaluate(() => sessionStorage.length), 0);
      assert.deepEqual(await accessibilityViolations(page), []);
    } finally {
      await page.close();
    }
  });

  it('signs in, keeps the key in this tab only, navigates by URL, and signs out', async () => {
    const page = await signedInPage(browser, t.controlUrl, owner.api_key);
    try {
      assert.match(page.url(), /\/console\/endpoints$/);
      assert.equal(await page.getByText('Loading the console…').count(), 0, 'the page’s placeholder is gone once the app runs');
      assert.equal(await page.evaluate(() => sessionStorage.getItem('edge.apiKey')), owner.api_key);
      assert.equal(await page.evaluate(() => localStorage.length), 0, 'nothing in localStorage');
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Account' }).click();
      await page.waitForURL(/\/console\/account$/);
      await page.goBack();
      await page.waitForURL(/\/console\/endpoints$/);
      await page.goto(`${t.controlUrl}/console/nowhere`);
      await page.getByText('No such page').waitFor();
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByLabel('API key').waitFor();
      assert.equal(await page.evaluate(() => sessionStorage.getItem('edge.apiKey')), null);
    } finally {
      await page.context().close();
    }
  });

  it('runs no script the policy does not allow', async () => {
    const page = await signedInPage(browser, t.controlUrl, owner.api_key);
    try {
      const blocked = await page.evaluate(
        () =>
          new Promise<boolean>((resolve) => {
            document.addEventListener('securitypolicyviolation', () => resolve(true), { once: true });
            const s = document.createElement('script');
            s.textContent = 'window.__inline = 1';
            document.body.append(s);
            setTimeout(() => resolve(false), 1_000);
          }),
      );
      assert.equal(blocked, true);
      assert.equal(await page.evaluate(() => (window as unknown as { __inline?: number }).__inline), undefined);
    } finally {
      await page.context().close();
    }
  });
});
