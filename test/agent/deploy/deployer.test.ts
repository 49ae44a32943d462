// The agent's deployer (src/agent/deploy/deployer.ts) against a real git repository and real processes: a deployment
// goes building → deploying → live, a second one switches without a failed request and stops the first, and failed
// builds and health checks leave the previous release serving.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { MAX_LOG_LINES_PER_EVENT, MAX_LOG_LINE_LENGTH } from '../../../src/shared/deploy.ts';
import { eventually } from '../../helpers/eventually.ts';
import { alive, application, get, order, serverJs, setup, viaDeployer, type Setup } from './fixture.ts';
import { skipSlowSuite } from '../../helpers/slow-suites.ts';

async function deployV1(s: Setup): Promise<string> {
  const sha = await s.repo.commit({ 'server.js': serverJs('v1') });
  s.deployer.apply(application(s.repo.url, order(1, sha)));
  assert.equal((await s.events.finished(1)).status, 'live');
  return sha;
}

async function releases(s: Setup): Promise<string[]> {
  return (await readdir(join(s.dir, 'releases'))).sort();
}

// No store is involved: the suite runs once in CI (test/helpers/slow-suites.ts).
describe('deployer: deployments', { skip: skipSlowSuite() }, () => {
  it('deploys a commit: building → deploying → live, logs the git steps, acquire() reaches it, state.json names it', async () => {
    const s = await setup();
    try {
      const switches: Array<number | null> = [];
      s.deployer.onSwitch((port) => switches.push(port));
      assert.equal(s.deployer.acquire(), null);
      const sha = await deployV1(s);
      assert.deepEqual(s.events.statuses(1), ['building', 'deploying', 'live']);
      const live = s.events.all.find((e) => e.type === 'status' && e.status === 'live');
      assert.equal(live?.type === 'status' && live.commit, sha);
      const lines = s.events.logLines(1);
      assert.ok(lines.some((l) => l.startsWith('$ git fetch')), lines.join('\n'));
      assert.ok(lines.some((l) => l.includes('listening on')), 'the process output is in the log while deploying');
      assert.equal(await viaDeployer(s.deployer), 'v1');
      assert.equal(switches.length, 1);
      assert.equal(switches[0], s.deployer.acquire()!.port);
      assert.deepEqual(await releases(s), [`1-${sha.slice(0, 12)}`]);
      const state = JSON.parse(await readFile(join(s.dir, 'state.json'), 'utf8'));
      assert.equal(state.deployment_id, 1);
      assert.equal(state.release, `1-${sha.slice(0, 12)}`);
      assert.ok(s.events.all.some((e) => e.type === 'process' && e.state === 'running' && e.deployment_id === 1 && e.restarts === 0));
    } finally {
      await s.close();
    }
  });

  it('resolves the branch head when the order has no commit, reporting building again with it', async () => {
    const s = await setup();
    try {
      const sha = await s.repo.commit({ 'server.js': serverJs('v1') });
      s.deployer.apply(application(s.repo.url, order(1, null)));
      assert.equal((await s.events.finished(1)).status, 'live');
      const statuses = s.events.all.filter((e) => e.type === 'status');
      assert.deepEqual(
        statuses.map((e) => [e.status, e.commit]),
        [['building', undefined], ['building', sha], ['deploying', sha], ['live', sha]],
      );
    } finally {
      await s.close();
    }
  });

  it('switches to a second commit with zero failed requests during the switch, then stops the old process', async () => {
    const s = await setup();
    try {
      await deployV1(s);
      const oldPid = Number(await viaDeployer(s.deployer, '/pid'));
      const sha2 = await s.repo.commit({ 'server.js': serverJs('v2') });
      let stop = false;
      const errors: string[] = [];
      const seen = new Map<string, number>();
      const loops = Array.from({ length: 4 }, async () => {
        while (!stop) {
          try {
            const body = await viaDeployer(s.deployer);
            seen.set(body, (seen.get(body) ?? 0) + 1);
          } catch (err) {
            errors.push((err as Error).message);
          }
        }
      });
      s.deployer.apply(application(s.repo.url, order(2, sha2)));
      assert.equal((await s.events.finished(2)).status, 'live');
      await eventually(async () => ((seen.get('v2') ?? 0) >= 20 ? true : undefined));
      stop = true;
      await Promise.all(loops);
      assert.deepEqual(errors, []);
      assert.ok((seen.get('v1') ?? 0) > 0 && (seen.get('v2') ?? 0) > 0, JSON.stringify([...seen]));
      await eventually(async () => (alive(oldPid) ? undefined : true));
      assert.equal(await viaDeployer(s.deployer), 'v2');
    } finally {
      await s.close();
    }
  });

  it('runs the build command, logging its output in batches of at most 64 lines of at most 4096 characters', async () => {
    const s = await setup();
    try {
      const sha = await s.repo.commit({
        'server.js': serverJs('built'),
        'build.sh': `for i in $(seq 1 150); do echo "line $i"; done\nprintf "%10000s\\n" "" | tr " " x >&2\necho done > built.txt\n`,
      });
      s.deployer.apply(application(s.repo.url, order(1, sha), { build_command: 'sh build.sh' }));
      assert.equal((await s.events.finished(1)).status, 'live');
      const batches = s.events.all.filter((e) => e.type === 'log');
      for (const b of batches) {
        assert.ok(b.type === 'log' && b.lines.length <= MAX_LOG_LINES_PER_EVENT && b.lines.every((l) => l.length <= MAX_LOG_LINE_LENGTH));
      }
      const lines = s.events.logLines(1);
      const numbered = lines.filter((l) => /^line \d+$/.test(l));
      assert.deepEqual(numbered, Array.from({ length: 150 }, (_, i) => `line ${i + 1}`));
      assert.deepEqual(lines.filter((l) => /^x+$/.test(l)).map((l) => l.length), [4096, 4096, 1808]);
      const statusIndex = s.events.all.findIndex((e) => e.type === 'status' && e.status === 'deploying');
      const lastBuildLine = s.events.all.findIndex((e) => e.type === 'log' && e.lines.includes('line 150'));
      assert.ok(lastBuildLine < statusIndex, 'the build log arrives before deploying');
      assert.equal(await readFile(join(s.dir, 'releases', `1-${sha.slice(0, 12)}`, 'built.txt'), 'utf8'), 'done\n');
    } finally {
      await s.close();
    }
  });

  it('a failing build fails the deployment with its exit code, deletes its release and leaves v1 serving', async () => {
    const s = await setup();
    try {
      const sha1 = await deployV1(s);
      const sha2 = await s.repo.commit({ 'server.js': serverJs('v2') });
      s.deployer.apply(application(s.repo.url, order(2, sha2), { build_command: 'echo compiling; echo broken >&2; exit 1' }));
      const failed = await s.events.finished(2);
      assert.equal(failed.status, 'failed');
      assert.equal(failed.reason, 'build exited with code 1');
      assert.deepEqual(s.events.statuses(2), ['building', 'failed']);
      const lines = s.events.logLines(2);
      assert.ok(lines.includes('compiling') && lines.includes('broken') && lines.includes('deployment failed: build exited with code 1'), lines.join('\n'));
      assert.equal(await viaDeployer(s.deployer), 'v1');
      assert.deepEqual(await releases(s), [`1-${sha1.slice(0, 12)}`]);
    } finally {
      await s.close();
    }
  });

  it('a build over its time limit is killed with its whole process group', async () => {
    const s = await setup({ buildTimeoutMs: 1_000 });
    try {
      await deployV1(s);
      const pidFile = join(s.repo.root, 'sleep.pid');
      const sha2 = await s.repo.commit({ 'server.js': serverJs('v2') });
      s.deployer.apply(application(s.repo.url, order(2, sha2), { build_command: `sleep 60 & echo $! > ${pidFile}; wait` }));
      const failed = await s.events.finished(2);
      assert.equal(failed.reason, 'build timed out after 1 s');
      const pid = Number(await readFile(pidFile, 'utf8'));
      assert.equal(alive(pid), false, 'the background sleep of the build was killed');
      assert.equal(await viaDeployer(s.deployer), 'v1');
    } finally {
      await s.close();
    }
  });

  it('a release whose health path never answers 2xx fails at the health time limit; v1 keeps serving', async () => {
    const s = await setup({ healthTimeoutMs: 1_000 });
    try {
      const sha1 = await deployV1(s);
      const sha2 = await s.repo.commit({ 'server.js': serverJs('v2', 500) });
      s.deployer.apply(application(s.repo.url, order(2, sha2)));
      const failed = await s.events.finished(2);
      assert.equal(failed.status, 'failed');
      assert.match(failed.reason!, /^GET \/healthz did not answer 2xx within 1 s \(last: status 500\)$/);
      assert.deepEqual(s.events.statuses(2), ['building', 'deploying', 'failed']);
      assert.equal(await viaDeployer(s.deployer), 'v1');
      assert.deepEqual(await releases(s), [`1-${sha1.slice(0, 12)}`]);
    } finally {
      await s.close();
    }
  });

  it('a release whose process exits fails at once, naming the exit code', async () => {
    const s = await setup({ healthTimeoutMs: 60_000 });
    try {
      await deployV1(s);
      const sha2 = await s.repo.commit({ 'server.js': serverJs('v2') });
      const started = Date.now();
      s.deployer.apply(application(s.repo.url, order(2, sha2), { run_command: 'echo starting; exit 3' }));
      const failed = await s.events.finished(2);
      assert.equal(failed.reason, 'the process exited with code 3 before answering GET /healthz with 2xx');
      assert.ok(Date.now() - started < 30_000);
      assert.ok(s.events.logLines(2).includes('starting'));
      assert.equal(await viaDeployer(s.deployer), 'v1');
    } finally {
      await s.close();
    }
  });

  it('a newer order cancels the running one (its build killed), reports cancelled, then runs', async () => {
    const s = await setup();
    try {
      await deployV1(s);
      const pidFile = join(s.repo.root, 'sleep.pid');
      const sha2 = await s.repo.commit({ 'server.js': serverJs('v2') });
      s.deployer.apply(application(s.repo.url, order(2, sha2), { build_command: `sleep 60 & echo $! > ${pidFile}; echo waiting; wait` }));
      await s.events.next((e) => e.type === 'log' && e.deployment_id === 2 && e.lines.includes('waiting'));
      const pid = Number(await readFile(pidFile, 'utf8'));
      const sha3 = await s.repo.commit({ 'server.js': serverJs('v3') });
      s.deployer.apply(application(s.repo.url, order(3, sha3)));
      const cancelled = await s.events.finished(2);
      assert.equal(cancelled.status, 'cancelled');
      assert.equal(alive(pid), false);
      assert.equal((await s.events.finished(3)).status, 'live');
      assert.equal(await viaDeployer(s.deployer), 'v3');
      const names = await releases(s);
      assert.ok(!names.some((n) => n.startsWith('2-') || n.includes('incoming')), names.join());
    } finally {
      await s.close();
    }
  });

  it('an order refused by the control plane stops without another report; an order seen before is not rerun', async () => {
    const s = await setup();
    try {
      const sha1 = await deployV1(s);
      // The same order again (a reconnect): nothing happens.
      s.deployer.apply(application(s.repo.url, order(1, sha1)));
      const sha2 = await s.repo.commit({ 'server.js': serverJs('v2') });
      const app2 = application(s.repo.url, order(2, sha2), { build_command: 'echo waiting; sleep 60' });
      s.deployer.apply(app2);
      await s.events.next((e) => e.type === 'log' && e.deployment_id === 2 && e.lines.includes('waiting'));
      s.deployer.refused(2, 'deployment_cancelled');
      s.deployer.apply(app2); // still the order in a stale feed entry: not rerun
      const sha3 = await s.repo.commit({ 'server.js': serverJs('v3') });
      s.deployer.apply(application(s.repo.url, order(3, sha3)));
      assert.equal((await s.events.finished(3)).status, 'live');
      assert.deepEqual(s.events.statuses(1), ['building', 'deploying', 'live']);
      assert.deepEqual(s.events.statuses(2), ['building']);
      assert.equal(await viaDeployer(s.deployer), 'v3');
    } finally {
      await s.close();
    }
  });

  it('an order withdrawn (none) while it runs is cancelled and the live release stays', async () => {
    const s = await setup();
    try {
      await deployV1(s);
      const sha2 = await s.repo.commit({ 'server.js': serverJs('v2') });
      s.deployer.apply(application(s.repo.url, order(2, sha2), { build_command: 'echo waiting; sleep 60' }));
      await s.events.next((e) => e.type === 'log' && e.deployment_id === 2 && e.lines.includes('waiting'));
      s.deployer.apply(application(s.repo.url, null));
      assert.equal((await s.events.finished(2)).status, 'cancelled');
      assert.equal(await viaDeployer(s.deployer), 'v1');
    } finally {
      await s.close();
    }
  });

  it('a rollback to a kept release reuses its directory: no fetch, no build, no new release', async () => {
    const s = await setup();
    try {
      const sha1 = await deployV1(s);
      const sha2 = await s.repo.commit({ 'server.js': serverJs('v2') });
      s.deployer.apply(application(s.repo.url, order(2, sha2), { build_command: 'echo built' }));
      assert.equal((await s.events.finished(2)).status, 'live');
      assert.equal(await viaDeployer(s.deployer), 'v2');
      s.deployer.apply(application(s.repo.url, order(3, sha1, 'rollback'), { build_command: 'echo built' }));
      const live = await s.events.finished(3);
      assert.equal(live.status, 'live');
      assert.equal(live.commit, sha1);
      const lines = s.events.logLines(3);
      assert.ok(lines.some((l) => l.includes(`reusing kept release 1-${sha1.slice(0, 12)}`)), lines.join('\n'));
      assert.ok(!lines.some((l) => l.startsWith('$ git') || l === 'built'), lines.join('\n'));
      assert.equal(await viaDeployer(s.deployer), 'v1');
      assert.deepEqual(await releases(s), [`1-${sha1.slice(0, 12)}`, `2-${sha2.slice(0, 12)}`]);
      const state = JSON.parse(await readFile(join(s.dir, 'state.json'), 'utf8'));
      assert.deepEqual([state.deployment_id, state.release], [3, `1-${sha1.slice(0, 12)}`]);
    } finally {
      await s.close();
    }
  });

  it('keeps keepReleases releases, the live one and the most recent before it', async () => {
    const s = await setup({ keepReleases: 2 });
    try {
      const shas: string[] = [];
      for (let i = 1; i <= 3; i++) {
        shas.push(await s.repo.commit({ 'server.js': serverJs(`v${i}`) }));
        s.deployer.apply(application(s.repo.url, order(i, shas[i - 1])));
        assert.equal((await s.events.finished(i)).status, 'live');
      }
      // Pruning follows the old release's stop: wait for the directory to go.
      await eventually(async () => ((await releases(s)).length === 2 ? true : undefined));
      assert.deepEqual(await releases(s), [`2-${shas[1].slice(0, 12)}`, `3-${shas[2].slice(0, 12)}`]);
      assert.equal(await viaDeployer(s.deployer), 'v3');
    } finally {
      await s.close();
    }
  });

  it('fails an order whose commit does not exist, or whose repository does not, or when git is missing', async () => {
    const s = await setup();
    try {
      await deployV1(s);
      s.deployer.apply(application(s.repo.url, order(2, 'a'.repeat(40))));
      const noCommit = await s.events.finished(2);
      assert.equal(noCommit.status, 'failed');
      assert.match(noCommit.reason!, /commit a{40} is not on branch main/);
      s.deployer.apply(application(`${s.repo.url}-missing`, order(3, null)));
      const noRepo = await s.events.finished(3);
      assert.equal(noRepo.status, 'failed');
      assert.match(noRepo.reason!, /^git fetch of file:.*-missing refs\/heads\/main exited with code 128/);
      const path = process.env.PATH;
      process.env.PATH = join(s.dir, 'no-bin');
      try {
        s.deployer.apply(application(s.repo.url, order(4, null)));
        const noGit = await s.events.finished(4);
        assert.match(noGit.reason!, /^git could not start/);
      } finally {
        process.env.PATH = path;
      }
      assert.equal(await viaDeployer(s.deployer), 'v1');
      assert.deepEqual((await releases(s)).length, 1);
    } finally {
      await s.close();
    }
  });

  it('a plain GET still reaches the live port directly (acquire is advisory bookkeeping, not a proxy)', async () => {
    const s = await setup();
    try {
      await deployV1(s);
      const held = s.deployer.acquire()!;
      held.release();
      held.release(); // idempotent
      assert.equal(await get(held.port), 'v1');
    } finally {
      await s.close();
    }
  });
});
