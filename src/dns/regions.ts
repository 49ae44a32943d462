// The GeoDNS region map (config/regions.json, or EDGE_GEODNS_REGIONS_FILE): which region answers an asker's country,
// and in what order other regions stand in when it has no live address. Validated whole when the DNS role starts.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const REGION = /^[a-z0-9][a-z0-9-]{0,31}$/;
const COUNTRY = /^[A-Z]{2}$/;

export interface RegionMap {
  /** The region of askers whose country is unknown (private addresses, no database entry) or not listed. */
  defaultRegion: string;
  /** ISO 3166-1 alpha-2 country → region. */
  countries: ReadonlyMap<string, string>;
  /** Region → the regions that stand in for it, nearest first. */
  fallback: ReadonlyMap<string, readonly string[]>;
}

export const DEFAULT_REGIONS_FILE = fileURLToPath(new URL('../../config/regions.json', import.meta.url));

/** Parses and checks a region map; every problem is a RangeError naming the file's key, for the operator. */
export function parseRegionMap(raw: unknown, source = 'regions file'): RegionMap {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new RangeError(`${source}: must be a JSON object`);
  const doc = raw as Record<string, unknown>;
  for (const key of Object.keys(doc)) {
    if (!['default_region', 'fallback', 'countries', '_comment'].includes(key)) throw new RangeError(`${source}: unknown key "${key}" (default_region, fallback, countries)`);
  }
  const region = (value: unknown, where: string): string => {
    if (typeof value !== 'string' || !REGION.test(value)) throw new RangeError(`${source}: ${where} must be a region name (1-32 of a-z 0-9 -), got ${JSON.stringify(value)}`);
    return value;
  };
  const defaultRegion = region(doc.default_region, 'default_region');
  const countries = new Map<string, string>();
  const rawCountries = doc.countries ?? {};
  if (typeof rawCountries !== 'object' || rawCountries === null || Array.isArray(rawCountries)) throw new RangeError(`${source}: countries must be an object of country code → region`);
  for (const [code, value] of Object.entries(rawCountries)) {
    if (!COUNTRY.test(code)) throw new RangeError(`${source}: countries key "${code}" is not an ISO 3166-1 alpha-2 code (two upper-case letters)`);
    countries.set(code, region(value, `countries.${code}`));
  }
  const fallback = new Map<string, string[]>();
  const rawFallback = doc.fallback ?? {};
  if (typeof rawFallback !== 'object' || rawFallback === null || Array.isArray(rawFallback)) throw new RangeError(`${source}: fallback must be an object of region → [regions]`);
  for (const [from, list] of Object.entries(rawFallback)) {
    region(from, `fallback key "${from}"`);
    if (!Array.isArray(list)) throw new RangeError(`${source}: fallback.${from} must be an array of region names`);
    fallback.set(
      from,
      list.map((r, i) => region(r, `fallback.${from}[${i}]`)),
    );
  }
  return { defaultRegion, countries, fallback };
}

export function loadRegionMap(path: string): RegionMap {
  const file = path || DEFAULT_REGIONS_FILE;
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new RangeError(`cannot read the GeoDNS regions file ${file}: ${(err as Error).message}`);
  }
  return parseRegionMap(raw, file);
}

/** The regions to try for an asker in `region`, in order: itself, then its fallback list (duplicates dropped). */
export function regionOrder(map: RegionMap, region: string): string[] {
  return [...new Set([region, ...(map.fallback.get(region) ?? [])])];
}
