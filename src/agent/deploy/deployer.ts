// The agent's release manager (`edge agent deploy`): runs the deployment orders the edge relays on this machine —
// fetch, build, start, health-check, switch, drain — supervises the live process, and reports every step as events.
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AgentControlEvent, ApplicationConfig, DeploymentOrder, StatusEvent } from '../../shared/deploy.ts';
import { Backoff } from '../backoff.ts';
import { Cancelled, DeployError, duration } from './errors.ts';
import { fetchCommit } from './git.ts';
import { waitHealthy } from './health.ts';
import { LogBatch } from './log-batch.ts';
import { describeExit, freePort, ProcessGroup, runToEnd } from './process-group.ts';
import { INCOMING_PREFIX, listReleases, prune, readState, releaseName, removeIncoming, touch, writeState, type Release } from './releases.ts';

export interface DeployerOptions {
  /** Releases live in DIR/releases/<deployment_id>-<sha12>, the live one is named in DIR/state.json. */
  dir: string;
  /** Status, log and process events, sent as they happen (in order). Must not throw; a throw is logged and dropped. */
  report: (event: AgentControlEvent) => void;
  /** The build command's time limit, and each git command's; default 10 min. */
  buildTimeoutMs?: number;
  /** How long a started release may take to answer its health path with 2xx; default 60 s. */
  healthTimeoutMs?: number;
  /** SIGTERM → SIGKILL grace when stopping a process group; default 10 s. */
  stopGraceMs?: number;
  /** How long requests in flight on the old release may take after a switch before it is stopped; default 30 s. */
  drainTimeoutMs?: number;
  /** Releases kept on disk, the live one included (the others are rollback targets); default 3. */
  keepReleases?: number;
  /** Delays between restarts of a live process that exited; default 1 s doubling to 60 s, with full jitter. */
  restartBackoff?: { initialMs: number; maxMs: number };
  /** Failed restarts in a row before `process stopped` is reported (retries go on at the largest delay); default 5. */
  maxFailedRestarts?: number;
  /** Lines of the live process's output kept for recentOutput(); default 200. */
  outputLines?: number;
  /** The agent's own console. */
  log?: (line: string) => void;
}

export interface Acquired {
  port: number;
  /** Ends the request's hold on the release (idempotent); the old release is stopped once its last hold ends. */
  release(): void;
}

/** One running process of a release, on its own port, with the requests in flight on it. */
class Instance {
  inflight = 0;
  /** Set when the deployer stops it on purpose: its exit is then no crash to restart after. */
  stopping = false;
  private idle: Array<() => void> = [];

  constructor(
    readonly group: ProcessGroup,
    readonly port: number,
    /** Where output lines go; swapped from the deployment's log to the console once the release is live. */
    public sink: (line: string) => void,
  ) {}

  hold(): Acquired {
    this.inflight++;
    let done = false;
    return {
      port: this.port,
      release: () => {
        if (done) return;
        done = true;
        if (--this.inflight === 0) for (const resolve of this.idle.splice(0)) resolve();
      },
    };
  }

  /** Resolves true when nothing is in flight, false after timeoutMs or when `signal` aborts (the deployer closes). */
  async drained(timeoutMs: number, signal: AbortSignal): Promise<boolean> {
    if (this.inflight === 0) return true;
    const ac = new AbortController();
    const stop = () => ac.abort();
    signal.addEventListener('abort', stop, { once: true });
    const idle = new Promise<boolean>((resolve) => this.idle.push(() => resolve(true)));
    const late = sleep(timeoutMs, false, { signal: ac.signal }).catch(() => false);
    const result = await Promise.race([idle, late]);
    ac.abort();
    signal.removeEventListener('abort', stop);
    return result;
  }
}

/** The live release and its supervision: restarts of its process, counted for `process` events. */
class Live {
  instance: Instance | null = null;
  restarts = 0;
  /** Aborted when another release replaces this one or the deployer closes: ends restart attempts. */
  readonly supervision = new AbortController();
  constructor(readonly release: Release) {}
}

/** One order being worked on. */
class Run {
  readonly ac = new AbortController();
  cancelledBy: 'order' | 'refused' | 'close' | null = null;
  /** Set at the switch: from then on the deployment is live and cannot be cancelled. */
  switched = false;
  done: Promise<void> = Promise.resolve();
  readonly logs: LogBatch;

