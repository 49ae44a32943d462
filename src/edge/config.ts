// The edge's view of configuration: a mirror of the change feed, indexed for the data plane (host → endpoint,
// API keys, accounts, certificates), with compiled endpoints in an LRU cache and misses negative-cached.
import { EventEmitter } from 'node:events';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { LRUCache } from 'lru-cache';
import { FeedMirror } from '../shared/feed/subscriber.ts';
import type { FeedChange, FeedSnapshot } from '../shared/feed/types.ts';
import type { Logger } from '../shared/log.ts';
import { TOPICS, type AccountConfig, type ApiKeyConfig, type CertificateConfig, type EndpointConfig } from '../shared/snapshot.ts';
import { compileEndpoint, type CompiledEndpoint } from './compile.ts';
import { DEFAULT_STAGE_DEPS, type StageDeps } from './pipeline/stage.ts';

/** A cached "no such host", so a flood of requests for unknown names never rescans anything. */
const MISSING = Symbol('missing');

export interface EdgeConfigEvents {
  /** An endpoint was added, changed (config) or removed (null), after the indexes hold the new state. */
  endpoint: [uuid: string, config: EndpointConfig | null, previous: EndpointConfig | null];
  certificate: [id: number];
  /** An API key entry was added, changed or removed: tunnels it admitted are checked again (src/edge/agent-auth.ts). */
  apiKey: [keyId: string];
  /** An account entry was added, changed (plan, suspension) or removed: its tunnels are checked again. */
  account: [id: number];
}

export interface EdgeConfigOptions {
  logger: Logger;
  /** Compiled endpoints (and negative entries) kept at most. */
  cacheSize?: number;
  /** Where the last applied config is kept, so a restart serves before the control plane or Redis answers. */
  stateFile?: string;
  /** What compiled stages need of the edge (its public HTTPS port). */
  stageDeps?: StageDeps;
}

export class EdgeConfig extends EventEmitter<EdgeConfigEvents> {
  readonly mirror: FeedMirror;
  private readonly byHost = new Map<string, string>();
  private readonly compiled: LRUCache<string, CompiledEndpoint | typeof MISSING>;
  private saveTimer: NodeJS.Timeout | null = null;
  private saving: Promise<void> = Promise.resolve();

  constructor(private readonly options: EdgeConfigOptions) {
    super();
    this.compiled = new LRUCache({ max: options.cacheSize ?? 10_000 });
    this.mirror = new FeedMirror({ onChange: (change) => this.onChange(change) });
  }

  get version(): number {
    return this.mirror.version;
  }

  /** The compiled endpoint serving `host` (lower-case, no port), or null. Compiles on first use after a change. */
  lookup(host: string): CompiledEndpoint | null {
    const hit = this.compiled.get(host);
    if (hit !== undefined) return hit === MISSING ? null : hit;
    const uuid = this.byHost.get(host);
    const config = uuid === undefined ? undefined : this.endpoint(uuid);
    if (!config) {
      this.compiled.set(host, MISSING);
      return null;
    }
    try {
      const compiled = compileEndpoint(config, this.options.stageDeps ?? DEFAULT_STAGE_DEPS);
      this.compiled.set(host, compiled);
      return compiled;
    } catch (err) {
      // A config that fails to compile must not take the edge down; the endpoint answers 503 until fixed.
      this.options.logger.error({ err, endpoint: uuid }, 'endpoint config failed to compile');
      return compileEndpoint({ ...config, status: 'error', routing_rules: [] }, this.options.stageDeps ?? DEFAULT_STAGE_DEPS);
    }
  }

  endpoint(uuid: string): EndpointConfig | undefined {
    return this.mirror.get(TOPICS.endpoint, uuid)?.data as EndpointConfig | undefined;
  }

  endpoints(): EndpointConfig[] {
    return this.mirror.entries(TOPICS.endpoint).map((e) => e.data as EndpointConfig);
  }

  apiKey(keyId: string): ApiKeyConfig | undefined {
    return this.mirror.get(TOPICS.apiKey, keyId)?.data as ApiKeyConfig | undefined;
  }

  account(id: number): AccountConfig | undefined {
    return this.mirror.get(TOPICS.account, String(id))?.data as AccountConfig | undefined;
  }

  certificate(id: number): CertificateConfig | undefined {
    return this.mirror.get(TOPICS.certificate, String(id))?.data as CertificateConfig | undefined;
  }

  /** Restores the last saved state; returns its version (0 when there is none or it is unreadable). */
  async load(): Promise<number> {
    if (!this.options.stateFile) return 0;
    try {
      const snapshot = JSON.parse(await readFile(this.options.stateFile, 'utf8')) as FeedSnapshot;
      if (!Number.isInteger(snapshot.version) || !Array.isArray(snapshot.entries)) throw new Error('not a feed snapshot');
      this.mirror.reset(snapshot);
      this.options.logger.info({ version: snapshot.version, entries: snapshot.entries.length }, 'edge config restored from disk');
      return snapshot.version;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.options.logger.warn({ err }, 'ignoring unreadable saved edge config');
      return 0;
    }
  }

  /** Writes the state to disk soon (changes come in bursts; one write per burst). */
  scheduleSave(delayMs = 250): void {
    if (!this.options.stateFile || this.saveTimer) return;
    this.saveTimer = setTimeout(() => {
      this.saveTimer = null;
      this.saving = this.saving.then(() => this.save()).catch((err) => this.options.logger.warn({ err }, 'could not save edge config'));
    }, delayMs);
    this.saveTimer.unref();
  }

  async flush(): Promise<void> {
    if (this.saveTimer) {
      clearTimeout(this.saveTimer);
      this.saveTimer = null;
      this.saving = this.saving.then(() => this.save());
    }
    await this.saving;
  }

  private async save(): Promise<void> {
    const file = this.options.stateFile!;
    const snapshot: FeedSnapshot = { version: this.mirror.version, entries: this.mirror.entries() };
    await mkdir(dirname(file), { recursive: true });
    // Write-then-rename, so a crash mid-write leaves the previous state rather than half a file.
    await writeFile(`${file}.tmp`, JSON.stringify(snapshot));
    await rename(`${file}.tmp`, file);
  }

  private onChange(change: FeedChange): void {
    this.scheduleSave();
    if (change.topic === TOPICS.certificate) {
      this.emit('certificate', Number(change.key));
      return;
    }
    if (change.topic === TOPICS.apiKey) return void this.emit('apiKey', change.key);
    if (change.topic === TOPICS.account) return void this.emit('account', Number(change.key));
    if (change.topic !== TOPICS.endpoint) return;
    const next = change.data as EndpointConfig | null;
    const previous = this.current.get(change.key) ?? null;
    if (previous) {
      if (this.byHost.get(previous.hostname) === change.key) this.byHost.delete(previous.hostname);
      this.compiled.delete(previous.hostname);
    }
    if (next) {
      this.byHost.set(next.hostname, change.key);
      // Also drops a negative entry cached while the name was unknown.
      this.compiled.delete(next.hostname);
      this.current.set(change.key, next);
    } else {
      this.current.delete(change.key);
    }
    this.emit('endpoint', change.key, next, previous);
  }

  /** uuid → config as last indexed, so a change can undo the previous hostname's index entries in O(1). */
  private readonly current = new Map<string, EndpointConfig>();
}
