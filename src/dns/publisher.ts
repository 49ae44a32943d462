// Publishes endpoint names to an operator's DNS primary (EDGE_DNS_UPDATE_SERVER): the control API's "DNS repoint" of
// a dedicated IP group binding, as RFC 2136 updates signed with TSIG (docs/dedicated-ips.md "Publishing to your DNS").
import type { Config } from '../shared/config.ts';
import { parseTsigKey } from './tsig.ts';
import { DnsUpdateClient } from './update-client.ts';

/** What the control API calls (its DnsRepoint): names inside the update zone become or stop being CNAMEs. */
export interface DnsPublisher {
  covers(hostname: string): boolean;
  point(hostname: string, target: string): Promise<void>;
  clear(hostname: string): Promise<void>;
}

/**
 * The publisher the settings describe, or null when EDGE_DNS_UPDATE_SERVER is unset (the embedded server is then the
 * only authority). A bad TSIG key throws here, at start, with a message naming the setting.
 */
export function dnsPublisherFrom(settings: Config): DnsPublisher | null {
  const { updateServer, updateZone, tsigKey, updateTimeoutMs, ttlSeconds } = settings.dns;
  if (!updateServer) return null;
  let key;
  try {
    key = parseTsigKey(tsigKey);
  } catch (err) {
    throw new RangeError(`invalid setting "dns.tsigKey" (EDGE_DNS_TSIG_KEY): ${(err as Error).message}`);
  }
  const client = new DnsUpdateClient({ server: updateServer, zone: updateZone, key, timeoutMs: updateTimeoutMs });
  return {
    covers: (hostname) => hostname.endsWith(`.${client.zone}`),
    point: (hostname, target) => client.replaceCname(hostname, target, ttlSeconds),
    clear: (hostname) => client.deleteName(hostname),
  };
}
