// The edge's endpoint cache (the node's own settings are src/shared/config.ts): a mirror of the change feed, indexed
// for the data plane (host → endpoint, API keys, accounts, certificates), with compiled endpoints in an LRU cache and
// misses negative-cached.
//
// Work is proportional to what changed: a change compiles and re-indexes one endpoint and emits one event; a reset
// (start, resync) builds the new indexes in slices beside the ones serving and swaps them in whole, so requests
// never wait long behind config work and never see a mix of two versions (docs/architecture.md "Build, then swap").
// An endpoint config is compiled when it arrives: one that fails leaves the previous one in force and is reported,
// unless a security stage failed (then the new config is in force, closed: every request answers 503).
import { EventEmitter } from 'node:events';
import { createReadStream } from 'node:fs';
import { mkdir, open, rename } from 'node:fs/promises';
import { dirname } from 'node:path';
import { createInterface } from 'node:readline';
import { LRUCache } from 'lru-cache';
import { StringPool } from '../shared/feed/parse.ts';
import { FeedMirror, type ResetSwap } from '../shared/feed/subscriber.ts';
import type { FeedChange, FeedEntry, FeedSnapshot } from '../shared/feed/types.ts';
import type { ApplicationConfig } from '../shared/deploy.ts';
import type { Logger } from '../shared/log.ts';
import { COMPILE_ERRORS_REPORTED, type EdgeHeartbeat, type EndpointCompileError } from '../shared/presence.ts';
import { TOPICS, type AccountConfig, type ApiKeyConfig, type CertificateConfig, type DedicatedIpGroupConfig, type EndpointConfig } from '../shared/snapshot.ts';
import { copyMap, TimeSlicer } from '../shared/time-slice.ts';
import { compileEndpoint, STAGES, type CompiledEndpoint } from './compile.ts';
import { DEFAULT_STAGE_DEPS, type StageDeps, type StageFactory } from './pipeline/stage.ts';

/** Feed topics whose changes are told to listeners as they are (endpoints and certificates have their own notices). */
const NOTICE_TOPICS = new Map<string, 'apiKey' | 'account' | 'dedicatedIpGroup' | 'application'>([
  [TOPICS.apiKey, 'apiKey'],
  [TOPICS.account, 'account'],
  [TOPICS.dedicatedIpGroup, 'dedicatedIpGroup'],
  [TOPICS.application, 'application'],
]);

/** A cached "no such host", so a flood of requests for unknown names never rescans anything. */
const MISSING = Symbol('missing');

/** Compile failures logged one by one in a reset; the rest are counted in one line (a bad release can break thousands). */
const FAILURES_LOGGED_PER_RESET = 10;

export interface EndpointCacheEvents {
  /**
   * An endpoint's config in force was added, changed or removed (null), after the indexes hold the new state. A
   * change that failed to compile changes nothing in force, so it emits nothing.
   */
  endpoint: [uuid: string, config: EndpointConfig | null, previous: EndpointConfig | null];
  certificate: [id: number];
  /** An API key entry was added, changed or removed (null). */
  apiKey: [keyId: string, config: ApiKeyConfig | null, previous: ApiKeyConfig | null];
  /** An account entry was added, changed or removed (null). */
  account: [id: number, config: AccountConfig | null, previous: AccountConfig | null];
  /** A dedicated IP group entry was added, changed or removed (null): src/edge/dedicated-addresses.ts follows it. */
  dedicatedIpGroup: [id: number, config: DedicatedIpGroupConfig | null];
  /** An application entry was added, changed (a new deployment order) or removed (null): src/edge/deploy-channel.ts follows it. */
  application: [uuid: string, config: ApplicationConfig | null];
}

export interface EndpointCacheOptions {
  logger: Logger;
  /** Compiled endpoints (and negative entries) kept at most. */
  cacheSize?: number;
  /** Where the last applied config is kept, so a restart serves before the control plane or Redis answers. */
  stateFile?: string;
  /** What compiled stages need of the edge (its public HTTPS port). */
  stageDeps?: StageDeps;
  /** The pipeline's stage factories (compile.ts STAGES unless a test adds one). */
  stages?: readonly StageFactory[];
  /** Longest stretch a reset, a load or a save works without yielding to the event loop (default 10 ms). */
  sliceMs?: number;
}

