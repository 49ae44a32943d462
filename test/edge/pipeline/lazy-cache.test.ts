// The lazy LRU the compiled stages keep per endpoint: nothing is allocated until the first write, and once written it
// has lru-cache's bounds (max, ttl, per-entry ttl); clear() gives the memory back. Also: compiled stages allocate none.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { compileEndpoint } from '../../../src/edge/compile.ts';
import { LazyLru } from '../../../src/edge/pipeline/lazy-cache.ts';
import { StageMemory } from '../../../src/edge/pipeline/stage-memory.ts';
import { DEFAULT_STAGE_DEPS } from '../../../src/edge/pipeline/stage.ts';
import { policyEndpoint } from '../../../bench/lib/policy-endpoint.ts';

describe('LazyLru', () => {
  it('allocates nothing until written: reads, deletes and clears of an empty cache find nothing', () => {
    const cache = new LazyLru<string, number>({ max: 10_000 });
    assert.equal(cache.get('a'), undefined);
    assert.equal(cache.has('a'), false);
    assert.equal(cache.delete('a'), false);
    cache.clear();
    assert.equal(cache.size, 0);
    assert.equal(cache.allocated, false);
    cache.set('a', 1);
    assert.equal(cache.allocated, true);
    assert.equal(cache.get('a'), 1);
    assert.equal(cache.has('a'), true);
  });

  it('keeps the same bound once used: the least recently used entry goes first', () => {
    const cache = new LazyLru<string, number>({ max: 3 });
    for (const k of ['a', 'b', 'c']) cache.set(k, 1);
    cache.get('a');
    cache.set('d', 1);
    assert.equal(cache.size, 3);
    assert.equal(cache.has('b'), false);
    assert.deepEqual(['a', 'c', 'd'].map((k) => cache.has(k)), [true, true, true]);
  });

  it('applies the ttl given at construction and one given per write', () => {
    let t = 1_000;
    const perf = { now: () => t };
    const cache = new LazyLru<string, true>({ max: 10, ttl: 100, perf, ttlResolution: 0 });
    cache.set('default', true);
    cache.set('short', true, { ttl: 10 });
    t += 50;
    assert.equal(cache.has('short'), false);
    assert.equal(cache.has('default'), true);
    t += 100;
    assert.equal(cache.has('default'), false);
  });

  it('clear() empties it and gives the allocation back; a later write starts a fresh cache', () => {
    const cache = new LazyLru<string, number>({ max: 5 });
    cache.set('a', 1);
    cache.clear();
    assert.equal(cache.allocated, false);
    assert.equal(cache.get('a'), undefined);
    cache.set('b', 2);
    assert.equal(cache.get('b'), 2);
    assert.equal(cache.size, 1);
  });
});

describe('compiled endpoint with every policy', () => {
  it('builds no cache at compile time: what StageMemory keeps holds only unallocated caches', () => {
    const memory = new StageMemory();
    const endpoint = policyEndpoint({ id: 1, hostname: 'e1.bench.localhost', originUrl: 'https://o.example.com', jwksUrl: 'https://idp.example.com/jwks.json', passwordHash: '$2b$10$CwTycUXWue0Thq9StjUM0uJ8.qGLRlhE3hL6pCnbS4cY1S7bW8dbe' });
    compileEndpoint(endpoint, { ...DEFAULT_STAGE_DEPS, memory });
    const lazies: LazyLru<string, {}>[] = [];
    const walk = (value: unknown, depth: number): void => {
      if (value instanceof LazyLru) lazies.push(value);
      else if (value !== null && typeof value === 'object' && depth < 3) for (const v of Object.values(value)) walk(v, depth + 1);
    };
    // Read through the private map: keep() would replace an entry whose version it is not told.
    const kept = (memory as unknown as { kept: Map<string, { value: unknown }> }).kept;
    for (const entry of kept.values()) walk(entry.value, 0);
    assert.ok(lazies.length >= 6, `the kept state holds the stages' caches (found ${lazies.length})`);
    assert.ok(lazies.every((c) => !c.allocated));
  });
});
