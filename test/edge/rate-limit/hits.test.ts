// RuleHits, the edge's counter of rate-limit rule matches: one record per interval with each rule's count and last
// match, nothing sent for an idle interval, a bound on distinct rules, and the last interval sent on close.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RuleHits } from '../../../src/edge/rate-limit/hits.ts';
import { MemoryRecords } from '../../../src/shared/records/memory.ts';
import type { RateLimitHitsRecord, TrafficRecord } from '../../../src/shared/records/types.ts';

const A = '0b4f6a52-3c1d-4e8a-9f00-2b7c5d6e7f80';
const B = '1b4f6a52-3c1d-4e8a-9f00-2b7c5d6e7f80';

async function sent(records: MemoryRecords): Promise<TrafficRecord[]> {
  const batches = await records.read({ count: 100, blockMs: 0 });
  await records.ack(batches.map((b) => b.id));
  return batches.flatMap((b) => b.records);
}

describe('RuleHits', () => {
  it('sends each interval as one record: counts per rule and the latest match', async () => {
    const records = new MemoryRecords();
    let now = Date.parse('2030-01-01T00:00:00Z');
    const hits = new RuleHits({ sink: records, edge: 'edge-1', intervalMs: 0, now: () => now });
    hits.hit(A);
    now += 10;
    hits.hit(B);
    hits.hit(A, now - 5); // a caller's own clock reading, older than the last: last stays
    now += 10;
    hits.hit(A);
    now += 1000;
    hits.flush();
    assert.deepEqual(await sent(records), [
      {
        kind: 'rate_limit_hits',
        edge: 'edge-1',
        at: '2030-01-01T00:00:01.020Z',
        counts: { [A]: 3, [B]: 1 },
        last: { [A]: '2030-01-01T00:00:00.020Z', [B]: '2030-01-01T00:00:00.010Z' },
      },
    ]);
    hits.flush();
    assert.deepEqual(await sent(records), [], 'an idle interval sends nothing');
    hits.hit(B);
    hits.close();
    assert.deepEqual((await sent(records)).map((r) => (r as RateLimitHitsRecord).counts), [{ [B]: 1 }], 'close sends the last interval');
  });

  it('counts at most maxRules distinct rules per interval and says how many hits it dropped', async () => {
    const records = new MemoryRecords();
    const hits = new RuleHits({ sink: records, edge: 'edge-1', intervalMs: 0, maxRules: 1 });
    hits.hit(A);
    hits.hit(B);
    hits.hit(A);
    hits.close();
    assert.deepEqual((await sent(records)).map((r) => (r as RateLimitHitsRecord).counts), [{ [A]: 2 }]);
    assert.equal(hits.dropped, 1);
  });

  it('refuses options out of bounds', () => {
    const sink = new MemoryRecords();
    assert.throws(() => new RuleHits({ sink, edge: 'e', maxRules: 0 }), RangeError);
    assert.throws(() => new RuleHits({ sink, edge: 'e', maxRules: 1e9 }), RangeError);
    assert.throws(() => new RuleHits({ sink, edge: 'e', intervalMs: 1.5 }), RangeError);
  });
});
