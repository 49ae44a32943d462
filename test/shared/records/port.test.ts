// The record stream between two threads: each appended batch is posted once as the JSON the worker parses, the
// receiving end reads and acknowledges it with the in-process stream's semantics, the sender's in-flight bound
// follows what was acknowledged, batches beyond it are dropped and counted, and the end mark follows the last batch.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { MessageChannel } from 'node:worker_threads';
import { MemoryRecords } from '../../../src/shared/records/memory.ts';
import { PortRecordSink, receiveRecords } from '../../../src/shared/records/port.ts';
import { RECORD_LIMITS, type RateLimitHitsRecord, type RecordBatch, type RecordSource, type TrafficExchangeRecord } from '../../../src/shared/records/types.ts';
import { eventually } from '../../helpers/eventually.ts';

const RULE = '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5';

function hits(n: number): RateLimitHitsRecord {
  const at = new Date().toISOString();
  return { kind: 'rate_limit_hits', edge: 'edge-a', at, counts: { [RULE]: n }, last: { [RULE]: at } };
}

function pair(maxInFlight?: number) {
  const channel = new MessageChannel();
  const sink = new PortRecordSink(channel.port1, { maxInFlight });
  const source = receiveRecords(channel.port2, new MemoryRecords());
  return { sink, source, close: () => (channel.port1.close(), channel.port2.close()) };
}

/** Reads and acknowledges until `records` have arrived (posts land one event-loop turn apart). */
async function readAll(source: RecordSource, records: number): Promise<RecordBatch[]> {
  const out: RecordBatch[] = [];
  while (out.reduce((n, b) => n + b.records.length, 0) < records) {
    const batches = await source.read({ count: 10, blockMs: 2_000 });
    await source.ack(batches.map((b) => b.id));
    out.push(...batches);
  }
  return out;
}

function exchange(path: string): TrafficExchangeRecord {
  return {
    kind: 'traffic_exchange', edge: 'edge-a', at: new Date().toISOString(), region: 'eu', account: 1, endpoint: RULE,
    hostname: 'shop.edge.localhost', method: 'GET', host: 'shop.edge.localhost', path, query: '', status: 200,
    duration_ms: 1, bytes_in: 0, bytes_out: 10, client_ip: '192.0.2.7', country: null, user_agent: 'test', secure: false,
    rule: null, edge_error: null, auth_outcome: null, client_id: null, completed: true, level: 'metadata',
  };
}

describe('records over a MessagePort', () => {
  it('delivers each appended batch, parsed, to the reader, and reports stored records back once acknowledged', async () => {
    const { sink, source, close } = pair();
    sink.append([hits(1), hits(2)]);
    sink.append([hits(3)]);
    assert.deepEqual(sink.stats(), { buffered: 3, dropped: 0, sent: 3 });
    const all = await readAll(source, 3);
    assert.deepEqual(all.map((b) => b.records.map((r) => (r as RateLimitHitsRecord).counts[RULE])), [[1, 2], [3]]);
    await eventually(async () => (sink.stats().buffered === 0 ? true : undefined)); // the acknowledgement came back
    close();
  });

  it('hands an unacknowledged batch to the next read again (the worker failed to write it)', async () => {
    const { sink, source, close } = pair();
    sink.append([hits(5)]);
    const first = await source.read({ count: 10, blockMs: 2_000 });
    const again = await source.read({ count: 10, blockMs: 0 });
    assert.equal(again[0].id, first[0].id);
    assert.equal(sink.stats().buffered, 1, 'still in flight');
    close();
  });

  it('splits an append larger than a batch may be', async () => {
    const { sink, source, close } = pair();
    sink.append(Array.from({ length: RECORD_LIMITS.recordsPerBatch + 1 }, (_, i) => hits(i + 1)));
    const batches = await readAll(source, RECORD_LIMITS.recordsPerBatch + 1);
    assert.deepEqual(batches.map((b) => b.records.length), [RECORD_LIMITS.recordsPerBatch, 1]);
    close();
  });

  it('drops and counts captured exchanges past the in-flight bound while the store falls behind, and takes them again once it caught up', async () => {
    const { sink, source, close } = pair(3);
    sink.append([exchange('/1'), exchange('/2')]);
    sink.append([exchange('/3'), exchange('/4')]);
    assert.deepEqual(sink.stats(), { buffered: 2, dropped: 2, sent: 2 });
    const batches = await source.read({ count: 10, blockMs: 2_000 });
    assert.equal(batches.length, 1, 'the dropped batch never travelled');
    await source.ack(batches.map((b) => b.id));
    await eventually(async () => (sink.stats().buffered === 0 ? true : undefined));
    sink.append([exchange('/5'), exchange('/6')]);
    assert.deepEqual(sink.stats(), { buffered: 2, dropped: 2, sent: 4 });
    close();
  });

  it('always sends usage and rate-limit hits, whose counts must not be lost to a burst of captured traffic', async () => {
    const { sink, close } = pair(1);
    sink.append([exchange('/1'), exchange('/2')]);
    sink.append([hits(1), hits(2)]);
    assert.deepEqual(sink.stats(), { buffered: 2, dropped: 2, sent: 2 });
    close();
  });

  it('posts the end mark behind the last batch on close, and appends nothing after it', async () => {
    const { sink, source, close } = pair();
    sink.append([hits(1)]);
    await sink.close();
    sink.append([hits(2)]);
    await source.ended;
    const batches = await source.read({ count: 10, blockMs: 0 });
    assert.deepEqual(batches.flatMap((b) => b.records.map((r) => (r as RateLimitHitsRecord).counts[RULE])), [1], 'everything sent before the mark had arrived');
    assert.equal(sink.stats().sent, 1);
    close();
  });

  it('refuses a bound that is not a positive integer', () => {
    const channel = new MessageChannel();
    assert.throws(() => new PortRecordSink(channel.port1, { maxInFlight: 0 }), /maxInFlight must be a positive integer/);
    channel.port1.close();
  });
});