  constructor(
    readonly app: ApplicationConfig,
    readonly order: DeploymentOrder,
    report: (event: AgentControlEvent) => void,
  ) {
    this.logs = new LogBatch(order.deployment_id, report);
  }

  get id(): number {
    return this.order.deployment_id;
  }

  cancel(by: 'order' | 'refused' | 'close'): void {
    if (this.switched || this.cancelledBy) return;
    this.cancelledBy = by;
    this.ac.abort();
  }
}

export class Deployer {
  private readonly dir: string;
  private readonly releasesDir: string;
  private readonly buildTimeoutMs: number;
  private readonly healthTimeoutMs: number;
  private readonly stopGraceMs: number;
  private readonly drainTimeoutMs: number;
  private readonly keepReleases: number;
  private readonly restartBackoff: { initialMs: number; maxMs: number };
  private readonly maxFailedRestarts: number;
  private readonly outputLines: number;
  private readonly console: (line: string) => void;
  private readonly reportFn: (event: AgentControlEvent) => void;

  private live: Live | null = null;
  private current: Run | null = null;
  private wanted: ApplicationConfig | null = null;
  /** Deployments started (or refused, or found live at start) in this agent's life: an order seen again is not rerun. */
  private readonly seen = new Set<number>();
  /** The deployment state.json named at start(): an order for it means the `live` report may not have arrived. */
  private restored: number | null = null;
  private readonly listeners = new Set<(port: number | null) => void>();
  /** Background work close() waits for (restart loops, drains). */
  private readonly tasks = new Set<Promise<unknown>>();
  private readonly output: string[] = [];
  private closed = false;
  /** Aborted by close(): cuts a drain short. */
  private readonly closing = new AbortController();

  constructor(options: DeployerOptions) {
    this.dir = options.dir;
    this.releasesDir = join(options.dir, 'releases');
    this.reportFn = options.report;
    this.buildTimeoutMs = options.buildTimeoutMs ?? 10 * 60_000;
    this.healthTimeoutMs = options.healthTimeoutMs ?? 60_000;
    this.stopGraceMs = options.stopGraceMs ?? 10_000;
    this.drainTimeoutMs = options.drainTimeoutMs ?? 30_000;
    this.keepReleases = Math.max(1, options.keepReleases ?? 3);
    this.restartBackoff = options.restartBackoff ?? { initialMs: 1_000, maxMs: 60_000 };
    this.maxFailedRestarts = options.maxFailedRestarts ?? 5;
    this.outputLines = options.outputLines ?? 200;
    this.console = options.log ?? (() => {});
  }

  /** Restarts the release that was live when the agent last stopped (DIR/state.json), if any; resolves once it serves or its first start failed. */
  async start(): Promise<void> {
    await mkdir(this.releasesDir, { recursive: true });
    await removeIncoming(this.releasesDir);
    let release: Release | null;
    try {
      release = await readState(this.dir, this.releasesDir);
    } catch (err) {
      this.console(`deploy: ignoring ${join(this.dir, 'state.json')}: ${(err as Error).message}`);
      return;
    }
    if (!release || this.closed || this.live) return;
    if (!(await stat(release.dir).catch(() => null))?.isDirectory()) {
      this.console(`deploy: state.json names release ${release.name}, which is not in ${this.releasesDir}; nothing to start`);
      return;
    }
    this.restored = release.deploymentId;
    const live = new Live(release);
    this.live = live;
    this.console(`deploy: starting release ${release.name} (deployment ${release.deploymentId}), live when the agent last stopped`);
    try {
      const instance = await this.startInstance(release, live.supervision.signal, (line) => this.consoleOutput(line));
      if (this.live !== live) {
        await this.stopInstance(instance);
        return;
      }
      this.switchTo(live, instance);
      this.reportProcess(live, 'running');
    } catch (err) {
      if (err instanceof Cancelled || this.live !== live) return;
      this.track(this.restartLoop(live, `the release did not start: ${(err as Error).message}`));
    }
  }

