// The edge alone, for the proxy benchmark's secondary origin case (origin-alone) and the GC trace: startEdge against an
// in-process feed holding the endpoint configs in a JSON file (argv[2]), records counted and dropped. Prints {"port":N}.
//
// Not the headline since issue 21: `edge serve` is what users run, and its in-process worker's PGlite writes (44.6 %
// of its busy time at 64 KiB, docs/performance.md) are part of what they pay. This process shows the edge's own
// request path without them, which a deployed edge in cluster mode comes close to.
import { Session } from 'node:inspector/promises';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { startEdge } from '../../src/edge/index.ts';
import { platformCertificate } from '../../src/edge/tls.ts';
import { loadConfig } from '../../src/shared/config.ts';
import { MemoryFeed } from '../../src/shared/feed/memory.ts';
import type { FeedEntry } from '../../src/shared/feed/types.ts';
import { createLogger } from '../../src/shared/log.ts';
import { MemoryPresence } from '../../src/shared/presence.ts';
import { SecretBox } from '../../src/shared/secrets.ts';
import type { EndpointConfig } from '../../src/shared/snapshot.ts';
import { exitWithParent } from './procs.ts';
import { DiscardingSink } from './discarding-sink.ts';


/**
 * A bench node's settings: a platform certificate written into `dataDir` (as a production edge has one on disk:
 * generating it, ~70 ms once, is not what a bench measures), every port ephemeral on loopback, plus `overrides`.
 */
export async function benchEdgeSettings(dataDir: string, overrides: Record<string, string>): Promise<ReturnType<typeof loadConfig>> {
  const platform = await platformCertificate({ certFile: '', keyFile: '' }, 'bench.localhost');
  await writeFile(join(dataDir, 'platform.crt'), platform.cert);
  await writeFile(join(dataDir, 'platform.key'), platform.key);
  return loadConfig({
    EDGE_TLS_CERT_FILE: join(dataDir, 'platform.crt'),
    EDGE_TLS_KEY_FILE: join(dataDir, 'platform.key'),
    EDGE_HTTP_PORT: '0',
    EDGE_HTTPS_PORT: '0',
    EDGE_CONTROL_PORT: '0',
    EDGE_OPS_PORT: '0',
    EDGE_RELAY_PORT: '0',
    EDGE_DNS_PORT: '0',
    EDGE_BIND_HOST: '127.0.0.1',
    EDGE_DATA_DIR: dataDir,
    ...overrides,
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  exitWithParent();
  const endpoints = JSON.parse(await readFile(process.argv[2], 'utf8')) as EndpointConfig[];
  const dataDir = await mkdtemp(join(tmpdir(), 'bench-edge-'));
  process.once('exit', () => void rm(dataDir, { recursive: true, force: true }));
  const settings = await benchEdgeSettings(dataDir, { EDGE_ROLE: 'edge', EDGE_LOG_LEVEL: 'warn', EDGE_ORIGIN_ALLOW_PRIVATE: 'true' });
  const feed = new MemoryFeed();
  const entries: FeedEntry[] = endpoints.map((data, i) => ({ topic: 'endpoint', key: data.uuid, version: i + 1, data }));
  await feed.reset({ version: entries.length, entries });
  const edge = await startEdge({
    settings,
    source: feed,
    secrets: new SecretBox('bench'),
    presence: new MemoryPresence(60_000),
    logger: createLogger('warn'),
    createEphemeral: async () => '',
    records: new DiscardingSink(),
  });
  // Serving once the snapshot is applied: the bench's first probe then finds every endpoint.
  while (edge.subscriber.version < entries.length) await new Promise((r) => setTimeout(r, 20));
  process.stdout.write(`${JSON.stringify({ port: edge.httpPort })}\n`);
  // BENCH_ALLOC_PROFILE=<file>: V8's sampling heap profiler with collected objects included (--heap-prof keeps only
  // what is live at exit), written at SIGTERM: where the churn behind the scavenges is allocated.
  const allocFile = process.env.BENCH_ALLOC_PROFILE;
  const session = allocFile ? new Session() : null;
  if (session) {
    session.connect();
    await session.post('HeapProfiler.startSampling', { samplingInterval: 8192, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  }
  process.once('SIGTERM', () => {
    const profile = session ? session.post('HeapProfiler.stopSampling').then((r) => writeFile(allocFile!, JSON.stringify(r.profile))) : Promise.resolve();
    void profile.finally(() => edge.close()).finally(() => process.exit(0));
  });
}
