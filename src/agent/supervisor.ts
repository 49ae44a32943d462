// Runs the tunnels of an agent file in one process (`edge agent start --config`): each an Agent, HaAgent or DeployAgent,
// and `apply(specs)` moves from the running set to a new one touching only the tunnels that were added, removed or changed.
//
// A tunnel the edge refuses for good (or that cannot start) ends alone: the others run on, and `idle` says when none is left.
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { Welcome } from '../shared/tunnel/protocol.ts';
import { Agent, type ReconnectInfo } from './agent.ts';
import { HaAgent } from './ha.ts';
import { DeployAgent } from './deploy/deploy-agent.ts';
import type { TunnelSpec } from './config-file.ts';

export interface SupervisorEvents {
  /** The tunnel is up (again): its public URL is in the welcome; `transport` is what carries it. */
  online: [tunnel: TunnelSpec, welcome: Welcome, transport: string];
  reconnecting: [tunnel: TunnelSpec, info: ReconnectInfo];
  /** The tunnel ended on its own: refused by the edge for good (a TunnelRefusedError, with its code), or it could not start. */
  failed: [tunnel: TunnelSpec, error: Error];
  /** No tunnel is running any more, after the last one failed (not after stop() or apply()). */
  idle: [];
}

/** What apply() did, by tunnel name, each list in the order of the specs given. */
export interface ApplyResult {
  started: string[];
  stopped: string[];
  restarted: string[];
  unchanged: string[];
}

export interface SupervisorOptions {
  /** Each tunnel logs through a child with its name bound (`tunnel`). */
  logger: Logger;
  /** Grace for streams in flight when a tunnel stops (default 5 s, as Agent.stop). */
  graceMs?: number;
}

type Handle = Agent | HaAgent | DeployAgent;

interface Running {
  spec: TunnelSpec;
  /** The spec as JSON: a tunnel whose key is unchanged is left alone. */
  key: string;
  handle: Handle;
  online: boolean;
  /** Set once it stops for any reason: later events of the handle are ignored. */
  ended: boolean;
}

export class Supervisor extends EventEmitter<SupervisorEvents> {
  private readonly running = new Map<string, Running>();
  private readonly logger: Logger;
  private readonly graceMs: number;
  /** apply() and stop() run one at a time, in the order called. */
  private queue: Promise<unknown> = Promise.resolve();
  private stopped = false;
  private applying = false;

  constructor(options: SupervisorOptions) {
    super();
    this.logger = options.logger;
    this.graceMs = options.graceMs ?? 5_000;
  }

  /** The names of the tunnels running now (connected or reconnecting), in start order. */
  get names(): string[] {
    return [...this.running.keys()];
  }

  /** The running tunnel's agent (its `agentId`, `welcome`…), for status and tests. */
  handle(name: string): Handle | undefined {
    return this.running.get(name)?.handle;
  }

  /**
   * Makes the running set `specs`: stops the tunnels not in it and those whose settings changed, then starts the new
   * and the changed ones (a tunnel that failed counts as not running, so it starts again). Resolves once the stops are
   * done and the starts begun; `online` and `failed` say how each start went.
   */
  apply(specs: readonly TunnelSpec[]): Promise<ApplyResult> {
    const next = this.queue.then(() => this.applyNow(specs));
    this.queue = next.catch(() => {});
    return next;
  }

  private async applyNow(specs: readonly TunnelSpec[]): Promise<ApplyResult> {
    if (this.stopped) throw new Error('the supervisor is stopped');
    this.applying = true;
    try {
      return await this.applyChanges(specs);
    } finally {
      this.applying = false;
    }
  }