  /** The application as the edge sent it: runs its order if new; a different order, or none, cancels the one running. */
  apply(application: ApplicationConfig): void {
    if (this.closed) return;
    this.wanted = application;
    const order = application.order;
    if (this.current && this.current.id !== order?.deployment_id) {
      this.console(`deploy: deployment ${this.current.id} cancelled (the order is now ${order ? order.deployment_id : 'none'})`);
      this.current.cancel('order');
    }
    if (order && order.deployment_id === this.restored && !this.seen.has(order.deployment_id) && this.live) {
      // Live already (state.json says so): the agent stopped before the control plane heard; say it again.
      this.seen.add(order.deployment_id);
      this.report({ type: 'status', deployment_id: order.deployment_id, status: 'live', commit: this.live.release.commit });
    }
    this.pump();
  }

  /** The control plane refused an event of this deployment (cancelled, claimed by another agent): stop working on it, report nothing more. */
  refused(deploymentId: number, code: string): void {
    this.seen.add(deploymentId);
    if (this.current?.id === deploymentId && !this.current.switched) {
      this.console(`deploy: deployment ${deploymentId} refused by the control plane (${code}); stopping it`);
      this.current.cancel('refused');
    }
  }

  /** Where a visitor's request goes now: the live release's port, held until release(); null when nothing serves. */
  acquire(): Acquired | null {
    const instance = this.live?.instance;
    if (!instance || instance.stopping) return null;
    return instance.hold();
  }

