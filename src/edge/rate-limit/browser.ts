// The browser family of a User-Agent for rate-limit `browser` conditions: bowser (MIT) parses, the shared
// browserFamily names the result; parsed only when a rule asks, cached per UA string.
import Bowser from 'bowser';
import { LRUCache } from 'lru-cache';
import { browserFamily } from '../../shared/rate-limit/conditions.ts';

/**
 * Families bowser reports as the engine they embed, told apart by the tokens their user agents add: headless
 * Chrome (HeadlessChrome/…), Android WebView ("; wv)"), Facebook's and Instagram's in-app browsers.
 */
function embedded(ua: string): string | null {
  if (ua.includes('HeadlessChrome/')) return 'headless chrome';
  if (ua.includes('FBAN/') || ua.includes('FBAV/')) return 'facebook';
  if (ua.includes('Instagram ')) return 'instagram';
  if (ua.includes('; wv)')) return 'webview';
  return null;
}

/** Distinct UA strings remembered (a few hundred bytes each): a flood of random UAs only cycles this cache. */
const CACHE_SIZE = 5_000;
const cache = new LRUCache<string, { family: string | null }>({ max: CACHE_SIZE });

/** BROWSER_FAMILIES entry of a User-Agent, or null (none, a bot, a browser not in the list). */
export function browserOf(userAgent: string): string | null {
  if (userAgent === '') return null;
  const hit = cache.get(userAgent);
  if (hit !== undefined) return hit.family;
  let family = embedded(userAgent);
  if (family === null) {
    try {
      family = browserFamily(Bowser.getParser(userAgent).getBrowserName());
    } catch {
      family = null;
    }
  }
  cache.set(userAgent, { family });
  return family;
}
