// TXT lookups for domain-ownership verification, through the resolvers in EDGE_DNS_RESOLVERS (or the system's).
// A missing record is an answer (empty list); a resolver that times out or fails is an error, so callers can tell them apart.
import { Resolver } from 'node:dns/promises';

/** Answers that mean "there is no such TXT record": NXDOMAIN and NODATA. Anything else is a failed lookup. */
const NO_RECORD_CODES = new Set(['ENOTFOUND', 'ENODATA']);

export class DnsLookupError extends Error {
  override name = 'DnsLookupError';
  constructor(
    /** node's DNS error code: ETIMEOUT, ESERVFAIL, EREFUSED, ECONNREFUSED, ... */
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface DnsVerifierOptions {
  /** "ip[:port],..." as configured; empty uses the system resolver configuration. */
  resolvers: string;
  /** Upper bound for one lookup, retries included. */
  timeoutMs?: number;
  /** Attempts per server (c-ares retries over UDP with a growing timeout). */
  tries?: number;
}

/** Splits and checks the resolver list once, at start, so a typo fails the node's start, not a user's request. */
export function parseResolverList(value: string): string[] {
  const servers = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (servers.length === 0) return [];
  try {
    new Resolver().setServers(servers);
  } catch (err) {
    throw new Error(`EDGE_DNS_RESOLVERS must be a comma-separated list of ip[:port] (IPv6 as [addr]:port): ${(err as Error).message}`);
  }
  return servers;
}

export class DnsVerifier {
  private readonly servers: string[];
  private readonly timeoutMs: number;
  private readonly tries: number;

  constructor(opts: DnsVerifierOptions) {
    this.servers = parseResolverList(opts.resolvers);
    this.timeoutMs = opts.timeoutMs ?? 5000;
    this.tries = opts.tries ?? 2;
  }

  /**
   * The TXT records at `name`, each record's character-strings joined (RFC 7208 §3.3 splits long values into
   * 255-byte strings that belong together). [] when the name or the record type does not exist.
   */
  async lookupTxt(name: string): Promise<string[]> {
    // One resolver per lookup: cancel() on a timeout must not cut short another caller's query.
    const perTry = Math.max(50, Math.floor(this.timeoutMs / (this.tries + 1)));
    const resolver = new Resolver({ timeout: perTry, tries: this.tries });
    if (this.servers.length > 0) resolver.setServers(this.servers);
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        resolver.cancel();
        reject(new DnsLookupError('ETIMEOUT', `DNS lookup of ${name} timed out after ${this.timeoutMs} ms`));
      }, this.timeoutMs);
    });
    try {
      const records = await Promise.race([resolver.resolveTxt(name), deadline]);
      return records.map((chunks) => chunks.join(''));
    } catch (err) {
      if (err instanceof DnsLookupError) throw err;
      const code = (err as NodeJS.ErrnoException).code ?? 'EUNKNOWN';
      if (NO_RECORD_CODES.has(code)) return [];
      throw new DnsLookupError(code, `DNS lookup of ${name} failed: ${code}`);
    } finally {
      clearTimeout(timer);
    }
  }
}