  /** Called with the new port at each switch (null while the live process is down); returns the unsubscribe. */
  onSwitch(listener: (port: number | null) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The last lines the live process wrote after it went live (its earlier ones are in the deployment's log). */
  recentOutput(): string[] {
    return [...this.output];
  }

  /** Stops everything it started — the order running, restart attempts, the live process — and waits for them. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.closing.abort();
    this.current?.cancel('close');
    await this.current?.done;
    const live = this.live;
    live?.supervision.abort();
    while (this.tasks.size > 0) await Promise.allSettled([...this.tasks]);
    if (live?.instance) await this.stopInstance(live.instance);
  }

  // --- orders -----------------------------------------------------------------------------------------------------

  private pump(): void {
    if (this.closed || this.current) return;
    const app = this.wanted;
    const order = app?.order;
    if (!app || !order || this.seen.has(order.deployment_id)) return;
    this.seen.add(order.deployment_id);
    const run = new Run(app, order, (event) => this.report(event));
    this.current = run;
    run.done = this.runOrder(run)
      .catch((err: Error) => this.console(`deploy: deployment ${run.id}: unexpected error: ${err.stack ?? err.message}`))
      .finally(() => {
        run.logs.close();
        this.current = null;
        this.pump();
      });
  }

  private async runOrder(run: Run): Promise<void> {
    const { order } = run;
    let commit: string | undefined = order.commit ?? undefined;
    const status = (s: StatusEvent['status'], reason?: string) => {
      run.logs.flush(); // the lines before a status arrive before it
      this.report({
        type: 'status',
        deployment_id: run.id,
        status: s,
        ...(commit ? { commit } : {}),
        ...(reason !== undefined ? { reason } : {}),
      });
    };
    const log = (line: string) => {
      run.logs.push(line);
      this.console(`deploy ${run.id}: ${line}`);
    };
    /** A directory this run created, deleted if it fails; never a kept release it reuses. */
    let created: string | null = null;
    let instance: Instance | null = null;
    let release: Release;
    try {
      status('building');
      const reused = order.trigger === 'rollback' && order.commit ? await this.findRelease(order.commit) : null;
      if (reused) {
        log(`rollback to ${order.commit}: reusing kept release ${reused} (no fetch, no build)`);
        release = this.releaseOf(run, order.commit!, reused);
      } else {
        const { repository_url: url, build_command: build } = run.app;
        if (!url) throw new DeployError('the application has no repository URL to fetch from');
        await mkdir(this.releasesDir, { recursive: true });
        created = join(this.releasesDir, `${INCOMING_PREFIX}${run.id}`);
        await rm(created, { recursive: true, force: true });
        const sha = await fetchCommit({
          repositoryUrl: url,
          ref: order.ref,
          commit: order.commit,
          dir: created,
          timeoutMs: this.buildTimeoutMs,
          graceMs: this.stopGraceMs,
          signal: run.ac.signal,
          log,
        });
        if (!commit) {
          commit = sha;
          status('building'); // now with the commit the branch head resolved to
        }
        release = this.releaseOf(run, sha, releaseName(run.id, sha));
        await rm(release.dir, { recursive: true, force: true });
        await rename(created, release.dir);
        created = release.dir;
        if (build) await this.build(run, build, release.dir, log);
      }
      this.checkCancelled(run);
      status('deploying');
      log(`$ ${release.runCommand}`);
      instance = await this.startInstance(release, run.ac.signal, log);
      this.checkCancelled(run);
    } catch (err) {
      if (instance) await this.stopInstance(instance);
      if (created) await rm(created, { recursive: true, force: true }).catch(() => {});
      if (err instanceof Cancelled || run.cancelledBy) {
        if (run.cancelledBy === 'order') status('cancelled', 'cancelled by a newer order');
        return;
      }
      const reason = err instanceof DeployError ? err.message : `agent error: ${(err as Error).message}`;
      log(`deployment failed: ${reason}`);
      status('failed', reason);
      return;
    }
    await this.goLive(run, release, instance, status, log);
  }

  /** The switch and what follows it; nothing here can fail the deployment any more, it serves. */
  private async goLive(
    run: Run,
    release: Release,
    instance: Instance,
    status: (s: StatusEvent['status']) => void,
    log: (line: string) => void,
  ): Promise<void> {
    run.switched = true;
    const old = this.live;
    const live = new Live(release);
    old?.supervision.abort();
    this.switchTo(live, instance);
    log(`live on port ${instance.port}`);
    try {
      await touch(release.dir);
      await writeState(this.dir, release);
    } catch (err) {
      log(`could not record the live release in state.json: ${(err as Error).message}`);
    }
    status('live');
    this.reportProcess(live, 'running');
    run.logs.flush();
    instance.sink = (line) => this.consoleOutput(line);
    // The old release keeps what it was given: its requests in flight finish before it is stopped.
    const previous = old?.instance;
    if (previous) {
      previous.stopping = true;
      const drained = await previous.drained(this.drainTimeoutMs, this.closing.signal);
      if (!drained) log(`requests still in flight on the previous release after ${duration(this.drainTimeoutMs)}; stopping it anyway`);
      await this.stopInstance(previous);
    }
    try {
      const deleted = await prune(this.releasesDir, release.name, this.keepReleases);
      if (deleted.length > 0) this.console(`deploy: deleted old releases ${deleted.join(', ')}`);
    } catch (err) {
      this.console(`deploy: could not delete old releases: ${(err as Error).message}`);
    }
  }

  private async build(run: Run, command: string, dir: string, log: (line: string) => void): Promise<void> {
    log(`$ ${command}`);
    const r = await runToEnd('sh', ['-c', command], {
      cwd: dir,
      env: process.env,
      onLine: log,
      timeoutMs: this.buildTimeoutMs,
      graceMs: this.stopGraceMs,
      signal: run.ac.signal,
    });
    if (r.aborted) throw new Cancelled('cancelled');
    if (r.timedOut) throw new DeployError(`build timed out after ${duration(this.buildTimeoutMs)}`);
    if (r.error) throw new DeployError(`build could not start: ${r.error}`);
    if (r.signal) throw new DeployError(`build killed by signal ${r.signal}`);
    if (r.code !== 0) throw new DeployError(`build exited with code ${r.code}`);
  }

  private checkCancelled(run: Run): void {
    if (run.ac.signal.aborted || this.closed) throw new Cancelled('cancelled');
  }

  private releaseOf(run: Run, commit: string, name: string): Release {
    return {
      deploymentId: run.id,
      commit,
      name,
      dir: join(this.releasesDir, name),
      runCommand: run.app.run_command,
      healthPath: run.app.health_path,
    };
  }

  /** A kept release of this commit (a rollback target), checked by its HEAD, not only by its name. */
  private async findRelease(commit: string): Promise<string | null> {
    const suffix = `-${commit.slice(0, 12)}`;
    for (const r of await listReleases(this.releasesDir).catch(() => [])) {
      if (!r.name.endsWith(suffix)) continue;
      const lines: string[] = [];
      const head = await runToEnd('git', ['rev-parse', 'HEAD'], {
        cwd: r.dir,
        env: process.env,
        onLine: (l) => lines.push(l),
        timeoutMs: 10_000,
        graceMs: 0,
      });
      if (head.code === 0 && lines[0] === commit) return r.name;
    }
    return null;
  }

  // --- processes ----------------------------------------------------------------------------------------------------

  /** Starts the release's run command on a free port and waits for its health path; stops it again on failure. */
  private async startInstance(release: Release, signal: AbortSignal, sink: (line: string) => void): Promise<Instance> {
    const port = await freePort();
    let instance: Instance | null = null;
    const group = new ProcessGroup('sh', ['-c', release.runCommand], {
      cwd: release.dir,
      env: { ...process.env, PORT: String(port) },
      onLine: (line) => instance?.sink(line),
    });
    instance = new Instance(group, port, sink);
    try {
      await waitHealthy({ port, path: release.healthPath, timeoutMs: this.healthTimeoutMs, exited: group.exited, signal });
      return instance;
    } catch (err) {
      await this.stopInstance(instance);
      throw err;
    }
  }

  private async stopInstance(instance: Instance): Promise<void> {
    instance.stopping = true;
    await instance.group.stop(this.stopGraceMs);
  }

  private switchTo(live: Live, instance: Instance): void {
    this.live = live;
    live.instance = instance;
    void instance.group.exited.then((exit) => {
      if (instance.stopping || this.closed || this.live !== live || live.instance !== instance) return;
      live.instance = null;
      this.emitSwitch(null);
      this.track(this.restartLoop(live, `the process ${describeExit(exit)}`));
    });
    this.emitSwitch(instance.port);
  }

  /**
   * Restarts the live release's process after it exited, with the agent's backoff. After maxFailedRestarts failed
   * starts in a row it reports `stopped` and keeps trying at the largest delay: a service that needs a database
   * back comes back by itself, and a new deployment replaces the loop anyway.
   */
  private async restartLoop(live: Live, why: string): Promise<void> {
    const signal = live.supervision.signal;
    const backoff = new Backoff(this.restartBackoff);
    let failed = 0;
    let message = why;
    this.console(`deploy: release ${live.release.name}: ${why}; restarting`);
    while (!signal.aborted && !this.closed) {
      live.restarts++;
      const gaveUp = failed >= this.maxFailedRestarts;
      if (!gaveUp) this.reportProcess(live, 'restarting', message);
      const delay = gaveUp ? this.restartBackoff.maxMs : backoff.next();
      await sleep(delay, undefined, { signal }).catch(() => {});
      if (signal.aborted || this.closed) return;
      try {
        const instance = await this.startInstance(live.release, signal, (line) => this.consoleOutput(line));
        if (signal.aborted || this.closed || this.live !== live) {
          await this.stopInstance(instance);
          return;
        }
        this.switchTo(live, instance);
        this.reportProcess(live, 'running');
        this.console(`deploy: release ${live.release.name} running again on port ${instance.port}`);
        return;
      } catch (err) {
        if (err instanceof Cancelled) return;
        failed++;
        message = `restart ${live.restarts} failed: ${(err as Error).message}`;
        this.console(`deploy: release ${live.release.name}: ${message}`);
        if (failed === this.maxFailedRestarts) {
          this.reportProcess(live, 'stopped', `${failed} restarts in a row failed (last: ${(err as Error).message}); retrying every ${duration(this.restartBackoff.maxMs)}`);
        }
      }
    }
  }

  // --- reporting ----------------------------------------------------------------------------------------------------

  private reportProcess(live: Live, state: 'running' | 'restarting' | 'stopped', message?: string): void {
    this.report({
      type: 'process',
      state,
      deployment_id: live.release.deploymentId,
      restarts: live.restarts,
      ...(message !== undefined ? { message: message.slice(0, 1024) } : {}),
    });
  }

  private report(event: AgentControlEvent): void {
    try {
      this.reportFn(event);
    } catch (err) {
      this.console(`deploy: reporting an event failed: ${(err as Error).message}`);
    }
  }

  private emitSwitch(port: number | null): void {
    for (const listener of this.listeners) {
      try {
        listener(port);
      } catch (err) {
        this.console(`deploy: a switch listener failed: ${(err as Error).message}`);
      }
    }
  }

  private consoleOutput(line: string): void {
    this.output.push(line);
    if (this.output.length > this.outputLines) this.output.shift();
    this.console(`app: ${line}`);
  }

  private track(task: Promise<void>): void {
    const tracked = task.catch((err: Error) => this.console(`deploy: ${err.message}`)).finally(() => this.tasks.delete(tracked));
    this.tasks.add(tracked);
  }
}
