// The web console's first load (`npx tsx bench/console.ts`, and in `npm run bench`): bytes transferred with a cold
// cache (target under 300 KB) and the time from navigation to the endpoint list drawn for an account with 1,000
// endpoints (target under 1 s), measured in the system Chromium.
import { existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { CHROMIUM, launchBrowser, signedInPage } from '../test/helpers/console.ts';
import { nodeWithOwner } from '../test/helpers/endpoint-api.ts';
import type { Row } from './proxy.ts';

export interface ConsoleBenchResult {
  endpoints: number;
  /** Bytes on the wire for the whole first load (document, modules, styles, libraries, API answers), cold cache. */
  coldBytes: number;
  /** The same without the API's answers: what the console itself weighs. */
  assetBytes: number;
  /** Milliseconds from navigation start to the first row of the endpoint list, per load (cold cache each). */
  listMs: number[];
}

export async function benchConsole(options: { endpoints?: number; loads?: number } = {}): Promise<ConsoleBenchResult | null> {
  if (!existsSync(CHROMIUM)) return null;
  const endpoints = options.endpoints ?? 1_000;
  const loads = options.loads ?? 5;
  // Ephemeral endpoints carry no quota; the janitor is told to leave them for the run.
  const { t, owner } = await nodeWithOwner({ EDGE_EPHEMERAL_IDLE_SECONDS: '86400' });
  const browser = await launchBrowser();
  try {
    for (let made = 0; made < endpoints; ) {
      const batch = Math.min(50, endpoints - made);
      await Promise.all(
        Array.from({ length: batch }, async () => {
          const res = await t.api('POST', '/v1/endpoints/ephemeral', { key: owner.api_key, body: {} });
          if (res.status !== 201) throw new Error(`ephemeral endpoint: ${res.status} ${res.text}`);
        }),
      );
      made += batch;
    }
    // Signed in once; each measured load is a new page of that context with the HTTP cache disabled (sessionStorage
    // is per tab, so the key is copied in before the console's script runs).
    const signed = await signedInPage(browser, t.controlUrl, owner.api_key);
    const context = signed.context();
    await context.addInitScript((key: string) => sessionStorage.setItem('edge.apiKey', key), owner.api_key);
    const listMs: number[] = [];
    let coldBytes = 0;
    let assetBytes = 0;
    for (let i = 0; i < loads; i++) {
      const page = await context.newPage();
      const cdp = await context.newCDPSession(page);
      await cdp.send('Network.enable');
      await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
      const urls = new Map<string, string>();
      let total = 0;
      let assets = 0;
      cdp.on('Network.requestWillBeSent', (e: { requestId: string; request: { url: string } }) => urls.set(e.requestId, e.request.url));
      cdp.on('Network.loadingFinished', (e: { requestId: string; encodedDataLength: number }) => {
        total += e.encodedDataLength;
        if (urls.get(e.requestId)?.includes('/console/')) assets += e.encodedDataLength;
      });
      await page.goto(`${t.controlUrl}/console/endpoints`);
      await page.locator('table tbody tr').first().waitFor();
      listMs.push(await page.evaluate(() => performance.now()));
      // Everything the first screen asked for has arrived (the list's per-row calls included) before the count is read.
      await page.waitForLoadState('networkidle');
      if (i === 0) {
        coldBytes = total;
        assetBytes = assets;
      }
      await page.close();
    }
    return { endpoints, coldBytes, assetBytes, listMs };
  } finally {
    await browser.close();
    await t.close();
  }
}

export function describeConsole(r: ConsoleBenchResult | null): Row[] {
  if (!r) return [{ benchmark: 'web console first load', result: `skipped: no Chromium at ${CHROMIUM}` }];
  const sorted = [...r.listMs].sort((a, b) => a - b);
  return [
    { benchmark: 'web console first load, cold cache: bytes transferred (console files · with the API answers)', result: `${(r.assetBytes / 1024).toFixed(0)} KB · ${(r.coldBytes / 1024).toFixed(0)} KB (target < 300 KB)` },
    {
      benchmark: `web console: navigation -> endpoint list drawn, ${r.endpoints} endpoints, cold cache`,
      result: `median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(0)} ms, max ${sorted.at(-1)!.toFixed(0)} ms over ${sorted.length} loads (target < 1 s)`,
    },
  ];
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  for (const row of describeConsole(await benchConsole())) console.log(`${row.benchmark}: ${row.result}`);
}
