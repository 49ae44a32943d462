// The DNS role (docs/dedicated-ips.md): an authoritative server for the base domain and the GeoDNS zone, kept by its
// own feed subscriber and a presence poll, so a question never waits on the store and a bind shows within a beat.
import type { Registry } from 'prom-client';
import { dnsNameservers, type Config } from '../shared/config.ts';
import { FeedSubscriber } from '../shared/feed/subscriber.ts';
import type { FeedSource } from '../shared/feed/transport.ts';
import { GeoDatabases } from '../shared/geo.ts';
import type { Logger } from '../shared/log.ts';
import { parseIp } from '../shared/match/cidr.ts';
import type { PresenceStore } from '../shared/presence.ts';
import { loadRegionMap } from './regions.ts';
import { startDnsServer, type DnsServer } from './server.ts';
import { DnsZones } from './zones.ts';

export interface DnsRoleDeps {
  settings: Config;
  source: FeedSource;
  presence: PresenceStore;
  logger: Logger;
  /** Where the server's counters go: the edge's registry, served on its ops port. */
  metrics?: Registry;
}

export interface DnsRole {
  server: DnsServer;
  zones: DnsZones;
  subscriber: FeedSubscriber;
  /** Reads presence now (tests call it to see an edge leave without waiting for the poll). */
  refreshPresence(): Promise<void>;
  close(): Promise<void>;
}

export async function startDnsRole(deps: DnsRoleDeps): Promise<DnsRole> {
  const { settings } = deps;
  const log = deps.logger.child({ component: 'dns' });
  const geo = new GeoDatabases({ countryDb: settings.edge.geoipCountryDb });
  // Loaded now: the first question should not wait on reading a file, and a bad database fails the start.
  geo.requireCountry();
  const zones = new DnsZones({
    baseDomain: settings.baseDomain,
    geoZone: settings.dns.geoZone,
    nameservers: dnsNameservers(settings),
    ttlSeconds: settings.dns.ttlSeconds,
    geoTtlSeconds: settings.dns.geoTtlSeconds,
    regions: loadRegionMap(settings.dns.regionsFile),
    country: (address) => geo.country(address, parseIp(address)),
  });
  const subscriber = new FeedSubscriber(deps.source, zones.mirror, { checkIntervalMs: settings.feed.checkIntervalMs, logger: log });

  const refreshPresence = async () => {
    zones.setEdges(await deps.presence.edges());
  };
  // Presence ages out an edge after EDGE_PRESENCE_STALE_MS; polling at the heartbeat interval keeps answers within a
  // beat of that. A failed read keeps the last view: answers stay health-aware as of then, never empty.
  const poll = setInterval(() => {
    refreshPresence().catch((err) => log.warn({ err }, 'presence read failed; answering from the last view'));
  }, settings.presence.intervalMs);
  poll.unref();

  let server: DnsServer | undefined;
  try {
    await refreshPresence().catch((err) => log.warn({ err }, 'presence read failed at start'));
    await subscriber.start();
    server = await startDnsServer({
      host: settings.dns.bindHost,
      port: settings.dns.port,
      authority: zones,
      logger: log,
      rateLimit: { responsesPerSecond: settings.dns.rateLimit, slip: settings.dns.rateLimitSlip },
      metrics: deps.metrics,
    });
  } catch (err) {
    clearInterval(poll);
    await subscriber.stop();
    throw err;
  }
  log.info({ host: settings.dns.bindHost, port: server.port, zones: [settings.baseDomain, settings.dns.geoZone].filter(Boolean) }, 'DNS server listening');
  const running = server;
  return {
    server: running,
    zones,
    subscriber,
    refreshPresence,
    async close() {
      clearInterval(poll);
      await running.close();
      await subscriber.stop();
    },
  };
}
