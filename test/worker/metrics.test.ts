// The worker's metrics read the traffic-record backlog from the transport at scrape time: batches queued for a
// worker and batches delivered but not acknowledged, over Redis (XLEN, XPENDING) when REDIS_URL is set, else in-process.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { RateLimitHitsRecord } from '../../src/shared/records/types.ts';
import { WorkerMetrics, readRecords } from '../../src/worker/metrics.ts';
import type { RecordWorkerStats } from '../../src/worker/records.ts';
import { capturedLogger } from '../helpers/logger.ts';
import { sample } from '../helpers/metrics.ts';
import { TestRecords } from '../helpers/records.ts';

const transport = process.env.REDIS_URL ? 'the Redis stream' : 'the in-process stream';

function hits(): RateLimitHitsRecord {
  return { kind: 'rate_limit_hits', edge: 'edge-1', at: new Date().toISOString(), counts: { [randomUUID()]: 1 }, last: {} };
}

describe(`worker metrics over ${transport}`, () => {
  const testRecords = new TestRecords(capturedLogger('fatal').logger);
  after(() => testRecords.close());

  it('report the backlog by state as batches are appended, delivered and acknowledged, with the counts as read', async () => {
    const records = await testRecords.fresh();
    const stats: RecordWorkerStats = { batches: 4, deadLetteredBatches: 1, deadLetteredRecords: 3, skipped: 2 };
    const metrics = new WorkerMetrics({ records: () => readRecords(stats, records) });
    const backlog = async () => {
      const text = await metrics.text();
      return { queued: sample(text, 'edge_worker_record_backlog_batches', { state: 'queued' }), pending: sample(text, 'edge_worker_record_backlog_batches', { state: 'pending' }) };
    };

    assert.deepEqual(await backlog(), { queued: 0, pending: 0 }, 'nothing appended yet (no stream, no group)');
    for (let i = 0; i < 3; i++) {
      records.append([hits()]);
      await records.flush();
    }
    assert.deepEqual(await backlog(), { queued: 3, pending: 0 });
    const read = await records.read({ count: 2, blockMs: 0 });
    assert.equal(read.length, 2);
    assert.deepEqual(await backlog(), { queued: 1, pending: 2 });
    await records.ack(read.map((b) => b.id));
    assert.deepEqual(await backlog(), { queued: 1, pending: 0 });

    const text = await metrics.text();
    assert.equal(sample(text, 'edge_worker_record_batches_written_total'), 4);
    assert.equal(sample(text, 'edge_worker_record_batches_dead_lettered_total'), 1);
    assert.equal(sample(text, 'edge_worker_records_dead_lettered_total'), 3);
    assert.equal(sample(text, 'edge_worker_records_skipped_total'), 2);
  });

  it('keep the last reading when the record worker does not answer, so no counter goes back', async () => {
    let answering = true;
    const stats: RecordWorkerStats = { batches: 7, deadLetteredBatches: 0, deadLetteredRecords: 0, skipped: 0 };
    const metrics = new WorkerMetrics({
      records: async () => {
        if (!answering) throw new Error('the store thread did not answer');
        return { stats, backlog: { queued: 5, pending: 1 } };
      },
    });
    assert.equal(sample(await metrics.text(), 'edge_worker_record_batches_written_total'), 7);
    answering = false;
    const text = await metrics.text();
    assert.equal(sample(text, 'edge_worker_record_batches_written_total'), 7);
    assert.equal(sample(text, 'edge_worker_record_backlog_batches', { state: 'queued' }), 5);
  });

  it('count retention deletes by table and leave the record families out where no record worker runs', async () => {
    const metrics = new WorkerMetrics();
    metrics.retentionDeleted('traffic_logs', 12);
    metrics.retentionDeleted('traffic_logs', 0);
    const text = await metrics.text();
    assert.equal(sample(text, 'edge_worker_retention_deleted_rows_total', { table: 'traffic_logs' }), 12);
    assert.equal(sample(text, 'edge_worker_retention_deleted_rows_total', { table: 'health_probes' }), 0);
    assert.equal(sample(text, 'edge_worker_record_batches_written_total'), undefined);
  });
});
