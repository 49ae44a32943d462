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
});
