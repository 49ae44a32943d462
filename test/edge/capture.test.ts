// The edge's traffic recorder: counters for every exchange, captured details only where capture is on, newest
// first, bounded per endpoint and across endpoints.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TrafficRecorder, type CapturedExchange } from '../../src/edge/capture.ts';
import { capturedExchange } from '../helpers/captured-exchange.ts';

let n = 0;
function exchange(over: Partial<CapturedExchange> = {}): CapturedExchange {
  return capturedExchange({ path: `/${++n}`, ...over });
}

describe('TrafficRecorder', () => {
  it('counts every exchange by class and edge error, and keeps details only when told to', () => {
    const r = new TrafficRecorder();
    r.record(exchange({ status: 200 }), true);
    r.record(exchange({ status: 404 }), false);
    r.record(exchange({ status: 502, edge_error: 'no_agent' }), true);
    r.record(exchange({ status: 0, completed: false }), false);
    assert.deepEqual(r.counters('e1'), { requests: 4, by_class: { '2xx': 1, '4xx': 1, '5xx': 1, aborted: 1 }, edge_errors: { no_agent: 1 } });
    assert.deepEqual(r.recent('e1').map((e) => e.status), [502, 200]);
    assert.deepEqual(r.counters('unknown'), { requests: 0, by_class: {}, edge_errors: {} });
    assert.deepEqual(r.recent('unknown'), []);
  });

  it('keeps the newest exchanges per endpoint, newest first', () => {
    const r = new TrafficRecorder({ perEndpoint: 3 });
    const paths: string[] = [];
    for (let i = 0; i < 7; i++) {
      const e = exchange();
      paths.push(e.path);
      r.record(e, true);
    }
    assert.deepEqual(r.recent('e1').map((e) => e.path), paths.slice(-3).reverse());
    assert.deepEqual(r.recent('e1', 2).map((e) => e.path), paths.slice(-2).reverse());
    assert.equal(r.counters('e1').requests, 7);
  });

  it('forgets the least recently active endpoint past its bound', () => {
    const r = new TrafficRecorder({ maxEndpoints: 2 });
    r.record(exchange({ endpoint: 'a' }), true);
    r.record(exchange({ endpoint: 'b' }), true);
    r.record(exchange({ endpoint: 'a' }), true);
    r.record(exchange({ endpoint: 'c' }), true);
    assert.equal(r.counters('b').requests, 0);
    assert.equal(r.counters('a').requests, 2);
    assert.equal(r.counters('c').requests, 1);
  });

  it('keeps the order of activity when one endpoint records many exchanges in a row', () => {
    const r = new TrafficRecorder({ maxEndpoints: 2 });
    r.record(exchange({ endpoint: 'a' }), false);
    r.record(exchange({ endpoint: 'b' }), false);
    r.record(exchange({ endpoint: 'b' }), false);
    r.record(exchange({ endpoint: 'a' }), false);
    r.record(exchange({ endpoint: 'a' }), false);
    assert.deepEqual([...r.recentlyActive(2)].map(([endpoint]) => endpoint), ['a', 'b']);
    r.record(exchange({ endpoint: 'c' }), false);
    assert.equal(r.counters('b').requests, 0, 'b, the least recently active, is forgotten');
    assert.equal(r.counters('a').requests, 3);
    assert.deepEqual([...r.recentlyActive(2)].map(([endpoint]) => endpoint), ['c', 'a']);
  });

  it('names every status class by its first digit', () => {
    const r = new TrafficRecorder();
    for (const status of [101, 204, 302, 429, 503, 999]) r.record(exchange({ status }), false);
    assert.deepEqual(r.counters('e1').by_class, { '1xx': 1, '2xx': 1, '3xx': 1, '4xx': 1, '5xx': 1, '9xx': 1 });
  });

  it('hands out copies, so readers cannot change the figures', () => {
    const r = new TrafficRecorder();
    r.record(exchange(), true);
    r.counters('e1').by_class['2xx'] = 99;
    assert.equal(r.counters('e1').by_class['2xx'], 1);
  });
});