/** What requests are served from; replaced whole by a reset, changed entry by entry by a change. */
interface Served {
  /** uuid → the config in force: the last one that compiled (for a new endpoint that never did, a 503 stand-in). */
  readonly endpoints: Map<string, EndpointConfig>;
  /** hostname → uuid. */
  readonly byHost: Map<string, string>;
  /** uuid → why its latest config is not in force, in the order the failures happened. */
  readonly errors: Map<string, EndpointCompileError>;
}

/** The outcome of compiling an endpoint's new config: what goes in force, and its compiled form (null: it failed). */
interface Admitted {
  config: EndpointConfig;
  compiled: CompiledEndpoint | null;
}

type Notice =
  | { topic: 'endpoint'; key: string; config: EndpointConfig | null; previous: EndpointConfig | null }
  | { topic: 'certificate'; key: string }
  | { topic: 'apiKey' | 'account' | 'dedicatedIpGroup' | 'application'; key: string; config: unknown; previous: unknown };

/** An endpoint's index entries: its hostname, taken back only if no other endpoint took it since (resets reorder). */
function index(state: Served, uuid: string, previous: EndpointConfig | null, next: EndpointConfig | null): void {
  if (previous && state.byHost.get(previous.hostname) === uuid) state.byHost.delete(previous.hostname);
  if (next) {
    state.byHost.set(next.hostname, uuid);
    state.endpoints.set(uuid, next);
  } else {
    state.endpoints.delete(uuid);
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export class EndpointCache extends EventEmitter<EndpointCacheEvents> {
  readonly mirror: FeedMirror;
  private state: Served = { endpoints: new Map(), byHost: new Map(), errors: new Map() };
  private readonly compiled: LRUCache<string, CompiledEndpoint | typeof MISSING>;
  /** 503 stand-ins for endpoints that never compiled: served with no stages, never compiled themselves. */
  private readonly standIns = new WeakSet<EndpointConfig>();
  private readonly stageDeps: StageDeps;
  private readonly stages: readonly StageFactory[];
  private readonly sliceMs: number | undefined;
  private saveTimer: NodeJS.Timeout | null = null;
  private saving: Promise<void> = Promise.resolve();
  /** Set while the saved state is being restored: writing back what was just read would be wasted work. */
  private loading = false;

  constructor(private readonly options: EndpointCacheOptions) {
    super();
    this.compiled = new LRUCache({ max: options.cacheSize ?? 10_000 });
    this.stageDeps = options.stageDeps ?? DEFAULT_STAGE_DEPS;
    this.stages = options.stages ?? STAGES;
    this.sliceMs = options.sliceMs;
    this.mirror = new FeedMirror({
      onChange: (change, previous) => this.onChange(change, previous),
      prepareReset: (differences, slicer) => this.prepareReset(differences, slicer),
      sliceMs: options.sliceMs,
    });
  }

  get version(): number {
    return this.mirror.version;
  }

  /**
   * The compiled endpoint serving `host` (lower-case, no port), or null. A host in use keeps its compiled form in the
   * cache across changes; any other is compiled on its first request (its config already compiled once on arrival).
   */
  lookup(host: string): CompiledEndpoint | null {
    const hit = this.compiled.get(host);
    if (hit !== undefined) return hit === MISSING ? null : hit;
    const uuid = this.state.byHost.get(host);
    const config = uuid === undefined ? undefined : this.state.endpoints.get(uuid);
    if (config === undefined) {
      this.compiled.set(host, MISSING);
      return null;
    }
    const compiled = this.compileInForce(uuid!, config);
    this.compiled.set(host, compiled);
    return compiled;
  }

  /** The config in force for an endpoint (its latest, unless that failed to compile). */
  endpoint(uuid: string): EndpointConfig | undefined {
    return this.state.endpoints.get(uuid);
  }

  endpoints(): EndpointConfig[] {
    return [...this.state.endpoints.values()];
  }

  apiKey(keyId: string): ApiKeyConfig | undefined {
    return this.mirror.get(TOPICS.apiKey, keyId)?.data as ApiKeyConfig | undefined;
  }

  account(id: number): AccountConfig | undefined {
    return this.mirror.get(TOPICS.account, String(id))?.data as AccountConfig | undefined;
  }

  /** Every dedicated IP group the feed holds (active and pending). */
  dedicatedIpGroups(): DedicatedIpGroupConfig[] {
    return this.mirror.entries(TOPICS.dedicatedIpGroup).map((e) => e.data as DedicatedIpGroupConfig);
  }

  /** A deploying agent's application (its build and run commands, and the deployment order in force). */
  application(uuid: string): ApplicationConfig | undefined {
    return this.mirror.get(TOPICS.application, uuid)?.data as ApplicationConfig | undefined;
  }

  certificate(id: number): CertificateConfig | undefined {
    return this.mirror.get(TOPICS.certificate, String(id))?.data as CertificateConfig | undefined;
  }

  /**
   * Endpoints whose latest config is not in force because it failed to compile, as the heartbeat reports them: the
   * most recent `limit`, newest first, and how many in all.
   */
  compileErrors(limit = COMPILE_ERRORS_REPORTED): Required<Pick<EdgeHeartbeat, 'compile_errors' | 'compile_error_count'>> {
    const { errors } = this.state;
    // The map is in the order failures happened, so the most recent are its last entries.
    const recent: EndpointCompileError[] = [];
    let skip = errors.size - limit;
    for (const e of errors.values()) if (skip-- <= 0) recent.push(e);
    return { compile_errors: recent.reverse(), compile_error_count: errors.size };
  }

  /** Restores the last saved state; returns its version (0 when there is none or it is unreadable). */
  async load(): Promise<number> {
    if (!this.options.stateFile) return 0;
    this.loading = true;
    try {
      const snapshot = await readStateFile(this.options.stateFile);
      await this.mirror.reset(snapshot);
      this.options.logger.info({ version: snapshot.version, entries: snapshot.entries.length }, 'edge config restored from disk');
      return snapshot.version;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.options.logger.warn({ err }, 'ignoring unreadable saved edge config');
      return 0;
    } finally {
      this.loading = false;
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

  /**
   * One JSON line per entry after a header line, written in slices: JSON.stringify of 100k endpoints in one call
   * holds the event loop for about 200 ms. Write-then-rename, so a crash mid-write leaves the previous state.
   */
  private async save(): Promise<void> {
    const file = this.options.stateFile!;
    // One consistent cut, taken in one step: entries are replaced, never changed, so later changes don't leak in.
    const version = this.mirror.version;
    const entries = this.mirror.entries();
    await mkdir(dirname(file), { recursive: true });
    const out = await open(`${file}.tmp`, 'w');
    try {
      const slicer = new TimeSlicer(this.sliceMs);
      let chunk = `${JSON.stringify({ version, entries: entries.length })}\n`;
      for (const entry of entries) {
        chunk += `${JSON.stringify(entry)}\n`;
        if (chunk.length >= 1 << 20 || slicer.due()) {
          await out.write(chunk);
          chunk = '';
          await slicer.yield();
        }
      }
      await out.write(chunk);
    } finally {
      await out.close();
    }
    await rename(`${file}.tmp`, file);
  }

  /**
   * Compiles an endpoint's new config. One that fails is recorded (and logged, once: it is never compiled again)
   * and the config in force stays; a new endpoint with nothing in force gets a stand-in that answers 503. When the
   * failure is a security stage's (mTLS, auth, JWT, webhook), the new config goes in force compiled closed instead
   * (503 auth_unavailable on every request, compile.ts): the previous one would serve without the new check.
   */
  private admit(errors: Map<string, EndpointCompileError>, uuid: string, version: number, next: EndpointConfig, previous: EndpointConfig | null, log: boolean): Admitted {
    let compiled: CompiledEndpoint;
    try {
      compiled = compileEndpoint(next, this.stageDeps, this.stages);
    } catch (err) {
      this.recordFailure(errors, uuid, version, errorText(err), err, previous ? 'previous config' : 'nothing (answers 503)', log);
      if (previous) return { config: previous, compiled: null };
      return { config: this.standIn(next), compiled: null };
    }
    if (compiled.failure !== undefined) {
      this.recordFailure(errors, uuid, version, compiled.failure, undefined, 'nothing: a security stage failed, so the endpoint answers 503 auth_unavailable', log);
    } else errors.delete(uuid);
    return { config: next, compiled };
  }

  private recordFailure(errors: Map<string, EndpointCompileError>, uuid: string, version: number, error: string, err: unknown, keeping: string, log: boolean): void {
    // Deleted first so the map's order stays the order of failures (compileErrors reads the last ones).
    errors.delete(uuid);
    errors.set(uuid, { endpoint: uuid, version, error });
    if (log) this.options.logger.error({ err: err ?? error, endpoint: uuid, version, keeping }, 'endpoint config failed to compile');
  }

  private standIn(config: EndpointConfig): EndpointConfig {
    const standIn: EndpointConfig = { ...config, status: 'error' };
    this.standIns.add(standIn);
    return standIn;
  }

  /**
   * A config in force compiled when it arrived, so this normally just rebuilds it after an eviction. Should it throw
   * now (a stage that depends on more than the config), the 503 stand-in is cached in its place, so the failure
   * costs one compile and one log line per cache entry, not one per request.
   */
  private compileInForce(uuid: string, config: EndpointConfig): CompiledEndpoint {
    if (!this.standIns.has(config)) {
      try {
        return compileEndpoint(config, this.stageDeps, this.stages);
      } catch (err) {
        this.options.logger.error({ err, endpoint: uuid }, 'endpoint config in force failed to compile again; answering 503');
        this.state.errors.set(uuid, { endpoint: uuid, version: this.mirror.get(TOPICS.endpoint, uuid)?.version ?? this.version, error: errorText(err) });
        config = this.standIn(config);
      }
    }
    const none = Object.freeze([]);
    return Object.freeze({ config, stages: none, probeStages: none });
  }

  /** One change: O(1) index work, one compile, one event. */
  private onChange(change: FeedChange, previousEntry: FeedEntry | undefined): void {
    this.scheduleSave();
    if (change.topic !== TOPICS.endpoint) {
      const notice = this.notice(change, previousEntry);
      if (notice) this.notify(notice);
      return;
    }
    const state = this.state;
    const previous = state.endpoints.get(change.key) ?? null;
    const next = change.data === null ? null : this.admit(state.errors, change.key, change.version, change.data as EndpointConfig, previous, true);
    if (next === null) state.errors.delete(change.key);
    if (next?.config === previous) return; // failed to compile: the previous config stays in force
    index(state, change.key, previous, next?.config ?? null);
    if (previous && previous.hostname !== next?.config.hostname) this.compiled.delete(previous.hostname);
    if (next) this.recache(next.config.hostname, next.compiled);
    this.notify({ topic: 'endpoint', key: change.key, config: next?.config ?? null, previous });
  }

  /**
   * The cache entry for a host whose endpoint changed: the new compiled form if the host was cached (it is in use,
   * and compiling it again on the next request would be waste), else nothing, so cold endpoints don't evict hot ones.
   */
  private recache(host: string, compiled: CompiledEndpoint | null): void {
    if (!this.compiled.has(host)) return;
    if (compiled) this.compiled.set(host, compiled);
    else this.compiled.delete(host);
  }

  /**
   * A reset's differences applied to copies of the indexes, in slices, while the current ones keep serving. Copying
   * is one pass over the endpoints; each difference then costs what a change costs. The swap replaces the indexes,
   * drops the cache entries the reset made stale, and tells listeners, in slices.
   */
  private async prepareReset(differences: FeedChange[], slicer: TimeSlicer): Promise<ResetSwap> {
    const before = this.state;
    const state: Served = {
      endpoints: await copyMap(before.endpoints, slicer),
      byHost: await copyMap(before.byHost, slicer),
      errors: await copyMap(before.errors, slicer),
    };
    const notices: Notice[] = [];
    /** host → its new compiled form, for hosts in the cache now. */
    const fresh = new Map<string, CompiledEndpoint>();
    let failures = 0;
    for (const change of differences) {
      if (slicer.due()) await slicer.yield();
      if (change.topic !== TOPICS.endpoint) {
        // The mirror still holds the entries being replaced, so listeners can be told what each was.
        const notice = this.notice(change, this.mirror.get(change.topic, change.key));
        if (notice) notices.push(notice);
        continue;
      }
      const previous = state.endpoints.get(change.key) ?? null;
      let next: Admitted | null = null;
      if (change.data === null) state.errors.delete(change.key);
      else {
        next = this.admit(state.errors, change.key, change.version, change.data as EndpointConfig, previous, failures < FAILURES_LOGGED_PER_RESET);
        if (next.compiled === null || next.compiled.failure !== undefined) failures++;
      }
      if (next?.config === previous) continue; // failed to compile: the previous config stays in force
      index(state, change.key, previous, next?.config ?? null);
      if (next?.compiled && this.compiled.has(next.config.hostname)) fresh.set(next.config.hostname, next.compiled);
      notices.push({ topic: 'endpoint', key: change.key, config: next?.config ?? null, previous });
    }
    if (failures > FAILURES_LOGGED_PER_RESET) {
      this.options.logger.error({ failures, logged: FAILURES_LOGGED_PER_RESET }, 'endpoint configs failed to compile in this reset; see compile errors in the edge status');
    }
    return () => {
      this.state = state;
      this.dropStale(fresh);
      if (!this.loading) this.scheduleSave();
      // Not abandoned once swapped (a fresh slicer, without the stop signal): listeners are told of the whole reset.
      return new TimeSlicer(this.sliceMs).forEach(notices, (n) => this.notify(n));
    };
  }

  /**
   * After a swap, the cache keeps what is still right: an entry whose endpoint is unchanged, or a miss for a name
   * still unknown. One pass over the cache (at most cacheSize entries), whatever the size of the reset.
   */
  private dropStale(fresh: Map<string, CompiledEndpoint>): void {
    const { byHost, endpoints } = this.state;
    const stale: string[] = [];
    for (const [host, hit] of this.compiled.entries()) {
      const uuid = byHost.get(host);
      const config = uuid === undefined ? undefined : endpoints.get(uuid);
      if (hit === MISSING ? config !== undefined : hit.config !== config) stale.push(host);
    }
    for (const host of stale) {
      const compiled = fresh.get(host);
      if (compiled) this.compiled.set(host, compiled);
      else this.compiled.delete(host);
    }
  }

  /** What listeners are told of a change to an entry other than an endpoint; null for a topic this edge ignores. */
  private notice(change: FeedChange, previous: FeedEntry | undefined): Notice | null {
    if (change.topic === TOPICS.certificate) return { topic: 'certificate', key: change.key };
    const topic = NOTICE_TOPICS.get(change.topic);
    if (topic === undefined) return null;
    return { topic, key: change.key, config: change.data, previous: previous?.data ?? null };
  }

  private notify(n: Notice): void {
    switch (n.topic) {
      case 'endpoint':
        this.emit('endpoint', n.key, n.config, n.previous);
        break;
      case 'certificate':
        this.emit('certificate', Number(n.key));
        break;
      case 'apiKey':
        this.emit('apiKey', n.key, n.config as ApiKeyConfig | null, n.previous as ApiKeyConfig | null);
        break;
      case 'account':
        this.emit('account', Number(n.key), n.config as AccountConfig | null, n.previous as AccountConfig | null);
        break;
      case 'dedicatedIpGroup':
        this.emit('dedicatedIpGroup', Number(n.key), n.config as DedicatedIpGroupConfig | null);
        break;
      case 'application':
        this.emit('application', n.key, n.config as ApplicationConfig | null);
        break;
    }
  }
}

/**
 * Reads a saved state: a header line `{"version", "entries": <count>}` then one entry per line, parsed as the file
 * streams in (so no single JSON.parse of the whole file holds the event loop). The count catches a truncated file.
 * A file in the earlier single-document form (`entries` an array) is still read, in one parse.
 */
async function readStateFile(file: string): Promise<FeedSnapshot> {
  const lines = createInterface({ input: createReadStream(file, { encoding: 'utf8', highWaterMark: 256 * 1024 }), crlfDelay: Infinity });
  let header: { version?: unknown; entries?: unknown } | null = null;
  const entries: FeedEntry[] = [];
  // Equal strings shared between entries, as a snapshot read from the feed has them (parse.ts).
  const pool = new StringPool();
  for await (const line of lines) {
    if (header === null) {
      header = JSON.parse(line) as { version?: unknown; entries?: unknown };
      if (Array.isArray(header.entries)) {
        lines.close();
        break;
      }
      continue;
    }
    if (line === '') continue;
    const entry = JSON.parse(line) as FeedEntry;
    if (typeof entry.topic !== 'string' || typeof entry.key !== 'string' || !Number.isInteger(entry.version)) throw new Error('not a feed entry');
    entries.push(pool.entry(entry));
  }
  if (header === null || !Number.isInteger(header.version)) throw new Error('not a feed snapshot');
  if (Array.isArray(header.entries)) return { version: header.version as number, entries: header.entries as FeedEntry[] };
  if (header.entries !== entries.length) throw new Error(`saved edge config is truncated: ${entries.length} of ${String(header.entries)} entries`);
  return { version: header.version as number, entries };
}
