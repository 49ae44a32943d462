// The deployer's supervision of the live release (src/agent/deploy/deployer.ts): a restarted agent serves the release
// state.json names, a live process that dies is restarted on a new port, and one that cannot start is reported stopped.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ProcessEvent } from '../../../src/shared/deploy.ts';
import { alive, application, order, serverJs, setup, viaDeployer } from './fixture.ts';
import { skipSlowSuite } from '../../helpers/slow-suites.ts';

const isProcess = (state: ProcessEvent['state']) => (e: { type: string }): e is ProcessEvent => e.type === 'process' && (e as ProcessEvent).state === state;

// No store is involved: the suite runs once in CI (test/helpers/slow-suites.ts).
describe('deployer: supervision', { skip: skipSlowSuite() }, () => {
  it('a new Deployer on the same directory starts the release state.json names, and does not redeploy it', async () => {
    const s = await setup();
    try {
      const sha = await s.repo.commit({ 'server.js': serverJs('v1') });
      const app = application(s.repo.url, order(1, sha));
      s.deployer.apply(app);
      assert.equal((await s.events.finished(1)).status, 'live');
      const pid = Number(await viaDeployer(s.deployer, '/pid'));
      await s.deployer.close();
      assert.equal(alive(pid), false, 'close() stopped the live process');
      assert.equal(s.deployer.acquire(), null);

      const from = s.events.all.length;
      const again = s.reopen();
      await again.start();
      const running = await s.events.next(isProcess('running'), undefined, from);
      assert.deepEqual([running.deployment_id, running.restarts], [1, 0]);
      assert.equal(await viaDeployer(again), 'v1');
      // The order comes again on reconnect: `live` is said again (it may not have arrived), nothing is rebuilt.
      again.apply(app);
      again.apply(app);
      const after = s.events.all.slice(from).filter((e) => e.type === 'status');
      assert.deepEqual(after.map((e) => e.type === 'status' && [e.status, e.commit]), [['live', sha]]);
    } finally {
      await s.close();
    }
  });

  it('restarts a live process that was killed, on a new port, reporting restarting then running', async () => {
    const s = await setup();
    try {
      const sha = await s.repo.commit({ 'server.js': serverJs('v1') });
      s.deployer.apply(application(s.repo.url, order(1, sha)));
      assert.equal((await s.events.finished(1)).status, 'live');
      const before = s.deployer.acquire()!;
      before.release();
      const switches: Array<number | null> = [];
      s.deployer.onSwitch((port) => switches.push(port));
      const pid = Number(await viaDeployer(s.deployer, '/pid'));
      const from = s.events.all.length;
      process.kill(pid, 'SIGKILL');
      const restarting = await s.events.next(isProcess('restarting'), undefined, from);
      assert.equal(restarting.deployment_id, 1);
      assert.equal(restarting.restarts, 1);
      assert.match(restarting.message!, /killed by signal SIGKILL|exited with code 137/);
      const running = await s.events.next(isProcess('running'), undefined, from);
      assert.equal(running.restarts, 1);
      const now = s.deployer.acquire()!;
      now.release();
      assert.notEqual(now.port, before.port);
      assert.deepEqual(switches, [null, now.port]);
      assert.equal(await viaDeployer(s.deployer), 'v1');
    } finally {
      await s.close();
    }
  });

  it('reports stopped after failed restarts in a row, keeps trying, and runs again once it can', async () => {
    const s = await setup({ maxFailedRestarts: 2, restartBackoff: { initialMs: 10, maxMs: 100 } });
    try {
      const sha = await s.repo.commit({ 'server.js': serverJs('v1') });
      s.deployer.apply(application(s.repo.url, order(1, sha)));
      assert.equal((await s.events.finished(1)).status, 'live');
      const down = join(s.dir, 'releases', `1-${sha.slice(0, 12)}`, 'down');
      await writeFile(down, '');
      const pid = Number(await viaDeployer(s.deployer, '/pid'));
      const from = s.events.all.length;
      process.kill(pid, 'SIGKILL');
      const stopped = await s.events.next(isProcess('stopped'), undefined, from);
      assert.match(stopped.message!, /^2 restarts in a row failed \(last: the process exited with code 4 /);
      assert.equal(s.deployer.acquire(), null, 'nothing serves while the process is down');
      await rm(down);
      const running = await s.events.next(isProcess('running'), undefined, from);
      assert.ok(running.restarts >= 3, JSON.stringify(running));
      assert.equal(await viaDeployer(s.deployer), 'v1');
      assert.ok(s.deployer.recentOutput().some((l) => l.includes('listening on')));
    } finally {
      await s.close();
    }
  });

  it('close() stops a build in progress and the live process, and reports nothing for the interrupted order', async () => {
    const s = await setup();
    try {
      const sha1 = await s.repo.commit({ 'server.js': serverJs('v1') });
      s.deployer.apply(application(s.repo.url, order(1, sha1)));
      assert.equal((await s.events.finished(1)).status, 'live');
      const pid = Number(await viaDeployer(s.deployer, '/pid'));
      const sha2 = await s.repo.commit({ 'server.js': serverJs('v2') });
      const pidFile = join(s.repo.root, 'sleep.pid');
      s.deployer.apply(application(s.repo.url, order(2, sha2), { build_command: `sleep 60 & echo $! > ${pidFile}; echo waiting; wait` }));
      await s.events.next((e) => e.type === 'log' && e.deployment_id === 2 && e.lines.includes('waiting'));
      const sleepPid = Number(await readFile(pidFile, 'utf8'));
      await s.deployer.close();
      assert.equal(alive(pid), false, 'the live process is stopped');
      assert.equal(alive(sleepPid), false, 'the build is stopped');
      assert.deepEqual(s.events.statuses(2), ['building']);
    } finally {
      await s.close();
    }
  });
});
