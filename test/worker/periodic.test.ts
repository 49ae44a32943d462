// A worker job on a timer: passes never overlap, a failed pass is logged and skipped, and the next one still runs.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PeriodicJob } from '../../src/worker/periodic.ts';
import { capturedLogger } from '../helpers/logger.ts';

describe('PeriodicJob', () => {
  it('runs passes one at a time, in call order', async () => {
    const { logger } = capturedLogger('info');
    const events: string[] = [];
    let n = 0;
    let release!: () => void;
    const firstHeld = new Promise<void>((r) => (release = r));
    const job = new PeriodicJob('test job', 60_000, logger, async () => {
      const i = ++n;
      events.push(`start ${i}`);
      if (i === 1) await firstHeld;
      events.push(`end ${i}`);
      return null;
    });
    const first = job.sweep();
    const second = job.sweep();
    release();
    await Promise.all([first, second]);
    assert.deepEqual(events, ['start 1', 'end 1', 'start 2', 'end 2']);
    await job.stop();
  });

  it('logs a failed pass as skipped and keeps going; reports what a pass returns', async () => {
    const { logger, lines } = capturedLogger('info');
    let n = 0;
    const job = new PeriodicJob('test job', 60_000, logger, async () => {
      if (++n === 1) throw new Error('store down');
      return { msg: 'did work', fields: { items: ['a'] } };
    });
    await job.sweep();
    await job.sweep();
    await job.stop();
    await new Promise((r) => setImmediate(r));
    assert.equal(lines[0].msg, 'test job skipped');
    assert.equal((lines[0].err as { message: string }).message, 'store down');
    assert.equal(lines[1].msg, 'did work');
    assert.deepEqual(lines[1].items, ['a']);
  });

  it('reports each pass to its observer under a stable label, with whether it went through', async () => {
    const { logger } = capturedLogger('fatal');
    let fail = true;
    const seen: Array<[string, boolean]> = [];
    const job = new PeriodicJob('Rate-limit hit pruning', 60_000, logger, async () => {
      if (fail) throw new Error('store down');
      return null;
    }).observe({ jobPassed: (label, seconds, ok) => seen.push([label, ok && seconds >= 0]) });
    assert.equal(job.label, 'rate_limit_hit_pruning');
    await job.sweep();
    fail = false;
    await job.sweep();
    await job.stop();
    assert.deepEqual(seen, [
      ['rate_limit_hit_pruning', false],
      ['rate_limit_hit_pruning', true],
    ]);
  });

  it('is current from its start while passes go through, and stale once none has for three intervals (a minute at least)', async () => {
    const { logger } = capturedLogger('fatal');
    let now = 1_000_000;
    let fail = false;
    const job = new PeriodicJob('test job', 30_000, logger, async () => {
      if (fail) throw new Error('store down');
      return null;
    }, () => now);
    assert.equal(job.current(), false, 'not started');
    job.start();
    assert.equal(job.current(), true, 'just started, no pass yet');
    now += 90_000;
    assert.equal(job.current(), true, 'three intervals since the start');
    now += 1;
    assert.equal(job.current(), false, 'no pass went through for longer');
    await job.sweep();
    assert.equal(job.current(), true, 'a pass went through');
    fail = true;
    now += 60_000;
    await job.sweep();
    now += 30_000;
    assert.equal(job.current(), true, 'failing, but the last good pass is three intervals old');
    now += 1;
    assert.equal(job.current(), false, 'failing for longer than three intervals');
    await job.stop();

    const quick = new PeriodicJob('quick job', 1_000, logger, async () => null, () => now);
    quick.start();
    now += 60_000;
    assert.equal(quick.current(), true, 'short intervals allow a minute');
    now += 1;
    assert.equal(quick.current(), false);
    await quick.stop();
  });
});
