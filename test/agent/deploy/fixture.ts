// What the deployer tests share: the repository and app of test/helpers/git-app.ts, a recorder of the Deployer's events that waits for the one a test expects, and HTTP helpers.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Value } from '@sinclair/typebox/value';
import { AgentControlEventSchema, type AgentControlEvent, type ApplicationConfig, type DeploymentOrder, type StatusEvent } from '../../../src/shared/deploy.ts';
import { Deployer, type DeployerOptions } from '../../../src/agent/deploy/deployer.ts';
import { git, makeRepo, serverJs, type Repo } from '../../helpers/git-app.ts';

export { git, makeRepo, serverJs, type Repo };

export const RUN = `"${process.execPath}" server.js`;

export function application(url: string | null, order: DeploymentOrder | null, over: Partial<ApplicationConfig> = {}): ApplicationConfig {
  return {
    uuid: '6f1c9a52-8a46-4d55-9d57-2a8f2e0b4c11',
    name: 'app',
    account_id: 1,
    endpoint_uuid: '0b7e2f0e-7f55-4f43-8f5c-3c1d2f1e9a10',
    source: 'git',
    repository_url: url,
    build_command: null,
    run_command: RUN,
    health_path: '/healthz',
    order,
    ...over,
  };
}

export function order(deploymentId: number, commit: string | null, trigger: DeploymentOrder['trigger'] = 'push'): DeploymentOrder {
  return { deployment_id: deploymentId, trigger, ref: 'main', commit };
}

/** The Deployer's events as reported, each checked against the contract's schema, with waits on them. */
export class Events {
  readonly all: AgentControlEvent[] = [];
  private waiters: Array<{ match: (e: AgentControlEvent) => boolean; from: number; resolve: (e: AgentControlEvent) => void }> = [];

  readonly report = (event: AgentControlEvent): void => {
    assert.ok(Value.Check(AgentControlEventSchema, event), `event outside the contract: ${JSON.stringify(event)}`);
    this.all.push(event);
    this.waiters = this.waiters.filter((w) => {
      if (!w.match(event)) return true;
      w.resolve(event);
      return false;
    });
  };

  /** The first event (after the `from`-th) that matches; fails the test after ms. */
  next<E extends AgentControlEvent>(match: (e: AgentControlEvent) => e is E, ms?: number, from?: number): Promise<E>;
  next(match: (e: AgentControlEvent) => boolean, ms?: number, from?: number): Promise<AgentControlEvent>;
  next(match: (e: AgentControlEvent) => boolean, ms = 20_000, from = 0): Promise<AgentControlEvent> {
    const found = this.all.slice(from).find(match);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no matching event within ${ms} ms; events: ${JSON.stringify(this.all.slice(from))}`)), ms);
      this.waiters.push({ match, from, resolve: (e) => (clearTimeout(timer), resolve(e)) });
    });
  }

  /** Waits for the deployment to finish (live, failed or cancelled) and returns that status event. */
  finished(deploymentId: number, ms?: number): Promise<StatusEvent> {
    return this.next(
      (e): e is StatusEvent => e.type === 'status' && e.deployment_id === deploymentId && ['live', 'failed', 'cancelled'].includes(e.status),
      ms,
    );
  }

  statuses(deploymentId: number): string[] {
    return this.all.filter((e): e is StatusEvent => e.type === 'status' && e.deployment_id === deploymentId).map((e) => e.status);
  }

  logLines(deploymentId: number): string[] {
    return this.all.flatMap((e) => (e.type === 'log' && e.deployment_id === deploymentId ? e.lines : []));
  }
}

export interface Setup {
  repo: Repo;
  dir: string;
  events: Events;
  deployer: Deployer;
  /** A second deployer on the same directory (as a restarted agent), closed with the setup. */
  reopen(options?: Partial<DeployerOptions>): Deployer;
  close(): Promise<void>;
}

/** Test-sized time limits: the failure paths must not take the defaults' minutes. */
export const FAST: Partial<DeployerOptions> = {
  buildTimeoutMs: 20_000,
  healthTimeoutMs: 10_000,
  stopGraceMs: 2_000,
  drainTimeoutMs: 5_000,
  restartBackoff: { initialMs: 20, maxMs: 200 },
};

export async function setup(options: Partial<DeployerOptions> = {}): Promise<Setup> {
  const repo = await makeRepo();
  const dir = await mkdtemp(join(tmpdir(), 'deploy-dir-'));
  const events = new Events();
  const deployers: Deployer[] = [];
  const make = (more: Partial<DeployerOptions>) => {
    const d = new Deployer({ dir, report: events.report, ...FAST, ...options, ...more });
    deployers.push(d);
    return d;
  };
  const deployer = make({});
  return {
    repo,
    dir,
    events,
    deployer,
    reopen: (more = {}) => make(more),
    async close() {
      await Promise.all(deployers.map((d) => d.close()));
      await repo.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** GET through 127.0.0.1:port, the body as text. */
export function get(port: number, path = '/'): Promise<string> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path, agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`status ${res.statusCode}: ${body}`))));
      })
      .on('error', reject);
  });
}

/** GET through the deployer, holding the acquired release across the request as the forwarder does. */
export async function viaDeployer(deployer: Deployer, path = '/'): Promise<string> {
  const held = deployer.acquire();
  if (!held) throw new Error('nothing live');
  try {
    return await get(held.port, path);
  } finally {
    held.release();
  }
}

/** Whether the process runs; a zombie (killed, not yet reaped by an init that reaps slowly) counts as gone. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    // /proc/<pid>/stat: "pid (comm) state …"; comm may hold spaces and parentheses, the state follows the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true;
  }
}
