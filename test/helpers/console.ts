// The web console in a real browser: the system Chromium driven by playwright-core, a page signed in with an API
// key through the sign-in form, an axe-core pass, and screenshots for the README on request.
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { skipSlowSuite } from './slow-suites.ts';

/** The browser the tests drive: EDGE_TEST_CHROMIUM, else Debian's package. */
export const CHROMIUM = process.env.EDGE_TEST_CHROMIUM ?? '/usr/bin/chromium';

/**
 * Why the console suites skip, or false: they run where Chromium is installed (`.ci/run` installs Debian's), once
 * in CI (test/helpers/slow-suites.ts).
 */
export function skipConsoleSuite(): string | false {
  if (!existsSync(CHROMIUM)) return `no Chromium at ${CHROMIUM} (apt-get install chromium, or set EDGE_TEST_CHROMIUM)`;
  return skipSlowSuite();
}

/** Headless, and quiet on a closed network (no background fetches to the outside: they would only be refused). */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    chromiumSandbox: false,
    args: ['--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** A new page of its own context (its own sessionStorage), signed in through the form, at `path` under /console. */
export async function signedInPage(browser: Browser, controlUrl: string, apiKey: string, path = '/endpoints'): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  await page.goto(`${controlUrl}/console/`);
  await page.getByLabel('API key').fill(apiKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
  if (path !== '/endpoints') await page.goto(`${controlUrl}/console${path}`);
  return page;
}

const require = createRequire(import.meta.url);
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: string[];
}

/**
 * The page's serious and critical accessibility violations by axe-core (WCAG 2 A and AA rules). Injected through the
 * debugging protocol, which the page's Content-Security-Policy does not govern, so the policy under test stays on.
 */
export async function accessibilityViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(AXE_SOURCE);
  const found = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(ctx: unknown, opts: unknown): Promise<{ violations: Array<{ id: string; impact: string | null; help: string; nodes: Array<{ target: unknown[] }> }> }> } }).axe;
    const result = await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => JSON.stringify(n.target)) }));
  });
  return found.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

/**
 * Saves a screenshot for the README (docs/images/console-<name>.png) when EDGE_CONSOLE_SCREENSHOTS=1, so the pictures
 * are taken by the same tests that check the screens: `EDGE_CONSOLE_SCREENSHOTS=1 node --import tsx --test test/console/*.test.ts`.
 */
export async function screenshot(page: Page, name: string): Promise<void> {
  if (process.env.EDGE_CONSOLE_SCREENSHOTS !== '1') return;
  const dir = join(import.meta.dirname, '..', '..', 'docs', 'images');
  await mkdir(dir, { recursive: true });
  await page.screenshot({ path: join(dir, `console-${name}.png`), fullPage: false });
}
