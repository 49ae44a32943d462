// A snapshot's entries parsed from their JSON texts (parse.ts): the same entries JSON.parse gives, the texts let go as
// they are parsed, the work cut into slices, and equal strings shared without changing any value.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseEntries, StringPool } from '../../../src/shared/feed/parse.ts';
import type { FeedEntry } from '../../../src/shared/feed/types.ts';
import { TimeSlicer } from '../../../src/shared/time-slice.ts';

function entry(i: number): FeedEntry {
  const uuid = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
  return {
    topic: 'endpoint',
    key: uuid,
    version: i + 1,
    data: {
      uuid,
      hostname: `e${i}.example.test`,
      origin_url: `https://o${i % 3}.example.com`,
      routing_rules: [{ target_origin_url: `https://o${i % 3}.example.com`, target_agent_tags: [], conditions: [{ pattern: '/**' }] }],
      mtls_ca_pem: i === 0 ? `-----BEGIN CERTIFICATE-----\n${'A'.repeat(400)}\n-----END CERTIFICATE-----` : null,
      nested: { list: [1, 'two', null, true, { three: 'three' }], empty: {} },
    },
  };
}

describe('parseEntries', () => {
  it('gives the entries JSON.parse gives, in order, and empties the texts it parsed', async () => {
    const expected = Array.from({ length: 300 }, (_, i) => entry(i));
    const texts = expected.map((e) => JSON.stringify(e));
    const entries = await parseEntries(texts);
    assert.deepEqual(entries, expected);
    assert.ok(texts.every((t) => t === ''), 'every text is let go once parsed');
    assert.equal(texts.length, expected.length);
  });

  it('yields to the event loop between slices', async () => {
    const texts = Array.from({ length: 2_000 }, (_, i) => JSON.stringify(entry(i)));
    const slicer = new TimeSlicer(0.001);
    let ticks = 0;
    const timer = setInterval(() => ticks++, 0);
    try {
      await parseEntries(texts, slicer);
    } finally {
      clearInterval(timer);
    }
    assert.ok(slicer.yields > 0);
    assert.ok(ticks > 0, 'timers ran while it parsed');
  });

  it('parses nothing to nothing, and a text that is not JSON fails the whole read', async () => {
    assert.deepEqual(await parseEntries([]), []);
    await assert.rejects(parseEntries([JSON.stringify(entry(1)), '{not json']), SyntaxError);
  });
});

describe('StringPool', () => {
  it('changes no value of an entry, endpoint or not, and gives back equal strings', () => {
    const pool = new StringPool();
    const endpoints = Array.from({ length: 40_000 }, (_, i) => entry(i));
    const expected = structuredClone(endpoints);
    for (const e of endpoints) assert.equal(pool.entry(e), e, 'shared in place');
    assert.deepEqual(endpoints, expected);
    const other: FeedEntry = { topic: 'account', key: '7', version: 1, data: { id: 7, origin_url: 5 } };
    assert.deepEqual(pool.entry(structuredClone(other)), other);
    assert.deepEqual(pool.entry({ topic: 'endpoint', key: 'k', version: 1, data: null }), { topic: 'endpoint', key: 'k', version: 1, data: null });
    assert.equal(pool.share('https://o1.example.com'), 'https://o1.example.com');
  });
});