  private async applyChanges(specs: readonly TunnelSpec[]): Promise<ApplyResult> {
    const names = new Set(specs.map((s) => s.name));
    if (names.size !== specs.length) throw new Error('tunnel names must be unique');
    const result: ApplyResult = { started: [], stopped: [], restarted: [], unchanged: [] };
    const wanted = new Map(specs.map((s) => [s.name, { spec: s, key: JSON.stringify(s) }]));
    const ending: Running[] = [];
    for (const [name, run] of this.running) {
      const want = wanted.get(name);
      if (want && want.key === run.key) continue;
      (want ? result.restarted : result.stopped).push(name);
      ending.push(run);
      this.running.delete(name);
    }
    // A changed tunnel may keep its agent id and endpoint: the old one is gone before the new one says hello.
    await Promise.all(ending.map((run) => this.end(run)));
    for (const { spec, key } of wanted.values()) {
      if (this.running.has(spec.name)) {
        result.unchanged.push(spec.name);
        continue;
      }
      if (!result.restarted.includes(spec.name)) result.started.push(spec.name);
      this.start(spec, key);
    }
    // Every tunnel asked for failed, meanwhile or as it was created: nothing is left to wait for.
    if (this.running.size === 0 && wanted.size > 0) this.emit('idle');
    return result;
  }

  /** Stops every tunnel (each with the grace for its streams in flight); nothing starts after. */
  stop(): Promise<void> {
    const next = this.queue.then(async () => {
      this.stopped = true;
      const all = [...this.running.values()];
      this.running.clear();
      await Promise.all(all.map((run) => this.end(run)));
    });
    this.queue = next.catch(() => {});
    return next;
  }

  private start(spec: TunnelSpec, key: string): void {
    const logger = this.logger.child({ tunnel: spec.name });
    let handle: Handle;
    try {
      handle = create(spec, logger);
    } catch (err) {
      // The file's checks ran agentSettings; this is a last resort, reported as the tunnel's failure.
      return void this.emit('failed', spec, err as Error);
    }
    const run: Running = { spec, key, handle, online: false, ended: false };
    this.running.set(spec.name, run);
    const agent = handle instanceof DeployAgent ? handle.agent : handle;
    const up = (welcome: Welcome) => {
      if (run.ended || run.online) return;
      run.online = true;
      this.emit('online', spec, welcome, agent.transport ?? spec.transport);
    };
    agent.on('connected', up);
    // With several edges the tunnel is down only when no edge holds it.
    agent.on('disconnected', () => void (run.online = agent.welcome !== null));
    agent.on('reconnecting', (info: ReconnectInfo) => {
      if (!run.ended) this.emit('reconnecting', spec, info);
    });
    agent.on('stopped', (err) => {
      if (err) void this.fail(run, err);
    });
    // A refusal rejects the start too (said once, by fail); so does what happens before the first dial (DNS, the deploy dir).
    handle.start().catch((err: Error) => void this.fail(run, err));
  }

  private async fail(run: Running, err: Error): Promise<void> {
    if (run.ended || this.running.get(run.spec.name) !== run) return;
    this.running.delete(run.spec.name);
    this.emit('failed', run.spec, err);
    await this.end(run, 0);
    // During an apply the set is in between (removed tunnels gone, new ones not started yet): apply says it at its end.
    if (this.running.size === 0 && !this.stopped && !this.applying) this.emit('idle');
  }

  private async end(run: Running, graceMs = this.graceMs): Promise<void> {
    run.ended = true;
    run.online = false;
    // An agent refused for good has stopped already; a deploy agent still has its releases to stop.
    await run.handle.stop(graceMs).catch((err: Error) => this.logger.warn({ tunnel: run.spec.name, err: err.message }, 'tunnel did not stop cleanly'));
  }
}

function create(spec: TunnelSpec, logger: Logger): Handle {
  const common = { apiKey: spec.apiKey, agentId: spec.agentId, tags: spec.tags, transport: spec.transport, logger };
  if (spec.kind === 'deploy') {
    return new DeployAgent({
      ...common,
      application: spec.application,
      dir: spec.dir,
      edgeUrl: spec.edge,
      deployer: { buildTimeoutMs: spec.buildTimeoutMs, healthTimeoutMs: spec.healthTimeoutMs, keepReleases: spec.keepReleases },
    });
  }
  const options = {
    ...common,
    protocol: spec.kind,
    target: spec.target,
    endpoint: spec.endpoint,
    hostHeader: spec.hostHeader,
    dataConnections: spec.dataConnections,
  };
  if ('edges' in spec.connection) return new HaAgent({ ...options, edges: spec.connection.edges, haConnections: spec.connection.haConnections });
  return new Agent({ ...options, edgeUrl: spec.connection.edge });
}
