// The soak's arithmetic (bench/lib/soak-report.ts): minutes folded from samples, the RSS-growth verdict over the
// second half, the CSV and SVG it writes, and the arguments it refuses.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { foldMinutes, parseSoakArgs, percentile, rssGrowth, toCsv, toSvg, type Sample } from '../../bench/lib/soak-report.ts';

const sample = (at: number, outcome: Sample['outcome'], latencyMs: number): Sample => ({ at, outcome, latencyMs, detail: outcome === 'ok' ? '200' : '502' });

describe('soak report', () => {
  it('folds samples into one row per minute, with outcomes counted and p50/p99 of that minute', () => {
    const samples = [sample(1_000, 'ok', 1), sample(2_000, 'ok', 3), sample(3_000, 'expected', 2), sample(61_000, 'unexpected', 40), sample(62_000, 'reconnect_window', 10)];
    const rows = foldMinutes(samples, [{ edge: 100 }, { edge: 101 }]);
    assert.deepEqual(rows.map((r) => [r.minute, r.requests, r.ok, r.expected, r.unexpected, r.reconnectWindow]), [[1, 3, 2, 1, 0, 0], [2, 2, 0, 0, 1, 1]]);
    assert.equal(rows[0].p50Ms, 2);
    assert.equal(rows[1].p99Ms, 40);
  });

  it('takes percentiles by rank', () => {
    const values = Array.from({ length: 100 }, (_, i) => i + 1);
    assert.equal(percentile(values, 50), 50);
    assert.equal(percentile(values, 99), 99);
    assert.equal(percentile([], 99), 0);
  });

  it('measures RSS growth from the first minute of the second half to the last', () => {
    const rows = foldMinutes([], [{ a: 100, b: 100 }, { a: 120, b: 100 }, { a: 130, b: 100 }, { a: 150, b: 104 }]);
    assert.deepEqual(rssGrowth(rows), { a: 15.38, b: 4 });
    assert.deepEqual(rssGrowth(rows.slice(0, 1)), {});
  });

  it('writes a CSV row per minute and an SVG with both panels', () => {
    const rows = foldMinutes([sample(1_000, 'ok', 2)], [{ control: 90, 'edge-1': 120 }]);
    assert.equal(toCsv(rows), 'minute,requests,ok,expected,reconnect_window,unexpected,p50_ms,p99_ms,rss_control_mib,rss_edge-1_mib\n1,1,1,0,0,0,2,2,90,120\n');
    const svg = toSvg(rows, 'soak <test>');
    assert.match(svg, /^<svg /);
    assert.match(svg, /soak &lt;test&gt;/);
    assert.equal(svg.match(/<polyline/g)?.length, 4);
  });

  it('refuses arguments it cannot use, naming them', () => {
    assert.deepEqual(parseSoakArgs(['--minutes', '10']), { minutes: 10 });
    assert.deepEqual(parseSoakArgs(['--minutes', '0.5', '--rate', '200', '--out', '/tmp/x']), { minutes: 0.5, rate: 200, out: '/tmp/x' });
    assert.throws(() => parseSoakArgs(['--minutes', '0']), /--minutes must be a positive number/);
    assert.throws(() => parseSoakArgs(['--minutes', 'ten']), /--minutes/);
    assert.throws(() => parseSoakArgs(['--minutes']), /needs a value/);
    assert.throws(() => parseSoakArgs(['--rate', '-1']), /--rate/);
    assert.throws(() => parseSoakArgs(['--seconds', '5']), /unknown argument --seconds/);
  });
});
